//! Network routes: list, info, create, delete; port forwards: list, create, delete.

use super::{ApiError, ApiResult, ok, parse};
use crate::host::SimHost;
use crate::state::{SimNetwork, SimPortForward};
use atomos_driver::schema::network::{
    Dhcp, IpConfig, NetworkCreateBody, NetworkInfoResponse, NetworkObject, NetworkUidBody,
    PortForwardObject, PortForwardUidBody,
};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{delete, get, post};
use serde_json::json;
use std::net::Ipv4Addr;

pub(super) fn routes() -> Router<SimHost> {
    Router::new()
        .route("/list", get(list))
        .route("/info", post(info))
        .route("/create", post(create))
        .route("/delete", delete(remove))
        .route("/portforwards", get(forwards))
        .route("/portforward", post(forward_create).delete(forward_delete))
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

fn forward_to_wire(host: &SimHost, f: &SimPortForward) -> PortForwardObject {
    PortForwardObject {
        serverurl: Some(host.server_url()),
        protocol: f.protocol.clone(),
        port: u32::from(f.port),
        target: f.vm_name.clone(),
        target_vm_uid: f.vm_id.clone(),
        target_port: u32::from(f.target_port),
        tailscale: false,
        force: false,
        forward_uid: f.id.clone(),
    }
}

/// A port-forward body checked field by field (the VM is the caller's to
/// find); `vm_name` is the body's `target` until then.
fn requested_forward(body: PortForwardObject) -> Result<SimPortForward, ApiError> {
    if body.forward_uid.trim().is_empty() {
        return Err(ApiError::bad_request("forward_uid is required"));
    }
    if !matches!(body.protocol.as_str(), "tcp" | "udp") {
        return Err(ApiError::bad_request(format!(
            "protocol {:?} must be tcp or udp",
            body.protocol
        )));
    }
    let port = |what: &str, p: u32| {
        u16::try_from(p)
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| ApiError::bad_request(format!("{what} {p} must be between 1 and 65535")))
    };
    let (host_port, target_port) = (
        port("port", body.port)?,
        port("target_port", body.target_port)?,
    );
    if body.target_vm_uid.trim().is_empty() {
        return Err(ApiError::bad_request("target_vm_uid is required"));
    }
    if body.tailscale {
        return Err(ApiError::bad_request(
            "tailscale: forwarding through a tailnet is not simulated",
        ));
    }
    Ok(SimPortForward {
        id: body.forward_uid,
        protocol: body.protocol,
        port: host_port,
        vm_id: body.target_vm_uid,
        vm_name: body.target,
        target_port,
    })
}

/// A port the OS would not bind: taken (or reserved) is a refusal, anything
/// else the host's own failure.
fn bind_refused(f: &SimPortForward, e: &std::io::Error) -> ApiError {
    use std::io::ErrorKind::{AddrInUse, AddrNotAvailable, PermissionDenied};
    if matches!(e.kind(), AddrInUse | AddrNotAvailable | PermissionDenied) {
        ApiError::conflict(format!(
            "[PortInUse] port {} cannot be bound on the host: {e}",
            f.label()
        ))
    } else {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "[PortForwardFailed] port {} cannot be bound: {e}",
                f.label()
            ),
        )
    }
}

async fn forwards(State(host): State<SimHost>) -> ApiResult {
    let state = host.state();
    let rows: Vec<PortForwardObject> = state
        .port_forwards
        .iter()
        .map(|f| forward_to_wire(&host, f))
        .collect();
    ok(rows)
}

/// `POST /portforward`: forwards `protocol` `port` of the host (on
/// 127.0.0.1, for real) to `target_port` of VM `target_vm_uid`, and answers
/// the stored forward. The same `forward_uid` with the same protocol, ports
/// and VM answers the forward made before (a retried create); with another,
/// 409. `target` is informative: the host records its VM's own name.
/// `force` is ignored.
async fn forward_create(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let want = requested_forward(parse(&body)?)?;
    let mut state = host.state();
    if let Some(have) = state.port_forwards.iter().find(|f| f.id == want.id) {
        let same = (&have.protocol, have.port, &have.vm_id, have.target_port)
            == (&want.protocol, want.port, &want.vm_id, want.target_port);
        if same {
            return ok(forward_to_wire(&host, have));
        }
        return Err(ApiError::conflict(format!(
            "[PortForwardExists] port forward {} already forwards port {} to port {} of VM {}",
            have.id,
            have.label(),
            have.target_port,
            have.vm_id
        )));
    }
    let vm = state
        .vms
        .iter()
        .find(|vm| vm.id == want.vm_id)
        .ok_or_else(|| {
            ApiError::not_found(format!("[VmNotFound] VM {} does not exist", want.vm_id))
        })?;
    let forward = SimPortForward {
        vm_name: vm.name.clone(),
        ..want
    };
    if let Some(other) = state
        .port_forwards
        .iter()
        .find(|f| f.protocol == forward.protocol && f.port == forward.port)
    {
        return Err(ApiError::conflict(format!(
            "[PortInUse] port {} is forwarded to VM {} by port forward {}",
            forward.label(),
            other.vm_name,
            other.id
        )));
    }
    // Bound before the answer: a port something else holds is refused now.
    let socket = crate::forward::bind(&forward.protocol, forward.port)
        .map_err(|e| bind_refused(&forward, &e))?;
    if !host.start_forward(forward.clone(), Some(socket)) {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the simulator is shutting down",
        ));
    }
    tracing::info!(host = host.name(), forward = %forward.id, port = %forward.label(),
        vm = %forward.vm_name, target_port = forward.target_port, "port forward created");
    let answer = forward_to_wire(&host, &forward);
    state.port_forwards.push(forward);
    ok(answer)
}

/// `DELETE /portforward {"forward_uid"}`: the port is closed (and the
/// forward's connections) before the answer.
async fn forward_delete(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let PortForwardUidBody { forward_uid } = parse(&body)?;
    if forward_uid.trim().is_empty() {
        return Err(ApiError::bad_request("forward_uid is required"));
    }
    let task = {
        let mut state = host.state();
        let i = state
            .port_forwards
            .iter()
            .position(|f| f.id == forward_uid)
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "[PortForwardNotFound] port forward {forward_uid} does not exist"
                ))
            })?;
        let forward = state.port_forwards.remove(i);
        tracing::info!(host = host.name(), forward = %forward.id, port = %forward.label(), "port forward deleted");
        host.forwards().stop(&forward.id)
    };
    if let Some(task) = task {
        // Aborted: done once its listener is dropped.
        let _ = task.await;
    }
    ok(json!({ "forward_uid": forward_uid }))
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

    #[test]
    fn port_forward_bodies_are_checked_by_field() {
        let good = || PortForwardObject {
            protocol: "tcp".into(),
            port: 20000,
            target: "web".into(),
            target_vm_uid: "vm".into(),
            target_port: 22,
            forward_uid: "fw".into(),
            ..PortForwardObject::default()
        };
        assert_eq!(requested_forward(good()).unwrap().label(), "20000/tcp");
        for (field, bad) in [
            (
                "forward_uid",
                PortForwardObject {
                    forward_uid: " ".into(),
                    ..good()
                },
            ),
            (
                "protocol",
                PortForwardObject {
                    protocol: "icmp".into(),
                    ..good()
                },
            ),
            (
                "protocol",
                PortForwardObject {
                    protocol: "TCP".into(),
                    ..good()
                },
            ),
            ("port", PortForwardObject { port: 0, ..good() }),
            (
                "port",
                PortForwardObject {
                    port: 65536,
                    ..good()
                },
            ),
            (
                "target_port",
                PortForwardObject {
                    target_port: 0,
                    ..good()
                },
            ),
            (
                "target_port",
                PortForwardObject {
                    target_port: 70000,
                    ..good()
                },
            ),
            (
                "target_vm_uid",
                PortForwardObject {
                    target_vm_uid: String::new(),
                    ..good()
                },
            ),
            (
                "tailscale",
                PortForwardObject {
                    tailscale: true,
                    ..good()
                },
            ),
        ] {
            let err = requested_forward(bad).unwrap_err();
            assert_eq!(err.status, StatusCode::BAD_REQUEST, "{field}");
            assert!(err.detail.contains(field), "{field}: {}", err.detail);
        }
    }
}
