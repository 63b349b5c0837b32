//! Network daemon: list, info, create (then find by name) and delete.

use crate::client::{AtomosClient, Call, Daemon};
use crate::error::{DriverError, ErrorKind};
use crate::schema::ListOf;
use crate::schema::network::{
    Dhcp, IpConfig, NetworkCreateBody, NetworkInfoResponse, NetworkObject, NetworkUidBody,
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
            .ok_or_else(|| {
                // Transient: the create succeeded, the list may just lag behind.
                DriverError::new(
                    ErrorKind::Transient,
                    &call.route,
                    None,
                    format!("network {} created but not listed yet", req.name),
                )
            })
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
}
