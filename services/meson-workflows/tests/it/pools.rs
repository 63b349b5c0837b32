//! The generic workflow harness run against the node pool workflows: a new
//! pool, a pool scaled up, one scaled down, and one deleted, each on a
//! running cluster of its own.
//!
//! Every run accounts for the whole simulator: what is on it afterwards is
//! what was there before, minus every node the run removed (its VM and both
//! volumes), plus every node it added and kept. A node is there entirely or
//! not at all.

use crate::clusters::ClusterCreateScenario;
use crate::world::{HasWorld, World, harness};
use meson_core::cluster::{ClusterStatus, Node, NodeStatus};
use meson_core::{ActionId, ClusterId, PoolId, naming};
use meson_jobs::testing::Scenario;
use meson_workflows::cluster_create::ClusterCreate;
use meson_workflows::node_pool_create::NodePoolCreate;
use meson_workflows::node_pool_delete::NodePoolDelete;
use meson_workflows::node_pool_scale::NodePoolScale;
use std::collections::BTreeSet;
use std::sync::Mutex;

/// VM and volume names on every simulated host.
#[derive(Clone, Debug, Default, PartialEq)]
struct Inventory {
    vms: BTreeSet<String>,
    volumes: BTreeSet<String>,
}

fn inventory(w: &World) -> Inventory {
    let mut out = Inventory::default();
    for h in w.sim.hosts() {
        let i = h.inventory();
        out.vms.extend(i.vms.into_iter().map(|v| v.name));
        out.volumes.extend(i.volumes.into_iter().map(|v| v.name));
    }
    out
}

/// A worker node's VM and volume names on AtomOS.
fn names_of(cluster: ClusterId, n: &Node) -> (String, [String; 2]) {
    (
        naming::node_atomos_name(
            cluster,
            false,
            n.vm,
            &meson_core::TenantId("harness".into()),
        ),
        [
            naming::vm_boot_volume_name(n.vm),
            naming::vm_cloudinit_volume_name(n.vm),
        ],
    )
}

/// What a run started from.
#[derive(Clone)]
struct Before {
    cluster: ClusterId,
    pool: Option<PoolId>,
    /// The pool's nodes.
    nodes: Vec<Node>,
    inventory: Inventory,
}

/// What every pool scenario shares: a world, running clusters, and the
/// state the current run started from.
struct Pools {
    c: ClusterCreateScenario,
    before: Mutex<Option<Before>>,
}

impl Pools {
    async fn new() -> Pools {
        Pools {
            c: ClusterCreateScenario(World::new().await),
            before: Mutex::new(None),
        }
    }

    fn w(&self) -> &World {
        &self.c.0
    }

    /// A running cluster whose first pool has `workers` nodes (1 to 3).
    async fn running(&self, workers: u32) -> (ClusterId, PoolId) {
        let w = self.w();
        let id = if workers == 1 {
            self.c.running_cluster().await
        } else {
            let c = self.c.accept(workers).await;
            let a = w.run_plain(ClusterCreate(w.env.clone()), c.action.id).await;
            assert_eq!(a.error, None);
            c.view.cluster.id
        };
        let pools = meson_db::clusters::pools(&w.db.pool, id).await.unwrap();
        (id, pools[0].id)
    }

    async fn pool_nodes(&self, cluster: ClusterId, pool: Option<PoolId>) -> Vec<Node> {
        meson_db::clusters::nodes(&self.w().db.pool, cluster)
            .await
            .unwrap()
            .into_iter()
            .filter(|n| pool.is_some() && n.pool == pool)
            .collect()
    }

    /// Notes the state a run starts from.
    async fn remember(&self, cluster: ClusterId, pool: Option<PoolId>) {
        let before = Before {
            cluster,
            pool,
            nodes: self.pool_nodes(cluster, pool).await,
            inventory: inventory(self.w()),
        };
        *self.before.lock().unwrap() = Some(before);
    }

    fn set_pool(&self, pool: PoolId) {
        self.before.lock().unwrap().as_mut().expect("started").pool = Some(pool);
    }

    fn before(&self) -> Before {
        self.before.lock().unwrap().clone().expect("started")
    }

    async fn cluster_status(&self) -> (ClusterStatus, Option<String>) {
        let c = meson_db::clusters::get_any(&self.w().db.pool, self.before().cluster)
            .await
            .unwrap();
        (c.status, c.error_message)
    }

    /// The pool's live nodes now, after checking that the simulator holds
    /// exactly what they account for, that no node is left half removed,
    /// and that every removed node's address is free again.
    async fn accounted(&self) -> Vec<Node> {
        let w = self.w();
        let b = self.before();
        let live = self.pool_nodes(b.cluster, b.pool).await;
        let mut want = b.inventory.clone();
        for gone in b
            .nodes
            .iter()
            .filter(|n| !live.iter().any(|l| l.id == n.id))
        {
            let (vm, volumes) = names_of(b.cluster, gone);
            want.vms.remove(&vm);
            for v in volumes {
                want.volumes.remove(&v);
            }
            let nics = meson_db::networks::attachments_of(&w.db.pool, &[gone.vm])
                .await
                .unwrap();
            assert!(nics.is_empty(), "{} keeps its address: {nics:?}", gone.name);
        }
        for new in live
            .iter()
            .filter(|n| !b.nodes.iter().any(|o| o.id == n.id))
        {
            let (vm, volumes) = names_of(b.cluster, new);
            want.vms.insert(vm);
            want.volumes.extend(volumes);
        }
        assert_eq!(
            inventory(w),
            want,
            "the simulator holds exactly the pool's nodes"
        );
        assert!(
            live.iter().all(|n| n.status != NodeStatus::Deleting),
            "no node left half removed: {live:?}"
        );
        live
    }

    /// Done: the cluster runs and every node of the pool is ready, on an
    /// address of its own.
    async fn assert_running(&self, nodes: usize) -> Vec<Node> {
        let live = self.accounted().await;
        assert_eq!(live.len(), nodes, "{live:?}");
        assert!(
            live.iter().all(|n| n.status == NodeStatus::Ready),
            "{live:?}"
        );
        let (status, message) = self.cluster_status().await;
        assert_eq!((status, message), (ClusterStatus::Running, None));
        let vms: Vec<_> = live.iter().map(|n| n.vm).collect();
        let nics = meson_db::networks::attachments_of(&self.w().db.pool, &vms)
            .await
            .unwrap();
        assert_eq!(nics.len(), live.len());
        live
    }

    /// Failed: the cluster is `error`, with the reason.
    async fn assert_error(&self) {
        let (status, message) = self.cluster_status().await;
        assert_eq!(status, ClusterStatus::Error);
        assert!(message.is_some());
    }

    async fn pool_exists(&self) -> bool {
        let b = self.before();
        let Some(pool) = b.pool else {
            return false;
        };
        meson_db::node_pools::get(&self.w().db.pool, b.cluster, pool)
            .await
            .is_ok()
    }
}

/// A new pool of one node on a running cluster.
struct PoolCreateScenario(Pools);

impl Scenario for PoolCreateScenario {
    type W = NodePoolCreate;

    fn workflow(&self) -> NodePoolCreate {
        NodePoolCreate(self.0.w().env.clone())
    }

    async fn start(&self) -> ActionId {
        let s = &self.0;
        let w = s.w();
        let (cluster, _) = s.running(1).await;
        s.remember(cluster, None).await;
        let c = w
            .app
            .pool_create(
                &w.who,
                cluster,
                &serde_json::json!({"pool_name": "extra", "desired_nodes": 1}),
            )
            .await
            .expect("pool accepted");
        s.set_pool(c.view.pool.id);
        c.action.expect("an action").id
    }

    async fn assert_done(&self, _action: ActionId) {
        assert!(self.0.pool_exists().await);
        self.0.assert_running(1).await;
    }

    /// A pool that could not be made is gone, its name free again.
    async fn assert_clean(&self, _action: ActionId) {
        assert!(!self.0.pool_exists().await, "the pool is removed");
        assert!(self.0.accounted().await.is_empty());
        self.0.assert_error().await;
    }
}

impl HasWorld for PoolCreateScenario {
    fn world(&self) -> &World {
        self.0.w()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_pool_create_passes_the_workflow_harness() {
    harness(PoolCreateScenario(Pools::new().await)).await;
}

/// A pool scaled from `from` nodes to `to` (up or down).
struct ScaleScenario {
    pools: Pools,
    from: u32,
    to: u32,
}

impl ScaleScenario {
    async fn new(from: u32, to: u32) -> Self {
        ScaleScenario {
            pools: Pools::new().await,
            from,
            to,
        }
    }
}

impl Scenario for ScaleScenario {
    type W = NodePoolScale;

    fn workflow(&self) -> NodePoolScale {
        NodePoolScale(self.pools.w().env.clone())
    }

    async fn start(&self) -> ActionId {
        let s = &self.pools;
        let w = s.w();
        let (cluster, pool) = s.running(self.from).await;
        s.remember(cluster, Some(pool)).await;
        let c = w
            .app
            .pool_update(
                &w.who,
                cluster,
                pool,
                &serde_json::json!({"desired_nodes": self.to}),
            )
            .await
            .expect("scale accepted");
        c.action.expect("an action").id
    }

    /// Scaled down, the newest nodes went and the oldest stays.
    async fn assert_done(&self, _action: ActionId) {
        let live = self.pools.assert_running(self.to as usize).await;
        if self.to < self.from {
            let before = self.pools.before().nodes;
            let oldest = before.iter().min_by_key(|n| (n.created, n.id)).unwrap();
            assert_eq!(live[0].id, oldest.id);
        }
    }

    /// Up: the nodes the scale added are gone, the first ones untouched.
    /// Down: removing is forward-only, so each node is there entirely or
    /// not at all.
    async fn assert_clean(&self, _action: ActionId) {
        let live = self.pools.accounted().await;
        if self.to > self.from {
            let before: Vec<_> = self.pools.before().nodes.iter().map(|n| n.id).collect();
            assert_eq!(live.iter().map(|n| n.id).collect::<Vec<_>>(), before);
            assert!(
                live.iter().all(|n| n.status == NodeStatus::Ready),
                "{live:?}"
            );
        } else {
            assert!(
                (self.to..=self.from).contains(&(live.len() as u32)),
                "{live:?}"
            );
        }
        self.pools.assert_error().await;
    }
}

impl HasWorld for ScaleScenario {
    fn world(&self) -> &World {
        self.pools.w()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_pool_scale_up_passes_the_workflow_harness() {
    harness(ScaleScenario::new(1, 2).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_pool_scale_down_passes_the_workflow_harness() {
    harness(ScaleScenario::new(2, 1).await).await;
}

/// A second pool of one node, then its delete.
struct PoolDeleteScenario(Pools);

impl Scenario for PoolDeleteScenario {
    type W = NodePoolDelete;

    fn workflow(&self) -> NodePoolDelete {
        NodePoolDelete(self.0.w().env.clone())
    }

    async fn start(&self) -> ActionId {
        let s = &self.0;
        let w = s.w();
        let (cluster, _) = s.running(1).await;
        let c = w
            .app
            .pool_create(
                &w.who,
                cluster,
                &serde_json::json!({"pool_name": "extra", "desired_nodes": 1}),
            )
            .await
            .expect("pool accepted");
        let a = w
            .run_plain(
                NodePoolCreate(w.env.clone()),
                c.action.expect("an action").id,
            )
            .await;
        assert_eq!(a.error, None);
        let pool = c.view.pool.id;
        s.remember(cluster, Some(pool)).await;
        w.app
            .pool_delete(&w.who, cluster, pool)
            .await
            .expect("delete accepted")
            .id
    }

    async fn assert_done(&self, _action: ActionId) {
        assert!(!self.0.pool_exists().await, "the pool is gone");
        assert!(self.0.accounted().await.is_empty(), "and all its nodes");
        let (status, _) = self.0.cluster_status().await;
        assert_eq!(status, ClusterStatus::Running);
    }

    /// A failed delete leaves the cluster in `error` and every node whole
    /// or gone; deleting again finishes the job.
    async fn assert_clean(&self, action: ActionId) {
        self.0.accounted().await;
        self.0.assert_error().await;
        if !self.0.pool_exists().await {
            // It failed after forgetting the pool: nothing is left of it.
            assert!(self.0.accounted().await.is_empty());
            return;
        }
        let w = self.0.w();
        let b = self.0.before();
        let again = w
            .app
            .pool_delete(&w.who, b.cluster, b.pool.unwrap())
            .await
            .expect("delete accepted again");
        let a = w.run_plain(NodePoolDelete(w.env.clone()), again.id).await;
        assert_eq!(a.error, None);
        self.assert_done(action).await;
    }
}

impl HasWorld for PoolDeleteScenario {
    fn world(&self) -> &World {
        self.0.w()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_pool_delete_passes_the_workflow_harness() {
    harness(PoolDeleteScenario(Pools::new().await)).await;
}
