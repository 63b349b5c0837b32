//! The generic workflow harness run against the network delete.

use crate::world::{HasWorld, World, harness};
use meson_core::{ActionId, NetworkId};
use meson_jobs::testing::Scenario;
use meson_workflows::vm_create::VmCreate;
use meson_workflows::vm_delete::VmDelete;
use std::sync::atomic::Ordering;

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
