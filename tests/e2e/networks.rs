//! Private networks: CRUD, VMs on them, meson's IPAM, delete when unused.

use crate::harness::{Meson, seed_vm};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// The seed VM named `name` (no provider) on `networks`.
pub(crate) fn vm_on(name: &str, networks: &[&str]) -> Value {
    let mut body = seed_vm();
    body.as_object_mut().unwrap().remove("provider");
    body["specs"]["vm_name"] = json!(name);
    body["networks"] = json!(networks);
    body
}

pub(crate) async fn create_network(m: &Meson, body: Value) -> String {
    let r = m.post("/v1/networks", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    r.body["network"]["id"].as_str().unwrap().to_owned()
}

/// Creates a VM and waits for its create action; returns the VM as read after.
pub(crate) async fn create_vm(m: &Meson, body: &Value) -> Value {
    let r = m.post("/v1/vms", body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    let id = r.body["vm"]["id"].as_str().unwrap();
    m.get(&format!("/v1/vms/{id}")).await.body["vm"].clone()
}

pub(crate) async fn delete_and_wait(m: &Meson, path: &str) -> Value {
    let r = m.delete(path).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    done
}

#[tokio::test]
async fn network_lifecycle_with_static_addresses() {
    let m = Meson::start().await;
    let body = json!({"name": "backend", "cidr": "192.168.10.0/24", "dhcp": "False",
                      "start_address": "192.168.10.0", "last_address": "192.168.10.20",
                      "labels": {"tier": "db"}});
    let r = m.post("/v1/networks", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let net = &r.body["network"];
    let id = net["id"].as_str().unwrap().to_owned();
    assert_eq!(net["cidr"], "192.168.10.0/24");
    assert_eq!(net["gateway"], "192.168.10.1");
    assert_eq!(net["dhcp"], false);
    assert_eq!(net["status"], "available");
    assert_eq!(net["vms"], json!([]));
    // The seed-style start on the network address is clamped, and said so.
    assert_eq!(net["range"]["last"], "192.168.10.20");
    assert!(
        r.body["warnings"]
            .as_array()
            .is_some_and(|w| w.iter().any(|w| w["field"] == "start_address")),
        "{}",
        r.body
    );
    // Nothing on AtomOS until a VM needs it.
    assert!(m.host_networks().is_empty());

    let dup = m.post("/v1/networks", &body).await;
    assert_eq!(dup.status, StatusCode::CONFLICT, "{}", dup.body);
    assert_eq!(dup.body["error"]["code"], "uniqueness_error");

    // Get, list with a selector, rename and relabel.
    assert_eq!(
        m.get(&format!("/v1/networks/{id}")).await.body["network"]["name"],
        "backend"
    );
    let other = create_network(&m, json!({"name": "other", "cidr": "10.1.0.0/16"})).await;
    let l = m.get("/v1/networks?label_selector=tier%3Ddb").await;
    assert_eq!(l.status, StatusCode::OK, "{}", l.body);
    assert_eq!(l.body["networks"].as_array().unwrap().len(), 1);
    assert_eq!(l.body["meta"]["pagination"]["total_entries"], 1);
    let l = m.get("/v1/networks?sort=name:desc").await;
    let names: Vec<&str> = l.body["networks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["other", "backend"]);
    let r = m
        .patch(
            &format!("/v1/networks/{id}"),
            &json!({"name": "db-net", "labels": {"tier": "data"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["network"]["name"], "db-net");
    assert_eq!(r.body["network"]["labels"], json!({"tier": "data"}));

    // Two VMs get the lowest free addresses, past the gateway.
    let a = create_vm(&m, &vm_on("a", &[&id])).await;
    let b = create_vm(&m, &vm_on("b", &[&id])).await;
    for (vm, ip) in [(&a, "192.168.10.2"), (&b, "192.168.10.3")] {
        let nic = &vm["private_net"][0];
        assert_eq!(nic["network"], id.as_str(), "{vm}");
        assert_eq!(nic["ip"], ip, "{vm}");
        assert!(
            nic["mac_address"]
                .as_str()
                .unwrap()
                .starts_with("52:54:00:"),
            "{vm}"
        );
        // The guest configured it (network-config), so AtomOS reports it.
        assert_eq!(vm["ipv4"], ip, "{vm}");
    }
    // The network exists on each VM's host, without DHCP, with meson's name.
    let made = m.host_networks();
    assert!(!made.is_empty());
    for (_, n) in &made {
        assert_eq!(n.name, format!("net-{}", id.replace('-', "")));
        assert_eq!(n.dhcp_start, None);
        assert_eq!(n.cidr, "192.168.10.1/24");
    }
    let hosts: std::collections::BTreeSet<&str> = [&a, &b]
        .iter()
        .map(|v| v["host"].as_str().unwrap())
        .collect();
    assert_eq!(made.len(), hosts.len(), "one network per host: {made:?}");
    let got = m.get(&format!("/v1/networks/{id}")).await.body["network"].clone();
    assert_eq!(got["vms"].as_array().unwrap().len(), 2);

    // In use: refused, naming the VMs.
    let r = m.delete(&format!("/v1/networks/{id}")).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "conflict");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(a["id"].as_str().unwrap())
    );

    // A deleted VM's address is free again, and is the next one handed out.
    delete_and_wait(&m, &format!("/v1/vms/{}", a["id"].as_str().unwrap())).await;
    let c = create_vm(&m, &vm_on("c", &[&id])).await;
    assert_eq!(c["private_net"][0]["ip"], "192.168.10.2");

    for vm in [&b, &c] {
        delete_and_wait(&m, &format!("/v1/vms/{}", vm["id"].as_str().unwrap())).await;
    }
    let done = delete_and_wait(&m, &format!("/v1/networks/{id}")).await;
    assert_eq!(done["command"], "delete_network");
    assert_eq!(done["resources"][0]["type"], "network");
    assert!(m.host_networks().is_empty(), "{:?}", m.host_networks());
    assert_eq!(m.inventory_counts(), (0, 0));
    assert_eq!(
        m.get(&format!("/v1/networks/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    let acts = m.get(&format!("/v1/networks/{id}/actions")).await;
    assert_eq!(acts.status, StatusCode::OK, "{}", acts.body);
    assert_eq!(acts.body["actions"][0]["command"], "delete_network");
    // The name is free again.
    create_network(&m, json!({"name": "db-net", "cidr": "192.168.10.0/24"})).await;
    delete_and_wait(&m, &format!("/v1/networks/{other}")).await;
    m.stop().await;
}

#[tokio::test]
async fn dhcp_networks_leave_addressing_to_atomos() {
    let m = Meson::start().await;
    let id = create_network(
        &m,
        json!({"name": "lan", "cidr": "10.20.0.0/24",
               "dhcp_range": {"start": "10.20.0.100", "last": "10.20.0.150"}}),
    )
    .await;
    let vm = create_vm(&m, &vm_on("d", &[&id])).await;
    assert_eq!(vm["private_net"][0]["ip"], Value::Null, "{vm}");
    let ip: std::net::Ipv4Addr = vm["ipv4"].as_str().unwrap().parse().unwrap();
    assert!(
        (std::net::Ipv4Addr::new(10, 20, 0, 100)..=std::net::Ipv4Addr::new(10, 20, 0, 150))
            .contains(&ip),
        "leased from the DHCP range: {ip}"
    );
    let (_, n) = &m.host_networks()[0];
    assert_eq!(n.dhcp_start.as_deref(), Some("10.20.0.100"));
    m.stop().await;
}

#[tokio::test]
async fn concurrent_creates_never_share_an_address_and_a_full_range_refuses_cleanly() {
    let m = Meson::start().await;
    // Three addresses to hand out.
    let id = create_network(
        &m,
        json!({"name": "tiny", "cidr": "192.168.30.0/24", "dhcp": false,
               "start_address": "192.168.30.10", "last_address": "192.168.30.12"}),
    )
    .await;
    let bodies: Vec<Value> = (0..5).map(|i| vm_on(&format!("v{i}"), &[&id])).collect();
    let replies = futures::future::join_all(bodies.iter().map(|b| m.post("/v1/vms", b))).await;
    let mut ips = Vec::new();
    let mut refused = 0;
    for r in &replies {
        match r.status {
            StatusCode::CREATED => ips.push(r.body["vm"]["private_net"][0]["ip"].clone()),
            StatusCode::SERVICE_UNAVAILABLE => {
                assert_eq!(
                    r.body["error"]["code"], "resource_unavailable",
                    "{}",
                    r.body
                );
                assert!(
                    r.body["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("no free address")
                );
                refused += 1;
            }
            other => panic!("{other}: {}", r.body),
        }
    }
    ips.sort_by_key(|v| v.to_string());
    assert_eq!(
        ips,
        [
            json!("192.168.30.10"),
            json!("192.168.30.11"),
            json!("192.168.30.12")
        ]
    );
    assert_eq!(refused, 2);
    // A refused create left nothing behind.
    let l = m.get("/v1/vms").await;
    assert_eq!(
        l.body["meta"]["pagination"]["total_entries"], 3,
        "{}",
        l.body
    );
    for r in replies.iter().filter(|r| r.status == StatusCode::CREATED) {
        let done = m
            .wait_action(r.body["action"]["id"].as_str().unwrap())
            .await;
        assert_eq!(done["status"], "success", "{done}");
    }
    m.stop().await;
}

#[tokio::test]
async fn bad_networks_are_named() {
    let m = Meson::start().await;
    let cases = [
        (json!({"cidr": "10.0.0.0/24"}), "name"),
        (json!({"name": "x", "cidr": "10.0.0.1/24"}), "cidr"),
        (json!({"name": "x", "cidr": "10.0.0.0/30"}), "cidr"),
        (
            json!({"name": "x", "cidr": "10.0.0.0/24", "gateway": "10.0.1.1"}),
            "gateway",
        ),
        (
            json!({"name": "x", "cidr": "10.0.0.0/24", "dhcp": "maybe"}),
            "dhcp",
        ),
        (
            json!({"name": "x", "cidr": "10.0.0.0/24", "dhcp_range": {"start": "10.0.0.9", "last": "10.0.0.2"}}),
            "dhcp_range",
        ),
        (
            json!({"name": "x", "cidr": "10.0.0.0/24", "start_address": "10.0.5.1", "last_address": "10.0.0.9"}),
            "start_address",
        ),
        (json!({"name": "bad name", "cidr": "10.0.0.0/24"}), "name"),
    ];
    for (body, field) in cases {
        let r = m.post("/v1/networks", &body).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.body);
        let fields: Vec<&str> = r.body["error"]["details"]["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert!(
            fields.iter().any(|f| f.starts_with(field)),
            "{body}: {fields:?}"
        );
    }
    // A VM naming a network that is not there (or not a UUID) is refused whole.
    let ghost = uuid::Uuid::new_v4().to_string();
    for (nets, field) in [
        (json!([ghost]), "networks[0]"),
        (json!(["nope"]), "networks[0]"),
    ] {
        let mut body = vm_on("ghost", &[]);
        body["networks"] = nets;
        let r = m.post("/v1/vms", &body).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
        assert_eq!(
            r.body["error"]["details"]["fields"][0]["name"], field,
            "{}",
            r.body
        );
    }
    assert_eq!(
        m.get("/v1/vms").await.body["meta"]["pagination"]["total_entries"],
        0
    );
    assert_eq!(m.get("/v1/networks").await.body["networks"], json!([]));
    m.stop().await;
}

/// Where the simulator has this meson VM: its host, and the AtomOS ids of
/// the networks its NICs are on there.
fn sim_vm(m: &Meson, vm: &str) -> (String, Vec<String>) {
    let name = crate::harness::vm_atomos_name(vm);
    m.sim()
        .hosts()
        .iter()
        .find_map(|h| {
            let found = h.inventory().vms.into_iter().find(|v| v.name == name)?;
            Some((h.name().to_owned(), found.network_ids))
        })
        .expect("the VM is on a host")
}

/// The AtomOS id of meson network `name`'s copy on `host`.
fn host_network(m: &Meson, host: &str, net: &str) -> Option<String> {
    let name = format!("net-{}", net.replace('-', ""));
    m.host_networks()
        .into_iter()
        .find(|(h, n)| h == host && n.name == name)
        .map(|(_, n)| n.id)
}

/// Starts a VM action and waits for it to succeed.
pub(crate) async fn vm_action(m: &Meson, vm: &str, action: &str, body: Value) -> Value {
    let r = m
        .post(&format!("/v1/vms/{vm}/actions/{action}"), &body)
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{action}: {}", r.body);
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{action}: {done}");
    done
}

#[tokio::test]
async fn a_running_vm_joins_and_leaves_a_network_and_migrates_with_it() {
    let m = Meson::start().await;
    let net = create_network(
        &m,
        json!({"name": "late", "cidr": "192.168.30.0/24", "dhcp": false}),
    )
    .await;
    let vm = create_vm(&m, &seed_vm()).await;
    let id = vm["id"].as_str().unwrap().to_owned();
    assert_eq!(vm["private_net"], json!([]));
    let (host, nets) = sim_vm(&m, &id);
    assert!(nets.is_empty());
    assert!(
        host_network(&m, &host, &net).is_none(),
        "not made before a VM needs it"
    );

    // Attached while it runs: made on its host, plugged in there, the
    // address meson's; the VM kept running.
    let done = vm_action(&m, &id, "attach-network", json!({"network": net})).await;
    assert_eq!(done["command"], "attach_network");
    let got = m.get(&format!("/v1/vms/{id}")).await.body["vm"].clone();
    assert_eq!(got["status"], "running");
    assert_eq!(got["private_net"][0]["network"], net.as_str());
    assert_eq!(got["private_net"][0]["ip"], "192.168.30.2");
    let mac = got["private_net"][0]["mac_address"].clone();
    let on_host = host_network(&m, &host, &net).expect("made on the VM's host");
    assert_eq!(sim_vm(&m, &id).1, [on_host]);
    let listed = m.get(&format!("/v1/networks/{net}")).await.body["network"].clone();
    assert_eq!(listed["vms"], json!([id]));

    // Refusals: twice (409 naming it), a network that is not the tenant's
    // (404), a bad id (400 naming the field); an attached network cannot go.
    let twice = m
        .post(
            &format!("/v1/vms/{id}/actions/attach-network"),
            &json!({"network": net}),
        )
        .await;
    assert_eq!(twice.status, StatusCode::CONFLICT, "{}", twice.body);
    assert!(
        twice.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&net)
    );
    let theirs = m
        .call(
            reqwest::Method::POST,
            "/v1/networks",
            &m.token("other", "eve", meson_api::Role::Editor),
            Some(&json!({"name": "theirs", "cidr": "10.2.0.0/16"})),
        )
        .await;
    let theirs = theirs.body["network"]["id"].as_str().unwrap().to_owned();
    for unknown in [theirs.clone(), uuid::Uuid::new_v4().to_string()] {
        let r = m
            .post(
                &format!("/v1/vms/{id}/actions/attach-network"),
                &json!({"network": unknown}),
            )
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    }
    let bad = m
        .post(
            &format!("/v1/vms/{id}/actions/attach-network"),
            &json!({"network": "lan"}),
        )
        .await;
    assert_eq!(bad.rejected_fields(), ["network"], "{}", bad.body);
    let missing = m
        .post(&format!("/v1/vms/{id}/actions/detach-network"), &json!({}))
        .await;
    assert_eq!(missing.rejected_fields(), ["network"], "{}", missing.body);
    assert_eq!(
        m.delete(&format!("/v1/networks/{net}")).await.status,
        StatusCode::CONFLICT
    );
    // Another tenant cannot attach the VM (it is not found for them).
    let r = m
        .call(
            reqwest::Method::POST,
            &format!("/v1/vms/{id}/actions/attach-network"),
            &m.token("other", "eve", meson_api::Role::Editor),
            Some(&json!({"network": theirs})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

    // Migrated with it: the network made on the new host, the NIC keeping
    // its MAC and address there, nothing left on the old host.
    vm_action(&m, &id, "migrate", json!({})).await;
    let moved = m.get(&format!("/v1/vms/{id}")).await.body["vm"].clone();
    let (new_host, nets) = sim_vm(&m, &id);
    assert_ne!(new_host, host);
    assert_eq!(moved["host"], new_host.as_str());
    let there = host_network(&m, &new_host, &net).expect("made on the new host");
    assert_eq!(nets, [there]);
    assert_eq!(moved["private_net"][0]["ip"], "192.168.30.2");
    assert_eq!(moved["private_net"][0]["mac_address"], mac);
    assert_eq!(moved["status"], "running");

    // Detached, off and running alike: gone from the host and from meson,
    // its address free; detaching again names the field.
    vm_action(&m, &id, "detach-network", json!({"network": net})).await;
    let got = m.get(&format!("/v1/vms/{id}")).await.body["vm"].clone();
    assert_eq!(got["private_net"], json!([]));
    assert!(sim_vm(&m, &id).1.is_empty());
    let again = m
        .post(
            &format!("/v1/vms/{id}/actions/detach-network"),
            &json!({"network": net}),
        )
        .await;
    assert_eq!(again.rejected_fields(), ["network"], "{}", again.body);
    vm_action(&m, &id, "poweroff", json!({})).await;
    vm_action(&m, &id, "attach-network", json!({"network": net})).await;
    assert_eq!(sim_vm(&m, &id).1.len(), 1);
    vm_action(&m, &id, "detach-network", json!({"network": net})).await;

    // The network is free: it goes, from every host it was made on.
    delete_and_wait(&m, &format!("/v1/networks/{net}")).await;
    assert!(host_network(&m, &host, &net).is_none());
    assert!(host_network(&m, &new_host, &net).is_none());
    m.stop().await;
}
