//! The generic workflow harness (meson_jobs::testing) run against the node
//! replace and reboot workflows, on a small running cluster per run.

use crate::clusters::ClusterCreateScenario;
use crate::world::{HasWorld, World, harness};
use meson_api::app::NodeAction;
use meson_core::action::ResourceType;
use meson_core::cluster::{Node, NodeRole, NodeStatus};
use meson_core::vm::VmStatus;
use meson_core::{ActionId, ClusterId, NodeId};
use meson_jobs::testing::Scenario;
use meson_workflows::node_reboot::NodeReboot;
use meson_workflows::node_replace::NodeReplace;
use std::sync::Mutex;

/// Every VM and volume on every simulated host.
fn sim_totals(w: &World) -> (usize, usize) {
    w.sim
        .hosts()
        .iter()
        .map(|h| h.inventory())
        .fold((0, 0), |(v, d), i| (v + i.vms.len(), d + i.volumes.len()))
}

/// (VMs, volumes) on every simulated host that are this node VM's (a
/// node's VM is named after its cluster, its volumes after the VM).
fn on_atomos(w: &World, vm: &meson_core::vm::Vm) -> (usize, usize) {
    let prefix = meson_core::naming::vm_volume_prefix(vm.id);
    w.sim
        .hosts()
        .iter()
        .map(|h| h.inventory())
        .fold((0, 0), |(v, d), i| {
            (
                v + i.vms.iter().filter(|x| x.name == vm.atomos_name).count(),
                d + i
                    .volumes
                    .iter()
                    .filter(|x| x.name.starts_with(&prefix))
                    .count(),
            )
        })
}

/// A running small cluster (one control-plane node, one worker) per run and
/// an action on its worker. Keeps what the simulator held before the
/// action, to prove the action leaves exactly as many VMs and volumes.
struct NodeScenario {
    clusters: ClusterCreateScenario,
    op: NodeAction,
    baseline: Mutex<(usize, usize)>,
}

impl NodeScenario {
    fn new(w: World, op: NodeAction) -> Self {
        NodeScenario {
            clusters: ClusterCreateScenario(w),
            op,
            baseline: Mutex::new((0, 0)),
        }
    }

    fn w(&self) -> &World {
        &self.clusters.0
    }

    async fn start(&self) -> ActionId {
        let w = self.w();
        let cluster = self.clusters.running_cluster().await;
        let worker = meson_db::clusters::nodes(&w.db.pool, cluster)
            .await
            .unwrap()
            .into_iter()
            .find(|n| n.role == NodeRole::Worker)
            .expect("a worker");
        *self.baseline.lock().unwrap() = sim_totals(w);
        w.app
            .cluster_node_action(&w.who, cluster, worker.id, self.op)
            .await
            .expect("node action accepted")
            .id
    }

    /// The action's cluster and node.
    async fn target(&self, action: ActionId) -> (ClusterId, NodeId) {
        let a = meson_db::actions::get(&self.w().db.pool, None, action)
            .await
            .unwrap();
        let of = |t: ResourceType| {
            a.resources
                .iter()
                .find(|(k, _)| *k == t)
                .map(|(_, id)| *id)
                .unwrap()
        };
        (
            ClusterId(of(ResourceType::Cluster)),
            NodeId(of(ResourceType::Node)),
        )
    }

    async fn live_nodes(&self, cluster: ClusterId) -> Vec<Node> {
        meson_db::clusters::nodes(&self.w().db.pool, cluster)
            .await
            .unwrap()
    }

    /// Two live nodes, both ready, each with its VM running on AtomOS with
    /// its boot disk and ISO; the simulator holds what it held before.
    async fn assert_whole(&self, cluster: ClusterId) {
        let w = self.w();
        let nodes = self.live_nodes(cluster).await;
        assert_eq!(nodes.len(), 2, "{nodes:?}");
        for n in &nodes {
            assert_eq!(n.status, NodeStatus::Ready, "{n:?}");
            assert_eq!(n.error_message, None, "{n:?}");
            let vm = w.vm(n.vm).await;
            assert_eq!(vm.status, VmStatus::Running, "{vm:?}");
            assert_eq!(on_atomos(w, &vm), (1, 2), "node {}", n.name);
        }
        assert_eq!(
            sim_totals(w),
            *self.baseline.lock().unwrap(),
            "as many VMs and volumes on AtomOS as before: nothing leaked"
        );
    }
}

struct ReplaceScenario(NodeScenario);

impl Scenario for ReplaceScenario {
    type W = NodeReplace;

    fn workflow(&self) -> NodeReplace {
        NodeReplace(self.0.w().env.clone())
    }

    async fn start(&self) -> ActionId {
        self.0.start().await
    }

    /// The old node is gone (row and VM), a new worker took its place.
    async fn assert_done(&self, action: ActionId) {
        let w = self.0.w();
        let (cluster, old) = self.0.target(action).await;
        assert_eq!(
            meson_db::node_health::node_deleted(&w.db.pool, old)
                .await
                .unwrap(),
            Some(true)
        );
        let nodes = self.0.live_nodes(cluster).await;
        assert!(nodes.iter().all(|n| n.id != old));
        assert_eq!(
            nodes.iter().filter(|n| n.role == NodeRole::Worker).count(),
            1
        );
        self.0.assert_whole(cluster).await;
    }

    /// Either the old node is intact and no replacement is left, or (a
    /// fault after the old node went) the replacement stands; never both,
    /// never neither, nothing leaked.
    async fn assert_clean(&self, action: ActionId) {
        let w = self.0.w();
        let (cluster, old) = self.0.target(action).await;
        let replacement = meson_db::clusters::replacement_of(&w.db.pool, old)
            .await
            .unwrap();
        match meson_db::node_health::node_deleted(&w.db.pool, old)
            .await
            .unwrap()
        {
            Some(false) => assert!(replacement.is_none(), "{replacement:?}"),
            Some(true) => assert!(replacement.is_some(), "the replacement stands"),
            None => panic!("the old node's row vanished"),
        }
        self.0.assert_whole(cluster).await;
    }
}

impl HasWorld for ReplaceScenario {
    fn world(&self) -> &World {
        self.0.w()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_replace_passes_the_workflow_harness() {
    harness(ReplaceScenario(NodeScenario::new(
        World::new().await,
        NodeAction::Replace,
    )))
    .await;
}

struct RebootScenario(NodeScenario);

impl Scenario for RebootScenario {
    type W = NodeReboot;

    fn workflow(&self) -> NodeReboot {
        NodeReboot(self.0.w().env.clone())
    }

    async fn start(&self) -> ActionId {
        self.0.start().await
    }

    /// The same node, ready again on the same VM.
    async fn assert_done(&self, action: ActionId) {
        let (cluster, node) = self.0.target(action).await;
        assert!(
            self.0
                .live_nodes(cluster)
                .await
                .iter()
                .any(|n| n.id == node)
        );
        self.0.assert_whole(cluster).await;
    }

    /// A failed reboot shows the node as its VM is once settled: here
    /// running, so ready; nothing made or lost.
    async fn assert_clean(&self, action: ActionId) {
        self.assert_done(action).await;
    }
}

impl HasWorld for RebootScenario {
    fn world(&self) -> &World {
        self.0.w()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_reboot_passes_the_workflow_harness() {
    harness(RebootScenario(NodeScenario::new(
        World::new().await,
        NodeAction::Reboot,
    )))
    .await;
}
