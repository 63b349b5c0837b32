//! Kubernetes nodes' health as auto-repair sees it (when a node's VM first
//! ran, the messages it leaves on nodes and clusters, its past attempts),
//! and the lock that serializes node placement within one cluster.

use crate::{DbResult, Tx};
use chrono::{DateTime, Utc};
use meson_core::{ClusterId, Error, NodeId, PoolId, TargetId};
use sqlx::PgPool;

/// Running and degraded clusters (every tenant's), oldest first: what
/// auto-repair watches.
pub async fn running_clusters(pool: &PgPool) -> Result<Vec<ClusterId>, Error> {
    let ids = sqlx::query_scalar!(
        "select id from clusters where status in ('running', 'degraded') and deleted_at is null
         order by created_at, id"
    )
    .fetch_all(pool)
    .await
    .ctx("listing running clusters")?;
    Ok(ids.into_iter().map(ClusterId).collect())
}

/// Whether a live job holds the concurrency `key` (an action runs on the
/// resource it names).
pub async fn key_held(pool: &PgPool, key: &str) -> Result<bool, Error> {
    sqlx::query_scalar!(
        r#"select exists (select 1 from jobs where concurrency_key = $1
                          and state in ('available', 'running')) as "held!""#,
        key
    )
    .fetch_one(pool)
    .await
    .ctx("checking a concurrency key")
}

/// When the VM of each live node of a cluster first ran (`None`: not yet).
pub async fn running_since(
    pool: &PgPool,
    cluster: ClusterId,
) -> Result<Vec<(NodeId, Option<DateTime<Utc>>)>, Error> {
    let rows = sqlx::query!(
        "select id, running_since from nodes where cluster_id = $1 and deleted_at is null",
        cluster.0
    )
    .fetch_all(pool)
    .await
    .ctx("reading when nodes started")?;
    Ok(rows
        .into_iter()
        .map(|r| (NodeId(r.id), r.running_since))
        .collect())
}

/// Says what is wrong with a live node: a `ready` node becomes `not_ready`
/// with `message` (other statuses keep theirs). Unchanged rows are not
/// written.
pub async fn mark_unhealthy(pool: &PgPool, node: NodeId, message: &str) -> Result<(), Error> {
    sqlx::query!(
        r#"update nodes set error_message = $2,
                            status = case when status = 'ready' then 'not_ready' else status end
           where id = $1 and deleted_at is null
             and (error_message is distinct from $2 or status = 'ready')"#,
        node.0,
        message,
    )
    .execute(pool)
    .await
    .ctx("marking a node unhealthy")?;
    Ok(())
}

/// Takes back what [`mark_unhealthy`] said (a message starting with
/// `prefix`) about a node found healthy again: a node that phoned home is
/// `ready` again.
pub async fn clear_unhealthy(pool: &PgPool, node: NodeId, prefix: &str) -> Result<(), Error> {
    sqlx::query!(
        r#"update nodes set error_message = null,
                            status = case when status = 'not_ready' and phoned_home_at is not null
                                          then 'ready' else status end
           where id = $1 and deleted_at is null and starts_with(error_message, $2)"#,
        node.0,
        prefix,
    )
    .execute(pool)
    .await
    .ctx("clearing a node's health message")?;
    Ok(())
}

/// Sets a running cluster's `error_message` to `message` unless it holds
/// another component's message (one not starting with `prefix`); `None`
/// clears it if it is ours.
pub async fn set_cluster_message(
    pool: &PgPool,
    cluster: ClusterId,
    prefix: &str,
    message: Option<&str>,
) -> Result<(), Error> {
    match message {
        Some(m) => sqlx::query!(
            r#"update clusters set error_message = $2
               where id = $1 and status = 'running' and deleted_at is null
                 and (error_message is null or starts_with(error_message, $3))
                 and error_message is distinct from $2"#,
            cluster.0,
            m,
            prefix,
        )
        .execute(pool)
        .await
        .ctx("setting a cluster's repair message")?,
        None => sqlx::query!(
            "update clusters set error_message = null
             where id = $1 and starts_with(error_message, $2)",
            cluster.0,
            prefix,
        )
        .execute(pool)
        .await
        .ctx("clearing a cluster's repair message")?,
    };
    Ok(())
}

/// Marks a running cluster `degraded` with `message` (`Some`: every node
/// is unhealthy), or a degraded one `running` again, its message cleared
/// (`None`). Returns whether the status changed.
pub async fn set_degraded(
    pool: &PgPool,
    cluster: ClusterId,
    message: Option<&str>,
) -> Result<bool, Error> {
    let done = match message {
        Some(m) => sqlx::query!(
            r#"update clusters set status = 'degraded', error_message = $2
               where id = $1 and status in ('running', 'degraded') and deleted_at is null
                 and (status = 'running' or error_message is distinct from $2)"#,
            cluster.0,
            m,
        )
        .execute(pool)
        .await
        .ctx("marking a cluster degraded")?,
        None => sqlx::query!(
            "update clusters set status = 'running', error_message = null
             where id = $1 and status = 'degraded' and deleted_at is null",
            cluster.0,
        )
        .execute(pool)
        .await
        .ctx("marking a cluster running again")?,
    };
    Ok(done.rows_affected() == 1)
}

/// When the last action `command` on `node` failed, if one did.
pub async fn last_failure(
    pool: &PgPool,
    node: NodeId,
    command: &str,
) -> Result<Option<DateTime<Utc>>, Error> {
    sqlx::query_scalar!(
        r#"select max(a.finished) as "finished?" from actions a
           join action_resources r on r.action_id = a.id
           where r.resource_type = 'node' and r.resource_id = $1
             and a.command = $2 and a.status = 'error'"#,
        node.0,
        command,
    )
    .fetch_one(pool)
    .await
    .ctx("finding a node's failed actions")
}

/// Whether a node was deleted; `None` when there is no such node at all.
pub async fn node_deleted(pool: &PgPool, node: NodeId) -> Result<Option<bool>, Error> {
    sqlx::query_scalar!(
        r#"select deleted_at is not null as "deleted!" from nodes where id = $1"#,
        node.0
    )
    .fetch_optional(pool)
    .await
    .ctx("checking a node")
}

/// Serializes the placement of one cluster's nodes until `tx` ends, so
/// nodes placed concurrently each see where the others went.
pub async fn lock_placement(tx: &mut Tx<'_>, cluster: ClusterId) -> Result<(), Error> {
    sqlx::query_scalar!(
        r#"select true as "locked!" from pg_advisory_xact_lock(hashtextextended($1, 0))"#,
        format!("meson:placement:{cluster}"),
    )
    .fetch_one(&mut **tx)
    .await
    .ctx("locking a cluster's placement")?;
    Ok(())
}

/// The hosts of the placed VMs of a node group's other live nodes (the
/// control plane when `pool` is `None`), one entry per node.
pub async fn group_hosts(
    tx: &mut Tx<'_>,
    cluster: ClusterId,
    pool: Option<PoolId>,
    except: NodeId,
) -> Result<Vec<TargetId>, Error> {
    let ids = sqlx::query_scalar!(
        r#"select v.target_id as "target_id!" from nodes n join vms v on v.id = n.vm_id
           where n.cluster_id = $1 and n.deleted_at is null and n.id <> $3
             and n.pool_id is not distinct from $2 and v.target_id is not null"#,
        cluster.0,
        pool.map(|p| p.0),
        except.0,
    )
    .fetch_all(&mut **tx)
    .await
    .ctx("finding a node group's hosts")?;
    Ok(ids.into_iter().map(TargetId).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestDatabase;
    use uuid::Uuid;

    /// A cluster with two control-plane nodes, `creating`; returns
    /// (cluster, [node ids]).
    async fn fixture(pool: &PgPool) -> (ClusterId, [NodeId; 2]) {
        let cluster = Uuid::new_v4();
        sqlx::query!(
            "insert into clusters (id, tenant_id, name, status, spec, kubernetes_version,
                                   update_policy)
             values ($1, 't', 'c', 'running', '{}', '1.29.2', 'NEVER_UPDATE')",
            cluster
        )
        .execute(pool)
        .await
        .unwrap();
        let mut nodes = [NodeId(Uuid::nil()); 2];
        for (i, slot) in nodes.iter_mut().enumerate() {
            let (vm, node) = (Uuid::new_v4(), Uuid::new_v4());
            sqlx::query!(
                "insert into vms (id, tenant_id, name, status, spec, atomos_name, cluster_id)
                 values ($1, 't', $2, 'running', '{}', $2, $3)",
                vm,
                format!("vm-{i}"),
                cluster
            )
            .execute(pool)
            .await
            .unwrap();
            sqlx::query!(
                "insert into nodes (id, cluster_id, role, vm_id, name, status, kubernetes_version)
                 values ($1, $2, 'control_plane', $3, $4, 'creating', '1.29.2')",
                node,
                cluster,
                vm,
                format!("n-{i}")
            )
            .execute(pool)
            .await
            .unwrap();
            *slot = NodeId(node);
        }
        (ClusterId(cluster), nodes)
    }

    async fn node_row(pool: &PgPool, id: NodeId) -> (String, Option<String>) {
        let r = sqlx::query!(
            "select status, error_message from nodes where id = $1",
            id.0
        )
        .fetch_one(pool)
        .await
        .unwrap();
        (r.status, r.error_message)
    }

    #[tokio::test]
    async fn running_since_is_recorded_when_a_node_boots_and_messages_are_ours_only() {
        let db = TestDatabase::new().await;
        let pool = &db.pool;
        let (cluster, [a, b]) = fixture(pool).await;
        assert_eq!(running_clusters(pool).await.unwrap(), [cluster]);

        // The moment a node leaves `creating` is kept, whichever way it leaves.
        crate::clusters::node_booted(pool, a).await.unwrap();
        let since: std::collections::HashMap<_, _> = running_since(pool, cluster)
            .await
            .unwrap()
            .into_iter()
            .collect();
        let booted = since[&a].expect("recorded on boot");
        assert!((Utc::now() - booted).num_seconds() < 60);
        assert_eq!(since[&b], None, "still creating");
        crate::clusters::set_node_status(pool, a, meson_core::cluster::NodeStatus::Ready, None)
            .await
            .unwrap();
        let again: std::collections::HashMap<_, _> = running_since(pool, cluster)
            .await
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(again[&a], Some(booted), "not moved by later changes");

        // Unhealthy: not_ready with the message; cleared only if ours.
        sqlx::query!("update nodes set phoned_home_at = now() where id = $1", a.0)
            .execute(pool)
            .await
            .unwrap();
        mark_unhealthy(pool, a, "unhealthy: crashed").await.unwrap();
        assert_eq!(
            node_row(pool, a).await,
            ("not_ready".into(), Some("unhealthy: crashed".into()))
        );
        clear_unhealthy(pool, a, "unhealthy: ").await.unwrap();
        assert_eq!(node_row(pool, a).await, ("ready".into(), None));
        crate::clusters::set_node_status(
            pool,
            b,
            meson_core::cluster::NodeStatus::NotReady,
            Some("someone else's"),
        )
        .await
        .unwrap();
        clear_unhealthy(pool, b, "unhealthy: ").await.unwrap();
        assert_eq!(node_row(pool, b).await.1.as_deref(), Some("someone else's"));

        // The cluster's message: set and cleared when ours, never over another's.
        let message = || async {
            sqlx::query_scalar!(
                "select error_message from clusters where id = $1",
                cluster.0
            )
            .fetch_one(pool)
            .await
            .unwrap()
        };
        set_cluster_message(pool, cluster, "paused: ", Some("paused: 2 of 3"))
            .await
            .unwrap();
        assert_eq!(message().await.as_deref(), Some("paused: 2 of 3"));
        set_cluster_message(pool, cluster, "paused: ", None)
            .await
            .unwrap();
        assert_eq!(message().await, None);
        sqlx::query!(
            "update clusters set error_message = 'upgrade failed' where id = $1",
            cluster.0
        )
        .execute(pool)
        .await
        .unwrap();
        set_cluster_message(pool, cluster, "paused: ", Some("paused: 1 of 1"))
            .await
            .unwrap();
        set_cluster_message(pool, cluster, "paused: ", None)
            .await
            .unwrap();
        assert_eq!(message().await.as_deref(), Some("upgrade failed"));

        // Nothing holds the cluster's key; no failed repairs yet.
        assert!(!key_held(pool, &format!("cluster:{cluster}")).await.unwrap());
        assert_eq!(last_failure(pool, a, "repair_node").await.unwrap(), None);
        assert_eq!(node_deleted(pool, a).await.unwrap(), Some(false));
        assert_eq!(node_deleted(pool, NodeId::new()).await.unwrap(), None);

        // Placement: the lock is taken and a group's hosts are listed.
        let mut tx = crate::begin(pool).await.unwrap();
        lock_placement(&mut tx, cluster).await.unwrap();
        assert!(
            group_hosts(&mut tx, cluster, None, a)
                .await
                .unwrap()
                .is_empty()
        );
        crate::commit(tx).await.unwrap();
    }
}
