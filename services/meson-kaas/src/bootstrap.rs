//! A node's cloud-init user-data: from a fresh Ubuntu cloud image (meson's
//! nodes boot Ubuntu 24.04; any apt-based image with systemd works) to a
//! kubelet in the cluster, with no step left to a person.
//!
//! The user-data writes every file the node needs (`write_files`), then one
//! `runcmd` entry runs `/usr/local/sbin/meson-bootstrap`, which:
//! 1. turns swap off, loads `overlay` and `br_netfilter`, applies the
//!    bridge and forwarding sysctls;
//! 2. installs containerd (the distribution's package, configured for the
//!    systemd cgroup driver) and `kubelet`, `kubeadm`, `kubectl` of the
//!    cluster's exact patch from pkgs.k8s.io's repository for its minor
//!    (`https://pkgs.k8s.io/core:/stable:/v1.31/deb/`, its own keyring,
//!    packages pinned as `kubeadm=1.31.10-*`: the patch is fixed, the
//!    Debian revision, `-1.1` today, is whatever the repository has), and
//!    holds them;
//! 3. on control-plane nodes, places the kube-vip static pod on the
//!    interface that holds the node's address (or that routes to the VIP);
//! 4. runs `kubeadm init` or `kubeadm join` with the configuration written
//!    to `/etc/meson/kubeadm.yaml` (kubeadm API `v1beta4` from Kubernetes
//!    1.31 on, `v1beta3` before: see [`kubeadm_api_version`]);
//! 5. waits (bounded) for the local kubelet's `/healthz`;
//! 6. on the first control-plane node, installs the CNI (pinned: see
//!    [`cni_release`]) with the cluster's pod CIDR.
//!
//! A control-plane node that joins (`kubeadm join --control-plane`) also,
//! before joining, brings the `kubernetesVersion` of the cluster's
//! `kubeadm-config` ConfigMap up to its own version (kubeadm runs a joining
//! control plane at that version and refuses a kubelet newer than it: this
//! is what makes a rolling replacement an upgrade, as `kubeadm upgrade
//! apply` and Cluster API's control-plane controller do), and, once up,
//! registers the bootstrap token meson wants nodes to join with
//! ([`ClusterSecrets::token_to_register`]) and deletes the revoked ones.
//! Every API server authenticates client certificates with a bundle of the
//! cluster CA and meson's admin CA (`--client-ca-file`, see
//! [`ClusterSecrets::client_ca_bundle`]): replacing every control-plane
//! node after a credentials rotation is what revokes earlier kubeconfigs.
//!
//! If any of it fails the script exits non-zero and the `runcmd` wrapper
//! powers the VM off (`shutdown -h now`) and blocks until it goes down:
//! cloud-init's `phone_home`, which runs in the final stage after the
//! user scripts, therefore only ever reports nodes whose kubelet is healthy.
//!
//! Control-plane nodes get the cluster's CAs and service-account key in
//! `/etc/kubernetes/pki` (keys mode 0600), so every control-plane node
//! shares them without `--upload-certs`; workers get no private key at
//! all: they find and check the cluster CA through the bootstrap token and
//! `caCertHashes`.
//!
//! Quoting: YAML values are JSON strings (valid YAML double-quoted scalars),
//! files are literal blocks whose every line is indented (or JSON strings),
//! and the shell script takes its values as single-quoted words, so no
//! value can break out of its place even if validation let it through.

use crate::error::KaasError;
use crate::pki::ClusterSecrets;
use crate::text::{file_content, is_dns_label, is_one_line, q, sh};
use ipnet::Ipv4Net;
use meson_core::id::ClusterId;
use meson_core::kaas::{Cni, Taint, TaintEffect};
use meson_core::kubernetes::KubeVersion;
use meson_core::labels::{self, Labels};
use meson_core::ssh::SshKey;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

/// The oldest Kubernetes minor the bootstrap supports (the catalogue's oldest).
pub const MIN_MINOR: u32 = 28;
/// kube-vip, the static pod that holds the API VIP (ARP, leader election).
pub const KUBE_VIP_IMAGE: &str = "ghcr.io/kube-vip/kube-vip:v0.8.9";
/// containerd's CRI socket.
pub const CRI_SOCKET: &str = "unix:///run/containerd/containerd.sock";
/// How long the bootstrap token made at `kubeadm init` stays valid when
/// the caller has no reason to choose otherwise.
pub const DEFAULT_TOKEN_TTL: Duration = Duration::from_secs(24 * 3600);
/// The taint every control-plane node carries (kubeadm's).
pub const CONTROL_PLANE_TAINT: &str = "node-role.kubernetes.io/control-plane";

/// Where the files land on the node.
pub mod paths {
    pub const BOOTSTRAP_SCRIPT: &str = "/usr/local/sbin/meson-bootstrap";
    pub const KUBEADM_CONFIG: &str = "/etc/meson/kubeadm.yaml";
    pub const CLUSTER_ENV: &str = "/etc/meson/cluster.env";
    pub const KUBE_VIP_TEMPLATE: &str = "/etc/meson/kube-vip.yaml";
    pub const KUBE_VIP_HOSTS: &str = "/etc/kube-vip.hosts";
    pub const CONTAINERD_CONFIG: &str = "/etc/containerd/config.toml";
    pub const MODULES: &str = "/etc/modules-load.d/meson-kubernetes.conf";
    pub const SYSCTL: &str = "/etc/sysctl.d/99-meson-kubernetes.conf";
    pub const PKI: &str = "/etc/kubernetes/pki";
    /// The API servers' `--client-ca-file`: the cluster CA and the admin CA.
    pub const CLIENT_CA_BUNDLE: &str = "/etc/kubernetes/pki/meson-client-ca.crt";
    /// What `kubeadm kubeconfig user` needs on a joining control-plane node.
    pub const KUBEADM_CLIENT_CONFIG: &str = "/etc/meson/kubeadm-client.yaml";
}

/// A pinned CNI release: what the first control-plane node installs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CniRelease {
    pub cni: Cni,
    pub version: &'static str,
    /// The manifest applied (Calico, Flannel) or the CLI that installs it
    /// (Cilium: `cilium install --version <version> --set ipam.mode=kubernetes`).
    pub url: &'static str,
}

/// The CNI release installed for `cni`.
///
/// - Calico 3.29.3: `calico.yaml` with `CALICO_IPV4POOL_CIDR` uncommented and
///   set to the pod CIDR.
/// - Flannel 0.26.7: `kube-flannel.yml` with `net-conf.json`'s `Network` set
///   to the pod CIDR.
/// - Cilium 1.17.6 through cilium-cli 0.16.24 (checksum checked), IPAM mode
///   `kubernetes` so pods get addresses from each node's `podCIDR`, which the
///   controller manager carves out of the pod CIDR.
///
/// The pod CIDR substitution is checked: a manifest whose layout changed
/// fails the bootstrap instead of silently using the CNI's default range.
pub fn cni_release(cni: Cni) -> CniRelease {
    match cni {
        Cni::Calico => CniRelease {
            cni,
            version: "v3.29.3",
            url: "https://raw.githubusercontent.com/projectcalico/calico/v3.29.3/manifests/calico.yaml",
        },
        Cni::Flannel => CniRelease {
            cni,
            version: "v0.26.7",
            url: "https://github.com/flannel-io/flannel/releases/download/v0.26.7/kube-flannel.yml",
        },
        Cni::Cilium => CniRelease {
            cni,
            version: "1.17.6",
            url: "https://github.com/cilium/cilium-cli/releases/download/v0.16.24/",
        },
    }
}

/// What every node of a cluster shares.
#[derive(Clone, Debug)]
pub struct ClusterBootstrap<'a> {
    /// The cluster's name (a DNS label); kubeadm's `clusterName`.
    pub name: String,
    pub id: ClusterId,
    pub kubernetes_version: KubeVersion,
    /// The control-plane endpoint: the VIP kube-vip holds and the API port
    /// (6443), which is also every API server's bind port.
    pub endpoint: SocketAddrV4,
    pub pod_cidr: Ipv4Net,
    pub service_cidr: Ipv4Net,
    pub cni: Cni,
    /// How long the bootstrap token made by `kubeadm init` lives (used on
    /// the init node only; see [`DEFAULT_TOKEN_TTL`]).
    pub token_ttl: Duration,
    pub secrets: &'a ClusterSecrets,
}

/// What a node does with kubeadm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeRole {
    /// The first control-plane node: `kubeadm init`, then the CNI.
    InitControlPlane,
    /// Another control-plane node: `kubeadm join --control-plane`.
    JoinControlPlane,
    /// A worker: `kubeadm join`.
    Worker,
}

impl NodeRole {
    pub fn is_control_plane(self) -> bool {
        !matches!(self, NodeRole::Worker)
    }

    fn script_name(self) -> &'static str {
        match self {
            NodeRole::InitControlPlane => "init",
            NodeRole::JoinControlPlane => "join-control-plane",
            NodeRole::Worker => "worker",
        }
    }
}

/// One node.
#[derive(Clone, Debug)]
pub struct NodeBootstrap {
    /// Hostname and Kubernetes node name (a DNS label).
    pub name: String,
    pub role: NodeRole,
    /// kubelet's `--node-ip` and, on control-plane nodes, the API server's
    /// advertise address; kubeadm picks the default route's address if unset.
    pub node_ip: Option<Ipv4Addr>,
    /// Kubernetes labels the kubelet puts on its node (`--node-labels`):
    /// only those a kubelet may set itself (see [`kubelet_may_set_label`]).
    pub labels: Labels,
    /// Taints registered with the node; control-plane nodes also get
    /// [`CONTROL_PLANE_TAINT`]`:NoSchedule`.
    pub taints: Vec<Taint>,
    /// Keys authorized for the `elemento` user (sudo, no password).
    pub ssh_authorized_keys: Vec<SshKey>,
    /// Where cloud-init posts `instance_id` and `hostname` once the node is up.
    pub phone_home_url: String,
    /// kubelet's `--provider-id` (how the cluster-autoscaler maps nodes to
    /// VMs), if any.
    pub provider_id: Option<String>,
    /// The node this one replaces (upgrade, repair, rotation), by name. A
    /// control-plane node removes it from etcd and deletes its Node object
    /// once it has joined, while both still run: the old VM goes only after
    /// this node phoned home, so etcd never loses quorum.
    pub replaces: Option<String>,
}

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

/// The kubeadm configuration API for `v`: `v1beta4` from 1.31 (where it
/// became available and `v1beta3` deprecated), `v1beta3` before.
pub fn kubeadm_api_version(v: &KubeVersion) -> &'static str {
    if v.minor >= 31 {
        "kubeadm.k8s.io/v1beta4"
    } else {
        "kubeadm.k8s.io/v1beta3"
    }
}

/// The apt version pin for `v`'s kubelet, kubeadm and kubectl.
pub fn package_version(v: &KubeVersion) -> String {
    format!("{v}-*")
}

/// The pause image kubeadm expects for `v` (containerd's sandbox image):
/// kubeadm's `PauseVersion`, 3.10.1 from 1.34, 3.10 from 1.31, 3.9 before.
fn pause_image(v: &KubeVersion) -> &'static str {
    if v.minor >= 34 {
        "registry.k8s.io/pause:3.10.1"
    } else if v.minor >= 31 {
        "registry.k8s.io/pause:3.10"
    } else {
        "registry.k8s.io/pause:3.9"
    }
}

/// Whether `kubeadm init` of `v` writes `super-admin.conf`, the only
/// kubeconfig with rights before the API's RBAC bindings exist (1.29+).
fn has_super_admin(v: &KubeVersion) -> bool {
    v.minor >= 29
}

fn check(cluster: &ClusterBootstrap<'_>, node: &NodeBootstrap) -> Result<(), KaasError> {
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
            let _ = writeln!(out, "apiVersion: {}", q(api));
            out.push_str("kind: \"ClusterConfiguration\"\n");
            let _ = writeln!(out, "clusterName: {}", q(&cluster.name));
            let _ = writeln!(
                out,
                "kubernetesVersion: {}",
                q(&format!("v{}", cluster.kubernetes_version))
            );
            let _ = writeln!(out, "controlPlaneEndpoint: {}", q(&endpoint));
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
fn kubeadm_client_config(cluster: &ClusterBootstrap<'_>) -> String {
    let mut out = String::new();
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
    let _ = writeln!(out, "certificatesDir: {}", q(paths::PKI));
    out
}

/// The placeholder the bootstrap script replaces with the VIP's interface.
const VIP_INTERFACE_PLACEHOLDER: &str = "__MESON_VIP_INTERFACE__";

/// The kube-vip static pod for a control-plane node (ARP mode, control
/// plane only, leader election through a Lease), reading its kubeconfig
/// from `kubeconfig` on the host. kube-vip talks to the local API server as
/// `kubernetes:<port>`, so the pod gets an `/etc/hosts` mapping that name to
/// 127.0.0.1 (a file mount rather than `hostAliases`, which some 1.29 and
/// 1.30 patches ignore in static pods). `vip_cidr` and `vip_subnet` are both
/// set: kube-vip renamed the first to the second.
pub fn kube_vip_manifest(cluster: &ClusterBootstrap<'_>, kubeconfig: &str) -> String {
    let vip = cluster.endpoint.ip().to_string();
    let port = cluster.endpoint.port().to_string();
    let env = [
        ("vip_arp", "true"),
        ("port", port.as_str()),
        ("vip_interface", VIP_INTERFACE_PLACEHOLDER),
        ("vip_cidr", "32"),
        ("vip_subnet", "32"),
        ("dns_mode", "first"),
        ("cp_enable", "true"),
        ("cp_namespace", "kube-system"),
        ("svc_enable", "false"),
        ("vip_leaderelection", "true"),
        ("vip_leasename", "plndr-cp-lock"),
        ("vip_leaseduration", "5"),
        ("vip_renewdeadline", "3"),
        ("vip_retryperiod", "1"),
        ("address", vip.as_str()),
    ];
    let mut out = String::from(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube-vip\n  namespace: kube-system\n\
         spec:\n  hostNetwork: true\n  priorityClassName: system-node-critical\n  containers:\n\
         \x20   - name: kube-vip\n",
    );
    let _ = writeln!(out, "      image: {}", q(KUBE_VIP_IMAGE));
    out.push_str("      imagePullPolicy: IfNotPresent\n      args: [\"manager\"]\n      env:\n");
    out.push_str(
        "        - name: vip_nodename\n          valueFrom:\n            fieldRef:\n              fieldPath: spec.nodeName\n",
    );
    for (name, value) in env {
        let _ = writeln!(
            out,
            "        - name: {}\n          value: {}",
            q(name),
            q(value)
        );
    }
    out.push_str(
        "      securityContext:\n        capabilities:\n          add: [\"NET_ADMIN\", \"NET_RAW\"]\n\
         \x20     volumeMounts:\n\
         \x20       - name: kubeconfig\n          mountPath: /etc/kubernetes/admin.conf\n\
         \x20       - name: hosts\n          mountPath: /etc/hosts\n          readOnly: true\n\
         \x20 volumes:\n    - name: kubeconfig\n      hostPath:\n",
    );
    let _ = writeln!(out, "        path: {}\n        type: File", q(kubeconfig));
    let _ = writeln!(
        out,
        "    - name: hosts\n      hostPath:\n        path: {}\n        type: File",
        q(paths::KUBE_VIP_HOSTS)
    );
    out
}

fn containerd_config(v: &KubeVersion) -> String {
    format!(
        "# Written by meson: containerd's CRI plugin with the systemd cgroup driver,\n\
         # matching the kubelet's cgroupDriver.\n\
         version = 2\n\
         \n\
         [plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = {}\n\
         \n\
         [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n\
         \n\
         [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n",
        q(pause_image(v))
    )
}

const MODULES: &str = "overlay\nbr_netfilter\n";
const SYSCTL: &str = "net.bridge.bridge-nf-call-iptables = 1\n\
                      net.bridge.bridge-nf-call-ip6tables = 1\n\
                      net.ipv4.ip_forward = 1\n";
const KUBE_VIP_HOSTS: &str = "127.0.0.1 localhost kubernetes\n::1 localhost ip6-localhost\n";

/// The body of the bootstrap script; its variables are set above it.
const SCRIPT_BODY: &str = r##"
log() { printf 'meson-bootstrap: %s\n' "$*" >&2; }
trap 'log "failed (exit $?) at line $LINENO: $BASH_COMMAND"' ERR

# retry ATTEMPTS DELAY COMMAND...: bounded retries for what the network can break.
retry() {
  local attempts=$1 delay=$2 i
  shift 2
  for ((i = 1; i <= attempts; i++)); do
    if "$@"; then return 0; fi
    log "attempt $i/$attempts failed: $*"
    if ((i < attempts)); then sleep "$delay"; fi
  done
  return 1
}

# wait_for SECONDS WHAT COMMAND...: polls every 5 s until COMMAND succeeds.
wait_for() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "timed out waiting for $what"
      return 1
    fi
    sleep 5
  done
}

log "node $NODE_NAME, role $ROLE, Kubernetes $K8S_VERSION"

log "kernel: swap off, modules, sysctls"
swapoff -a
sed -ri '/^[^#].*[[:space:]]swap[[:space:]]/s/^/#/' /etc/fstab
modprobe overlay
modprobe br_netfilter
sysctl -q -p /etc/sysctl.d/99-meson-kubernetes.conf

log "packages: containerd, kubelet/kubeadm/kubectl $K8S_PACKAGE_VERSION"
APT=(apt-get -q -y -o Acquire::Retries=5 -o DPkg::Lock::Timeout=300
  -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
retry 5 10 "${APT[@]}" update
retry 3 10 "${APT[@]}" install --no-install-recommends ca-certificates curl gpg containerd
install -d -m 0755 /etc/apt/keyrings
retry 5 10 curl -fsSL --max-time 60 -o /tmp/meson-kubernetes-release.key \
  "https://pkgs.k8s.io/core:/stable:/$K8S_MINOR/deb/Release.key"
gpg --batch --yes --dearmor -o /etc/apt/keyrings/kubernetes-apt-keyring.gpg /tmp/meson-kubernetes-release.key
echo "deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] https://pkgs.k8s.io/core:/stable:/$K8S_MINOR/deb/ /" \
  >/etc/apt/sources.list.d/kubernetes.list
retry 5 10 "${APT[@]}" update
retry 3 10 "${APT[@]}" install --no-install-recommends \
  "kubelet=$K8S_PACKAGE_VERSION" "kubeadm=$K8S_PACKAGE_VERSION" "kubectl=$K8S_PACKAGE_VERSION"
apt-mark hold kubelet kubeadm kubectl containerd >/dev/null
systemctl restart containerd
systemctl enable kubelet

if [ "$ROLE" != worker ]; then
  log "kube-vip for $VIP"
  iface=
  if [ -n "$NODE_IP" ]; then
    iface=$(ip -o -4 addr show | awk -v ip="$NODE_IP" '{ split($4, a, "/"); if (a[1] == ip) { print $2; exit } }')
  fi
  if [ -z "$iface" ]; then
    iface=$(ip -o -4 route get "$VIP" | sed -n 's/.* dev \([^ ]*\).*/\1/p')
  fi
  iface=${iface%%@*}
  if ! [[ "$iface" =~ ^[A-Za-z0-9_.:-]+$ ]]; then
    log "no network interface found for the VIP $VIP"
    exit 1
  fi
  install -d -m 0755 /etc/kubernetes/manifests
  sed "s/__MESON_VIP_INTERFACE__/$iface/" /etc/meson/kube-vip.yaml >/etc/kubernetes/manifests/kube-vip.yaml
  retry 5 10 timeout 600 kubeadm config images pull \
    --kubernetes-version "v$K8S_VERSION" --cri-socket unix:///run/containerd/containerd.sock
fi

if [ "$ROLE" = join-control-plane ]; then
  # kubeadm join --control-plane runs the control plane at the version in
  # the cluster's kubeadm-config and refuses a kubelet newer than it: a node
  # replacing an older one (a rolling upgrade) first brings that version up
  # to its own, as `kubeadm upgrade apply` does.
  log "kubeadm-config: Kubernetes v$K8S_VERSION or older"
  kubeadm kubeconfig user --config /etc/meson/kubeadm-client.yaml \
    --client-name meson:control-plane-join --org system:masters \
    --validity-period 2h >/etc/meson/join-admin.conf
  chmod 0600 /etc/meson/join-admin.conf
  K=(kubectl --kubeconfig /etc/meson/join-admin.conf)
  wait_for 600 "the API server" "${K[@]}" get --raw=/readyz
  retry 5 10 "${K[@]}" -n kube-system get configmap kubeadm-config \
    -o jsonpath='{.data.ClusterConfiguration}' >/etc/meson/cluster-configuration.yaml
  have=$(sed -n 's/^kubernetesVersion: *"\{0,1\}v\{0,1\}\([0-9][0-9.]*\)"\{0,1\} *$/\1/p' \
    /etc/meson/cluster-configuration.yaml)
  if [ -z "$have" ]; then
    log "kubeadm-config has no kubernetesVersion"
    exit 1
  fi
  newest=$(printf '%s\n%s\n' "$have" "$K8S_VERSION" | sort -V | tail -n 1)
  if [ "$have" != "$K8S_VERSION" ] && [ "$newest" = "$K8S_VERSION" ]; then
    log "kubeadm-config: Kubernetes v$have -> v$K8S_VERSION"
    sed -i "s/^kubernetesVersion: .*/kubernetesVersion: v$K8S_VERSION/" \
      /etc/meson/cluster-configuration.yaml
    put_cluster_configuration() {
      "${K[@]}" -n kube-system create configmap kubeadm-config \
        --from-file=ClusterConfiguration=/etc/meson/cluster-configuration.yaml \
        --dry-run=client -o yaml | "${K[@]}" replace -f -
    }
    retry 5 10 put_cluster_configuration
  fi
  rm -f /etc/meson/join-admin.conf
fi

case "$ROLE" in
  init)
    log "kubeadm init"
    timeout 1200 kubeadm init --config /etc/meson/kubeadm.yaml
    ;;
  *)
    log "kubeadm join"
    join() {
      timeout 1200 kubeadm join --config /etc/meson/kubeadm.yaml && return 0
      kubeadm reset --force >/dev/null 2>&1 || true
      return 1
    }
    retry 3 30 join
    ;;
esac

log "waiting for the kubelet"
wait_for 300 "the kubelet's /healthz" curl -sf --max-time 5 http://127.0.0.1:10248/healthz

if [ "$ROLE" = join-control-plane ]; then
  # The token nodes join with from now on (a new one after a credentials
  # rotation), and the end of the revoked ones.
  export KUBECONFIG=/etc/kubernetes/admin.conf
  wait_for 300 "the API server" kubectl get --raw=/readyz
  token_id=${BOOTSTRAP_TOKEN_REGISTER%%.*}
  if ! kubectl -n kube-system get secret "bootstrap-token-$token_id" >/dev/null 2>&1; then
    log "bootstrap token $token_id: registering"
    retry 5 10 kubeadm token create "$BOOTSTRAP_TOKEN_REGISTER" --ttl "${TOKEN_TTL}s" \
      --description "meson node bootstrap token" --usages signing,authentication \
      --groups system:bootstrappers:kubeadm:default-node-token
  fi
  for id in $BOOTSTRAP_TOKEN_REVOKE; do
    log "bootstrap token $id: revoking"
    kubeadm token delete "$id" >/dev/null 2>&1 || true
  done
  if [ -n "$REPLACES" ]; then
    # The node this one replaces leaves etcd now, while both run: meson
    # removes its VM only after this node phoned home, so etcd keeps quorum.
    log "etcd: removing the member of $REPLACES"
    etcdctl() {
      kubectl -n kube-system exec "etcd-$NODE_NAME" -- etcdctl \
        --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt \
        --cert=/etc/kubernetes/pki/etcd/server.crt --key=/etc/kubernetes/pki/etcd/server.key "$@"
    }
    wait_for 300 "this node's etcd member" etcdctl endpoint health
    member=$(etcdctl member list | awk -F', ' -v n="$REPLACES" '$3 == n { print $1 }')
    if [ -n "$member" ]; then
      retry 5 10 etcdctl member remove "$member"
    fi
    retry 5 10 kubectl delete node "$REPLACES" --ignore-not-found
  fi
  unset KUBECONFIG
fi

if [ "$ROLE" = init ]; then
  export KUBECONFIG=/etc/kubernetes/admin.conf
  wait_for 300 "the API server" kubectl get --raw=/readyz
  log "CNI: $CNI $CNI_VERSION, pod CIDR $POD_CIDR"
  case "$CNI" in
    calico)
      retry 5 10 curl -fsSL --max-time 120 -o /tmp/meson-cni.yaml "$CNI_URL"
      sed -i -e 's|# - name: CALICO_IPV4POOL_CIDR|- name: CALICO_IPV4POOL_CIDR|' \
        -e "s|#   value: \"192.168.0.0/16\"|  value: \"$POD_CIDR\"|" /tmp/meson-cni.yaml
      grep -Eq '^[[:space:]]+- name: CALICO_IPV4POOL_CIDR' /tmp/meson-cni.yaml
      grep -Eq "^[[:space:]]+value: \"$POD_CIDR\"" /tmp/meson-cni.yaml
      retry 10 10 kubectl apply --server-side --force-conflicts -f /tmp/meson-cni.yaml
      ;;
    flannel)
      retry 5 10 curl -fsSL --max-time 120 -o /tmp/meson-cni.yaml "$CNI_URL"
      sed -i "s|\"Network\": \"10.244.0.0/16\"|\"Network\": \"$POD_CIDR\"|" /tmp/meson-cni.yaml
      grep -q -- "\"Network\": \"$POD_CIDR\"" /tmp/meson-cni.yaml
      retry 10 10 kubectl apply --server-side --force-conflicts -f /tmp/meson-cni.yaml
      ;;
    cilium)
      arch=$(dpkg --print-architecture)
      cd /tmp
      retry 5 10 curl -fsSL --max-time 300 --remote-name-all \
        "${CNI_URL}cilium-linux-$arch.tar.gz" "${CNI_URL}cilium-linux-$arch.tar.gz.sha256sum"
      sha256sum --check --quiet "cilium-linux-$arch.tar.gz.sha256sum"
      tar -xzf "cilium-linux-$arch.tar.gz" -C /usr/local/bin cilium
      cd /
      timeout 600 cilium install --version "$CNI_VERSION" --set ipam.mode=kubernetes
      ;;
    *)
      log "unknown CNI $CNI"
      exit 1
      ;;
  esac
  if [ "$KUBE_VIP_REVERT_SUPER_ADMIN" = yes ]; then
    # kube-vip needed super-admin.conf while the API had no RBAC bindings;
    # give it the ordinary admin.conf now (kubelet restarts the pod).
    log "kube-vip: back to admin.conf"
    sed -i 's#path: "/etc/kubernetes/super-admin.conf"#path: "/etc/kubernetes/admin.conf"#' \
      /etc/kubernetes/manifests/kube-vip.yaml
    # The kubelet rereads static pod manifests every 20 s.
    sleep 30
    wait_for 300 "the API server behind the VIP" kubectl get --raw=/readyz
  fi
fi

log "done: the kubelet is healthy"
"##;

/// The bootstrap script of a node (see the module documentation).
fn bootstrap_script(cluster: &ClusterBootstrap<'_>, node: &NodeBootstrap) -> String {
    let v = &cluster.kubernetes_version;
    let cni = cni_release(cluster.cni);
    let revert = node.role == NodeRole::InitControlPlane && has_super_admin(v);
    let vars = [
        ("ROLE", node.role.script_name().to_owned()),
        ("NODE_NAME", node.name.clone()),
        (
            "NODE_IP",
            node.node_ip.map(|ip| ip.to_string()).unwrap_or_default(),
        ),
        ("VIP", cluster.endpoint.ip().to_string()),
        ("K8S_VERSION", v.to_string()),
        ("K8S_MINOR", format!("v{}", v.minor_line())),
        ("K8S_PACKAGE_VERSION", package_version(v)),
        ("CNI", cluster.cni.as_str().to_owned()),
        ("CNI_VERSION", cni.version.to_owned()),
        ("CNI_URL", cni.url.to_owned()),
        ("POD_CIDR", cluster.pod_cidr.to_string()),
        (
            "KUBE_VIP_REVERT_SUPER_ADMIN",
            if revert { "yes" } else { "no" }.to_owned(),
        ),
        (
            "BOOTSTRAP_TOKEN_REGISTER",
            cluster.secrets.token_to_register().as_str().to_owned(),
        ),
        (
            "BOOTSTRAP_TOKEN_REVOKE",
            cluster.secrets.revoked_token_ids().join(" "),
        ),
        ("TOKEN_TTL", cluster.token_ttl.as_secs().to_string()),
        ("REPLACES", node.replaces.clone().unwrap_or_default()),
    ];
    let mut out = String::from(
        "#!/bin/bash\n\
         # Written by meson: joins this VM to its Kubernetes cluster. Run once by\n\
         # cloud-init's runcmd; it exits non-zero on any failure, and the runcmd\n\
         # wrapper then powers the VM off so that phone_home never fires.\n\
         set -Eeuo pipefail\n\
         export DEBIAN_FRONTEND=noninteractive\n\
         export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n\n",
    );
    for (name, value) in vars {
        let _ = writeln!(out, "{name}={}", sh(&value));
    }
    out.push_str(SCRIPT_BODY);
    out
}

/// What `runcmd` runs: the bootstrap, or a power-off that blocks until the
/// VM is down (so cloud-init never reaches `phone_home`).
const RUNCMD: &str = "/usr/local/sbin/meson-bootstrap || { \
     echo 'meson-bootstrap failed: powering off so that this node never phones home' >&2; \
     shutdown -h now; sleep 600; poweroff -f; }";

struct File {
    path: String,
    permissions: &'static str,
    content: String,
}

fn file(path: &str, permissions: &'static str, content: impl Into<String>) -> File {
    File {
        path: path.to_owned(),
        permissions,
        content: content.into(),
    }
}

fn files(cluster: &ClusterBootstrap<'_>, node: &NodeBootstrap) -> Result<Vec<File>, KaasError> {
    let v = &cluster.kubernetes_version;
    let mut files = vec![
        file(paths::MODULES, "0644", MODULES),
        file(paths::SYSCTL, "0644", SYSCTL),
        file(paths::CONTAINERD_CONFIG, "0644", containerd_config(v)),
        file(
            paths::CLUSTER_ENV,
            "0644",
            format!(
                "MESON_CLUSTER_ID={}\nMESON_CLUSTER_NAME={}\nMESON_NODE_ROLE={}\n",
                sh(&cluster.id.to_string()),
                sh(&cluster.name),
                sh(node.role.script_name())
            ),
        ),
        // The bootstrap token is in it.
        file(
            paths::KUBEADM_CONFIG,
            "0600",
            kubeadm_config(cluster, node)?,
        ),
    ];
    if node.role.is_control_plane() {
        let kubeconfig = if node.role == NodeRole::InitControlPlane && has_super_admin(v) {
            "/etc/kubernetes/super-admin.conf"
        } else {
            "/etc/kubernetes/admin.conf"
        };
        files.push(file(
            paths::KUBE_VIP_TEMPLATE,
            "0644",
            kube_vip_manifest(cluster, kubeconfig),
        ));
        files.push(file(paths::KUBE_VIP_HOSTS, "0644", KUBE_VIP_HOSTS));
        let s = cluster.secrets;
        let pki = |name: &str| format!("{}/{name}", paths::PKI);
        files.extend([
            file(&pki("ca.crt"), "0644", s.cluster_ca().cert_pem.as_str()),
            file(&pki("ca.key"), "0600", s.cluster_ca().key_pem.as_str()),
            file(
                &pki("front-proxy-ca.crt"),
                "0644",
                s.front_proxy_ca().cert_pem.as_str(),
            ),
            file(
                &pki("front-proxy-ca.key"),
                "0600",
                s.front_proxy_ca().key_pem.as_str(),
            ),
            file(&pki("etcd/ca.crt"), "0644", s.etcd_ca().cert_pem.as_str()),
            file(&pki("etcd/ca.key"), "0600", s.etcd_ca().key_pem.as_str()),
            file(
                &pki("sa.key"),
                "0600",
                s.service_account().private_pem.as_str(),
            ),
            file(
                &pki("sa.pub"),
                "0644",
                s.service_account().public_pem.as_str(),
            ),
            file(paths::CLIENT_CA_BUNDLE, "0644", s.client_ca_bundle()),
        ]);
        if node.role == NodeRole::JoinControlPlane {
            files.push(file(
                paths::KUBEADM_CLIENT_CONFIG,
                "0644",
                kubeadm_client_config(cluster),
            ));
        }
    }
    files.push(file(
        paths::BOOTSTRAP_SCRIPT,
        "0700",
        bootstrap_script(cluster, node),
    ));
    Ok(files)
}

/// The `#cloud-config` user-data of one node. Control-plane user-data holds
/// the cluster's CA keys: the volume it is written to is as secret as they are.
pub fn user_data(
    cluster: &ClusterBootstrap<'_>,
    node: &NodeBootstrap,
) -> Result<String, KaasError> {
    check(cluster, node)?;
    let files = files(cluster, node)?;
    let mut out = String::from("#cloud-config\n");
    let _ = writeln!(
        out,
        "# meson: node {} ({}) of Kubernetes cluster {} ({})",
        node.name,
        node.role.script_name(),
        cluster.name,
        cluster.id
    );
    let _ = writeln!(out, "hostname: {}", q(&node.name));
    out.push_str("preserve_hostname: false\nmanage_etc_hosts: true\nssh_pwauth: false\n");
    out.push_str("users:\n  - default\n  - name: \"elemento\"\n    shell: \"/bin/bash\"\n");
    out.push_str("    sudo: \"ALL=(ALL) NOPASSWD:ALL\"\n    lock_passwd: true\n");
    if !node.ssh_authorized_keys.is_empty() {
        out.push_str("    ssh_authorized_keys:\n");
        for k in &node.ssh_authorized_keys {
            let _ = writeln!(out, "      - {}", q(k.as_str()));
        }
    }
    out.push_str("write_files:\n");
    for f in &files {
        let _ = writeln!(out, "  - path: {}", q(&f.path));
        out.push_str("    owner: \"root:root\"\n");
        let _ = writeln!(out, "    permissions: {}", q(f.permissions));
        let _ = writeln!(out, "    content: {}", file_content(&f.content, 6));
    }
    out.push_str("runcmd:\n");
    let _ = writeln!(out, "  - [\"/bin/bash\", \"-c\", {}]", q(RUNCMD));
    out.push_str("phone_home:\n");
    let _ = writeln!(out, "  url: {}", q(&node.phone_home_url));
    out.push_str("  post: [\"instance_id\", \"hostname\"]\n  tries: 10\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize as _;
    use serde_yaml_ng::Value;
    use std::process::Command;

    fn secrets() -> &'static ClusterSecrets {
        crate::pki::tests::secrets()
    }

    const VIP: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 250);
    const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMLavtiPfhiG3t6TAxHosXoVh7Pc/lSD8L9SNPyAzp1d user@host";

    fn cluster(version: KubeVersion, cni: Cni) -> ClusterBootstrap<'static> {
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

    fn v131() -> ClusterBootstrap<'static> {
        cluster(KubeVersion::new(1, 31, 10), Cni::Calico)
    }

    fn node(role: NodeRole) -> NodeBootstrap {
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

    const ROLES: [NodeRole; 3] = [
        NodeRole::InitControlPlane,
        NodeRole::JoinControlPlane,
        NodeRole::Worker,
    ];

    fn yaml(s: &str) -> Value {
        serde_yaml_ng::from_str(s).unwrap_or_else(|e| panic!("not YAML ({e}):\n{s}"))
    }

    fn yaml_docs(s: &str) -> Vec<Value> {
        serde_yaml_ng::Deserializer::from_str(s)
            .map(|d| Value::deserialize(d).unwrap())
            .collect()
    }

    fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
        let mut cur = v;
        for p in path {
            cur = &cur[*p];
        }
        cur.as_str()
            .unwrap_or_else(|| panic!("{path:?} is not a string: {cur:?}"))
    }

    /// The write_files entry for `path`, if any.
    fn written<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
        doc["write_files"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|f| f["path"].as_str() == Some(path))
    }

    fn content<'a>(doc: &'a Value, path: &str) -> &'a str {
        let f = written(doc, path).unwrap_or_else(|| panic!("{path} not written"));
        f["content"].as_str().unwrap()
    }

    fn kubeadm(ud: &str) -> Vec<Value> {
        yaml_docs(content(&yaml(ud), paths::KUBEADM_CONFIG))
    }

    fn render(c: &ClusterBootstrap<'_>, role: NodeRole) -> String {
        user_data(c, &node(role)).unwrap()
    }

    #[test]
    fn user_data_is_cloud_config_with_the_node_files_runcmd_and_phone_home() {
        let c = v131();
        for role in ROLES {
            let ud = render(&c, role);
            assert!(ud.starts_with("#cloud-config\n"), "{role:?}");
            let doc = yaml(&ud);
            let name = node(role).name;
            assert_eq!(str_at(&doc, &["hostname"]), name);
            assert_eq!(doc["preserve_hostname"].as_bool(), Some(false));
            assert_eq!(
                doc["users"][1]["ssh_authorized_keys"][0].as_str(),
                Some(KEY),
                "{role:?}"
            );
            // runcmd: the bootstrap, or a power-off that blocks.
            let run = doc["runcmd"].as_sequence().unwrap();
            assert_eq!(run.len(), 1);
            let cmd = run[0][2].as_str().unwrap();
            assert!(cmd.starts_with(paths::BOOTSTRAP_SCRIPT), "{cmd}");
            assert!(
                cmd.contains("|| {") && cmd.contains("shutdown -h now"),
                "{cmd}"
            );
            assert!(cmd.contains("sleep 600"), "{cmd}");
            // phone_home as cloud-init's module wants it.
            assert_eq!(
                str_at(&doc, &["phone_home", "url"]),
                "https://meson.example/v1/phone-home/abc"
            );
            let post: Vec<_> = doc["phone_home"]["post"]
                .as_sequence()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            assert_eq!(post, ["instance_id", "hostname"]);
            assert_eq!(doc["phone_home"]["tries"].as_u64(), Some(10));

            // Files every node gets, with their modes.
            for (path, mode) in [
                (paths::MODULES, "0644"),
                (paths::SYSCTL, "0644"),
                (paths::CONTAINERD_CONFIG, "0644"),
                (paths::CLUSTER_ENV, "0644"),
                (paths::KUBEADM_CONFIG, "0600"),
                (paths::BOOTSTRAP_SCRIPT, "0700"),
            ] {
                let f = written(&doc, path).unwrap_or_else(|| panic!("{role:?}: {path}"));
                assert_eq!(f["permissions"].as_str(), Some(mode), "{path}");
                assert_eq!(f["owner"].as_str(), Some("root:root"), "{path}");
            }
            assert_eq!(content(&doc, paths::MODULES), "overlay\nbr_netfilter\n");
            let sysctl = content(&doc, paths::SYSCTL);
            for key in [
                "net.ipv4.ip_forward = 1",
                "net.bridge.bridge-nf-call-iptables = 1",
            ] {
                assert!(sysctl.contains(key), "{key}");
            }
            let containerd = content(&doc, paths::CONTAINERD_CONFIG);
            assert!(containerd.contains("SystemdCgroup = true"));
            assert!(containerd.contains("sandbox_image = \"registry.k8s.io/pause:3.10\""));
            let env = content(&doc, paths::CLUSTER_ENV);
            assert!(
                env.contains(&format!("MESON_CLUSTER_ID='{}'", c.id)),
                "{env}"
            );

            // The pki and kube-vip only on control-plane nodes.
            let pki = [
                ("ca.crt", "0644"),
                ("ca.key", "0600"),
                ("front-proxy-ca.crt", "0644"),
                ("front-proxy-ca.key", "0600"),
                ("etcd/ca.crt", "0644"),
                ("etcd/ca.key", "0600"),
                ("sa.key", "0600"),
                ("sa.pub", "0644"),
            ];
            for (name, mode) in pki {
                let path = format!("/etc/kubernetes/pki/{name}");
                match written(&doc, &path) {
                    Some(f) => {
                        assert!(role.is_control_plane(), "{role:?} got {path}");
                        assert_eq!(f["permissions"].as_str(), Some(mode), "{path}");
                    }
                    None => assert_eq!(role, NodeRole::Worker, "{role:?} lacks {path}"),
                }
            }
            assert_eq!(
                written(&doc, paths::KUBE_VIP_TEMPLATE).is_some(),
                role.is_control_plane()
            );
            assert_eq!(
                written(&doc, paths::KUBE_VIP_HOSTS).is_some(),
                role.is_control_plane()
            );
        }
    }

    #[test]
    fn control_plane_files_are_the_cluster_secrets() {
        let c = v131();
        let doc = yaml(&render(&c, NodeRole::JoinControlPlane));
        let s = secrets();
        assert_eq!(
            content(&doc, "/etc/kubernetes/pki/ca.crt"),
            s.cluster_ca().cert_pem
        );
        assert_eq!(
            content(&doc, "/etc/kubernetes/pki/ca.key"),
            s.cluster_ca().key_pem
        );
        assert_eq!(
            content(&doc, "/etc/kubernetes/pki/front-proxy-ca.key"),
            s.front_proxy_ca().key_pem
        );
        assert_eq!(
            content(&doc, "/etc/kubernetes/pki/etcd/ca.crt"),
            s.etcd_ca().cert_pem
        );
        assert_eq!(
            content(&doc, "/etc/kubernetes/pki/sa.key"),
            s.service_account().private_pem
        );
        assert_eq!(
            content(&doc, "/etc/kubernetes/pki/sa.pub"),
            s.service_account().public_pem
        );
    }

    #[test]
    fn workers_get_no_private_key_material() {
        let c = v131();
        let ud = render(&c, NodeRole::Worker);
        assert!(
            !ud.contains("PRIVATE KEY"),
            "a worker's user-data holds a private key"
        );
        // No file goes to the PKI directory (the bootstrap script only names
        // the etcd pod's own certificate paths, used on control-plane nodes).
        let doc = yaml(&ud);
        let paths: Vec<&str> = doc["write_files"]
            .as_sequence()
            .unwrap()
            .iter()
            .filter_map(|f| f["path"].as_str())
            .collect();
        assert!(
            paths.iter().all(|p| !p.starts_with("/etc/kubernetes/pki")),
            "{paths:?}"
        );
        for key in [
            &secrets().cluster_ca().key_pem,
            &secrets().etcd_ca().key_pem,
            &secrets().service_account().private_pem,
        ] {
            // Not even one line of a key's base64.
            let line = key.lines().nth(1).unwrap();
            assert!(!ud.contains(line));
        }
        assert!(!ud.contains(secrets().certificate_key()));
        // Control-plane nodes do carry them.
        assert!(render(&c, NodeRole::InitControlPlane).contains("PRIVATE KEY"));
    }

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
        let taints: Vec<_> = join["nodeRegistration"]["taints"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|t| t["key"].as_str().unwrap())
            .collect();
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
        let doc = yaml(&render(&c, NodeRole::Worker));
        assert!(content(&doc, paths::CONTAINERD_CONFIG).contains("pause:3.9"));
        // kubeadm's pause from 1.34.
        for (v, pause) in [
            (KubeVersion::new(1, 33, 10), "pause:3.10\""),
            (KubeVersion::new(1, 34, 9), "pause:3.10.1\""),
        ] {
            let containerd = containerd_config(&v);
            assert!(containerd.contains(pause), "{v}: {containerd}");
        }
    }

    fn script(ud: &str) -> String {
        content(&yaml(ud), paths::BOOTSTRAP_SCRIPT).to_owned()
    }

    /// The value of `NAME='...'` in a bootstrap script.
    #[test]
    fn a_replacement_control_plane_node_removes_the_old_one_from_etcd() {
        let c = v131();
        let mut n = node(NodeRole::JoinControlPlane);
        n.replaces = Some("test8-cp-old01".into());
        let s = script(&user_data(&c, &n).unwrap());
        assert_eq!(script_var(&s, "REPLACES"), "test8-cp-old01");
        assert!(s.contains("etcdctl member remove \"$member\""), "{s}");
        assert!(s.contains("kubectl delete node \"$REPLACES\""), "{s}");
        // Without a node to replace the step is skipped (empty REPLACES).
        let plain = script(&render(&c, NodeRole::JoinControlPlane));
        assert_eq!(script_var(&plain, "REPLACES"), "");
        n.replaces = Some("Bad Name".into());
        assert!(user_data(&c, &n).is_err());
    }

    fn script_var(script: &str, name: &str) -> String {
        let prefix = format!("{name}='");
        let line = script
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("{name} not set"));
        line[prefix.len()..line.len() - 1].to_owned()
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

    #[test]
    fn during_a_rotation_new_control_planes_trust_the_new_admin_ca_and_register_its_token() {
        let mut rotated = secrets().clone();
        rotated.begin_rotation("test8").unwrap();
        let rotated: &'static ClusterSecrets = Box::leak(Box::new(rotated));
        let mut c = v131();
        c.secrets = rotated;
        let ud = render(&c, NodeRole::JoinControlPlane);
        let doc = yaml(&ud);
        let bundle = content(&doc, paths::CLIENT_CA_BUNDLE);
        assert_eq!(bundle, rotated.client_ca_bundle());
        assert!(bundle.contains(&rotated.trusted_admin_ca().cert_pem));
        assert!(
            !bundle.contains(&secrets().admin_ca().cert_pem),
            "the old admin CA is out"
        );
        // It joins with the token the cluster knows and registers the new one.
        let join = &kubeadm(&ud)[0];
        assert_eq!(
            str_at(join, &["discovery", "bootstrapToken", "token"]),
            secrets().bootstrap_token().as_str()
        );
        let s = script(&ud);
        assert_eq!(
            script_var(&s, "BOOTSTRAP_TOKEN_REGISTER"),
            rotated.token_to_register().as_str()
        );
        assert_ne!(rotated.token_to_register(), secrets().bootstrap_token());
        // Once taken into use, the old one is revoked by the next ones.
        let mut promoted = rotated.clone();
        promoted.promote_rotated_token();
        let promoted: &'static ClusterSecrets = Box::leak(Box::new(promoted));
        c.secrets = promoted;
        let ud = render(&c, NodeRole::JoinControlPlane);
        assert_eq!(
            script_var(&script(&ud), "BOOTSTRAP_TOKEN_REVOKE"),
            secrets().bootstrap_token().id()
        );
        assert_eq!(
            str_at(&kubeadm(&ud)[0], &["discovery", "bootstrapToken", "token"]),
            rotated.token_to_register().as_str()
        );
        let worker = render(&c, NodeRole::Worker);
        assert!(!worker.contains(secrets().bootstrap_token().as_str()));
    }

    #[test]
    fn the_script_installs_the_pinned_packages_and_runs_kubeadm() {
        let c = v131();
        for role in ROLES {
            let s = script(&render(&c, role));
            assert!(s.starts_with("#!/bin/bash\n"));
            assert!(s.contains("set -Eeuo pipefail"));
            assert!(s.contains("K8S_MINOR='v1.31'\n"), "{s}");
            assert!(s.contains("K8S_PACKAGE_VERSION='1.31.10-*'\n"));
            assert!(s.contains("K8S_VERSION='1.31.10'\n"));
            assert!(s.contains("https://pkgs.k8s.io/core:/stable:/$K8S_MINOR/deb/Release.key"));
            assert!(s.contains("\"kubeadm=$K8S_PACKAGE_VERSION\""));
            assert!(s.contains("apt-mark hold kubelet kubeadm kubectl containerd"));
            assert!(s.contains("swapoff -a"));
            assert!(s.contains("modprobe br_netfilter"));
            assert!(s.contains("http://127.0.0.1:10248/healthz"));
            assert!(s.contains("kubeadm init --config /etc/meson/kubeadm.yaml"));
            assert!(s.contains("kubeadm join --config /etc/meson/kubeadm.yaml"));
            let want_role = match role {
                NodeRole::InitControlPlane => "ROLE='init'\n",
                NodeRole::JoinControlPlane => "ROLE='join-control-plane'\n",
                NodeRole::Worker => "ROLE='worker'\n",
            };
            assert!(s.contains(want_role), "{role:?}");
            assert!(s.contains("VIP='192.168.1.250'\n"));
            assert!(s.contains("POD_CIDR='10.244.0.0/16'\n"));
            // The paths the script uses are the files the user-data writes.
            assert!(s.contains(paths::KUBEADM_CONFIG));
            assert!(s.contains(paths::KUBE_VIP_TEMPLATE));
            assert!(s.contains(paths::SYSCTL));
        }
    }

    #[test]
    fn the_script_is_valid_bash() {
        for (c, role) in [
            (v131(), NodeRole::InitControlPlane),
            (
                cluster(KubeVersion::new(1, 28, 15), Cni::Cilium),
                NodeRole::JoinControlPlane,
            ),
            (
                cluster(KubeVersion::new(1, 30, 14), Cni::Flannel),
                NodeRole::Worker,
            ),
        ] {
            let s = script(&render(&c, role));
            let path = temp_file("script.sh", &s);
            let out = Command::new("bash").arg("-n").arg(&path).output();
            let _ = std::fs::remove_file(&path);
            match out {
                Ok(out) => assert!(
                    out.status.success(),
                    "bash -n: {}",
                    String::from_utf8_lossy(&out.stderr)
                ),
                Err(e) => eprintln!("note: bash not runnable ({e}); syntax check skipped"),
            }
        }
    }

    #[test]
    fn each_cni_is_pinned_and_gets_the_pod_cidr() {
        for cni in [Cni::Calico, Cni::Flannel, Cni::Cilium] {
            let mut c = cluster(KubeVersion::new(1, 31, 10), cni);
            c.pod_cidr = "10.32.0.0/12".parse().unwrap();
            let s = script(&render(&c, NodeRole::InitControlPlane));
            let release = cni_release(cni);
            assert!(s.contains(&format!("CNI='{}'\n", cni.as_str())));
            assert!(s.contains(&format!("CNI_URL='{}'\n", release.url)));
            assert!(s.contains(&format!("CNI_VERSION='{}'\n", release.version)));
            assert!(s.contains("POD_CIDR='10.32.0.0/12'\n"));
            assert!(release.url.starts_with("https://"));
            assert!(
                release
                    .url
                    .contains(release.version.trim_start_matches('v'))
                    || cni == Cni::Cilium
            );
        }
        let s = script(&render(&v131(), NodeRole::InitControlPlane));
        assert!(s.contains("CALICO_IPV4POOL_CIDR"));
        assert!(s.contains("--set ipam.mode=kubernetes"));
        assert!(s.contains("sha256sum --check"));
    }

    fn kube_vip(ud: &str) -> Value {
        yaml(content(&yaml(ud), paths::KUBE_VIP_TEMPLATE))
    }

    fn env<'a>(pod: &'a Value, name: &str) -> Option<&'a str> {
        pod["spec"]["containers"][0]["env"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|e| e["name"].as_str() == Some(name))
            .and_then(|e| e["value"].as_str())
    }

    #[test]
    fn kube_vip_holds_the_vip_by_arp_with_the_right_kubeconfig() {
        let c = v131();
        let init = kube_vip(&render(&c, NodeRole::InitControlPlane));
        assert_eq!(str_at(&init, &["kind"]), "Pod");
        assert_eq!(str_at(&init, &["metadata", "namespace"]), "kube-system");
        assert_eq!(init["spec"]["hostNetwork"].as_bool(), Some(true));
        let container = &init["spec"]["containers"][0];
        assert_eq!(container["image"].as_str(), Some(KUBE_VIP_IMAGE));
        assert_eq!(env(&init, "address"), Some("192.168.1.250"));
        assert_eq!(env(&init, "port"), Some("6443"));
        assert_eq!(env(&init, "vip_arp"), Some("true"));
        assert_eq!(env(&init, "cp_enable"), Some("true"));
        assert_eq!(env(&init, "vip_leaderelection"), Some("true"));
        assert_eq!(env(&init, "vip_interface"), Some(VIP_INTERFACE_PLACEHOLDER));
        let caps: Vec<_> = container["securityContext"]["capabilities"]["add"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        assert_eq!(caps, ["NET_ADMIN", "NET_RAW"]);
        let mounts: Vec<_> = container["volumeMounts"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|m| m["mountPath"].as_str().unwrap())
            .collect();
        assert_eq!(mounts, ["/etc/kubernetes/admin.conf", "/etc/hosts"]);
        let host_path = |pod: &Value, i: usize| -> String {
            str_at(&pod["spec"]["volumes"][i], &["hostPath", "path"]).to_owned()
        };
        // 1.29+: the init node starts kube-vip on super-admin.conf, then reverts.
        assert_eq!(host_path(&init, 0), "/etc/kubernetes/super-admin.conf");
        assert_eq!(host_path(&init, 1), paths::KUBE_VIP_HOSTS);
        let s = script(&render(&c, NodeRole::InitControlPlane));
        assert!(s.contains("KUBE_VIP_REVERT_SUPER_ADMIN='yes'\n"));
        assert!(s.contains(
            "s#path: \"/etc/kubernetes/super-admin.conf\"#path: \"/etc/kubernetes/admin.conf\"#"
        ));
        // The sed the script runs finds the placeholder.
        assert!(s.contains(&format!("s/{VIP_INTERFACE_PLACEHOLDER}/$iface/")));

        let join = kube_vip(&render(&c, NodeRole::JoinControlPlane));
        assert_eq!(host_path(&join, 0), "/etc/kubernetes/admin.conf");
        assert!(
            script(&render(&c, NodeRole::JoinControlPlane))
                .contains("KUBE_VIP_REVERT_SUPER_ADMIN='no'\n")
        );

        // 1.28 has no super-admin.conf.
        let old = cluster(KubeVersion::new(1, 28, 15), Cni::Calico);
        let init = kube_vip(&render(&old, NodeRole::InitControlPlane));
        assert_eq!(host_path(&init, 0), "/etc/kubernetes/admin.conf");

        let hosts = content(
            &yaml(&render(&c, NodeRole::InitControlPlane)),
            paths::KUBE_VIP_HOSTS,
        )
        .to_owned();
        assert!(hosts.starts_with("127.0.0.1 localhost kubernetes\n"));
    }

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

    #[test]
    fn hostile_values_stay_values() {
        let c = v131();
        let mut n = node(NodeRole::Worker);
        n.phone_home_url = "https://x/'$(reboot)'\"#:{}[],&*!|>%@`".into();
        n.provider_id = Some("meson://\"a\":b'$(reboot)'".into());
        let ud = user_data(&c, &n).unwrap();
        let doc = yaml(&ud);
        assert_eq!(str_at(&doc, &["phone_home", "url"]), n.phone_home_url);
        let cfg = yaml(content(&doc, paths::KUBEADM_CONFIG));
        let args = cfg["nodeRegistration"]["kubeletExtraArgs"]
            .as_sequence()
            .unwrap();
        assert_eq!(
            args.last().unwrap()["value"].as_str(),
            n.provider_id.as_deref()
        );
        // Top-level keys are exactly what the renderer writes.
        let keys: Vec<_> = doc
            .as_mapping()
            .unwrap()
            .keys()
            .map(|k| k.as_str().unwrap())
            .collect();
        assert_eq!(
            keys,
            [
                "hostname",
                "preserve_hostname",
                "manage_etc_hosts",
                "ssh_pwauth",
                "users",
                "write_files",
                "runcmd",
                "phone_home"
            ]
        );
    }

    fn temp_file(name: &str, content: &str) -> std::path::PathBuf {
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

    /// Validates user-data with cloud-init's own schema (`cloud-init schema
    /// --config-file`, Debian's `cloud-init` package). Without the binary
    /// the test is skipped with a note, unless `MESON_REQUIRE_CLOUD_INIT=1`
    /// (CI) makes that a failure.
    #[test]
    fn user_data_passes_cloud_inits_schema() {
        let required = std::env::var("MESON_REQUIRE_CLOUD_INIT").is_ok_and(|v| v == "1");
        if let Err(e) = Command::new("cloud-init").arg("--version").output() {
            assert!(
                !required,
                "MESON_REQUIRE_CLOUD_INIT=1 but the `cloud-init` binary cannot run ({e}): \
                 install it with `apt-get install -y cloud-init`"
            );
            eprintln!(
                "note: `cloud-init` not found ({e}); cloud-init schema validation skipped \
                 (apt-get install -y cloud-init, or set MESON_REQUIRE_CLOUD_INIT=1 to make this fail)"
            );
            return;
        }
        let cases = [
            (v131(), NodeRole::InitControlPlane),
            (v131(), NodeRole::JoinControlPlane),
            (v131(), NodeRole::Worker),
            (
                cluster(KubeVersion::new(1, 29, 2), Cni::Cilium),
                NodeRole::InitControlPlane,
            ),
            (
                cluster(KubeVersion::new(1, 30, 14), Cni::Flannel),
                NodeRole::Worker,
            ),
        ];
        for (c, role) in cases {
            let ud = render(&c, role);
            let path = temp_file("user-data.yaml", &ud);
            let out = Command::new("cloud-init")
                .args(["schema", "--config-file"])
                .arg(&path)
                .output()
                .expect("cloud-init runs");
            let _ = std::fs::remove_file(&path);
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success() && stdout.contains("Valid cloud-config"),
                "{role:?} on {}: cloud-init schema refused the user-data:\n{stdout}\n{stderr}",
                c.kubernetes_version
            );
        }
    }
}
