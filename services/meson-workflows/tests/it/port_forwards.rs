//! Port forwards through the harness: a create (every step twice, a fault
//! around each, every undo twice, a worker killed before each) leaves the
//! forward active on the VM's host or in `error` and gone from it; a delete
//! leaves it gone from both; a VM's delete takes its forwards along.

use crate::vms::new_network;
use crate::world::{HasWorld, World, harness};
use meson_core::action::ResourceType;
use meson_core::port_forward::{PortForward, PortForwardStatus};
use meson_core::{ActionId, NetworkId, PortForwardId, VmId};
use meson_jobs::testing::Scenario;
use meson_workflows::port_forward::{PortForwardCreate, PortForwardDelete};
use meson_workflows::vm_create::VmCreate;
use meson_workflows::vm_delete::VmDelete;

/// A port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn forward_of(w: &World, action: ActionId) -> PortForward {
    let a = meson_db::actions::get(&w.db.pool, None, action)
        .await
        .unwrap();
    let id = a
        .resources
        .iter()
        .find(|(t, _)| *t == ResourceType::PortForward)
        .map(|(_, id)| PortForwardId(*id))
        .expect("the action names its forward");
    meson_db::port_forwards::get_including_deleted(&w.db.pool, id)
        .await
        .unwrap()
}

/// Whether the forward's host lists it.
fn on_host(w: &World, f: &PortForward) -> bool {
    w.sim
        .hosts()
        .into_iter()
        .find(|h| h.name() == f.host)
        .expect("its host")
        .inventory()
        .port_forwards
        .iter()
        .any(|p| p.id == f.id.to_string())
}

/// Whether meson still has the forward (not deleted).
async fn recorded(w: &World, f: &PortForward) -> bool {
    meson_db::port_forwards::list(&w.db.pool, meson_db::port_forwards::Of::Vm(f.vm_id))
        .await
        .unwrap()
        .iter()
        .any(|x| x.id == f.id)
}

/// A running VM on a new network, and a forward to its port 22 accepted.
async fn forward_requested(w: &World) -> (VmId, NetworkId, ActionId) {
    let net = new_network(w, "pf").await;
    let (vm, create) = w.create_request_on(net).await;
    assert_eq!(
        w.run_plain(VmCreate(w.env.clone()), create).await.error,
        None
    );
    let body = serde_json::json!({"public_port": free_port(), "vm": vm.to_string(),
                                  "private_port": 22});
    let c = w
        .app
        .port_forward_create(&w.who, net, &body)
        .await
        .expect("forward accepted");
    assert_eq!(c.port_forward.status, PortForwardStatus::Creating);
    (vm, net, c.action.id)
}

struct CreateScenario(World);

impl HasWorld for CreateScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl Scenario for CreateScenario {
    type W = PortForwardCreate;

    fn workflow(&self) -> Self::W {
        PortForwardCreate(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        forward_requested(&self.0).await.2
    }

    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        let f = forward_of(w, action).await;
        assert_eq!(f.status, PortForwardStatus::Active);
        assert!(on_host(w, &f), "the host forwards it");
        assert_eq!(f.error_message, None);
    }

    /// Not on the host; in `error` with why, holding no port.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let f = forward_of(w, action).await;
        assert!(!on_host(w, &f), "undone on the host");
        assert_eq!(f.status, PortForwardStatus::Error);
        assert!(f.error_message.is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_forward_create_passes_the_workflow_harness() {
    harness(CreateScenario(World::new().await)).await;
}

struct DeleteScenario(World);

impl HasWorld for DeleteScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl Scenario for DeleteScenario {
    type W = PortForwardDelete;

    fn workflow(&self) -> Self::W {
        PortForwardDelete(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let (_, net, create) = forward_requested(w).await;
        assert_eq!(
            w.run_plain(PortForwardCreate(w.env.clone()), create)
                .await
                .error,
            None
        );
        let f = forward_of(w, create).await;
        w.app
            .port_forward_delete(&w.who, net, f.id)
            .await
            .expect("delete accepted")
            .id
    }

    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        let f = forward_of(w, action).await;
        assert!(!on_host(w, &f), "the host no longer forwards it");
        assert!(!recorded(w, &f).await, "forgotten");
    }

    /// Forward-only: meson still has it (in `error`) or it is gone from both.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let f = forward_of(w, action).await;
        if recorded(w, &f).await {
            assert_eq!(f.status, PortForwardStatus::Error, "{f:?}");
        } else {
            assert!(!on_host(w, &f));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_forward_delete_passes_the_workflow_harness() {
    harness(DeleteScenario(World::new().await)).await;
}

/// A VM's delete removes its forwards from the host and forgets them, and a
/// forward's public port is free again for another VM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vms_delete_takes_its_forwards_along() {
    let w = World::new().await;
    let (vm, _, create) = forward_requested(&w).await;
    assert_eq!(
        w.run_plain(PortForwardCreate(w.env.clone()), create)
            .await
            .error,
        None
    );
    let f = forward_of(&w, create).await;
    assert!(on_host(&w, &f));
    let delete = w.app.vm_delete(&w.who, vm).await.expect("delete accepted");
    assert_eq!(
        w.run_plain(VmDelete(w.env.clone()), delete.id).await.error,
        None
    );
    assert!(!on_host(&w, &f), "removed from the host");
    assert!(!recorded(&w, &f).await, "forgotten with its VM");
}
