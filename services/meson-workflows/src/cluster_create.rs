//! Create a Kubernetes cluster: secrets → control plane (the first node
//! runs `kubeadm init`, the others join it) → workers of every pool, in
//! parallel → every node phoned home → `running`.
//!
//! The API wrote the cluster, its network (with the endpoint's address
//! reserved), its pools, and one VM and node row per node, in one
//! transaction. A failure takes every node off AtomOS and the network with
//! them; the cluster is then `error`, with the reason, until deleted.

use crate::Env;
use crate::nodes;
use meson_core::Code;
use meson_core::action::ActionFailure;
use meson_core::cluster::{Cluster, ClusterStatus, Node, NodeRole, NodeStatus};
use meson_core::{ActionId, ClusterId, TenantId};
use meson_jobs::{EnqueueOpts, Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};

meson_jobs::steps! {
    pub enum ClusterCreateStep {
        Secrets = "secrets",
        ControlPlane = "control_plane",
        Workers = "workers",
        Ready = "ready",
        Finish = "finish",
    }
}
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Params {
    pub cluster_id: ClusterId,
}

pub struct ClusterCreate(pub Arc<Env>);

/// Enqueues a cluster workflow in the caller's transaction.
pub async fn enqueue_for_cluster<W: Workflow<Params = Params>>(
    tx: &mut meson_db::Tx<'_>,
    cluster: ClusterId,
    action: ActionId,
    tenant: &TenantId,
    max_attempts: i32,
) -> Result<Enqueued, meson_core::Error> {
    meson_jobs::enqueue::<W>(
        tx,
        &Params {
            cluster_id: cluster,
        },
        EnqueueOpts {
            action: Some(action),
            tenant: Some(tenant.to_string()),
            concurrency_key: Some(crate::keys::cluster(cluster)),
            max_attempts,
            ..EnqueueOpts::default()
        },
    )
    .await
}

pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    cluster: ClusterId,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    enqueue_for_cluster::<ClusterCreate>(tx, cluster, action, tenant, 10).await
}

fn of_role(nodes: &[Node], role: NodeRole) -> Vec<Node> {
    nodes.iter().filter(|n| n.role == role).cloned().collect()
}

impl Workflow for ClusterCreate {
    const KIND: &'static str = "cluster_create";
    type Params = Params;
    type Step = ClusterCreateStep;

    async fn run(
        &self,
        cx: &StepCtx<'_, Params, ClusterCreateStep>,
        step: ClusterCreateStep,
    ) -> StepResult {
        let env = &self.0;
        let cluster = meson_db::clusters::get_any(&env.pool, cx.params.cluster_id).await?;
        let all = meson_db::clusters::nodes(&env.pool, cluster.id).await?;
        match step {
            ClusterCreateStep::Secrets => to_output(nodes::ensure_secrets(env, &cluster).await?),
            ClusterCreateStep::ControlPlane => {
                let cps = of_role(&all, NodeRole::ControlPlane);
                let Some((first, rest)) = cps.split_first() else {
                    return Err(StepError::internal("no control-plane node"));
                };
                nodes::place_nodes(env, &cluster, &cps).await?;
                // The first must be up before the others can join it.
                nodes::provision_node(env, &cluster, first, true).await?;
                let items = rest.iter().map(|n| (n.id.to_string(), n.clone())).collect();
                cx.fan_out(items, nodes::NODE_CONCURRENCY, |n| {
                    let cluster = &cluster;
                    async move { nodes::provision_node(env, cluster, &n, false).await }
                })
                .await?;
                to_output(())
            }
            ClusterCreateStep::Workers => {
                let workers = of_role(&all, NodeRole::Worker);
                nodes::place_nodes(env, &cluster, &workers).await?;
                let items = workers.into_iter().map(|n| (n.id.to_string(), n)).collect();
                cx.fan_out(items, nodes::NODE_CONCURRENCY, |n| {
                    let cluster = &cluster;
                    async move { nodes::provision_node(env, cluster, &n, false).await }
                })
                .await?;
                to_output(())
            }
            ClusterCreateStep::Ready => to_output(wait_ready(env, &cluster).await?),
            ClusterCreateStep::Finish => {
                meson_db::clusters::set_status(&env.pool, cluster.id, ClusterStatus::Running, None)
                    .await?;
                to_output(())
            }
        }
    }

    async fn undo(
        &self,
        cx: &StepCtx<'_, Params, ClusterCreateStep>,
        step: ClusterCreateStep,
    ) -> StepResult<()> {
        let env = &self.0;
        let role = match step {
            ClusterCreateStep::ControlPlane => NodeRole::ControlPlane,
            ClusterCreateStep::Workers => NodeRole::Worker,
            ClusterCreateStep::Secrets | ClusterCreateStep::Ready | ClusterCreateStep::Finish => {
                return Ok(());
            }
        };
        let cluster =
            meson_db::clusters::get_including_deleted(&env.pool, cx.params.cluster_id).await?;
        for node in of_role(
            &meson_db::clusters::nodes(&env.pool, cluster.id).await?,
            role,
        ) {
            // `on_failed` marks every node, with the reason.
            nodes::teardown_node(env, &node).await?;
            crate::provision::unplace(env, node.vm).await?;
        }
        if role == NodeRole::ControlPlane {
            // The control plane's step was the first to make the network anywhere.
            crate::provision::remove_network_from_hosts(env, cluster.network).await?;
        }
        Ok(())
    }

    async fn on_failed(&self, params: &Params, failure: &ActionFailure) -> StepResult<()> {
        let env = &self.0;
        let cluster =
            meson_db::clusters::get_including_deleted(&env.pool, params.cluster_id).await?;
        // Every node ends final: those of a step that never ran (the
        // workers, when the control plane failed) were not undone.
        let why = format!("the cluster could not be created: {}", failure.message);
        for node in meson_db::clusters::nodes(&env.pool, cluster.id).await? {
            nodes::fail_node(env, &node, &why).await?;
        }
        // Whatever a crash mid-undo left behind.
        crate::provision::remove_network_from_hosts(env, cluster.network).await?;
        crate::cluster_failed(env, params.cluster_id, &failure.message).await
    }
}

/// Waits (bounded) until every node phoned home; a node that did not in
/// time is marked `creation_error` and the step fails naming it.
async fn wait_ready(env: &Env, cluster: &Cluster) -> StepResult<()> {
    let deadline = tokio::time::Instant::now() + env.config.node_ready_timeout;
    loop {
        let all = meson_db::clusters::nodes(&env.pool, cluster.id).await?;
        let waiting: Vec<&Node> = all.iter().filter(|n| n.phoned_home.is_none()).collect();
        if waiting.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            let names: Vec<&str> = waiting.iter().map(|n| n.name.as_str()).collect();
            for n in &waiting {
                meson_db::clusters::set_node_status(
                    &env.pool,
                    n.id,
                    NodeStatus::CreationError,
                    Some("the node did not report its kubelet up in time"),
                )
                .await?;
            }
            return Err(StepError::fatal(
                Code::Timeout,
                format!(
                    "node(s) {} did not come up within {} s",
                    names.join(", "),
                    env.config.node_ready_timeout.as_secs()
                ),
            ));
        }
        tokio::time::sleep(env.config.poll_interval).await;
    }
}
