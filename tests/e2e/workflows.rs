//! The generic workflow harness (meson_jobs::testing) run against the VM
//! create and delete workflows, with the simulator as AtomOS.

use crate::harness::seed_vm;
use meson_api::{App, Principal, Role};
use meson_core::action::ResourceType;
use meson_core::vm::VmStatus;
use meson_core::{ActionId, NetworkId, TenantId, VmId};
use meson_db::testing::TestDatabase;
use meson_jobs::testing::{Harness, Scenario, test_worker_config, wait_final};
use meson_jobs::{Worker, Workflow};
use meson_workflows::vm_create::VmCreate;
use meson_workflows::vm_delete::VmDelete;
use meson_workflows::{Atomos, Env, WorkflowConfig};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// A database, a simulator registered as targets, and the app layer.
pub(crate) struct World {
    pub(crate) db: TestDatabase,
    pub(crate) sim: atomos_sim::Simulator,
    pub(crate) env: Arc<Env>,
    pub(crate) app: App,
    pub(crate) who: Principal,
    pub(crate) names: AtomicU32,
    /// A network without DHCP every created VM joins, so the harness covers
    /// the networks step and meson's IPAM too.
    pub(crate) network: NetworkId,
    /// Receives the nodes' phone-home calls (kept alive with the world).
    _api: mesond::server::ApiServer,
}

impl World {
    pub(crate) async fn new() -> World {
        let db = TestDatabase::new().await;
        let sim = atomos_sim::start(atomos_sim::SimConfig {
            hosts: atomos_sim::dev_hosts(),
            boot_time: Duration::from_millis(30),
            bind: [127, 0, 0, 1].into(),
            state: None,
        })
        .await
        .expect("simulator");
        mesond::server::register_targets(&db.pool, &sim.targets())
            .await
            .expect("targets");
        let api = mesond::server::ApiServer::start(
            "127.0.0.1:0".parse().unwrap(),
            db.api_pool(),
            mesond::server::ApiSettings::new(meson_api::auth::Auth::hs256(&[7; 32], "harness")),
        )
        .await
        .expect("api");
        let env = Arc::new(Env {
            pool: db.pool.clone(),
            atomos: Atomos::new(db.pool.clone(), atomos_driver_options()),
            config: WorkflowConfig {
                vm_boot_timeout: Duration::from_secs(10),
                poll_interval: Duration::from_millis(10),
                node_ready_timeout: Duration::from_secs(10),
                public_url: format!("http://{}", api.addr),
                ..WorkflowConfig::default()
            },
        });
        let mut app = App::new(db.pool.clone());
        // A world runs every scenario many times over: no quota in the way.
        app.quotas = meson_core::quota::Resources {
            vms: 1 << 20,
            vcpus: 1 << 30,
            ram_mib: 1 << 40,
            storage_gb: 1 << 40,
            clusters: 1 << 20,
            nodes: 1 << 20,
        };
        let who = Principal {
            tenant: TenantId("harness".into()),
            subject: "test".into(),
            role: Role::Admin,
        };
        let (net, _) = app
            .network_create(
                &who,
                &serde_json::json!({"name": "harness", "cidr": "192.168.77.0/24", "dhcp": false}),
            )
            .await
            .expect("network");
        World {
            app,
            who,
            db,
            sim,
            env,
            names: AtomicU32::new(0),
            network: net.id,
            _api: api,
        }
    }

    /// Accepts a create request through the app layer, as the API would.
    async fn create_request(&self) -> (VmId, ActionId) {
        self.create_request_on(self.network).await
    }

    /// Accepts a create request for a VM on `network`.
    async fn create_request_on(&self, network: NetworkId) -> (VmId, ActionId) {
        let mut body = seed_vm();
        body["specs"]["vm_name"] =
            format!("h-{}", self.names.fetch_add(1, Ordering::SeqCst)).into();
        body["networks"] = serde_json::json!([network.to_string()]);
        let c = self
            .app
            .vm_create(&self.who, &body)
            .await
            .expect("create accepted");
        (c.vm.id, c.action.id)
    }

    /// Runs one workflow kind with a plain worker until `action` is final.
    pub(crate) async fn run_plain<W: Workflow>(
        &self,
        wf: W,
        action: ActionId,
    ) -> meson_core::action::Action {
        let w = Worker::new(self.db.pool.clone(), test_worker_config())
            .register(wf)
            .start();
        let a = wait_final(&self.db.pool, action).await;
        w.shutdown().await;
        a
    }

    async fn vm_of(&self, action: ActionId) -> VmId {
        let a = meson_db::actions::get(&self.db.pool, None, action)
            .await
            .unwrap();
        a.resources
            .iter()
            .find(|(t, _)| *t == ResourceType::Vm)
            .map(|(_, id)| VmId(*id))
            .unwrap()
    }

    /// (VMs, volumes) on every simulated host carrying this VM's name.
    pub(crate) fn on_atomos(&self, vm: VmId) -> (usize, usize) {
        let prefix = meson_core::naming::vm_atomos_name(vm);
        self.sim
            .hosts()
            .iter()
            .map(|h| h.inventory())
            .fold((0, 0), |(v, d), i| {
                (
                    v + i.vms.iter().filter(|x| x.name == prefix).count(),
                    d + i
                        .volumes
                        .iter()
                        .filter(|x| x.name.starts_with(&prefix))
                        .count(),
                )
            })
    }

    async fn assert_running(&self, vm: VmId) {
        let v = meson_db::vms::get_any(&self.db.pool, vm)
            .await
            .expect("vm exists");
        assert_eq!(v.status, VmStatus::Running);
        assert!(v.ipv4.is_some() && v.atomos_id.is_some() && v.placement.is_some());
        let vols = meson_db::volumes::list_for_vms(&self.db.pool, &[vm])
            .await
            .unwrap();
        assert_eq!(vols.len(), 3);
        assert!(vols.iter().all(|x| x.atomos_id.is_some()), "{vols:?}");
        assert_eq!(
            self.on_atomos(vm),
            (1, 3),
            "exactly one VM and its three volumes, no duplicates"
        );
        // Its static address is what the guest configured and AtomOS reports.
        let nics = meson_db::networks::attachments_of(&self.db.pool, &[vm])
            .await
            .unwrap();
        assert_eq!(nics.len(), 1);
        assert_eq!(nics[0].address, v.ipv4, "{nics:?} {v:?}");
        let hosts = meson_db::networks::host_networks(&self.db.pool, self.network)
            .await
            .unwrap();
        assert!(hosts.iter().all(|h| h.atomos_id.is_some()), "{hosts:?}");
        assert_eq!(
            self.named_networks_on_atomos(self.network),
            hosts.len(),
            "one network per host, no duplicates"
        );
    }

    /// Copies of one network on the simulated hosts.
    fn named_networks_on_atomos(&self, id: NetworkId) -> usize {
        let name = meson_core::naming::network_atomos_name(id);
        self.sim
            .hosts()
            .iter()
            .map(|h| {
                h.inventory()
                    .networks
                    .iter()
                    .filter(|n| n.name == name)
                    .count()
            })
            .sum()
    }

    /// Networks (of any name) on every simulated host.
    fn networks_on_atomos(&self) -> usize {
        self.sim
            .hosts()
            .iter()
            .map(|h| h.inventory().networks.len())
            .sum()
    }

    /// Nothing of this VM left on AtomOS, and its rows say so.
    async fn assert_gone_from_atomos(&self, vm: VmId) {
        assert_eq!(self.on_atomos(vm), (0, 0), "leaked on AtomOS");
        if let Ok(v) = meson_db::vms::get_any(&self.db.pool, vm).await {
            assert!(
                v.placement.is_none() || v.status == VmStatus::Error,
                "{v:?}"
            );
        }
    }
}

fn atomos_driver_options() -> atomos_driver::ClientOptions {
    atomos_driver::ClientOptions {
        timeout: Duration::from_secs(5),
        ..atomos_driver::ClientOptions::default()
    }
}

struct CreateScenario(World);

impl Scenario for CreateScenario {
    type W = VmCreate;

    fn workflow(&self) -> VmCreate {
        VmCreate(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        self.0.create_request().await.1
    }

    async fn assert_done(&self, action: ActionId) {
        let vm = self.0.vm_of(action).await;
        self.0.assert_running(vm).await;
        let reserved = meson_db::reservations::pending(&self.0.db.pool, VmId::new())
            .await
            .unwrap();
        assert!(
            reserved.is_empty(),
            "a registered VM reserves nothing: {reserved:?}"
        );
    }

    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let vm = w.vm_of(action).await;
        let v = meson_db::vms::get_any(&w.db.pool, vm)
            .await
            .expect("vm row stays, in error");
        assert_eq!(v.status, VmStatus::Error);
        assert!(v.placement.is_none(), "placement undone");
        let reserved = meson_db::reservations::pending(&w.db.pool, VmId::new())
            .await
            .unwrap();
        assert!(reserved.is_empty(), "reservation released: {reserved:?}");
        assert!(v.ipv4.is_none() && v.atomos_id.is_none());
        let vols = meson_db::volumes::list_for_vms(&w.db.pool, &[vm])
            .await
            .unwrap();
        assert!(
            vols.iter().all(|x| x.atomos_id.is_none()),
            "no volume row points at AtomOS: {vols:?}"
        );
        w.assert_gone_from_atomos(vm).await;
        let jobs = meson_db::jobs::for_action(&w.db.pool, action)
            .await
            .unwrap();
        assert!(jobs.iter().all(|j| j.state == "failed"), "{jobs:?}");
    }
}

struct DeleteScenario(World);

impl Scenario for DeleteScenario {
    type W = VmDelete;

    fn workflow(&self) -> VmDelete {
        VmDelete(self.0.env.clone())
    }

    /// A running VM, then its delete request.
    async fn start(&self) -> ActionId {
        let w = &self.0;
        let (vm, create) = w.create_request().await;
        let a = w.run_plain(VmCreate(w.env.clone()), create).await;
        assert_eq!(a.error, None);
        w.app
            .vm_delete(&w.who, vm)
            .await
            .expect("delete accepted")
            .id
    }

    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        let vm = w.vm_of(action).await;
        assert!(
            meson_db::vms::get_any(&w.db.pool, vm).await.is_err(),
            "the VM is gone"
        );
        assert_eq!(w.on_atomos(vm), (0, 0));
    }

    /// A delete that failed leaves the VM in `error`; deleting again cleans up.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let vm = w.vm_of(action).await;
        if meson_db::vms::get_any(&w.db.pool, vm).await.is_ok() {
            let again = w
                .app
                .vm_delete(&w.who, vm)
                .await
                .expect("delete accepted again");
            let a = w.run_plain(VmDelete(w.env.clone()), again.id).await;
            assert_eq!(a.error, None);
        }
        assert!(meson_db::vms::get_any(&w.db.pool, vm).await.is_err());
        assert_eq!(w.on_atomos(vm), (0, 0), "nothing left on AtomOS");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vm_create_passes_the_workflow_harness() {
    harness(CreateScenario(World::new().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vm_delete_passes_the_workflow_harness() {
    harness(DeleteScenario(World::new().await)).await;
}

/// Power off (or reboot) a running VM.
struct PowerScenario<O>(World, std::marker::PhantomData<O>);

impl<O: meson_workflows::vm_power::PowerOp> Scenario for PowerScenario<O> {
    type W = meson_workflows::vm_power::VmPower<O>;

    fn workflow(&self) -> Self::W {
        meson_workflows::vm_power::VmPower::new(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let (vm, create) = w.create_request().await;
        assert_eq!(
            w.run_plain(VmCreate(w.env.clone()), create).await.error,
            None
        );
        let op = if O::KIND == "vm_poweroff" {
            meson_api::app::PowerAction::Off
        } else {
            meson_api::app::PowerAction::Reboot
        };
        w.app
            .vm_power(&w.who, vm, op)
            .await
            .expect("power action accepted")
            .id
    }

    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        let vm = w.vm_of(action).await;
        let v = meson_db::vms::get_any(&w.db.pool, vm).await.unwrap();
        let want = if O::KIND == "vm_poweroff" {
            VmStatus::Off
        } else {
            VmStatus::Running
        };
        assert_eq!(v.status, want);
        assert_eq!(
            w.on_atomos(vm),
            (1, 3),
            "power actions create and destroy nothing"
        );
    }

    /// A failed power action leaves the VM in the state AtomOS reports, not
    /// stuck in `stopping`/`starting`, and everything it owns in place.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let vm = w.vm_of(action).await;
        let v = meson_db::vms::get_any(&w.db.pool, vm).await.unwrap();
        assert!(
            matches!(v.status, VmStatus::Running | VmStatus::Off),
            "{:?}",
            v.status
        );
        assert_eq!(w.on_atomos(vm), (1, 3));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vm_poweroff_passes_the_workflow_harness() {
    harness(PowerScenario::<meson_workflows::vm_power::PowerOff>(
        World::new().await,
        std::marker::PhantomData,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vm_reboot_passes_the_workflow_harness() {
    harness(PowerScenario::<meson_workflows::vm_power::Reboot>(
        World::new().await,
        std::marker::PhantomData,
    ))
    .await;
}

/// Runs the whole harness against a scenario built on a [`World`].
pub(crate) async fn harness<S: Scenario + HasWorld>(s: S) {
    Harness {
        pool: &s.world().db.pool,
        scenario: &s,
    }
    .run_all()
    .await;
}

pub(crate) trait HasWorld {
    fn world(&self) -> &World;
}

impl HasWorld for CreateScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl HasWorld for DeleteScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl<O> HasWorld for PowerScenario<O> {
    fn world(&self) -> &World {
        &self.0
    }
}

/// Delete a network that a VM used (so it exists on a host); a new network
/// for every run.
struct NetworkDeleteScenario(World, std::sync::Mutex<Option<NetworkId>>);

impl NetworkDeleteScenario {
    fn current(&self) -> NetworkId {
        self.1.lock().unwrap().expect("started")
    }
}

impl Scenario for NetworkDeleteScenario {
    type W = meson_workflows::network_delete::NetworkDelete;

    fn workflow(&self) -> Self::W {
        meson_workflows::network_delete::NetworkDelete(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let n = w.names.fetch_add(1, Ordering::SeqCst);
        let (net, _) = w
            .app
            .network_create(
                &w.who,
                &serde_json::json!({"name": format!("nd-{n}"), "cidr": "10.9.0.0/16"}),
            )
            .await
            .expect("network");
        *self.1.lock().unwrap() = Some(net.id);
        let before = w.networks_on_atomos();
        let (vm, create) = w.create_request_on(net.id).await;
        assert_eq!(
            w.run_plain(VmCreate(w.env.clone()), create).await.error,
            None
        );
        let del = w
            .app
            .vm_delete(&w.who, vm)
            .await
            .expect("vm delete accepted");
        assert_eq!(
            w.run_plain(VmDelete(w.env.clone()), del.id).await.error,
            None
        );
        assert_eq!(w.networks_on_atomos(), before + 1);
        w.app
            .network_delete(&w.who, net.id)
            .await
            .expect("network delete accepted")
            .id
    }

    async fn assert_done(&self, _action: ActionId) {
        let w = &self.0;
        let id = self.current();
        assert_eq!(w.named_networks_on_atomos(id), 0);
        assert!(meson_db::networks::get_any(&w.db.pool, id).await.is_err());
        assert!(
            meson_db::networks::host_networks(&w.db.pool, id)
                .await
                .unwrap()
                .is_empty()
        );
    }

    /// A failed delete leaves the network usable; deleting again cleans up.
    async fn assert_clean(&self, _action: ActionId) {
        let w = &self.0;
        let id = self.current();
        if let Ok(n) = meson_db::networks::get_any(&w.db.pool, id).await {
            assert_eq!(n.status, meson_core::network::NetworkStatus::Available);
            let again = w
                .app
                .network_delete(&w.who, id)
                .await
                .expect("delete accepted again");
            let a = w
                .run_plain(
                    meson_workflows::network_delete::NetworkDelete(w.env.clone()),
                    again.id,
                )
                .await;
            assert_eq!(a.error, None);
        }
        assert_eq!(w.named_networks_on_atomos(id), 0, "nothing left on AtomOS");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_delete_passes_the_workflow_harness() {
    harness(NetworkDeleteScenario(
        World::new().await,
        Default::default(),
    ))
    .await;
}

impl HasWorld for NetworkDeleteScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

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
        let prefix = format!("k{}", &cluster.0.simple().to_string()[..12]);
        let net = meson_core::naming::network_atomos_name(network);
        let w = &self.0;
        let mut out = (0, 0, 0);
        for h in w.sim.hosts() {
            let i = h.inventory();
            let vms: Vec<_> = i
                .vms
                .iter()
                .filter(|v| v.name.starts_with(&prefix))
                .collect();
            out.0 += vms.len();
            out.1 += i
                .volumes
                .iter()
                .filter(|v| vms.iter().any(|vm| vm.volume_ids.contains(&v.id)))
                .count();
            out.2 += i.networks.iter().filter(|n| n.name == net).count();
        }
        out
    }
}

impl ClusterCreateScenario {
    /// Accepts a small cluster's create (1 control-plane node, 1 worker).
    pub(crate) async fn create_request(&self) -> ActionId {
        let w = &self.0;
        let mut body = crate::harness::seed_kaas();
        body["req"]["name"] = format!("c{}", w.names.fetch_add(1, Ordering::SeqCst)).into();
        body["req"]["nodepool"][0]["desired_nodes"] = 1.into();
        body["req"]["nodepool"][0]["min_nodes"] = 1.into();
        let c = w
            .app
            .cluster_create(&w.who, &body)
            .await
            .expect("cluster accepted");
        c.action.id
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
