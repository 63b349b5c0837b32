//! The generic workflow harness run against the cluster upgrade and the
//! credentials rotation: every step twice, a fault before and after every
//! step, every undo twice, a worker killed before every step. Both are
//! forward-only; "clean" after a failure means the cluster is `error`, has
//! as many nodes as before, each with exactly its VM on AtomOS, and
//! nothing of a removed node or a replacement taken back is left there.

use crate::clusters::ClusterCreateScenario;
use crate::world::{HasWorld, World, harness};
use meson_core::cluster::{Cluster, ClusterStatus, Node, NodeRole, NodeStatus};
use meson_core::{ActionId, ClusterId};
use meson_jobs::testing::Scenario;
use meson_workflows::cluster_rotate_credentials::ClusterRotateCredentials;
use meson_workflows::cluster_upgrade::ClusterUpgrade;
use std::collections::HashMap;
use std::sync::Mutex;

/// (VM, volumes) of one node on every simulated host.
fn node_on_atomos(w: &World, node: &Node) -> (usize, usize) {
    let name = meson_core::naming::node_atomos_name(
        node.cluster,
        node.role == NodeRole::ControlPlane,
        node.vm,
        &w.who.tenant,
    );
    let volumes = meson_core::naming::vm_volume_prefix(node.vm);
    w.sim
        .hosts()
        .iter()
        .map(|h| h.inventory())
        .fold((0, 0), |(v, d), i| {
            (
                v + i.vms.iter().filter(|x| x.name == name).count(),
                d + i
                    .volumes
                    .iter()
                    .filter(|x| x.name.starts_with(&volumes))
                    .count(),
            )
        })
}

/// A running small cluster (one control-plane node, one worker) per run,
/// its nodes remembered by the action that then changes it.
struct Rolled {
    base: ClusterCreateScenario,
    before: Mutex<HashMap<ActionId, (ClusterId, Vec<Node>)>>,
}

impl Rolled {
    fn new(w: World) -> Self {
        Rolled {
            base: ClusterCreateScenario(w),
            before: Mutex::default(),
        }
    }

    fn w(&self) -> &World {
        &self.base.0
    }

    async fn running(&self) -> (ClusterId, Vec<Node>) {
        let id = self.base.running_cluster().await;
        let nodes = meson_db::clusters::nodes(&self.w().db.pool, id)
            .await
            .unwrap();
        assert_eq!(nodes.len(), 2);
        (id, nodes)
    }

    fn remember(&self, action: ActionId, cluster: ClusterId, nodes: Vec<Node>) {
        self.before.lock().unwrap().insert(action, (cluster, nodes));
    }

    fn before(&self, action: ActionId) -> (ClusterId, Vec<Node>) {
        self.before.lock().unwrap()[&action].clone()
    }

    /// Every live node ready with exactly its VM and two volumes on AtomOS,
    /// as many as before, nothing else of the cluster there, and every
    /// node that left gone from AtomOS too.
    /// After a success: the cluster is `running`, its nodes accounted for.
    /// Returns it, its nodes before and its nodes now.
    async fn assert_running_again(&self, action: ActionId) -> (Cluster, Vec<Node>, Vec<Node>) {
        let (id, before) = self.before(action);
        let c = meson_db::clusters::get_any(&self.w().db.pool, id)
            .await
            .unwrap();
        assert_eq!(c.status, ClusterStatus::Running);
        let now = self.assert_accounted(id, &before).await;
        (c, before, now)
    }

    async fn assert_accounted(&self, cluster: ClusterId, before: &[Node]) -> Vec<Node> {
        let w = self.w();
        let now = meson_db::clusters::nodes(&w.db.pool, cluster)
            .await
            .unwrap();
        assert_eq!(now.len(), before.len(), "{now:?}");
        for n in &now {
            assert_eq!(n.status, NodeStatus::Ready, "{n:?}");
            assert_eq!(node_on_atomos(w, n), (1, 2), "node {} on AtomOS", n.name);
        }
        for old in before {
            if !now.iter().any(|n| n.id == old.id) {
                assert_eq!(
                    node_on_atomos(w, old),
                    (0, 0),
                    "old node {} leaked",
                    old.name
                );
            }
        }
        assert_eq!(
            w.cluster_on_atomos(cluster),
            (now.len(), 2 * now.len()),
            "no VM or volume beyond the live nodes'"
        );
        now
    }

    async fn assert_failed_clean(&self, action: ActionId) -> Vec<Node> {
        let w = self.w();
        let (id, before) = self.before(action);
        let c = meson_db::clusters::get_any(&w.db.pool, id).await.unwrap();
        assert_eq!(c.status, ClusterStatus::Error);
        assert!(c.error_message.is_some());
        let jobs = meson_db::jobs::for_action(&w.db.pool, action)
            .await
            .unwrap();
        assert!(jobs.iter().all(|j| j.state == "failed"), "{jobs:?}");
        self.assert_accounted(id, &before).await
    }
}

/// Upgrade 1.29.2 → 1.29.8.
struct UpgradeScenario(Rolled);

impl Scenario for UpgradeScenario {
    type W = ClusterUpgrade;

    fn workflow(&self) -> ClusterUpgrade {
        ClusterUpgrade(self.0.w().env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = self.0.w();
        let (id, nodes) = self.0.running().await;
        let (action, _) = w
            .app
            .cluster_upgrade(
                &w.who,
                id,
                &serde_json::json!({"kubernetes_version": "1.29.8"}),
            )
            .await
            .expect("upgrade accepted");
        self.0.remember(action.id, id, nodes);
        action.id
    }

    async fn assert_done(&self, action: ActionId) {
        let (c, before, now) = self.0.assert_running_again(action).await;
        assert_eq!(c.kubernetes_version, "1.29.8");
        for n in &now {
            assert_eq!(n.kubernetes_version, "1.29.8", "{n:?}");
            assert!(
                before.iter().all(|b| b.id != n.id),
                "{} not replaced",
                n.name
            );
        }
    }

    /// Forward-only: whatever was replaced runs the new version; the
    /// others still the old one.
    async fn assert_clean(&self, action: ActionId) {
        let now = self.0.assert_failed_clean(action).await;
        let (_, before) = self.0.before(action);
        for n in &now {
            let replaced = before.iter().all(|b| b.id != n.id);
            let want = if replaced { "1.29.8" } else { "1.29.2" };
            assert_eq!(n.kubernetes_version, want, "{n:?}");
        }
    }
}

impl HasWorld for UpgradeScenario {
    fn world(&self) -> &World {
        self.0.w()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_upgrade_passes_the_workflow_harness() {
    harness(UpgradeScenario(Rolled::new(World::new().await))).await;
}

/// Rotate the credentials of a running cluster.
struct RotateScenario(Rolled);

impl Scenario for RotateScenario {
    type W = ClusterRotateCredentials;

    fn workflow(&self) -> ClusterRotateCredentials {
        ClusterRotateCredentials(self.0.w().env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = self.0.w();
        let (id, nodes) = self.0.running().await;
        let action = w
            .app
            .cluster_rotate_credentials(&w.who, id)
            .await
            .expect("rotation accepted");
        self.0.remember(action.id, id, nodes);
        action.id
    }

    async fn assert_done(&self, action: ActionId) {
        let w = self.0.w();
        let (c, before, now) = self.0.assert_running_again(action).await;
        let id = c.id;
        // The control-plane node is new; the worker is the same.
        for (b, n) in before.iter().zip(&now) {
            assert_eq!(b.role, n.role);
            let same = b.id == n.id;
            assert_eq!(same, n.pool.is_some(), "{n:?}");
        }
        let sealed = meson_db::clusters::secrets(&w.db.pool, id)
            .await
            .unwrap()
            .unwrap();
        let s = meson_kaas::sealed::open_secrets(&w.env.config.secrets_key, id, &sealed)
            .expect("secrets open");
        assert!(!s.rotation_pending());
        assert_eq!(s.revoked_token_ids().len(), 1);
        assert_ne!(s.admin_ca(), s.cluster_ca());
    }

    /// Forward-only: the pending credentials stay for the next rotation.
    async fn assert_clean(&self, action: ActionId) {
        self.0.assert_failed_clean(action).await;
    }
}

impl HasWorld for RotateScenario {
    fn world(&self) -> &World {
        self.0.w()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_credentials_rotation_passes_the_workflow_harness() {
    harness(RotateScenario(Rolled::new(World::new().await))).await;
}
