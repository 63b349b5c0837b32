//! The workflow harness (meson_jobs::testing) run against the standalone
//! volume workflows, and the VM workflows with a standalone volume attached.

use crate::world::{HasWorld, World, harness};
use meson_core::action::ResourceType;
use meson_core::vm::VmStatus;
use meson_core::volume::VolumeStatus;
use meson_core::{ActionId, VmId, VolumeId};
use meson_jobs::testing::Scenario;
use meson_workflows::vm_create::VmCreate;
use meson_workflows::vm_delete::VmDelete;
use meson_workflows::volume_attach::{VolumeAttach, VolumeDetach};
use meson_workflows::volume_create::VolumeCreate;
use meson_workflows::volume_delete::VolumeDelete;
use meson_workflows::volume_resize::VolumeResize;
use std::sync::atomic::Ordering;

impl World {
    /// Accepts a standalone volume's create (on an ionos host, where the
    /// world's VMs go).
    async fn volume_request(&self) -> (VolumeId, ActionId) {
        let n = self.names.fetch_add(1, Ordering::SeqCst);
        let c = self
            .app
            .volume_create(
                &self.who,
                &serde_json::json!({"name": format!("v-{n}"), "size": 3, "provider": "ionos"}),
            )
            .await
            .expect("volume create accepted");
        (c.volume.id, c.action.id)
    }

    /// A standalone volume, made.
    async fn available_volume(&self) -> VolumeId {
        let (id, action) = self.volume_request().await;
        let a = self.run_plain(VolumeCreate(self.env.clone()), action).await;
        assert_eq!(a.error, None);
        id
    }

    /// Accepts a VM create attaching `volume`.
    async fn vm_request_attaching(&self, volume: VolumeId) -> (VmId, ActionId) {
        self.create_request_with("a", "volumes", volume.to_string())
            .await
    }

    async fn resources_of(&self, action: ActionId, kind: ResourceType) -> Vec<uuid::Uuid> {
        let a = meson_db::actions::get(&self.db.pool, None, action)
            .await
            .unwrap();
        a.resources
            .iter()
            .filter(|(t, _)| *t == kind)
            .map(|(_, id)| *id)
            .collect()
    }

    async fn vm_named(&self, action: ActionId) -> VmId {
        VmId(self.resources_of(action, ResourceType::Vm).await[0])
    }

    /// The standalone volume an action names (a VM's create names its own too).
    async fn volume_of(&self, action: ActionId) -> VolumeId {
        for id in self.resources_of(action, ResourceType::Volume).await {
            let v = meson_db::volumes::get_including_deleted(&self.db.pool, VolumeId(id))
                .await
                .unwrap();
            if v.standalone() {
                return v.id;
            }
        }
        panic!("action {action} names no standalone volume")
    }

    /// The copies of a standalone volume on AtomOS, with the VMs each is attached to.
    fn volume_on_atomos(&self, id: VolumeId) -> Vec<Vec<String>> {
        let name = meson_core::naming::volume_atomos_name(id);
        self.sim
            .hosts()
            .iter()
            .flat_map(|h| h.inventory().volumes)
            .filter(|v| v.name == name)
            .map(|v| v.attached_to)
            .collect()
    }

    /// The sizes of a standalone volume's copies on AtomOS, GB.
    fn volume_sizes_on_atomos(&self, id: VolumeId) -> Vec<f64> {
        let name = meson_core::naming::volume_atomos_name(id);
        self.sim
            .hosts()
            .iter()
            .flat_map(|h| h.inventory().volumes)
            .filter(|v| v.name == name)
            .map(|v| v.size_gb)
            .collect()
    }

    /// A running VM (attaching a volume of its own so that it runs on the
    /// host standalone volumes go to) and an available standalone volume on
    /// the same host.
    async fn vm_and_free_volume(&self) -> (VmId, VolumeId) {
        let anchor = self.available_volume().await;
        let (vm, create) = self.vm_request_attaching(anchor).await;
        assert_eq!(
            self.run_plain(VmCreate(self.env.clone()), create)
                .await
                .error,
            None
        );
        let volume = self.available_volume().await;
        let host = |id| async move {
            meson_db::volumes::get_including_deleted(&self.db.pool, id)
                .await
                .unwrap()
                .placement
                .unwrap()
                .target_id
        };
        assert_eq!(host(anchor).await, host(volume).await, "one host");
        (vm, volume)
    }

    /// The simulator's id of a VM, if AtomOS has it.
    fn sim_vm(&self, vm: VmId) -> Option<String> {
        let prefix = meson_core::naming::vm_volume_prefix(vm);
        self.sim
            .hosts()
            .iter()
            .flat_map(|h| h.inventory().vms)
            .find(|v| v.name.starts_with(&prefix))
            .map(|v| v.id)
    }

    /// The volume exists once on AtomOS, free, and its row says `available`.
    async fn assert_free(&self, id: VolumeId) {
        let v = meson_db::volumes::get_including_deleted(&self.db.pool, id)
            .await
            .unwrap();
        assert_eq!(v.status, VolumeStatus::Available, "{v:?}");
        assert_eq!(v.attached_to, None);
        assert!(v.atomos_id.is_some() && v.placement.is_some());
        assert_eq!(
            self.volume_on_atomos(id),
            [Vec::<String>::new()],
            "one copy, free"
        );
    }
}

struct VolumeCreateScenario(World);

impl HasWorld for VolumeCreateScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl Scenario for VolumeCreateScenario {
    type W = VolumeCreate;

    fn workflow(&self) -> VolumeCreate {
        VolumeCreate(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        self.0.volume_request().await.1
    }

    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        let id = w.volume_of(action).await;
        w.assert_free(id).await;
        let v = meson_db::volumes::get_including_deleted(&w.db.pool, id)
            .await
            .unwrap();
        assert_eq!(v.placement.unwrap().provider, "ionos");
    }

    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let id = w.volume_of(action).await;
        let v = meson_db::volumes::get_including_deleted(&w.db.pool, id)
            .await
            .unwrap();
        assert_eq!(v.status, VolumeStatus::Error, "{v:?}");
        assert!(v.placement.is_none() && v.atomos_id.is_none(), "{v:?}");
        assert!(w.volume_on_atomos(id).is_empty(), "leaked on AtomOS");
        let jobs = meson_db::jobs::for_action(&w.db.pool, action)
            .await
            .unwrap();
        assert!(jobs.iter().all(|j| j.state == "failed"), "{jobs:?}");
    }
}

struct VolumeDeleteScenario(World);

impl HasWorld for VolumeDeleteScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl Scenario for VolumeDeleteScenario {
    type W = VolumeDelete;

    fn workflow(&self) -> VolumeDelete {
        VolumeDelete(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let id = w.available_volume().await;
        w.app
            .volume_delete(&w.who, id)
            .await
            .expect("delete accepted")
            .id
    }

    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        let id = w.volume_of(action).await;
        assert!(
            w.app.volume_get(&w.who, id).await.is_err(),
            "the volume is gone"
        );
        assert!(w.volume_on_atomos(id).is_empty());
    }

    /// A failed delete leaves the volume usable or in error; deleting again cleans up.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let id = w.volume_of(action).await;
        if let Ok(v) = w.app.volume_get(&w.who, id).await {
            assert!(
                matches!(v.status, VolumeStatus::Available | VolumeStatus::Error),
                "{v:?}"
            );
            assert_eq!(
                v.status == VolumeStatus::Available,
                !w.volume_on_atomos(id).is_empty()
            );
            let again = w
                .app
                .volume_delete(&w.who, id)
                .await
                .expect("delete accepted again");
            assert_eq!(
                w.run_plain(VolumeDelete(w.env.clone()), again.id)
                    .await
                    .error,
                None
            );
        }
        assert!(w.app.volume_get(&w.who, id).await.is_err());
        assert!(w.volume_on_atomos(id).is_empty(), "nothing left on AtomOS");
    }
}

/// A VM created with a standalone volume attached.
struct AttachScenario(World);

impl HasWorld for AttachScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl Scenario for AttachScenario {
    type W = VmCreate;

    fn workflow(&self) -> VmCreate {
        VmCreate(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let volume = w.available_volume().await;
        w.vm_request_attaching(volume).await.1
    }

    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        let vm = w.vm_named(action).await;
        let volume = w.volume_of(action).await;
        let v = w.vm(vm).await;
        assert_eq!(v.status, VmStatus::Running);
        let vol = meson_db::volumes::get_including_deleted(&w.db.pool, volume)
            .await
            .unwrap();
        assert_eq!(vol.status, VolumeStatus::Attached);
        assert_eq!(vol.attached_to, Some(vm));
        assert_eq!(
            v.placement.unwrap().target_id,
            vol.placement.unwrap().target_id,
            "the VM runs on the volume's host"
        );
        let sim_vm = w.sim_vm(vm).expect("on AtomOS");
        assert_eq!(
            w.volume_on_atomos(volume),
            [vec![sim_vm]],
            "attached on AtomOS"
        );
        assert_eq!(
            w.on_atomos(vm),
            (1, 3),
            "the VM's own volumes, no duplicates"
        );
    }

    /// A failed create lets the volume go, untouched and free.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let vm = w.vm_named(action).await;
        let v = w.vm(vm).await;
        assert_eq!(v.status, VmStatus::Error);
        assert!(v.placement.is_none());
        assert_eq!(w.on_atomos(vm), (0, 0), "leaked on AtomOS");
        w.assert_free(w.volume_of(action).await).await;
    }
}

/// Deleting a VM with a standalone volume attached.
struct DetachScenario(World);

impl HasWorld for DetachScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl Scenario for DetachScenario {
    type W = VmDelete;

    fn workflow(&self) -> VmDelete {
        VmDelete(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let volume = w.available_volume().await;
        let (vm, create) = w.vm_request_attaching(volume).await;
        assert_eq!(
            w.run_plain(VmCreate(w.env.clone()), create).await.error,
            None
        );
        w.app
            .vm_delete(&w.who, vm)
            .await
            .expect("delete accepted")
            .id
    }

    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        let vm = w.vm_named(action).await;
        assert!(meson_db::vms::get_any(&w.db.pool, vm).await.is_err());
        assert_eq!(w.on_atomos(vm), (0, 0));
        // The delete action names the VM only: find the volume that was attached.
        let (all, _) = meson_db::page_at::<meson_core::volume::Volume>(
            &w.db.pool,
            &w.who.tenant,
            &meson_db::volumes::VolumeFilter {
                standalone: Some(true),
                ..Default::default()
            },
            1000,
            0,
        )
        .await
        .unwrap();
        for v in all {
            w.assert_free(v.id).await;
        }
    }

    /// A failed delete: deleting again frees the volume.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let vm = w.vm_named(action).await;
        if meson_db::vms::get_any(&w.db.pool, vm).await.is_ok() {
            let again = w
                .app
                .vm_delete(&w.who, vm)
                .await
                .expect("delete accepted again");
            assert_eq!(
                w.run_plain(VmDelete(w.env.clone()), again.id).await.error,
                None
            );
        }
        self.assert_done(action).await;
    }
}

/// Attaching a standalone volume to a running VM.
struct LiveAttachScenario(World);

impl HasWorld for LiveAttachScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl Scenario for LiveAttachScenario {
    type W = VolumeAttach;

    fn workflow(&self) -> VolumeAttach {
        VolumeAttach(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let (vm, volume) = w.vm_and_free_volume().await;
        let body = serde_json::json!({"vm": vm.to_string()});
        let (action, _) = w
            .app
            .volume_attach(&w.who, volume, &body)
            .await
            .expect("attach accepted");
        action.id
    }

    /// Attached on AtomOS and in its row, the VM still running.
    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        let vm = w.vm_named(action).await;
        let volume = w.volume_of(action).await;
        let v = meson_db::volumes::get_including_deleted(&w.db.pool, volume)
            .await
            .unwrap();
        assert_eq!(
            (v.status, v.attached_to),
            (VolumeStatus::Attached, Some(vm))
        );
        let sim_vm = w.sim_vm(vm).expect("on AtomOS");
        assert_eq!(w.volume_on_atomos(volume), [vec![sim_vm]]);
        assert_eq!(w.vm(vm).await.status, VmStatus::Running);
    }

    /// Free on AtomOS and in its row.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        w.assert_free(w.volume_of(action).await).await;
    }
}

/// Detaching a standalone volume from a running VM.
struct LiveDetachScenario(World);

impl HasWorld for LiveDetachScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl Scenario for LiveDetachScenario {
    type W = VolumeDetach;

    fn workflow(&self) -> VolumeDetach {
        VolumeDetach(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let (vm, volume) = w.vm_and_free_volume().await;
        let body = serde_json::json!({"vm": vm.to_string()});
        let (attach, _) = w.app.volume_attach(&w.who, volume, &body).await.unwrap();
        assert_eq!(
            w.run_plain(VolumeAttach(w.env.clone()), attach.id)
                .await
                .error,
            None
        );
        w.app
            .volume_detach(&w.who, volume)
            .await
            .expect("detach accepted")
            .id
    }

    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        w.assert_free(w.volume_of(action).await).await;
    }

    /// A failed detach: the row follows AtomOS; detaching again frees it.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let vm = w.vm_named(action).await;
        let volume = w.volume_of(action).await;
        let v = meson_db::volumes::get_including_deleted(&w.db.pool, volume)
            .await
            .unwrap();
        let on_host = w.volume_on_atomos(volume);
        if v.attached_to == Some(vm) {
            assert_eq!(on_host, [vec![w.sim_vm(vm).unwrap()]], "{v:?}");
            let again = w.app.volume_detach(&w.who, volume).await.unwrap();
            assert_eq!(
                w.run_plain(VolumeDetach(w.env.clone()), again.id)
                    .await
                    .error,
                None
            );
        }
        w.assert_free(volume).await;
    }
}

/// Growing a standalone volume.
struct ResizeScenario(World);

impl HasWorld for ResizeScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl Scenario for ResizeScenario {
    type W = VolumeResize;

    fn workflow(&self) -> VolumeResize {
        VolumeResize(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let id = w.available_volume().await;
        let (action, _) = w
            .app
            .volume_resize(&w.who, id, &serde_json::json!({"size": 7}))
            .await
            .expect("resize accepted");
        action.id
    }

    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        let id = w.volume_of(action).await;
        let v = w.app.volume_get(&w.who, id).await.unwrap();
        assert_eq!((v.size_gb, v.status), (7, VolumeStatus::Available));
        assert_eq!(w.volume_sizes_on_atomos(id), [7.0]);
    }

    /// A failed resize: the row says the size the host has.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let id = w.volume_of(action).await;
        let v = w.app.volume_get(&w.who, id).await.unwrap();
        assert_eq!(w.volume_sizes_on_atomos(id), [f64::from(v.size_gb)]);
        assert_eq!(v.status, VolumeStatus::Available);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_attach_to_a_running_vm_passes_the_workflow_harness() {
    harness(LiveAttachScenario(World::new().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_detach_from_a_running_vm_passes_the_workflow_harness() {
    harness(LiveDetachScenario(World::new().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_resize_passes_the_workflow_harness() {
    harness(ResizeScenario(World::new().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_create_passes_the_workflow_harness() {
    harness(VolumeCreateScenario(World::new().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_delete_passes_the_workflow_harness() {
    harness(VolumeDeleteScenario(World::new().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vm_create_attaching_a_volume_passes_the_workflow_harness() {
    harness(AttachScenario(World::new().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vm_delete_detaching_a_volume_passes_the_workflow_harness() {
    harness(DetachScenario(World::new().await)).await;
}

/// Growing a running VM's own data volume (30 GB in the seed) to 35 GB: the
/// VM's spec records the size with the volume.
struct OwnResizeScenario(World);

impl HasWorld for OwnResizeScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl OwnResizeScenario {
    /// The VM's data volume: its row's size, its spec's, and its host's.
    async fn sizes(&self, action: ActionId) -> (u32, u32, Vec<f64>) {
        let w = &self.0;
        let vm = w.vm_of(action).await;
        let v = meson_db::volumes::list_for_vms(&w.db.pool, &[vm])
            .await
            .unwrap()
            .into_iter()
            .find(|v| v.kind == meson_core::volume::VolumeKind::Data)
            .unwrap();
        let spec = w.vm(vm).await.spec.volumes[0].size_gb;
        let on_host = w
            .sim
            .hosts()
            .iter()
            .flat_map(|h| h.inventory().volumes)
            .filter(|x| x.name == v.atomos_name)
            .map(|x| x.size_gb)
            .collect();
        (v.size_gb, spec, on_host)
    }
}

impl Scenario for OwnResizeScenario {
    type W = VolumeResize;

    fn workflow(&self) -> VolumeResize {
        VolumeResize(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let (vm, create) = w.create_request().await;
        assert_eq!(
            w.run_plain(VmCreate(w.env.clone()), create).await.error,
            None
        );
        let data = meson_db::volumes::list_for_vms(&w.db.pool, &[vm])
            .await
            .unwrap()
            .into_iter()
            .find(|v| v.kind == meson_core::volume::VolumeKind::Data)
            .unwrap();
        assert_eq!(data.size_gb, 30);
        let (action, _) = w
            .app
            .volume_resize(&w.who, data.id, &serde_json::json!({"size": 35}))
            .await
            .expect("resize accepted");
        action.id
    }

    async fn assert_done(&self, action: ActionId) {
        assert_eq!(self.sizes(action).await, (35, 35, vec![35.0]));
        let w = &self.0;
        assert_eq!(w.vm(w.vm_of(action).await).await.status, VmStatus::Running);
    }

    /// A failed resize: the row and the spec say the size the host has.
    async fn assert_clean(&self, action: ActionId) {
        let (row, spec, host) = self.sizes(action).await;
        assert_eq!((row, vec![f64::from(row)]), (spec, host));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vms_own_volume_resize_passes_the_workflow_harness() {
    harness(OwnResizeScenario(World::new().await)).await;
}

/// Moving a free standalone volume from the first ionos host to the other.
struct MoveScenario(World);

impl HasWorld for MoveScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl MoveScenario {
    /// The hosts holding a copy of the volume, and the host its row names;
    /// always exactly one, the same, with the volume's bytes.
    async fn assert_whole(&self, action: ActionId) -> String {
        let w = &self.0;
        let id = w.volume_of(action).await;
        let v = w.app.volume_get(&w.who, id).await.unwrap();
        assert_eq!(v.status, VolumeStatus::Available, "{v:?}");
        let name = meson_core::naming::volume_atomos_name(id);
        let copies: Vec<(String, String)> = w
            .sim
            .hosts()
            .iter()
            .flat_map(|h| {
                let host = h.name().to_owned();
                h.inventory()
                    .volumes
                    .into_iter()
                    .filter(|x| x.name == name)
                    .map(move |x| (host.clone(), x.id))
            })
            .collect();
        let at = v.placement.unwrap().host;
        assert_eq!(copies.len(), 1, "one copy: {copies:?}");
        assert_eq!(
            copies[0],
            (at.clone(), v.atomos_id.unwrap()),
            "recorded where it is"
        );
        at
    }
}

impl Scenario for MoveScenario {
    type W = meson_workflows::volume_move::VolumeMove;

    fn workflow(&self) -> Self::W {
        meson_workflows::volume_move::VolumeMove(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let id = w.available_volume().await;
        let v = w.app.volume_get(&w.who, id).await.unwrap();
        assert_eq!(v.placement.unwrap().host, "ionos-fra-1");
        let (action, _) = w
            .app
            .volume_move(&w.who, id, &serde_json::json!({"host": "ionos-las-1"}))
            .await
            .expect("move accepted");
        action.id
    }

    async fn assert_done(&self, action: ActionId) {
        assert_eq!(self.assert_whole(action).await, "ionos-las-1");
    }

    /// Back where it was, or (failing past the commit point) moved: whole
    /// either way.
    async fn assert_clean(&self, action: ActionId) {
        self.assert_whole(action).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_move_passes_the_workflow_harness() {
    harness(MoveScenario(World::new().await)).await;
}
