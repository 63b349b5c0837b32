//! Quotes on the wire: the price of a VM or KaaS payload per candidate placement.

use crate::{Price, Warning};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What one AtomOS host would charge for the VM.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Quote {
    pub provider: String,
    pub region: String,
    pub continent: String,
    /// The AtomOS target (host) the VM would run on.
    pub host: String,
    pub price: Price,
}

/// `POST /v1/quotes`: every host that can fit the VM, cheapest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QuoteResponse {
    /// Sorted by hourly price, then host name.
    pub quotes: Vec<Quote>,
    /// The first of `quotes`: where `POST /v1/vms` would place the VM now.
    pub cheapest: Quote,
    /// Unknown fields that were ignored, hosts that did not answer in time.
    #[serde(default)]
    #[schema(required = true)]
    pub warnings: Vec<Warning>,
}

/// The size of one Kubernetes node, in the KaaS request's units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct NodeSpecs {
    /// vCPUs.
    pub cpu: u32,
    /// MiB.
    pub ram: u64,
    /// GB.
    pub storage: u32,
    pub gpu: u32,
}

/// A cluster's control plane or one of its pools, priced in one region.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NodeGroupQuote {
    /// The pool's name, or `control-plane`.
    #[schema(example = "1poolname")]
    pub name: String,
    /// Nodes priced: the pool's `desired_nodes` (the control plane's nodes).
    pub nodes: u32,
    /// The pool's `max_nodes` (the control plane's nodes).
    pub max_nodes: u32,
    pub specs: NodeSpecs,
    /// The AtomOS host offering this node size cheapest in the region.
    pub host: String,
    /// One node.
    pub node_price: Price,
    /// `nodes` nodes.
    pub price: Price,
}

/// A region that can host the whole cluster (its nodes share one private
/// network, so one region hosts them all), and what the cluster costs there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClusterQuote {
    pub provider: String,
    pub region: String,
    pub continent: String,
    pub control_plane: NodeGroupQuote,
    /// In request order.
    pub pools: Vec<NodeGroupQuote>,
    /// The cluster with every pool at `desired_nodes`, control plane included.
    pub price: Price,
    /// The cluster with every pool at `max_nodes`: what autoscaling can reach.
    pub max_price: Price,
}

/// `POST /v1/quotes` with a KaaS payload: every region that can host the
/// cluster, cheapest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct KaasQuoteResponse {
    /// Sorted by the cluster's hourly price, then provider and region.
    pub placements: Vec<ClusterQuote>,
    /// The first of `placements`.
    pub cheapest: ClusterQuote,
    /// Unknown fields that were ignored, adjusted values (a range clamped off
    /// the network address, a version resolved), deprecated versions, hosts
    /// that did not answer in time.
    #[serde(default)]
    #[schema(required = true)]
    pub warnings: Vec<Warning>,
}

/// `POST /v1/quotes` answers a VM payload with `QuoteResponse` and a KaaS
/// payload with `KaasQuoteResponse`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum QuoteAnswer {
    Vm(QuoteResponse),
    Kaas(KaasQuoteResponse),
}

/// `POST /v1/quotes` takes a VM payload (with `specs`) or a KaaS payload
/// (with `req`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum QuoteRequest {
    Vm(crate::requests::VmCreateRequest),
    Kaas(crate::kaas::KaasCreateRequest),
}

impl From<crate::requests::VmCreateRequest> for QuoteRequest {
    fn from(r: crate::requests::VmCreateRequest) -> Self {
        QuoteRequest::Vm(r)
    }
}

impl From<crate::kaas::KaasCreateRequest> for QuoteRequest {
    fn from(r: crate::kaas::KaasCreateRequest) -> Self {
        QuoteRequest::Kaas(r)
    }
}
