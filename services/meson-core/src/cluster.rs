//! Managed Kubernetes clusters as stored: the cluster, its node pools and
//! its nodes (each node is a VM on the cluster's network).

use crate::kaas::{KaasSpec, PoolSpec};
use crate::labels::Labels;
use crate::network::Subnet;
use crate::{ClusterId, NetworkId, NodeId, PoolId, TenantId, VmId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;

/// The port of every cluster's API server.
pub const API_PORT: u16 = 6443;

macro_rules! status_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident => $s:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($variant),+ }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $s),+ }
            }

            pub fn parse(s: &str) -> Option<Self> {
                match s { $($s => Some($name::$variant),)+ _ => None }
            }
        }
    };
}

status_enum!(
    /// A cluster's status.
    ClusterStatus {
        Creating => "creating",
        Running => "running",
        Updating => "updating",
        Deleting => "deleting",
        Error => "error",
        // Every node is unhealthy (see auto-repair); `running` again once
        // they recover.
        Degraded => "degraded",
    }
);

status_enum!(
    /// A node's status.
    NodeStatus {
        Creating => "creating",
        NotReady => "not_ready",
        Ready => "ready",
        Deleting => "deleting",
        CreationError => "creation_error",
    }
);

status_enum!(
    /// What a node runs.
    NodeRole {
        ControlPlane => "control_plane",
        Worker => "worker",
    }
);

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    pub id: ClusterId,
    pub tenant: TenantId,
    pub name: String,
    pub status: ClusterStatus,
    pub labels: Labels,
    pub spec: KaasSpec,
    /// The version the cluster runs (the spec's until an upgrade).
    pub kubernetes_version: String,
    pub network: NetworkId,
    /// The API server's VIP on the nodes' network.
    pub endpoint: Option<Ipv4Addr>,
    pub error_message: Option<String>,
    pub created: DateTime<Utc>,
}

impl Cluster {
    /// `https://<vip>:6443`, once the VIP is known.
    pub fn server_url(&self) -> Option<String> {
        self.endpoint.map(|ip| format!("https://{ip}:{API_PORT}"))
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodePool {
    pub id: PoolId,
    pub cluster: ClusterId,
    pub spec: PoolSpec,
    pub created: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub id: NodeId,
    pub cluster: ClusterId,
    /// `None` for control-plane nodes.
    pub pool: Option<PoolId>,
    pub role: NodeRole,
    pub vm: VmId,
    /// The Kubernetes node name and the VM's hostname.
    pub name: String,
    pub status: NodeStatus,
    pub error_message: Option<String>,
    pub kubernetes_version: String,
    pub phoned_home: Option<DateTime<Utc>>,
    pub created: DateTime<Utc>,
}

/// A cluster's network must hold every node at its maximum (`nodes_at_max`:
/// control plane plus every pool's `max_nodes`) in its range, and the API
/// endpoint's address (taken from the range with meson's IPAM, from outside
/// it with DHCP); `Err` says why it cannot. meson addresses every node
/// itself, with or without DHCP (see `meson_db::networks::attach_networks`). Checked
/// when a cluster is created and whenever a pool is added or its
/// `max_nodes` grows.
pub fn check_address_capacity(subnet: &Subnet, nodes_at_max: u64) -> Result<(), String> {
    let have = subnet.capacity();
    let endpoint = u64::from(!subnet.dhcp);
    if have.saturating_sub(endpoint) < nodes_at_max {
        let endpoint_note = if subnet.dhcp {
            ""
        } else {
            " and one for its API endpoint"
        };
        return Err(format!(
            "holds {have} addresses; the cluster needs {nodes_at_max} for its nodes at their \
             maximum{endpoint_note}"
        ));
    }
    Ok(())
}

/// A node's name: `<cluster>-cp-<s>` or `<cluster>-<pool>-<s>`, with `s`
/// five base-36 characters from the node id's random bits (as Kubernetes
/// suffixes generated names); at most 63 characters with the name limits
/// of `kaas` (cluster 32, pool 24).
pub fn node_name(cluster: &str, pool: Option<&str>, id: NodeId) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut bits = id.0.as_u128() as u64;
    let suffix: String = (0..5)
        .map(|_| {
            let d = DIGITS[(bits % 36) as usize] as char;
            bits /= 36;
            d
        })
        .collect();
    match pool {
        None => format!("{cluster}-cp-{suffix}"),
        Some(p) => format!("{cluster}-{p}-{suffix}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip() {
        for s in [
            "creating", "running", "updating", "deleting", "error", "degraded",
        ] {
            assert_eq!(ClusterStatus::parse(s).unwrap().as_str(), s);
        }
        for s in [
            "creating",
            "not_ready",
            "ready",
            "deleting",
            "creation_error",
        ] {
            assert_eq!(NodeStatus::parse(s).unwrap().as_str(), s);
        }
        assert_eq!(NodeRole::parse("worker"), Some(NodeRole::Worker));
        assert_eq!(ClusterStatus::parse("nope"), None);
    }

    #[test]
    fn a_network_holds_every_node_at_max_and_the_endpoint() {
        let subnet = |dhcp| Subnet {
            cidr: "10.0.0.0/24".parse().unwrap(),
            gateway: Ipv4Addr::new(10, 0, 0, 1),
            dhcp,
            // 10 addresses, the gateway outside.
            range: crate::network::AddressRange::new(
                Ipv4Addr::new(10, 0, 0, 11),
                Ipv4Addr::new(10, 0, 0, 20),
            )
            .unwrap(),
        };
        assert_eq!(check_address_capacity(&subnet(false), 9), Ok(()));
        let e = check_address_capacity(&subnet(false), 10).unwrap_err();
        assert!(
            e.contains("holds 10 addresses") && e.contains("needs 10"),
            "{e}"
        );
        // With DHCP the endpoint lives outside the range: the nodes get it all.
        assert_eq!(check_address_capacity(&subnet(true), 10), Ok(()));
        let e = check_address_capacity(&subnet(true), 11).unwrap_err();
        assert!(!e.contains("endpoint"), "{e}");
    }

    #[test]
    fn node_names_fit_a_dns_label() {
        let id = NodeId::new();
        let n = node_name(&"c".repeat(32), Some(&"p".repeat(24)), id);
        assert!(n.len() <= 63, "{n}");
        assert!(crate::naming::check_atomos_name(&n, 63).is_ok());
        assert!(node_name("test8", None, id).starts_with("test8-cp-"));
    }
}
