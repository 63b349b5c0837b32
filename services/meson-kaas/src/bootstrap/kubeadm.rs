//! kubeadm's configuration: `InitConfiguration`, `ClusterConfiguration` and
//! `KubeletConfiguration` on the first control-plane node, a
//! `JoinConfiguration` on the others, and what a joining control-plane node
//! gives `kubeadm kubeconfig user`.

use super::check::check;
use super::containerd::CRI_SOCKET;
use super::{ClusterBootstrap, NodeBootstrap, NodeRole, paths};
use crate::error::KaasError;
use crate::text::q;
use meson_core::kaas::{Taint, TaintEffect};
use meson_core::kubernetes::KubeVersion;
use std::fmt::Write as _;

/// The taint every control-plane node carries (kubeadm's).
pub const CONTROL_PLANE_TAINT: &str = "node-role.kubernetes.io/control-plane";

/// The kubeadm configuration API for `v`: `v1beta4` from 1.31 (where it
/// became available and `v1beta3` deprecated), `v1beta3` before.
pub fn kubeadm_api_version(v: &KubeVersion) -> &'static str {
    if v.minor >= 31 {
        "kubeadm.k8s.io/v1beta4"
    } else {
        "kubeadm.k8s.io/v1beta3"
    }
}

/// Whether `kubeadm init` of `v` writes `super-admin.conf`, the only
/// kubeconfig with rights before the API's RBAC bindings exist (1.29+).
pub(super) fn has_super_admin(v: &KubeVersion) -> bool {
    v.minor >= 29
}

/// The node's taints: the control-plane taint first on control-plane
/// nodes, then the requested ones (without repeating it).
fn node_taints(node: &NodeBootstrap) -> Vec<Taint> {
    let mut taints = Vec::new();
    if node.role.is_control_plane() {
        taints.push(Taint {
            key: CONTROL_PLANE_TAINT.to_owned(),
            value: String::new(),
            effect: TaintEffect::NoSchedule,
        });
    }
    for t in &node.taints {
        if !taints
            .iter()
            .any(|have| have.key == t.key && have.effect == t.effect)
        {
            taints.push(t.clone());
        }
    }
    taints
}

/// `nodeRegistration`, indented two spaces.
fn node_registration(out: &mut String, cluster: &ClusterBootstrap<'_>, node: &NodeBootstrap) {
    let mut args: Vec<(&str, String)> = Vec::new();
    if let Some(ip) = node.node_ip {
        args.push(("node-ip", ip.to_string()));
    }
    if !node.labels.is_empty() {
        let labels: Vec<String> = node
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        args.push(("node-labels", labels.join(",")));
    }
    if let Some(id) = &node.provider_id {
        args.push(("provider-id", id.clone()));
    }

    out.push_str("nodeRegistration:\n");
    let _ = writeln!(out, "  name: {}", q(&node.name));
    let _ = writeln!(out, "  criSocket: {}", q(CRI_SOCKET));
    if !args.is_empty() {
        out.push_str("  kubeletExtraArgs:\n");
        let v1beta4 = kubeadm_api_version(&cluster.kubernetes_version).ends_with("v1beta4");
        for (name, value) in args {
            if v1beta4 {
                let _ = writeln!(out, "    - name: {}\n      value: {}", q(name), q(&value));
            } else {
                let _ = writeln!(out, "    {}: {}", q(name), q(&value));
            }
        }
    }
    let taints = node_taints(node);
    if !taints.is_empty() {
        out.push_str("  taints:\n");
        for t in taints {
            let _ = writeln!(out, "    - key: {}", q(&t.key));
            if !t.value.is_empty() {
                let _ = writeln!(out, "      value: {}", q(&t.value));
            }
            let _ = writeln!(out, "      effect: {}", q(t.effect.as_str()));
        }
    }
}

/// The kubeadm configuration file of a node: `InitConfiguration`,
/// `ClusterConfiguration` and `KubeletConfiguration` (systemd cgroups) for
/// the first control-plane node, `JoinConfiguration` for the others.
pub fn kubeadm_config(
    cluster: &ClusterBootstrap<'_>,
    node: &NodeBootstrap,
) -> Result<String, KaasError> {
    check(cluster, node)?;
    let api = kubeadm_api_version(&cluster.kubernetes_version);
    let secrets = cluster.secrets;
    let endpoint = cluster.endpoint.to_string();
    let port = cluster.endpoint.port();
    let mut out = String::new();
    match node.role {
        NodeRole::InitControlPlane => {
            let _ = writeln!(out, "apiVersion: {}", q(api));
            out.push_str("kind: \"InitConfiguration\"\n");
            out.push_str("bootstrapTokens:\n");
            let _ = writeln!(out, "  - token: {}", q(secrets.bootstrap_token().as_str()));
            out.push_str("    description: \"meson node bootstrap token\"\n");
            let _ = writeln!(
                out,
                "    ttl: {}",
                q(&format!("{}s", cluster.token_ttl.as_secs()))
            );
            out.push_str("    usages: [\"signing\", \"authentication\"]\n");
            let _ = writeln!(
                out,
                "    groups: [{}]",
                q(crate::pki::BOOTSTRAP_TOKEN_GROUP)
            );
            out.push_str("localAPIEndpoint:\n");
            if let Some(ip) = node.node_ip {
                let _ = writeln!(out, "  advertiseAddress: {}", q(&ip.to_string()));
            }
            let _ = writeln!(out, "  bindPort: {port}");
            node_registration(&mut out, cluster, node);
            out.push_str("---\n");
            cluster_configuration_head(&mut out, cluster);
            out.push_str("networking:\n");
            let _ = writeln!(out, "  podSubnet: {}", q(&cluster.pod_cidr.to_string()));
            let _ = writeln!(
                out,
                "  serviceSubnet: {}",
                q(&cluster.service_cidr.to_string())
            );
            out.push_str("  dnsDomain: \"cluster.local\"\n");
            out.push_str("apiServer:\n");
            let _ = writeln!(
                out,
                "  certSANs: [{}]",
                q(&cluster.endpoint.ip().to_string())
            );
            // Kept in the kubeadm-config ConfigMap: every control-plane node
            // that joins later runs its API server with it too.
            out.push_str("  extraArgs:\n");
            if api.ends_with("v1beta4") {
                let _ = writeln!(
                    out,
                    "    - name: \"client-ca-file\"\n      value: {}",
                    q(paths::CLIENT_CA_BUNDLE)
                );
            } else {
                let _ = writeln!(
                    out,
                    "    \"client-ca-file\": {}",
                    q(paths::CLIENT_CA_BUNDLE)
                );
            }
            out.push_str("---\n");
            out.push_str("apiVersion: \"kubelet.config.k8s.io/v1beta1\"\n");
            out.push_str("kind: \"KubeletConfiguration\"\n");
            out.push_str("cgroupDriver: \"systemd\"\n");
        }
        NodeRole::JoinControlPlane | NodeRole::Worker => {
            let _ = writeln!(out, "apiVersion: {}", q(api));
            out.push_str("kind: \"JoinConfiguration\"\n");
            out.push_str("discovery:\n  bootstrapToken:\n");
            let _ = writeln!(out, "    apiServerEndpoint: {}", q(&endpoint));
            let _ = writeln!(out, "    token: {}", q(secrets.bootstrap_token().as_str()));
            let _ = writeln!(out, "    caCertHashes: [{}]", q(&secrets.ca_cert_hash()));
            node_registration(&mut out, cluster, node);
            if node.role == NodeRole::JoinControlPlane {
                out.push_str("controlPlane:\n  localAPIEndpoint:\n");
                if let Some(ip) = node.node_ip {
                    let _ = writeln!(out, "    advertiseAddress: {}", q(&ip.to_string()));
                }
                let _ = writeln!(out, "    bindPort: {port}");
            }
        }
    }
    Ok(out)
}

/// The `ClusterConfiguration` a joining control-plane node gives `kubeadm
/// kubeconfig user` (which signs with the cluster CA in `certificatesDir`)
/// to reach the API before it joins.
pub(super) fn kubeadm_client_config(cluster: &ClusterBootstrap<'_>) -> String {
    let mut out = String::new();
    cluster_configuration_head(&mut out, cluster);
    let _ = writeln!(out, "certificatesDir: {}", q(paths::PKI));
    out
}

/// The start of a `ClusterConfiguration`: its kind, and the cluster's name,
/// Kubernetes version and control-plane endpoint.
fn cluster_configuration_head(out: &mut String, cluster: &ClusterBootstrap<'_>) {
    let _ = writeln!(
        out,
        "apiVersion: {}",
        q(kubeadm_api_version(&cluster.kubernetes_version))
    );
    out.push_str("kind: \"ClusterConfiguration\"\n");
    let _ = writeln!(out, "clusterName: {}", q(&cluster.name));
    let _ = writeln!(
        out,
        "kubernetesVersion: {}",
        q(&format!("v{}", cluster.kubernetes_version))
    );
    let _ = writeln!(
        out,
        "controlPlaneEndpoint: {}",
        q(&cluster.endpoint.to_string())
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::fixtures::*;
    use crate::bootstrap::*;

    #[test]
    fn init_config_is_v1beta4_with_the_cluster_settings() {
        let c = v131();
        let docs = kubeadm(&render(&c, NodeRole::InitControlPlane));
        let kinds: Vec<_> = docs.iter().map(|d| str_at(d, &["kind"])).collect();
        assert_eq!(
            kinds,
            [
                "InitConfiguration",
                "ClusterConfiguration",
                "KubeletConfiguration"
            ]
        );
        for d in &docs[..2] {
            assert_eq!(str_at(d, &["apiVersion"]), "kubeadm.k8s.io/v1beta4");
        }
        let (init, cc, kubelet) = (&docs[0], &docs[1], &docs[2]);

        let token = &init["bootstrapTokens"][0];
        assert_eq!(
            token["token"].as_str(),
            Some(secrets().bootstrap_token().as_str())
        );
        assert_eq!(token["ttl"].as_str(), Some("86400s"));
        assert_eq!(token["usages"][1].as_str(), Some("authentication"));
        assert_eq!(
            token["groups"][0].as_str(),
            Some("system:bootstrappers:kubeadm:default-node-token")
        );
        assert_eq!(
            str_at(init, &["localAPIEndpoint", "advertiseAddress"]),
            "192.168.1.5"
        );
        assert_eq!(init["localAPIEndpoint"]["bindPort"].as_u64(), Some(6443));
        let reg = &init["nodeRegistration"];
        assert_eq!(reg["name"].as_str(), Some("test8-cp-1"));
        assert_eq!(reg["criSocket"].as_str(), Some(CRI_SOCKET));
        // v1beta4: extra args are a list of name/value pairs.
        let args = reg["kubeletExtraArgs"].as_sequence().unwrap();
        assert_eq!(args[0]["name"].as_str(), Some("node-ip"));
        assert_eq!(args[0]["value"].as_str(), Some("192.168.1.5"));
        assert_eq!(args[1]["name"].as_str(), Some("provider-id"));
        let taints = reg["taints"].as_sequence().unwrap();
        assert_eq!(taints.len(), 1);
        assert_eq!(taints[0]["key"].as_str(), Some(CONTROL_PLANE_TAINT));
        assert_eq!(taints[0]["effect"].as_str(), Some("NoSchedule"));

        assert_eq!(str_at(cc, &["kubernetesVersion"]), "v1.31.10");
        assert_eq!(str_at(cc, &["controlPlaneEndpoint"]), "192.168.1.250:6443");
        assert_eq!(str_at(cc, &["clusterName"]), "test8");
        assert_eq!(str_at(cc, &["networking", "podSubnet"]), "10.244.0.0/16");
        assert_eq!(str_at(cc, &["networking", "serviceSubnet"]), "10.96.0.0/12");
        assert_eq!(
            cc["apiServer"]["certSANs"][0].as_str(),
            Some("192.168.1.250")
        );

        assert_eq!(
            str_at(kubelet, &["apiVersion"]),
            "kubelet.config.k8s.io/v1beta1"
        );
        assert_eq!(str_at(kubelet, &["cgroupDriver"]), "systemd");
    }

    #[test]
    fn worker_join_config_discovers_the_cluster_by_token_and_ca_hash() {
        let c = v131();
        let docs = kubeadm(&render(&c, NodeRole::Worker));
        assert_eq!(docs.len(), 1);
        let join = &docs[0];
        assert_eq!(str_at(join, &["apiVersion"]), "kubeadm.k8s.io/v1beta4");
        assert_eq!(str_at(join, &["kind"]), "JoinConfiguration");
        let bt = &join["discovery"]["bootstrapToken"];
        assert_eq!(bt["apiServerEndpoint"].as_str(), Some("192.168.1.250:6443"));
        assert_eq!(
            bt["token"].as_str(),
            Some(secrets().bootstrap_token().as_str())
        );
        let hash = secrets().ca_cert_hash();
        assert_eq!(bt["caCertHashes"][0].as_str(), Some(hash.as_str()));
        assert!(join["controlPlane"].is_null());
        let reg = &join["nodeRegistration"];
        assert_eq!(reg["name"].as_str(), Some("test8-1poolname-a1b2c"));
        let args: Vec<(&str, &str)> = reg["kubeletExtraArgs"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|a| (a["name"].as_str().unwrap(), a["value"].as_str().unwrap()))
            .collect();
        assert_eq!(
            args,
            [
                ("node-ip", "192.168.1.7"),
                (
                    "node-labels",
                    "meson.elemento.cloud/pool=1poolname,node.kubernetes.io/instance-type=neon"
                ),
                (
                    "provider-id",
                    "meson://0190a1b2-0000-7000-8000-000000000001"
                ),
            ]
        );
        // Only the requested taint: workers are schedulable.
        let taints = reg["taints"].as_sequence().unwrap();
        assert_eq!(taints.len(), 1);
        assert_eq!(taints[0]["key"].as_str(), Some("gpu"));
        assert_eq!(taints[0]["value"].as_str(), Some("true"));
        assert_eq!(taints[0]["effect"].as_str(), Some("NoSchedule"));

        // A worker without taints registers none.
        let mut plain = node(NodeRole::Worker);
        plain.taints.clear();
        let cfg = kubeadm_config(&c, &plain).unwrap();
        assert!(yaml(&cfg)["nodeRegistration"]["taints"].is_null(), "{cfg}");
    }

    #[test]
    fn control_plane_join_config_has_a_local_api_endpoint_and_the_taint() {
        let c = v131();
        let mut n = node(NodeRole::JoinControlPlane);
        n.taints = vec![
            Taint::parse("dedicated=infra:NoExecute").unwrap(),
            Taint::parse("node-role.kubernetes.io/control-plane:NoSchedule").unwrap(),
        ];
        let join = yaml(&kubeadm_config(&c, &n).unwrap());
        assert_eq!(str_at(&join, &["kind"]), "JoinConfiguration");
        assert_eq!(
            str_at(
                &join,
                &["controlPlane", "localAPIEndpoint", "advertiseAddress"]
            ),
            "192.168.1.6"
        );
        assert_eq!(
            join["controlPlane"]["localAPIEndpoint"]["bindPort"].as_u64(),
            Some(6443)
        );
        let hash = secrets().ca_cert_hash();
        assert_eq!(
            join["discovery"]["bootstrapToken"]["caCertHashes"][0].as_str(),
            Some(hash.as_str())
        );
        let taints = strings(&join["nodeRegistration"]["taints"], &["key"]);
        assert_eq!(taints, [CONTROL_PLANE_TAINT, "dedicated"]);
    }

    #[test]
    fn before_1_31_the_config_is_v1beta3_with_map_extra_args() {
        let c = cluster(KubeVersion::new(1, 30, 14), Cni::Flannel);
        let docs = kubeadm(&render(&c, NodeRole::InitControlPlane));
        assert_eq!(str_at(&docs[0], &["apiVersion"]), "kubeadm.k8s.io/v1beta3");
        assert_eq!(str_at(&docs[1], &["apiVersion"]), "kubeadm.k8s.io/v1beta3");
        assert_eq!(str_at(&docs[1], &["kubernetesVersion"]), "v1.30.14");
        let args = &docs[0]["nodeRegistration"]["kubeletExtraArgs"];
        assert!(args.is_mapping(), "{args:?}");
        assert_eq!(args["node-ip"].as_str(), Some("192.168.1.5"));

        let docs = kubeadm(&render(&c, NodeRole::Worker));
        let args = &docs[0]["nodeRegistration"]["kubeletExtraArgs"];
        assert_eq!(
            args["node-labels"].as_str(),
            Some("meson.elemento.cloud/pool=1poolname,node.kubernetes.io/instance-type=neon")
        );
    }

    #[test]
    fn api_servers_trust_the_client_ca_bundle_and_joins_sync_the_version() {
        for (version, list) in [((1, 31, 10), true), ((1, 29, 2), false)] {
            let c = cluster(
                KubeVersion::new(version.0, version.1, version.2),
                Cni::Calico,
            );
            let docs = kubeadm(&render(&c, NodeRole::InitControlPlane));
            let args = &docs[1]["apiServer"]["extraArgs"];
            let file = if list {
                assert_eq!(args[0]["name"].as_str(), Some("client-ca-file"));
                args[0]["value"].as_str().unwrap()
            } else {
                args["client-ca-file"].as_str().unwrap()
            };
            assert_eq!(file, paths::CLIENT_CA_BUNDLE);
        }
        let c = v131();
        for role in ROLES {
            let doc = yaml(&render(&c, role));
            let bundle = written(&doc, paths::CLIENT_CA_BUNDLE);
            assert_eq!(bundle.is_some(), role.is_control_plane(), "{role:?}");
            if role.is_control_plane() {
                assert_eq!(
                    content(&doc, paths::CLIENT_CA_BUNDLE),
                    secrets().client_ca_bundle()
                );
            }
            // Only a joining control-plane node reaches the API before joining.
            let client = written(&doc, paths::KUBEADM_CLIENT_CONFIG);
            assert_eq!(client.is_some(), role == NodeRole::JoinControlPlane);
            let s = script(&render(&c, role));
            assert_eq!(
                script_var(&s, "BOOTSTRAP_TOKEN_REGISTER"),
                secrets().token_to_register().as_str()
            );
            assert_eq!(script_var(&s, "TOKEN_TTL"), "86400");
            assert!(s.contains("kubeadm token create \"$BOOTSTRAP_TOKEN_REGISTER\""));
            assert!(s.contains("create configmap kubeadm-config"));
        }
        let doc = yaml(&render(&c, NodeRole::JoinControlPlane));
        let cc = yaml(content(&doc, paths::KUBEADM_CLIENT_CONFIG));
        assert_eq!(str_at(&cc, &["kind"]), "ClusterConfiguration");
        assert_eq!(str_at(&cc, &["controlPlaneEndpoint"]), "192.168.1.250:6443");
        assert_eq!(str_at(&cc, &["certificatesDir"]), paths::PKI);
        assert_eq!(str_at(&cc, &["kubernetesVersion"]), "v1.31.10");
    }
}
