//! Private networks on the wire.

use crate::{Meta, Warning};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;
use uuid::Uuid;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Network {
    pub id: Uuid,
    #[schema(example = "backend")]
    pub name: String,
    #[schema(value_type = NetworkStatus)]
    pub status: String,
    pub labels: BTreeMap<String, String>,
    pub created: DateTime<Utc>,
    /// The subnet, `192.168.1.0/24`.
    #[schema(example = "192.168.1.0/24")]
    pub cidr: String,
    /// Never handed to a VM.
    #[schema(format = Ipv4, example = "192.168.1.1")]
    pub gateway: String,
    /// True: AtomOS's DHCP hands out `range`; false: meson does, and the
    /// guest is configured with a static address.
    pub dhcp: bool,
    /// The addresses handed out (the gateway excluded).
    pub range: AddressRange,
    /// The VMs attached to it.
    pub vms: Vec<Uuid>,
}

/// A network's status (documentation: the wire field is a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum NetworkStatus {
    Available,
    Deleting,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AddressRange {
    #[schema(format = Ipv4, example = "192.168.1.2")]
    pub start: String,
    #[schema(format = Ipv4, example = "192.168.1.254")]
    pub last: String,
}

/// A VM's NIC on a private network.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PrivateNet {
    pub network: Uuid,
    /// The address meson handed out; `null` on a DHCP network (see the
    /// VM's `ipv4`).
    #[schema(required = true, format = Ipv4)]
    pub ip: Option<String>,
    #[schema(example = "52:54:00:12:ab:cd")]
    pub mac_address: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NetworkResponse {
    pub network: Network,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NetworkList {
    pub networks: Vec<Network>,
    pub meta: Meta,
}

/// `POST /v1/networks`: a private network.
///
/// The range defaults to every usable address; the gateway to the first
/// one. A range starting on the network address or ending on the broadcast
/// address is clamped (with a warning).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NetworkCreateRequest {
    #[schema(
        example = "backend",
        max_length = 63,
        pattern = "^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$"
    )]
    pub name: String,
    /// An IPv4 subnet without host bits, /8 to /29.
    #[schema(example = "192.168.1.0/24")]
    pub cidr: String,
    /// Default true.
    #[serde(
        default,
        deserialize_with = "crate::lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<crate::requests::LenientBool>)]
    pub dhcp: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = Ipv4)]
    pub gateway: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp_range: Option<AddressRange>,
    /// With `last_address`, the KaaS-style form of `dhcp_range`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = Ipv4)]
    pub start_address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = Ipv4)]
    pub last_address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<crate::requests::LabelsRequest>)]
    pub labels: Option<BTreeMap<String, String>>,
}

/// `GET /v1/networks` filters.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NetworkListQuery {
    /// Only the network with this name.
    pub name: Option<String>,
    /// Only networks in one of these statuses (repeat the parameter).
    pub status: Option<Vec<NetworkStatus>>,
    /// Kubernetes label selector: `env=prod,tier!=db,team in (a,b),!legacy`.
    pub label_selector: Option<String>,
    /// `field[:asc|:desc]`, field among id, name, status and created; up to
    /// two keys (repeat the parameter).
    #[param(max_items = 2, value_type = Option<Vec<crate::requests::VmSort>>)]
    pub sort: Option<Vec<String>>,
}
