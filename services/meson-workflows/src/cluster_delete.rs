//! Delete a Kubernetes cluster: take every node's VM off AtomOS, remove the
//! network from every host, then forget the cluster, its pools, nodes, VMs
//! and network. Forward-only: a half-deleted cluster is not brought back.

use crate::Env;
use crate::cluster_create::{Params, enqueue_for_cluster};
use crate::nodes;
use meson_core::action::ActionFailure;
use meson_core::{ActionId, ClusterId, TenantId};
use meson_jobs::{Enqueued, StepCtx, StepResult, Workflow, to_output};
use std::sync::Arc;

pub struct ClusterDelete(pub Arc<Env>);

meson_jobs::steps! {
    pub enum ClusterDeleteStep {
        Nodes = "nodes",
        Network = "network",
        Forget = "forget",
    }
}

pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    cluster: ClusterId,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    // Deleting must get through transient faults.
    enqueue_for_cluster::<ClusterDelete>(tx, cluster, action, tenant, 25).await
}

impl Workflow for ClusterDelete {
    const KIND: &'static str = "cluster_delete";
    type Params = Params;
    type Step = ClusterDeleteStep;

    async fn run(
        &self,
        cx: &StepCtx<'_, Params, ClusterDeleteStep>,
        step: ClusterDeleteStep,
    ) -> StepResult {
        let env = &self.0;
        let cluster =
            meson_db::clusters::get_including_deleted(&env.pool, cx.params.cluster_id).await?;
        match step {
            ClusterDeleteStep::Nodes => {
                let items = meson_db::clusters::nodes(&env.pool, cluster.id)
                    .await?
                    .into_iter()
                    .map(|n| (n.id.to_string(), n))
                    .collect();
                cx.fan_out(
                    items,
                    8,
                    |n| async move { nodes::teardown_node(env, &n).await },
                )
                .await?;
            }
            ClusterDeleteStep::Network => {
                crate::provision::remove_network_from_hosts(env, cluster.network).await?
            }
            ClusterDeleteStep::Forget => {
                let all = meson_db::clusters::nodes(&env.pool, cluster.id).await?;
                let mut tx = meson_db::begin(&env.pool).await?;
                for n in &all {
                    meson_db::clusters::mark_node_deleted(&mut *tx, n.id).await?;
                    meson_db::vms::mark_deleted(&mut tx, n.vm).await?;
                }
                for p in meson_db::clusters::pools(&mut *tx, cluster.id).await? {
                    meson_db::clusters::mark_pool_deleted(&mut *tx, p.id).await?;
                }
                meson_db::clusters::mark_deleted(&mut *tx, cluster.id).await?;
                meson_db::commit(tx).await?;
                meson_db::networks::mark_deleted(&env.pool, cluster.network).await?;
            }
        }
        to_output(())
    }

    async fn undo(
        &self,
        _: &StepCtx<'_, Params, ClusterDeleteStep>,
        _: ClusterDeleteStep,
    ) -> StepResult<()> {
        crate::forward_only()
    }

    async fn on_failed(&self, params: &Params, failure: &ActionFailure) -> StepResult<()> {
        crate::cluster_failed(&self.0, params.cluster_id, &failure.message).await
    }
}
