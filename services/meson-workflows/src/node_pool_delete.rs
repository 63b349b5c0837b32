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
use crate::node_pool_scale::{
    NODE_CONCURRENCY, PoolParams, cluster_failed, finish_removals, pool_nodes, remove,
};
use meson_core::action::ActionFailure;
use meson_core::cluster::ClusterStatus;
use meson_jobs::{StepCtx, StepError, StepResult, Workflow, to_output};
use std::sync::Arc;

pub struct NodePoolDelete(pub Arc<Env>);

/// Step names are persisted: never rename one.
const STEPS: &[&str] = &["nodes", "forget", "finish"];

impl Workflow for NodePoolDelete {
    const KIND: &'static str = "node_pool_delete";
    type Params = PoolParams;

    fn steps(&self) -> &'static [&'static str] {
        STEPS
    }

    async fn run(&self, cx: &StepCtx<'_, PoolParams>, step: &'static str) -> StepResult {
        let env = &self.0;
        let p = cx.params;
        match step {
            "nodes" => {
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
            "forget" => meson_db::clusters::mark_pool_deleted(&env.pool, p.pool_id).await?,
            "finish" => {
                meson_db::clusters::set_status(
                    &env.pool,
                    p.cluster_id,
                    ClusterStatus::Running,
                    None,
                )
                .await?
            }
            other => {
                return Err(StepError::fatal(
                    "service_error",
                    format!("unknown step {other}"),
                ));
            }
        }
        to_output(())
    }

    async fn undo(&self, cx: &StepCtx<'_, PoolParams>, step: &'static str) -> StepResult<()> {
        match step {
            "nodes" => finish_removals(&self.0, cx.params).await,
            _ => Ok(()),
        }
    }

    async fn on_failed(&self, params: &PoolParams, failure: &ActionFailure) -> StepResult<()> {
        cluster_failed(&self.0, params, failure).await
    }
}
