//! The cluster's networks: `req.nodes_subnet` (sized for every node at its
//! maximum), `req.pod_cidr` and `req.service_cidr` (apart from each other
//! and from the nodes), and `req.cni`, the plugin that runs the pod network.

use super::request::enum_field;
use super::{
    Cni, DEFAULT_POD_CIDR, DEFAULT_SERVICE_CIDR, POD_CIDR_PREFIXES, SERVICE_CIDR_PREFIXES,
};
use crate::network::{self, Subnet, SubnetField, SubnetInput};
use crate::parse::{Obj, Parser, Warning, join};
use ipnet::Ipv4Net;
use std::ops::RangeInclusive;

/// The networks of a request, each `None` when refused.
pub(super) struct Networks {
    pub nodes_subnet: Option<Subnet>,
    pub pod_cidr: Option<Ipv4Net>,
    pub service_cidr: Option<Ipv4Net>,
}

/// `cni`, Calico when left out.
pub(super) fn parse_cni(p: &mut Parser, req: &mut Obj<'_>) -> Option<Cni> {
    enum_field(
        p,
        req,
        "cni",
        Cni::Calico,
        Cni::parse,
        "calico, cilium or flannel",
    )
}

/// `nodes_subnet`, `pod_cidr` and `service_cidr`; `nodes_max`, the most
/// nodes the cluster may have (when its pools are good), sizes them.
pub(super) fn parse_networks(
    p: &mut Parser,
    req: &mut Obj<'_>,
    nodes_max: Option<u32>,
) -> Networks {
    let subnet_path = join(req.path(), "nodes_subnet");
    let (nodes_cidr, subnet) = match p.object(req, "nodes_subnet", true) {
        Some(mut s) => {
            let out = parse_nodes_subnet(p, &mut s);
            p.done(s);
            out
        }
        None => (None, None),
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
    Networks {
        nodes_subnet: subnet,
        pod_cidr: pod_cidr.filter(|_| pod_ok),
        service_cidr: service_cidr.filter(|_| service_ok),
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
    use crate::kaas::fixtures::*;
    use crate::kaas::*;
    use serde_json::json;

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
    fn each_bad_network_field_is_named() {
        assert_refusals(vec![
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
            (with(|v| v["req"]["cni"] = json!("weave")), &["req.cni"]),
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
        ]);
    }
}
