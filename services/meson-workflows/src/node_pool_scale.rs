//! Bring a node pool to its `desired_nodes`: a PATCHed pool's
//! (`node_pool_scale`), and a new pool's first nodes (`node_pool_create`,
//! in [`crate::node_pool_create`], runs the same steps).
//!
//! plan (the pool's nodes now) → add (node rows up to `desired_nodes`) →
//! provision (the added nodes' VMs, in parallel) → ready (each phoned
//! home) → shrink (nodes beyond `desired_nodes` removed) → finish (the
//! cluster `running`).
//!
//! - Idempotent by counting: `add` compares the pool's current nodes with
//!   `desired_nodes` under the pool's row lock, so a retried step never
//!   adds twice; the nodes to bring up are those not in `plan`'s list.
//! - Victims of a shrink: nodes already `deleting` (a crashed attempt's),
//!   then `creation_error`, then `creating`/`not_ready`, then `ready`, the
//!   newest first within each. A victim is marked `deleting` before its VM
//!   goes, so a retry picks the same ones.
//! - Unwind: `add`'s undo takes every node not in `plan`'s list off AtomOS
//!   and forgets it (its address is free again); `shrink`'s undo finishes
//!   removing the victims it started on. Nothing is left half made. The
//!   pool keeps its `desired_nodes` (the intent: PATCH it again to retry);
//!   a new pool that could not be made is removed. The cluster ends in
//!   `error` with the reason.

use crate::Env;
use crate::node_pools::{PoolParams, cluster_failed, finish_removals, pool_nodes, remove};
use crate::nodes::{self, NODE_CONCURRENCY};
use meson_core::NodeId;
use meson_core::action::ActionFailure;
use meson_core::cluster::{ClusterStatus, Node, NodeStatus};
use meson_jobs::{StepCtx, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Resizes a pool to its `desired_nodes` (`scale_node_pool`).
pub struct NodePoolScale(pub Arc<Env>);

meson_jobs::steps! {
    /// The steps of bringing a pool to its size (created or scaled).
    pub enum PoolStep {
        Plan = "plan",
        Add = "add",
        Provision = "provision",
        Ready = "ready",
        Shrink = "shrink",
        Finish = "finish",
    }
}

/// What `plan` records: the pool's nodes before anything changed.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Plan {
    before: Vec<NodeId>,
}

/// The nodes to take away so that `desired` remain: every node already
/// `deleting`, then the worst and newest of the others.
pub fn choose_victims(nodes: &[Node], desired: usize) -> Vec<Node> {
    let (mut out, mut rest): (Vec<Node>, Vec<Node>) = nodes
        .iter()
        .cloned()
        .partition(|n| n.status == NodeStatus::Deleting);
    let excess = rest.len().saturating_sub(desired);
    let rank = |s: NodeStatus| match s {
        NodeStatus::CreationError => 0,
        NodeStatus::Creating | NodeStatus::NotReady => 1,
        NodeStatus::Ready | NodeStatus::Deleting => 2,
    };
    rest.sort_by(|a, b| {
        rank(a.status)
            .cmp(&rank(b.status))
            .then(b.created.cmp(&a.created))
            .then(b.id.cmp(&a.id))
    });
    out.extend(rest.into_iter().take(excess));
    out
}

/// Adds node rows until the pool has `desired_nodes` (those being deleted
/// not counted); returns the new nodes' ids.
async fn add(env: &Env, p: &PoolParams) -> StepResult<Vec<NodeId>> {
    let cluster = meson_db::clusters::get_any(&env.pool, p.cluster_id).await?;
    let mut tx = meson_db::begin(&env.pool).await?;
    meson_db::node_pools::lock(&mut tx, p.pool_id).await?;
    let pool = meson_db::node_pools::get(&mut *tx, p.cluster_id, p.pool_id).await?;
    let current = meson_db::clusters::nodes(&mut *tx, p.cluster_id)
        .await?
        .iter()
        .filter(|n| n.pool == Some(p.pool_id) && n.status != NodeStatus::Deleting)
        .count();
    let mut added = Vec::new();
    for _ in current..pool.spec.desired_nodes as usize {
        let n =
            meson_db::clusters::add_node(&mut tx, &cluster, Some(&pool), &pool.spec.specs).await?;
        added.push(n.id);
    }
    meson_db::commit(tx).await?;
    if !added.is_empty() {
        tracing::info!(pool = %p.pool_id, count = added.len(), "added nodes to a pool");
    }
    Ok(added)
}

/// The pool's nodes that `plan` did not see: the ones this action added.
async fn added_nodes(env: &Env, cx: &StepCtx<'_, PoolParams, PoolStep>) -> StepResult<Vec<Node>> {
    let plan: Plan = cx.output(PoolStep::Plan)?;
    Ok(pool_nodes(env, cx.params)
        .await?
        .into_iter()
        .filter(|n| !plan.before.contains(&n.id))
        .collect())
}

pub(crate) async fn run(
    env: &Env,
    cx: &StepCtx<'_, PoolParams, PoolStep>,
    step: PoolStep,
) -> StepResult {
    let p = cx.params;
    match step {
        PoolStep::Plan => {
            // Not found, and nothing to do, if the pool is gone.
            meson_db::node_pools::get(&env.pool, p.cluster_id, p.pool_id).await?;
            let before = pool_nodes(env, p).await?.iter().map(|n| n.id).collect();
            to_output(Plan { before })
        }
        PoolStep::Add => to_output(add(env, p).await?),
        PoolStep::Provision => {
            let cluster = meson_db::clusters::get_any(&env.pool, p.cluster_id).await?;
            let added: Vec<Node> = added_nodes(env, cx)
                .await?
                .into_iter()
                .filter(|n| n.status != NodeStatus::Deleting)
                .collect();
            nodes::place_nodes(env, &cluster, &added).await?;
            let items = added.into_iter().map(|n| (n.id.to_string(), n)).collect();
            cx.fan_out(items, NODE_CONCURRENCY, |n| {
                let cluster = &cluster;
                async move { nodes::provision_node(env, cluster, &n, false).await }
            })
            .await?;
            to_output(())
        }
        PoolStep::Ready => {
            let items = added_nodes(env, cx)
                .await?
                .into_iter()
                .filter(|n| n.status != NodeStatus::Deleting)
                .map(|n| (n.id.to_string(), n.id))
                .collect();
            cx.fan_out(items, NODE_CONCURRENCY, |id| async move {
                nodes::wait_phoned_home(env, id).await
            })
            .await?;
            to_output(())
        }
        PoolStep::Shrink => {
            let pool = meson_db::node_pools::get(&env.pool, p.cluster_id, p.pool_id).await?;
            let victims =
                choose_victims(&pool_nodes(env, p).await?, pool.spec.desired_nodes as usize);
            if !victims.is_empty() {
                tracing::info!(pool = %p.pool_id, count = victims.len(), "removing nodes from a pool");
            }
            let items = victims.into_iter().map(|n| (n.id.to_string(), n)).collect();
            cx.fan_out(
                items,
                NODE_CONCURRENCY,
                |n| async move { remove(env, &n).await },
            )
            .await?;
            to_output(())
        }
        PoolStep::Finish => {
            meson_db::clusters::set_status(&env.pool, p.cluster_id, ClusterStatus::Running, None)
                .await?;
            to_output(())
        }
    }
}

pub(crate) async fn undo(
    env: &Env,
    cx: &StepCtx<'_, PoolParams, PoolStep>,
    step: PoolStep,
) -> StepResult<()> {
    match step {
        // Every node this action added (made, half made, or not yet made)
        // leaves AtomOS and is forgotten.
        PoolStep::Add => {
            // `add` runs only once `plan` is recorded.
            let Some(plan) = cx.try_output::<Plan>(PoolStep::Plan) else {
                return Ok(());
            };
            for n in pool_nodes(env, cx.params).await? {
                if !plan.before.contains(&n.id) {
                    nodes::remove_node(env, &n).await?;
                }
            }
            Ok(())
        }
        PoolStep::Shrink => finish_removals(env, cx.params).await,
        PoolStep::Plan | PoolStep::Provision | PoolStep::Ready | PoolStep::Finish => Ok(()),
    }
}

impl Workflow for NodePoolScale {
    const KIND: &'static str = "node_pool_scale";
    type Params = PoolParams;
    type Step = PoolStep;

    async fn run(&self, cx: &StepCtx<'_, PoolParams, PoolStep>, step: PoolStep) -> StepResult {
        run(&self.0, cx, step).await
    }

    async fn undo(&self, cx: &StepCtx<'_, PoolParams, PoolStep>, step: PoolStep) -> StepResult<()> {
        undo(&self.0, cx, step).await
    }

    async fn on_failed(&self, params: &PoolParams, failure: &ActionFailure) -> StepResult<()> {
        cluster_failed(&self.0, params, failure).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, Utc};
    use meson_core::cluster::NodeRole;
    use meson_core::{ClusterId, PoolId, VmId};

    fn node(name: &str, status: NodeStatus, age_minutes: i64) -> Node {
        Node {
            id: NodeId::new(),
            cluster: ClusterId::new(),
            pool: Some(PoolId::new()),
            role: NodeRole::Worker,
            vm: VmId::new(),
            name: name.to_owned(),
            status,
            error_message: None,
            kubernetes_version: "1.31.10".to_owned(),
            phoned_home: None,
            created: Utc::now() - Duration::minutes(age_minutes),
        }
    }

    fn names(v: &[Node]) -> Vec<&str> {
        v.iter().map(|n| n.name.as_str()).collect()
    }

    #[test]
    fn victims_are_the_broken_first_then_the_newest() {
        let nodes = [
            node("old", NodeStatus::Ready, 30),
            node("new", NodeStatus::Ready, 1),
            node("mid", NodeStatus::Ready, 10),
            node("broken", NodeStatus::CreationError, 20),
            node("booting", NodeStatus::NotReady, 25),
        ];
        assert_eq!(names(&choose_victims(&nodes, 5)), Vec::<&str>::new());
        assert_eq!(names(&choose_victims(&nodes, 4)), ["broken"]);
        assert_eq!(
            names(&choose_victims(&nodes, 1)),
            ["broken", "booting", "new", "mid"]
        );
        assert_eq!(choose_victims(&nodes, 0).len(), 5);
    }

    #[test]
    fn a_node_already_deleting_is_always_a_victim_and_counts_as_gone() {
        let nodes = [
            node("a", NodeStatus::Ready, 30),
            node("b", NodeStatus::Deleting, 1),
            node("c", NodeStatus::Ready, 10),
        ];
        // b is on its way out: a and c are the two left.
        assert_eq!(names(&choose_victims(&nodes, 2)), ["b"]);
        assert_eq!(names(&choose_victims(&nodes, 1)), ["b", "c"]);
    }
}
