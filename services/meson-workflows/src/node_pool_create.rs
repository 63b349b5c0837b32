//! Add a new pool's first nodes (`create_node_pool`): the steps of
//! [`crate::node_pool_scale`] from zero nodes, except that a pool that could
//! not be made is not kept.

use crate::Env;
use crate::node_pool_scale::{self, PoolStep};
use crate::node_pools::{PoolParams, cluster_failed, pool_nodes};
use crate::nodes;
use meson_core::action::ActionFailure;
use meson_jobs::{StepCtx, StepResult, Workflow};
use std::sync::Arc;

/// Adds a new pool's nodes (`create_node_pool`).
pub struct NodePoolCreate(pub Arc<Env>);

impl Workflow for NodePoolCreate {
    const KIND: &'static str = "node_pool_create";
    type Params = PoolParams;
    type Step = PoolStep;

    async fn run(&self, cx: &StepCtx<'_, PoolParams, PoolStep>, step: PoolStep) -> StepResult {
        node_pool_scale::run(&self.0, cx, step).await
    }

    async fn undo(&self, cx: &StepCtx<'_, PoolParams, PoolStep>, step: PoolStep) -> StepResult<()> {
        node_pool_scale::undo(&self.0, cx, step).await
    }

    /// A pool that could not be made is not kept: its name is free again.
    async fn on_failed(&self, params: &PoolParams, failure: &ActionFailure) -> StepResult<()> {
        let env = &self.0;
        // Whatever a crash mid-undo left behind.
        for n in pool_nodes(env, params).await? {
            nodes::remove_node(env, &n).await?;
        }
        meson_db::clusters::mark_pool_deleted(&env.pool, params.pool_id).await?;
        cluster_failed(env, params, failure).await
    }
}
