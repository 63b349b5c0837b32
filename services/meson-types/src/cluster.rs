//! Kubernetes clusters on the wire.

use crate::vm::Price;
use crate::{Action, Meta, Warning};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;
use uuid::Uuid;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Cluster {
    pub id: Uuid,
    #[schema(example = "test8")]
    pub name: String,
    #[schema(value_type = ClusterStatus)]
    pub status: String,
    /// Why the cluster is in `error`, or what is wrong with it now.
    #[schema(required = true)]
    pub error_message: Option<String>,
    #[schema(example = "1.36.4")]
    pub kubernetes_version: String,
    /// `NEVER_UPDATE`, `PATCH_UPDATE` or `ALWAYS_UPDATE`.
    #[schema(example = "NEVER_UPDATE")]
    pub update_policy: String,
    /// Where the nodes run, once placed (`null` until then).
    #[schema(required = true, example = "arubacloud")]
    pub provider: Option<String>,
    #[schema(required = true)]
    pub region: Option<String>,
    pub network: ClusterNetwork,
    pub control_plane: ControlPlane,
    pub pools: Vec<Pool>,
    /// `calico`, `cilium` or `flannel`.
    pub cni: String,
    pub pod_cidr: String,
    pub service_cidr: String,
    pub labels: BTreeMap<String, String>,
    pub created: DateTime<Utc>,
    /// The nodes' prices summed, once they are placed.
    #[schema(required = true)]
    pub price: Option<Price>,
}

/// A cluster's status (documentation: the wire field is a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ClusterStatus {
    Creating,
    Running,
    Updating,
    Deleting,
    Error,
    /// Every node is unhealthy; `running` again once they recover.
    Degraded,
}

/// The nodes' private network (`nodes_subnet`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ClusterNetwork {
    #[schema(example = "192.168.1.0/24")]
    pub cidr: String,
    pub dhcp: bool,
    /// The addresses nodes get (by DHCP, or from meson when `dhcp` is false).
    pub range: crate::network::AddressRange,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ControlPlane {
    /// The API server, `https://<address>:6443` (an address that floats
    /// among the control-plane nodes).
    #[schema(required = true, example = "https://192.168.1.254:6443")]
    pub endpoint: Option<String>,
    /// How many control-plane nodes: 1 or 3.
    pub nodes: u32,
    pub specs: NodeSpecs,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct NodeSpecs {
    pub cpu: u32,
    /// MiB.
    pub ram: u64,
    /// GB.
    pub storage: u32,
    pub gpu: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Pool {
    pub id: Uuid,
    #[schema(example = "1poolname")]
    pub name: String,
    pub autoscale: bool,
    pub min_nodes: u32,
    pub max_nodes: u32,
    pub desired_nodes: u32,
    /// Nodes that exist now (any status but `deleting`).
    pub current_nodes: u32,
    pub specs: NodeSpecs,
    /// `HOURLY` or `MONTHLY`.
    pub billing: String,
    pub labels: BTreeMap<String, String>,
    /// `key=value:Effect`.
    pub taints: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Node {
    pub id: Uuid,
    /// The Kubernetes node name and the VM's hostname.
    pub name: String,
    /// `control_plane` or `worker`.
    pub role: String,
    /// The pool, for workers.
    #[schema(required = true)]
    pub pool: Option<Uuid>,
    #[schema(value_type = NodeStatus)]
    pub status: String,
    #[schema(required = true)]
    pub error_message: Option<String>,
    pub kubernetes_version: String,
    /// The node's address on the cluster network, once known.
    #[schema(required = true, format = Ipv4)]
    pub ip: Option<String>,
    /// The AtomOS host it runs on, once placed.
    #[schema(required = true)]
    pub host: Option<String>,
    /// `elemento://<vm id>`: the kubelet's provider ID.
    pub provider_id: String,
    pub created: DateTime<Utc>,
}

/// A node's status (documentation: the wire field is a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    Creating,
    NotReady,
    Ready,
    Deleting,
    CreationError,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClusterResponse {
    pub cluster: Cluster,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClusterCreateResponse {
    pub cluster: Cluster,
    pub action: Action,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClusterList {
    pub clusters: Vec<Cluster>,
    pub meta: Meta,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NodeList {
    pub nodes: Vec<Node>,
}

/// `PATCH /v1/clusters/{id}`: relabel and/or change the update policy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClusterUpdateRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<crate::requests::LabelsRequest>)]
    pub labels: Option<BTreeMap<String, String>>,
    /// `NEVER_UPDATE` (or `MANUAL`), `PATCH_UPDATE` or `ALWAYS_UPDATE`, any case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_policy: Option<String>,
}

/// `GET /v1/clusters` filters.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ClusterListQuery {
    /// Only the cluster with this name.
    pub name: Option<String>,
    /// Only clusters in one of these statuses (repeat the parameter).
    pub status: Option<Vec<ClusterStatus>>,
    /// Kubernetes label selector: `env=prod,tier!=db,team in (a,b),!legacy`.
    pub label_selector: Option<String>,
    /// `field[:asc|:desc]`, field among id, name, status and created; up to
    /// two keys (repeat the parameter).
    #[param(max_items = 2, value_type = Option<Vec<crate::requests::VmSort>>)]
    pub sort: Option<Vec<String>>,
}

/// A cluster autoscaler's credential for meson's `externalgrpc` endpoint
/// (mutual TLS): write the three PEMs as `ca.crt`, `tls.crt` and `tls.key`
/// and run the upstream cluster-autoscaler with
/// `--cloud-provider=externalgrpc --cloud-config=<cloud_config>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AutoscalerCredentials {
    /// The endpoint, `host:port`.
    pub address: String,
    /// The CA that signed the endpoint's certificate (and this one).
    pub ca_cert: String,
    /// The client certificate (`CN=cluster:<id>`).
    pub cert: String,
    /// Its private key (PKCS#8 PEM): shown once, never stored by meson.
    pub key: String,
    pub expires: DateTime<Utc>,
    /// The autoscaler's cloud config, naming the files in
    /// `/etc/meson-autoscaler`.
    pub cloud_config: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AutoscalerCredentialsResponse {
    pub credentials: AutoscalerCredentials,
}
