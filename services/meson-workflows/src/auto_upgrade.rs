//! Automatic upgrades by update policy, on every reconciler pass:
//!
//! - `NEVER_UPDATE` (`MANUAL`): never;
//! - `PATCH_UPDATE`: to the latest patch of the cluster's minor in the
//!   catalogue, once there is a later one;
//! - `ALWAYS_UPDATE`: the same, then, on the latest patch, to the latest
//!   patch of the next minor: one minor at a time, as kubeadm requires (a
//!   cluster several minors behind climbs one per upgrade).
//!
//! Only `running` clusters are upgraded (one in `error` waits for a
//! person). The upgrade is the same `upgrade_cluster` action as the API's,
//! default rollout (surge one), owned by the cluster's tenant and started
//! by nobody in it (a *system* action). Several workers running the
//! reconciler at once are harmless: the cluster's status is moved from
//! `running` at the version and policy seen, and the job takes the
//! cluster's concurrency key, in one transaction; whoever comes second
//! finds the cluster `updating` or the key taken (`Locked`: "already
//! running") and starts nothing.

use crate::Env;
use crate::cluster_upgrade::{self, UpgradeParams};
use meson_core::action::{Action, ActionStatus, Command, ResourceType};
use meson_core::kaas::UpdatePolicy;
use meson_core::kubernetes::{self, KubeVersion, Release};
use meson_core::{ActionId, ClusterId, TenantId};
use meson_db::cluster_upgrades::AutoUpgradeCandidate;
use meson_jobs::Enqueued;

/// Where `policy` takes a cluster running `from` next, if anywhere.
pub fn target(policy: UpdatePolicy, from: &KubeVersion) -> Option<&'static Release> {
    let allowed = kubernetes::upgradable_to(from);
    let latest_of = |minor: u32| {
        allowed
            .iter()
            .rev()
            .find(|r| r.version.major == from.major && r.version.minor == minor)
            .copied()
    };
    match policy {
        UpdatePolicy::NeverUpdate => None,
        UpdatePolicy::PatchUpdate => latest_of(from.minor),
        UpdatePolicy::AlwaysUpdate => latest_of(from.minor).or_else(|| latest_of(from.minor + 1)),
    }
}

/// What a pass did to one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Started {
    /// An upgrade was enqueued, under this action.
    Upgrade { action: ActionId, to: String },
    /// Nothing to do, or someone else is doing something.
    Nothing,
}

/// One pass: starts the upgrades the update policies call for. Returns
/// what it started, cluster by cluster (for tests and logs).
pub async fn tick(env: &Env) -> meson_core::Result<Vec<(ClusterId, Started)>> {
    let mut out = Vec::new();
    for c in meson_db::cluster_upgrades::auto_upgrade_candidates(&env.pool).await? {
        // One cluster's trouble does not hold the others up.
        let started = match consider(env, &c).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(cluster = %c.id, error = %e, "automatic upgrade not started");
                Started::Nothing
            }
        };
        if let Started::Upgrade { action, to } = &started {
            tracing::info!(cluster = %c.id, from = %c.kubernetes_version, %to, %action,
                policy = c.update_policy.as_str(), "automatic upgrade started");
        }
        out.push((c.id, started));
    }
    Ok(out)
}

/// The system action of an automatic upgrade: the cluster's tenant's.
fn system_action(tenant: &TenantId, cluster: ClusterId) -> Action {
    Action {
        id: ActionId::new(),
        tenant: tenant.clone(),
        command: Command::UpgradeCluster.as_str().to_owned(),
        status: ActionStatus::Running,
        progress: 0,
        started: chrono::Utc::now(),
        finished: None,
        resources: vec![(ResourceType::Cluster, cluster.0)],
        error: None,
    }
}

async fn consider(env: &Env, c: &AutoUpgradeCandidate) -> meson_core::Result<Started> {
    let Ok(from) = c.kubernetes_version.parse::<KubeVersion>() else {
        tracing::warn!(cluster = %c.id, version = %c.kubernetes_version, "unparsable cluster version");
        return Ok(Started::Nothing);
    };
    let Some(release) = target(c.update_policy, &from) else {
        return Ok(Started::Nothing);
    };
    let to = release.version.to_string();
    let action = system_action(&c.tenant, c.id);
    let mut tx = meson_db::begin(&env.pool).await?;
    // Still running, at the version and under the policy seen?
    if !meson_db::cluster_upgrades::begin_update(
        &mut tx,
        c.id,
        Some(&c.kubernetes_version),
        Some(c.update_policy),
    )
    .await?
    {
        return Ok(Started::Nothing);
    }
    meson_db::actions::insert(&mut tx, &action).await?;
    let params = UpgradeParams::new(c.id, to.clone());
    match cluster_upgrade::enqueue(&mut tx, &params, action.id, &c.tenant).await? {
        // Dropping the transaction undoes the status and the action.
        Enqueued::Locked(_) => Ok(Started::Nothing),
        Enqueued::Job(_) => {
            meson_db::commit(tx).await?;
            Ok(Started::Upgrade {
                action: action.id,
                to,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> KubeVersion {
        s.parse().unwrap()
    }

    fn to(policy: UpdatePolicy, from: &str) -> Option<String> {
        target(policy, &v(from)).map(|r| r.version.to_string())
    }

    #[test]
    fn policies_pick_the_latest_patch_then_the_next_minor() {
        use UpdatePolicy::*;
        assert_eq!(to(NeverUpdate, "1.29.2"), None);
        assert_eq!(to(PatchUpdate, "1.29.2").as_deref(), Some("1.29.15"));
        assert_eq!(to(PatchUpdate, "1.29.8").as_deref(), Some("1.29.15"));
        assert_eq!(to(PatchUpdate, "1.29.15"), None, "latest patch: stays");
        assert_eq!(to(AlwaysUpdate, "1.29.2").as_deref(), Some("1.29.15"));
        assert_eq!(
            to(AlwaysUpdate, "1.29.15").as_deref(),
            Some("1.30.14"),
            "one minor at a time, its latest patch"
        );
        assert_eq!(to(AlwaysUpdate, "1.31.14").as_deref(), Some("1.32.13"));
        assert_eq!(to(PatchUpdate, "1.35.1").as_deref(), Some("1.35.9"));
        assert_eq!(to(AlwaysUpdate, "1.35.9").as_deref(), Some("1.36.4"));
        let newest = kubernetes::releases().last().unwrap();
        assert_eq!(
            to(AlwaysUpdate, &newest.version.to_string()),
            None,
            "the newest there is"
        );
        assert_eq!(to(PatchUpdate, &newest.version.to_string()), None);
        // Every target is an allowed upgrade in the catalogue.
        for r in kubernetes::releases() {
            for p in [PatchUpdate, AlwaysUpdate] {
                if let Some(t) = target(p, &r.version) {
                    assert!(kubernetes::check_upgrade(&r.version, &t.version).is_ok());
                }
            }
        }
    }
}
