//! Network daemon JSON: network objects and the create/info/delete bodies.

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
}
