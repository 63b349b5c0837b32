//! KaaS: the validated cluster spec built from the inbound KaaS payload (docs/payloads.md).
//!
//! The payload is read with the same path-tracking parser as the VM request:
//! every bad field is named by its JSON path (`req.nodepool[0].min_nodes`),
//! all of them at once, and unknown fields come back as warnings.
//!
//! Decisions (each a constant or a comment below):
//! - Cluster and pool names are lowercase DNS labels (`[a-z0-9-]`, not
//!   starting or ending with `-`, a leading digit allowed: the seed's pool is
//!   `1poolname`), at most 32 and 24 characters, so that a node hostname
//!   `<cluster>-<pool>-<suffix>` fits in one 63-character DNS label. Lowercase
//!   because node names are Kubernetes object names.
//! - Per pool: 0 to 100 nodes (`max_nodes` at least 1); `min_nodes` and
//!   `max_nodes` default to `desired_nodes`, `desired_nodes` to `min_nodes`;
//!   `min <= desired <= max`. A cluster has at most 16 pools and, unless a pool
//!   autoscales, at least one worker node.
//! - Node size: 1–128 vCPUs, 1024 MiB–1 TiB RAM, 20–10240 GB disk, 0–8 GPUs;
//!   omitted values take the `neon` flavour's size (2 vCPUs, 2048 MiB) and a
//!   40 GB disk. Control-plane nodes need 2 vCPUs and 2048 MiB (kubeadm's
//!   preflight minimum) and default to `argon`'s size without its GPU
//!   (4 vCPUs, 4096 MiB, 40 GB), after the kOps Elemento provider's `argon`
//!   control plane.
//! - `control_plane.nodes` is 1 or 3 (etcd wants an odd quorum).
//! - `nodes_subnet`: see [`crate::network`]; with `dhcp` false meson hands out
//!   the addresses itself, so the range must hold every node at its maximum
//!   (control plane + Σ `max_nodes`), else `req.nodes_subnet` is refused.
//! - `pod_cidr` (default 10.244.0.0/16) needs a /24 per node at the maximum;
//!   `service_cidr` (default 10.96.0.0/12) is /12 to /28; neither may overlap
//!   the other or the nodes subnet.
//!
//! The spec's types and bounds are in `spec` (taints in `taint`, name rules
//! in `names`); the parser reads the payload one section per module:
//! `request` (the top level, `req.name`, `req.metadata`), `version`,
//! `control_plane`, `pools`, `networks` (nodes subnet, pod and service
//! CIDRs, CNI), with `node_size` for the `specs` objects they share.

mod changes;
mod control_plane;
mod names;
mod networks;
mod node_size;
mod pools;
mod request;
mod spec;
mod taint;
mod version;

#[cfg(test)]
mod fixtures;

pub use changes::{
    ClusterUpdate, DEFAULT_MAX_SURGE, DEFAULT_MAX_UNAVAILABLE, MAX_ROLLOUT, UpgradeRequest,
};
pub use names::{check_cluster_name, check_pool_name};
pub use pools::{PoolPatch, delete_nodes};
pub use spec::*;
pub use taint::{Taint, TaintEffect};
