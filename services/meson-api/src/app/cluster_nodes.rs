//! One node of a cluster: replace it, reboot it.

use super::{App, new_action};
use crate::auth::Principal;
use meson_core::action::{Action, Command, ResourceType};
use meson_core::cluster::{Cluster, ClusterStatus, Node, NodeStatus};
use meson_core::vm::VmStatus;
use meson_core::{ClusterId, Error, NodeId, Result};
use meson_workflows::nodes::NodeParams;
use meson_workflows::{node_reboot, node_replace};

/// `POST /v1/clusters/{id}/nodes/{node}/actions/{replace|reboot}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeAction {
    Replace,
    Reboot,
}

impl NodeAction {
    fn command(self) -> Command {
        match self {
            NodeAction::Replace => Command::ReplaceNode,
            NodeAction::Reboot => Command::RebootNode,
        }
    }
}

/// Why a node action cannot run now (checked under the cluster's lock).
fn refusal(
    op: NodeAction,
    cluster: &Cluster,
    node: &Node,
    vm: &meson_core::vm::Vm,
) -> Option<String> {
    // A degraded cluster (every node unhealthy) is what replaces are for.
    if !matches!(
        cluster.status,
        ClusterStatus::Running | ClusterStatus::Degraded
    ) {
        return Some(format!(
            "the cluster is {}; node actions need it running (or degraded)",
            cluster.status.as_str()
        ));
    }
    match op {
        NodeAction::Replace => None,
        NodeAction::Reboot => {
            let settled = matches!(node.status, NodeStatus::Ready | NodeStatus::NotReady);
            if !settled || vm.status != VmStatus::Running || vm.placement.is_none() {
                Some(format!(
                    "the node is {} and its VM {}; a reboot needs a ready or not_ready node \
                     whose VM runs (replace it instead)",
                    node.status.as_str(),
                    vm.status.as_str()
                ))
            } else {
                None
            }
        }
    }
}

impl App {
    /// Starts replacing (a new node up and phoned home before the old one
    /// goes) or rebooting one node of a running cluster. `not_found` for
    /// another tenant's cluster or a node not in it, `locked` while another
    /// action runs on the cluster, `conflict` when the cluster or the node
    /// is not in a state the action can start from.
    pub async fn cluster_node_action(
        &self,
        p: &Principal,
        cluster_id: ClusterId,
        node_id: NodeId,
        op: NodeAction,
    ) -> Result<Action> {
        meson_db::clusters::get(&self.pool, &p.tenant, cluster_id).await?;
        let node = match meson_db::clusters::node(&self.pool, node_id).await {
            Ok(n) if n.cluster == cluster_id => n,
            Ok(_) | Err(Error::NotFound { .. }) => return Err(Error::not_found("node", node_id)),
            Err(e) => return Err(e),
        };
        let action = new_action(
            p,
            op.command(),
            vec![
                (ResourceType::Cluster, cluster_id.0),
                (ResourceType::Node, node_id.0),
            ],
        );
        let params = NodeParams {
            cluster_id,
            node_id,
        };
        let mut tx = meson_db::begin(&self.pool).await?;
        meson_db::actions::insert(&mut tx, &action).await?;
        let queued = match op {
            NodeAction::Replace => {
                node_replace::enqueue_replace(&mut tx, &params, action.id, &p.tenant).await?
            }
            NodeAction::Reboot => {
                node_reboot::enqueue_reboot(&mut tx, &params, action.id, &p.tenant).await?
            }
        };
        queued.or_locked("cluster", cluster_id)?;
        // Read again under the lock: no other action can change them now.
        let cluster = meson_db::clusters::get(&mut *tx, &p.tenant, cluster_id).await?;
        let node = match meson_db::clusters::node(&mut *tx, node.id).await {
            Err(Error::NotFound { .. }) => return Err(Error::not_found("node", node_id)),
            other => other?,
        };
        let vm = meson_db::vms::get_any(&self.pool, node.vm).await?;
        if let Some(message) = refusal(op, &cluster, &node, &vm) {
            return Err(Error::Conflict { message });
        }
        meson_db::commit(tx).await?;
        tracing::info!(cluster = %cluster_id, node = %node.name, action = %action.id, ?op,
            "node action accepted");
        Ok(action)
    }
}
