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

use crate::error::FieldErrors;
use crate::kubernetes::{self, KubeVersion};
use crate::labels::{self, Labels};
use crate::network::{self, Subnet, SubnetField, SubnetInput};
use crate::os::OsImage;
use crate::parse::{Obj, Parser, Warning, join};
use crate::target::Target;
use crate::vm::{CpuSpec, PciRequest, VmSpec, valid_provider};
use chrono::NaiveDate;
use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }

    /// Any case.
    pub fn parse(s: &str) -> Option<Self> {
        [
            TaintEffect::NoSchedule,
            TaintEffect::PreferNoSchedule,
            TaintEffect::NoExecute,
        ]
        .into_iter()
        .find(|e| e.as_str().eq_ignore_ascii_case(s.trim()))
    }
}

/// A node taint, `key=value:Effect` (the value may be empty).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: TaintEffect,
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect.as_str())
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect.as_str())
        }
    }
}

impl Taint {
    /// Parses `key=value:Effect` or `key:Effect`.
    pub fn parse(s: &str) -> Result<Taint, String> {
        const SYNTAX: &str = "must be key=value:Effect or key:Effect, Effect one of NoSchedule, PreferNoSchedule, NoExecute";
        let Some((kv, effect)) = s.trim().rsplit_once(':') else {
            return Err(SYNTAX.to_owned());
        };
        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
        Taint::new(key, value, effect)
    }

    /// Checks the parts of a taint.
    pub fn new(key: &str, value: &str, effect: &str) -> Result<Taint, String> {
        let Some(effect) = TaintEffect::parse(effect) else {
            return Err(format!(
                "unknown taint effect '{effect}'; one of NoSchedule, PreferNoSchedule, NoExecute"
            ));
        };
        if !labels::valid_key(key) {
            return Err(format!(
                "invalid taint key '{key}': [prefix/]name, name up to 63 alphanumerics, '-', '_' or '.'"
            ));
        }
        if !labels::valid_value(value) {
            return Err(format!(
                "invalid taint value '{value}': up to 63 alphanumerics, '-', '_' or '.'"
            ));
        }
        Ok(Taint {
            key: key.to_owned(),
            value: value.to_owned(),
            effect,
        })
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

/// Checks a lowercase DNS label of at most `max` characters, recording the problem at `path`.
fn check_dns_name(errors: &mut FieldErrors, path: &str, name: &str, max: usize) -> bool {
    let problem = if name.is_empty() {
        Some("must not be empty".to_owned())
    } else if name.len() > max {
        Some(format!("must be at most {max} characters"))
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        Some(
            "may contain only lowercase letters, digits and '-' (it names Kubernetes nodes and AtomOS VMs)"
                .to_owned(),
        )
    } else if name.starts_with('-') || name.ends_with('-') {
        Some("must not start or end with '-'".to_owned())
    } else {
        None
    };
    match problem {
        Some(m) => {
            errors.add(path, m);
            false
        }
        None => true,
    }
}

/// Validates a cluster name (PATCH uses it too).
pub fn check_cluster_name(errors: &mut FieldErrors, path: &str, name: &str) -> bool {
    check_dns_name(errors, path, name, MAX_CLUSTER_NAME_LEN)
}

/// Validates a pool name (adding a pool uses it too).
pub fn check_pool_name(errors: &mut FieldErrors, path: &str, name: &str) -> bool {
    check_dns_name(errors, path, name, MAX_POOL_NAME_LEN)
}

/// Label prefixes Kubernetes keeps for itself on nodes.
fn reserved_node_label(key: &str) -> bool {
    key.split_once('/').is_some_and(|(prefix, _)| {
        ["kubernetes.io", "k8s.io"]
            .iter()
            .any(|r| prefix == *r || prefix.ends_with(&format!(".{r}")))
    })
}

impl KaasCreate {
    /// Parses and validates the KaaS payload (docs/payloads.md), naming every
    /// bad field. `today` picks the default Kubernetes version and which
    /// are past end of life ([`kubernetes::today`] in production).
    pub fn parse(body: &Value, today: NaiveDate) -> crate::Result<KaasCreate> {
        Self::parse_inner(body, None, today)
    }

    /// [`KaasCreate::parse`], plus the provider/continent/region constraints
    /// checked against `targets`, named together with every other bad field.
    pub fn parse_placed(
        body: &Value,
        targets: &[Target],
        today: NaiveDate,
    ) -> crate::Result<KaasCreate> {
        Self::parse_inner(body, Some(targets), today)
    }

    fn parse_inner(
        body: &Value,
        targets: Option<&[Target]>,
        today: NaiveDate,
    ) -> crate::Result<KaasCreate> {
        let mut p = Parser::default();
        let Some(mut root) = p.root(body) else {
            return Err(p
                .errors
                .into_error()
                .unwrap_or_else(|| crate::Error::invalid("(body)", "must be an object")));
        };

        let mut place = |p: &mut Parser, key: &'static str, what: &str| {
            p.string(&mut root, key, false).and_then(|(path, s)| {
                let s = s.trim().to_ascii_lowercase();
                if valid_provider(&s) {
                    Some(s)
                } else {
                    p.errors.add(
                        path,
                        format!("must be a {what} name: lowercase letters, digits and '-'"),
                    );
                    None
                }
            })
        };
        let provider = place(&mut p, "provider", "provider");
        let continent = place(&mut p, "continent", "continent");
        let region = place(&mut p, "region", "region");
        if let Some(targets) = targets {
            crate::vm::constraint_errors(targets, [&provider, &continent, &region], &mut p.errors);
        }
        let root_labels = match root.get("labels") {
            (path, Some(v)) => Some(labels::parse(&path, v, &mut p.errors)),
            (_, None) => None,
        };

        let mut spec = None;
        let mut req_labels = None;
        if let Some(mut req) = p.object(&mut root, "req", true) {
            req_labels = match req.get("labels") {
                (path, Some(_)) if root_labels.is_some() => {
                    p.errors.add(
                        path,
                        "give the cluster's labels once, here or at the top level",
                    );
                    Some(None)
                }
                (path, Some(v)) => Some(labels::parse(&path, v, &mut p.errors)),
                (_, None) => None,
            };
            spec = parse_req(&mut p, &mut req, [provider, continent, region], today);
            p.done(req);
        }
        p.done(root);

        let labels = match (root_labels, req_labels) {
            (Some(l), _) | (None, Some(l)) => l,
            (None, None) => Some(Labels::new()),
        };
        let Parser { errors, warnings } = p;
        match (spec, labels) {
            (Some(spec), Some(labels)) if errors.is_empty() => Ok(KaasCreate {
                spec,
                labels,
                warnings,
            }),
            _ => Err(errors
                .into_error()
                .unwrap_or_else(|| crate::Error::invalid("(body)", "invalid request"))),
        }
    }
}

impl PoolSpec {
    /// Parses one pool given on its own (adding a pool to a cluster): the
    /// same rules as an item of `req.nodepool`, fields named from the root.
    pub fn parse(body: &Value) -> crate::Result<(PoolSpec, Vec<Warning>)> {
        let mut p = Parser::default();
        let pool = parse_pool(&mut p, String::new(), body);
        let Parser { errors, warnings } = p;
        match pool {
            Some(pool) if errors.is_empty() => Ok((pool, warnings)),
            _ => Err(errors
                .into_error()
                .unwrap_or_else(|| crate::Error::invalid("(body)", "invalid pool"))),
        }
    }
}

/// Everything inside `req`.
fn parse_req(
    p: &mut Parser,
    req: &mut Obj<'_>,
    [provider, continent, region]: [Option<String>; 3],
    today: NaiveDate,
) -> Option<KaasSpec> {
    let name = p
        .string(req, "name", true)
        .and_then(|(path, s)| check_cluster_name(&mut p.errors, &path, s).then(|| s.to_owned()));

    let metadata = match req.get("metadata") {
        (_, None) => Some(Map::new()),
        (path, Some(Value::Object(m))) => {
            if serde_json::to_string(m).map_or(usize::MAX, |s| s.len()) > MAX_METADATA_BYTES {
                p.errors.add(
                    path,
                    format!("must be at most {MAX_METADATA_BYTES} bytes of JSON"),
                );
                None
            } else {
                Some(m.clone())
            }
        }
        (path, Some(_)) => {
            p.errors.add(path, "must be an object");
            None
        }
    };

    let version = match p.string(req, "kubernetes_version", false) {
        None if p.errors.has(&join(req.path(), "kubernetes_version")) => None,
        None => Some(kubernetes::default_release(today).version),
        Some((path, s)) => match kubernetes::resolve(s) {
            Ok(r) => {
                for message in r.warnings(s, today) {
                    p.warnings.push(Warning {
                        field: path.clone(),
                        message,
                    });
                }
                Some(r.release.version)
            }
            Err(m) => {
                p.errors.add(path, m);
                None
            }
        },
    };

    let update_policy = enum_field(
        p,
        req,
        "update_policy",
        UpdatePolicy::NeverUpdate,
        UpdatePolicy::parse,
        "NEVER_UPDATE (or MANUAL), PATCH_UPDATE or ALWAYS_UPDATE",
    );
    let cni = enum_field(
        p,
        req,
        "cni",
        Cni::Calico,
        Cni::parse,
        "calico, cilium or flannel",
    );

    let control_plane = match p.object(req, "control_plane", false) {
        Some(mut cp) => {
            let nodes = match p.int(&mut cp, "nodes", 1..=3, false) {
                Some(2) => {
                    p.errors.add(
                        join(cp.path(), "nodes"),
                        "must be 1 or 3 (etcd needs an odd number of members)",
                    );
                    None
                }
                Some(n) => Some(n as u32),
                None if p.errors.has(&join(cp.path(), "nodes")) => None,
                None => Some(1),
            };
            let specs = parse_specs(
                p,
                &mut cp,
                CONTROL_PLANE_CPU,
                CONTROL_PLANE_RAM_MIB,
                DEFAULT_CONTROL_PLANE_SPECS,
            );
            p.done(cp);
            match (nodes, specs) {
                (Some(nodes), Some(specs)) => Some(ControlPlaneSpec { nodes, specs }),
                _ => None,
            }
        }
        None if p.errors.has(&join(req.path(), "control_plane")) => None,
        None => Some(ControlPlaneSpec {
            nodes: 1,
            specs: DEFAULT_CONTROL_PLANE_SPECS,
        }),
    };

    let pools = parse_pools(p, req);

    let subnet_path = join(req.path(), "nodes_subnet");
    let (nodes_cidr, subnet) = match p.object(req, "nodes_subnet", true) {
        Some(mut s) => {
            let out = parse_nodes_subnet(p, &mut s);
            p.done(s);
            out
        }
        None => (None, None),
    };

    let nodes_max = match (&control_plane, &pools) {
        (Some(cp), Some(pools)) => Some(cp.nodes + pools.iter().map(|p| p.max_nodes).sum::<u32>()),
        _ => None,
    };
    if let (Some(subnet), Some(need)) = (&subnet, nodes_max) {
        check_subnet_capacity(p, &subnet_path, subnet, need);
    }

    let pod_cidr = cidr_field(p, req, "pod_cidr", DEFAULT_POD_CIDR, POD_CIDR_PREFIXES);
    let service_cidr = cidr_field(
        p,
        req,
        "service_cidr",
        DEFAULT_SERVICE_CIDR,
        SERVICE_CIDR_PREFIXES,
    );
    let mut pod_ok = pod_cidr.is_some();
    if let (Some(pod), Some(need)) = (&pod_cidr, nodes_max) {
        // One /24 of pod addresses per node (kube-controller-manager's default).
        let blocks = 1u64 << (24 - pod.prefix_len());
        if blocks < u64::from(need) {
            p.errors.add(
                join(req.path(), "pod_cidr"),
                format!(
                    "{pod} holds {blocks} node blocks of /24, but the cluster may have {need} nodes"
                ),
            );
            pod_ok = false;
        }
    }
    let overlap = |p: &mut Parser, key: &str, net: &Ipv4Net, other: &Ipv4Net, what: &str| {
        if network::overlaps(net, other) {
            p.errors.add(
                join(req.path(), key),
                format!("{net} overlaps the {what} {other}"),
            );
            true
        } else {
            false
        }
    };
    let mut service_ok = service_cidr.is_some();
    if let Some(nodes) = &nodes_cidr {
        if let Some(pod) = &pod_cidr {
            pod_ok &= !overlap(p, "pod_cidr", pod, nodes, "nodes subnet");
        }
        if let Some(svc) = &service_cidr {
            service_ok &= !overlap(p, "service_cidr", svc, nodes, "nodes subnet");
        }
    }
    if let (Some(pod), Some(svc)) = (&pod_cidr, &service_cidr) {
        service_ok &= !overlap(p, "service_cidr", svc, pod, "pod network");
    }

    let node_os = OsImage::lookup(NODE_DISTRIBUTION);
    if node_os.is_none() {
        p.errors
            .add(req.path(), format!("no node image for {NODE_DISTRIBUTION}"));
    }

    Some(KaasSpec {
        name: name?,
        metadata: metadata?,
        kubernetes_version: version?,
        update_policy: update_policy?,
        control_plane: control_plane?,
        pools: pools?,
        nodes_subnet: subnet?,
        pod_cidr: pod_cidr.filter(|_| pod_ok)?,
        service_cidr: service_cidr.filter(|_| service_ok)?,
        cni: cni?,
        node_os: node_os?,
        provider,
        continent,
        region,
    })
}

/// An optional string field naming one of an enum's values (any case).
fn enum_field<T>(
    p: &mut Parser,
    o: &mut Obj<'_>,
    key: &'static str,
    default: T,
    parse: fn(&str) -> Option<T>,
    choices: &str,
) -> Option<T> {
    match p.string(o, key, false) {
        Some((path, s)) => parse(s).or_else(|| {
            p.errors
                .add(path, format!("must be one of {choices}, got '{s}'"));
            None
        }),
        None if p.errors.has(&join(o.path(), key)) => None,
        None => Some(default),
    }
}

/// An optional CIDR field with its default.
fn cidr_field(
    p: &mut Parser,
    o: &mut Obj<'_>,
    key: &'static str,
    default: &str,
    prefixes: RangeInclusive<u8>,
) -> Option<Ipv4Net> {
    match p.string(o, key, false) {
        Some((path, s)) => match network::parse_cidr(s, prefixes) {
            Ok(net) => Some(net),
            Err(m) => {
                p.errors.add(path, m);
                None
            }
        },
        None if p.errors.has(&join(o.path(), key)) => None,
        None => default.parse().ok(),
    }
}

/// `specs: {cpu, ram, storage, gpu}`; `ram` in MiB, `storage` in GB.
fn parse_specs(
    p: &mut Parser,
    parent: &mut Obj<'_>,
    cpu: RangeInclusive<i64>,
    ram: RangeInclusive<i64>,
    default: NodeSpecs,
) -> Option<NodeSpecs> {
    let Some(mut s) = p.object(parent, "specs", false) else {
        return (!p.errors.has(&join(parent.path(), "specs"))).then_some(default);
    };
    let mut field = |p: &mut Parser, key: &'static str, range: RangeInclusive<i64>, d: u64| match p
        .int(&mut s, key, range, false)
    {
        Some(n) => Some(n as u64),
        None if p.errors.has(&join(s.path(), key)) => None,
        None => Some(d),
    };
    let cpu = field(p, "cpu", cpu, default.cpu.into());
    let ram = field(p, "ram", ram, default.ram_mib);
    let storage = field(p, "storage", NODE_STORAGE_GB, default.storage_gb.into());
    let gpu = field(p, "gpu", NODE_GPU, default.gpu.into());
    p.done(s);
    Some(NodeSpecs {
        cpu: cpu? as u32,
        ram_mib: ram?,
        storage_gb: storage? as u32,
        gpu: gpu? as u32,
    })
}

/// `req.nodepool`: at least one pool, unique names, at least one worker.
fn parse_pools(p: &mut Parser, req: &mut Obj<'_>) -> Option<Vec<PoolSpec>> {
    let path = join(req.path(), "nodepool");
    let Some(items) = p.array(req, "nodepool", MAX_POOLS) else {
        if !p.errors.has(&path) {
            p.missing(path);
        }
        return None;
    };
    if items.is_empty() {
        p.errors.add(&path, "must have at least one pool");
        return None;
    }
    let mut pools = Vec::new();
    let mut ok = true;
    for (item_path, item) in items {
        match parse_pool(p, item_path.clone(), item) {
            Some(pool) => {
                if pools.iter().any(|q: &PoolSpec| q.name == pool.name) {
                    p.errors.add(
                        join(&item_path, "pool_name"),
                        format!("duplicate pool name '{}'", pool.name),
                    );
                    ok = false;
                }
                pools.push(pool);
            }
            None => ok = false,
        }
    }
    if ok
        && pools
            .iter()
            .all(|pool| pool.desired_nodes == 0 && !pool.autoscale)
    {
        p.errors.add(
            &path,
            "the cluster needs a worker node: give a pool desired_nodes of at least 1, or autoscale",
        );
        ok = false;
    }
    ok.then_some(pools)
}

/// One pool, at `path` (`req.nodepool[0]`, or the root for a pool on its own).
fn parse_pool(p: &mut Parser, path: String, v: &Value) -> Option<PoolSpec> {
    let mut o = p.item_object(path, v)?;
    let name = p
        .string(&mut o, "pool_name", true)
        .and_then(|(path, s)| check_pool_name(&mut p.errors, &path, s).then(|| s.to_owned()));
    let autoscale = p.bool(&mut o, "autoscale");
    let autoscale_bad = p.errors.has(&join(o.path(), "autoscale"));

    let nodes = 0..=MAX_NODES_PER_POOL;
    let min = p.int(&mut o, "min_nodes", nodes.clone(), false);
    let max = p.int(&mut o, "max_nodes", 1..=MAX_NODES_PER_POOL, false);
    let desired = p.int(&mut o, "desired_nodes", nodes, false);
    let bad = |p: &Parser, key| p.errors.has(&join(o.path(), key));
    let counts_bad = bad(p, "min_nodes") || bad(p, "max_nodes") || bad(p, "desired_nodes");
    let counts = if counts_bad {
        None
    } else {
        match (min, max, desired.or(min)) {
            (_, _, None) => {
                p.errors.add(
                    join(o.path(), "desired_nodes"),
                    "is required (or give min_nodes and max_nodes)",
                );
                None
            }
            (min, max, Some(desired)) => {
                let min = min.unwrap_or(desired);
                let max = max.unwrap_or(desired.max(min).max(1));
                if min > max {
                    p.errors.add(
                        join(o.path(), "min_nodes"),
                        format!("must not exceed max_nodes ({max}), got {min}"),
                    );
                    None
                } else if !(min..=max).contains(&desired) {
                    p.errors.add(
                        join(o.path(), "desired_nodes"),
                        format!(
                            "must be between min_nodes ({min}) and max_nodes ({max}), got {desired}"
                        ),
                    );
                    None
                } else {
                    Some((min as u32, max as u32, desired as u32))
                }
            }
        }
    };

    let specs = parse_specs(p, &mut o, NODE_CPU, NODE_RAM_MIB, DEFAULT_NODE_SPECS);
    let billing = enum_field(
        p,
        &mut o,
        "billing",
        Billing::Hourly,
        Billing::parse,
        "HOURLY or MONTHLY",
    );

    let labels = match o.get("labels") {
        (path, Some(v)) => labels::parse(&path, v, &mut p.errors).and_then(|l| {
            let reserved: Vec<&String> = l.keys().filter(|k| reserved_node_label(k)).collect();
            for k in &reserved {
                p.errors.add(
                    format!("{path}.{k}"),
                    "the kubernetes.io and k8s.io prefixes are reserved for Kubernetes",
                );
            }
            reserved.is_empty().then_some(l)
        }),
        (_, None) => Some(Labels::new()),
    };
    let taints = parse_taints(p, &mut o);
    p.done(o);

    let (min_nodes, max_nodes, desired_nodes) = counts?;
    if autoscale_bad {
        return None;
    }
    Some(PoolSpec {
        name: name?,
        autoscale: autoscale.unwrap_or(false),
        min_nodes,
        max_nodes,
        desired_nodes,
        specs: specs?,
        billing: billing?,
        labels: labels?,
        taints: taints?,
    })
}

/// `taints`: `["key=value:Effect", ...]` or `[{key, value?, effect}, ...]`.
fn parse_taints(p: &mut Parser, o: &mut Obj<'_>) -> Option<Vec<Taint>> {
    let Some(items) = p.array(o, "taints", MAX_TAINTS) else {
        return (!p.errors.has(&join(o.path(), "taints"))).then(Vec::new);
    };
    let mut out: Vec<Taint> = Vec::new();
    let mut ok = true;
    for (path, item) in items {
        let taint = match item {
            Value::String(s) => Taint::parse(s),
            Value::Object(_) => {
                let mut t = p.item_object(path.clone(), item)?;
                let key = p.string(&mut t, "key", true).map(|(_, s)| s.to_owned());
                let value = p.string(&mut t, "value", false).map(|(_, s)| s.to_owned());
                let effect = p.string(&mut t, "effect", true).map(|(_, s)| s.to_owned());
                let parts_bad = ["key", "value", "effect"]
                    .iter()
                    .any(|k| p.errors.has(&join(t.path(), k)));
                p.done(t);
                match (key, effect) {
                    (Some(k), Some(e)) if !parts_bad => {
                        Taint::new(&k, value.as_deref().unwrap_or(""), &e)
                    }
                    _ => {
                        ok = false;
                        continue;
                    }
                }
            }
            _ => Err("must be a string key=value:Effect or an object {key, value, effect}".into()),
        };
        match taint {
            Ok(t) if out.iter().any(|u| u.key == t.key && u.effect == t.effect) => {
                p.errors.add(
                    path,
                    format!("taint {}:{} is given twice", t.key, t.effect.as_str()),
                );
                ok = false;
            }
            Ok(t) => out.push(t),
            Err(m) => {
                p.errors.add(path, m);
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

/// `nodes_subnet: {dhcp, subnet_netmask, start_address, last_address, gateway?}`:
/// its CIDR when that alone is good (to check overlaps), and the subnet.
fn parse_nodes_subnet(p: &mut Parser, s: &mut Obj<'_>) -> (Option<Ipv4Net>, Option<Subnet>) {
    let dhcp = p.bool(s, "dhcp");
    let dhcp_bad = p.errors.has(&join(s.path(), "dhcp"));
    let cidr =
        p.string(s, "subnet_netmask", true).and_then(|(path, v)| {
            match network::parse_cidr(v, network::SUBNET_PREFIXES) {
                Ok(net) => Some(net),
                Err(m) => {
                    p.errors.add(path, m);
                    None
                }
            }
        });
    let start = network::address(p, s, "start_address");
    let last = network::address(p, s, "last_address");
    let gateway = network::address(p, s, "gateway");
    let inputs_bad = ["start_address", "last_address", "gateway"]
        .iter()
        .any(|k| p.errors.has(&join(s.path(), k)));
    if let Some(net) = &cidr
        && !network::is_private(net)
    {
        p.warnings.push(Warning {
            field: join(s.path(), "subnet_netmask"),
            message: format!(
                "{net} is not private address space (10/8, 172.16/12, 192.168/16, 100.64/10)"
            ),
        });
    }
    let Some(cidr) = cidr else {
        return (None, None);
    };
    let input = SubnetInput {
        cidr,
        dhcp: dhcp.unwrap_or(true),
        gateway,
        start,
        last,
    };
    let base = s.path().to_owned();
    let subnet = network::check_subnet(p, input, inputs_bad, |f| match f {
        SubnetField::Gateway => join(&base, "gateway"),
        SubnetField::Start => join(&base, "start_address"),
        SubnetField::Last => join(&base, "last_address"),
        SubnetField::Subnet => base.clone(),
    });
    (Some(cidr), subnet.filter(|_| !dhcp_bad))
}

/// With meson's IPAM (`dhcp` false) the range must hold every node at its
/// maximum; with DHCP a short range only warns (the DHCP server is not ours).
fn check_subnet_capacity(p: &mut Parser, path: &str, subnet: &Subnet, need: u32) {
    let have = subnet.capacity();
    let range = format!("{}-{}", subnet.range.start, subnet.range.last);
    let need = u64::from(need);
    if have < need {
        let message = format!(
            "the range {range} has {have} addresses to hand out (the gateway {} excluded), but the cluster may have {need} nodes (control plane plus every pool's max_nodes)",
            subnet.gateway
        );
        if subnet.dhcp {
            p.warnings.push(Warning {
                field: path.to_owned(),
                message: format!("{message}; make sure the DHCP server can lease them"),
            });
        } else {
            p.errors.add(path, message);
        }
    } else if have == need && !subnet.dhcp {
        p.warnings.push(Warning {
            field: path.to_owned(),
            message: format!(
                "the range {range} has no spare address for the extra node a rolling upgrade or a node replacement adds"
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use serde_json::json;
    use std::net::Ipv4Addr;

    /// The day these tests run on: dates decide the default version and
    /// which are past end of life.
    fn today() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 11, 25).unwrap()
    }

    /// The canonical KaaS payload (docs/payloads.md), exactly as clients send it.
    pub fn seed() -> Value {
        serde_json::from_str(
            r#"{"req":{"name":"test8","metadata":{},
  "nodepool":[{"autoscale":false,"desired_nodes":3,"max_nodes":3,"min_nodes":3,
    "specs":{"cpu":2,"ram":4096,"storage":40,"gpu":0},
    "billing":"HOURLY","pool_name":"1poolname"}],
  "nodes_subnet":{"dhcp":"True","subnet_netmask":"192.168.1.0/24",
    "start_address":"192.168.1.0","last_address":"192.168.1.24"},
  "update_policy":"NEVER_UPDATE","kubernetes_version":"1.29.2"},
 "provider":"arubacloud"}"#,
        )
        .unwrap()
    }

    fn fields(e: Error) -> Vec<String> {
        match e {
            Error::InvalidInput { fields } => {
                let mut v: Vec<String> = fields.into_iter().map(|f| f.name).collect();
                v.sort();
                v
            }
            other => panic!("expected invalid_input, got {other:?}"),
        }
    }

    fn refused(v: &Value) -> Vec<String> {
        fields(KaasCreate::parse(v, today()).unwrap_err())
    }

    fn with(f: impl FnOnce(&mut Value)) -> Value {
        let mut v = seed();
        f(&mut v);
        v
    }

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn the_seed_payload_is_accepted_as_written() {
        let k = KaasCreate::parse(&seed(), today()).unwrap();
        let s = &k.spec;
        assert_eq!(s.name, "test8");
        assert_eq!(s.kubernetes_version, KubeVersion::new(1, 29, 2));
        assert_eq!(s.update_policy, UpdatePolicy::NeverUpdate);
        assert_eq!(s.provider.as_deref(), Some("arubacloud"));
        assert_eq!(s.pools.len(), 1);
        let pool = &s.pools[0];
        assert_eq!(pool.name, "1poolname");
        assert_eq!(
            (pool.min_nodes, pool.max_nodes, pool.desired_nodes),
            (3, 3, 3)
        );
        assert!(!pool.autoscale);
        assert_eq!(
            pool.specs,
            NodeSpecs {
                cpu: 2,
                ram_mib: 4096,
                storage_gb: 40,
                gpu: 0
            }
        );
        assert_eq!(pool.billing, Billing::Hourly);
        assert!(s.nodes_subnet.dhcp);
        assert_eq!(s.nodes_subnet.cidr.to_string(), "192.168.1.0/24");
        assert_eq!(s.nodes_subnet.range.start, ip("192.168.1.1"));
        assert_eq!(s.nodes_subnet.range.last, ip("192.168.1.24"));
        assert_eq!(s.nodes_subnet.gateway, ip("192.168.1.1"));
        assert_eq!(
            s.control_plane,
            ControlPlaneSpec {
                nodes: 1,
                specs: DEFAULT_CONTROL_PLANE_SPECS
            }
        );
        assert_eq!(s.pod_cidr.to_string(), DEFAULT_POD_CIDR);
        assert_eq!(s.service_cidr.to_string(), DEFAULT_SERVICE_CIDR);
        assert_eq!(s.cni, Cni::Calico);
        assert!(k.labels.is_empty());
        assert_eq!((s.desired_nodes(), s.max_nodes()), (4, 4));
        // Two remarks: the network address was clamped off, and 1.29 is past end of life.
        let w: Vec<(&str, &str)> = k
            .warnings
            .iter()
            .map(|w| (w.field.as_str(), w.message.as_str()))
            .collect();
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(w[0].0, "req.kubernetes_version");
        assert!(w[0].1.contains("end of life"), "{w:?}");
        assert_eq!(w[1].0, "req.nodes_subnet.start_address");
        assert!(w[1].1.contains("starts at 192.168.1.1"), "{w:?}");
    }

    #[test]
    fn the_version_default_and_end_of_life_follow_the_date() {
        let day = |s: &str| s.parse::<NaiveDate>().unwrap();
        let eol = |k: &KaasCreate| {
            k.warnings
                .iter()
                .any(|w| w.field == "req.kubernetes_version" && w.message.contains("end of life"))
        };
        // The canonical payload's 1.29.2: fine in 2024, past end of life now.
        assert!(!eol(&KaasCreate::parse(&seed(), day("2024-06-01")).unwrap()));
        let k = KaasCreate::parse(&seed(), today()).unwrap();
        assert_eq!(k.spec.kubernetes_version, KubeVersion::new(1, 29, 2));
        assert!(eol(&k));
        // No version: the day's default.
        let without = with(|v| {
            v["req"]
                .as_object_mut()
                .unwrap()
                .remove("kubernetes_version");
        });
        let version = |d: &str| {
            KaasCreate::parse(&without, day(d))
                .unwrap()
                .spec
                .kubernetes_version
                .to_string()
        };
        assert_eq!(version("2025-08-01"), "1.32.13");
        assert_eq!(version("2026-11-25"), "1.36.4");
        // A bare minor: its latest patch, said so.
        let k = KaasCreate::parse(
            &with(|v| v["req"]["kubernetes_version"] = json!("1.34")),
            day("2026-01-01"),
        )
        .unwrap();
        assert_eq!(k.spec.kubernetes_version, KubeVersion::new(1, 34, 9));
        assert!(!eol(&k));
        // Unknown: refused on the field, with what is allowed.
        let e = KaasCreate::parse(
            &with(|v| v["req"]["kubernetes_version"] = json!("1.34.77")),
            today(),
        )
        .unwrap_err();
        let Error::InvalidInput { fields } = e else {
            panic!("{e:?}")
        };
        assert_eq!(fields.len(), 1, "{fields:?}");
        assert_eq!(fields[0].name, "req.kubernetes_version");
        let m = &fields[0].messages[0];
        assert!(
            m.contains("1.34.77 is not supported") && m.contains("1.29.2") && m.contains("1.36.4"),
            "{m}"
        );
    }

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
    fn quirks_booleans_cases_aliases_and_defaults() {
        let v = with(|v| {
            v["req"]["nodes_subnet"]["dhcp"] = json!("FALSE");
            v["req"]["nodepool"][0]["autoscale"] = json!("tRUE");
            v["req"]["nodepool"][0]["min_nodes"] = json!(1);
            v["req"]["nodepool"][0]["billing"] = json!("monthly");
            v["req"]["update_policy"] = json!("manual");
            v["req"]["kubernetes_version"] = json!("v1.30");
            v["req"]["cni"] = json!("Cilium");
            v.as_object_mut().unwrap().remove("provider");
        });
        let k = KaasCreate::parse(&v, today()).unwrap();
        let s = &k.spec;
        assert!(!s.nodes_subnet.dhcp);
        assert!(s.pools[0].autoscale);
        assert_eq!(s.pools[0].min_nodes, 1);
        assert_eq!(s.pools[0].billing, Billing::Monthly);
        assert_eq!(s.update_policy, UpdatePolicy::NeverUpdate);
        assert_eq!(s.kubernetes_version, KubeVersion::new(1, 30, 14));
        assert_eq!(s.cni, Cni::Cilium);
        assert_eq!(s.provider, None);
        assert!(
            k.warnings
                .iter()
                .any(|w| w.field == "req.kubernetes_version" && w.message.contains("1.30.14"))
        );

        // JSON booleans, and everything optional left out.
        let v = json!({"req": {"name": "c", "nodepool": [{"pool_name": "p", "desired_nodes": 2}],
            "nodes_subnet": {"dhcp": true, "subnet_netmask": "10.0.0.0/24"}}});
        let k = KaasCreate::parse(&v, today()).unwrap();
        let s = &k.spec;
        assert_eq!(
            s.kubernetes_version,
            kubernetes::default_release(today()).version
        );
        assert_eq!((s.pools[0].min_nodes, s.pools[0].max_nodes), (2, 2));
        assert_eq!(s.pools[0].specs, DEFAULT_NODE_SPECS);
        assert_eq!(s.nodes_subnet.range.start, ip("10.0.0.1"));
        assert_eq!(s.nodes_subnet.range.last, ip("10.0.0.254"));
        assert!(k.warnings.is_empty(), "{:?}", k.warnings);

        // desired defaults to min, max to the larger.
        let v = json!({"req": {"name": "c", "nodepool": [{"pool_name": "p", "min_nodes": 0, "max_nodes": 5, "autoscale": 1}],
            "nodes_subnet": {"subnet_netmask": "10.0.0.0/24"}}});
        let pool = &KaasCreate::parse(&v, today()).unwrap().spec.pools[0];
        assert_eq!(
            (pool.min_nodes, pool.desired_nodes, pool.max_nodes),
            (0, 0, 5)
        );
    }

    #[test]
    fn extras_control_plane_networks_labels_and_taints() {
        let v = with(|v| {
            v["req"]["control_plane"] = json!({"nodes": 3, "specs": {"cpu": 8, "ram": 16384}});
            v["req"]["pod_cidr"] = json!("172.20.0.0/16");
            v["req"]["service_cidr"] = json!("172.21.0.0/16");
            v["req"]["labels"] = json!({"team": "infra"});
            v["req"]["nodepool"][0]["labels"] = json!({"example.com/tier": "web"});
            v["req"]["nodepool"][0]["taints"] = json!(["dedicated=gpu:NoSchedule", "spot:noexecute", {"key": "a", "effect": "PreferNoSchedule"}]);
        });
        let k = KaasCreate::parse(&v, today()).unwrap();
        let s = &k.spec;
        assert_eq!(s.control_plane.nodes, 3);
        assert_eq!(
            s.control_plane.specs,
            NodeSpecs {
                cpu: 8,
                ram_mib: 16384,
                storage_gb: 40,
                gpu: 0
            }
        );
        assert_eq!(s.pod_cidr.to_string(), "172.20.0.0/16");
        assert_eq!(k.labels["team"], "infra");
        assert_eq!(s.pools[0].labels["example.com/tier"], "web");
        let taints: Vec<String> = s.pools[0].taints.iter().map(|t| t.to_string()).collect();
        assert_eq!(
            taints,
            [
                "dedicated=gpu:NoSchedule",
                "spot:NoExecute",
                "a:PreferNoSchedule"
            ]
        );
        assert_eq!(s.max_nodes(), 6);

        // Labels at the top level, as for a VM.
        let v = with(|v| v["labels"] = json!({"env": "prod"}));
        assert_eq!(
            KaasCreate::parse(&v, today()).unwrap().labels["env"],
            "prod"
        );
    }

    #[test]
    fn unknown_fields_warn() {
        let v = with(|v| {
            v["colour"] = json!("blue");
            v["req"]["nodepool"][0]["specs"]["turbo"] = json!(true);
            v["req"]["nodes_subnet"]["vlan"] = json!(7);
        });
        let k = KaasCreate::parse(&v, today()).unwrap();
        let w: Vec<&str> = k.warnings.iter().map(|w| w.field.as_str()).collect();
        for f in [
            "colour",
            "req.nodepool[0].specs.turbo",
            "req.nodes_subnet.vlan",
        ] {
            assert!(w.contains(&f), "{f} not in {w:?}");
        }
    }

    #[test]
    fn each_rejection_names_its_path() {
        let cases: Vec<(Value, &[&str])> = vec![
            (with(|v| v["req"]["name"] = json!("Test8")), &["req.name"]),
            (with(|v| v["req"]["name"] = json!("a_b")), &["req.name"]),
            (
                with(|v| v["req"]["name"] = json!("c".repeat(33))),
                &["req.name"],
            ),
            (with(|v| v["req"]["name"] = json!("-x")), &["req.name"]),
            (
                with(|v| {
                    v["req"].as_object_mut().unwrap().remove("name");
                }),
                &["req.name"],
            ),
            (
                with(|v| v["req"]["metadata"] = json!([])),
                &["req.metadata"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["pool_name"] = json!("pool.1")),
                &["req.nodepool[0].pool_name"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["pool_name"] = json!("p".repeat(25))),
                &["req.nodepool[0].pool_name"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["min_nodes"] = json!(4)),
                &["req.nodepool[0].min_nodes"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["min_nodes"] = json!(-1)),
                &["req.nodepool[0].min_nodes"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["desired_nodes"] = json!(2)),
                &["req.nodepool[0].desired_nodes"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["max_nodes"] = json!(101)),
                &["req.nodepool[0].max_nodes"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["max_nodes"] = json!("3")),
                &["req.nodepool[0].max_nodes"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["autoscale"] = json!("sometimes")),
                &["req.nodepool[0].autoscale"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["specs"]["cpu"] = json!(0)),
                &["req.nodepool[0].specs.cpu"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["specs"]["ram"] = json!(512)),
                &["req.nodepool[0].specs.ram"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["specs"]["storage"] = json!(10)),
                &["req.nodepool[0].specs.storage"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["specs"]["gpu"] = json!(-1)),
                &["req.nodepool[0].specs.gpu"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["specs"] = json!("big")),
                &["req.nodepool[0].specs"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["billing"] = json!("WEEKLY")),
                &["req.nodepool[0].billing"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["labels"] = json!({"kubernetes.io/role": "x"})),
                &["req.nodepool[0].labels.kubernetes.io/role"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["taints"] = json!(["x=y:Sometimes"])),
                &["req.nodepool[0].taints[0]"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["taints"] = json!(["novalue"])),
                &["req.nodepool[0].taints[0]"],
            ),
            (
                with(|v| {
                    v["req"]["nodepool"][0]["taints"] = json!(["a:NoSchedule", "a=b:NoSchedule"])
                }),
                &["req.nodepool[0].taints[1]"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["taints"] = json!([{"key": "a"}])),
                &["req.nodepool[0].taints[0].effect"],
            ),
            (
                with(|v| v["req"]["nodepool"] = json!([])),
                &["req.nodepool"],
            ),
            (
                with(|v| v["req"]["nodepool"] = json!({})),
                &["req.nodepool"],
            ),
            (
                with(|v| {
                    v["req"].as_object_mut().unwrap().remove("nodepool");
                }),
                &["req.nodepool"],
            ),
            (
                with(|v| {
                    let p = v["req"]["nodepool"][0].clone();
                    v["req"]["nodepool"].as_array_mut().unwrap().push(p);
                }),
                &["req.nodepool[1].pool_name"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["desired_nodes"] = json!(0)),
                &["req.nodepool[0].desired_nodes"],
            ),
            (
                with(|v| {
                    let p = &mut v["req"]["nodepool"][0];
                    p["desired_nodes"] = json!(0);
                    p["min_nodes"] = json!(0);
                }),
                &["req.nodepool"],
            ),
            (
                with(|v| v["req"]["nodes_subnet"]["dhcp"] = json!("maybe")),
                &["req.nodes_subnet.dhcp"],
            ),
            (
                with(|v| v["req"]["nodes_subnet"]["subnet_netmask"] = json!("192.168.1.0")),
                &["req.nodes_subnet.subnet_netmask"],
            ),
            (
                with(|v| v["req"]["nodes_subnet"]["subnet_netmask"] = json!("192.168.1.0/30")),
                &["req.nodes_subnet.subnet_netmask"],
            ),
            (
                with(|v| v["req"]["nodes_subnet"]["subnet_netmask"] = json!("192.168.1.0/7")),
                &["req.nodes_subnet.subnet_netmask"],
            ),
            (
                with(|v| v["req"]["nodes_subnet"]["start_address"] = json!("192.168.2.1")),
                &["req.nodes_subnet.start_address"],
            ),
            (
                with(|v| v["req"]["nodes_subnet"]["last_address"] = json!("10.0.0.1")),
                &["req.nodes_subnet.last_address"],
            ),
            (
                with(|v| v["req"]["nodes_subnet"]["start_address"] = json!("192.168.1.30")),
                &["req.nodes_subnet.last_address"],
            ),
            (
                with(|v| v["req"]["nodes_subnet"]["start_address"] = json!("not-an-ip")),
                &["req.nodes_subnet.start_address"],
            ),
            (
                with(|v| {
                    v["req"]["nodes_subnet"]["dhcp"] = json!(false);
                    v["req"]["nodes_subnet"]["last_address"] = json!("192.168.1.4");
                }),
                &["req.nodes_subnet"],
            ),
            (
                with(|v| {
                    v["req"].as_object_mut().unwrap().remove("nodes_subnet");
                }),
                &["req.nodes_subnet"],
            ),
            (
                with(|v| v["req"]["update_policy"] = json!("SOMETIMES")),
                &["req.update_policy"],
            ),
            (
                with(|v| v["req"]["kubernetes_version"] = json!("1.26.0")),
                &["req.kubernetes_version"],
            ),
            (
                with(|v| v["req"]["kubernetes_version"] = json!("latest")),
                &["req.kubernetes_version"],
            ),
            (
                with(|v| v["req"]["kubernetes_version"] = json!(1.29)),
                &["req.kubernetes_version"],
            ),
            (with(|v| v["req"]["cni"] = json!("weave")), &["req.cni"]),
            (
                with(|v| v["req"]["control_plane"] = json!({"nodes": 2})),
                &["req.control_plane.nodes"],
            ),
            (
                with(|v| v["req"]["control_plane"] = json!({"nodes": 5})),
                &["req.control_plane.nodes"],
            ),
            (
                with(|v| v["req"]["control_plane"] = json!({"specs": {"cpu": 1}})),
                &["req.control_plane.specs.cpu"],
            ),
            (
                with(|v| v["req"]["pod_cidr"] = json!("192.168.0.0/16")),
                &["req.pod_cidr"],
            ),
            (
                with(|v| v["req"]["pod_cidr"] = json!("10.244.0.0/24")),
                &["req.pod_cidr"],
            ),
            (
                with(|v| v["req"]["service_cidr"] = json!("10.244.0.0/16")),
                &["req.service_cidr"],
            ),
            (
                with(|v| v["req"]["service_cidr"] = json!("10.0.0.0/8")),
                &["req.service_cidr"],
            ),
            (
                with(|v| v["req"]["nodes_subnet"]["subnet_netmask"] = json!("10.96.0.0/24")),
                &[
                    "req.nodes_subnet.start_address",
                    "req.nodes_subnet.last_address",
                    "req.service_cidr",
                ],
            ),
            (
                with(|v| v["req"]["labels"] = json!({"env": 1})),
                &["req.labels.env"],
            ),
            (
                with(|v| {
                    v["labels"] = json!({});
                    v["req"]["labels"] = json!({});
                }),
                &["req.labels"],
            ),
            (
                with(|v| v["provider"] = json!("Not A Cloud")),
                &["provider"],
            ),
            (with(|v| v["req"] = json!("x")), &["req"]),
            (
                with(|v| {
                    v.as_object_mut().unwrap().remove("req");
                }),
                &["req"],
            ),
            (json!([]), &["(body)"]),
        ];
        let mut failures = Vec::new();
        for (i, (v, want)) in cases.iter().enumerate() {
            let got = match KaasCreate::parse(v, today()) {
                Ok(_) => vec!["(accepted)".to_owned()],
                Err(e) => fields(e),
            };
            let mut want: Vec<String> = want.iter().map(|s| (*s).to_owned()).collect();
            want.sort();
            if got != want {
                failures.push(format!("case {i}: want {want:?}, got {got:?}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn every_bad_field_is_named_at_once() {
        let v = with(|v| {
            v["req"]["name"] = json!("bad name");
            v["req"]["nodepool"][0]["min_nodes"] = json!(5);
            v["req"]["nodepool"][0]["specs"]["ram"] = json!("4 GiB");
            v["req"]["nodes_subnet"]["last_address"] = json!("192.168.9.9");
            v["req"]["kubernetes_version"] = json!("1.99.0");
            v["req"]["update_policy"] = json!(3);
        });
        assert_eq!(
            refused(&v),
            [
                "req.kubernetes_version",
                "req.name",
                "req.nodepool[0].min_nodes",
                "req.nodepool[0].specs.ram",
                "req.nodes_subnet.last_address",
                "req.update_policy",
            ]
        );
    }

    #[test]
    fn a_static_subnet_must_hold_every_node_at_its_max() {
        // 1 control plane + 3 workers = 4; .1 is the gateway, .2-.5 hold exactly 4.
        let v = with(|v| {
            v["req"]["nodes_subnet"]["dhcp"] = json!("False");
            v["req"]["nodes_subnet"]["last_address"] = json!("192.168.1.5");
        });
        let k = KaasCreate::parse(&v, today()).unwrap();
        assert!(
            k.warnings
                .iter()
                .any(|w| w.field == "req.nodes_subnet" && w.message.contains("spare")),
            "{:?}",
            k.warnings
        );
        let v = with(|v| {
            v["req"]["nodes_subnet"]["dhcp"] = json!("False");
            v["req"]["nodes_subnet"]["last_address"] = json!("192.168.1.5");
            v["req"]["nodepool"][0]["max_nodes"] = json!(4);
        });
        assert_eq!(refused(&v), ["req.nodes_subnet"]);
        // With DHCP it is the DHCP server's business: a warning only.
        let v = with(|v| {
            v["req"]["nodes_subnet"]["last_address"] = json!("192.168.1.3");
        });
        let k = KaasCreate::parse(&v, today()).unwrap();
        assert!(k.warnings.iter().any(|w| w.field == "req.nodes_subnet"));
    }

    #[test]
    fn placement_constraints_are_checked_against_targets() {
        let t = Target {
            id: crate::TargetId::new(),
            name: "a".into(),
            host: "127.0.0.1".into(),
            compute_port: 1,
            storage_port: 2,
            network_port: 3,
            auth_port: 4,
            provider: "arubacloud".into(),
            region: "it-ar".into(),
            continent: "europe".into(),
            enabled: true,
        };
        KaasCreate::parse_placed(&seed(), std::slice::from_ref(&t), today()).unwrap();
        let v = with(|v| {
            v["provider"] = json!("ovh");
            v["req"]["name"] = json!("x_y");
        });
        assert_eq!(
            fields(KaasCreate::parse_placed(&v, &[t], today()).unwrap_err()),
            ["provider", "req.name"]
        );
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

    #[test]
    fn a_pool_parses_on_its_own() {
        let (pool, w) = PoolSpec::parse(&json!({"pool_name": "gpu", "desired_nodes": 1,
            "specs": {"gpu": 1}, "x": 1}))
        .unwrap();
        assert_eq!(pool.specs.gpu, 1);
        assert_eq!(w[0].field, "x");
        assert_eq!(
            fields(
                PoolSpec::parse(&json!({"pool_name": "Gpu", "min_nodes": 2, "max_nodes": 1}))
                    .unwrap_err()
            ),
            ["min_nodes", "pool_name"]
        );
    }

    #[test]
    fn taints_parse_and_print() {
        let t = Taint::parse("dedicated=gpu:NoSchedule").unwrap();
        assert_eq!(t.key, "dedicated");
        assert_eq!(t.value, "gpu");
        assert_eq!(t.to_string(), "dedicated=gpu:NoSchedule");
        assert_eq!(Taint::parse("example.com/x:noschedule").unwrap().value, "");
        assert!(Taint::parse("bad key=x:NoSchedule").is_err());
        assert!(Taint::parse("k=bad value:NoSchedule").is_err());
        assert!(Taint::parse("k=v").is_err());
    }
}
