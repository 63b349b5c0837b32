//! Port forwards on the wire.

use crate::Warning;
use crate::action::Action;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// A port forward: `public_ip:public_port` on the host of a private
/// network's VM, relayed by the host's NAT to the VM's `private_port`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PortForward {
    pub id: Uuid,
    pub network: Uuid,
    pub vm: Uuid,
    #[schema(value_type = Protocol)]
    pub protocol: String,
    /// Where the forward is reached: its VM's host's address.
    #[schema(example = "203.0.113.10")]
    pub public_ip: String,
    #[schema(example = 2222, minimum = 1, maximum = 65535)]
    pub public_port: u16,
    #[schema(example = 22, minimum = 1, maximum = 65535)]
    pub private_port: u16,
    /// `creating`, `active`, `deleting` or `error` (see `error`).
    #[schema(value_type = PortForwardStatus)]
    pub status: String,
    /// The AtomOS host it forwards on (its VM's).
    pub host: String,
    /// Why it is in `error`: its create failed, or its host no longer has
    /// it; null otherwise.
    #[serde(default)]
    #[schema(required = true)]
    pub error: Option<String>,
    pub created: DateTime<Utc>,
}

/// A forward's protocol (documentation: the wire field is a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Tcp,
    Udp,
}

/// A forward's status (documentation: the wire field is a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PortForwardStatus {
    Creating,
    Active,
    Deleting,
    Error,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PortForwardResponse {
    pub port_forward: PortForward,
}

/// A forward (`creating`) and its `create_port_forward` action.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PortForwardCreateResponse {
    pub port_forward: PortForward,
    pub action: Action,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

/// A network's forwards, oldest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PortForwardList {
    pub port_forwards: Vec<PortForward>,
}

/// `POST /v1/networks/{id}/port-forwards`: forward `public_port` of the
/// VM's host to the VM's `private_port`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PortForwardCreateRequest {
    /// Default `tcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Protocol>)]
    pub protocol: Option<String>,
    /// 1 to 65535; free on the VM's host, and none of its AtomOS daemons'.
    #[serde(deserialize_with = "crate::lenient::int")]
    #[schema(example = 2222, minimum = 1, maximum = 65535)]
    pub public_port: u16,
    /// A VM on the network, placed and running or off.
    pub vm: Uuid,
    #[serde(deserialize_with = "crate::lenient::int")]
    #[schema(example = 22, minimum = 1, maximum = 65535)]
    pub private_port: u16,
}
