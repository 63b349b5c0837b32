//! A cluster's nodes over real HTTP against the simulator: replace, reboot,
//! auto-repair (crashed and vanished VMs, the max-unhealthy guard), refusals,
//! spreading over hosts, and a 50-node cluster.

use crate::harness::{Meson, seed_kaas};
use crate::reconciler::workflow_env;
use meson_workflows::auto_repair::{self, RepairConfig};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

/// A node's VM name on AtomOS.
fn atomos_name(cluster: &str, node: &Value) -> String {
    let vm = node["provider_id"]
        .as_str()
        .and_then(|p| p.strip_prefix("elemento://"))
        .expect("provider id");
    meson_core::naming::node_atomos_name(
        meson_core::ClusterId(cluster.parse().unwrap()),
        node["role"] == "control_plane",
        meson_core::VmId(vm.parse().unwrap()),
        &meson_core::TenantId("dev".into()),
    )
}

async fn node_action(m: &Meson, cluster: &str, node: &str, what: &str) -> crate::harness::Reply {
    m.post(
        &format!("/v1/clusters/{cluster}/nodes/{node}/actions/{what}"),
        &json!({}),
    )
    .await
}

/// The seed cluster with meson's IPAM over `10.40.0.10..=last`.
fn static_seed(name: &str, last: &str) -> Value {
    let mut body = seed_kaas();
    body["req"]["name"] = json!(name);
    body["req"]["nodes_subnet"] = json!({"dhcp": false, "subnet_netmask": "10.40.0.0/24",
        "start_address": "10.40.0.10", "last_address": last});
    body
}

#[tokio::test]
async fn replace_and_reboot_a_node_over_http() {
    let m = Meson::start().await;
    // Endpoint + 4 nodes + exactly one spare address for the surge node.
    let id = m.running_cluster(&static_seed("rr", "10.40.0.15")).await;
    let before = m.cluster_nodes(&id).await;
    assert_eq!(before.len(), 4);
    let old = before[1].clone();
    assert_eq!(old["role"], "worker");
    let old_id = old["id"].as_str().unwrap();
    let old_ip = old["ip"].as_str().unwrap().to_owned();
    let old_vm = atomos_name(&id, &old);
    assert!(m.cluster_vms(&id).iter().any(|v| v.name == old_vm));

    // Slow boots keep the replace running long enough to be in the way.
    m.set_boot_time(Duration::from_millis(800));
    let r = node_action(&m, &id, old_id, "replace").await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let action = r.body["action"].clone();
    assert_eq!(action["command"], "replace_node");
    assert_eq!(action["status"], "running");
    let kinds: BTreeSet<&str> = action["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, BTreeSet::from(["cluster", "node"]));
    // Every other action on the cluster waits its turn, naming the blocker.
    let busy = node_action(&m, &id, before[2]["id"].as_str().unwrap(), "reboot").await;
    assert_eq!(busy.status, StatusCode::LOCKED, "{}", busy.body);
    assert_eq!(busy.body["error"]["code"], "locked");
    assert_eq!(busy.body["error"]["details"]["action_id"], action["id"]);
    let done = m.wait_action(action["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "success", "{done}");
    m.set_boot_time(Duration::from_millis(100));

    // The new node is ready in the old one's pool, on the spare address;
    // the old one is gone from the cluster and from the simulator.
    let after = m.cluster_nodes(&id).await;
    assert_eq!(after.len(), 4, "{after:?}");
    assert!(after.iter().all(|n| n["id"] != old["id"]), "{after:?}");
    let new: Vec<&Value> = after
        .iter()
        .filter(|n| !before.iter().any(|b| b["id"] == n["id"]))
        .collect();
    assert_eq!(new.len(), 1, "{after:?}");
    let new = new[0];
    assert_eq!(new["status"], "ready", "{new}");
    assert_eq!(new["pool"], old["pool"]);
    assert_eq!(new["role"], "worker");
    assert_eq!(new["kubernetes_version"], old["kubernetes_version"]);
    assert_eq!(new["ip"], "10.40.0.15", "the one spare address");
    let vms = m.cluster_vms(&id);
    assert_eq!(vms.len(), 4, "{vms:?}");
    assert!(
        vms.iter().all(|v| v.name != old_vm),
        "old VM still on AtomOS"
    );
    assert!(vms.iter().any(|v| v.name == atomos_name(&id, new)));

    // The old node's address was released: the next replacement gets it.
    let second = after
        .iter()
        .find(|n| n["role"] == "worker" && n["id"] != new["id"])
        .unwrap();
    let r = node_action(&m, &id, second["id"].as_str().unwrap(), "replace").await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    let ips: BTreeSet<String> = m
        .cluster_nodes(&id)
        .await
        .iter()
        .map(|n| n["ip"].as_str().unwrap().to_owned())
        .collect();
    assert!(ips.contains(&old_ip), "{old_ip} reused: {ips:?}");
    assert_eq!(ips.len(), 4);

    // Reboot: not_ready while AtomOS boots the VM again, then ready; the
    // guest does not phone home again (cloud-init's phone_home runs once).
    let target = m.cluster_nodes(&id).await[0].clone();
    assert_eq!(target["role"], "control_plane");
    let name = atomos_name(&id, &target);
    let sim_vm = || {
        m.cluster_vms(&id)
            .into_iter()
            .find(|v| v.name == name)
            .expect("vm on the simulator")
    };
    let vm_id = sim_vm().id;
    m.set_boot_time(Duration::from_secs(2));
    let r = node_action(&m, &id, target["id"].as_str().unwrap(), "reboot").await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["action"]["command"], "reboot_node");
    let mut seen = Vec::new();
    let action = r.body["action"]["id"].as_str().unwrap().to_owned();
    let done = loop {
        let n = m.cluster_nodes(&id).await;
        let status = n.iter().find(|x| x["id"] == target["id"]).unwrap()["status"].clone();
        if seen.last() != Some(&status) {
            seen.push(status);
        }
        let a = m.get(&format!("/v1/actions/{action}")).await.body["action"].clone();
        if a["status"] != "running" {
            break a;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    m.set_boot_time(Duration::from_millis(100));
    assert_eq!(done["status"], "success", "{done}");
    assert!(seen.contains(&json!("not_ready")), "{seen:?}");
    let n = m.cluster_nodes(&id).await;
    let rebooted = n.iter().find(|x| x["id"] == target["id"]).unwrap();
    assert_eq!(rebooted["status"], "ready", "{rebooted}");
    assert_eq!(rebooted["error_message"], Value::Null);
    let v = sim_vm();
    assert_eq!(v.id, vm_id, "the same VM, rebooted");
    assert_eq!(v.state, atomos_driver::VmState::Running);
    assert_eq!(m.cluster_vms(&id).len(), 4);
    assert_eq!(
        &m.cluster_commands(&id).await[..4],
        [
            "reboot_node",
            "replace_node",
            "replace_node",
            "create_cluster"
        ]
    );
    m.stop().await;
}

#[tokio::test]
async fn node_actions_are_refused_for_strangers_and_busy_or_broken_clusters() {
    let m = Meson::start().await;
    let id = m.running_cluster(&seed_kaas()).await;
    let node = m.cluster_nodes(&id).await[1]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Unknown node, a malformed id, no such command.
    let r = node_action(&m, &id, &uuid::Uuid::new_v4().to_string(), "replace").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "not_found");
    let r = node_action(&m, &id, "nope", "reboot").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let r = node_action(&m, &id, &node, "explode").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

    // Another tenant sees nothing; a viewer may not act.
    let secret = std::fs::read_to_string(m.data_dir().join("jwt-secret")).unwrap();
    let auth = meson_api::Auth::hs256(secret.trim().as_bytes(), "meson-test");
    for (tenant, role, want) in [
        (
            "someone-else",
            meson_api::Role::Admin,
            StatusCode::NOT_FOUND,
        ),
        ("dev", meson_api::Role::Viewer, StatusCode::FORBIDDEN),
    ] {
        let token = auth.issue(tenant, "eve", role, chrono::Duration::minutes(5));
        for what in ["replace", "reboot"] {
            let r = m
                .http
                .post(format!(
                    "{}/v1/clusters/{id}/nodes/{node}/actions/{what}",
                    m.base
                ))
                .bearer_auth(&token)
                .json(&json!({}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), want, "{tenant} {what}");
        }
    }

    // A second cluster, still being created: its create holds it (locked),
    // and its nodes are not the first cluster's (not found).
    let mut body = seed_kaas();
    body["req"]["name"] = json!("second");
    m.set_boot_time(Duration::from_secs(1));
    let r = m.post("/v1/clusters", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let second = r.body["cluster"]["id"].as_str().unwrap().to_owned();
    let create = r.body["action"]["id"].as_str().unwrap().to_owned();
    let theirs = m.cluster_nodes(&second).await[1]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = node_action(&m, &id, &theirs, "replace").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let r = node_action(&m, &second, &theirs, "reboot").await;
    assert_eq!(r.status, StatusCode::LOCKED, "{}", r.body);
    assert_eq!(r.body["error"]["details"]["action_id"], create.as_str());
    m.set_boot_time(Duration::from_millis(100));
    assert_eq!(m.wait_action(&create).await["status"], "success");

    // A cluster whose create failed is not running: conflict.
    for h in ["arubacloud-ar-1", "arubacloud-ar-2", "arubacloud-ar-3"] {
        m.fault(h, &json!({"full": true})).await;
    }
    let mut body = seed_kaas();
    body["req"]["name"] = json!("broken");
    let r = m.post("/v1/clusters", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let broken = r.body["cluster"]["id"].as_str().unwrap().to_owned();
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "error", "{done}");
    assert_eq!(m.cluster(&broken).await["status"], "error");
    let victim = m.cluster_nodes(&broken).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for what in ["replace", "reboot"] {
        let r = node_action(&m, &broken, &victim, what).await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{what}: {}", r.body);
        assert_eq!(r.body["error"]["code"], "conflict");
    }
    // Nothing was started by any refusal.
    assert_eq!(m.cluster_commands(&id).await, ["create_cluster"]);
    assert_eq!(m.cluster_commands(&broken).await, ["create_cluster"]);
    m.stop().await;
}

#[tokio::test]
async fn auto_repair_replaces_a_crashed_vm_and_a_vanished_one() {
    let m = Meson::start().await;
    let id = m.running_cluster(&seed_kaas()).await;
    let env = workflow_env(&m, RepairConfig::default());
    let before = m.cluster_nodes(&id).await;
    // A healthy cluster: nothing to do.
    auto_repair::tick(&env).await.unwrap();
    assert_eq!(m.cluster_commands(&id).await, ["create_cluster"]);

    for (i, how) in [(1, "crash_vm"), (2, "lose_vm")] {
        let victim = m
            .cluster_nodes(&id)
            .await
            .into_iter()
            .find(|n| n["id"] == before[i]["id"])
            .unwrap();
        let name = atomos_name(&id, &victim);
        let host = victim["host"].as_str().unwrap().to_owned();
        m.fault(&host, &json!({ how: name })).await;
        // Slow boots keep the victim around while its replacement comes up.
        m.set_boot_time(Duration::from_millis(800));
        // Two workers' passes at once start one repair between them.
        let (a, b) = tokio::join!(auto_repair::tick(&env), auto_repair::tick(&env));
        a.unwrap();
        b.unwrap();
        let cmds = m.cluster_commands(&id).await;
        assert_eq!(
            cmds.iter().filter(|c| *c == "repair_node").count(),
            i,
            "{cmds:?}"
        );
        // The node says what is wrong while it is being replaced.
        let marked = m
            .cluster_nodes(&id)
            .await
            .into_iter()
            .find(|n| n["id"] == victim["id"])
            .expect("still there while its replacement boots");
        assert_eq!(marked["status"], "not_ready", "{marked}");
        let msg = marked["error_message"].as_str().unwrap_or_default();
        let want = if how == "crash_vm" {
            "unhealthy: its VM crashed"
        } else {
            "unhealthy: its VM vanished"
        };
        assert!(msg.starts_with(want), "{msg}");
        // The repair action is the tenant's, on the cluster and the node.
        let r = m
            .get(&format!("/v1/clusters/{id}/actions?per_page=50"))
            .await;
        let repair = r.body["actions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["command"] == "repair_node")
            .unwrap()
            .clone();
        assert!(
            repair["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["type"] == "node" && r["id"] == victim["id"]),
            "{repair}"
        );
        let done = m.wait_action(repair["id"].as_str().unwrap()).await;
        assert_eq!(done["status"], "success", "{done}");
        m.set_boot_time(Duration::from_millis(100));

        let now = m.cluster_nodes(&id).await;
        assert_eq!(now.len(), 4, "{now:?}");
        assert!(now.iter().all(|n| n["id"] != victim["id"]));
        assert!(now.iter().all(|n| n["status"] == "ready"), "{now:?}");
        let vms = m.cluster_vms(&id);
        assert_eq!(vms.len(), 4, "{vms:?}");
        assert!(vms.iter().all(|v| v.name != name), "the victim is gone");
        assert!(
            vms.iter()
                .all(|v| v.state == atomos_driver::VmState::Running),
            "{vms:?}"
        );
        // Healthy again: the next pass does nothing.
        auto_repair::tick(&env).await.unwrap();
        let cmds = m.cluster_commands(&id).await;
        assert_eq!(cmds.iter().filter(|c| *c == "repair_node").count(), i);
        assert_eq!(m.cluster(&id).await["error_message"], Value::Null);
    }
    m.stop().await;
}

#[tokio::test]
async fn too_many_unhealthy_nodes_are_left_alone_and_the_cluster_says_why() {
    let m = Meson::start().await;
    let id = m.running_cluster(&seed_kaas()).await;
    let env = workflow_env(&m, RepairConfig::default());
    let workers: Vec<Value> = m
        .cluster_nodes(&id)
        .await
        .into_iter()
        .filter(|n| n["role"] == "worker")
        .collect();
    assert_eq!(workers.len(), 3);
    // Two of the pool's three nodes (67%, over the default 40%) crash.
    let crashed = &workers[..2];
    for n in crashed {
        let host = n["host"].as_str().unwrap();
        m.fault(host, &json!({"crash_vm": atomos_name(&id, n)}))
            .await;
    }
    let vms_before: BTreeSet<String> = m.cluster_vms(&id).into_iter().map(|v| v.name).collect();
    for _ in 0..2 {
        auto_repair::tick(&env).await.unwrap();
    }
    assert_eq!(
        m.cluster_commands(&id).await,
        ["create_cluster"],
        "nothing repaired"
    );
    let vms_after: BTreeSet<String> = m.cluster_vms(&id).into_iter().map(|v| v.name).collect();
    assert_eq!(vms_before, vms_after, "nothing replaced on AtomOS");
    let c = m.cluster(&id).await;
    assert_eq!(c["status"], "running");
    let msg = c["error_message"].as_str().expect("the cluster says why");
    assert!(
        msg.starts_with("auto-repair paused: 2 of 3 nodes of pool '1poolname' are unhealthy"),
        "{msg}"
    );
    assert!(msg.contains("40%"), "{msg}");
    for n in m.cluster_nodes(&id).await {
        if crashed.iter().any(|c| c["id"] == n["id"]) {
            assert_eq!(n["status"], "not_ready", "{n}");
            assert!(
                n["error_message"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("unhealthy: its VM crashed")),
                "{n}"
            );
        } else {
            assert_eq!(n["status"], "ready", "{n}");
            assert_eq!(n["error_message"], Value::Null);
        }
    }

    // The VMs come back (started on AtomOS): healthy again, messages cleared.
    for n in crashed {
        let host = m.sim().host(n["host"].as_str().unwrap()).unwrap();
        let client = atomos_driver::AtomosClient::new(
            host.target().clone(),
            atomos_driver::ClientOptions::default(),
        )
        .unwrap();
        let vm = client
            .vm_by_name(&atomos_name(&id, n))
            .await
            .unwrap()
            .unwrap();
        client.start(&vm.id).await.unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while m
        .cluster_vms(&id)
        .iter()
        .any(|v| v.state != atomos_driver::VmState::Running)
    {
        assert!(tokio::time::Instant::now() < deadline, "VMs did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    auto_repair::tick(&env).await.unwrap();
    let c = m.cluster(&id).await;
    assert_eq!(c["error_message"], Value::Null, "{c}");
    for n in m.cluster_nodes(&id).await {
        assert_eq!(n["status"], "ready", "{n}");
        assert_eq!(n["error_message"], Value::Null, "{n}");
    }
    assert_eq!(m.cluster_commands(&id).await, ["create_cluster"]);
    m.stop().await;
}

/// Which host each node of a group is on: group name → host → count.
fn spread(nodes: &[Value]) -> BTreeMap<String, BTreeMap<String, usize>> {
    let mut out: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for n in nodes {
        let group = if n["role"] == "control_plane" {
            "control-plane".to_owned()
        } else {
            n["pool"].as_str().unwrap().to_owned()
        };
        *out.entry(group)
            .or_default()
            .entry(n["host"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    out
}

#[tokio::test]
async fn nodes_spread_over_hosts_and_share_one_when_nothing_else_fits() {
    let m = Meson::start().await;
    let mut body = seed_kaas();
    body["req"]["name"] = json!("spread");
    body["req"]["control_plane"] = json!({"nodes": 3});
    let id = m.running_cluster(&body).await;
    let all = m.cluster_nodes(&id).await;
    assert_eq!(all.len(), 6);
    // The three control-plane nodes and the pool's three each on a host of
    // their own, all in the one arubacloud region.
    for (group, hosts) in spread(&all) {
        assert_eq!(hosts.len(), 3, "{group}: {hosts:?}");
        assert!(hosts.values().all(|n| *n == 1), "{group}: {hosts:?}");
        assert!(hosts.keys().all(|h| h.starts_with("arubacloud-ar-")));
    }

    // Two of the region's three hosts are full: the next cluster's nodes
    // all share the third.
    for h in ["arubacloud-ar-1", "arubacloud-ar-3"] {
        m.fault(h, &json!({"full": true})).await;
    }
    body["req"]["name"] = json!("crowded");
    let crowded = m.running_cluster(&body).await;
    let hosts: BTreeSet<String> = m
        .cluster_nodes(&crowded)
        .await
        .iter()
        .map(|n| n["host"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(hosts, BTreeSet::from(["arubacloud-ar-2".to_owned()]));
    assert_eq!(m.cluster_vms(&crowded).len(), 6);
    m.stop().await;
}

#[tokio::test]
async fn a_fifty_node_cluster_comes_up_and_goes_away() {
    let m = Meson::start().await;
    let mut body = seed_kaas();
    body["req"]["name"] = json!("big");
    body["req"]["control_plane"] = json!({"nodes": 3});
    body["req"]["nodes_subnet"] = json!({"dhcp": false, "subnet_netmask": "10.50.0.0/24",
        "start_address": "10.50.0.10", "last_address": "10.50.0.200"});
    let pool = |name: &str, n: u32| {
        json!({"pool_name": name, "desired_nodes": n, "min_nodes": n, "max_nodes": n,
               "specs": {"cpu": 2, "ram": 4096, "storage": 40}})
    };
    body["req"]["nodepool"] = json!([pool("web", 16), pool("batch", 16), pool("db", 15)]);
    let started = std::time::Instant::now();
    let r = m.post("/v1/clusters", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let id = r.body["cluster"]["id"].as_str().unwrap().to_owned();
    let done = m
        .wait_action_for(
            r.body["action"]["id"].as_str().unwrap(),
            Duration::from_secs(180),
        )
        .await;
    assert_eq!(done["status"], "success", "{done}");
    eprintln!("50-node cluster running after {:?}", started.elapsed());
    let c = m.cluster(&id).await;
    assert_eq!(c["status"], "running", "{c}");

    // Every node phoned home, each with its own address from the range.
    let all = m.cluster_nodes(&id).await;
    assert_eq!(all.len(), 50);
    assert!(all.iter().all(|n| n["status"] == "ready"), "{all:?}");
    let ips: BTreeSet<Ipv4Addr> = all
        .iter()
        .map(|n| n["ip"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ips.len(), 50);
    assert!(
        ips.iter()
            .all(|ip| (Ipv4Addr::new(10, 50, 0, 11)..=Ipv4Addr::new(10, 50, 0, 200)).contains(ip))
    );
    // Exactly 50 node VMs on the simulator, all running and phoned home.
    let vms = m.cluster_vms(&id);
    assert_eq!(vms.len(), 50);
    assert!(
        vms.iter()
            .all(|v| v.phoned_home && v.state == atomos_driver::VmState::Running)
    );
    // Spread evenly: every group over the region's three hosts.
    for (group, hosts) in spread(&all) {
        assert_eq!(hosts.len(), 3, "{group}: {hosts:?}");
        let (lo, hi) = (hosts.values().min().unwrap(), hosts.values().max().unwrap());
        assert!(hi - lo <= 1, "{group}: {hosts:?}");
    }

    let r = m.delete(&format!("/v1/clusters/{id}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let done = m
        .wait_action_for(
            r.body["action"]["id"].as_str().unwrap(),
            Duration::from_secs(120),
        )
        .await;
    assert_eq!(done["status"], "success", "{done}");
    assert!(m.cluster_vms(&id).is_empty());
    assert_eq!(m.inventory_counts(), (0, 0), "no VM or volume left");
    assert!(m.host_networks().is_empty(), "{:?}", m.host_networks());
    assert_eq!(
        m.get(&format!("/v1/clusters/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    m.stop().await;
}
