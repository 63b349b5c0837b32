//! The cluster-autoscaler's `externalgrpc` endpoint over mutual TLS: a
//! Python grpcio client generated from the protocol's .proto files scales
//! an autoscaling pool up and down and the simulated inventory follows; a
//! tonic client checks who may call and what pools are groups.

use crate::grpc::refused;
use crate::harness::{Meson, seed_kaas};
use meson_proto::externalgrpc as pb;
use pb::cloud_provider_client::CloudProviderClient;
use prost::Message;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use tonic::Code;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

/// A cluster with one autoscaling pool (1..3, one node) and one fixed pool.
async fn autoscaling_cluster(m: &Meson) -> String {
    let mut kaas = seed_kaas();
    kaas["req"]["nodepool"] = json!([
        {"pool_name": "auto", "autoscale": true, "min_nodes": 1, "max_nodes": 3,
         "desired_nodes": 1, "specs": {"cpu": 2, "ram": 4096, "storage": 40},
         "labels": {"tier": "burst"}},
        {"pool_name": "fixed", "desired_nodes": 1, "min_nodes": 1, "max_nodes": 1}
    ]);
    m.running_cluster(&kaas).await
}

/// The credential's three PEMs written to `dir`.
async fn credentials(m: &Meson, cluster: &str, dir: &Path) -> Value {
    let r = m
        .post(
            &format!("/v1/clusters/{cluster}/autoscaler-credentials"),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let c = r.body["credentials"].clone();
    std::fs::create_dir_all(dir).unwrap();
    for (file, field) in [
        ("ca.crt", "ca_cert"),
        ("tls.crt", "cert"),
        ("tls.key", "key"),
    ] {
        std::fs::write(dir.join(file), c[field].as_str().unwrap()).unwrap();
    }
    c
}

async fn client(
    m: &Meson,
    c: &Value,
) -> Result<CloudProviderClient<Channel>, tonic::transport::Error> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(c["ca_cert"].as_str().unwrap()))
        .domain_name("localhost");
    if !c["cert"].is_null() {
        tls = tls.identity(Identity::from_pem(
            c["cert"].as_str().unwrap(),
            c["key"].as_str().unwrap(),
        ));
    }
    let addr = m.dev().autoscaler_addr.expect("autoscaler endpoint");
    let ch = Channel::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(tls)?
        .connect()
        .await?;
    Ok(CloudProviderClient::new(ch))
}

fn python() -> String {
    let setup = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("autoscaler/setup");
    let out = std::process::Command::new(&setup)
        .output()
        .expect("tests/autoscaler/setup runs");
    assert!(
        out.status.success(),
        "tests/autoscaler/setup failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
        .display()
        .to_string()
}

async fn drive(python: &str, phase: &str, m: &Meson, dir: &Path) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("autoscaler/drive.py");
    let out = tokio::process::Command::new(python)
        .arg(script)
        .arg(phase)
        .arg("--address")
        .arg(m.dev().autoscaler_addr.unwrap().to_string())
        .args(["--ca", &dir.join("ca.crt").display().to_string()])
        .args(["--cert", &dir.join("tls.crt").display().to_string()])
        .args(["--key", &dir.join("tls.key").display().to_string()])
        .output()
        .await
        .expect("python runs");
    assert!(
        out.status.success(),
        "drive.py {phase}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON line")
}

#[tokio::test]
async fn a_grpcio_autoscaler_scales_an_autoscaling_pool_up_and_down() {
    let python = python();
    let m = Meson::start().await;
    let cluster = autoscaling_cluster(&m).await;
    let dir = m.data_dir().join("autoscaler");
    credentials(&m, &cluster, &dir).await;
    let vms_before = m.cluster_vms(&cluster).len();

    let up = drive(&python, "up", &m, &dir).await;
    assert_eq!(
        (up["min"].clone(), up["max"].clone(), up["target"].clone()),
        (json!(1), json!(3), json!(2)),
        "{up}"
    );
    assert_eq!(up["template"]["cpu"], "2");
    assert_eq!(up["template"]["memory"], "4096Mi");
    assert_eq!(up["template"]["labels"]["tier"], "burst");
    assert!(
        up["too_many"].as_str().unwrap().contains("max_nodes"),
        "{up}"
    );
    // The inventory followed: one more VM on AtomOS, a node that phoned home.
    assert_eq!(m.cluster_vms(&cluster).len(), vms_before + 1);
    let added = up["added"]
        .as_str()
        .unwrap()
        .trim_start_matches("elemento://")
        .to_owned();
    let nodes = m.cluster_nodes(&cluster).await;
    let node = nodes
        .iter()
        .find(|n| n["provider_id"] == up["added"])
        .unwrap_or_else(|| panic!("{added} not among {nodes:?}"));
    assert_eq!(node["status"], "ready");

    let down = drive(&python, "down", &m, &dir).await;
    assert_eq!(down["target"], 1, "{down}");
    assert_eq!(down["deleted"], up["added"]);
    assert!(
        down["below_min"].as_str().unwrap().contains("min_nodes"),
        "{down}"
    );
    assert_eq!(m.cluster_vms(&cluster).len(), vms_before);
    assert!(
        m.cluster_nodes(&cluster)
            .await
            .iter()
            .all(|n| n["provider_id"] != up["added"])
    );
    let pool = m.cluster(&cluster).await["pools"][0].clone();
    assert_eq!(
        (pool["desired_nodes"].clone(), pool["current_nodes"].clone()),
        (json!(1), json!(1))
    );

    // Both resizes are in the audit log, as the cluster's autoscaler.
    let audit = m
        .get("/v1/audit?operation=cluster_pool_delete_nodes")
        .await
        .body;
    let e = &audit["audit_entries"][0];
    assert_eq!(e["subject"], format!("cluster-autoscaler:{cluster}"));
    assert_eq!(
        e["path"],
        "/clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider/NodeGroupDeleteNodes"
    );
    assert_eq!(e["status"], 200);
    assert!(e["action_id"].is_string());
    m.stop().await;
}

#[tokio::test]
async fn only_the_clusters_current_certificate_reaches_its_own_groups() {
    let m = Meson::start().await;
    let cluster = autoscaling_cluster(&m).await;
    let dir = m.data_dir().join("a");
    let creds = credentials(&m, &cluster, &dir).await;
    let mut cp = client(&m, &creds).await.expect("mutual TLS");

    // Groups: the autoscaling pool only, with its bounds.
    let groups = cp
        .node_groups(pb::NodeGroupsRequest {})
        .await
        .unwrap()
        .into_inner()
        .node_groups;
    assert_eq!(groups.len(), 1);
    let (auto, fixed) = {
        let c = m.cluster(&cluster).await;
        let pools = c["pools"].as_array().unwrap().clone();
        let id = |name: &str| {
            pools.iter().find(|p| p["name"] == name).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        (id("auto"), id("fixed"))
    };
    assert_eq!(
        (
            groups[0].id.as_str(),
            groups[0].min_size,
            groups[0].max_size
        ),
        (auto.as_str(), 1, 3)
    );
    // A node of the fixed pool, and a control-plane node, are in no group.
    for n in m.cluster_nodes(&cluster).await {
        let g = cp
            .node_group_for_node(pb::NodeGroupForNodeRequest {
                node: Some(pb::ExternalGrpcNode {
                    provider_id: n["provider_id"].as_str().unwrap().into(),
                    ..Default::default()
                }),
            })
            .await
            .unwrap()
            .into_inner()
            .node_group
            .unwrap();
        let want = if n["pool"] == auto.as_str() {
            auto.clone()
        } else {
            String::new()
        };
        assert_eq!(g.id, want, "{n}");
    }
    refused(
        cp.node_group_increase_size(pb::NodeGroupIncreaseSizeRequest {
            delta: 1,
            id: fixed.clone(),
        }),
        Code::NotFound,
    )
    .await;
    refused(
        cp.node_group_increase_size(pb::NodeGroupIncreaseSizeRequest {
            delta: 0,
            id: auto.clone(),
        }),
        Code::InvalidArgument,
    )
    .await;
    refused(
        cp.pricing_pod_price(pb::PricingPodPriceRequest::default()),
        Code::Unimplemented,
    )
    .await;
    let template = cp
        .node_group_template_node_info(pb::NodeGroupTemplateNodeInfoRequest { id: auto.clone() })
        .await
        .unwrap()
        .into_inner();
    let node = meson_proto::k8s_core::Node::decode(template.node_bytes.as_slice()).unwrap();
    assert_eq!(
        node.status.unwrap().capacity["memory"].string.as_deref(),
        Some("4096Mi")
    );

    // Another cluster's credential sees that cluster's groups, not these.
    let other = autoscaling_cluster_named(&m, "other").await;
    let other_creds = credentials(&m, &other, &m.data_dir().join("b")).await;
    let mut other_cp = client(&m, &other_creds).await.unwrap();
    refused(
        other_cp.node_group_target_size(pb::NodeGroupTargetSizeRequest { id: auto.clone() }),
        Code::NotFound,
    )
    .await;

    // A new credential revokes the one before.
    let newer = credentials(&m, &cluster, &m.data_dir().join("c")).await;
    let e = cp.node_groups(pb::NodeGroupsRequest {}).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    let mut cp = client(&m, &newer).await.unwrap();
    assert_eq!(
        cp.node_groups(pb::NodeGroupsRequest {})
            .await
            .unwrap()
            .into_inner()
            .node_groups
            .len(),
        1
    );

    // Without a client certificate there is no connection at all.
    let mut anonymous = creds.clone();
    anonymous["cert"] = Value::Null;
    let refused = match client(&m, &anonymous).await {
        Err(_) => true,
        Ok(mut c) => c.node_groups(pb::NodeGroupsRequest {}).await.is_err(),
    };
    assert!(refused, "an anonymous client got in");

    // Another tenant cannot issue this cluster's credential.
    let r = m
        .call(
            reqwest::Method::POST,
            &format!("/v1/clusters/{cluster}/autoscaler-credentials"),
            &m.token("acme", "eve", meson_api::Role::Admin),
            Some(&json!({})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    m.stop().await;
}

async fn autoscaling_cluster_named(m: &Meson, name: &str) -> String {
    let mut kaas = seed_kaas();
    kaas["req"]["name"] = name.into();
    kaas["req"]["nodepool"] = json!([{"pool_name": "auto", "autoscale": true, "min_nodes": 1,
        "max_nodes": 2, "desired_nodes": 1}]);
    m.running_cluster(&kaas).await
}
