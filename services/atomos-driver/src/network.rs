//! Network daemon: networks (list, info, create then find by name, delete)
//! and port forwards (list, create, delete).

use crate::client::{AtomosClient, Call, Daemon};
use crate::error::{DriverError, ErrorKind};
use crate::schema::ListOf;
use crate::schema::network::{
    Dhcp, IpConfig, NetworkCreateBody, NetworkInfoResponse, NetworkObject, NetworkUidBody,
    PortForwardObject, PortForwardUidBody,
};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Network {
    pub id: String,
    pub name: String,
    /// The network's `ip.address` as given at create (gateway/prefix form).
    pub cidr: Option<String>,
    pub dhcp_start: Option<String>,
    pub dhcp_end: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkCreate {
    pub name: String,
    pub cidr: String,
    /// Both set to enable DHCP over that range.
    pub dhcp_start: Option<String>,
    pub dhcp_end: Option<String>,
}

/// A port forward of the host: `protocol` `port` on the host's address to
/// `target_port` of VM `vm_id`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortForward {
    /// `forward_uid`, chosen by whoever created it.
    pub id: String,
    /// `tcp` or `udp`, lowercase.
    pub protocol: String,
    /// The host's port.
    pub port: u16,
    /// The VM's `uniqueID`.
    pub vm_id: String,
    pub vm_name: String,
    /// The guest's port.
    pub target_port: u16,
}

/// A port forward to make. The caller chooses `id`, so that a create
/// repeated after a lost answer finds the forward it made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortForwardCreate {
    pub id: String,
    /// `tcp` or `udp`.
    pub protocol: String,
    pub port: u16,
    /// The VM's `uniqueID`.
    pub vm_id: String,
    pub vm_name: String,
    pub target_port: u16,
}

impl AtomosClient {
    pub async fn networks(&self) -> Result<Vec<Network>, DriverError> {
        let list: ListOf<NetworkObject> = self.get_json(Daemon::Network, "/list").await?;
        Ok(list.into_vec().into_iter().map(network_from_wire).collect())
    }

    pub async fn network_info(&self, id: &str) -> Result<Network, DriverError> {
        let call = Call::post(Daemon::Network, "/info").safe();
        let body = NetworkUidBody {
            network_uid: id.to_owned(),
        };
        let answer: NetworkInfoResponse = self.send_json(&call, &body).await?.json(&call.route)?;
        Ok(network_from_wire(answer.network))
    }

    /// Creates a NAT network. The answer is opaque, so the network is found
    /// again by name in `/list` (as the thesis client does; docs/atomos.md).
    pub async fn network_create(&self, req: &NetworkCreate) -> Result<Network, DriverError> {
        let call = Call::post(Daemon::Network, "/create");
        self.send_json(&call, &create_to_wire(req)).await?;
        self.networks()
            .await?
            .into_iter()
            .find(|n| n.name == req.name)
            .ok_or_else(|| not_listed_yet(&call, &format!("network {}", req.name)))
    }

    /// `DELETE /delete` with a JSON body.
    pub async fn network_delete(&self, id: &str) -> Result<(), DriverError> {
        let call = Call::delete(Daemon::Network, "/delete");
        self.send_json(
            &call,
            &NetworkUidBody {
                network_uid: id.to_owned(),
            },
        )
        .await?;
        Ok(())
    }

    /// `GET /portforwards`: every port forward of the host.
    pub async fn port_forwards(&self) -> Result<Vec<PortForward>, DriverError> {
        const ROUTE: &str = "network/portforwards";
        let list: ListOf<PortForwardObject> =
            self.get_json(Daemon::Network, "/portforwards").await?;
        list.into_vec()
            .into_iter()
            .map(|f| forward_from_wire(f).map_err(|why| DriverError::undecodable(ROUTE, 200, why)))
            .collect()
    }

    /// `POST /portforward`: forwards `req.protocol` `req.port` of the host to
    /// `req.target_port` of VM `req.vm_id`; answers the forward as stored.
    /// Never retried automatically, but safe to repeat: the same id with the
    /// same spec answers the forward made before. Refusals:
    /// [`ErrorKind::AlreadyExists`] (409) when the port is taken on the host,
    /// by another forward or anything else listening there (`[PortInUse]`),
    /// or when the id is a forward with another spec; [`ErrorKind::NotFound`]
    /// (404, `[VmNotFound]`) when the VM is not on the host;
    /// [`ErrorKind::Invalid`] (400) for a protocol or port the host refuses.
    pub async fn port_forward_create(
        &self,
        req: &PortForwardCreate,
    ) -> Result<PortForward, DriverError> {
        let call = Call::post(Daemon::Network, "/portforward");
        let reply = self.send_json(&call, &forward_to_wire(req)).await?;
        // The answer is the stored forward; should a host answer anything
        // else, the forward is found again by its id.
        if let Ok(answer) = reply.json::<PortForwardObject>(&call.route)
            && let Ok(forward) = forward_from_wire(answer)
            && forward.id == req.id
        {
            return Ok(forward);
        }
        self.port_forwards()
            .await?
            .into_iter()
            .find(|f| f.id == req.id)
            .ok_or_else(|| not_listed_yet(&call, &format!("port forward {}", req.id)))
    }

    /// `DELETE /portforward` with a JSON body. An unknown id is
    /// [`ErrorKind::NotFound`] (404, `[PortForwardNotFound]`): already gone.
    pub async fn port_forward_delete(&self, id: &str) -> Result<(), DriverError> {
        let call = Call::delete(Daemon::Network, "/portforward");
        self.send_json(
            &call,
            &PortForwardUidBody {
                forward_uid: id.to_owned(),
            },
        )
        .await?;
        Ok(())
    }
}

/// A create the host accepted but does not list yet: transient (the list
/// may just lag behind), so the caller asks again.
fn not_listed_yet(call: &Call, what: &str) -> DriverError {
    DriverError::new(
        ErrorKind::Transient,
        &call.route,
        None,
        format!("{what} created but not listed yet"),
    )
}

fn forward_to_wire(req: &PortForwardCreate) -> PortForwardObject {
    PortForwardObject {
        // The host knows its own URL; the GUI's optional fields are sent
        // with the GUI's defaults.
        serverurl: None,
        protocol: req.protocol.to_ascii_lowercase(),
        port: u32::from(req.port),
        target: req.vm_name.clone(),
        target_vm_uid: req.vm_id.clone(),
        target_port: u32::from(req.target_port),
        tailscale: false,
        force: false,
        forward_uid: req.id.clone(),
    }
}

/// A forward whose ports are not ports is refused, naming it.
fn forward_from_wire(f: PortForwardObject) -> Result<PortForward, String> {
    let port = |what: &str, p: u32| {
        u16::try_from(p)
            .map_err(|_| format!("port forward {:?}: {what} {p} is not a port", f.forward_uid))
    };
    let (port, target_port) = (port("port", f.port)?, port("target_port", f.target_port)?);
    Ok(PortForward {
        id: f.forward_uid,
        protocol: f.protocol.to_ascii_lowercase(),
        port,
        vm_id: f.target_vm_uid,
        vm_name: f.target,
        target_port,
    })
}

fn create_to_wire(req: &NetworkCreate) -> NetworkCreateBody {
    let dhcp = match (&req.dhcp_start, &req.dhcp_end) {
        (Some(start), Some(end)) => Some(Dhcp {
            start: start.clone(),
            end: end.clone(),
            hosts: Vec::new(),
        }),
        _ => None,
    };
    NetworkCreateBody {
        serverurl: None,
        network_name: req.name.clone(),
        kind: "libvirt".to_owned(),
        mode: "nat".to_owned(),
        private: true,
        ip: IpConfig {
            address: req.cidr.clone(),
            net_bits: None,
            dhcp,
        },
        routes: Vec::new(),
    }
}

fn network_from_wire(n: NetworkObject) -> Network {
    let (cidr, dhcp) = match n.ip {
        Some(ip) => (Some(ip.address).filter(|a| !a.is_empty()), ip.dhcp),
        None => (None, None),
    };
    Network {
        id: n.network_uid,
        name: n.network_name,
        cidr,
        dhcp_start: dhcp.as_ref().map(|d| d.start.clone()),
        dhcp_end: dhcp.map(|d| d.end),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn create_without_range_disables_dhcp() {
        let req = NetworkCreate {
            name: "lan".into(),
            cidr: "10.0.0.1/24".into(),
            dhcp_start: Some("10.0.0.2".into()),
            dhcp_end: None,
        };
        assert_eq!(create_to_wire(&req).ip.dhcp, None);
    }

    #[test]
    fn network_normalizes() {
        let n: NetworkObject = serde_json::from_value(json!({
            "network_uid": "u", "network_name": "lan",
            "ip": {"address": "10.0.0.1/24", "dhcp": {"start": "10.0.0.2", "end": "10.0.0.9"}}
        }))
        .unwrap();
        assert_eq!(
            network_from_wire(n),
            Network {
                id: "u".into(),
                name: "lan".into(),
                cidr: Some("10.0.0.1/24".into()),
                dhcp_start: Some("10.0.0.2".into()),
                dhcp_end: Some("10.0.0.9".into()),
            }
        );
        let bare: NetworkObject = serde_json::from_value(json!({"network_uid": "u"})).unwrap();
        assert_eq!(network_from_wire(bare).cidr, None);
    }

    #[test]
    fn port_forwards_normalize_both_ways() {
        let row: PortForwardObject = serde_json::from_value(json!({
            "serverurl": "https://192.168.1.10", "protocol": "TCP", "port": 20000,
            "target": "web", "target_vm_uid": "vm-1", "target_port": 22,
            "tailscale": false, "force": false, "forward_uid": "fw-1"
        }))
        .unwrap();
        let forward = forward_from_wire(row).unwrap();
        assert_eq!(
            forward,
            PortForward {
                id: "fw-1".into(),
                protocol: "tcp".into(),
                port: 20000,
                vm_id: "vm-1".into(),
                vm_name: "web".into(),
                target_port: 22,
            }
        );
        let req = PortForwardCreate {
            id: "fw-1".into(),
            protocol: "tcp".into(),
            port: 20000,
            vm_id: "vm-1".into(),
            vm_name: "web".into(),
            target_port: 22,
        };
        assert_eq!(
            serde_json::to_value(forward_to_wire(&req)).unwrap(),
            json!({"protocol": "tcp", "port": 20000, "target": "web",
                   "target_vm_uid": "vm-1", "target_port": 22,
                   "tailscale": false, "force": false, "forward_uid": "fw-1"})
        );
        assert_eq!(
            forward_from_wire(forward_to_wire(&req)).unwrap(),
            forward,
            "what is sent reads back as the same forward"
        );
        for (field, bad) in [
            ("port", json!({"port": 70000})),
            ("target_port", json!({"target_port": 65536})),
        ] {
            let mut row = serde_json::to_value(forward_to_wire(&req)).unwrap();
            row.as_object_mut()
                .unwrap()
                .extend(bad.as_object().unwrap().clone());
            let err = forward_from_wire(serde_json::from_value(row).unwrap()).unwrap_err();
            assert!(err.contains(field) && err.contains("fw-1"), "{err}");
        }
    }
}
