//! Port forwards: a public port on a private network's AtomOS host relayed
//! to a port of one of the network's VMs (the network daemon's
//! `/portforward`). Every meson network is NAT'd by its host, so a forward
//! is the way in from outside. A forward lives on the host of its VM, whose
//! address is the forward's public address.

use crate::id::{NetworkId, PortForwardId, TenantId, VmId};
use crate::parse::{Parser, Warning};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::ops::RangeInclusive;

/// A port number, public or private.
pub const PORT: RangeInclusive<i64> = 1..=65535;
/// The most forwards one network carries.
pub const MAX_PER_NETWORK: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Tcp,
    Udp,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "tcp" => Some(Protocol::Tcp),
            "udp" => Some(Protocol::Udp),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PortForwardStatus {
    /// Being set up on the host.
    Creating,
    /// Forwarding.
    Active,
    /// Being removed from the host.
    Deleting,
    /// Not forwarding: its create failed, or drift detection found it
    /// missing from its host (`error_message` says which). It holds no
    /// public port; delete it.
    Error,
}

impl PortForwardStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PortForwardStatus::Creating => "creating",
            PortForwardStatus::Active => "active",
            PortForwardStatus::Deleting => "deleting",
            PortForwardStatus::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "creating" => Self::Creating,
            "active" => Self::Active,
            "deleting" => Self::Deleting,
            "error" => Self::Error,
            _ => return None,
        })
    }
}

/// A port forward, as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PortForward {
    pub id: PortForwardId,
    pub tenant: TenantId,
    pub network_id: NetworkId,
    pub vm_id: VmId,
    pub protocol: Protocol,
    pub public_port: u16,
    pub private_port: u16,
    pub status: PortForwardStatus,
    /// The host it forwards on: its VM's.
    pub target_id: crate::TargetId,
    pub host: String,
    /// The host's address: where the public port is reached.
    pub public_ip: String,
    pub error_message: Option<String>,
    pub created: chrono::DateTime<chrono::Utc>,
}

/// A parsed `POST /v1/networks/{id}/port-forwards`.
#[derive(Clone, Debug, PartialEq)]
pub struct PortForwardCreate {
    pub protocol: Protocol,
    pub public_port: u16,
    pub vm: VmId,
    pub private_port: u16,
    pub warnings: Vec<Warning>,
}

impl PortForwardCreate {
    /// `{"protocol"?: "tcp"|"udp", "public_port", "vm", "private_port"}`,
    /// naming every bad field; unknown fields are warnings.
    pub fn parse(body: &Value) -> crate::Result<PortForwardCreate> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let protocol = match p.string(&mut root, "protocol", false) {
            None => Some(Protocol::Tcp),
            Some((path, s)) => {
                let parsed = Protocol::parse(&s.to_ascii_lowercase());
                if parsed.is_none() {
                    p.errors
                        .add(path, format!("must be \"tcp\" or \"udp\", got {s:?}"));
                }
                parsed
            }
        };
        let public_port = p.int(&mut root, "public_port", PORT, true);
        let vm = p.id(&mut root, "vm", "a VM", true).flatten();
        let private_port = p.int(&mut root, "private_port", PORT, true);
        p.done(root);
        let Parser { errors, warnings } = p;
        match (protocol, public_port, vm, private_port) {
            (Some(protocol), Some(public_port), Some(vm), Some(private_port))
                if errors.is_empty() =>
            {
                Ok(PortForwardCreate {
                    protocol,
                    public_port: public_port as u16,
                    vm,
                    private_port: private_port as u16,
                    warnings,
                })
            }
            _ => Err(errors.into_error().unwrap_or_else(|| {
                crate::Error::internal("a port forward request failed without a reason")
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(e: crate::Error) -> Vec<String> {
        match e {
            crate::Error::InvalidInput { fields } => fields.into_iter().map(|f| f.name).collect(),
            other => panic!("not invalid input: {other:?}"),
        }
    }

    #[test]
    fn a_forward_defaults_to_tcp_and_takes_integral_ports() {
        let vm = uuid::Uuid::new_v4();
        let f = PortForwardCreate::parse(
            &json!({"public_port": 8080, "vm": vm.to_string(), "private_port": 80.0}),
        )
        .unwrap();
        assert_eq!(
            (f.protocol, f.public_port, f.vm.0, f.private_port),
            (Protocol::Tcp, 8080, vm, 80)
        );
        let f = PortForwardCreate::parse(
            &json!({"protocol": "UDP", "public_port": 53, "vm": vm.to_string(),
                    "private_port": 53, "note": "x"}),
        )
        .unwrap();
        assert_eq!(f.protocol, Protocol::Udp);
        assert_eq!(f.warnings.len(), 1);
        assert_eq!(f.warnings[0].field, "note");
    }

    #[test]
    fn every_bad_field_is_named() {
        let e = PortForwardCreate::parse(
            &json!({"protocol": "sctp", "public_port": 0, "vm": "nope", "private_port": 70000}),
        )
        .unwrap_err();
        assert_eq!(fields(e), ["protocol", "public_port", "vm", "private_port"]);
        let e = PortForwardCreate::parse(&json!({})).unwrap_err();
        assert_eq!(fields(e), ["public_port", "vm", "private_port"]);
    }
}
