//! Cluster upgrades, update policies and credential rotation over real
//! HTTP against the simulator.

use crate::harness::{Meson, seed_kaas, seed_kaas_one_worker};
use base64::Engine;
use meson_workflows::auto_upgrade;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::time::Duration;

fn ids(nodes: &[Value]) -> BTreeSet<String> {
    nodes
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Names of the VMs (on every simulated host) of this cluster's nodes.
fn node_vms(m: &Meson, cluster: &str) -> BTreeSet<String> {
    let prefix = format!("k{}", &cluster.replace('-', "")[..12]);
    m.sim()
        .hosts()
        .iter()
        .flat_map(|h| h.inventory().vms)
        .filter(|v| v.name.starts_with(&prefix))
        .map(|v| v.name)
        .collect()
}

/// The user-data the simulator holds for the node called `name`.
fn user_data(m: &Meson, name: &str) -> Option<String> {
    m.user_data_containing(&format!("# meson: node {name} ("))
}

/// The content of the file written at `path` by a user-data.
fn written(user_data: &str, path: &str) -> Option<String> {
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(user_data).expect("user-data YAML");
    doc["write_files"]
        .as_sequence()?
        .iter()
        .find(|f| f["path"].as_str() == Some(path))
        .and_then(|f| f["content"].as_str())
        .map(str::to_owned)
}

/// `NAME='value'` of a node's bootstrap script.
fn script_var(user_data: &str, name: &str) -> String {
    let script = written(user_data, "/usr/local/sbin/meson-bootstrap").expect("the script");
    let prefix = format!("{name}='");
    let line = script
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("{name} not in the script"));
    line[prefix.len()..line.len() - 1].to_owned()
}

/// The token a node's kubeadm configuration names (join, or the init's
/// bootstrap token).
fn kubeadm_token(user_data: &str) -> String {
    let config = written(user_data, "/etc/meson/kubeadm.yaml").expect("kubeadm config");
    let first = config.split("\n---\n").next().unwrap();
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(first).unwrap();
    doc["discovery"]["bootstrapToken"]["token"]
        .as_str()
        .or_else(|| doc["bootstrapTokens"][0]["token"].as_str())
        .expect("a token")
        .to_owned()
}

/// The DER of every certificate in a PEM text.
fn certificates(pem: &str) -> Vec<Vec<u8>> {
    x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes())
        .map(|p| p.expect("PEM").contents)
        .collect()
}

/// The client-CA bundle a control-plane node's API server trusts, from its
/// user-data.
pub(crate) fn client_ca_bundle(user_data: &str) -> Vec<Vec<u8>> {
    certificates(
        &written(user_data, "/etc/kubernetes/pki/meson-client-ca.crt")
            .expect("a control-plane node's client CA bundle"),
    )
}

/// Whether the certificate `cert_pem` is signed by a CA of `bundle`.
pub(crate) fn trusted_by(bundle: &[Vec<u8>], cert_pem: &str) -> bool {
    let der = &certificates(cert_pem)[0];
    let (_, cert) = x509_parser::parse_x509_certificate(der).unwrap();
    bundle.iter().any(|ca| {
        let (_, ca) = x509_parser::parse_x509_certificate(ca).unwrap();
        cert.verify_signature(Some(ca.public_key())).is_ok()
    })
}

/// A fresh admin kubeconfig: (server CA PEM, client certificate PEM).
async fn kubeconfig(m: &Meson, id: &str) -> (String, String) {
    let r = m
        .get(&format!("/v1/clusters/{id}/kubeconfig?expiry_seconds=3600"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let doc: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(r.body.as_str().expect("yaml")).unwrap();
    let b64 = |v: &serde_yaml_ng::Value| {
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(v.as_str().unwrap())
                .unwrap(),
        )
        .unwrap()
    };
    (
        b64(&doc["clusters"][0]["cluster"]["certificate-authority-data"]),
        b64(&doc["users"][0]["user"]["client-certificate-data"]),
    )
}

async fn upgrade(m: &Meson, id: &str, body: Value) -> crate::harness::Reply {
    m.post(&format!("/v1/clusters/{id}/actions/upgrade"), &body)
        .await
}

/// Every node at `version`, ready, with a distinct address in `range`; the
/// simulator holds exactly their VMs.
async fn assert_rolled(
    m: &Meson,
    id: &str,
    version: &str,
    count: usize,
    range: (Ipv4Addr, Ipv4Addr),
) -> Vec<Value> {
    let c = m.cluster(id).await;
    assert_eq!(c["status"], "running", "{c}");
    assert_eq!(c["kubernetes_version"], version);
    assert_eq!(c["error_message"], Value::Null);
    let all = m.cluster_nodes(id).await;
    assert_eq!(all.len(), count, "{all:?}");
    let mut ips = BTreeSet::new();
    for n in &all {
        assert_eq!(n["kubernetes_version"], version, "{n}");
        assert_eq!(n["status"], "ready", "{n}");
        let ip: Ipv4Addr = n["ip"].as_str().unwrap().parse().unwrap();
        assert!((range.0..=range.1).contains(&ip), "{ip} in the subnet");
        assert!(ips.insert(ip), "{ip} given twice");
        // Each node's user-data installs its own version.
        let ud = user_data(m, n["name"].as_str().unwrap()).expect("its user-data");
        assert_eq!(script_var(&ud, "K8S_VERSION"), version);
    }
    assert_eq!(node_vms(m, id).len(), count, "one VM per node, no more");
    all
}

#[tokio::test]
async fn upgrades_roll_every_node_to_a_later_patch_then_the_next_minor() {
    let m = Meson::start().await;
    let mut body = seed_kaas();
    body["req"]["nodes_subnet"] = json!({"dhcp": false, "subnet_netmask": "10.60.0.0/24",
        "start_address": "10.60.0.10", "last_address": "10.60.0.20"});
    let id = m.running_cluster(&body).await;
    let range = (Ipv4Addr::new(10, 60, 0, 11), Ipv4Addr::new(10, 60, 0, 20));
    let first = assert_rolled(&m, &id, "1.29.2", 4, range).await;
    let first_vms = node_vms(&m, &id);

    // A later patch of the same minor, default rollout (surge one).
    let r = upgrade(&m, &id, json!({"kubernetes_version": "1.29.8"})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["action"]["command"], "upgrade_cluster");
    assert_eq!(r.body["action"]["resources"][0]["type"], "cluster");
    // 1.29 is long past end of life: allowed (an old cluster catches up), with
    // a warning that names the day's default.
    let w = r.body["warnings"].as_array().expect("a warning");
    assert_eq!(w.len(), 1, "{}", r.body);
    assert_eq!(w[0]["field"], "kubernetes_version");
    let default = meson_core::kubernetes::default_release(meson_core::kubernetes::today());
    assert_eq!(
        w[0]["message"],
        format!(
            "Kubernetes 1.29 reached end of life on 2025-02-28; consider {}",
            default.version
        ),
        "{}",
        r.body
    );
    let c = m.cluster(&id).await;
    assert_eq!(c["status"], "updating");
    assert_eq!(c["kubernetes_version"], "1.29.2", "until it is done");
    let done = m
        .wait_action_for(
            r.body["action"]["id"].as_str().unwrap(),
            Duration::from_secs(90),
        )
        .await;
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(done["progress"], 100);
    let second = assert_rolled(&m, &id, "1.29.8", 4, range).await;
    assert!(
        ids(&first).is_disjoint(&ids(&second)),
        "every node replaced"
    );
    assert!(
        first_vms.is_disjoint(&node_vms(&m, &id)),
        "nothing left of the old nodes on the simulator"
    );
    assert_eq!(
        m.inventory_counts(),
        (4, 8),
        "a boot disk and an ISO per node"
    );
    let roles: Vec<&str> = second.iter().map(|n| n["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["control_plane", "worker", "worker", "worker"]);
    assert_eq!(m.cluster(&id).await["pools"][0]["current_nodes"], 3);
    // The new control-plane node joined: it brings kubeadm-config to its version.
    let cp = user_data(&m, second[0]["name"].as_str().unwrap()).unwrap();
    // ...and takes the node it replaces out of etcd and the API before that
    // node's VM goes.
    assert_eq!(
        script_var(&cp, "REPLACES"),
        first[0]["name"].as_str().unwrap(),
        "the new control-plane node names the one it replaces"
    );
    assert!(cp.contains("kubeadm join") || cp.contains("JoinConfiguration"));
    assert!(cp.contains("create configmap kubeadm-config"));

    // The next minor, by its bare name, two workers at a time.
    let r = upgrade(
        &m,
        &id,
        json!({"kubernetes_version": "1.30", "max_surge": 2}),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let done = m
        .wait_action_for(
            r.body["action"]["id"].as_str().unwrap(),
            Duration::from_secs(90),
        )
        .await;
    assert_eq!(done["status"], "success", "{done}");
    let third = assert_rolled(&m, &id, "1.30.14", 4, range).await;
    assert!(ids(&second).is_disjoint(&ids(&third)));
    assert_eq!(m.inventory_counts(), (4, 8));

    // Remove-first: the pool goes one node short at a time.
    let r = upgrade(
        &m,
        &id,
        json!({"kubernetes_version": "1.31.2", "max_surge": 0, "max_unavailable": 1}),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let done = m
        .wait_action_for(
            r.body["action"]["id"].as_str().unwrap(),
            Duration::from_secs(90),
        )
        .await;
    assert_eq!(done["status"], "success", "{done}");
    assert_rolled(&m, &id, "1.31.2", 4, range).await;
    assert_eq!(m.inventory_counts(), (4, 8));

    assert_eq!(
        m.cluster_commands(&id).await,
        [
            "upgrade_cluster",
            "upgrade_cluster",
            "upgrade_cluster",
            "create_cluster"
        ]
    );
    m.stop().await;
}

#[tokio::test]
async fn upgrade_refusals_name_the_version_and_respect_status_and_locks() {
    let m = Meson::start().await;
    let body = seed_kaas_one_worker();
    let id = m.running_cluster(&body).await;

    for (version, why) in [
        (
            "1.31.10",
            "upgrades go to a later patch of the same minor or to the next minor",
        ),
        ("1.28.15", "downgrades are not possible"),
        ("1.29.3", "not in meson's catalogue; from 1.29.2"),
        ("1.29.2", "already runs"),
        (
            "1.27",
            "not in meson's catalogue; from 1.29.2 the cluster may go to 1.29.8",
        ),
        (
            "1.38",
            "not in meson's catalogue; from 1.29.2 the cluster may go to 1.29.8",
        ),
        ("latest", "must be a Kubernetes version"),
    ] {
        let r = upgrade(&m, &id, json!({"kubernetes_version": version})).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{version}: {}", r.body);
        assert_eq!(r.body["error"]["code"], "invalid_input");
        let f = &r.body["error"]["details"]["fields"][0];
        assert_eq!(f["name"], "kubernetes_version", "{}", r.body);
        let msg = f["messages"][0].as_str().unwrap();
        assert!(msg.contains(why), "{version}: {msg}");
    }
    // The allowed ones are listed.
    let r = upgrade(&m, &id, json!({"kubernetes_version": "1.31.10"})).await;
    let msg = r.body["error"]["details"]["fields"][0]["messages"][0]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(msg.contains("may go to 1.29.8, 1.29.15, 1.30.4"), "{msg}");
    assert!(!msg.contains("1.28"), "only where it may go: {msg}");
    for (b, field) in [
        (json!({}), "kubernetes_version"),
        (
            json!({"kubernetes_version": "1.29.8", "max_surge": 50}),
            "max_surge",
        ),
        (
            json!({"kubernetes_version": "1.29.8", "max_surge": 0, "max_unavailable": 0}),
            "max_surge",
        ),
    ] {
        let r = upgrade(&m, &id, b.clone()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{b}: {}", r.body);
        assert_eq!(r.body["error"]["details"]["fields"][0]["name"], field);
    }
    let r = upgrade(
        &m,
        "7d1a2c4e-0000-4000-8000-000000000000",
        json!({"kubernetes_version": "1.29.8"}),
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

    // Not running: conflict (here, an `error` cluster).
    meson_db::clusters::set_status(
        &m.dev().pool,
        meson_core::ClusterId(id.parse().unwrap()),
        meson_core::cluster::ClusterStatus::Error,
        Some("broken for the test"),
    )
    .await
    .unwrap();
    let r = upgrade(&m, &id, json!({"kubernetes_version": "1.29.8"})).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "conflict");
    let r = m
        .post(
            &format!("/v1/clusters/{id}/actions/rotate-credentials"),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    meson_db::clusters::set_status(
        &m.dev().pool,
        meson_core::ClusterId(id.parse().unwrap()),
        meson_core::cluster::ClusterStatus::Running,
        None,
    )
    .await
    .unwrap();
    // Nothing was started by any refusal.
    assert_eq!(m.cluster_commands(&id).await, ["create_cluster"]);

    // Locked while an action runs: a second upgrade, a rotation, a delete.
    m.set_boot_time(Duration::from_millis(700));
    let r = upgrade(&m, &id, json!({"kubernetes_version": "v1.29.8"})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let running = r.body["action"]["id"].as_str().unwrap().to_owned();
    let r = upgrade(&m, &id, json!({"kubernetes_version": "1.29.15"})).await;
    assert_eq!(r.status, StatusCode::LOCKED, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "locked");
    assert_eq!(r.body["error"]["details"]["action_id"], running.as_str());
    let r = m
        .post(
            &format!("/v1/clusters/{id}/actions/rotate-credentials"),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, StatusCode::LOCKED, "{}", r.body);
    assert_eq!(r.body["error"]["details"]["action_id"], running.as_str());
    let r = m.delete(&format!("/v1/clusters/{id}")).await;
    assert_eq!(r.status, StatusCode::LOCKED, "{}", r.body);
    m.set_boot_time(Duration::from_millis(100));
    let done = m.wait_action_for(&running, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(m.cluster(&id).await["kubernetes_version"], "1.29.8");

    // A cluster still being created is locked by its create.
    let mut other = body.clone();
    other["req"]["name"] = json!("young");
    let r = m.post("/v1/clusters", &other).await;
    let young = r.body["cluster"]["id"].as_str().unwrap().to_owned();
    let create = r.body["action"]["id"].as_str().unwrap().to_owned();
    let r = upgrade(&m, &young, json!({"kubernetes_version": "1.29.8"})).await;
    assert_eq!(r.status, StatusCode::LOCKED, "{}", r.body);
    assert_eq!(r.body["error"]["details"]["action_id"], create.as_str());
    m.wait_action_for(&create, Duration::from_secs(60)).await;
    assert_eq!(
        m.cluster_commands(&id).await,
        ["upgrade_cluster", "create_cluster"]
    );
    m.stop().await;
}

/// The workflows' environment on meson's database and the simulator, to
/// run the reconciler's pass as a worker does.
fn env(m: &Meson) -> meson_workflows::Env {
    let pool = m.dev().pool.clone();
    meson_workflows::Env {
        atomos: meson_workflows::Atomos::new(pool.clone(), atomos_driver::ClientOptions::default()),
        pool,
        config: meson_workflows::WorkflowConfig::default(),
    }
}

/// A small cluster (one worker) named `name` under `policy`, at `version`.
fn small(name: &str, policy: &str, version: &str) -> Value {
    let mut body = seed_kaas_one_worker();
    body["req"]["name"] = json!(name);
    body["req"]["update_policy"] = json!(policy);
    body["req"]["kubernetes_version"] = json!(version);
    body
}

#[tokio::test]
async fn the_update_policy_upgrades_by_itself_and_never_update_does_not() {
    // The workers' own reconciler loop, every 200 ms.
    let m = Meson::start_with(|o| o.reconcile_interval = Duration::from_millis(200)).await;
    let patch = m
        .running_cluster(&small("patch", "PATCH_UPDATE", "1.29.2"))
        .await;
    // ALWAYS_UPDATE from the latest patch of the minor before the newest:
    // one upgrade, to the newest release there is.
    let releases = meson_core::kubernetes::releases();
    let newest = releases.last().expect("a catalogue").version;
    let before = releases
        .iter()
        .rev()
        .find(|r| r.version.minor + 1 == newest.minor)
        .expect("two minors")
        .version;
    let always = m
        .running_cluster(&small("always", "ALWAYS_UPDATE", &before.to_string()))
        .await;
    let never = m
        .running_cluster(&small("never", "NEVER_UPDATE", "1.29.2"))
        .await;

    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    for (id, want) in [
        (&patch, "1.29.15".to_owned()),
        (&always, newest.to_string()),
    ] {
        loop {
            let c = m.cluster(id).await;
            if c["kubernetes_version"] == want && c["status"] == "running" {
                break;
            }
            assert_ne!(c["status"], "error", "{c}");
            assert!(tokio::time::Instant::now() < deadline, "not upgraded: {c}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let all = m.cluster_nodes(id).await;
        assert!(
            all.iter().all(|n| n["kubernetes_version"] == want),
            "{all:?}"
        );
        // The system action is the tenant's, on the cluster, done.
        let r = m.get(&format!("/v1/clusters/{id}/actions")).await;
        let a = &r.body["actions"][0];
        assert_eq!(a["command"], "upgrade_cluster", "{}", r.body);
        assert_eq!(a["status"], "success", "{a}");
    }
    // Several passes later: PATCH_UPDATE stays on its minor's latest patch,
    // ALWAYS_UPDATE on the newest release, NEVER_UPDATE where it was.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(m.cluster(&patch).await["kubernetes_version"], "1.29.15");
    assert_eq!(
        m.cluster_commands(&patch).await,
        ["upgrade_cluster", "create_cluster"]
    );
    assert_eq!(
        m.cluster_commands(&always).await,
        ["upgrade_cluster", "create_cluster"]
    );
    let c = m.cluster(&never).await;
    assert_eq!(
        (c["kubernetes_version"].as_str(), c["status"].as_str()),
        (Some("1.29.2"), Some("running"))
    );
    assert_eq!(m.cluster_commands(&never).await, ["create_cluster"]);

    // Switching a cluster's policy takes effect on the next pass.
    let r = m
        .patch(
            &format!("/v1/clusters/{never}"),
            &json!({"update_policy": "PATCH_UPDATE"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    loop {
        let c = m.cluster(&never).await;
        if c["kubernetes_version"] == "1.29.15" && c["status"] == "running" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "not upgraded: {c}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    m.stop().await;
}

#[tokio::test]
async fn reconciler_passes_at_once_start_one_upgrade() {
    // No loop of its own here: the passes are driven by the test.
    let m = Meson::start().await;
    let id = m
        .running_cluster(&small("racy", "PATCH_UPDATE", "1.29.8"))
        .await;
    let env = env(&m);
    m.set_boot_time(Duration::from_millis(500));
    let (a, b, c) = tokio::join!(
        auto_upgrade::tick(&env),
        auto_upgrade::tick(&env),
        auto_upgrade::tick(&env)
    );
    let started: Vec<_> = [a.unwrap(), b.unwrap(), c.unwrap()]
        .into_iter()
        .flatten()
        .filter(|(_, s)| matches!(s, auto_upgrade::Started::Upgrade { .. }))
        .collect();
    assert_eq!(started.len(), 1, "{started:?}");
    let auto_upgrade::Started::Upgrade { action, to } = &started[0].1 else {
        unreachable!()
    };
    assert_eq!(to, "1.29.15");
    // While it runs, another pass finds it running and starts nothing.
    let again = auto_upgrade::tick(&env).await.unwrap();
    assert!(
        again
            .iter()
            .all(|(_, s)| *s == auto_upgrade::Started::Nothing),
        "{again:?}"
    );
    m.set_boot_time(Duration::from_millis(100));
    let done = m
        .wait_action_for(&action.to_string(), Duration::from_secs(60))
        .await;
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(
        m.cluster_commands(&id).await,
        ["upgrade_cluster", "create_cluster"]
    );
    // On the latest patch now: nothing more to do.
    let after = auto_upgrade::tick(&env).await.unwrap();
    assert!(
        after
            .iter()
            .all(|(_, s)| *s == auto_upgrade::Started::Nothing)
    );
    m.stop().await;
}

#[tokio::test]
async fn rotating_credentials_revokes_earlier_kubeconfigs_and_the_bootstrap_token() {
    let m = Meson::start().await;
    let mut body = seed_kaas();
    body["req"]["control_plane"] = json!({"nodes": 3});
    body["req"]["nodepool"][0]["desired_nodes"] = json!(2);
    body["req"]["nodepool"][0]["min_nodes"] = json!(1);
    let id = m.running_cluster(&body).await;
    let before = m.cluster_nodes(&id).await;
    let init = before
        .iter()
        .filter(|n| n["role"] == "control_plane")
        .map(|n| user_data(&m, n["name"].as_str().unwrap()).unwrap())
        .find(|ud| ud.contains("InitConfiguration"))
        .expect("the init node's user-data");
    let old_bundle = client_ca_bundle(&init);
    let old_token = kubeadm_token(&init);
    let (server_ca, old_cert) = kubeconfig(&m, &id).await;
    assert!(
        trusted_by(&old_bundle, &old_cert),
        "today's kubeconfig works"
    );
    // The first certificate of the bundle is the cluster CA, which also
    // verifies the API server.
    assert_eq!(old_bundle[0], certificates(&server_ca)[0]);
    assert!(
        !trusted_by(&old_bundle[..1], &old_cert),
        "not signed by the cluster CA"
    );

    let r = m
        .post(
            &format!("/v1/clusters/{id}/actions/rotate-credentials"),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["action"]["command"], "rotate_credentials");
    assert_eq!(m.cluster(&id).await["status"], "updating");
    let done = m
        .wait_action_for(
            r.body["action"]["id"].as_str().unwrap(),
            Duration::from_secs(90),
        )
        .await;
    assert_eq!(done["status"], "success", "{done}");
    let c = m.cluster(&id).await;
    assert_eq!(c["status"], "running", "{c}");
    assert_eq!(c["kubernetes_version"], "1.29.2");

    // Every control-plane node is new; the workers are untouched.
    let after = m.cluster_nodes(&id).await;
    assert_eq!(after.len(), 5);
    let of = |ns: &[Value], role: &str| -> BTreeSet<String> {
        ids(&ns
            .iter()
            .filter(|n| n["role"] == role)
            .cloned()
            .collect::<Vec<_>>())
    };
    assert!(of(&before, "control_plane").is_disjoint(&of(&after, "control_plane")));
    assert_eq!(of(&before, "worker"), of(&after, "worker"));
    assert_eq!(node_vms(&m, &id).len(), 5);

    // Kubeconfigs from now on verify against what every API server now
    // trusts; the one from before verifies against none of them.
    let (server_ca_now, new_cert) = kubeconfig(&m, &id).await;
    assert_eq!(server_ca_now, server_ca, "the server is verified as before");
    let cps: Vec<String> = after
        .iter()
        .filter(|n| n["role"] == "control_plane")
        .map(|n| user_data(&m, n["name"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(cps.len(), 3);
    for ud in &cps {
        let bundle = client_ca_bundle(ud);
        assert_eq!(bundle.len(), 2);
        assert_eq!(bundle[0], old_bundle[0], "the cluster CA stays trusted");
        assert!(trusted_by(&bundle, &new_cert));
        assert!(
            !trusted_by(&bundle, &old_cert),
            "the old kubeconfig is refused"
        );
    }

    // The bootstrap token: the first new control-plane node joined with the
    // old one and registered the new one; the others joined with the new
    // one and delete the old one from the cluster.
    let new_token = script_var(&cps[0], "BOOTSTRAP_TOKEN_REGISTER");
    assert_ne!(new_token, old_token);
    assert_eq!(kubeadm_token(&cps[0]), old_token);
    for ud in &cps[1..] {
        assert_eq!(kubeadm_token(ud), new_token);
        assert_eq!(script_var(ud, "BOOTSTRAP_TOKEN_REGISTER"), new_token);
        let old_id = old_token.split('.').next().unwrap();
        assert_eq!(script_var(ud, "BOOTSTRAP_TOKEN_REVOKE"), old_id);
    }

    // Nodes made later join with the new token, and new control-plane
    // nodes keep trusting only the new admin CA.
    let r = upgrade(&m, &id, json!({"kubernetes_version": "1.29.8"})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let done = m
        .wait_action_for(
            r.body["action"]["id"].as_str().unwrap(),
            Duration::from_secs(90),
        )
        .await;
    assert_eq!(done["status"], "success", "{done}");
    for n in m.cluster_nodes(&id).await {
        let ud = user_data(&m, n["name"].as_str().unwrap()).unwrap();
        assert_eq!(kubeadm_token(&ud), new_token, "{}", n["name"]);
        if n["role"] == "control_plane" {
            let bundle = client_ca_bundle(&ud);
            assert!(trusted_by(&bundle, &new_cert));
            assert!(!trusted_by(&bundle, &old_cert));
        }
    }
    let (_, latest) = kubeconfig(&m, &id).await;
    assert!(trusted_by(&client_ca_bundle(&cps[0]), &latest));
    assert_eq!(
        m.cluster_commands(&id).await,
        ["upgrade_cluster", "rotate_credentials", "create_cluster"]
    );
    m.stop().await;
}

#[tokio::test]
async fn a_failed_upgrade_takes_back_the_replacement_it_cut_short() {
    let m = Meson::start().await;
    let id = m
        .running_cluster(&small("fails", "NEVER_UPDATE", "1.29.2"))
        .await;
    let before = m.cluster_nodes(&id).await;
    let vms = node_vms(&m, &id);
    assert_eq!(m.inventory_counts(), (2, 4));
    // Every host of the cluster's region refuses to register VMs: the first
    // replacement gets its disks, then fails for good.
    for h in ["arubacloud-ar-1", "arubacloud-ar-2", "arubacloud-ar-3"] {
        m.fault(
            h,
            &json!({"fail_next": [{"route": "vm/register", "status": 500, "count": 10000}]}),
        )
        .await;
    }
    let r = upgrade(&m, &id, json!({"kubernetes_version": "1.29.8"})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let done = m
        .wait_action_for(
            r.body["action"]["id"].as_str().unwrap(),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(done["status"], "error", "{done}");
    let c = m.cluster(&id).await;
    assert_eq!(c["status"], "error", "{c}");
    assert_eq!(c["kubernetes_version"], "1.29.2");
    let msg = c["error_message"].as_str().unwrap();
    assert!(
        msg.starts_with("upgrade to Kubernetes 1.29.8 failed"),
        "{msg}"
    );
    // The cluster is as it was: the same nodes, nothing else on AtomOS.
    let after = m.cluster_nodes(&id).await;
    assert_eq!(ids(&after), ids(&before));
    assert!(after.iter().all(|n| n["status"] == "ready"), "{after:?}");
    assert_eq!(node_vms(&m, &id), vms);
    assert_eq!(
        m.inventory_counts(),
        (2, 4),
        "the replacement's disks are gone"
    );
    m.stop().await;
}
