//! Network routes: list, info, create, delete.

use super::{ApiError, ApiResult, ok, parse};
use crate::host::SimHost;
use crate::state::SimNetwork;
use atomos_driver::schema::network::{
    Dhcp, IpConfig, NetworkCreateBody, NetworkInfoResponse, NetworkObject, NetworkUidBody,
};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::{delete, get, post};
use serde_json::json;
use std::net::Ipv4Addr;

pub(super) fn routes() -> Router<SimHost> {
    Router::new()
        .route("/list", get(list))
        .route("/info", post(info))
        .route("/create", post(create))
        .route("/delete", delete(remove))
}

fn network_to_wire(host: &SimHost, n: &SimNetwork) -> NetworkObject {
    let dhcp = match (&n.dhcp_start, &n.dhcp_end) {
        (Some(start), Some(end)) => Some(Dhcp {
            start: start.clone(),
            end: end.clone(),
            hosts: Vec::new(),
        }),
        _ => None,
    };
    NetworkObject {
        network_uid: n.id.clone(),
        network_name: n.name.clone(),
        creator_uid: Some("sim".to_owned()),
        device_name: None,
        libvirt_network: Some(n.name.clone()),
        kind: Some("libvirt".to_owned()),
        mode: Some(n.mode.clone()),
        private: Some(true),
        serverurl: Some(format!("{}:7776", host.server_url())),
        servers: Vec::new(),
        ip: Some(IpConfig {
            address: n.cidr.clone(),
            net_bits: prefix_len(&n.cidr),
            dhcp,
        }),
        routes: Vec::new(),
        headscale: None,
    }
}

/// Prefix length of `a.b.c.d/p`, or `None` when it is not IPv4 CIDR.
fn prefix_len(cidr: &str) -> Option<u8> {
    let (addr, prefix) = cidr.split_once('/')?;
    addr.parse::<Ipv4Addr>().ok()?;
    prefix.parse::<u8>().ok().filter(|p| *p <= 32)
}

fn parse_ip(what: &str, value: &str) -> Result<Ipv4Addr, ApiError> {
    value
        .parse::<Ipv4Addr>()
        .map_err(|_| ApiError::bad_request(format!("{what} {value:?} is not an IPv4 address")))
}

/// Whether `ip` lies in the subnet of `cidr` (already checked by [`prefix_len`]).
pub(super) fn in_subnet(cidr: &str, ip: Ipv4Addr) -> bool {
    let (Some((addr, _)), Some(prefix)) = (cidr.split_once('/'), prefix_len(cidr)) else {
        return false;
    };
    let Ok(addr) = addr.parse::<Ipv4Addr>() else {
        return false;
    };
    let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
    u32::from(addr) & mask == u32::from(ip) & mask
}

async fn list(State(host): State<SimHost>) -> ApiResult {
    let state = host.state();
    let rows: Vec<NetworkObject> = state
        .networks
        .iter()
        .map(|n| network_to_wire(&host, n))
        .collect();
    ok(rows)
}

async fn info(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let NetworkUidBody { network_uid } = parse(&body)?;
    let state = host.state();
    let n = state
        .networks
        .iter()
        .find(|n| n.id == network_uid)
        .ok_or_else(|| ApiError::not_found(format!("network {network_uid} does not exist")))?;
    ok(NetworkInfoResponse {
        network: network_to_wire(&host, n),
    })
}

async fn create(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let body: NetworkCreateBody = parse(&body)?;
    if body.network_name.trim().is_empty() {
        return Err(ApiError::bad_request("network_name is required"));
    }
    if prefix_len(&body.ip.address).is_none() {
        return Err(ApiError::bad_request(format!(
            "ip.address {:?} must be IPv4 CIDR like 192.168.101.1/24",
            body.ip.address
        )));
    }
    if let Some(dhcp) = &body.ip.dhcp {
        let start = parse_ip("dhcp.start", &dhcp.start)?;
        let end = parse_ip("dhcp.end", &dhcp.end)?;
        if start > end {
            return Err(ApiError::bad_request(format!(
                "dhcp.start {start} comes after dhcp.end {end}"
            )));
        }
        for (what, ip) in [("dhcp.start", start), ("dhcp.end", end)] {
            if !in_subnet(&body.ip.address, ip) {
                return Err(ApiError::bad_request(format!(
                    "{what} {ip} is outside {}",
                    body.ip.address
                )));
            }
        }
    }
    let mut state = host.state();
    if state.networks.iter().any(|n| n.name == body.network_name) {
        return Err(ApiError::conflict(format!(
            "network {} already exists",
            body.network_name
        )));
    }
    let network = SimNetwork {
        id: uuid::Uuid::new_v4().to_string(),
        name: body.network_name,
        cidr: body.ip.address,
        mode: if body.mode.is_empty() {
            "nat".to_owned()
        } else {
            body.mode
        },
        dhcp_start: body.ip.dhcp.as_ref().map(|d| d.start.clone()),
        dhcp_end: body.ip.dhcp.map(|d| d.end),
    };
    let answer = network_to_wire(&host, &network);
    tracing::info!(host = host.name(), network = %network.name, id = %network.id, "network created");
    state.networks.push(network);
    ok(answer)
}

async fn remove(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let NetworkUidBody { network_uid } = parse(&body)?;
    let mut state = host.state();
    let i = state
        .networks
        .iter()
        .position(|n| n.id == network_uid)
        .ok_or_else(|| ApiError::not_found(format!("network {network_uid} does not exist")))?;
    if let Some(vm) = state
        .vms
        .iter()
        .find(|vm| vm.network_ids.contains(&network_uid))
    {
        return Err(ApiError::bad_request(format!(
            "[NetworkInUse] network {network_uid} is used by VM {}",
            vm.name
        )));
    }
    state.networks.remove(i);
    ok(json!({ "network_uid": network_uid }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_checks() {
        assert_eq!(prefix_len("192.168.101.1/24"), Some(24));
        assert_eq!(prefix_len("10.0.0.0/33"), None);
        assert_eq!(prefix_len("10.0.0.0"), None);
        assert_eq!(prefix_len("fd00::/64"), None);
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        assert!(in_subnet("192.168.101.1/24", ip("192.168.101.254")));
        assert!(!in_subnet("192.168.101.1/24", ip("192.168.102.2")));
        assert!(in_subnet("10.0.0.1/0", ip("192.168.1.1")));
        assert!(in_subnet("10.0.0.1/32", ip("10.0.0.1")));
        assert!(!in_subnet("10.0.0.1/32", ip("10.0.0.2")));
        assert!(!in_subnet("bogus", ip("10.0.0.2")));
    }
}
