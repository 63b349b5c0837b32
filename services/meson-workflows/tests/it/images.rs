//! The workflow harness (meson_jobs::testing) run against the image
//! workflows: a snapshot of a running VM's boot volume, and a delete.

use crate::world::{HasWorld, World, harness};
use meson_core::action::ResourceType;
use meson_core::image::ImageStatus;
use meson_core::{ActionId, ImageId, VmId};
use meson_jobs::testing::Scenario;
use meson_workflows::image_create::ImageCreate;
use meson_workflows::image_delete::ImageDelete;
use meson_workflows::vm_create::VmCreate;
use std::sync::atomic::Ordering;

impl World {
    /// A running VM.
    async fn running_vm(&self) -> VmId {
        let (vm, action) = self.create_request().await;
        assert_eq!(
            self.run_plain(VmCreate(self.env.clone()), action)
                .await
                .error,
            None
        );
        vm
    }

    /// Accepts an image of a new running VM.
    async fn snapshot_request(&self) -> (VmId, ActionId) {
        let vm = self.running_vm().await;
        let n = self.names.fetch_add(1, Ordering::SeqCst);
        let c = self
            .app
            .vm_create_image(
                &self.who,
                vm,
                &serde_json::json!({"name": format!("img-{n}")}),
            )
            .await
            .expect("image create accepted");
        (vm, c.action.id)
    }

    async fn image_of(&self, action: ActionId) -> ImageId {
        let a = meson_db::actions::get(&self.db.pool, None, action)
            .await
            .unwrap();
        a.resources
            .iter()
            .find(|(t, _)| *t == ResourceType::Image)
            .map(|(_, id)| ImageId(*id))
            .expect("the action names its image")
    }

    /// The image's copies on AtomOS, as content hashes.
    fn image_on_atomos(&self, id: ImageId) -> Vec<String> {
        let name = meson_core::naming::image_atomos_name(id);
        self.sim
            .hosts()
            .iter()
            .flat_map(|h| h.inventory().volumes)
            .filter(|v| v.name == name)
            .map(|v| v.content)
            .collect()
    }

    /// The content hash of a VM's boot volume on AtomOS.
    fn boot_content(&self, vm: VmId) -> String {
        let prefix = meson_core::naming::vm_volume_prefix(vm);
        self.sim
            .hosts()
            .iter()
            .flat_map(|h| h.inventory().volumes)
            .find(|v| v.name.starts_with(&prefix) && v.bootable && !v.cloudinit)
            .map(|v| v.content)
            .expect("the VM's boot volume is on AtomOS")
    }
}

struct SnapshotScenario(World);

impl HasWorld for SnapshotScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl Scenario for SnapshotScenario {
    type W = ImageCreate;

    fn workflow(&self) -> ImageCreate {
        ImageCreate(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        self.0.snapshot_request().await.1
    }

    /// One copy of the VM's boot volume, recorded, `available`.
    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        let id = w.image_of(action).await;
        let i = meson_db::images::get_including_deleted(&w.db.pool, id)
            .await
            .unwrap();
        assert_eq!(i.status, ImageStatus::Available, "{i:?}");
        assert!(i.atomos_id.is_some());
        let meson_core::image::ImageSource::Snapshot { vm } = i.source else {
            panic!("{i:?}")
        };
        assert_eq!(w.image_on_atomos(id), [w.boot_content(vm)], "one copy");
    }

    /// Nothing left on AtomOS; the image is `error` with why.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let id = w.image_of(action).await;
        let i = meson_db::images::get_including_deleted(&w.db.pool, id)
            .await
            .unwrap();
        assert_eq!(i.status, ImageStatus::Error, "{i:?}");
        assert!(i.error_message.is_some() && i.atomos_id.is_none(), "{i:?}");
        assert!(w.image_on_atomos(id).is_empty(), "leaked on AtomOS");
    }
}

struct ImageDeleteScenario(World);

impl HasWorld for ImageDeleteScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl Scenario for ImageDeleteScenario {
    type W = ImageDelete;

    fn workflow(&self) -> ImageDelete {
        ImageDelete(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let (_, create) = w.snapshot_request().await;
        assert_eq!(
            w.run_plain(ImageCreate(w.env.clone()), create).await.error,
            None
        );
        let id = w.image_of(create).await;
        w.app
            .image_delete(&w.who, id)
            .await
            .expect("delete accepted")
            .id
    }

    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        let id = w.image_of(action).await;
        assert!(w.app.image_get(&w.who, id).await.is_err(), "gone");
        assert!(w.image_on_atomos(id).is_empty());
    }

    /// A failed delete leaves the image usable or in error; deleting again
    /// cleans up.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let id = w.image_of(action).await;
        if let Ok(i) = w.app.image_get(&w.who, id).await {
            assert!(
                matches!(i.status, ImageStatus::Available | ImageStatus::Error),
                "{i:?}"
            );
            let again = w
                .app
                .image_delete(&w.who, id)
                .await
                .expect("delete accepted again");
            assert_eq!(
                w.run_plain(ImageDelete(w.env.clone()), again.id)
                    .await
                    .error,
                None
            );
        }
        self.assert_done(action).await;
    }
}

/// A VM created from an image (made once, before the harness's faulty
/// workers run: they would take the source VM's create too): its boot
/// volume is a copy of the image's.
struct FromImageScenario(World, ImageId);

impl FromImageScenario {
    async fn new() -> FromImageScenario {
        let w = World::new().await;
        let (_, snapshot) = w.snapshot_request().await;
        assert_eq!(
            w.run_plain(ImageCreate(w.env.clone()), snapshot)
                .await
                .error,
            None
        );
        let image = w.image_of(snapshot).await;
        FromImageScenario(w, image)
    }
}

impl HasWorld for FromImageScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl FromImageScenario {
    async fn image_of_vm(&self, action: ActionId) -> ImageId {
        let w = &self.0;
        let vm = w.vm_of(action).await;
        w.vm(vm).await.spec.image.expect("made from an image")
    }
}

impl Scenario for FromImageScenario {
    type W = VmCreate;

    fn workflow(&self) -> VmCreate {
        VmCreate(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let (w, image) = (&self.0, self.1);
        let mut body = crate::seeds::seed_vm();
        let n = w.names.fetch_add(1, Ordering::SeqCst);
        body["specs"]["vm_name"] = format!("from-{n}").into();
        body["image"] = image.to_string().into();
        body["networks"] = serde_json::json!([w.network.to_string()]);
        w.app
            .vm_create(&w.who, &body)
            .await
            .expect("create accepted")
            .action
            .id
    }

    /// Running, its boot volume holding the image's bytes, the image intact.
    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        let vm = w.vm_of(action).await;
        w.assert_running(vm).await;
        let image = self.image_of_vm(action).await;
        assert_eq!(w.image_on_atomos(image), [w.boot_content(vm)]);
    }

    /// Nothing of the VM left; the image still there, once.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let vm = w.vm_of(action).await;
        assert_eq!(w.vm(vm).await.status, meson_core::vm::VmStatus::Error);
        assert_eq!(w.on_atomos(vm), (0, 0), "leaked on AtomOS");
        let image = self.image_of_vm(action).await;
        assert_eq!(w.image_on_atomos(image).len(), 1, "the image stays");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vm_create_from_an_image_passes_the_workflow_harness() {
    harness(FromImageScenario::new().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_create_passes_the_workflow_harness() {
    harness(SnapshotScenario(World::new().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_delete_passes_the_workflow_harness() {
    harness(ImageDeleteScenario(World::new().await)).await;
}

/// Serves `bytes` at `/image.qcow2` on a loopback port; returns its URL.
async fn serve(bytes: Vec<u8>) -> String {
    let app = axum::Router::new().route(
        "/image.qcow2",
        axum::routing::get(move || {
            let bytes = bytes.clone();
            async move { bytes }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/image.qcow2")
}

/// An image imported from a URL the test serves, its checksum given.
struct ImportScenario {
    world: World,
    url: String,
    bytes: Vec<u8>,
}

impl HasWorld for ImportScenario {
    fn world(&self) -> &World {
        &self.world
    }
}

impl Scenario for ImportScenario {
    type W = ImageCreate;

    fn workflow(&self) -> ImageCreate {
        ImageCreate(self.world.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.world;
        let n = w.names.fetch_add(1, Ordering::SeqCst);
        let sha = atomos_sim::content_hash(&self.bytes);
        let body = serde_json::json!({"name": format!("imp-{n}"), "url": self.url,
            "checksum": format!("sha256:{sha}"), "provider": "ionos"});
        w.app
            .image_import(&w.who, &body)
            .await
            .expect("import accepted")
            .action
            .id
    }

    /// One copy holding the served bytes, recorded with their checksum.
    async fn assert_done(&self, action: ActionId) {
        let w = &self.world;
        let id = w.image_of(action).await;
        let i = meson_db::images::get_including_deleted(&w.db.pool, id)
            .await
            .unwrap();
        assert_eq!(i.status, ImageStatus::Available, "{i:?}");
        let sha = atomos_sim::content_hash(&self.bytes);
        assert_eq!(i.sha256.as_deref(), Some(sha.as_str()), "{i:?}");
        assert_eq!(w.image_on_atomos(id), [sha], "one copy, the served bytes");
    }

    /// Nothing left on AtomOS; the image is `error` with why.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.world;
        let id = w.image_of(action).await;
        let i = meson_db::images::get_including_deleted(&w.db.pool, id)
            .await
            .unwrap();
        assert_eq!(i.status, ImageStatus::Error, "{i:?}");
        assert!(w.image_on_atomos(id).is_empty(), "leaked on AtomOS");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_import_passes_the_workflow_harness() {
    let bytes = b"QFI\xfb a small qcow2 stand-in".repeat(64);
    let url = serve(bytes.clone()).await;
    harness(ImportScenario {
        world: World::new().await,
        url,
        bytes,
    })
    .await;
}
