//! What the bootstrap's tests share: a cluster and its nodes, their
//! rendered user-data, and ways to read it.

use super::*;
use serde::Deserialize as _;
use serde_yaml_ng::Value;

pub(super) fn secrets() -> &'static ClusterSecrets {
    crate::pki::tests::secrets()
}

pub(super) const VIP: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 250);
pub(super) const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMLavtiPfhiG3t6TAxHosXoVh7Pc/lSD8L9SNPyAzp1d user@host";

pub(super) fn cluster(version: KubeVersion, cni: Cni) -> ClusterBootstrap<'static> {
    ClusterBootstrap {
        name: "test8".into(),
        id: ClusterId::new(),
        kubernetes_version: version,
        endpoint: SocketAddrV4::new(VIP, 6443),
        pod_cidr: "10.244.0.0/16".parse().unwrap(),
        service_cidr: "10.96.0.0/12".parse().unwrap(),
        cni,
        token_ttl: DEFAULT_TOKEN_TTL,
        secrets: secrets(),
    }
}

pub(super) fn v131() -> ClusterBootstrap<'static> {
    cluster(KubeVersion::new(1, 31, 10), Cni::Calico)
}

pub(super) fn node(role: NodeRole) -> NodeBootstrap {
    let (name, ip) = match role {
        NodeRole::InitControlPlane => ("test8-cp-1", 5),
        NodeRole::JoinControlPlane => ("test8-cp-2", 6),
        NodeRole::Worker => ("test8-1poolname-a1b2c", 7),
    };
    let mut labels = Labels::new();
    if role == NodeRole::Worker {
        labels.insert("meson.elemento.cloud/pool".into(), "1poolname".into());
        labels.insert("node.kubernetes.io/instance-type".into(), "neon".into());
    }
    NodeBootstrap {
        name: name.into(),
        role,
        node_ip: Some(Ipv4Addr::new(192, 168, 1, ip)),
        labels,
        taints: if role == NodeRole::Worker {
            vec![Taint::parse("gpu=true:NoSchedule").unwrap()]
        } else {
            Vec::new()
        },
        ssh_authorized_keys: vec![SshKey::parse(KEY).unwrap()],
        phone_home_url: "https://meson.example/v1/phone-home/abc".into(),
        provider_id: Some("meson://0190a1b2-0000-7000-8000-000000000001".into()),
        replaces: None,
    }
}

pub(super) const ROLES: [NodeRole; 3] = [
    NodeRole::InitControlPlane,
    NodeRole::JoinControlPlane,
    NodeRole::Worker,
];

pub(super) fn yaml(s: &str) -> Value {
    serde_yaml_ng::from_str(s).unwrap_or_else(|e| panic!("not YAML ({e}):\n{s}"))
}

pub(super) fn yaml_docs(s: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(s)
        .map(|d| Value::deserialize(d).unwrap())
        .collect()
}

pub(super) fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_str()
        .unwrap_or_else(|| panic!("{path:?} is not a string: {cur:?}"))
}

/// The write_files entry for `path`, if any.
pub(super) fn written<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    doc["write_files"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str() == Some(path))
}

pub(super) fn content<'a>(doc: &'a Value, path: &str) -> &'a str {
    let f = written(doc, path).unwrap_or_else(|| panic!("{path} not written"));
    f["content"].as_str().unwrap()
}

pub(super) fn kubeadm(ud: &str) -> Vec<Value> {
    yaml_docs(content(&yaml(ud), paths::KUBEADM_CONFIG))
}

pub(super) fn render(c: &ClusterBootstrap<'_>, role: NodeRole) -> String {
    user_data(c, &node(role)).unwrap()
}

/// The bootstrap script a user-data writes.
pub(super) fn script(ud: &str) -> String {
    content(&yaml(ud), paths::BOOTSTRAP_SCRIPT).to_owned()
}

/// The value of `NAME='...'` in a bootstrap script.
pub(super) fn script_var(script: &str, name: &str) -> String {
    let prefix = format!("{name}='");
    let line = script
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("{name} not set"));
    line[prefix.len()..line.len() - 1].to_owned()
}

pub(super) fn temp_file(name: &str, content: &str) -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let path = std::env::temp_dir().join(format!(
        "meson-kaas-{}-{}-{name}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, content).unwrap();
    path
}

/// The strings at `path` in each item of the sequence `seq`.
pub(super) fn strings<'a>(seq: &'a Value, path: &[&str]) -> Vec<&'a str> {
    seq.as_sequence()
        .unwrap_or_else(|| panic!("not a sequence: {seq:?}"))
        .iter()
        .map(|item| str_at(item, path))
        .collect()
}
