//! What a node's bootstrap is given: the checks that keep every value in
//! its place (names, addresses, labels a kubelet may set, URLs).

use super::{ClusterBootstrap, MIN_MINOR, NodeBootstrap};
use crate::error::KaasError;
use crate::text::{is_dns_label, is_one_line};
use meson_core::labels;
use std::time::Duration;

/// Whether a kubelet may put label `key` on its own node: the
/// NodeRestriction rules kubelet enforces for `--node-labels` (labels in
/// the `kubernetes.io` and `k8s.io` namespaces only under `kubelet.` or
/// `node.`, or from a short allowed list). `node-role.kubernetes.io/*` is
/// not allowed: an admin sets it through the API.
pub fn kubelet_may_set_label(key: &str) -> bool {
    // kubelet's own list (k8s.io/kubelet/pkg/apis, IsKubeletLabel).
    const ALLOWED: &[&str] = &[
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/instance-type",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "node.kubernetes.io/instance-type",
    ];
    let Some((namespace, _)) = key.split_once('/') else {
        return true;
    };
    let under = |ns: &str, domain: &str| ns == domain || ns.ends_with(&format!(".{domain}"));
    let restricted = under(namespace, "kubernetes.io") || under(namespace, "k8s.io");
    !restricted
        || ALLOWED.contains(&key)
        || under(namespace, "kubelet.kubernetes.io")
        || under(namespace, "node.kubernetes.io")
}

/// Refuses, by field, any input the user-data could not carry safely.
pub(super) fn check(cluster: &ClusterBootstrap<'_>, node: &NodeBootstrap) -> Result<(), KaasError> {
    let bad = |field: &str, msg: &str| Err(KaasError::input(field, msg));
    if !is_dns_label(&cluster.name) {
        return bad("cluster.name", "must be a lowercase DNS label");
    }
    if let Some(old) = &node.replaces
        && !is_dns_label(old)
    {
        return bad("node.replaces", "must be a lowercase DNS label");
    }
    let v = &cluster.kubernetes_version;
    if v.major != 1 || v.minor < MIN_MINOR {
        return Err(KaasError::input(
            "cluster.kubernetes_version",
            format!("{v} is not supported; 1.{MIN_MINOR} or later"),
        ));
    }
    let vip = *cluster.endpoint.ip();
    if vip.is_unspecified() || vip.is_loopback() || vip.is_broadcast() || vip.is_multicast() {
        return bad(
            "cluster.endpoint",
            "must be a unicast address nodes can reach",
        );
    }
    if cluster.endpoint.port() == 0 {
        return bad("cluster.endpoint", "needs a port");
    }
    let (pods, services) = (cluster.pod_cidr, cluster.service_cidr);
    if pods.contains(&services.network()) || services.contains(&pods.network()) {
        return bad("cluster.service_cidr", "overlaps the pod CIDR");
    }
    for net in [pods, services] {
        if net.contains(&vip) {
            return bad("cluster.endpoint", "lies inside the pod or service CIDR");
        }
    }
    if cluster.token_ttl < Duration::from_secs(60) {
        return bad("cluster.token_ttl", "must be at least a minute");
    }

    if !is_dns_label(&node.name) {
        return bad("node.name", "must be a lowercase DNS label");
    }
    if let Some(ip) = node.node_ip
        && (ip.is_unspecified() || ip.is_loopback() || ip == vip)
    {
        return bad("node.node_ip", "must be the node's own unicast address");
    }
    for (k, v) in &node.labels {
        let field = format!("node.labels.{k}");
        if !labels::valid_key(k) || !labels::valid_value(v) {
            return bad(&field, "is not a valid Kubernetes label");
        }
        if !kubelet_may_set_label(k) {
            return bad(
                &field,
                "is in a namespace a kubelet may not label itself with (kubernetes.io, k8s.io)",
            );
        }
    }
    for (i, t) in node.taints.iter().enumerate() {
        if !labels::valid_key(&t.key) || !labels::valid_value(&t.value) {
            return bad(&format!("node.taints[{i}]"), "is not a valid taint");
        }
    }
    for (i, k) in node.ssh_authorized_keys.iter().enumerate() {
        if !is_one_line(k.as_str()) {
            return bad(
                &format!("node.ssh_authorized_keys[{i}]"),
                "must be one line",
            );
        }
    }
    let url = &node.phone_home_url;
    if !(url.starts_with("http://") || url.starts_with("https://"))
        || !is_one_line(url)
        || url.chars().any(char::is_whitespace)
    {
        return bad(
            "node.phone_home_url",
            "must be an http(s) URL without spaces",
        );
    }
    if let Some(id) = &node.provider_id
        && (id.is_empty()
            || id.len() > 256
            || !is_one_line(id)
            || id.chars().any(|c| c.is_whitespace() || c == ','))
    {
        return bad(
            "node.provider_id",
            "must be 1 to 256 characters, no spaces or commas",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::fixtures::*;
    use crate::bootstrap::*;

    fn refused(c: &ClusterBootstrap<'_>, n: &NodeBootstrap, field: &str) {
        match user_data(c, n) {
            Err(KaasError::InvalidInput { field: f, .. }) => {
                assert!(f.starts_with(field), "refused {f}, expected {field}")
            }
            Err(e) => panic!("{field}: unexpected {e}"),
            Ok(_) => panic!("{field}: accepted"),
        }
    }

    #[test]
    fn bad_inputs_are_refused_by_name() {
        let c = v131();
        let w = node(NodeRole::Worker);

        let mut bad = c.clone();
        bad.name = "Test\"8".into();
        refused(&bad, &w, "cluster.name");
        let mut bad = c.clone();
        bad.kubernetes_version = KubeVersion::new(1, 27, 3);
        refused(&bad, &w, "cluster.kubernetes_version");
        let mut bad = c.clone();
        bad.service_cidr = "10.244.128.0/20".parse().unwrap();
        refused(&bad, &w, "cluster.service_cidr");
        let mut bad = c.clone();
        bad.endpoint = SocketAddrV4::new(Ipv4Addr::new(10, 244, 0, 1), 6443);
        refused(&bad, &w, "cluster.endpoint");
        let mut bad = c.clone();
        bad.endpoint = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 6443);
        refused(&bad, &w, "cluster.endpoint");

        let mut n = w.clone();
        n.name = "node\nruncmd: [reboot]".into();
        refused(&c, &n, "node.name");
        let mut n = w.clone();
        n.node_ip = Some(VIP);
        refused(&c, &n, "node.node_ip");
        for key in [
            "node-role.kubernetes.io/worker",
            "kubernetes.io/role",
            "foo.k8s.io/bar",
        ] {
            let mut n = w.clone();
            n.labels.insert(key.into(), "x".into());
            refused(&c, &n, "node.labels");
        }
        let mut n = w.clone();
        n.labels.insert("a".into(), "b,c=d".into());
        refused(&c, &n, "node.labels");
        let mut n = w.clone();
        n.taints[0].value = "x\"y".into();
        refused(&c, &n, "node.taints[0]");
        for url in ["ftp://x", "https://x/a b", "https://x/\nphone_home: {}"] {
            let mut n = w.clone();
            n.phone_home_url = url.into();
            refused(&c, &n, "node.phone_home_url");
        }
        let mut n = w.clone();
        n.provider_id = Some("a,b".into());
        refused(&c, &n, "node.provider_id");
    }

    #[test]
    fn labels_a_kubelet_may_set() {
        for ok in [
            "pool",
            "meson.elemento.cloud/pool",
            "node.kubernetes.io/instance-type",
            "node.kubernetes.io/anything",
            "kubelet.kubernetes.io/x",
            "topology.kubernetes.io/zone",
            "example.com/kubernetes.io",
        ] {
            assert!(kubelet_may_set_label(ok), "{ok}");
        }
        for no in [
            "node-role.kubernetes.io/worker",
            "kubernetes.io/role",
            "k8s.io/x",
            "foo.kubernetes.io/x",
        ] {
            assert!(!kubelet_may_set_label(no), "{no}");
        }
    }
}
