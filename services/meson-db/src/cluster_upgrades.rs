//! What cluster upgrades and credential rotations need beyond
//! [`crate::clusters`]: starting one on a running cluster only, finding
//! the clusters whose update policy calls for one, and the replacement
//! nodes a rolling replacement left half made.

use crate::{DbResult, Tx, corrupt};
use meson_core::cluster::ClusterStatus;
use meson_core::kaas::UpdatePolicy;
use meson_core::{ClusterId, Error, NodeId, TenantId};
use sqlx::PgPool;

/// Marks a `running` cluster `updating` (clearing its error message) in the
/// caller's transaction, if it still is what the caller saw: with
/// `version`, only if it runs that Kubernetes version; with `policy`, only
/// if that is its update policy. False when the cluster is not running (or
/// no longer matches): the caller starts nothing.
pub async fn begin_update(
    tx: &mut Tx<'_>,
    cluster: ClusterId,
    version: Option<&str>,
    policy: Option<UpdatePolicy>,
) -> Result<bool, Error> {
    let r = sqlx::query!(
        r#"update clusters set status = 'updating', error_message = null
           where id = $1 and status = 'running' and deleted_at is null
             and ($2::text is null or kubernetes_version = $2)
             and ($3::text is null or update_policy = $3)"#,
        cluster.0,
        version,
        policy.map(UpdatePolicy::as_str),
    )
    .execute(&mut **tx)
    .await
    .ctx("starting a cluster update")?;
    Ok(r.rows_affected() == 1)
}

/// A cluster the update policy may upgrade.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoUpgradeCandidate {
    pub id: ClusterId,
    pub tenant: TenantId,
    pub status: ClusterStatus,
    pub kubernetes_version: String,
    pub update_policy: UpdatePolicy,
}

/// Live clusters whose update policy is not `NEVER_UPDATE`, running ones
/// only, oldest first.
pub async fn auto_upgrade_candidates(pool: &PgPool) -> Result<Vec<AutoUpgradeCandidate>, Error> {
    let rows = sqlx::query!(
        r#"select id, tenant_id, status, kubernetes_version, update_policy
           from clusters
           where deleted_at is null and status = 'running' and update_policy <> 'NEVER_UPDATE'
           order by created_at, id"#
    )
    .fetch_all(pool)
    .await
    .ctx("listing clusters to auto-upgrade")?;
    rows.into_iter()
        .map(|r| {
            Ok(AutoUpgradeCandidate {
                id: ClusterId(r.id),
                tenant: TenantId(r.tenant_id),
                status: ClusterStatus::parse(&r.status)
                    .ok_or_else(|| corrupt("cluster status", &r.status))?,
                kubernetes_version: r.kubernetes_version,
                update_policy: UpdatePolicy::parse(&r.update_policy)
                    .ok_or_else(|| corrupt("update policy", &r.update_policy))?,
            })
        })
        .collect()
}

/// A live node made to replace another that has not phoned home yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HalfMade {
    pub node: NodeId,
    pub replaces: NodeId,
    /// Whether the node it replaces is still live (a surge replacement
    /// cut short) or already gone (removed first).
    pub old_live: bool,
}

/// The cluster's replacement nodes that never came up, oldest first.
pub async fn half_made_replacements(
    pool: &PgPool,
    cluster: ClusterId,
) -> Result<Vec<HalfMade>, Error> {
    let rows = sqlx::query!(
        r#"select n.id, n.replaces as "replaces!", (o.deleted_at is null) as "old_live!"
           from nodes n join nodes o on o.id = n.replaces
           where n.cluster_id = $1 and n.deleted_at is null and n.phoned_home_at is null
           order by n.created_at, n.id"#,
        cluster.0
    )
    .fetch_all(pool)
    .await
    .ctx("listing half-made replacement nodes")?;
    Ok(rows
        .into_iter()
        .map(|r| HalfMade {
            node: NodeId(r.id),
            replaces: NodeId(r.replaces),
            old_live: r.old_live,
        })
        .collect())
}

/// Sets the Kubernetes version a cluster runs and makes it `running` again,
/// in the caller's transaction.
pub async fn finish_update(
    tx: &mut Tx<'_>,
    cluster: ClusterId,
    version: &str,
) -> Result<(), Error> {
    sqlx::query!(
        r#"update clusters set kubernetes_version = $2, status = 'running', error_message = null
           where id = $1 and deleted_at is null"#,
        cluster.0,
        version,
    )
    .execute(&mut **tx)
    .await
    .ctx("finishing a cluster update")?;
    Ok(())
}
