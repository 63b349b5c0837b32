//! The generic workflow harness run against the cluster create and delete.

use crate::world::{HasWorld, World, harness};
use meson_core::action::ResourceType;
use meson_core::{ActionId, NetworkId};
use meson_jobs::testing::Scenario;
use std::sync::atomic::Ordering;

/// A small cluster (one control-plane node, one worker) per run.
pub(crate) struct ClusterCreateScenario(pub(crate) World);

impl ClusterCreateScenario {
    pub(crate) async fn cluster_of(&self, action: ActionId) -> meson_core::ClusterId {
        let a = meson_db::actions::get(&self.0.db.pool, None, action)
            .await
            .unwrap();
        a.resources
            .iter()
            .find(|(t, _)| *t == ResourceType::Cluster)
            .map(|(_, id)| meson_core::ClusterId(*id))
            .unwrap()
    }

    /// (VMs, volumes, networks) of this cluster on every simulated host.
    fn on_atomos(
        &self,
        cluster: meson_core::ClusterId,
        network: NetworkId,
    ) -> (usize, usize, usize) {
        let net = meson_core::naming::network_atomos_name(network);
        let w = &self.0;
        let (vms, volumes) = w.cluster_on_atomos(cluster);
        let networks = w
            .sim
            .hosts()
            .iter()
            .map(|h| {
                h.inventory()
                    .networks
                    .iter()
                    .filter(|n| n.name == net)
                    .count()
            })
            .sum();
        (vms, volumes, networks)
    }
}

impl ClusterCreateScenario {
    /// Accepts the create of a cluster of one control-plane node and a
    /// pool of `workers`, named afresh.
    pub(crate) async fn accept(&self, workers: u32) -> meson_api::app::ClusterCreated {
        let w = &self.0;
        let mut body = crate::seeds::seed_kaas();
        body["req"]["name"] = format!("c{}", w.names.fetch_add(1, Ordering::SeqCst)).into();
        body["req"]["nodepool"][0]["desired_nodes"] = workers.into();
        body["req"]["nodepool"][0]["min_nodes"] = 1.into();
        w.app
            .cluster_create(&w.who, &body)
            .await
            .expect("cluster accepted")
    }

    /// Accepts a small cluster's create (1 control-plane node, 1 worker).
    pub(crate) async fn create_request(&self) -> ActionId {
        self.accept(1).await.action.id
    }

    /// A running small cluster; returns its id.
    pub(crate) async fn running_cluster(&self) -> meson_core::ClusterId {
        let w = &self.0;
        let create = self.create_request().await;
        let a = w
            .run_plain(
                meson_workflows::cluster_create::ClusterCreate(w.env.clone()),
                create,
            )
            .await;
        assert_eq!(a.error, None);
        self.cluster_of(create).await
    }
}

impl Scenario for ClusterCreateScenario {
    type W = meson_workflows::cluster_create::ClusterCreate;

    fn workflow(&self) -> Self::W {
        meson_workflows::cluster_create::ClusterCreate(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        self.create_request().await
    }

    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        let id = self.cluster_of(action).await;
        let c = meson_db::clusters::get_any(&w.db.pool, id).await.unwrap();
        assert_eq!(c.status, meson_core::cluster::ClusterStatus::Running);
        let nodes = meson_db::clusters::nodes(&w.db.pool, id).await.unwrap();
        assert_eq!(nodes.len(), 2);
        assert!(
            nodes
                .iter()
                .all(|n| n.status == meson_core::cluster::NodeStatus::Ready),
            "{nodes:?}"
        );
        let (vms, vols, nets) = self.on_atomos(id, c.network);
        assert_eq!(
            (vms, vols),
            (2, 4),
            "two nodes, a boot disk and an ISO each, no duplicates"
        );
        assert!(nets >= 1);
    }

    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let id = self.cluster_of(action).await;
        let c = meson_db::clusters::get_any(&w.db.pool, id).await.unwrap();
        assert_eq!(c.status, meson_core::cluster::ClusterStatus::Error);
        assert!(c.error_message.is_some());
        assert_eq!(
            self.on_atomos(id, c.network),
            (0, 0, 0),
            "nothing left on AtomOS"
        );
        // Volumes made but never attached (a crash before register) too.
        for n in meson_db::clusters::nodes(&w.db.pool, id).await.unwrap() {
            assert_eq!(w.on_atomos(n.vm), (0, 0), "node {} leaked", n.name);
        }
    }
}

impl HasWorld for ClusterCreateScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_create_passes_the_workflow_harness() {
    harness(ClusterCreateScenario(World::new().await)).await;
}

/// Delete a running cluster.
struct ClusterDeleteScenario(ClusterCreateScenario);

impl Scenario for ClusterDeleteScenario {
    type W = meson_workflows::cluster_delete::ClusterDelete;

    fn workflow(&self) -> Self::W {
        meson_workflows::cluster_delete::ClusterDelete(self.0.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0.0;
        let id = self.0.running_cluster().await;
        w.app
            .cluster_delete(&w.who, id)
            .await
            .expect("delete accepted")
            .id
    }

    async fn assert_done(&self, action: ActionId) {
        let w = &self.0.0;
        let id = self.0.cluster_of(action).await;
        assert!(
            meson_db::clusters::get_any(&w.db.pool, id).await.is_err(),
            "gone"
        );
        let c = meson_db::clusters::get_including_deleted(&w.db.pool, id)
            .await
            .unwrap();
        assert_eq!(self.0.on_atomos(id, c.network), (0, 0, 0));
        assert!(
            meson_db::networks::get_any(&w.db.pool, c.network)
                .await
                .is_err()
        );
        assert!(
            meson_db::clusters::nodes(&w.db.pool, id)
                .await
                .unwrap()
                .is_empty()
        );
    }

    /// A failed delete leaves the cluster in `error`; deleting again cleans up.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0.0;
        let id = self.0.cluster_of(action).await;
        if meson_db::clusters::get_any(&w.db.pool, id).await.is_ok() {
            let again = w
                .app
                .cluster_delete(&w.who, id)
                .await
                .expect("delete accepted again");
            let a = w
                .run_plain(
                    meson_workflows::cluster_delete::ClusterDelete(w.env.clone()),
                    again.id,
                )
                .await;
            assert_eq!(a.error, None);
        }
        self.assert_done(action).await;
    }
}

impl HasWorld for ClusterDeleteScenario {
    fn world(&self) -> &World {
        &self.0.0
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_delete_passes_the_workflow_harness() {
    harness(ClusterDeleteScenario(ClusterCreateScenario(
        World::new().await,
    )))
    .await;
}

/// A node group (here a pool of three, each node's VM named after it) is
/// placed by one decision: right after `place_nodes`, before any node is
/// brought up, every member has its host, the three spread over three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_of_several_nodes_is_placed_at_once() {
    let c = ClusterCreateScenario(World::new().await);
    let w = &c.0;
    let created = c.accept(3).await;
    let cluster = created.view.cluster;
    let workers: Vec<meson_core::cluster::Node> = meson_db::clusters::nodes(&w.db.pool, cluster.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|n| n.role == meson_core::cluster::NodeRole::Worker)
        .collect();
    assert_eq!(workers.len(), 3);
    meson_workflows::nodes::place_nodes(&w.env, &cluster, &workers)
        .await
        .expect("placed");
    let ids: Vec<meson_core::VmId> = workers.iter().map(|n| n.vm).collect();
    let hosts: std::collections::BTreeSet<String> = meson_db::vms::get_many(&w.db.pool, &ids)
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.placement.expect("placed with its group").host)
        .collect();
    assert_eq!(hosts.len(), 3, "{hosts:?}");
}
