//! The world every scenario runs in: a database, the simulator as AtomOS,
//! meson's API (for the nodes' phone-home calls) and the app layer.

use crate::seeds::seed_vm;
use meson_api::{App, Principal, Role};
use meson_core::action::ResourceType;
use meson_core::vm::VmStatus;
use meson_core::{ActionId, NetworkId, TenantId, VmId};
use meson_db::testing::TestDatabase;
use meson_jobs::testing::{Harness, Scenario, test_worker_config, wait_final};
use meson_jobs::{Worker, Workflow};
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
            images_gb: 1 << 40,
        };
        let who = Principal {
            tenant: TenantId("harness".into()),
            subject: "test".into(),
            role: Role::Admin,
            email: None,
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
    pub(crate) async fn create_request(&self) -> (VmId, ActionId) {
        self.create_request_on(self.network).await
    }

    /// Accepts a create request for a VM on `network`.
    pub(crate) async fn create_request_on(&self, network: NetworkId) -> (VmId, ActionId) {
        self.create_request_with("h", "networks", network.to_string())
            .await
    }

    /// The VM row (it must exist).
    pub(crate) async fn vm(&self, id: VmId) -> meson_core::vm::Vm {
        meson_db::vms::get_any(&self.db.pool, id).await.unwrap()
    }

    /// Accepts a create request for a VM named `<prefix>-<n>`, with `field`
    /// (`networks`, `volumes`) the one id `id`.
    pub(crate) async fn create_request_with(
        &self,
        prefix: &str,
        field: &str,
        id: String,
    ) -> (VmId, ActionId) {
        let mut body = seed_vm();
        body["specs"]["vm_name"] =
            format!("{prefix}-{}", self.names.fetch_add(1, Ordering::SeqCst)).into();
        body[field] = serde_json::json!([id]);
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

    pub(crate) async fn vm_of(&self, action: ActionId) -> VmId {
        let a = meson_db::actions::get(&self.db.pool, None, action)
            .await
            .unwrap();
        a.resources
            .iter()
            .find(|(t, _)| *t == ResourceType::Vm)
            .map(|(_, id)| VmId(*id))
            .unwrap()
    }

    /// (VMs, volumes) of this cluster's nodes on every simulated host.
    pub(crate) fn cluster_on_atomos(&self, cluster: meson_core::ClusterId) -> (usize, usize) {
        let prefix = format!("k{}", &cluster.0.simple().to_string()[..12]);
        let mut out = (0, 0);
        for h in self.sim.hosts() {
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
        }
        out
    }

    /// (VMs, volumes) on every simulated host carrying this VM's name.
    pub(crate) fn on_atomos(&self, vm: VmId) -> (usize, usize) {
        // The VM's name and its volumes' start so (`vm-<id>-`).
        let prefix = meson_core::naming::vm_volume_prefix(vm);
        self.sim
            .hosts()
            .iter()
            .map(|h| h.inventory())
            .fold((0, 0), |(v, d), i| {
                (
                    v + i.vms.iter().filter(|x| x.name.starts_with(&prefix)).count(),
                    d + i
                        .volumes
                        .iter()
                        .filter(|x| x.name.starts_with(&prefix))
                        .count(),
                )
            })
    }

    pub(crate) async fn assert_running(&self, vm: VmId) {
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
    pub(crate) fn named_networks_on_atomos(&self, id: NetworkId) -> usize {
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
    pub(crate) fn networks_on_atomos(&self) -> usize {
        self.sim
            .hosts()
            .iter()
            .map(|h| h.inventory().networks.len())
            .sum()
    }

    /// Nothing of this VM left on AtomOS, and its rows say so.
    pub(crate) async fn assert_gone_from_atomos(&self, vm: VmId) {
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
