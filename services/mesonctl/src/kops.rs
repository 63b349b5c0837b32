//! `mesonctl kops translate`: a `kops create cluster` command line turned
//! into meson's KaaS request (docs/payloads.md, `{"req": {...}, ...}`).
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
//!   mapped by vCPUs and memory to the smallest flavour holding it, without
//!   the flavour's GPUs; sizes beyond every flavour are asked for exactly.
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

use serde::Serialize;
use serde_json::{Map, Value, json};
use std::fmt;
use std::net::Ipv4Addr;

/// A place meson can put a cluster (`GET /v1/providers`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub provider: String,
    pub name: String,
    pub continent: String,
}

/// The regions and continents zones are matched against.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalog {
    pub regions: Vec<Region>,
}

impl Catalog {
    /// The regions of `mesond dev`'s simulated fleet (atomos-sim's
    /// `dev_hosts`), used when no meson is at hand to ask.
    pub fn builtin() -> Catalog {
        let r = |provider: &str, name: &str, continent: &str| Region {
            provider: provider.into(),
            name: name.into(),
            continent: continent.into(),
        };
        Catalog {
            regions: vec![
                r("ovh", "eu-west-gra", "europe"),
                r("ovh", "ca-east-bhs", "north-america"),
                r("ionos", "de-fra", "europe"),
                r("ionos", "us-las", "north-america"),
                r("gigas", "es-mad", "europe"),
                r("arubacloud", "it-ar1", "europe"),
                r("atomos", "on-prem", "europe"),
            ],
        }
    }

    fn continents(&self) -> Vec<&str> {
        let mut c: Vec<&str> = self.regions.iter().map(|r| r.continent.as_str()).collect();
        c.sort_unstable();
        c.dedup();
        c
    }

    fn region_names(&self) -> Vec<&str> {
        let mut c: Vec<&str> = self.regions.iter().map(|r| r.name.as_str()).collect();
        c.sort_unstable();
        c.dedup();
        c
    }
}

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

/// The KaaS payload and what could not be carried into it.
#[derive(Clone, Debug, PartialEq)]
pub struct Translation {
    /// The payload as JSON.
    pub payload: Value,
    /// The payload pretty-printed, its fields in the order of docs/payloads.md.
    pub pretty: String,
    pub reports: Vec<Report>,
}

impl Translation {
    /// Whether `flag` (as written) was reported.
    pub fn reported(&self, flag: &str) -> bool {
        self.reports.iter().any(|r| r.flag == flag)
    }
}

/// A meson flavour (services/meson-core/src/flavor.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flavor {
    pub name: &'static str,
    pub vcpus: u32,
    pub memory_mib: u64,
    pub gpus: u32,
}

/// Smallest first: the first that holds a size is the one it maps to.
pub const FLAVORS: &[Flavor] = &[
    Flavor {
        name: "helium",
        vcpus: 1,
        memory_mib: 512,
        gpus: 0,
    },
    Flavor {
        name: "neon",
        vcpus: 2,
        memory_mib: 2048,
        gpus: 0,
    },
    Flavor {
        name: "argon",
        vcpus: 4,
        memory_mib: 4096,
        gpus: 1,
    },
    Flavor {
        name: "argon2",
        vcpus: 4,
        memory_mib: 4096,
        gpus: 2,
    },
    Flavor {
        name: "kripton",
        vcpus: 8,
        memory_mib: 8192,
        gpus: 1,
    },
];

/// kOps' default network for the cluster (`--network-cidr`).
pub const KOPS_DEFAULT_NETWORK: &str = "172.20.0.0/16";
/// kOps' default CNI (`--networking`).
pub const KOPS_DEFAULT_CNI: &str = "cilium";
/// The pool the translated nodes form (kOps' instance group is `nodes-<zone>`).
pub const POOL_NAME: &str = "nodes";

const MAX_CLUSTER_NAME: usize = 32;
const STORAGE_GB: (u32, u32) = (20, 10_240);
const DEFAULT_STORAGE_GB: u32 = 40;
const MAX_POOL_NODES: u32 = 100;
/// A worker's smallest size (meson-core kaas.rs `NODE_RAM_MIB`).
const NODE_MIN: (u32, u64) = (1, 1024);
/// A control-plane node's smallest size (kubeadm's preflight minimum).
const CONTROL_PLANE_MIN: (u32, u64) = (2, 2048);
/// meson's pod and service networks, and kOps' own when the nodes'
/// network overlaps meson's.
const POD_SERVICE_CIDRS: [(&str, &str); 2] = [
    ("10.244.0.0/16", "10.96.0.0/12"),
    ("100.96.0.0/11", "100.64.0.0/13"),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `--flag`, `--flag=true|false`.
    Bool,
    /// `--flag value`, `--flag=value`.
    Value,
    /// Like `Value`; repeatable, and comma-separated.
    List,
}

/// Every flag of `kops create cluster`, the deprecated
/// `--master-*` ones with the flag they stand for, and why meson cannot
/// honour those it has no use for (`None`: it is translated, or harmless).
struct Flag {
    name: &'static str,
    short: Option<char>,
    kind: Kind,
    alias_of: Option<&'static str>,
    ignored: Option<&'static str>,
}

const fn f(name: &'static str, kind: Kind, ignored: Option<&'static str>) -> Flag {
    Flag {
        name,
        short: None,
        kind,
        alias_of: None,
        ignored,
    }
}

const fn alias(name: &'static str, kind: Kind, of: &'static str) -> Flag {
    Flag {
        name,
        short: None,
        kind,
        alias_of: Some(of),
        ignored: None,
    }
}

const NO_FIREWALL: &str =
    "meson sets no firewall rules: reach the nodes and the API through the cluster's network";
const NO_DNS: &str = "the API endpoint is a floating address on the nodes' network \
     (control_plane.endpoint), with no DNS name or load balancer of its own";
const AWS_ONLY: &str = "an AWS setting: meson is the cloud here";
const OPENSTACK_ONLY: &str = "an OpenStack setting: meson is the cloud here";
const IMAGE: &str = "meson boots its own node image for the Kubernetes version";
const NETWORK_OWN: &str = "meson makes the cluster's private network itself (nodes_subnet)";
const NO_SPEC_EDIT: &str = "meson's KaaS request has no field for kOps' cluster spec";

use Kind::{Bool, List, Value as Val};

const FLAGS: &[Flag] = &[
    f("name", Val, None),
    f("kubernetes-version", Val, None),
    f("zones", List, None),
    f("control-plane-zones", List, None),
    alias("master-zones", List, "control-plane-zones"),
    f("node-count", Val, None),
    f("node-size", List, None),
    f("node-volume-size", Val, None),
    f("control-plane-count", Val, None),
    alias("master-count", Val, "control-plane-count"),
    f("control-plane-size", List, None),
    alias("master-size", List, "control-plane-size"),
    f("control-plane-volume-size", Val, None),
    alias("master-volume-size", Val, "control-plane-volume-size"),
    f("network-cidr", List, None),
    f("networking", Val, None),
    f("cloud", Val, None),
    f("cloud-labels", Val, None),
    f("authorization", Val, None),
    f(
        "dry-run", Bool, None, // translate is a dry run
    ),
    f(
        "state",
        Val,
        Some("meaningless for meson: it keeps the cluster's desired state itself (no state store)"),
    ),
    f(
        "config",
        Val,
        Some("kOps' own configuration file is not read"),
    ),
    f("admin-access", List, Some(NO_FIREWALL)),
    f("ssh-access", List, Some(NO_FIREWALL)),
    f("api-loadbalancer-type", Val, Some(NO_DNS)),
    f("api-public-name", Val, Some(NO_DNS)),
    alias("master-public-name", Val, "api-public-name"),
    f("api-ssl-certificate", Val, Some(NO_DNS)),
    f("dns", Val, Some(NO_DNS)),
    f("dns-zone", Val, Some(NO_DNS)),
    f(
        "associate-public-ip",
        Bool,
        Some("meson decides the nodes' addresses: they live on the cluster's private network"),
    ),
    f(
        "bastion",
        Bool,
        Some("meson runs no bastion host: nodes are on the cluster's private network"),
    ),
    f("bastion-image", Val, Some("meson runs no bastion host")),
    f(
        "channel",
        Val,
        Some("meson's own catalogue (GET /v1/kubernetes-versions) sets the versions and defaults"),
    ),
    f("control-plane-image", Val, Some(IMAGE)),
    alias("master-image", Val, "control-plane-image"),
    f("node-image", Val, Some(IMAGE)),
    f("image", Val, Some(IMAGE)),
    f("control-plane-security-groups", List, Some(NO_FIREWALL)),
    alias(
        "master-security-groups",
        List,
        "control-plane-security-groups",
    ),
    f("node-security-groups", List, Some(NO_FIREWALL)),
    f("control-plane-tenancy", Val, Some(AWS_ONLY)),
    alias("master-tenancy", Val, "control-plane-tenancy"),
    f("node-tenancy", Val, Some(AWS_ONLY)),
    f("disable-subnet-tags", Bool, Some(AWS_ONLY)),
    f(
        "discovery-store",
        Val,
        Some("meson publishes no OIDC discovery documents (IRSA is AWS's)"),
    ),
    f(
        "encrypt-etcd-storage",
        Bool,
        Some("meson does not encrypt etcd volumes with a cloud KMS"),
    ),
    f(
        "etcd-clusters",
        List,
        Some("meson runs kubeadm's stacked etcd on the control-plane nodes"),
    ),
    f(
        "etcd-storage-type",
        Val,
        Some("meson runs kubeadm's stacked etcd on the control-plane nodes"),
    ),
    f(
        "gce-service-account",
        Val,
        Some("a GCE setting: meson is the cloud here"),
    ),
    f(
        "project",
        Val,
        Some("a GCE setting: meson is the cloud here"),
    ),
    f(
        "instance-manager",
        Val,
        Some("meson manages the nodes itself (pools, and the cluster-autoscaler's externalgrpc)"),
    ),
    f("ipv6", Bool, Some("meson's cluster networks are IPv4")),
    f(
        "kubernetes-feature-gates",
        List,
        Some("meson's KaaS request sets no feature gates"),
    ),
    f("network-id", Val, Some(NETWORK_OWN)),
    f("subnets", List, Some(NETWORK_OWN)),
    f("utility-subnets", List, Some(NETWORK_OWN)),
    f("os-dns-servers", Val, Some(OPENSTACK_ONLY)),
    f("os-ext-net", Val, Some(OPENSTACK_ONLY)),
    f("os-ext-subnet", Val, Some(OPENSTACK_ONLY)),
    f("os-kubelet-ignore-az", Bool, Some(OPENSTACK_ONLY)),
    f("os-lb-floating-subnet", Val, Some(OPENSTACK_ONLY)),
    f("os-network", Val, Some(OPENSTACK_ONLY)),
    f("os-octavia", Bool, Some(OPENSTACK_ONLY)),
    f("os-octavia-provider", Val, Some(OPENSTACK_ONLY)),
    f(
        "out",
        Val,
        Some("translate writes the payload to stdout: redirect it"),
    ),
    Flag {
        name: "output",
        short: Some('o'),
        kind: Val,
        alias_of: None,
        ignored: Some("translate always prints meson's JSON payload"),
    },
    f("set", List, Some(NO_SPEC_EDIT)),
    f("unset", List, Some(NO_SPEC_EDIT)),
    f(
        "ssh-public-key",
        Val,
        Some("meson's KaaS request takes no SSH key for the nodes"),
    ),
    f(
        "target",
        Val,
        Some("meson is the target: create the cluster with `mesonctl cluster create -f`"),
    ),
    Flag {
        name: "topology",
        short: Some('t'),
        kind: Val,
        alias_of: None,
        ignored: Some("meson puts every node on the cluster's private network; no topology choice"),
    },
    Flag {
        name: "yes",
        short: Some('y'),
        kind: Bool,
        alias_of: None,
        ignored: Some(
            "translate only prints the payload: create it with `mesonctl cluster create -f`",
        ),
    },
    Flag {
        name: "help",
        short: Some('h'),
        kind: Bool,
        alias_of: None,
        ignored: Some("ignored"),
    },
];

fn lookup_long(name: &str) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.name == name)
}

fn lookup_short(c: char) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.short == Some(c))
}

/// One flag as given: how it was written, and its value.
#[derive(Clone, Debug)]
struct Given {
    written: String,
    value: String,
}

/// The command line, parsed.
#[derive(Default)]
struct Parsed {
    /// Canonical flag name -> every occurrence, in order.
    flags: Vec<(&'static str, Given)>,
    positional: Vec<String>,
}

impl Parsed {
    /// The last occurrence of a single-valued flag (or any of its aliases).
    fn last(&self, name: &str) -> Option<&Given> {
        self.flags
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|(_, g)| g)
    }

    /// Every value of a list flag, split at commas, with how the flag was
    /// first written.
    fn list(&self, name: &str) -> Option<(String, Vec<String>)> {
        let mut written = None;
        let mut values = Vec::new();
        for (n, g) in &self.flags {
            if *n == name {
                written.get_or_insert_with(|| g.written.clone());
                values.extend(
                    g.value
                        .split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned),
                );
            }
        }
        written.map(|w| (w, values))
    }
}

/// Splits one string into words as a POSIX shell would: single and double
/// quotes, backslash escapes, and `\` + newline as a continuation.
pub fn shell_words(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err("unterminated ' quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => cur.push(c),
                            Some('\n') => {}
                            Some(c) => {
                                cur.push('\\');
                                cur.push(c);
                            }
                            None => return Err("unterminated \" quote".into()),
                        },
                        Some(c) => cur.push(c),
                        None => return Err("unterminated \" quote".into()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(c) => {
                    in_word = true;
                    cur.push(c);
                }
                None => {}
            },
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

fn parse_bool(written: &str, v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "" | "true" | "t" | "1" => Ok(true),
        "false" | "f" | "0" => Ok(false),
        _ => Err(format!("{written}: expected true or false, got {v:?}")),
    }
}

fn parse_args(words: &[String], reports: &mut Vec<Report>) -> Result<Parsed, String> {
    let mut p = Parsed::default();
    let mut i = 0;
    let mut flags_done = false;
    while i < words.len() {
        let w = &words[i];
        i += 1;
        if flags_done || !w.starts_with('-') || w == "-" {
            p.positional.push(w.clone());
            continue;
        }
        if w == "--" {
            flags_done = true;
            continue;
        }
        let (flag, inline, written) = if let Some(long) = w.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (long, None),
            };
            (lookup_long(name), value, format!("--{name}"))
        } else {
            // `-o yaml`, `-oyaml`, `-o=yaml`, `-y`.
            let rest = &w[1..];
            let mut cs = rest.chars();
            let c = cs.next().unwrap_or('-');
            let tail: String = cs.collect();
            let value = if tail.is_empty() {
                None
            } else {
                Some(tail.strip_prefix('=').unwrap_or(&tail).to_owned())
            };
            (lookup_short(c), value, format!("-{c}"))
        };
        let Some(flag) = flag else {
            // An unknown flag: it takes the next word as its value unless
            // that is a flag itself.
            let took = match inline {
                Some(v) => Some(v),
                None if i < words.len() && !words[i].starts_with('-') => {
                    i += 1;
                    Some(words[i - 1].clone())
                }
                None => None,
            };
            reports.push(Report {
                flag: written,
                message: match took {
                    Some(v) => format!(
                        "not a flag of `kops create cluster` (ignored, with its value {v:?})"
                    ),
                    None => "not a flag of `kops create cluster` (ignored)".into(),
                },
            });
            continue;
        };
        let value = match (flag.kind, inline) {
            (_, Some(v)) => v,
            (Kind::Bool, None) => "true".into(),
            (_, None) => {
                if i >= words.len() {
                    return Err(format!("{written} needs a value"));
                }
                i += 1;
                words[i - 1].clone()
            }
        };
        if flag.kind == Kind::Bool {
            parse_bool(&written, &value)?;
        }
        let canonical = flag.alias_of.unwrap_or(flag.name);
        p.flags.push((canonical, Given { written, value }));
    }
    Ok(p)
}

/// `(vCPUs, MiB)` of a common cloud instance size, or of a meson flavour.
pub fn instance_size(name: &str) -> Option<(u32, u64)> {
    let n = name.trim().to_ascii_lowercase();
    if let Some(f) = FLAVORS.iter().find(|f| f.name == n) {
        return Some((f.vcpus, f.memory_mib));
    }
    aws(&n)
        .or_else(|| gce(&n))
        .or_else(|| hetzner(&n))
        .or_else(|| digitalocean(&n))
}

const GIB: u64 = 1024;

fn gib(g: f64) -> u64 {
    (g * GIB as f64).round() as u64
}

/// AWS: the burstable `t2`/`t3`/`t3a`/`t4g` table, and the `m`/`c`/`r`
/// families by their size suffix (`large` 2 vCPUs, `xlarge` 4, `Nxlarge` 4N;
/// 4, 2 and 8 GiB per vCPU).
fn aws(n: &str) -> Option<(u32, u64)> {
    let (family, size) = n.split_once('.')?;
    match family {
        "t2" => {
            return match size {
                "nano" => Some((1, 512)),
                "micro" => Some((1, GIB)),
                "small" => Some((1, 2 * GIB)),
                "medium" => Some((2, 4 * GIB)),
                "large" => Some((2, 8 * GIB)),
                "xlarge" => Some((4, 16 * GIB)),
                "2xlarge" => Some((8, 32 * GIB)),
                _ => None,
            };
        }
        "t3" | "t3a" | "t4g" => {
            return match size {
                "nano" => Some((2, 512)),
                "micro" => Some((2, GIB)),
                "small" => Some((2, 2 * GIB)),
                "medium" => Some((2, 4 * GIB)),
                "large" => Some((2, 8 * GIB)),
                "xlarge" => Some((4, 16 * GIB)),
                "2xlarge" => Some((8, 32 * GIB)),
                _ => None,
            };
        }
        _ => {}
    }
    let per_vcpu = match family {
        "m4" | "m5" | "m5a" | "m5n" | "m6i" | "m6a" | "m6g" | "m7i" | "m7a" | "m7g" => 4,
        "c4" | "c5" | "c5a" | "c5n" | "c6i" | "c6a" | "c6g" | "c7i" | "c7a" | "c7g" => 2,
        "r4" | "r5" | "r5a" | "r5n" | "r6i" | "r6a" | "r6g" | "r7i" | "r7a" | "r7g" => 8,
        _ => return None,
    };
    let vcpus: u32 = match size {
        "large" => 2,
        "xlarge" => 4,
        s => 4 * s.strip_suffix("xlarge")?.parse::<u32>().ok()?,
    };
    if vcpus == 0 || vcpus > 192 {
        return None;
    }
    Some((vcpus, u64::from(vcpus) * per_vcpu * GIB))
}

/// GCE: `e2-micro|small|medium`, `f1-micro`, `g1-small`, and
/// `<family>-standard|highmem|highcpu-N`.
fn gce(n: &str) -> Option<(u32, u64)> {
    match n {
        "e2-micro" => return Some((2, GIB)),
        "e2-small" => return Some((2, 2 * GIB)),
        "e2-medium" => return Some((2, 4 * GIB)),
        "f1-micro" => return Some((1, gib(0.6))),
        "g1-small" => return Some((1, gib(1.7))),
        _ => {}
    }
    let mut parts = n.splitn(3, '-');
    let family = parts.next()?;
    let class = parts.next()?;
    let vcpus: u32 = parts.next()?.parse().ok()?;
    if vcpus == 0 || vcpus > 224 {
        return None;
    }
    let per_vcpu = match (family, class) {
        ("n1", "standard") => 3.75,
        ("n1", "highmem") => 6.5,
        ("n1", "highcpu") => 0.9,
        ("e2" | "n2" | "n2d" | "n4" | "t2d" | "c3" | "c3d", "standard") => 4.0,
        ("e2" | "n2" | "n2d" | "n4" | "c3" | "c3d", "highmem") => 8.0,
        ("e2" | "n2" | "n2d" | "n4" | "c3" | "c3d", "highcpu") => 1.0,
        _ => return None,
    };
    Some((vcpus, gib(per_vcpu * f64::from(vcpus))))
}

/// Hetzner Cloud's `cx`, `cpx`, `cax` and `ccx` types.
fn hetzner(n: &str) -> Option<(u32, u64)> {
    let g = |c: u32, m: u64| Some((c, m * GIB));
    match n {
        "cx11" => g(1, 2),
        "cx21" | "cx22" => g(2, 4),
        "cx31" => g(2, 8),
        "cx32" => g(4, 8),
        "cx41" => g(4, 16),
        "cx42" => g(8, 16),
        "cx51" => g(8, 32),
        "cx52" => g(16, 32),
        "cpx11" => g(2, 2),
        "cpx21" => g(3, 4),
        "cpx31" => g(4, 8),
        "cpx41" => g(8, 16),
        "cpx51" => g(16, 32),
        "cax11" => g(2, 4),
        "cax21" => g(4, 8),
        "cax31" => g(8, 16),
        "cax41" => g(16, 32),
        "ccx13" => g(2, 8),
        "ccx23" => g(4, 16),
        "ccx33" => g(8, 32),
        "ccx43" => g(16, 64),
        "ccx53" => g(32, 128),
        "ccx63" => g(48, 192),
        _ => None,
    }
}

/// DigitalOcean slugs: `s-2vcpu-4gb` (and `-amd`/`-intel`), `g-`, `gd-`,
/// `m-`, `c-2` (2 GiB per vCPU), `s-1vcpu-512mb-10gb`.
fn digitalocean(n: &str) -> Option<(u32, u64)> {
    let parts: Vec<&str> = n.split('-').collect();
    if parts.len() == 2 && parts[0] == "c" {
        let vcpus: u32 = parts[1].parse().ok()?;
        return (1..=48)
            .contains(&vcpus)
            .then(|| (vcpus, u64::from(vcpus) * 2 * GIB));
    }
    if parts.len() < 3 || !matches!(parts[0], "s" | "g" | "gd" | "m" | "m3" | "so" | "c") {
        return None;
    }
    let vcpus: u32 = parts[1].strip_suffix("vcpu")?.parse().ok()?;
    let mem = parts[2];
    let mib = if let Some(gb) = mem.strip_suffix("gb") {
        gb.parse::<u64>().ok()? * GIB
    } else {
        mem.strip_suffix("mb")?.parse::<u64>().ok()?
    };
    (vcpus > 0 && mib > 0).then_some((vcpus, mib))
}

/// The smallest flavour holding `vcpus` and `mib`.
pub fn smallest_flavor(vcpus: u32, mib: u64) -> Option<&'static Flavor> {
    FLAVORS
        .iter()
        .find(|f| f.vcpus >= vcpus && f.memory_mib >= mib)
}

/// One node group's size, as the payload's `specs` and for the metadata.
struct Sized {
    specs: Specs,
    /// `{"size": "t2.micro", "flavor": "neon"}` for the metadata.
    note: Value,
}

/// Which node group a size is for.
#[derive(Clone, Copy)]
enum Role {
    Worker,
    ControlPlane,
}

impl Role {
    fn minimum(self) -> (u32, u64) {
        match self {
            Role::Worker => NODE_MIN,
            Role::ControlPlane => CONTROL_PLANE_MIN,
        }
    }

    fn what(self) -> &'static str {
        match self {
            Role::Worker => "a node",
            Role::ControlPlane => "a control-plane node",
        }
    }

    /// meson's default size for the role (`neon`; `argon` without its GPU).
    fn default_size(self) -> (u32, u64) {
        match self {
            Role::Worker => (2, 2048),
            Role::ControlPlane => (4, 4096),
        }
    }
}

fn size_specs(
    role: Role,
    size: Option<(String, Vec<String>)>,
    volume: Option<(String, u32)>,
    reports: &mut Vec<Report>,
) -> Sized {
    let storage = match volume {
        Some((written, gb)) => {
            let clamped = gb.clamp(STORAGE_GB.0, STORAGE_GB.1);
            if clamped != gb {
                reports.push(Report {
                    flag: written,
                    message: format!(
                        "{gb} GB is outside meson's {}..={} GB for a node's disk: using {clamped} GB",
                        STORAGE_GB.0, STORAGE_GB.1
                    ),
                });
            }
            clamped
        }
        None => DEFAULT_STORAGE_GB,
    };
    let mut note = Map::new();
    let (mut vcpus, mut mib) = role.default_size();
    let mut gpus = 0;
    if let Some((written, sizes)) = size {
        if sizes.len() > 1 {
            reports.push(Report {
                flag: written.clone(),
                message: format!(
                    "a meson pool has one node size: using {:?}, not {:?}",
                    sizes[0],
                    &sizes[1..]
                ),
            });
        }
        if let Some(name) = sizes.first() {
            note.insert("size".into(), json!(name));
            let lower = name.to_ascii_lowercase();
            let named = FLAVORS.iter().find(|f| f.name == lower);
            match (named, instance_size(name)) {
                (Some(fl), _) => {
                    // A flavour asked for by name brings its GPUs.
                    (vcpus, mib, gpus) = (fl.vcpus, fl.memory_mib, fl.gpus);
                    note.insert("flavor".into(), json!(fl.name));
                }
                (None, Some((c, m))) => match smallest_flavor(c, m) {
                    Some(fl) => {
                        (vcpus, mib) = (fl.vcpus, fl.memory_mib);
                        note.insert("flavor".into(), json!(fl.name));
                    }
                    None => (vcpus, mib) = (c, m),
                },
                (None, None) => reports.push(Report {
                    flag: written.clone(),
                    message: format!(
                        "unknown instance size {name:?} (known: meson's flavours {}, and AWS, \
                         GCE, Hetzner and DigitalOcean sizes): using meson's default, \
                         {vcpus} vCPUs / {mib} MiB",
                        FLAVORS
                            .iter()
                            .map(|f| f.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }),
            }
            let (min_cpu, min_mib) = role.minimum();
            if vcpus < min_cpu || mib < min_mib {
                let raised = smallest_flavor(vcpus.max(min_cpu), mib.max(min_mib));
                let (c, m) = raised.map_or((vcpus.max(min_cpu), mib.max(min_mib)), |f| {
                    (f.vcpus, f.memory_mib)
                });
                reports.push(Report {
                    flag: written,
                    message: format!(
                        "{name:?} ({vcpus} vCPUs / {mib} MiB) is below what {} needs \
                         ({min_cpu} vCPUs / {min_mib} MiB): using {}{c} vCPUs / {m} MiB",
                        role.what(),
                        raised.map_or(String::new(), |f| format!("{}, ", f.name)),
                    ),
                });
                (vcpus, mib) = (c, m);
                if let Some(f) = raised {
                    note.insert("flavor".into(), json!(f.name));
                }
            }
        }
    }
    Sized {
        specs: Specs {
            cpu: vcpus,
            ram: mib,
            storage,
            gpu: gpus,
        },
        note: Value::Object(note),
    }
}

fn parse_number<T: std::str::FromStr>(g: &Given) -> Result<T, String> {
    g.value
        .trim()
        .parse()
        .map_err(|_| format!("{}: expected a whole number, got {:?}", g.written, g.value))
}

/// A meson cluster name (a DNS label of at most 32 characters) from a kOps
/// one (`demo.k8s.local`).
pub fn cluster_name(kops: &str) -> String {
    let lower = kops.trim().to_ascii_lowercase();
    let base = lower.strip_suffix(".k8s.local").unwrap_or(&lower);
    let mut out = String::new();
    for c in base.chars() {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
    }
    out.truncate(MAX_CLUSTER_NAME);
    out.trim_end_matches('-').to_owned()
}

/// An IPv4 network `a.b.c.d/n`, as (network address, prefix).
fn ipv4_net(s: &str) -> Option<(Ipv4Addr, u8)> {
    let (a, p) = s.trim().split_once('/')?;
    let addr: Ipv4Addr = a.parse().ok()?;
    let prefix: u8 = p.parse().ok().filter(|p| *p <= 32)?;
    Some((addr, prefix))
}

fn mask(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix))
    }
}

fn overlaps(a: (Ipv4Addr, u8), b: (Ipv4Addr, u8)) -> bool {
    let m = mask(a.1.min(b.1));
    u32::from(a.0) & m == u32::from(b.0) & m
}

/// The nodes' network from `--network-cidr`, checked as meson will.
fn nodes_network(given: Option<(String, Vec<String>)>, reports: &mut Vec<Report>) -> String {
    let Some((written, cidrs)) = given else {
        return KOPS_DEFAULT_NETWORK.into();
    };
    if cidrs.len() > 1 {
        reports.push(Report {
            flag: written.clone(),
            message: format!(
                "a meson cluster has one nodes network: using {:?}, not {:?}",
                cidrs[0],
                &cidrs[1..]
            ),
        });
    }
    let Some(first) = cidrs.first() else {
        return KOPS_DEFAULT_NETWORK.into();
    };
    let problem = match ipv4_net(first) {
        None => format!("{first:?} is not an IPv4 CIDR such as 10.0.0.0/24"),
        Some((_, p)) if !(8..=29).contains(&p) => {
            format!("meson takes a nodes network of /8 to /29, not /{p}")
        }
        Some((addr, p)) => {
            let net = Ipv4Addr::from(u32::from(addr) & mask(p));
            if net != addr {
                reports.push(Report {
                    flag: written,
                    message: format!("{first} has host bits set: using {net}/{p}"),
                });
            }
            return format!("{net}/{p}");
        }
    };
    reports.push(Report {
        flag: written,
        message: format!("{problem}: using kOps' default {KOPS_DEFAULT_NETWORK}"),
    });
    KOPS_DEFAULT_NETWORK.into()
}

/// `--networking` as meson's `cni`.
fn cni(given: Option<&Given>, reports: &mut Vec<Report>) -> &'static str {
    let Some(g) = given else {
        return KOPS_DEFAULT_CNI;
    };
    let mut report = |m: String| {
        reports.push(Report {
            flag: g.written.clone(),
            message: m,
        })
    };
    match g.value.trim().to_ascii_lowercase().as_str() {
        "calico" => "calico",
        "cilium" => "cilium",
        "flannel" | "flannel-vxlan" => "flannel",
        "cilium-etcd" => {
            report("meson runs Cilium with its own (CRD) store, not etcd: using cilium".into());
            "cilium"
        }
        "flannel-udp" => {
            report("meson runs flannel's VXLAN backend, not UDP: using flannel".into());
            "flannel"
        }
        "canal" => {
            report(
                "canal (Calico policy over flannel) is not offered: using calico, which does both"
                    .into(),
            );
            "calico"
        }
        other => {
            report(format!(
                "{other:?} is not offered by meson (calico, cilium or flannel): using \
                 {KOPS_DEFAULT_CNI}, kOps' default"
            ));
            KOPS_DEFAULT_CNI
        }
    }
}

/// Where the zones place the cluster: `("region"|"continent", name)`.
fn placement(
    zones: Option<(String, Vec<String>)>,
    cp_zones: Option<(String, Vec<String>)>,
    catalog: &Catalog,
    reports: &mut Vec<Report>,
) -> Option<(&'static str, String)> {
    let mut chosen: Option<(&'static str, String)> = None;
    for (written, list) in [zones, cp_zones].into_iter().flatten() {
        let mut unknown = Vec::new();
        let mut others = Vec::new();
        for z in &list {
            let lz = z.to_ascii_lowercase();
            let hit = if let Some(r) = catalog.regions.iter().find(|r| r.name == lz) {
                Some(("region", r.name.clone()))
            } else if catalog.regions.iter().any(|r| r.continent == lz) {
                Some(("continent", lz))
            } else {
                None
            };
            match (hit, &chosen) {
                (None, _) => unknown.push(z.clone()),
                (Some(h), None) => chosen = Some(h),
                (Some(h), Some(c)) if h == *c => {}
                (Some(h), Some(_)) => others.push(h.1),
            }
        }
        if !unknown.is_empty() {
            reports.push(Report {
                flag: written.clone(),
                message: format!(
                    "{} {unknown:?} {} no meson region ({}) or continent ({}){}",
                    if unknown.len() == 1 { "zone" } else { "zones" },
                    if unknown.len() == 1 { "names" } else { "name" },
                    catalog.region_names().join(", "),
                    catalog.continents().join(", "),
                    if chosen.is_none() {
                        ": meson picks the cheapest region that fits the cluster"
                    } else {
                        ""
                    }
                ),
            });
        }
        if let (false, Some(c)) = (others.is_empty(), &chosen) {
            reports.push(Report {
                flag: written,
                message: format!(
                    "a meson cluster lives in one region (its nodes share one network): \
                     using {} {:?}, not {others:?}",
                    c.0, c.1
                ),
            });
        }
    }
    chosen
}

/// `Owner=John,Team=Core` as labels; invalid ones reported.
fn labels(given: Option<&Given>, reports: &mut Vec<Report>) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(g) = given else {
        return out;
    };
    let valid = |s: &str| {
        s.len() <= 63
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && s.chars().next().is_none_or(|c| c.is_ascii_alphanumeric())
            && s.chars().last().is_none_or(|c| c.is_ascii_alphanumeric())
    };
    let mut bad = Vec::new();
    for pair in g.value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (k, v) = (k.trim(), v.trim());
        if !k.is_empty() && valid(k) && valid(v) {
            out.insert(k.to_owned(), json!(v));
        } else {
            bad.push(pair.to_owned());
        }
    }
    if !bad.is_empty() {
        reports.push(Report {
            flag: g.written.clone(),
            message: format!(
                "not valid meson labels (Kubernetes' rules: at most 63 of [A-Za-z0-9-_.], \
                 starting and ending alphanumeric), left out: {bad:?}"
            ),
        });
    }
    out
}

/// Translates the words of a `kops create cluster` command line (with or
/// without the leading `kops create cluster`; one word holding the whole
/// line is split as a shell would).
pub fn translate(args: &[String], catalog: &Catalog) -> Result<Translation, String> {
    let words: Vec<String> = match args {
        [one] if one.trim().contains(char::is_whitespace) => shell_words(one)?,
        _ => args.to_vec(),
    };
    let mut words: &[String] = &words;
    if words.first().is_some_and(|w| w == "kops") {
        words = &words[1..];
        match words {
            [c, k, ..] if c == "create" && k == "cluster" => words = &words[2..],
            _ => return Err("only `kops create cluster` command lines are translated".into()),
        }
    } else if let [c, k, ..] = words
        && c == "create"
        && k == "cluster"
    {
        words = &words[2..];
    }

    let mut reports = Vec::new();
    let p = parse_args(words, &mut reports)?;

    // Flags meson has no use for, each reported once, as written. Boolean
    // ones set to false ask for nothing.
    let mut seen_ignored: Vec<String> = Vec::new();
    for (name, g) in &p.flags {
        let Some(flag) = lookup_long(name) else {
            continue;
        };
        let Some(why) = flag.ignored else {
            continue;
        };
        if flag.kind == Kind::Bool && !parse_bool(&g.written, &g.value)? {
            continue;
        }
        if !seen_ignored.contains(&g.written) {
            seen_ignored.push(g.written.clone());
            reports.push(Report {
                flag: g.written.clone(),
                message: why.into(),
            });
        }
    }

    // The cluster's name.
    let (written, kops_name) = match (p.last("name"), p.positional.as_slice()) {
        (Some(g), rest) => {
            if !rest.is_empty() {
                reports.push(Report {
                    flag: g.written.clone(),
                    message: format!("also given as an argument, {:?}: ignored", rest),
                });
            }
            (g.written.clone(), g.value.clone())
        }
        (None, [one]) => ("(cluster name)".to_owned(), one.clone()),
        (None, []) => {
            return Err(
                "no cluster name: give --name (kops create cluster --name=NAME ...)".into(),
            );
        }
        (None, many) => return Err(format!("unexpected arguments {many:?}")),
    };
    let name = cluster_name(&kops_name);
    if name.is_empty() {
        return Err(format!(
            "{written}: {kops_name:?} leaves no usable cluster name"
        ));
    }
    if name != kops_name {
        reports.push(Report {
            flag: written,
            message: format!(
                "{kops_name:?} is not a meson cluster name (a DNS label: a-z, 0-9 and '-', at \
                 most {MAX_CLUSTER_NAME} characters): using {name:?}"
            ),
        });
    }

    // Cloud.
    if let Some(g) = p.last("cloud") {
        let cloud = g.value.trim().to_ascii_lowercase();
        if cloud != "elemento" && cloud != "meson" {
            reports.push(Report {
                flag: g.written.clone(),
                message: format!(
                    "{cloud:?} ignored: meson is the cloud (the nodes run on the AtomOS hosts \
                     it places them on)"
                ),
            });
        }
    }

    // Authorization: kubeadm's clusters are RBAC.
    if let Some(g) = p.last("authorization")
        && !g.value.trim().eq_ignore_ascii_case("rbac")
    {
        reports.push(Report {
            flag: g.written.clone(),
            message: format!("{:?} ignored: meson's clusters use RBAC", g.value),
        });
    }

    // Counts. kOps: one node per zone, one control-plane node per
    // control-plane zone (else one).
    let zones = p.list("zones");
    let cp_zones = p.list("control-plane-zones");
    let zone_count = zones.as_ref().map_or(0, |(_, z)| z.len());
    let nodes = match p.last("node-count") {
        Some(g) => {
            let n: u32 = parse_number(g)?;
            let kept = n.clamp(1, MAX_POOL_NODES);
            if kept != n {
                reports.push(Report {
                    flag: g.written.clone(),
                    message: format!(
                        "a meson pool holds 1 to {MAX_POOL_NODES} nodes here: using {kept}"
                    ),
                });
            }
            kept
        }
        None => u32::try_from(zone_count.max(1))
            .unwrap_or(1)
            .min(MAX_POOL_NODES),
    };
    let control_planes = match p.last("control-plane-count") {
        Some(g) => {
            let n: u32 = parse_number(g)?;
            let kept = if n <= 1 { 1 } else { 3 };
            if kept != n {
                reports.push(Report {
                    flag: g.written.clone(),
                    message: format!(
                        "meson runs 1 or 3 control-plane nodes (etcd wants an odd quorum): \
                         using {kept}"
                    ),
                });
            }
            kept
        }
        None => match cp_zones.as_ref().map_or(1, |(_, z)| z.len()) {
            0 | 1 => 1,
            _ => 3,
        },
    };

    let volume = |name: &str| -> Result<Option<(String, u32)>, String> {
        p.last(name)
            .map(|g| parse_number::<u32>(g).map(|n| (g.written.clone(), n)))
            .transpose()
    };
    let worker = size_specs(
        Role::Worker,
        p.list("node-size"),
        volume("node-volume-size")?,
        &mut reports,
    );
    let control_plane = size_specs(
        Role::ControlPlane,
        p.list("control-plane-size"),
        volume("control-plane-volume-size")?,
        &mut reports,
    );

    let subnet = nodes_network(p.list("network-cidr"), &mut reports);
    let cni = cni(p.last("networking"), &mut reports);
    let place = placement(zones, cp_zones, catalog, &mut reports);
    let labels = labels(p.last("cloud-labels"), &mut reports);

    let mut kops_meta = Map::new();
    kops_meta.insert("name".into(), json!(kops_name));
    if worker.note.as_object().is_some_and(|o| !o.is_empty()) {
        kops_meta.insert("node_size".into(), worker.note);
    }
    if control_plane
        .note
        .as_object()
        .is_some_and(|o| !o.is_empty())
    {
        kops_meta.insert("control_plane_size".into(), control_plane.note);
    }
    // meson's pod and service networks, or kOps' own when the nodes'
    // network overlaps meson's.
    let (mut pod_cidr, mut service_cidr) = (None, None);
    if let Some(nodes_net) = ipv4_net(&subnet) {
        let fits = |(pod, svc): (&str, &str)| {
            [pod, svc]
                .iter()
                .filter_map(|c| ipv4_net(c))
                .all(|n| !overlaps(n, nodes_net))
        };
        if !fits(POD_SERVICE_CIDRS[0]) && fits(POD_SERVICE_CIDRS[1]) {
            pod_cidr = Some(POD_SERVICE_CIDRS[1].0);
            service_cidr = Some(POD_SERVICE_CIDRS[1].1);
        }
    }
    let mut kubernetes_version = None;
    if let Some(g) = p.last("kubernetes-version") {
        let v = g.value.trim();
        if v.contains("://") {
            reports.push(Report {
                flag: g.written.clone(),
                message: format!(
                    "{v:?}: meson installs released versions only (GET \
                     /v1/kubernetes-versions): using its default"
                ),
            });
        } else if !v.is_empty() {
            kubernetes_version = Some(v.to_owned());
        }
    }

    let (mut region, mut continent) = (None, None);
    match place {
        Some(("region", r)) => region = Some(r),
        Some((_, c)) => continent = Some(c),
        None => {}
    }
    let payload = Payload {
        req: Req {
            name,
            metadata: json!({ "kops": kops_meta }),
            nodepool: vec![PoolReq {
                pool_name: POOL_NAME,
                autoscale: false,
                desired_nodes: nodes,
                min_nodes: nodes,
                max_nodes: nodes,
                specs: worker.specs,
                billing: "HOURLY",
            }],
            control_plane: ControlPlaneReq {
                nodes: control_planes,
                specs: control_plane.specs,
            },
            nodes_subnet: subnet_req(subnet),
            pod_cidr,
            service_cidr,
            cni,
            update_policy: "NEVER_UPDATE",
            kubernetes_version,
        },
        region,
        continent,
        labels,
    };
    sort_reports(&mut reports, words);
    let pretty = serde_json::to_string_pretty(&payload).map_err(|e| e.to_string())?;
    Ok(Translation {
        payload: serde_json::to_value(&payload).map_err(|e| e.to_string())?,
        pretty,
        reports,
    })
}

/// Reports in the order their flags appear on the command line.
fn sort_reports(reports: &mut [Report], words: &[String]) {
    let at = |flag: &str| {
        words
            .iter()
            .position(|w| {
                w == flag
                    || w.strip_prefix(flag).is_some_and(|rest| {
                        rest.starts_with('=') || (flag.len() == 2 && !flag.starts_with("--"))
                    })
            })
            .unwrap_or(usize::MAX)
    };
    reports.sort_by_key(|r| at(&r.flag));
}

/// The KaaS request, fields in the order docs/payloads.md writes them.
#[derive(Serialize)]
struct Payload {
    req: Req,
    #[serde(skip_serializing_if = "Option::is_none")]
    region: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    continent: Option<String>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    labels: Map<String, Value>,
}

#[derive(Serialize)]
struct Req {
    name: String,
    metadata: Value,
    nodepool: Vec<PoolReq>,
    control_plane: ControlPlaneReq,
    nodes_subnet: SubnetReq,
    #[serde(skip_serializing_if = "Option::is_none")]
    pod_cidr: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    service_cidr: Option<&'static str>,
    cni: &'static str,
    update_policy: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    kubernetes_version: Option<String>,
}

#[derive(Serialize)]
struct PoolReq {
    pool_name: &'static str,
    autoscale: bool,
    desired_nodes: u32,
    min_nodes: u32,
    max_nodes: u32,
    specs: Specs,
    billing: &'static str,
}

#[derive(Serialize)]
struct ControlPlaneReq {
    nodes: u32,
    specs: Specs,
}

#[derive(Serialize)]
struct SubnetReq {
    dhcp: &'static str,
    subnet_netmask: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    start_address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_address: Option<String>,
}

/// The nodes' network with DHCP. The range is given, not left to meson's
/// default (every usable address), which would leave none for the API
/// endpoint: the gateway (the first usable address) and the last usable
/// address, where meson puts the endpoint, stay out of it.
fn subnet_req(cidr: String) -> SubnetReq {
    let range = ipv4_net(&cidr).map(|(addr, prefix)| {
        let net = u32::from(addr) & mask(prefix);
        let broadcast = net | !mask(prefix);
        (
            Ipv4Addr::from(net + 2).to_string(),
            Ipv4Addr::from(broadcast - 2).to_string(),
        )
    });
    SubnetReq {
        dhcp: "True",
        subnet_netmask: cidr,
        start_address: range.as_ref().map(|r| r.0.clone()),
        last_address: range.map(|r| r.1),
    }
}

/// A node's size in the KaaS request's units (MiB, GB).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
struct Specs {
    cpu: u32,
    ram: u64,
    storage: u32,
    gpu: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `kops create cluster` line for AWS, kept verbatim (its `us-east-la`
    /// typo included).
    const SEED_AWS: &str = "kops create cluster --cloud=aws --networking calico \
        --name=demok8scluster.k8s.local --state=s3://kops-abhi-storage-1 --zones=us-east-la \
        --node-count=1 --node-size=t2.micro --master-size=t2.micro --master-volume-size=8 \
        --node-volume-size=8";

    /// An example for the Elemento kOps provider, a line that was wrapped
    /// where it was published.
    const SEED_ELEMENTO: &str = "kops create cluster --cloud=elemento --name=test.k8s \
        --state=s3://test-kops --kubernetes-version=1.35.9 \
        --zones=europe --node-count=2 --node-volume-size=64 \
        --control-plane-volume-size=64 --network-cidr 192.168.100.0/24";

    fn run(line: &str) -> Translation {
        translate(&[line.to_owned()], &Catalog::builtin()).expect("translates")
    }

    fn flags(t: &Translation) -> Vec<&str> {
        let mut f: Vec<&str> = t.reports.iter().map(|r| r.flag.as_str()).collect();
        f.sort_unstable();
        f
    }

    #[test]
    fn the_seed_aws_example() {
        let t = run(SEED_AWS);
        let req = &t.payload["req"];
        assert_eq!(req["name"], "demok8scluster");
        assert_eq!(req["cni"], "calico");
        let pool = &req["nodepool"][0];
        assert_eq!(pool["desired_nodes"], 1);
        assert_eq!(pool["min_nodes"], 1);
        assert_eq!(pool["max_nodes"], 1);
        assert_eq!(pool["autoscale"], false);
        // t2.micro (1 vCPU, 1 GiB) fits neon (2 vCPUs, 2048 MiB); 8 GB is
        // below meson's smallest disk.
        assert_eq!(
            pool["specs"],
            json!({"cpu": 2, "ram": 2048, "storage": 20, "gpu": 0})
        );
        assert_eq!(
            req["control_plane"],
            json!({"nodes": 1, "specs": {"cpu": 2, "ram": 2048, "storage": 20, "gpu": 0}})
        );
        assert_eq!(
            req["nodes_subnet"],
            json!({"dhcp": "True", "subnet_netmask": KOPS_DEFAULT_NETWORK,
                   "start_address": "172.20.0.2", "last_address": "172.20.255.253"})
        );
        assert_eq!(req["metadata"]["kops"]["name"], "demok8scluster.k8s.local");
        assert_eq!(req["metadata"]["kops"]["node_size"]["flavor"], "neon");
        assert_eq!(
            req["metadata"]["kops"]["control_plane_size"],
            json!({"size": "t2.micro", "flavor": "neon"})
        );
        assert!(req.get("kubernetes_version").is_none());
        // us-east-la names no meson region: meson picks.
        let keys: Vec<&String> = t.payload.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["req"], "{}", t.payload);
        assert_eq!(
            flags(&t),
            [
                "--cloud",
                "--master-volume-size",
                "--name",
                "--node-volume-size",
                "--state",
                "--zones"
            ],
            "{:#?}",
            t.reports
        );
        let state = t.reports.iter().find(|r| r.flag == "--state").unwrap();
        assert!(state.message.contains("meaningless"), "{state}");
        let cloud = t.reports.iter().find(|r| r.flag == "--cloud").unwrap();
        assert!(cloud.message.contains("meson is the cloud"), "{cloud}");
        let zones = t.reports.iter().find(|r| r.flag == "--zones").unwrap();
        assert!(zones.message.contains("us-east-la"), "{zones}");
        // The same line given as separate words translates the same.
        let words: Vec<String> = shell_words(SEED_AWS).unwrap();
        assert_eq!(translate(&words, &Catalog::builtin()).unwrap(), t);
    }

    #[test]
    fn the_seed_elemento_example() {
        let t = run(SEED_ELEMENTO);
        let req = &t.payload["req"];
        assert_eq!(req["name"], "test-k8s");
        assert_eq!(req["kubernetes_version"], "1.35.9");
        assert_eq!(req["cni"], "cilium", "kOps' default networking");
        assert_eq!(req["nodepool"][0]["desired_nodes"], 2);
        assert_eq!(req["nodepool"][0]["specs"]["storage"], 64);
        assert_eq!(req["nodepool"][0]["specs"]["cpu"], 2);
        assert_eq!(req["control_plane"]["specs"]["storage"], 64);
        assert_eq!(req["control_plane"]["specs"]["cpu"], 4);
        assert_eq!(req["control_plane"]["specs"]["gpu"], 0);
        assert_eq!(req["nodes_subnet"]["subnet_netmask"], "192.168.100.0/24");
        assert_eq!(req["nodes_subnet"]["start_address"], "192.168.100.2");
        assert_eq!(req["nodes_subnet"]["last_address"], "192.168.100.253");
        assert_eq!(t.payload["continent"], "europe");
        assert_eq!(flags(&t), ["--name", "--state"], "{:#?}", t.reports);
    }

    #[test]
    fn flag_forms_aliases_and_positional_names() {
        let args: Vec<String> = [
            "create",
            "cluster",
            "prod",
            "--control-plane-count",
            "3",
            "--control-plane-size=e2-standard-4",
            "--node-size",
            "cpx31,cpx41",
            "--zones",
            "de-fra",
            "--zones=it-ar1",
            "--networking=flannel-udp",
            "--bastion=false",
            "-t",
            "private",
            "-y",
            "--cloud-labels",
            "team=core,Owner=John Doe",
            "--node-count=150",
            "--frobnicate",
            "x",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let t = translate(&args, &Catalog::builtin()).unwrap();
        let req = &t.payload["req"];
        assert_eq!(req["name"], "prod");
        assert_eq!(req["control_plane"]["nodes"], 3);
        // e2-standard-4: 4 vCPUs, 16 GiB: more memory than any flavour, asked exactly.
        assert_eq!(req["control_plane"]["specs"]["cpu"], 4);
        assert_eq!(req["control_plane"]["specs"]["ram"], 16384);
        assert_eq!(req["control_plane"]["specs"]["gpu"], 0);
        // cpx31: 4 vCPUs, 8 GiB -> kripton.
        assert_eq!(req["nodepool"][0]["specs"]["cpu"], 8);
        assert_eq!(req["nodepool"][0]["desired_nodes"], 100);
        assert_eq!(req["cni"], "flannel");
        assert_eq!(t.payload["region"], "de-fra");
        assert_eq!(t.payload["labels"], json!({"team": "core"}));
        assert_eq!(
            flags(&t),
            [
                "--cloud-labels",
                "--frobnicate",
                "--networking",
                "--node-count",
                "--node-size",
                "--zones",
                "-t",
                "-y"
            ],
            "{:#?}",
            t.reports
        );
    }

    #[test]
    fn sizes_map_to_the_smallest_flavour_that_holds_them() {
        let flavor = |n: &str| {
            let (c, m) = instance_size(n).unwrap_or_else(|| panic!("{n} known"));
            smallest_flavor(c, m).map(|f| f.name)
        };
        assert_eq!(flavor("t2.nano"), Some("helium"));
        assert_eq!(flavor("t2.micro"), Some("neon"));
        assert_eq!(flavor("t3.small"), Some("neon"));
        assert_eq!(flavor("t3.medium"), Some("argon"));
        assert_eq!(flavor("t2.large"), Some("kripton"));
        assert_eq!(flavor("m5.large"), Some("kripton"));
        assert_eq!(flavor("c5.large"), Some("argon"));
        assert_eq!(flavor("m5.4xlarge"), None);
        assert_eq!(flavor("e2-micro"), Some("neon"));
        assert_eq!(flavor("e2-medium"), Some("argon"));
        assert_eq!(flavor("n1-standard-1"), Some("argon"));
        assert_eq!(flavor("n1-standard-2"), Some("kripton"));
        assert_eq!(flavor("n2-highcpu-8"), Some("kripton"));
        assert_eq!(flavor("cx11"), Some("neon"));
        assert_eq!(flavor("cpx11"), Some("neon"));
        assert_eq!(flavor("cx22"), Some("argon"));
        assert_eq!(flavor("s-2vcpu-4gb"), Some("argon"));
        assert_eq!(flavor("s-1vcpu-512mb-10gb"), Some("helium"));
        assert_eq!(flavor("s-4vcpu-8gb-amd"), Some("kripton"));
        assert_eq!(flavor("c-2"), Some("argon"));
        assert_eq!(flavor("neon"), Some("neon"));
        assert_eq!(instance_size("m5.4xlarge"), Some((16, 65536)));
        assert_eq!(instance_size("p3.2xlarge"), None);
        assert_eq!(instance_size("banana"), None);
    }

    #[test]
    fn sizes_below_a_nodes_minimum_are_raised_and_unknown_ones_reported() {
        let t = run(
            "kops create cluster --name=a --node-size=t2.nano --control-plane-size=helium \
                     --node-volume-size=20000",
        );
        let req = &t.payload["req"];
        assert_eq!(
            req["nodepool"][0]["specs"],
            json!({"cpu": 2, "ram": 2048, "storage": 10240, "gpu": 0})
        );
        assert_eq!(req["control_plane"]["specs"]["cpu"], 2);
        assert_eq!(req["control_plane"]["specs"]["ram"], 2048);
        assert_eq!(
            flags(&t),
            ["--control-plane-size", "--node-size", "--node-volume-size"]
        );

        let t = run(
            "kops create cluster --name=a --node-size=g4dn.xlarge --master-size=argon2 \
                     --node-count 2 --zones eu-west-gra,ca-east-bhs",
        );
        let req = &t.payload["req"];
        assert_eq!(req["nodepool"][0]["specs"]["cpu"], 2, "meson's default");
        assert_eq!(
            req["control_plane"]["specs"]["gpu"], 2,
            "argon2 asked by name"
        );
        assert_eq!(t.payload["region"], "eu-west-gra");
        assert_eq!(flags(&t), ["--node-size", "--zones"]);
        let unknown = t.reports.iter().find(|r| r.flag == "--node-size").unwrap();
        assert!(unknown.message.contains("g4dn.xlarge"), "{unknown}");

        // A size larger than every flavour is asked for exactly.
        let t = run("kops create cluster --name=a --node-size=m5.4xlarge");
        assert_eq!(
            t.payload["req"]["nodepool"][0]["specs"],
            json!({"cpu": 16, "ram": 65536, "storage": 40, "gpu": 0})
        );
        assert!(t.reports.is_empty(), "{:?}", t.reports);
    }

    #[test]
    fn networks_and_cnis() {
        let t = run("kops create cluster --name=a --network-cidr=10.0.0.5/16 --networking kubenet");
        let req = &t.payload["req"];
        assert_eq!(req["nodes_subnet"]["subnet_netmask"], "10.0.0.0/16");
        assert_eq!(req["cni"], "cilium");
        assert_eq!(flags(&t), ["--network-cidr", "--networking"]);

        // A nodes network over meson's pod network moves the pods and
        // services to kOps' own ranges.
        let t = run("kops create cluster --name=a --network-cidr=10.0.0.0/8");
        let req = &t.payload["req"];
        assert_eq!(req["pod_cidr"], "100.96.0.0/11");
        assert_eq!(req["service_cidr"], "100.64.0.0/13");
        let t = run("kops create cluster --name=a --network-cidr=10.1.0.0/30");
        assert_eq!(
            t.payload["req"]["nodes_subnet"]["subnet_netmask"],
            KOPS_DEFAULT_NETWORK
        );
        assert!(t.reported("--network-cidr"));
        let t = run("kops create cluster --name=a --network-cidr=10.1.0.8/29");
        assert_eq!(
            t.payload["req"]["nodes_subnet"],
            json!({"dhcp": "True", "subnet_netmask": "10.1.0.8/29",
                   "start_address": "10.1.0.10", "last_address": "10.1.0.13"})
        );
    }

    #[test]
    fn what_cannot_make_a_payload() {
        let c = Catalog::builtin();
        let words = |s: &str| shell_words(s).unwrap();
        assert!(
            translate(&words("kops create cluster --zones=europe"), &c)
                .unwrap_err()
                .contains("--name")
        );
        assert!(translate(&words("kops delete cluster --name=a"), &c).is_err());
        assert!(
            translate(&words("kops create cluster --name=a --node-count=many"), &c)
                .unwrap_err()
                .contains("--node-count")
        );
        assert!(translate(&words("kops create cluster --name"), &c).is_err());
        assert!(translate(&words("kops create cluster --name=..."), &c).is_err());
        assert!(translate(&words("kops create cluster --name=a --bastion=maybe"), &c).is_err());
    }

    #[test]
    fn shell_words_split_like_a_shell() {
        assert_eq!(
            shell_words("a 'b c' \"d \\\"e\\\"\" f\\ g \\\n h").unwrap(),
            ["a", "b c", "d \"e\"", "f g", "h"]
        );
        assert!(shell_words("a 'b").is_err());
        assert_eq!(
            cluster_name("My_Cluster.example.com"),
            "my-cluster-example-com"
        );
        assert_eq!(cluster_name(&"x".repeat(40)).len(), 32);
    }
}
