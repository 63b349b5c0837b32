//! Network daemon JSON: network objects and the create/info/delete bodies;
//! port-forward objects and the port-forward delete body.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `ip.dhcp.hosts[]`: a fixed lease keyed by MAC.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DhcpHost {
    #[serde(default)]
    pub mac: String,
    #[serde(default)]
    pub address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `ip.dhcp`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Dhcp {
    #[serde(default)]
    pub start: String,
    #[serde(default)]
    pub end: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<DhcpHost>,
}

/// `ip`: the gateway address in CIDR form (`192.168.101.1/24`) and DHCP.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IpConfig {
    #[serde(default)]
    pub address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_bits: Option<u8>,
    /// `null` when DHCP is off.
    #[serde(default)]
    pub dhcp: Option<Dhcp>,
}

/// `routes[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Route {
    #[serde(default)]
    pub address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
}

/// A network as `/list` and `/info` describe it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkObject {
    pub network_uid: String,
    #[serde(default)]
    pub network_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creator_uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libvirt_network: Option<String>,
    /// `libvirt`, `tailscale`, `shared`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `nat`, `bridge`, `open`, `isolated` or null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serverurl: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<IpConfig>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    /// Only for the `tailscale` type; shape kept raw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headscale: Option<Value>,
}

/// `POST /create` (thesis shape; the answer is opaque).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkCreateBody {
    /// The AtomOS host's network REST URL (`https://<ip>:7776`) in the
    /// thesis; unknown to a client of the user-side daemons, so optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serverurl: Option<String>,
    #[serde(default)]
    pub network_name: String,
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub mode: String,
    #[serde(default)]
    pub private: bool,
    #[serde(default)]
    pub ip: IpConfig,
    #[serde(default)]
    pub routes: Vec<Route>,
}

/// `{"network_uid": ...}` for `/info` and `/delete`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkUidBody {
    pub network_uid: String,
}

/// `POST /info` answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkInfoResponse {
    pub network: NetworkObject,
}

/// A port forward as `GET /portforwards` lists it, `POST /portforward`
/// takes it and answers it (the shape of Elemento's dashboard fixtures):
/// `protocol` `port` on the host to `target_port` of VM `target_vm_uid`.
/// Ports are wider than `u16` here so that an out-of-range one is read and
/// refused by name rather than by a parse error.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortForwardObject {
    /// The AtomOS host's URL (`https://192.168.1.10`); optional in a create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serverurl: Option<String>,
    /// `tcp` or `udp`.
    #[serde(default)]
    pub protocol: String,
    /// The host's port.
    #[serde(default)]
    pub port: u32,
    /// The target VM's name.
    #[serde(default)]
    pub target: String,
    /// The target VM's `uniqueID`.
    #[serde(default)]
    pub target_vm_uid: String,
    /// The guest's port.
    #[serde(default)]
    pub target_port: u32,
    /// Through the tailnet rather than the host's own address.
    #[serde(default)]
    pub tailscale: bool,
    #[serde(default)]
    pub force: bool,
    /// The forward's id; the client chooses it in a create.
    #[serde(default)]
    pub forward_uid: String,
}

/// `{"forward_uid": ...}` for `DELETE /portforward`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortForwardUidBody {
    pub forward_uid: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ListOf;
    use serde_json::json;

    #[test]
    fn network_object_round_trips() {
        let fixture = json!({
            "network_uid": "5d3c", "network_name": "lan", "creator_uid": "me",
            "device_name": "virbr1", "libvirt_network": "lan", "type": "libvirt",
            "mode": "nat", "private": true, "serverurl": "https://192.168.1.10:7776",
            "ip": {"address": "192.168.101.1/24", "net_bits": 24,
                   "dhcp": {"start": "192.168.101.2", "end": "192.168.101.254",
                            "hosts": [{"mac": "52:54:00:00:00:01",
                                       "address": "192.168.101.9", "name": "n1"}]}},
            "routes": [{"address": "10.0.0.0", "prefix": 8, "gateway": "192.168.101.1"}]
        });
        let n: NetworkObject = serde_json::from_value(fixture.clone()).unwrap();
        assert_eq!(serde_json::to_value(&n).unwrap(), fixture);
        let list: ListOf<NetworkObject> = serde_json::from_value(
            json!([{"network_uid": "a", "ip": {"address": "x", "dhcp": null}}]),
        )
        .unwrap();
        assert_eq!(list.into_vec()[0].ip.as_ref().unwrap().dhcp, None);
    }

    #[test]
    fn create_body_matches_thesis_shape() {
        let b = NetworkCreateBody {
            serverurl: None,
            network_name: "lan".into(),
            kind: "libvirt".into(),
            mode: "nat".into(),
            private: true,
            ip: IpConfig {
                address: "10.0.0.1/24".into(),
                net_bits: None,
                dhcp: Some(Dhcp {
                    start: "10.0.0.2".into(),
                    end: "10.0.0.254".into(),
                    hosts: vec![],
                }),
            },
            routes: vec![],
        };
        assert_eq!(
            serde_json::to_value(&b).unwrap(),
            json!({"network_name": "lan", "type": "libvirt", "mode": "nat", "private": true,
                   "ip": {"address": "10.0.0.1/24",
                          "dhcp": {"start": "10.0.0.2", "end": "10.0.0.254"}},
                   "routes": []})
        );
    }

    #[test]
    fn port_forward_object_round_trips_and_tolerates_unknown_fields() {
        let fixture = json!({
            "serverurl": "https://192.168.1.10", "protocol": "tcp", "port": 20000,
            "target": "web", "target_vm_uid": "0f1e2d3c-0000-4000-8000-000000000001",
            "target_port": 22, "tailscale": false, "force": false, "forward_uid": "fw-1"
        });
        let f: PortForwardObject = serde_json::from_value(fixture.clone()).unwrap();
        assert_eq!(f.port, 20000);
        assert_eq!(serde_json::to_value(&f).unwrap(), fixture);
        // A create body may leave out serverurl, tailscale and force; rows
        // may carry fields this crate does not know.
        let lean: PortForwardObject = serde_json::from_value(json!({
            "protocol": "udp", "port": 5353, "target": "dns", "target_vm_uid": "v",
            "target_port": 53, "forward_uid": "fw-2", "created": "2024-01-01"
        }))
        .unwrap();
        assert_eq!(
            (lean.serverurl, lean.tailscale, lean.force),
            (None, false, false)
        );
        let list: ListOf<PortForwardObject> =
            serde_json::from_value(json!([fixture.clone()])).unwrap();
        assert_eq!(list.into_vec(), vec![f]);
        let body: PortForwardUidBody =
            serde_json::from_value(json!({"forward_uid": "fw-1"})).unwrap();
        assert_eq!(body.forward_uid, "fw-1");
    }
}
