//! A workflow that unwinds leaves every row it made final: no node stays
//! `creating`, no VM `initializing`, nothing reserved, nothing on AtomOS.

use crate::harness::{Meson, seed_kaas, seed_kaas_one_worker};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

/// Every host refuses to register VMs (a server error, retried, then fatal).
fn register_fails_everywhere(m: &Meson) {
    for h in m.sim().hosts() {
        h.faults().fail_next("vm/register", 500, 100_000);
    }
}

/// The cluster's nodes and their VMs' statuses, from the database.
async fn rows(m: &Meson, cluster: &str) -> Vec<(String, String, Option<String>, String)> {
    let pool = &m.dev().pool;
    let id = meson_core::ClusterId(cluster.parse().unwrap());
    let mut out = Vec::new();
    for n in meson_db::clusters::nodes(pool, id).await.expect("nodes") {
        let vm = meson_db::vms::get_any(pool, n.vm).await.expect("vm row");
        out.push((
            n.name,
            n.status.as_str().to_owned(),
            n.error_message,
            vm.status.as_str().to_owned(),
        ));
    }
    out
}

async fn nothing_running_or_reserved(m: &Meson, cluster: &str) {
    let r = m
        .get(&format!("/v1/clusters/{cluster}/actions?per_page=50"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    for a in r.body["actions"].as_array().unwrap() {
        assert_ne!(a["status"], "running", "{a}");
    }
    let reserved = meson_db::reservations::pending(&m.dev().pool, meson_core::VmId::new())
        .await
        .unwrap();
    assert!(reserved.is_empty(), "{reserved:?}");
}

#[tokio::test]
async fn a_failed_cluster_create_leaves_every_node_and_vm_final() {
    let m = Meson::start().await;
    register_fails_everywhere(&m);
    let r = m.post("/v1/clusters", &seed_kaas()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let id = r.body["cluster"]["id"].as_str().unwrap().to_owned();
    let done = m
        .wait_action_for(
            r.body["action"]["id"].as_str().unwrap(),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(done["status"], "error", "{done}");

    let c = m.cluster(&id).await;
    assert_eq!(c["status"], "error", "{c}");
    let why = c["error_message"].as_str().unwrap_or_default();
    assert!(why.contains("hypervisor"), "{c}");
    let rows = rows(&m, &id).await;
    // The control plane and the pool's three workers.
    assert_eq!(rows.len(), 4, "{rows:?}");
    for (name, node, message, vm) in &rows {
        assert_eq!(node, "creation_error", "{name}: {rows:?}");
        assert!(
            message
                .as_deref()
                .is_some_and(|m| m.contains("could not be created")),
            "{name}: {message:?}"
        );
        assert_eq!(vm, "error", "{name}: {rows:?}");
    }
    nothing_running_or_reserved(&m, &id).await;
    assert_eq!(m.inventory_counts(), (0, 0));
    assert!(m.host_networks().is_empty(), "{:?}", m.host_networks());
    m.stop().await;
}

#[tokio::test]
async fn a_failed_scale_up_takes_its_new_nodes_away() {
    let m = Meson::start().await;
    let id = m.running_cluster(&seed_kaas_one_worker()).await;
    let c = m.cluster(&id).await;
    let pool = c["pools"][0]["id"].as_str().unwrap().to_owned();
    let before: Vec<Value> = m.cluster_nodes(&id).await;
    let on_atomos = m.inventory_counts();

    register_fails_everywhere(&m);
    let r = m
        .patch(
            &format!("/v1/clusters/{id}/pools/{pool}"),
            &json!({"desired_nodes": 3}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let done = m
        .wait_action_for(
            r.body["action"]["id"].as_str().unwrap(),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(done["status"], "error", "{done}");
    let rows = rows(&m, &id).await;
    assert_eq!(rows.len(), before.len(), "{rows:?}");
    assert!(
        rows.iter()
            .all(|(_, n, _, vm)| n == "ready" && vm == "running"),
        "{rows:?}"
    );
    nothing_running_or_reserved(&m, &id).await;
    assert_eq!(m.inventory_counts(), on_atomos);
    m.stop().await;
}
