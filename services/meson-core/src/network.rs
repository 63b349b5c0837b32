//! IPv4 subnets for private networks: CIDR parsing, the range of addresses
//! handed out, and the "next free address" rule (meson's IPAM).
//!
//! Shared by the KaaS `nodes_subnet` and the `/v1/networks` resource. The
//! rules, in one place:
//! - A subnet is an IPv4 CIDR written `address/prefix` with no host bits set
//!   (`192.168.1.0/24`; `192.168.1.5/24` is refused naming the network
//!   meant), prefix /8 to /29, outside the loopback, link-local, multicast,
//!   "this network" and reserved blocks.
//! - The network and broadcast addresses are never handed out, nor is the
//!   gateway (the first usable address unless given).
//! - A range that starts on the network address or ends on the broadcast
//!   address (real clients send `start_address: 192.168.1.0`) is clamped to
//!   the usable addresses, with a warning; any other address outside the
//!   subnet is refused.

use crate::labels::{self, Labels};
use crate::parse::{Obj, Parser, Warning, join};
use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::ops::RangeInclusive;

/// Prefix lengths accepted for a private network or a KaaS nodes subnet:
/// /29 is the smallest that still holds a gateway and a few hosts.
pub const SUBNET_PREFIXES: RangeInclusive<u8> = 8..=29;

/// Longest network name.
pub const MAX_NETWORK_NAME_LEN: usize = 63;

/// Blocks no private network may overlap, with the name used in messages.
const SPECIAL: &[(Ipv4Addr, u8, &str)] = &[
    (
        Ipv4Addr::new(0, 0, 0, 0),
        8,
        "\"this network\" block 0.0.0.0/8",
    ),
    (Ipv4Addr::new(127, 0, 0, 0), 8, "loopback block 127.0.0.0/8"),
    (
        Ipv4Addr::new(169, 254, 0, 0),
        16,
        "link-local block 169.254.0.0/16",
    ),
    (
        Ipv4Addr::new(224, 0, 0, 0),
        4,
        "multicast block 224.0.0.0/4",
    ),
    (Ipv4Addr::new(240, 0, 0, 0), 4, "reserved block 240.0.0.0/4"),
];

/// Parses a dotted-quad IPv4 address (`192.168.1.10`; no leading zeros, no prefix).
pub fn parse_ipv4(s: &str) -> Result<Ipv4Addr, String> {
    let t = s.trim();
    if t.contains('/') {
        return Err(format!(
            "must be a single IPv4 address such as 192.168.1.10, not a CIDR ('{t}')"
        ));
    }
    t.parse::<Ipv4Addr>()
        .map_err(|_| format!("must be an IPv4 address such as 192.168.1.10, got '{t}'"))
}

/// Parses an IPv4 CIDR `address/prefix` whose prefix lies in `prefixes`,
/// with no host bits set and outside the special-purpose blocks.
pub fn parse_cidr(s: &str, prefixes: RangeInclusive<u8>) -> Result<Ipv4Net, String> {
    let t = s.trim();
    let Some((addr, prefix)) = t.split_once('/') else {
        return Err(match t.parse::<Ipv4Addr>() {
            Ok(_) => {
                format!("must be a CIDR with a prefix length such as {t}/24, not a bare address")
            }
            Err(_) => format!("must be an IPv4 CIDR such as 192.168.1.0/24, got '{t}'"),
        });
    };
    let addr: Ipv4Addr = addr
        .parse()
        .map_err(|_| format!("must be an IPv4 CIDR such as 192.168.1.0/24, got '{t}'"))?;
    let prefix: u8 = match prefix.parse() {
        Ok(p) if p <= 32 && !prefix.starts_with('+') => p,
        _ => {
            return Err(format!(
                "the prefix length must be a number from 0 to 32, got '{prefix}'"
            ));
        }
    };
    if !prefixes.contains(&prefix) {
        return Err(format!(
            "the prefix length must be between /{} and /{}, got /{prefix}",
            prefixes.start(),
            prefixes.end()
        ));
    }
    let net = Ipv4Net::new(addr, prefix).map_err(|e| e.to_string())?;
    if net.network() != addr {
        return Err(format!("has host bits set: the network is {}", net.trunc()));
    }
    for (base, len, name) in SPECIAL {
        let special = Ipv4Net::new(*base, *len).map_err(|e| e.to_string())?;
        if overlaps(&net, &special) {
            return Err(format!("must not overlap the {name}"));
        }
    }
    Ok(net)
}

/// Whether two networks share any address.
pub fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// Whether a network lies in RFC 1918 private space or the shared 100.64.0.0/10 block.
pub fn is_private(net: &Ipv4Net) -> bool {
    [
        (Ipv4Addr::new(10, 0, 0, 0), 8),
        (Ipv4Addr::new(172, 16, 0, 0), 12),
        (Ipv4Addr::new(192, 168, 0, 0), 16),
        (Ipv4Addr::new(100, 64, 0, 0), 10),
    ]
    .iter()
    .filter_map(|(a, l)| Ipv4Net::new(*a, *l).ok())
    .any(|p| p.contains(net))
}

/// The addresses of `net` a host may use: all but the network and broadcast
/// addresses (for /31 and /32, every address, as RFC 3021 has it).
pub fn usable(net: &Ipv4Net) -> AddressRange {
    if net.prefix_len() >= 31 {
        return AddressRange {
            start: net.network(),
            last: net.broadcast(),
        };
    }
    AddressRange {
        start: Ipv4Addr::from(u32::from(net.network()) + 1),
        last: Ipv4Addr::from(u32::from(net.broadcast()) - 1),
    }
}

/// An inclusive range of IPv4 addresses, `start <= last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressRange {
    pub start: Ipv4Addr,
    pub last: Ipv4Addr,
}

impl AddressRange {
    /// `None` when `start > last`.
    pub fn new(start: Ipv4Addr, last: Ipv4Addr) -> Option<Self> {
        (start <= last).then_some(AddressRange { start, last })
    }

    /// Number of addresses in the range (at least 1).
    pub fn len(&self) -> u64 {
        u64::from(u32::from(self.last)) - u64::from(u32::from(self.start)) + 1
    }

    /// Never true; here for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        self.start <= ip && ip <= self.last
    }

    /// Every address, in order.
    pub fn iter(&self) -> impl Iterator<Item = Ipv4Addr> + use<> {
        (u32::from(self.start)..=u32::from(self.last)).map(Ipv4Addr::from)
    }
}

/// A validated subnet: where addresses come from and which are handed out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subnet {
    pub cidr: Ipv4Net,
    /// Never handed out.
    pub gateway: Ipv4Addr,
    /// True: a DHCP server hands out `range`; false: meson's IPAM does.
    pub dhcp: bool,
    /// The addresses handed out (minus the gateway if it lies inside),
    /// never the network or broadcast address.
    pub range: AddressRange,
}

impl Subnet {
    /// Whether `ip` may be handed to a host: inside the range and neither the
    /// network, broadcast nor gateway address.
    pub fn is_assignable(&self, ip: Ipv4Addr) -> bool {
        self.range.contains(ip)
            && ip != self.gateway
            && ip != self.cidr.network()
            && (self.cidr.prefix_len() >= 31 || ip != self.cidr.broadcast())
    }

    /// How many addresses can be handed out in all.
    pub fn capacity(&self) -> u64 {
        self.range
            .iter()
            .filter(|ip| self.is_assignable(*ip))
            .count() as u64
    }

    /// The assignable addresses not in `taken`, lowest first.
    pub fn free_addresses<'a>(
        &'a self,
        taken: &'a BTreeSet<Ipv4Addr>,
    ) -> impl Iterator<Item = Ipv4Addr> + 'a {
        self.range
            .iter()
            .filter(move |ip| self.is_assignable(*ip) && !taken.contains(ip))
    }

    /// The lowest assignable address not in `taken`, if any is left.
    pub fn next_free(&self, taken: &BTreeSet<Ipv4Addr>) -> Option<Ipv4Addr> {
        self.free_addresses(taken).next()
    }

    /// `n` free addresses, lowest first, or `None` when fewer are left.
    pub fn allocate(&self, n: usize, taken: &BTreeSet<Ipv4Addr>) -> Option<Vec<Ipv4Addr>> {
        let out: Vec<Ipv4Addr> = self.free_addresses(taken).take(n).collect();
        (out.len() == n).then_some(out)
    }
}

/// Which input of a subnet a problem or a remark is about; callers name it
/// with their own JSON path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubnetField {
    Gateway,
    Start,
    Last,
    /// The subnet as a whole (the range holds nothing, ...).
    Subnet,
}

/// A problem (or, among warnings, a remark) about one input of a subnet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubnetIssue {
    pub field: SubnetField,
    pub message: String,
}

/// The raw inputs of a subnet, already parsed as addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubnetInput {
    pub cidr: Ipv4Net,
    pub dhcp: bool,
    pub gateway: Option<Ipv4Addr>,
    pub start: Option<Ipv4Addr>,
    pub last: Option<Ipv4Addr>,
}

/// A subnet built from its inputs, with its remarks (clamping).
pub type Built = (Subnet, Vec<SubnetIssue>);

/// Validates a subnet's inputs: the gateway and both ends of the range
/// inside the CIDR, `start <= last`, the network/broadcast ends clamped
/// (with a remark), at least one address to hand out. Every problem is
/// returned, not only the first.
pub fn build_subnet(input: SubnetInput) -> Result<Built, Vec<SubnetIssue>> {
    let SubnetInput {
        cidr,
        dhcp,
        gateway,
        start,
        last,
    } = input;
    let usable = usable(&cidr);
    let (network, broadcast) = (cidr.network(), cidr.broadcast());
    let mut errors = Vec::new();
    let mut notes = Vec::new();
    let mut err = |field, message: String| errors.push(SubnetIssue { field, message });

    let gateway = match gateway {
        Some(g) if !cidr.contains(&g) => {
            err(SubnetField::Gateway, format!("{g} is outside {cidr}"));
            None
        }
        Some(g) if !usable.contains(g) => {
            err(
                SubnetField::Gateway,
                format!("{g} is the network or broadcast address of {cidr}"),
            );
            None
        }
        Some(g) => Some(g),
        None => Some(usable.start),
    };

    let start = match start {
        None => Some(usable.start),
        Some(s) if !cidr.contains(&s) => {
            err(
                SubnetField::Start,
                format!("{s} is outside the subnet {cidr}"),
            );
            None
        }
        Some(s) if s == network && usable.start != network => {
            notes.push(SubnetIssue {
                field: SubnetField::Start,
                message: format!(
                    "{s} is the network address and is never handed out; the range starts at {}",
                    usable.start
                ),
            });
            Some(usable.start)
        }
        Some(s) if s == broadcast && usable.last != broadcast => {
            err(
                SubnetField::Start,
                format!("{s} is the broadcast address of {cidr} and cannot start a range"),
            );
            None
        }
        Some(s) => Some(s),
    };
    let last = match last {
        None => Some(usable.last),
        Some(l) if !cidr.contains(&l) => {
            err(
                SubnetField::Last,
                format!("{l} is outside the subnet {cidr}"),
            );
            None
        }
        Some(l) if l == broadcast && usable.last != broadcast => {
            notes.push(SubnetIssue {
                field: SubnetField::Last,
                message: format!(
                    "{l} is the broadcast address and is never handed out; the range ends at {}",
                    usable.last
                ),
            });
            Some(usable.last)
        }
        Some(l) if l == network && usable.start != network => {
            err(
                SubnetField::Last,
                format!("{l} is the network address of {cidr} and cannot end a range"),
            );
            None
        }
        Some(l) => Some(l),
    };

    let (Some(gateway), Some(start), Some(last)) = (gateway, start, last) else {
        return Err(errors);
    };
    let Some(range) = AddressRange::new(start, last) else {
        err(
            SubnetField::Last,
            format!("{last} comes before the start of the range, {start}"),
        );
        return Err(errors);
    };
    let subnet = Subnet {
        cidr,
        gateway,
        dhcp,
        range,
    };
    if subnet.capacity() == 0 {
        err(
            SubnetField::Subnet,
            format!(
                "the range {start}-{last} holds no address to hand out (the gateway {gateway} is never handed out)"
            ),
        );
        return Err(errors);
    }
    if errors.is_empty() {
        Ok((subnet, notes))
    } else {
        Err(errors)
    }
}

/// A parsed `POST /v1/networks` body:
/// `{name, cidr, dhcp, dhcp_range{start,last} | start_address/last_address, gateway?, labels?}`.
#[derive(Clone, Debug, PartialEq)]
pub struct NetworkCreate {
    pub name: String,
    pub subnet: Subnet,
    pub labels: Labels,
    pub warnings: Vec<Warning>,
}

/// Reads an optional IPv4 address field, recording a bad one.
pub(crate) fn address(p: &mut Parser, o: &mut Obj<'_>, key: &'static str) -> Option<Ipv4Addr> {
    let (path, raw) = p.string(o, key, false)?;
    match parse_ipv4(raw) {
        Ok(ip) => Some(ip),
        Err(m) => {
            p.errors.add(path, m);
            None
        }
    }
}

/// Builds a subnet from inputs read by `p`, recording its problems (and its
/// remarks, as warnings) under the paths `name` gives each field. `inputs_bad`
/// says an input already failed to parse (its default stands in for it, so
/// the other inputs are still checked); then nothing is built and no
/// whole-subnet problem is reported.
pub(crate) fn check_subnet(
    p: &mut Parser,
    input: SubnetInput,
    inputs_bad: bool,
    name: impl Fn(SubnetField) -> String,
) -> Option<Subnet> {
    match build_subnet(input) {
        Ok((subnet, notes)) => {
            for n in notes {
                p.warnings.push(Warning {
                    field: name(n.field),
                    message: n.message,
                });
            }
            (!inputs_bad).then_some(subnet)
        }
        Err(issues) => {
            for i in issues {
                let path = name(i.field);
                if inputs_bad && (i.field == SubnetField::Subnet || p.errors.has(&path)) {
                    continue;
                }
                p.errors.add(path, i.message);
            }
            None
        }
    }
}

impl NetworkCreate {
    /// Parses and validates a network body, naming every bad field.
    pub fn parse(body: &Value) -> crate::Result<NetworkCreate> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let name = p.atomos_name(&mut root, "name", true, MAX_NETWORK_NAME_LEN);
        let labels = match root.get("labels") {
            (path, Some(v)) => labels::parse(&path, v, &mut p.errors),
            (_, None) => Some(Labels::new()),
        };
        let cidr = p.string(&mut root, "cidr", true).and_then(|(path, s)| {
            match parse_cidr(s, SUBNET_PREFIXES) {
                Ok(net) => Some(net),
                Err(m) => {
                    p.errors.add(path, m);
                    None
                }
            }
        });
        if let Some(net) = &cidr
            && !is_private(net)
        {
            p.warnings.push(Warning {
                field: "cidr".to_owned(),
                message: format!(
                    "{net} is not private address space (10/8, 172.16/12, 192.168/16, 100.64/10)"
                ),
            });
        }
        let dhcp = p.bool(&mut root, "dhcp");
        let gateway = address(&mut p, &mut root, "gateway");
        let gateway_bad = p.errors.has("gateway");

        // The range: `dhcp_range{start,last}` or the KaaS-style pair, not both.
        let has_pair = ["start_address", "last_address"]
            .iter()
            .any(|k| body.get(k).is_some_and(|v| !v.is_null()));
        let mut range = p.object(&mut root, "dhcp_range", false);
        let (start_path, last_path, start, last) = match range.as_mut() {
            Some(r) => {
                let start = address(&mut p, r, "start");
                let last = address(&mut p, r, "last");
                if has_pair {
                    p.errors.add(
                        "dhcp_range",
                        "give either dhcp_range or start_address/last_address, not both",
                    );
                }
                (join(r.path(), "start"), join(r.path(), "last"), start, last)
            }
            None => {
                let start = address(&mut p, &mut root, "start_address");
                let last = address(&mut p, &mut root, "last_address");
                (
                    "start_address".to_owned(),
                    "last_address".to_owned(),
                    start,
                    last,
                )
            }
        };
        root.accept(&["start_address", "last_address"]);
        let range_path = if range.is_some() {
            "dhcp_range".to_owned()
        } else {
            "start_address".to_owned()
        };
        let range_bad = [start_path.as_str(), last_path.as_str(), "dhcp_range"]
            .iter()
            .any(|f| p.errors.has(f));
        if let Some(r) = range {
            p.done(r);
        }
        p.done(root);

        let subnet = cidr.and_then(|cidr| {
            let input = SubnetInput {
                cidr,
                dhcp: dhcp.unwrap_or(true),
                gateway,
                start,
                last,
            };
            check_subnet(&mut p, input, gateway_bad || range_bad, |f| match f {
                SubnetField::Gateway => "gateway".to_owned(),
                SubnetField::Start => start_path.clone(),
                SubnetField::Last => last_path.clone(),
                SubnetField::Subnet => range_path.clone(),
            })
        });

        let Parser { errors, warnings } = p;
        match (name, subnet, labels) {
            (Some(name), Some(subnet), Some(labels)) if errors.is_empty() => Ok(NetworkCreate {
                name,
                subnet,
                labels,
                warnings,
            }),
            _ => Err(errors
                .into_error()
                .unwrap_or_else(|| crate::Error::invalid("(body)", "invalid request"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use serde_json::json;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    fn net(s: &str) -> Ipv4Net {
        parse_cidr(s, SUBNET_PREFIXES).unwrap()
    }

    fn input(cidr: &str, start: Option<&str>, last: Option<&str>) -> SubnetInput {
        SubnetInput {
            cidr: net(cidr),
            dhcp: false,
            gateway: None,
            start: start.map(ip),
            last: last.map(ip),
        }
    }

    fn fields(e: Error) -> Vec<String> {
        match e {
            Error::InvalidInput { fields } => fields.into_iter().map(|f| f.name).collect(),
            other => panic!("expected invalid_input, got {other:?}"),
        }
    }

    #[test]
    fn cidrs_need_a_prefix_no_host_bits_and_a_sane_size() {
        assert_eq!(net("192.168.1.0/24").prefix_len(), 24);
        assert_eq!(net(" 10.0.0.0/8 ").prefix_len(), 8);
        let err = |s: &str| parse_cidr(s, SUBNET_PREFIXES).unwrap_err();
        assert!(err("192.168.1.0").contains("not a bare address"));
        assert!(err("192.168.1.5/24").contains("the network is 192.168.1.0/24"));
        assert!(err("192.168.1.0/30").contains("between /8 and /29"));
        assert!(err("10.0.0.0/7").contains("between /8 and /29"));
        assert!(err("10.0.0.0/33").contains("0 to 32"));
        assert!(err("10.0.0.0/x").contains("0 to 32"));
        assert!(err("10.0.0.0/+8").contains("0 to 32"));
        assert!(err("300.0.0.0/8").contains("IPv4 CIDR"));
        assert!(err("fd00::/64").contains("IPv4 CIDR"));
        assert!(err("hello").contains("IPv4 CIDR"));
        assert!(err("127.0.0.0/8").contains("loopback"));
        assert!(err("169.254.0.0/24").contains("link-local"));
        assert!(err("224.0.0.0/8").contains("multicast"));
        assert!(err("0.0.0.0/8").contains("this network"));
    }

    #[test]
    fn addresses_are_dotted_quads() {
        assert_eq!(parse_ipv4(" 192.168.1.0 ").unwrap(), ip("192.168.1.0"));
        assert!(
            parse_ipv4("192.168.1.0/24")
                .unwrap_err()
                .contains("not a CIDR")
        );
        assert!(parse_ipv4("192.168.1").is_err());
        assert!(parse_ipv4("192.168.01.1").is_err());
        assert!(parse_ipv4("::1").is_err());
    }

    #[test]
    fn overlap_and_private_space() {
        assert!(overlaps(&net("10.0.0.0/8"), &net("10.96.0.0/12")));
        assert!(overlaps(&net("10.96.0.0/12"), &net("10.0.0.0/8")));
        assert!(!overlaps(&net("10.244.0.0/16"), &net("10.96.0.0/12")));
        assert!(is_private(&net("192.168.1.0/24")));
        assert!(is_private(&net("100.64.0.0/16")));
        assert!(!is_private(&net("8.8.8.0/24")));
        assert!(!is_private(&net("172.0.0.0/8")));
    }

    #[test]
    fn usable_addresses_exclude_network_and_broadcast() {
        let u = usable(&net("192.168.1.0/24"));
        assert_eq!((u.start, u.last), (ip("192.168.1.1"), ip("192.168.1.254")));
        assert_eq!(u.len(), 254);
        let tiny = Ipv4Net::new(ip("10.0.0.0"), 31).unwrap();
        assert_eq!(usable(&tiny).len(), 2);
    }

    #[test]
    fn the_seed_range_is_clamped_off_the_network_address() {
        let (s, notes) = build_subnet(input(
            "192.168.1.0/24",
            Some("192.168.1.0"),
            Some("192.168.1.24"),
        ))
        .unwrap();
        assert_eq!(s.range.start, ip("192.168.1.1"));
        assert_eq!(s.range.last, ip("192.168.1.24"));
        assert_eq!(s.gateway, ip("192.168.1.1"));
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].field, SubnetField::Start);
        assert!(notes[0].message.contains("starts at 192.168.1.1"));
        // .1 is the gateway: .2 to .24 are handed out.
        assert_eq!(s.capacity(), 23);
        assert!(!s.is_assignable(ip("192.168.1.0")));
        assert!(!s.is_assignable(ip("192.168.1.1")));
        assert!(s.is_assignable(ip("192.168.1.2")));
        assert!(!s.is_assignable(ip("192.168.1.25")));
    }

    #[test]
    fn the_broadcast_end_is_clamped_and_defaults_fill_the_subnet() {
        let (s, notes) = build_subnet(input("10.0.0.0/29", None, Some("10.0.0.7"))).unwrap();
        assert_eq!(s.range.last, ip("10.0.0.6"));
        assert_eq!(notes[0].field, SubnetField::Last);
        let (s, notes) = build_subnet(input("10.0.0.0/29", None, None)).unwrap();
        assert!(notes.is_empty());
        assert_eq!(
            (s.range.start, s.range.last),
            (ip("10.0.0.1"), ip("10.0.0.6"))
        );
        assert_eq!(s.capacity(), 5);
    }

    #[test]
    fn bad_ranges_name_each_end() {
        let issues = |i| {
            let mut v: Vec<SubnetField> = build_subnet(i)
                .unwrap_err()
                .into_iter()
                .map(|i| i.field)
                .collect();
            v.sort_by_key(|f| *f as u8);
            v
        };
        assert_eq!(
            issues(input(
                "192.168.1.0/24",
                Some("192.168.2.1"),
                Some("10.0.0.1")
            )),
            [SubnetField::Start, SubnetField::Last]
        );
        assert_eq!(
            issues(input(
                "192.168.1.0/24",
                Some("192.168.1.20"),
                Some("192.168.1.10")
            )),
            [SubnetField::Last]
        );
        assert_eq!(
            issues(input("192.168.1.0/24", Some("192.168.1.255"), None)),
            [SubnetField::Start]
        );
        assert_eq!(
            issues(input("192.168.1.0/24", None, Some("192.168.1.0"))),
            [SubnetField::Last]
        );
        // Only the gateway in the range: nothing to hand out.
        assert_eq!(
            issues(input(
                "192.168.1.0/24",
                Some("192.168.1.1"),
                Some("192.168.1.1")
            )),
            [SubnetField::Subnet]
        );
        let mut i = input("192.168.1.0/24", None, None);
        i.gateway = Some(ip("192.168.1.255"));
        assert_eq!(issues(i), [SubnetField::Gateway]);
        i.gateway = Some(ip("10.0.0.1"));
        assert_eq!(issues(i), [SubnetField::Gateway]);
    }

    #[test]
    fn next_free_skips_gateway_and_taken_addresses() {
        let mut i = input("10.1.0.0/28", Some("10.1.0.1"), Some("10.1.0.5"));
        i.gateway = Some(ip("10.1.0.3"));
        let (s, _) = build_subnet(i).unwrap();
        let mut taken = BTreeSet::new();
        assert_eq!(s.next_free(&taken), Some(ip("10.1.0.1")));
        taken.insert(ip("10.1.0.1"));
        taken.insert(ip("10.1.0.2"));
        assert_eq!(s.next_free(&taken), Some(ip("10.1.0.4")));
        assert_eq!(
            s.allocate(2, &taken),
            Some(vec![ip("10.1.0.4"), ip("10.1.0.5")])
        );
        assert_eq!(s.allocate(3, &taken), None);
        taken.extend([ip("10.1.0.4"), ip("10.1.0.5")]);
        assert_eq!(s.next_free(&taken), None);
        assert_eq!(s.capacity(), 4);
    }

    #[test]
    fn subnet_round_trips_through_json() {
        let (s, _) = build_subnet(input("192.168.1.0/24", None, Some("192.168.1.24"))).unwrap();
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v,
            json!({"cidr": "192.168.1.0/24", "gateway": "192.168.1.1", "dhcp": false,
                   "range": {"start": "192.168.1.1", "last": "192.168.1.24"}})
        );
        assert_eq!(serde_json::from_value::<Subnet>(v).unwrap(), s);
    }

    #[test]
    fn network_bodies_parse_with_either_range_shape() {
        let n = NetworkCreate::parse(&json!({
            "name": "nodes", "cidr": "192.168.1.0/24", "dhcp": "False",
            "dhcp_range": {"start": "192.168.1.0", "last": "192.168.1.24"},
            "labels": {"env": "dev"}
        }))
        .unwrap();
        assert_eq!(n.subnet.range.start, ip("192.168.1.1"));
        assert!(!n.subnet.dhcp);
        assert_eq!(n.labels["env"], "dev");
        assert_eq!(n.warnings[0].field, "dhcp_range.start");

        let n = NetworkCreate::parse(&json!({
            "name": "nodes", "cidr": "10.0.0.0/16", "dhcp": true, "gateway": "10.0.0.254",
            "start_address": "10.0.0.10", "last_address": "10.0.0.200"
        }))
        .unwrap();
        assert_eq!(n.subnet.gateway, ip("10.0.0.254"));
        assert!(n.subnet.dhcp && n.warnings.is_empty());
        assert_eq!(n.subnet.capacity(), 191);

        let n =
            NetworkCreate::parse(&json!({"name": "pub", "cidr": "8.8.8.0/24", "x": 1})).unwrap();
        let w: Vec<&str> = n.warnings.iter().map(|w| w.field.as_str()).collect();
        assert_eq!(w, ["cidr", "x"]);
    }

    #[test]
    fn network_bodies_name_every_bad_field() {
        let mut names = fields(
            NetworkCreate::parse(&json!({
                "name": "bad_name", "cidr": "192.168.1.0/24", "dhcp": "maybe",
                "start_address": "192.168.2.1", "last_address": "nope",
                "labels": {"-x": "y"}
            }))
            .unwrap_err(),
        );
        names.sort();
        assert_eq!(
            names,
            ["dhcp", "labels.-x", "last_address", "name", "start_address"]
        );

        let names = fields(
            NetworkCreate::parse(&json!({
                "name": "n", "cidr": "192.168.1.0/24",
                "dhcp_range": {"start": "192.168.1.30", "last": "192.168.1.20"}
            }))
            .unwrap_err(),
        );
        assert_eq!(names, ["dhcp_range.last"]);

        let names = fields(
            NetworkCreate::parse(&json!({
                "name": "n", "cidr": "192.168.1.0/24",
                "dhcp_range": {"start": "192.168.1.30"}, "start_address": "192.168.1.2"
            }))
            .unwrap_err(),
        );
        assert_eq!(names, ["dhcp_range"]);

        assert_eq!(
            fields(NetworkCreate::parse(&json!({"name": "n", "cidr": "192.168.1.0"})).unwrap_err()),
            ["cidr"]
        );
        assert_eq!(
            fields(NetworkCreate::parse(&json!({})).unwrap_err()),
            ["name", "cidr"]
        );
        assert_eq!(
            fields(NetworkCreate::parse(&json!([])).unwrap_err()),
            ["(body)"]
        );
    }
}

// ---- The `/v1/networks` resource (kept below the subnet rules it uses). ----

/// A tenant's private network, as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Network {
    pub id: crate::NetworkId,
    pub tenant: crate::TenantId,
    pub name: String,
    pub status: NetworkStatus,
    pub labels: Labels,
    pub subnet: Subnet,
    pub created: chrono::DateTime<chrono::Utc>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkStatus {
    Available,
    /// Being removed from the AtomOS hosts it was made on.
    Deleting,
}

impl NetworkStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkStatus::Available => "available",
            NetworkStatus::Deleting => "deleting",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "available" => Some(NetworkStatus::Available),
            "deleting" => Some(NetworkStatus::Deleting),
            _ => None,
        }
    }
}

/// A VM's NIC on a network: its MAC and, when meson's IPAM handed it out
/// (no DHCP), its address.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    pub vm_id: crate::VmId,
    pub network_id: crate::NetworkId,
    pub position: u16,
    pub mac: String,
    pub address: Option<Ipv4Addr>,
}

/// A random MAC in QEMU's `52:54:00` block, for a NIC the guest must find
/// by MAC (its network-config matches on it).
pub fn random_mac() -> String {
    let b: [u8; 3] = rand::random();
    format!("52:54:00:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2])
}
