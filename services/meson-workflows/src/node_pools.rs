//! What the node pool workflows share: their parameters, their enqueue,
//! and the pool's nodes.

use crate::Env;
use crate::nodes;
use meson_core::action::ActionFailure;
use meson_core::cluster::{Node, NodeStatus};
use meson_core::{ActionId, ClusterId, PoolId, TenantId};
use meson_jobs::{EnqueueOpts, Enqueued, StepResult, Workflow};
use serde::{Deserialize, Serialize};

/// Parameters of every node pool workflow.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PoolParams {
    pub cluster_id: ClusterId,
    pub pool_id: PoolId,
}

/// Enqueues a pool workflow in the caller's transaction, under the
/// cluster's concurrency key: it never runs beside another action on the
/// cluster, and `Locked` names the action in the way.
pub async fn enqueue<W: Workflow<Params = PoolParams>>(
    tx: &mut meson_db::Tx<'_>,
    cluster: ClusterId,
    pool: PoolId,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    meson_jobs::enqueue::<W>(
        tx,
        &PoolParams {
            cluster_id: cluster,
            pool_id: pool,
        },
        EnqueueOpts {
            action: Some(action),
            tenant: Some(tenant.to_string()),
            concurrency_key: Some(crate::keys::cluster(cluster)),
            max_attempts: 10,
            ..EnqueueOpts::default()
        },
    )
    .await
}

/// The pool's live nodes, oldest first.
pub(crate) async fn pool_nodes(env: &Env, p: &PoolParams) -> StepResult<Vec<Node>> {
    Ok(meson_db::clusters::nodes(&env.pool, p.cluster_id)
        .await?
        .into_iter()
        .filter(|n| n.pool == Some(p.pool_id))
        .collect())
}

/// Takes a node away for good: `deleting` first, so a retry finds it.
pub(crate) async fn remove(env: &Env, node: &Node) -> StepResult<()> {
    meson_db::clusters::set_node_status(&env.pool, node.id, NodeStatus::Deleting, None).await?;
    nodes::remove_node(env, node).await
}

/// Finishes removing the pool's nodes a failed attempt left `deleting`.
pub(crate) async fn finish_removals(env: &Env, p: &PoolParams) -> StepResult<()> {
    for n in pool_nodes(env, p).await? {
        if n.status == NodeStatus::Deleting {
            nodes::remove_node(env, &n).await?;
        }
    }
    Ok(())
}

/// Ends a pool action's failure: the cluster is `error`, with the reason.
pub(crate) async fn cluster_failed(
    env: &Env,
    p: &PoolParams,
    failure: &ActionFailure,
) -> StepResult<()> {
    crate::cluster_failed(env, p.cluster_id, &failure.message).await
}
