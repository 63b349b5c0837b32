//! Operations on one node of a running cluster: replace it (a new node of
//! the same role, pool and version is up and has phoned home before the old
//! one goes: surge one) and reboot it (its VM rebooted on AtomOS, the node
//! `not_ready` until AtomOS reports the VM running again). Both run under
//! the cluster's concurrency key, so they are serialized with every other
//! action on the cluster, auto-repair's included.

use crate::Env;
use crate::cluster_create::concurrency_key;
use crate::nodes;
use crate::vm_power::{self, Reboot};
use meson_core::action::ActionFailure;
use meson_core::cluster::{Node, NodeStatus};
use meson_core::vm::VmStatus;
use meson_core::{ActionId, ClusterId, NodeId, TenantId};
use meson_jobs::{EnqueueOpts, Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Parameters of every node workflow.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeParams {
    pub cluster_id: ClusterId,
    pub node_id: NodeId,
}

/// Enqueues a node workflow in the caller's transaction, under the
/// cluster's concurrency key.
pub async fn enqueue_for_node<W: Workflow<Params = NodeParams>>(
    tx: &mut meson_db::Tx<'_>,
    params: &NodeParams,
    action: ActionId,
    tenant: &TenantId,
    max_attempts: i32,
) -> Result<Enqueued, meson_core::Error> {
    meson_jobs::enqueue::<W>(
        tx,
        params,
        EnqueueOpts {
            action: Some(action),
            tenant: Some(tenant.to_string()),
            concurrency_key: Some(concurrency_key(params.cluster_id)),
            max_attempts,
            ..EnqueueOpts::default()
        },
    )
    .await
}

/// The live node, which must belong to the cluster.
async fn live_node(env: &Env, params: &NodeParams) -> StepResult<Node> {
    let node = meson_db::clusters::node(&env.pool, params.node_id).await?;
    if node.cluster != params.cluster_id {
        return Err(StepError::fatal(
            "not_found",
            format!("node {} is not in this cluster", node.id),
        ));
    }
    Ok(node)
}

/// Replace a node (`replace_node`, and auto-repair's `repair_node`).
pub struct NodeReplace(pub Arc<Env>);

/// Step names are persisted: never rename one.
const REPLACE_STEPS: &[&str] = &["replace"];

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

    fn steps(&self) -> &'static [&'static str] {
        REPLACE_STEPS
    }

    async fn run(&self, cx: &StepCtx<'_, NodeParams>, step: &'static str) -> StepResult {
        let env = &self.0;
        match step {
            "replace" => {
                match meson_db::node_health::node_deleted(&env.pool, cx.params.node_id).await? {
                    None => Err(StepError::fatal("not_found", "the node does not exist")),
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
            other => Err(StepError::fatal(
                "service_error",
                format!("unknown step {other}"),
            )),
        }
    }

    /// Takes the replacement away while the old node is still there (it
    /// never took over). Once the old node is gone the replacement stands:
    /// a replace is forward-only from that point.
    async fn undo(&self, cx: &StepCtx<'_, NodeParams>, _step: &'static str) -> StepResult<()> {
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

/// Reboot a node's VM.
pub struct NodeReboot(pub Arc<Env>);

/// Step names are persisted: never rename one.
const REBOOT_STEPS: &[&str] = &["request", "wait"];

pub async fn enqueue_reboot(
    tx: &mut meson_db::Tx<'_>,
    params: &NodeParams,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    enqueue_for_node::<NodeReboot>(tx, params, action, tenant, 10).await
}

/// What a node is once its VM settled: `ready` when running and it had
/// phoned home (cloud-init's phone_home does not run again on a reboot).
fn settled_status(node: &Node, vm: VmStatus) -> NodeStatus {
    if vm == VmStatus::Running && node.phoned_home.is_some() {
        NodeStatus::Ready
    } else {
        NodeStatus::NotReady
    }
}

impl Workflow for NodeReboot {
    const KIND: &'static str = "node_reboot";
    type Params = NodeParams;

    fn steps(&self) -> &'static [&'static str] {
        REBOOT_STEPS
    }

    async fn run(&self, cx: &StepCtx<'_, NodeParams>, step: &'static str) -> StepResult {
        let env = &self.0;
        let node = live_node(env, cx.params).await?;
        let vm = meson_db::vms::get_any(&env.pool, node.vm).await?;
        match step {
            "request" => {
                meson_db::clusters::set_node_status(&env.pool, node.id, NodeStatus::NotReady, None)
                    .await?;
                to_output(vm_power::request::<Reboot>(env, &vm).await?)
            }
            "wait" => {
                vm_power::wait::<Reboot>(env, &vm).await?;
                let status = settled_status(&node, VmStatus::Running);
                meson_db::clusters::set_node_status(&env.pool, node.id, status, None).await?;
                to_output(())
            }
            other => Err(StepError::fatal(
                "service_error",
                format!("unknown step {other}"),
            )),
        }
    }

    async fn undo(&self, _cx: &StepCtx<'_, NodeParams>, _step: &'static str) -> StepResult<()> {
        // A reboot is forward-only, like every power operation: a half-done
        // one is reported (and the node shown as it is), not reversed.
        Ok(())
    }

    /// Shows the node as its VM really is once it settles.
    async fn on_failed(&self, params: &NodeParams, _failure: &ActionFailure) -> StepResult<()> {
        let env = &self.0;
        let Ok(node) = live_node(env, params).await else {
            return Ok(());
        };
        let vm = meson_db::vms::get_any(&env.pool, node.vm).await?;
        let vm_status = vm_power::settle(env, &vm).await?;
        let status = settled_status(&node, vm_status);
        let message = (status != NodeStatus::Ready).then(|| {
            format!(
                "the reboot failed; its VM is {} on its host",
                vm_status.as_str()
            )
        });
        meson_db::clusters::set_node_status(&env.pool, node.id, status, message.as_deref()).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rebooted_node_is_ready_again_only_if_it_had_phoned_home() {
        let mut node = Node {
            id: NodeId::new(),
            cluster: ClusterId::new(),
            pool: None,
            role: meson_core::cluster::NodeRole::ControlPlane,
            vm: meson_core::VmId::new(),
            name: "c-cp-abcde".into(),
            status: NodeStatus::NotReady,
            error_message: None,
            kubernetes_version: "1.29.2".into(),
            phoned_home: None,
            created: chrono::Utc::now(),
        };
        assert_eq!(
            settled_status(&node, VmStatus::Running),
            NodeStatus::NotReady
        );
        node.phoned_home = Some(chrono::Utc::now());
        assert_eq!(settled_status(&node, VmStatus::Running), NodeStatus::Ready);
        assert_eq!(settled_status(&node, VmStatus::Off), NodeStatus::NotReady);
    }
}
