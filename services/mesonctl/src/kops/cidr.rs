//! IPv4 networks: the nodes' network from `--network-cidr`, its DHCP
//! range, and pod and service networks that do not overlap it.

use super::Report;
use meson_types::kaas::NodesSubnetRequest;
use std::net::Ipv4Addr;

/// kOps' default network for the cluster (`--network-cidr`).
pub const KOPS_DEFAULT_NETWORK: &str = "172.20.0.0/16";
/// meson's pod and service networks, and kOps' own when the nodes'
/// network overlaps meson's.
const POD_SERVICE_CIDRS: [(&str, &str); 2] = [
    ("10.244.0.0/16", "10.96.0.0/12"),
    ("100.96.0.0/11", "100.64.0.0/13"),
];

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
pub(super) fn nodes_network(
    given: Option<(String, Vec<String>)>,
    reports: &mut Vec<Report>,
) -> String {
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

/// The nodes' network with DHCP. The range is given, not left to meson's
/// default (every usable address), which would leave none for the API
/// endpoint: the gateway (the first usable address) and the last usable
/// address, where meson puts the endpoint, stay out of it.
pub(super) fn nodes_subnet(cidr: String) -> NodesSubnetRequest {
    let range = ipv4_net(&cidr).map(|(addr, prefix)| {
        let net = u32::from(addr) & mask(prefix);
        let broadcast = net | !mask(prefix);
        (
            Ipv4Addr::from(net + 2).to_string(),
            Ipv4Addr::from(broadcast - 2).to_string(),
        )
    });
    NodesSubnetRequest {
        dhcp: Some(true),
        subnet_netmask: cidr,
        start_address: range.as_ref().map(|r| r.0.clone()),
        last_address: range.map(|r| r.1),
        gateway: None,
    }
}

/// `(pod, service)` networks: meson's defaults (`None`), or kOps' own when
/// the nodes' network overlaps meson's.
pub(super) fn pod_service_cidrs(nodes: &str) -> (Option<&'static str>, Option<&'static str>) {
    let Some(nodes_net) = ipv4_net(nodes) else {
        return (None, None);
    };
    let fits = |(pod, svc): (&str, &str)| {
        [pod, svc]
            .iter()
            .filter_map(|c| ipv4_net(c))
            .all(|n| !overlaps(n, nodes_net))
    };
    if !fits(POD_SERVICE_CIDRS[0]) && fits(POD_SERVICE_CIDRS[1]) {
        (Some(POD_SERVICE_CIDRS[1].0), Some(POD_SERVICE_CIDRS[1].1))
    } else {
        (None, None)
    }
}
