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
//!
//! One module per job: `kubeadm` (its configuration files), `kube_vip`
//! (the static pod), `containerd` (its configuration), `kernel` (modules
//! and sysctls), `cni` (the pinned releases), `check` (the inputs),
//! `script` (the bootstrap script: `meson-bootstrap.sh`, plain bash, given
//! the node's values) and `user_data`, which carries them all.

mod check;
mod cni;
mod containerd;
mod kernel;
mod kube_vip;
mod kubeadm;
mod script;
mod user_data;

#[cfg(test)]
mod fixtures;

pub use check::kubelet_may_set_label;
pub use cni::{CniRelease, cni_release};
pub use containerd::CRI_SOCKET;
pub use kube_vip::{KUBE_VIP_IMAGE, kube_vip_manifest};
pub use kubeadm::{CONTROL_PLANE_TAINT, kubeadm_api_version, kubeadm_config};
pub use script::package_version;
pub use user_data::user_data;

use crate::pki::ClusterSecrets;
use ipnet::Ipv4Net;
use meson_core::id::ClusterId;
use meson_core::kaas::{Cni, Taint};
use meson_core::kubernetes::KubeVersion;
use meson_core::labels::Labels;
use meson_core::ssh::SshKey;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

/// The oldest Kubernetes minor the bootstrap supports (the catalogue's oldest).
pub const MIN_MINOR: u32 = 28;
/// How long the bootstrap token made at `kubeadm init` stays valid when
/// the caller has no reason to choose otherwise.
pub const DEFAULT_TOKEN_TTL: Duration = Duration::from_secs(24 * 3600);

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

    pub(super) fn script_name(self) -> &'static str {
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
