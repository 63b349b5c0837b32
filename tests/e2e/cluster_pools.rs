//! A cluster's node pools over real HTTP against the simulator: scaling,
//! adding and deleting pools, and the requests refused.

use crate::harness::{Meson, seed_kaas};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::net::Ipv4Addr;

/// VMs on every simulated host whose name marks them as this cluster's nodes.
fn node_vms(m: &Meson, cluster: &str) -> usize {
    let prefix = format!("k{}", &cluster.replace('-', "")[..12]);
    m.sim()
        .hosts()
        .iter()
        .flat_map(|h| h.inventory().vms)
        .filter(|v| v.name.starts_with(&prefix))
        .count()
}

/// The seed payload with one small pool of 1 node (1 to 3) and, when
/// `subnet` is given, that nodes subnet.
fn cluster_body(name: &str, subnet: Option<Value>) -> Value {
    let mut body = seed_kaas();
    body["req"]["name"] = json!(name);
    body["req"]["nodepool"] = json!([{
        "pool_name": "workers", "desired_nodes": 1, "min_nodes": 1, "max_nodes": 3,
        "specs": {"cpu": 1, "ram": 1024, "storage": 20}
    }]);
    if let Some(s) = subnet {
        body["req"]["nodes_subnet"] = s;
    }
    body
}

/// Creates a cluster; returns its id, its first pool's id and the create action.
async fn create(m: &Meson, body: &Value) -> (String, String, String) {
    let r = m.post("/v1/clusters", body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let c = &r.body["cluster"];
    (
        c["id"].as_str().unwrap().to_owned(),
        c["pools"][0]["id"].as_str().unwrap().to_owned(),
        r.body["action"]["id"].as_str().unwrap().to_owned(),
    )
}

async fn succeeds(m: &Meson, action: &Value) {
    let done = m
        .wait_action(action["id"].as_str().expect("an action"))
        .await;
    assert_eq!(done["status"], "success", "{done}");
}

/// The workers of one pool: (node id, address, status).
async fn workers(m: &Meson, id: &str, pool: &str) -> Vec<(String, Ipv4Addr, String)> {
    let r = m.get(&format!("/v1/clusters/{id}/nodes")).await;
    r.body["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["pool"] == pool)
        .map(|n| {
            (
                n["id"].as_str().unwrap().to_owned(),
                n["ip"].as_str().expect("an address").parse().unwrap(),
                n["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Every node address of the cluster.
async fn addresses(m: &Meson, id: &str) -> Vec<Ipv4Addr> {
    let r = m.get(&format!("/v1/clusters/{id}/nodes")).await;
    r.body["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["ip"].as_str().expect("an address").parse().unwrap())
        .collect()
}

fn field(r: &crate::harness::Reply) -> &str {
    r.body["error"]["details"]["fields"][0]["name"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_pool_scales_up_and_down_and_addresses_are_reused() {
    let m = Meson::start().await;
    let subnet = json!({"dhcp": false, "subnet_netmask": "10.50.0.0/24",
        "start_address": "10.50.0.10", "last_address": "10.50.0.20"});
    let (id, pool, create_action) = create(&m, &cluster_body("scale", Some(subnet))).await;
    succeeds(&m, &json!({"id": create_action})).await;
    let first = workers(&m, &id, &pool).await;
    assert_eq!(first.len(), 1);
    let path = format!("/v1/clusters/{id}/pools/{pool}");

    // Up, 1 → 3: two nodes more, each from the range, none twice.
    let r = m.patch(&path, &json!({"desired_nodes": 3})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["pool"]["desired_nodes"], 3);
    assert_eq!(r.body["pool"]["current_nodes"], 1);
    assert_eq!(r.body["action"]["command"], "scale_node_pool");
    let kinds: BTreeSet<&str> = r.body["action"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, BTreeSet::from(["cluster", "node_pool"]));
    assert_eq!(m.cluster(&id).await["status"], "updating");
    succeeds(&m, &r.body["action"]).await;
    let c = m.cluster(&id).await;
    assert_eq!(c["status"], "running", "{c}");
    assert_eq!(c["pools"][0]["current_nodes"], 3);
    let grown = workers(&m, &id, &pool).await;
    assert_eq!(grown.len(), 3);
    assert!(grown.iter().all(|(_, _, s)| s == "ready"), "{grown:?}");
    assert_eq!(node_vms(&m, &id), 4, "the control plane and three workers");
    let all = addresses(&m, &id).await;
    let unique: BTreeSet<Ipv4Addr> = all.iter().copied().collect();
    assert_eq!(unique.len(), all.len(), "no address twice: {all:?}");
    let range = Ipv4Addr::new(10, 50, 0, 11)..=Ipv4Addr::new(10, 50, 0, 20);
    assert!(
        all.iter().all(|ip| range.contains(ip)),
        "from the range, the endpoint's 10.50.0.10 excluded: {all:?}"
    );

    // Down, 3 → 1: the newest go, the first worker stays.
    let r = m.patch(&path, &json!({"desired_nodes": 1})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    succeeds(&m, &r.body["action"]).await;
    let left = workers(&m, &id, &pool).await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].0, first[0].0, "the oldest node is kept");
    assert_eq!(node_vms(&m, &id), 2, "the control plane and one worker");
    let c = m.cluster(&id).await;
    assert_eq!(c["status"], "running");
    assert_eq!(c["pools"][0]["current_nodes"], 1);
    let released: Vec<Ipv4Addr> = grown
        .iter()
        .filter(|(n, _, _)| *n != first[0].0)
        .map(|(_, ip, _)| *ip)
        .collect();

    // Up again, 1 → 2: the new node gets the lowest address released.
    let r = m.patch(&path, &json!({"desired_nodes": 2})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    succeeds(&m, &r.body["action"]).await;
    let again = workers(&m, &id, &pool).await;
    let fresh: Vec<&(String, Ipv4Addr, String)> =
        again.iter().filter(|(n, _, _)| *n != first[0].0).collect();
    assert_eq!(fresh.len(), 1);
    assert_eq!(
        Some(&fresh[0].1),
        released.iter().min(),
        "a released address is handed out again"
    );
    assert_eq!(node_vms(&m, &id), 3);

    let acts = m.get(&format!("/v1/clusters/{id}/actions")).await;
    let commands: Vec<&str> = acts.body["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["command"].as_str().unwrap())
        .collect();
    assert_eq!(
        commands.iter().filter(|c| **c == "scale_node_pool").count(),
        3,
        "{commands:?}"
    );
    m.stop().await;
}

#[tokio::test]
async fn a_second_pool_is_added_then_deleted() {
    let m = Meson::start().await;
    let (id, first, create_action) = create(&m, &cluster_body("two", None)).await;
    succeeds(&m, &json!({"id": create_action})).await;
    let pools = format!("/v1/clusters/{id}/pools");
    let body = json!({
        "pool_name": "extra", "desired_nodes": 2, "min_nodes": 0, "max_nodes": 2,
        "autoscale": "False", "billing": "monthly",
        "specs": {"cpu": 1, "ram": 1024, "storage": 20},
        "labels": {"tier": "batch"}, "taints": ["dedicated=batch:NoSchedule"],
        "colour": "blue"
    });
    let r = m.post(&pools, &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let p = &r.body["pool"];
    assert_eq!(p["name"], "extra");
    assert_eq!(
        (p["desired_nodes"].clone(), p["current_nodes"].clone()),
        (json!(2), json!(0))
    );
    assert_eq!(p["billing"], "MONTHLY");
    assert_eq!(p["taints"], json!(["dedicated=batch:NoSchedule"]));
    assert_eq!(r.body["action"]["command"], "create_node_pool");
    assert_eq!(r.body["warnings"][0]["field"], "colour");
    let extra = p["id"].as_str().unwrap().to_owned();
    assert_eq!(m.cluster(&id).await["status"], "updating");
    succeeds(&m, &r.body["action"]).await;

    let c = m.cluster(&id).await;
    assert_eq!(c["status"], "running", "{c}");
    assert_eq!(c["pools"].as_array().unwrap().len(), 2);
    let r = m.get(&format!("{pools}/{extra}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["pool"]["current_nodes"], 2);
    let added = workers(&m, &id, &extra).await;
    assert_eq!(added.len(), 2);
    assert!(added.iter().all(|(_, _, s)| s == "ready"), "{added:?}");
    let names = m.get(&format!("/v1/clusters/{id}/nodes")).await.body["nodes"].clone();
    assert!(
        names
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["pool"] == extra.as_str())
            .all(|n| n["name"].as_str().unwrap().starts_with("two-extra-")),
        "{names}"
    );
    assert_eq!(node_vms(&m, &id), 4, "control plane, 1 + 2 workers");
    let r = m.get(&pools).await;
    assert_eq!(r.body["pools"].as_array().unwrap().len(), 2, "{}", r.body);

    // The name is taken in this cluster.
    let r = m
        .post(&pools, &json!({"pool_name": "extra", "desired_nodes": 1}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "uniqueness_error");
    assert_eq!(field(&r), "pool_name");

    // Delete it: its VMs go, the first pool's stay.
    let r = m.delete(&format!("{pools}/{extra}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["action"]["command"], "delete_node_pool");
    succeeds(&m, &r.body["action"]).await;
    assert_eq!(node_vms(&m, &id), 2);
    assert_eq!(
        m.get(&format!("{pools}/{extra}")).await.status,
        StatusCode::NOT_FOUND
    );
    let c = m.cluster(&id).await;
    assert_eq!(c["status"], "running");
    assert_eq!(c["pools"].as_array().unwrap().len(), 1);
    assert_eq!(workers(&m, &id, &first).await.len(), 1);

    // The last pool stays; the name is free again.
    let r = m.delete(&format!("{pools}/{first}")).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "conflict");
    let r = m
        .post(
            &pools,
            &json!({"pool_name": "extra", "desired_nodes": 0, "max_nodes": 1}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    succeeds(&m, &r.body["action"]).await;

    // Nodes no host of the cluster's region can hold: the action fails, the
    // pool goes, the cluster is `error` with the reason, nothing is left.
    let r = m
        .post(
            &pools,
            &json!({"pool_name": "huge", "desired_nodes": 1,
                "specs": {"cpu": 128, "ram": 1_048_576, "storage": 10_240}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let huge = r.body["pool"]["id"].as_str().unwrap().to_owned();
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "error", "{done}");
    assert_eq!(done["error"]["code"], "resource_unavailable", "{done}");
    let c = m.cluster(&id).await;
    assert_eq!(c["status"], "error");
    assert!(c["error_message"].is_string(), "{c}");
    assert_eq!(
        m.get(&format!("{pools}/{huge}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(node_vms(&m, &id), 2, "nothing of it on AtomOS");
    // The cluster still runs its nodes: a pool change brings it back.
    let r = m
        .patch(&format!("{pools}/{first}"), &json!({"desired_nodes": 2}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    succeeds(&m, &r.body["action"]).await;
    let c = m.cluster(&id).await;
    assert_eq!(c["status"], "running");
    assert_eq!(c["error_message"], Value::Null);
    assert_eq!(node_vms(&m, &id), 3);

    // Deleting the cluster takes every pool's nodes with it.
    let r = m.delete(&format!("/v1/clusters/{id}")).await;
    succeeds(&m, &r.body["action"]).await;
    assert_eq!(m.inventory_counts(), (0, 0));
    m.stop().await;
}

#[tokio::test]
async fn pool_changes_are_refused_by_name() {
    let m = Meson::start().await;
    // 7 addresses: the endpoint and 6 nodes at most.
    let subnet = json!({"dhcp": "False", "subnet_netmask": "10.60.0.0/24",
        "start_address": "10.60.0.2", "last_address": "10.60.0.8"});
    let (id, pool, create_action) = create(&m, &cluster_body("refusals", Some(subnet))).await;
    let pools = format!("/v1/clusters/{id}/pools");
    let path = format!("{pools}/{pool}");

    // While the cluster is being created, its create holds it.
    let r = m.patch(&path, &json!({"desired_nodes": 2})).await;
    assert_eq!(r.status, StatusCode::LOCKED, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "locked");
    assert_eq!(
        r.body["error"]["details"]["action_id"],
        create_action.as_str()
    );
    let r = m
        .post(&pools, &json!({"pool_name": "b", "desired_nodes": 1}))
        .await;
    assert_eq!(r.status, StatusCode::LOCKED, "{}", r.body);
    assert_eq!(
        r.body["error"]["details"]["action_id"],
        create_action.as_str()
    );
    succeeds(&m, &json!({"id": create_action})).await;
    // Nothing of the refused requests stuck.
    let c = m.cluster(&id).await;
    assert_eq!(c["pools"].as_array().unwrap().len(), 1);
    assert_eq!(c["pools"][0]["desired_nodes"], 1);

    // Bounds, each named.
    for (body, name) in [
        (json!({"desired_nodes": 4}), "desired_nodes"),
        (json!({"desired_nodes": 0}), "desired_nodes"),
        (json!({"min_nodes": 4}), "min_nodes"),
        (json!({"max_nodes": 0}), "max_nodes"),
        (json!({"desired_nodes": 101}), "desired_nodes"),
        (json!({"desired_nodes": "two"}), "desired_nodes"),
        (json!({"autoscale": "maybe"}), "autoscale"),
        // The cluster's only worker.
        (json!({"min_nodes": 0, "desired_nodes": 0}), "desired_nodes"),
        // 1 + 6 nodes and the endpoint do not fit in 7 addresses.
        (json!({"max_nodes": 6}), "max_nodes"),
    ] {
        let r = m.patch(&path, &body).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.body);
        assert_eq!(r.body["error"]["code"], "invalid_input");
        assert_eq!(field(&r), name, "{body}: {}", r.body);
    }
    // 1 + 5 and the endpoint fit; bounds alone start nothing.
    let r = m
        .patch(&path, &json!({"max_nodes": 5, "autoscale": "True"}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(r.body.get("action").is_none(), "{}", r.body);
    assert_eq!(r.body["pool"]["max_nodes"], 5);
    assert_eq!(r.body["pool"]["autoscale"], true);
    let r = m.patch(&path, &json!({"desired_nodes": 1})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(
        r.body.get("action").is_none(),
        "no change, no action: {}",
        r.body
    );
    assert_eq!(m.cluster(&id).await["status"], "running");

    // A new pool: named fields, and the network's room.
    for (body, name) in [
        (
            json!({"pool_name": "Bad_Name", "desired_nodes": 1}),
            "pool_name",
        ),
        (json!({"desired_nodes": 1}), "pool_name"),
        (
            json!({"pool_name": "b", "min_nodes": 3, "max_nodes": 2}),
            "min_nodes",
        ),
        (json!({"pool_name": "b", "desired_nodes": 1}), "max_nodes"),
    ] {
        let r = m.post(&pools, &body).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.body);
        assert_eq!(field(&r), name, "{body}: {}", r.body);
    }
    let r = m
        .post(
            &pools,
            &json!({"pool_name": "workers", "desired_nodes": 0, "max_nodes": 1}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(field(&r), "pool_name");

    // The last pool; unknown pools and clusters; bad ids.
    let r = m.delete(&path).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "conflict");
    let unknown = uuid::Uuid::new_v4();
    for r in [
        m.get(&format!("{pools}/{unknown}")).await,
        m.patch(&format!("{pools}/{unknown}"), &json!({"desired_nodes": 1}))
            .await,
        m.delete(&format!("{pools}/{unknown}")).await,
        m.post(
            &format!("/v1/clusters/{unknown}/pools"),
            &json!({"pool_name": "x", "desired_nodes": 1}),
        )
        .await,
    ] {
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    }
    let r = m.patch(&format!("{pools}/nope"), &json!({})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(field(&r), "id");

    // While a scale runs, the next change waits its turn.
    let r = m.patch(&path, &json!({"desired_nodes": 2})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let scale = r.body["action"].clone();
    let r = m.patch(&path, &json!({"desired_nodes": 3})).await;
    assert_eq!(r.status, StatusCode::LOCKED, "{}", r.body);
    assert_eq!(r.body["error"]["details"]["action_id"], scale["id"]);
    let r = m.delete(&format!("/v1/clusters/{id}")).await;
    assert_eq!(r.status, StatusCode::LOCKED, "{}", r.body);
    succeeds(&m, &scale).await;
    let c = m.cluster(&id).await;
    assert_eq!(
        c["pools"][0]["desired_nodes"], 2,
        "the locked change did not stick"
    );
    assert_eq!(c["pools"][0]["current_nodes"], 2);
    m.stop().await;
}

#[tokio::test]
async fn a_cluster_whose_create_failed_cannot_change_its_pools() {
    let m = Meson::start().await;
    let mut body = cluster_body("broken", None);
    body["req"]["control_plane"] =
        json!({"nodes": 1, "specs": {"cpu": 128, "ram": 1_048_576, "storage": 10_240}});
    let (id, pool, create_action) = create(&m, &body).await;
    let done = m.wait_action(&create_action).await;
    assert_eq!(done["status"], "error", "{done}");
    assert_eq!(m.cluster(&id).await["status"], "error");
    let pools = format!("/v1/clusters/{id}/pools");
    let r = m
        .patch(&format!("{pools}/{pool}"), &json!({"desired_nodes": 2}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "conflict");
    let r = m
        .post(&pools, &json!({"pool_name": "more", "desired_nodes": 1}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    // Nothing was written: no second pool, the count as it was.
    let c = m.cluster(&id).await;
    assert_eq!(c["status"], "error");
    assert_eq!(c["pools"].as_array().unwrap().len(), 1);
    assert_eq!(c["pools"][0]["desired_nodes"], 1);
    m.stop().await;
}
