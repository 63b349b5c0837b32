//! Upgrade a cluster's Kubernetes: plan → control plane → workers →
//! finish. A rolling replacement ([`crate::rolling`]): every node of an
//! older version is replaced by a node of the new one, the control plane
//! first, one node at a time, then each pool in turn, `max_surge` /
//! `max_unavailable` at a time. A new control-plane node brings the
//! cluster's kubeadm configuration to its version before it joins (see
//! `meson_kaas::bootstrap`), which is what moves the control plane.
//!
//! The cluster is `updating` from the request on (the API or the
//! reconciler marks it so when it enqueues) and `running` at the new
//! version at the end. Forward-only, like Cluster API: on failure the
//! cluster is `error` with the reason, the nodes already replaced stay
//! replaced (they run the new version and say so), a replacement cut
//! short is taken back; an upgrade to the same version later (once the
//! cluster is `running` again) replaces only the nodes still on an older one.

use crate::Env;
use crate::rolling;
use meson_core::action::ActionFailure;
use meson_core::cluster::NodeRole;
use meson_core::kaas::{DEFAULT_MAX_SURGE, DEFAULT_MAX_UNAVAILABLE};
use meson_core::{ActionId, ClusterId, NodeId, PoolId, TenantId};
use meson_jobs::{EnqueueOpts, Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeParams {
    pub cluster_id: ClusterId,
    /// The version every node ends at (`1.30.14`), checked against the
    /// catalogue and the upgrade rule when the upgrade was accepted.
    pub kubernetes_version: String,
    /// Worker nodes replaced at once beyond the pool's size.
    pub max_surge: u32,
    /// Worker nodes a pool may be short of while they are replaced.
    pub max_unavailable: u32,
}

impl UpgradeParams {
    /// Surge one, unavailable zero: the default rollout.
    pub fn new(cluster: ClusterId, version: impl Into<String>) -> Self {
        UpgradeParams {
            cluster_id: cluster,
            kubernetes_version: version.into(),
            max_surge: DEFAULT_MAX_SURGE,
            max_unavailable: DEFAULT_MAX_UNAVAILABLE,
        }
    }
}

pub struct ClusterUpgrade(pub Arc<Env>);

meson_jobs::steps! {
    pub enum UpgradeStep {
        Plan = "plan",
        ControlPlane = "control_plane",
        Workers = "workers",
        Finish = "finish",
    }
}

/// Enqueues an upgrade in the caller's transaction, under the cluster's
/// concurrency key (`Locked` while another action runs on the cluster).
pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    params: &UpgradeParams,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    meson_jobs::enqueue::<ClusterUpgrade>(
        tx,
        params,
        EnqueueOpts {
            action: Some(action),
            tenant: Some(tenant.to_string()),
            concurrency_key: Some(crate::keys::cluster(params.cluster_id)),
            max_attempts: 10,
            ..EnqueueOpts::default()
        },
    )
    .await
}

/// The nodes to replace, by group, fixed when the upgrade starts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub control_plane: Vec<NodeId>,
    pub pools: Vec<(PoolId, Vec<NodeId>)>,
}

impl Workflow for ClusterUpgrade {
    const KIND: &'static str = "cluster_upgrade";
    type Params = UpgradeParams;
    type Step = UpgradeStep;

    async fn run(
        &self,
        cx: &StepCtx<'_, UpgradeParams, UpgradeStep>,
        step: UpgradeStep,
    ) -> StepResult {
        let env = &self.0;
        let p = cx.params;
        let cluster = meson_db::clusters::get_any(&env.pool, p.cluster_id).await?;
        let version = p.kubernetes_version.as_str();
        match step {
            UpgradeStep::Plan => {
                // Nodes on another version; those already on it (a retried
                // upgrade) stay.
                let all = meson_db::clusters::nodes(&env.pool, cluster.id).await?;
                let stale = |n: &&meson_core::cluster::Node| n.kubernetes_version != version;
                let mut plan = Plan {
                    control_plane: all
                        .iter()
                        .filter(|n| n.role == NodeRole::ControlPlane)
                        .filter(stale)
                        .map(|n| n.id)
                        .collect(),
                    pools: Vec::new(),
                };
                for pool in meson_db::clusters::pools(&env.pool, cluster.id).await? {
                    let ids: Vec<NodeId> = all
                        .iter()
                        .filter(|n| n.pool == Some(pool.id))
                        .filter(stale)
                        .map(|n| n.id)
                        .collect();
                    if !ids.is_empty() {
                        plan.pools.push((pool.id, ids));
                    }
                }
                tracing::info!(cluster = %cluster.id, version, control_plane = plan.control_plane.len(),
                    pools = plan.pools.len(), "upgrade planned");
                to_output(plan)
            }
            UpgradeStep::ControlPlane => {
                let plan: Plan = cx.output(UpgradeStep::Plan)?;
                rolling::roll_group(env, cx, &cluster, &plan.control_plane, version, 1, 0).await?;
                to_output(())
            }
            UpgradeStep::Workers => {
                let plan: Plan = cx.output(UpgradeStep::Plan)?;
                // One pool after the other.
                for (_, ids) in &plan.pools {
                    rolling::roll_group(
                        env,
                        cx,
                        &cluster,
                        ids,
                        version,
                        p.max_surge,
                        p.max_unavailable,
                    )
                    .await?;
                }
                to_output(())
            }
            UpgradeStep::Finish => {
                let behind: Vec<String> = meson_db::clusters::nodes(&env.pool, cluster.id)
                    .await?
                    .into_iter()
                    .filter(|n| n.kubernetes_version != version)
                    .map(|n| n.name)
                    .collect();
                if !behind.is_empty() {
                    return Err(StepError::internal(format!(
                        "node(s) {} do not run Kubernetes {version}",
                        behind.join(", ")
                    )));
                }
                let mut tx = meson_db::begin(&env.pool).await?;
                meson_db::cluster_upgrades::finish_update(&mut tx, cluster.id, version).await?;
                meson_db::commit(tx).await?;
                tracing::info!(cluster = %cluster.id, version, "cluster upgraded");
                to_output(())
            }
        }
    }

    async fn undo(
        &self,
        cx: &StepCtx<'_, UpgradeParams, UpgradeStep>,
        step: UpgradeStep,
    ) -> StepResult<()> {
        match step {
            UpgradeStep::ControlPlane | UpgradeStep::Workers => {
                rolling::undo_half_made(
                    &self.0,
                    cx.params.cluster_id,
                    "the upgrade stopped before this node came up; replace it",
                )
                .await
            }
            UpgradeStep::Plan | UpgradeStep::Finish => Ok(()),
        }
    }

    async fn on_failed(&self, params: &UpgradeParams, failure: &ActionFailure) -> StepResult<()> {
        let reason = format!(
            "upgrade to Kubernetes {} failed: {}",
            params.kubernetes_version, failure.message
        );
        crate::cluster_failed(&self.0, params.cluster_id, &reason).await
    }
}
