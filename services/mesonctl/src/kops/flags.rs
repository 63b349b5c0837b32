//! Every flag of `kops create cluster`: how it takes its value, the
//! deprecated `--master-*` ones with the flag they stand for, and why meson
//! cannot honour those it has no use for.

use super::Report;
use super::args::{Parsed, parse_bool};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
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
pub(super) struct Flag {
    pub(super) name: &'static str,
    pub(super) short: Option<char>,
    pub(super) kind: Kind,
    pub(super) alias_of: Option<&'static str>,
    pub(super) ignored: Option<&'static str>,
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

pub(super) fn lookup_long(name: &str) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.name == name)
}

pub(super) fn lookup_short(c: char) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.short == Some(c))
}

/// Reports the flags meson has no use for, each once, as written. Boolean
/// ones set to false ask for nothing.
pub(super) fn report_ignored(p: &Parsed, reports: &mut Vec<Report>) -> Result<(), String> {
    let mut seen: Vec<&str> = Vec::new();
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
        if !seen.contains(&g.written.as_str()) {
            seen.push(&g.written);
            reports.push(Report {
                flag: g.written.clone(),
                message: why.into(),
            });
        }
    }
    Ok(())
}
