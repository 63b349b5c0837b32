//! Reboot a node of a running cluster: its VM rebooted on AtomOS, the node
//! `not_ready` until AtomOS reports the VM running again. Runs under the
//! cluster's concurrency key, so it is serialized with every other action
//! on the cluster, auto-repair's included.

use crate::Env;
use crate::nodes::{NodeParams, enqueue_for_node, live_node};
use crate::vm_power::{self, PowerStep, Reboot};
use meson_core::action::ActionFailure;
use meson_core::cluster::{Node, NodeStatus};
use meson_core::vm::VmStatus;
use meson_core::{ActionId, TenantId};
use meson_jobs::{Enqueued, StepCtx, StepResult, Workflow, to_output};
use std::sync::Arc;

/// Reboot a node's VM.
pub struct NodeReboot(pub Arc<Env>);

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
    type Step = PowerStep;

    async fn run(&self, cx: &StepCtx<'_, NodeParams, PowerStep>, step: PowerStep) -> StepResult {
        let env = &self.0;
        let node = live_node(env, cx.params).await?;
        let vm = meson_db::vms::get_any(&env.pool, node.vm).await?;
        match step {
            PowerStep::Request => {
                meson_db::clusters::set_node_status(&env.pool, node.id, NodeStatus::NotReady, None)
                    .await?;
                to_output(vm_power::request::<Reboot>(env, &vm).await?)
            }
            PowerStep::Wait => {
                vm_power::wait::<Reboot>(env, &vm).await?;
                let status = settled_status(&node, VmStatus::Running);
                meson_db::clusters::set_node_status(&env.pool, node.id, status, None).await?;
                to_output(())
            }
        }
    }

    /// Forward-only, like every power operation (the node is shown as it
    /// is by `on_failed`).
    async fn undo(&self, _: &StepCtx<'_, NodeParams, PowerStep>, _: PowerStep) -> StepResult<()> {
        crate::forward_only()
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
    use meson_core::{ClusterId, NodeId};

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
