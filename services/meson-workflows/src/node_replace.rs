//! Replace a node of a running cluster: a new node of the same role, pool
//! and version is up and has phoned home before the old one goes (surge
//! one). Runs under the cluster's concurrency key, so it is serialized with
//! every other action on the cluster, auto-repair's included.

use crate::Env;
use crate::nodes::{self, NodeParams, enqueue_for_node, live_node};
use meson_core::Code;
use meson_core::{ActionId, NodeId, TenantId};
use meson_jobs::{Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};
use std::sync::Arc;

/// Replace a node (`replace_node`, and auto-repair's `repair_node`).
pub struct NodeReplace(pub Arc<Env>);

meson_jobs::steps! {
    pub enum NodeReplaceStep {
        Replace = "replace",
    }
}

pub async fn enqueue_replace(
    tx: &mut meson_db::Tx<'_>,
    params: &NodeParams,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    enqueue_for_node::<NodeReplace>(tx, params, action, tenant, 10).await
}

impl Workflow for NodeReplace {
    const KIND: &'static str = "node_replace";
    type Params = NodeParams;
    type Step = NodeReplaceStep;

    async fn run(
        &self,
        cx: &StepCtx<'_, NodeParams, NodeReplaceStep>,
        step: NodeReplaceStep,
    ) -> StepResult {
        let env = &self.0;
        match step {
            NodeReplaceStep::Replace => {
                match meson_db::node_health::node_deleted(&env.pool, cx.params.node_id).await? {
                    None => Err(StepError::fatal(Code::NotFound, "the node does not exist")),
                    // Replaced already: by this workflow before a crash, or,
                    // for a repair decided on a stale view, by an earlier one.
                    Some(true) => to_output(None::<NodeId>),
                    Some(false) => {
                        let old = live_node(env, cx.params).await?;
                        let cluster = meson_db::clusters::get_any(&env.pool, old.cluster).await?;
                        let new = nodes::replace_node(env, &cluster, &old, &old.kubernetes_version)
                            .await?;
                        tracing::info!(cluster = %cluster.id, old = %old.name, new = %new.name, "node replaced");
                        to_output(Some(new.id))
                    }
                }
            }
        }
    }

    /// Takes the replacement away while the old node is still there (it
    /// never took over). Once the old node is gone the replacement stands:
    /// a replace is forward-only from that point.
    async fn undo(
        &self,
        cx: &StepCtx<'_, NodeParams, NodeReplaceStep>,
        _: NodeReplaceStep,
    ) -> StepResult<()> {
        let env = &self.0;
        let old = cx.params.node_id;
        if meson_db::node_health::node_deleted(&env.pool, old).await? != Some(false) {
            return Ok(());
        }
        if let Some(new) = meson_db::clusters::replacement_of(&env.pool, old).await? {
            nodes::remove_node(env, &new).await?;
            tracing::info!(node = %new.name, "replacement node removed");
        }
        Ok(())
    }
}
