//! `mesonctl kops translate`: a `kops create cluster` command line turned
//! into meson's KaaS request (`meson_types::kaas::KaasCreateRequest`,
//! docs/payloads.md).
//!
//! Pure: no I/O. [`translate`] takes the words of the command line and the
//! places meson can put a cluster ([`Catalog`]), and answers the payload with
//! one [`Report`] per flag it could not honour (and why), or an error when
//! it cannot make a payload at all (no cluster name, a number that is not
//! one, a command other than `kops create cluster`).
//!
//! How the flags map (docs/kops.md):
//! - `--name` (or the positional cluster name): `req.name`, made a meson
//!   cluster name (a DNS label of at most 32 characters): the gossip suffix
//!   `.k8s.local` goes, other dots become `-`.
//! - `--node-size`, `--control-plane-size` (`--master-size`): a meson flavour
//!   named directly (`neon`, ...), or a common cloud size (AWS `t2.micro`,
//!   GCE `e2-standard-4`, Hetzner `cpx31`, DigitalOcean `s-2vcpu-4gb`, ...)
//!   mapped by vCPUs and memory to the smallest flavour without GPUs holding
//!   it; larger sizes are asked for exactly.
//!   Nodes need 1024 MiB and control-plane nodes 2 vCPUs / 2048 MiB, so a
//!   smaller flavour is raised (and reported).
//! - `--node-count`, `--control-plane-count` (`--master-count`): the pool's
//!   nodes (kOps' default: one per zone) and the control plane's (1 or 3).
//! - `--node-volume-size`, `--control-plane-volume-size`
//!   (`--master-volume-size`): `storage`, within meson's 20..=10240 GB.
//! - `--kubernetes-version`: `req.kubernetes_version`, as given.
//! - `--networking`: `req.cni` (calico, cilium, flannel; kOps' default is
//!   cilium); others are reported.
//! - `--network-cidr`: `req.nodes_subnet.subnet_netmask` (kOps' default
//!   172.20.0.0/16), DHCP on, the DHCP range every usable address but the
//!   gateway (the first) and the API endpoint's (the last).
//! - `--zones` (and `--control-plane-zones`): `region` or `continent` when a
//!   zone names one of meson's (the Elemento provider uses `--zones=europe`),
//!   else reported and meson picks the cheapest region.
//! - `--cloud-labels`: the cluster's labels, those that are valid ones.
//! - `--cloud=elemento` (or `meson`) is meson itself; any other cloud, the
//!   state store and the AWS/GCE/OpenStack/DNS/bastion/image/... flags are
//!   reported: meson has no use for them.
//!
//! One job a file: `lexer` splits a pasted line into words, `flags` is
//! kOps' flag table, `args` parses the words against it, and the
//! translation (`translate`) reads each field from its own module: `name`,
//! `counts`, `node_size` (with `cloud_sizes`), `cidr`, `cni`, `placement`
//! and `labels`.

mod args;
mod cidr;
mod cloud_sizes;
mod cni;
mod counts;
mod flags;
mod labels;
mod lexer;
mod name;
mod node_size;
mod placement;
mod translate;

#[cfg(test)]
mod tests;

use std::fmt;

pub use cidr::KOPS_DEFAULT_NETWORK;
pub use cloud_sizes::instance_size;
pub use cni::KOPS_DEFAULT_CNI;
pub use lexer::shell_words;
pub use name::cluster_name;
pub use node_size::smallest_flavor;
pub use placement::{Catalog, Region};
pub use translate::{POOL_NAME, translate};

/// A flag that could not be honoured (or only in part), and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// As written on the command line, `--master-size`.
    pub flag: String,
    pub message: String,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.flag, self.message)
    }
}

/// The KaaS request and what could not be carried into it.
#[derive(Clone, Debug, PartialEq)]
pub struct Translation {
    pub request: meson_types::kaas::KaasCreateRequest,
    /// The request as pretty-printed JSON.
    pub pretty: String,
    pub reports: Vec<Report>,
}

impl Translation {
    /// Whether `flag` (as written) was reported.
    pub fn reported(&self, flag: &str) -> bool {
        self.reports.iter().any(|r| r.flag == flag)
    }
}
