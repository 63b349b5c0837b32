//! The generic workflow harness (meson_jobs::testing) run against the VM
//! create and delete workflows, with the simulator as AtomOS.

use crate::harness::seed_vm;
use meson_api::{App, Principal, Role};
use meson_core::action::ResourceType;
use meson_core::vm::VmStatus;
use meson_core::{ActionId, TenantId, VmId};
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
struct World {
    db: TestDatabase,
    sim: atomos_sim::Simulator,
    env: Arc<Env>,
    app: App,
    who: Principal,
    names: AtomicU32,
}

impl World {
    async fn new() -> World {
        let db = TestDatabase::new().await;
        let sim = atomos_sim::start(atomos_sim::SimConfig {
            hosts: atomos_sim::dev_hosts(),
            boot_time: Duration::from_millis(30),
            bind: [127, 0, 0, 1].into(),
        })
        .await
        .expect("simulator");
        mesond::server::register_targets(&db.pool, &sim.targets())
            .await
            .expect("targets");
        let env = Arc::new(Env {
            pool: db.pool.clone(),
            atomos: Atomos::new(db.pool.clone(), atomos_driver_options()),
            config: WorkflowConfig {
                vm_boot_timeout: Duration::from_secs(10),
                poll_interval: Duration::from_millis(10),
            },
        });
        World {
            app: App::new(db.pool.clone()),
            who: Principal {
                tenant: TenantId("harness".into()),
                subject: "test".into(),
                role: Role::Admin,
            },
            db,
            sim,
            env,
            names: AtomicU32::new(0),
        }
    }

    /// Accepts a create request through the app layer, as the API would.
    async fn create_request(&self) -> (VmId, ActionId) {
        let mut body = seed_vm();
        body["specs"]["vm_name"] =
            format!("h-{}", self.names.fetch_add(1, Ordering::SeqCst)).into();
        let c = self
            .app
            .vm_create(&self.who, &body)
            .await
            .expect("create accepted");
        (c.vm.id, c.action.id)
    }

    /// Runs one workflow kind with a plain worker until `action` is final.
    async fn run_plain<W: Workflow>(&self, wf: W, action: ActionId) -> meson_core::action::Action {
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
    fn on_atomos(&self, vm: VmId) -> (usize, usize) {
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
        let v = meson_db::vms::get(&self.db.pool, None, vm)
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
    }

    /// Nothing of this VM left on AtomOS, and its rows say so.
    async fn assert_gone_from_atomos(&self, vm: VmId) {
        assert_eq!(self.on_atomos(vm), (0, 0), "leaked on AtomOS");
        if let Ok(v) = meson_db::vms::get(&self.db.pool, None, vm).await {
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
    }

    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let vm = w.vm_of(action).await;
        let v = meson_db::vms::get(&w.db.pool, None, vm)
            .await
            .expect("vm row stays, in error");
        assert_eq!(v.status, VmStatus::Error);
        assert!(v.placement.is_none(), "placement undone");
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
            meson_db::vms::get(&w.db.pool, None, vm).await.is_err(),
            "the VM is gone"
        );
        assert_eq!(w.on_atomos(vm), (0, 0));
    }

    /// A delete that failed leaves the VM in `error`; deleting again cleans up.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let vm = w.vm_of(action).await;
        if meson_db::vms::get(&w.db.pool, None, vm).await.is_ok() {
            let again = w
                .app
                .vm_delete(&w.who, vm)
                .await
                .expect("delete accepted again");
            let a = w.run_plain(VmDelete(w.env.clone()), again.id).await;
            assert_eq!(a.error, None);
        }
        assert!(meson_db::vms::get(&w.db.pool, None, vm).await.is_err());
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
        let v = meson_db::vms::get(&w.db.pool, None, vm).await.unwrap();
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
        let v = meson_db::vms::get(&w.db.pool, None, vm).await.unwrap();
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
async fn harness<S: Scenario + HasWorld>(s: S) {
    Harness {
        pool: &s.world().db.pool,
        scenario: &s,
    }
    .run_all()
    .await;
}

trait HasWorld {
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
