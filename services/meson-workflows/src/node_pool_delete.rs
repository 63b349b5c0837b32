//! Delete a node pool (`delete_node_pool`): every node of the pool leaves
//! AtomOS and is forgotten (its address is free again), then the pool is
//! marked deleted and the cluster is `running` again.
//!
//! Forward-only, like a cluster's delete: a node is marked `deleting`
//! before its VM goes, and a failure finishes removing the nodes it started
//! on (nothing is left half made) while the others stay as they were. The
//! cluster is then `error`, with the reason; deleting the pool again
//! finishes the job.

use crate::Env;
use crate::node_pools::{PoolParams, cluster_failed, finish_removals, pool_nodes, remove};
use crate::nodes::NODE_CONCURRENCY;
use meson_core::action::ActionFailure;
use meson_core::cluster::ClusterStatus;
use meson_jobs::{StepCtx, StepResult, Workflow, to_output};
use std::sync::Arc;

pub struct NodePoolDelete(pub Arc<Env>);

meson_jobs::steps! {
    pub enum PoolDeleteStep {
        Nodes = "nodes",
        Forget = "forget",
        Finish = "finish",
    }
}

impl Workflow for NodePoolDelete {
    const KIND: &'static str = "node_pool_delete";
    type Params = PoolParams;
    type Step = PoolDeleteStep;

    async fn run(
        &self,
        cx: &StepCtx<'_, PoolParams, PoolDeleteStep>,
        step: PoolDeleteStep,
    ) -> StepResult {
        let env = &self.0;
        let p = cx.params;
        match step {
            PoolDeleteStep::Nodes => {
                let items = pool_nodes(env, p)
                    .await?
                    .into_iter()
                    .map(|n| (n.id.to_string(), n))
                    .collect();
                cx.fan_out(
                    items,
                    NODE_CONCURRENCY,
                    |n| async move { remove(env, &n).await },
                )
                .await?;
            }
            PoolDeleteStep::Forget => {
                meson_db::clusters::mark_pool_deleted(&env.pool, p.pool_id).await?
            }
            PoolDeleteStep::Finish => {
                meson_db::clusters::set_status(
                    &env.pool,
                    p.cluster_id,
                    ClusterStatus::Running,
                    None,
                )
                .await?
            }
        }
        to_output(())
    }

    async fn undo(
        &self,
        cx: &StepCtx<'_, PoolParams, PoolDeleteStep>,
        step: PoolDeleteStep,
    ) -> StepResult<()> {
        match step {
            PoolDeleteStep::Nodes => finish_removals(&self.0, cx.params).await,
            PoolDeleteStep::Forget | PoolDeleteStep::Finish => Ok(()),
        }
    }

    async fn on_failed(&self, params: &PoolParams, failure: &ActionFailure) -> StepResult<()> {
        cluster_failed(&self.0, params, failure).await
    }
}
