//! The validated cluster spec: what a KaaS request becomes once parsed, the
//! bounds and defaults that parsing applies, and the node VM it asks for.

use super::Taint;
use crate::kubernetes::KubeVersion;
use crate::labels::Labels;
use crate::network::Subnet;
use crate::os::OsImage;
use crate::parse::Warning;
use crate::vm::{CpuSpec, PciRequest, VmSpec};
use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::ops::RangeInclusive;

pub const MAX_CLUSTER_NAME_LEN: usize = 32;
pub const MAX_POOL_NAME_LEN: usize = 24;
pub const MAX_POOLS: usize = 16;
pub const MAX_NODES_PER_POOL: i64 = 100;
pub const MAX_TAINTS: usize = 32;
/// Largest `metadata` object, serialized.
pub const MAX_METADATA_BYTES: usize = 16 * 1024;

/// Bounds of a worker node's size.
pub const NODE_CPU: RangeInclusive<i64> = 1..=128;
pub const NODE_RAM_MIB: RangeInclusive<i64> = 1024..=1_048_576;
pub const NODE_STORAGE_GB: RangeInclusive<i64> = 20..=10_240;
pub const NODE_GPU: RangeInclusive<i64> = 0..=8;
/// Bounds of a control-plane node's size (kubeadm refuses less).
pub const CONTROL_PLANE_CPU: RangeInclusive<i64> = 2..=128;
pub const CONTROL_PLANE_RAM_MIB: RangeInclusive<i64> = 2048..=1_048_576;

/// A worker node's size when the pool leaves it out: `neon`, 40 GB disk.
pub const DEFAULT_NODE_SPECS: NodeSpecs = NodeSpecs {
    cpu: 2,
    ram_mib: 2048,
    storage_gb: 40,
    gpu: 0,
};
/// A control-plane node's size when the request leaves it out: `argon`
/// without the GPU.
pub const DEFAULT_CONTROL_PLANE_SPECS: NodeSpecs = NodeSpecs {
    cpu: 4,
    ram_mib: 4096,
    storage_gb: 40,
    gpu: 0,
};
pub const DEFAULT_POD_CIDR: &str = "10.244.0.0/16";
pub const DEFAULT_SERVICE_CIDR: &str = "10.96.0.0/12";
/// Prefix lengths allowed for the pod network (each node takes a /24 of it).
pub const POD_CIDR_PREFIXES: RangeInclusive<u8> = 8..=22;
/// Prefix lengths allowed for the service network (kube-apiserver's limit is /12).
pub const SERVICE_CIDR_PREFIXES: RangeInclusive<u8> = 12..=28;
/// The distribution every node boots (kubeadm's packages support it).
pub const NODE_DISTRIBUTION: &str = "ubuntu";
/// The GPU nodes get, as PCI `vendor`/`model` (NVIDIA Quadro P4000, as in the flavours).
pub const NODE_GPU_MODEL: (&str, &str) = ("10de", "1bb1");

/// The size of one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSpecs {
    pub cpu: u32,
    pub ram_mib: u64,
    pub storage_gb: u32,
    pub gpu: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Billing {
    Hourly,
    Monthly,
}

impl Billing {
    pub fn as_str(self) -> &'static str {
        match self {
            Billing::Hourly => "HOURLY",
            Billing::Monthly => "MONTHLY",
        }
    }

    /// Any case.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_uppercase().as_str() {
            "HOURLY" => Some(Billing::Hourly),
            "MONTHLY" => Some(Billing::Monthly),
            _ => None,
        }
    }
}

/// When meson upgrades a cluster's Kubernetes on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum UpdatePolicy {
    /// Only when asked (`MANUAL` is an alias).
    NeverUpdate,
    /// Patch releases of the running minor.
    PatchUpdate,
    /// Patches and the next minor.
    AlwaysUpdate,
}

impl UpdatePolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            UpdatePolicy::NeverUpdate => "NEVER_UPDATE",
            UpdatePolicy::PatchUpdate => "PATCH_UPDATE",
            UpdatePolicy::AlwaysUpdate => "ALWAYS_UPDATE",
        }
    }

    /// Any case; `MANUAL` means `NEVER_UPDATE`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_uppercase().as_str() {
            "NEVER_UPDATE" | "MANUAL" => Some(UpdatePolicy::NeverUpdate),
            "PATCH_UPDATE" => Some(UpdatePolicy::PatchUpdate),
            "ALWAYS_UPDATE" => Some(UpdatePolicy::AlwaysUpdate),
            _ => None,
        }
    }
}

/// The pod network plugin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cni {
    Calico,
    Cilium,
    Flannel,
}

impl Cni {
    pub fn as_str(self) -> &'static str {
        match self {
            Cni::Calico => "calico",
            Cni::Cilium => "cilium",
            Cni::Flannel => "flannel",
        }
    }

    /// Any case.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "calico" => Some(Cni::Calico),
            "cilium" => Some(Cni::Cilium),
            "flannel" => Some(Cni::Flannel),
            _ => None,
        }
    }
}

/// A pool of identical worker nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolSpec {
    pub name: String,
    pub autoscale: bool,
    pub min_nodes: u32,
    pub max_nodes: u32,
    pub desired_nodes: u32,
    pub specs: NodeSpecs,
    pub billing: Billing,
    /// Kubernetes labels put on every node of the pool.
    #[serde(default)]
    pub labels: Labels,
    #[serde(default)]
    pub taints: Vec<Taint>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlPlaneSpec {
    /// 1 or 3.
    pub nodes: u32,
    pub specs: NodeSpecs,
}

/// A KaaS request after validation and normalization: units fixed (MiB,
/// GB), quirks resolved, defaults applied. Stored as the cluster's spec.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KaasSpec {
    pub name: String,
    /// The request's `metadata` object, kept as sent.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    pub kubernetes_version: KubeVersion,
    pub update_policy: UpdatePolicy,
    pub control_plane: ControlPlaneSpec,
    pub pools: Vec<PoolSpec>,
    /// The nodes' network (`nodes_subnet`), range clamped, gateway chosen.
    pub nodes_subnet: Subnet,
    pub pod_cidr: Ipv4Net,
    pub service_cidr: Ipv4Net,
    pub cni: Cni,
    /// The image every node boots.
    pub node_os: OsImage,
    /// Requested provider, if any; otherwise meson picks the cheapest placement.
    pub provider: Option<String>,
    #[serde(default)]
    pub continent: Option<String>,
    #[serde(default)]
    pub region: Option<String>,
}

impl KaasSpec {
    /// Nodes of the cluster at every pool's `max_nodes`, control plane included.
    pub fn max_nodes(&self) -> u32 {
        self.control_plane.nodes + self.pools.iter().map(|p| p.max_nodes).sum::<u32>()
    }

    /// Nodes of the cluster at every pool's `desired_nodes`, control plane included.
    pub fn desired_nodes(&self) -> u32 {
        self.control_plane.nodes + self.pools.iter().map(|p| p.desired_nodes).sum::<u32>()
    }

    pub fn pool(&self, name: &str) -> Option<&PoolSpec> {
        self.pools.iter().find(|p| p.name == name)
    }

    /// The VM one node of this size is: dedicated vCPUs, the node image
    /// booted from a `storage_gb` disk, GPUs as PCI devices, and the
    /// cluster's placement constraints.
    pub fn node_vm_spec(&self, name: &str, specs: &NodeSpecs) -> VmSpec {
        VmSpec {
            name: name.to_owned(),
            cpu: CpuSpec {
                cores: specs.cpu,
                threads_per_core: 1,
                smt: false,
                min_frequency_ghz: None,
                archs: vec!["X86_64".to_owned()],
                flags: Vec::new(),
            },
            memory_mib: specs.ram_mib,
            require_ecc: false,
            pci: if specs.gpu == 0 {
                Vec::new()
            } else {
                vec![PciRequest {
                    vendor: NODE_GPU_MODEL.0.to_owned(),
                    model: NODE_GPU_MODEL.1.to_owned(),
                    quantity: specs.gpu,
                }]
            },
            os: self.node_os.clone(),
            boot_volume_gb: specs.storage_gb,
            volumes: Vec::new(),
            ssh_keys: Vec::new(),
            provider: self.provider.clone(),
            continent: self.continent.clone(),
            region: self.region.clone(),
            image: None,
            backup: None,
        }
    }
}

/// A parsed create-cluster request.
#[derive(Clone, Debug, PartialEq)]
pub struct KaasCreate {
    pub spec: KaasSpec,
    /// The cluster's own labels (meson metadata, not Kubernetes node labels).
    pub labels: Labels,
    pub warnings: Vec<Warning>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kaas::fixtures::*;
    use serde_json::json;

    #[test]
    fn the_spec_round_trips_through_json() {
        let s = KaasCreate::parse(&seed(), today()).unwrap().spec;
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["kubernetes_version"], "1.29.2");
        assert_eq!(v["update_policy"], "NEVER_UPDATE");
        assert_eq!(v["pools"][0]["billing"], "HOURLY");
        assert_eq!(v["nodes_subnet"]["range"]["start"], "192.168.1.1");
        assert_eq!(v["cni"], "calico");
        let back: KaasSpec = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn node_vm_specs_carry_size_gpu_and_constraints() {
        let s = KaasCreate::parse(
            &with(|v| v["req"]["nodepool"][0]["specs"]["gpu"] = json!(2)),
            today(),
        )
        .unwrap()
        .spec;
        let vm = s.node_vm_spec("test8-1poolname-0", &s.pools[0].specs);
        assert_eq!(vm.cpu.vcpus(), 2);
        assert_eq!(vm.memory_mib, 4096);
        assert_eq!(vm.boot_volume_gb, 40);
        assert_eq!(vm.pci[0].quantity, 2);
        assert_eq!(vm.provider.as_deref(), Some("arubacloud"));
        assert_eq!(vm.os.flavour, "ubuntu");
    }
}
