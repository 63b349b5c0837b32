//! Managed Kubernetes over real HTTP against the simulator.

use crate::harness::{Meson, seed_kaas};
use base64::Engine;
use reqwest::StatusCode;
use serde_json::json;
use std::net::Ipv4Addr;

/// The first PEM block of `kind` in `text`.
fn pem_block(text: &str, kind: &str) -> Option<String> {
    let begin = format!("-----BEGIN {kind}-----");
    let end = format!("-----END {kind}-----");
    let start = text.find(&begin)?;
    let stop = text[start..].find(&end)? + start + end.len();
    Some(text[start..stop].to_owned())
}

/// The DER of a PEM block, however it was embedded (indented in YAML, or
/// with `\n` escapes in a quoted string).
fn der(pem: &str) -> Vec<u8> {
    let pem = pem.replace("\\n", "\n");
    let body: String = pem
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("-----"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body.trim())
        .expect("pem base64")
}

#[tokio::test]
async fn the_seed_kaas_payload_becomes_a_running_cluster_and_goes_away() {
    let m = Meson::start().await;
    let r = m.post("/v1/clusters", &seed_kaas()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let c = &r.body["cluster"];
    assert_eq!(c["name"], "test8");
    assert_eq!(c["status"], "creating");
    assert_eq!(c["kubernetes_version"], "1.29.2");
    assert_eq!(c["update_policy"], "NEVER_UPDATE");
    assert_eq!(c["network"]["cidr"], "192.168.1.0/24");
    assert_eq!(c["network"]["dhcp"], true);
    assert_eq!(c["control_plane"]["nodes"], 1);
    assert_eq!(c["control_plane"]["endpoint"], "https://192.168.1.254:6443");
    assert_eq!(c["pools"][0]["name"], "1poolname");
    assert_eq!(c["pools"][0]["desired_nodes"], 3);
    assert_eq!(r.body["action"]["command"], "create_cluster");
    let id = c["id"].as_str().unwrap().to_owned();

    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    let c = m.get(&format!("/v1/clusters/{id}")).await.body["cluster"].clone();
    assert_eq!(c["status"], "running", "{c}");
    assert_eq!(c["provider"], "arubacloud");
    assert_eq!(c["pools"][0]["current_nodes"], 3);
    assert!(c["price"]["hourly"].as_f64().unwrap() > 0.0, "{c}");

    // Every node phoned home, with an address from the subnet's range.
    let nodes = m.get(&format!("/v1/clusters/{id}/nodes")).await.body["nodes"].clone();
    let nodes = nodes.as_array().unwrap();
    assert_eq!(nodes.len(), 4);
    assert_eq!(nodes[0]["role"], "control_plane");
    for n in nodes {
        assert_eq!(n["status"], "ready", "{n}");
        let ip: Ipv4Addr = n["ip"].as_str().unwrap().parse().unwrap();
        assert!(
            (Ipv4Addr::new(192, 168, 1, 2)..=Ipv4Addr::new(192, 168, 1, 24)).contains(&ip),
            "{ip} in the subnet's range"
        );
        assert!(
            n["provider_id"]
                .as_str()
                .unwrap()
                .starts_with("elemento://")
        );
    }
    // Spread over the region's hosts, each with its own copy of the DHCP
    // network, yet no two nodes share an address: meson addresses them.
    let ips: std::collections::BTreeSet<&str> =
        nodes.iter().map(|n| n["ip"].as_str().unwrap()).collect();
    assert_eq!(ips.len(), 4, "{ips:?}");
    let hosts: std::collections::BTreeSet<&str> =
        nodes.iter().map(|n| n["host"].as_str().unwrap()).collect();
    assert!(hosts.len() > 1, "{hosts:?}");
    // The simulator holds exactly those VMs; the nodes are not tenant VMs.
    let vms = m.cluster_vms(&id);
    assert_eq!(vms.len(), 4, "{vms:?}");
    assert_eq!(m.get("/v1/vms").await.body["vms"], json!([]));

    // The kubeconfig's client certificate verifies against the cluster CA,
    // the same CA the control plane was given.
    let r = m
        .get(&format!("/v1/clusters/{id}/kubeconfig?expiry_seconds=3600"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.headers["content-type"], "application/yaml");
    let yaml = r.body.as_str().expect("yaml text").to_owned();
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&yaml).expect("kubeconfig parses");
    assert_eq!(
        doc["clusters"][0]["cluster"]["server"].as_str(),
        Some("https://192.168.1.254:6443")
    );
    let b64 = |v: &serde_yaml_ng::Value| {
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(v.as_str().unwrap())
                .unwrap(),
        )
        .unwrap()
    };
    let ca_pem = b64(&doc["clusters"][0]["cluster"]["certificate-authority-data"]);
    let cert_pem = b64(&doc["users"][0]["user"]["client-certificate-data"]);
    let ca_der = der(&ca_pem);
    let cert_der = der(&cert_pem);
    let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
    let (_, cert) = x509_parser::parse_x509_certificate(&cert_der).unwrap();
    // Signed by the admin CA, not the cluster CA (see the credentials rotation).
    assert!(cert.verify_signature(Some(ca.public_key())).is_err());
    let lifetime = cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp();
    assert!((3600..=3700).contains(&lifetime), "{lifetime}");
    let cp_files: Vec<String> = m
        .sim()
        .hosts()
        .iter()
        .flat_map(|h| h.inventory().volumes)
        .flat_map(|v| v.files)
        .map(|f| f.content)
        .filter(|c| c.contains("kubeadm init") || c.contains("InitConfiguration"))
        .collect();
    assert!(!cp_files.is_empty(), "the init node's user-data");
    let given = pem_block(&cp_files[0], "CERTIFICATE").expect("a CA in the user-data");
    assert_eq!(der(&given), ca_der, "the kubeconfig's CA is the cluster's");
    // The client certificate verifies against the bundle the API servers
    // authenticate clients with.
    let bundle = crate::cluster_upgrades::client_ca_bundle(&cp_files[0]);
    assert!(crate::cluster_upgrades::trusted_by(&bundle, &cert_pem));
    // Bad expiries are refused by name.
    let r = m
        .get(&format!("/v1/clusters/{id}/kubeconfig?expiry_seconds=5"))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        r.body["error"]["details"]["fields"][0]["name"],
        "expiry_seconds"
    );

    // A phone-home with a wrong secret is refused; the listing is unchanged.
    let node = nodes[1]["id"].as_str().unwrap();
    let r = m
        .post(
            &format!("/v1/clusters/{id}/nodes/{node}/phone-home?token=nope"),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    // Delete: nothing of the cluster on any host, and it answers 404.
    let r = m.delete(&format!("/v1/clusters/{id}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    assert!(m.cluster_vms(&id).is_empty());
    assert_eq!(m.inventory_counts(), (0, 0), "no VM or volume left");
    assert!(m.host_networks().is_empty(), "{:?}", m.host_networks());
    assert_eq!(
        m.get(&format!("/v1/clusters/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    let acts = m.get(&format!("/v1/clusters/{id}/actions")).await;
    let commands: Vec<&str> = acts.body["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["command"].as_str().unwrap())
        .collect();
    assert_eq!(commands, ["delete_cluster", "create_cluster"]);
    m.stop().await;
}

#[tokio::test]
async fn static_addressing_three_control_planes_and_the_kaas_alias() {
    let m = Meson::start().await;
    let mut body = seed_kaas();
    body["req"]["name"] = json!("ha");
    body["req"]["control_plane"] = json!({"nodes": 3});
    body["req"]["nodes_subnet"] = json!({"dhcp": false, "subnet_netmask": "10.40.0.0/24",
        "start_address": "10.40.0.10", "last_address": "10.40.0.30"});
    body["req"]["nodepool"] = json!([
        {"pool_name": "a", "desired_nodes": 2, "min_nodes": 1, "max_nodes": 4,
         "specs": {"cpu": 2, "ram": 2048, "storage": 30}},
        {"pool_name": "b", "desired_nodes": 1, "min_nodes": 1, "max_nodes": 2,
         "specs": {"cpu": 1, "ram": 1024, "storage": 20}},
    ]);
    let r = m.post("/v1/kaas", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let id = r.body["cluster"]["id"].as_str().unwrap().to_owned();
    // The endpoint holds the first address of the range; nodes the next ones.
    assert_eq!(
        r.body["cluster"]["control_plane"]["endpoint"],
        "https://10.40.0.10:6443"
    );
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    let nodes = m.get(&format!("/v1/clusters/{id}/nodes")).await.body["nodes"].clone();
    let mut ips: Vec<String> = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["ip"].as_str().unwrap().to_owned())
        .collect();
    ips.sort();
    let want: Vec<String> = (11..=16).map(|i| format!("10.40.0.{i}")).collect();
    assert_eq!(ips, want, "unique, from the range, after the endpoint");
    let roles: Vec<&str> = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles.iter().filter(|r| **r == "control_plane").count(), 3);
    assert_eq!(m.cluster_vms(&id).len(), 6);

    // Same name again: refused. A range too small for the nodes at max: refused up front.
    let r = m.post("/v1/clusters", &body).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    let mut small = body.clone();
    small["req"]["name"] = json!("small");
    small["req"]["nodes_subnet"]["last_address"] = json!("10.40.0.18");
    let r = m.post("/v1/clusters", &small).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(
        r.body["error"]["details"]["fields"][0]["name"], "req.nodes_subnet",
        "{}",
        r.body
    );
    assert_eq!(
        m.get("/v1/clusters").await.body["meta"]["pagination"]["total_entries"],
        1
    );
    m.stop().await;
}
