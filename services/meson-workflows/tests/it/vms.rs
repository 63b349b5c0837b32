//! The generic workflow harness (meson_jobs::testing) run against the VM
//! create, delete and power workflows, with the simulator as AtomOS.

use crate::world::{HasWorld, World, harness};
use meson_core::vm::VmStatus;
use meson_core::{ActionId, VmId};
use meson_jobs::testing::Scenario;
use meson_workflows::vm_create::VmCreate;
use meson_workflows::vm_delete::VmDelete;

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
        let v = w.vm(vm).await;
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
            meson_types::vm::PowerCommand::Poweroff
        } else {
            meson_types::vm::PowerCommand::Reboot
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
        let v = w.vm(vm).await;
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
        let v = w.vm(vm).await;
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

/// Resizing a running VM with `stop`: stopped, resized, started again.
struct ResizeScenario(World);

impl HasWorld for ResizeScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl ResizeScenario {
    /// The VM as AtomOS has it: (state, vCPUs, RAM MiB).
    fn on_host(&self, vm: VmId) -> (atomos_driver::VmState, u32, u64) {
        let prefix = meson_core::naming::vm_volume_prefix(vm);
        self.0
            .sim
            .hosts()
            .iter()
            .flat_map(|h| h.inventory().vms)
            .find(|v| v.name.starts_with(&prefix))
            .map(|v| (v.state, v.slots, v.ram_mib))
            .expect("the VM is on AtomOS")
    }

    /// Running, on the host and in its row, with `cores` and `memory_mib`.
    async fn assert_sized(&self, action: ActionId, cores: u32, memory_mib: u64) {
        let w = &self.0;
        let vm = w.vm_of(action).await;
        let v = w.vm(vm).await;
        assert_eq!(v.status, VmStatus::Running, "{v:?}");
        assert_eq!((v.spec.cpu.cores, v.spec.memory_mib), (cores, memory_mib));
        assert_eq!(
            self.on_host(vm),
            (atomos_driver::VmState::Running, cores, memory_mib)
        );
        assert_eq!(w.on_atomos(vm), (1, 3), "nothing made or lost");
    }
}

impl Scenario for ResizeScenario {
    type W = meson_workflows::vm_resize::VmResize;

    fn workflow(&self) -> Self::W {
        meson_workflows::vm_resize::VmResize(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let (vm, create) = w.create_request().await;
        assert_eq!(
            w.run_plain(VmCreate(w.env.clone()), create).await.error,
            None
        );
        let body = serde_json::json!({"cores": 3, "memory_mib": 6144, "stop": true});
        w.app
            .vm_resize(&w.who, vm, &body)
            .await
            .expect("resize accepted")
            .0
            .id
    }

    async fn assert_done(&self, action: ActionId) {
        self.assert_sized(action, 3, 6144).await;
    }

    /// Undone: the old size, running again.
    async fn assert_clean(&self, action: ActionId) {
        self.assert_sized(action, 2, 4096).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vm_resize_passes_the_workflow_harness() {
    harness(ResizeScenario(World::new().await)).await;
}

/// Rebuilding a running VM from another distribution.
struct RebuildScenario(World);

impl HasWorld for RebuildScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl RebuildScenario {
    /// The content of the VM's boot volumes on AtomOS.
    fn boots(&self, vm: VmId) -> Vec<String> {
        let prefix = meson_core::naming::vm_volume_prefix(vm);
        self.0
            .sim
            .hosts()
            .iter()
            .flat_map(|h| h.inventory().volumes)
            .filter(|v| v.name.starts_with(&prefix) && v.bootable && !v.cloudinit)
            .map(|v| v.content)
            .collect()
    }

    /// Running with one boot volume from `os`'s cloud image, on the host
    /// and in its rows and spec; nothing else made or lost.
    async fn assert_boots(&self, action: ActionId, os: &str) {
        let w = &self.0;
        let vm = w.vm_of(action).await;
        let v = w.vm(vm).await;
        let a = meson_db::actions::get(&w.db.pool, None, action)
            .await
            .unwrap();
        assert_eq!(v.status, VmStatus::Running, "{:?}", a.error);
        assert_eq!(v.spec.os.distribution, os);
        let url = meson_core::os::OsImage::lookup(os).unwrap().image_url;
        assert_eq!(
            self.boots(vm),
            [atomos_sim::content_hash(format!("url:{url}").as_bytes())]
        );
        assert_eq!(w.on_atomos(vm), (1, 3), "one VM, its three volumes");
        let rows = meson_db::volumes::list_for_vms(&w.db.pool, &[vm])
            .await
            .unwrap();
        let boots: Vec<_> = rows
            .iter()
            .filter(|r| r.kind == meson_core::volume::VolumeKind::Boot)
            .collect();
        assert_eq!(boots.len(), 1, "{rows:?}");
        let on_host = w
            .sim
            .hosts()
            .iter()
            .flat_map(|h| h.inventory().vms)
            .find(|x| x.name == v.atomos_name)
            .unwrap();
        assert!(
            on_host
                .volume_ids
                .contains(boots[0].atomos_id.as_ref().unwrap()),
            "the row's boot volume is the one on the VM"
        );
    }
}

impl Scenario for RebuildScenario {
    type W = meson_workflows::vm_rebuild::VmRebuild;

    fn workflow(&self) -> Self::W {
        meson_workflows::vm_rebuild::VmRebuild(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let (vm, create) = w.create_request().await;
        assert_eq!(
            w.run_plain(VmCreate(w.env.clone()), create).await.error,
            None
        );
        w.app
            .vm_rebuild(&w.who, vm, &serde_json::json!({"os": "Ubuntu"}))
            .await
            .expect("rebuild accepted")
            .0
            .id
    }

    async fn assert_done(&self, action: ActionId) {
        self.assert_boots(action, "ubuntu").await;
    }

    /// Undone (the old boot volume, running again), or, failing after its
    /// commit point, rebuilt: never half of each.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let vm = w.vm(w.vm_of(action).await).await;
        let os = vm.spec.os.distribution.clone();
        assert!(os == "debian" || os == "ubuntu", "{os}");
        self.assert_boots(action, &os).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vm_rebuild_passes_the_workflow_harness() {
    harness(RebuildScenario(World::new().await)).await;
}

/// A VM rebuilt twice within a minute: each new boot volume has a name of
/// its own on AtomOS (their ids share their time prefix).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_is_rebuilt_twice_in_a_row() {
    let w = World::new().await;
    let (vm, create) = w.create_request().await;
    w.run_plain(VmCreate(w.env.clone()), create).await;
    for os in ["Ubuntu", "Debian"] {
        let a = w
            .app
            .vm_rebuild(&w.who, vm, &serde_json::json!({"os": os}))
            .await;
        let a = match a {
            Ok(a) => a.0,
            Err(e) => panic!("{e:?}"),
        };
        let done = w
            .run_plain(meson_workflows::vm_rebuild::VmRebuild(w.env.clone()), a.id)
            .await;
        assert_eq!(done.error, None);
    }
}

/// Migrating a running VM (with a standalone volume attached, on a private
/// network) to the other host of its provider.
struct MigrateScenario(World);

impl HasWorld for MigrateScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl MigrateScenario {
    /// Running on exactly one host, the one its row names, with its three
    /// volumes and the attached one there and nowhere else; `moved` says
    /// whether that host is not where it started.
    async fn assert_whole(&self, action: ActionId) -> bool {
        let w = &self.0;
        let vm = w.vm_of(action).await;
        let v = w.vm(vm).await;
        let a = meson_db::actions::get(&w.db.pool, None, action)
            .await
            .unwrap();
        assert_eq!(v.status, VmStatus::Running, "{:?}", a.error);
        let host = v.placement.as_ref().unwrap().host.clone();
        let prefix = meson_core::naming::vm_volume_prefix(vm);
        let standalone: Vec<String> = meson_db::volumes::attached_to_vms(&w.db.pool, &[vm])
            .await
            .unwrap()
            .iter()
            .map(|s| s.atomos_name.clone())
            .collect();
        assert_eq!(standalone.len(), 1);
        for h in w.sim.hosts() {
            let inv = h.inventory();
            let vms = inv.vms.iter().filter(|x| x.name == v.atomos_name).count();
            let vols = inv
                .volumes
                .iter()
                .filter(|x| x.name.starts_with(&prefix) || standalone.contains(&x.name))
                .count();
            if h.name() == host {
                assert_eq!((vms, vols), (1, 4), "on {host}, its host");
                let on = inv.vms.iter().find(|x| x.name == v.atomos_name).unwrap();
                assert_eq!(on.volume_ids.len(), 4, "registered with its volumes");
                assert_eq!(on.network_ids.len(), 1, "and its private network");
                assert_eq!(on.state, atomos_driver::VmState::Running);
            } else {
                assert_eq!((vms, vols), (0, 0), "nothing left on {}", h.name());
            }
        }
        let s = meson_db::volumes::attached_to_vms(&w.db.pool, &[vm])
            .await
            .unwrap();
        assert_eq!(
            s[0].placement.as_ref().unwrap().host,
            host,
            "the volume moved with it"
        );
        assert_eq!(nic_of(w, vm, w.network).await, (true, true), "its NIC kept");
        host != "ionos-fra-1"
    }
}

impl Scenario for MigrateScenario {
    type W = meson_workflows::vm_migrate::VmMigrate;

    fn workflow(&self) -> Self::W {
        meson_workflows::vm_migrate::VmMigrate(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let n = w.names.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let c = w
            .app
            .volume_create(
                &w.who,
                &serde_json::json!({"name": format!("m-{n}"), "size": 2, "provider": "ionos"}),
            )
            .await
            .unwrap();
        let done = w
            .run_plain(
                meson_workflows::volume_create::VolumeCreate(w.env.clone()),
                c.action.id,
            )
            .await;
        assert_eq!(done.error, None);
        let mut body = crate::seeds::seed_vm();
        body["specs"]["vm_name"] = format!("m-{n}").into();
        body["volumes"] = serde_json::json!([c.volume.id.to_string()]);
        body["networks"] = serde_json::json!([w.network.to_string()]);
        let created = w.app.vm_create(&w.who, &body).await.unwrap();
        let done = w
            .run_plain(VmCreate(w.env.clone()), created.action.id)
            .await;
        assert_eq!(done.error, None);
        let vm = created.vm.id;
        assert_eq!(w.vm(vm).await.placement.unwrap().host, "ionos-fra-1");
        w.app
            .vm_migrate(&w.who, vm, &serde_json::json!({}))
            .await
            .expect("migrate accepted")
            .0
            .id
    }

    async fn assert_done(&self, action: ActionId) {
        assert!(self.assert_whole(action).await, "moved");
    }

    /// Back where it was, or (failing past the commit point) moved: whole
    /// either way, on exactly one host.
    async fn assert_clean(&self, action: ActionId) {
        self.assert_whole(action).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vm_migrate_passes_the_workflow_harness() {
    harness(MigrateScenario(World::new().await)).await;
}

/// Where a VM's NIC on a network is: recorded by meson, and plugged in on
/// the VM's host.
async fn nic_of(w: &World, vm: VmId, net: meson_core::NetworkId) -> (bool, bool) {
    let recorded = meson_db::networks::attachments_of(&w.db.pool, &[vm])
        .await
        .unwrap()
        .iter()
        .any(|n| n.network_id == net);
    let v = w.vm(vm).await;
    let at = v.placement.as_ref().unwrap();
    let host_net = meson_db::networks::host_networks(&w.db.pool, net)
        .await
        .unwrap()
        .into_iter()
        .find(|h| h.target == at.target_id)
        .and_then(|h| h.atomos_id);
    let host = w
        .sim
        .hosts()
        .into_iter()
        .find(|h| h.name() == at.host)
        .unwrap();
    let on = host.inventory().vms.iter().any(|x| {
        x.name == v.atomos_name && host_net.as_ref().is_some_and(|n| x.network_ids.contains(n))
    });
    (recorded, on)
}

/// A new private network (without DHCP: meson hands out its addresses).
pub(crate) async fn new_network(w: &World, prefix: &str) -> meson_core::NetworkId {
    let n = w.names.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    w.app
        .network_create(
            &w.who,
            &serde_json::json!({"name": format!("{prefix}-{n}"), "cidr": "10.8.0.0/24", "dhcp": false}),
        )
        .await
        .expect("network")
        .0
        .id
}

/// Attaching a running VM to a network its host does not have yet.
struct NetworkAttachScenario(World);

impl HasWorld for NetworkAttachScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl NetworkAttachScenario {
    async fn network_of(&self, action: ActionId) -> meson_core::NetworkId {
        let a = meson_db::actions::get(&self.0.db.pool, None, action)
            .await
            .unwrap();
        a.resources
            .iter()
            .find(|(t, _)| *t == meson_core::action::ResourceType::Network)
            .map(|(_, id)| meson_core::NetworkId(*id))
            .unwrap()
    }
}

impl Scenario for NetworkAttachScenario {
    type W = meson_workflows::vm_network::VmAttachNetwork;

    fn workflow(&self) -> Self::W {
        meson_workflows::vm_network::VmAttachNetwork(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let net = new_network(w, "na").await;
        let (vm, create) = w.create_request().await;
        assert_eq!(
            w.run_plain(VmCreate(w.env.clone()), create).await.error,
            None
        );
        let body = serde_json::json!({"network": net.to_string()});
        let (a, _) = w
            .app
            .vm_attach_network(&w.who, vm, &body)
            .await
            .expect("attach accepted");
        a.id
    }

    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        let (vm, net) = (w.vm_of(action).await, self.network_of(action).await);
        assert_eq!(nic_of(w, vm, net).await, (true, true));
        let nics = meson_db::networks::attachments_of(&w.db.pool, &[vm])
            .await
            .unwrap();
        let nic = nics.iter().find(|n| n.network_id == net).unwrap();
        assert_eq!(
            nic.address.unwrap().to_string(),
            "10.8.0.2",
            "meson's address"
        );
        assert_eq!(nic.position, 1, "after the NIC it was created with");
        assert_eq!(w.vm(vm).await.status, VmStatus::Running, "it kept running");
    }

    /// Not on the network, on the host or in meson: its address is free.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let (vm, net) = (w.vm_of(action).await, self.network_of(action).await);
        assert_eq!(nic_of(w, vm, net).await, (false, false));
        assert_eq!(w.vm(vm).await.status, VmStatus::Running);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vm_attach_network_passes_the_workflow_harness() {
    harness(NetworkAttachScenario(World::new().await)).await;
}

/// Detaching a running VM from the network it was created on.
struct NetworkDetachScenario(NetworkAttachScenario);

impl HasWorld for NetworkDetachScenario {
    fn world(&self) -> &World {
        &self.0.0
    }
}

impl Scenario for NetworkDetachScenario {
    type W = meson_workflows::vm_network::VmDetachNetwork;

    fn workflow(&self) -> Self::W {
        meson_workflows::vm_network::VmDetachNetwork(self.0.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0.0;
        let net = new_network(w, "nd").await;
        let (vm, create) = w.create_request_on(net).await;
        assert_eq!(
            w.run_plain(VmCreate(w.env.clone()), create).await.error,
            None
        );
        assert_eq!(nic_of(w, vm, net).await, (true, true));
        let body = serde_json::json!({"network": net.to_string()});
        let (a, _) = w
            .app
            .vm_detach_network(&w.who, vm, &body)
            .await
            .expect("detach accepted");
        a.id
    }

    async fn assert_done(&self, action: ActionId) {
        let w = &self.0.0;
        let (vm, net) = (w.vm_of(action).await, self.0.network_of(action).await);
        assert_eq!(nic_of(w, vm, net).await, (false, false));
        assert_eq!(w.vm(vm).await.status, VmStatus::Running);
    }

    /// A detach only goes forward: meson's record follows the host.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0.0;
        let (vm, net) = (w.vm_of(action).await, self.0.network_of(action).await);
        let (recorded, on) = nic_of(w, vm, net).await;
        assert_eq!(recorded, on, "meson and the host agree");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vm_detach_network_passes_the_workflow_harness() {
    harness(NetworkDetachScenario(NetworkAttachScenario(
        World::new().await,
    )))
    .await;
}
