//! A cluster's node pools on the wire. The pool object is
//! [`crate::cluster::Pool`]; a new pool's body is the KaaS request's
//! [`crate::kaas::NodePoolRequest`].

use crate::cluster::Pool;
use crate::lenient;
use crate::requests::LenientBool;
use crate::{Action, Warning};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PoolResponse {
    pub pool: Pool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PoolList {
    /// Oldest first.
    pub pools: Vec<Pool>,
}

/// A pool being added, and the action adding its nodes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PoolCreateResponse {
    pub pool: Pool,
    /// `create_node_pool`.
    pub action: Action,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

/// A pool as a PATCH left it, and the action resizing it when its node
/// count is to change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PoolUpdateResponse {
    pub pool: Pool,
    /// `scale_node_pool`; absent when the node count stays as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

/// `PATCH /v1/clusters/{id}/pools/{pool_id}`: the
/// fields given change, the others keep their value; afterwards
/// `min_nodes <= desired_nodes <= max_nodes`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NodePoolUpdateRequest {
    /// The node count to converge to. Given, and different from the pool's
    /// nodes now, it starts a `scale_node_pool` action (given again after a
    /// failed one, it retries).
    #[serde(
        default,
        deserialize_with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 0, maximum = 100)]
    pub desired_nodes: Option<u32>,
    #[serde(
        default,
        deserialize_with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 0, maximum = 100)]
    pub min_nodes: Option<u32>,
    /// Without DHCP, the cluster network must hold every node at its
    /// maximum plus the API endpoint.
    #[serde(
        default,
        deserialize_with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 1, maximum = 100)]
    pub max_nodes: Option<u32>,
    /// Let the cluster-autoscaler move `desired_nodes` between the bounds.
    #[serde(
        default,
        deserialize_with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<LenientBool>)]
    pub autoscale: Option<bool>,
}

/// `POST /v1/clusters/{id}/pools/{pool_id}/actions/delete-nodes`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PoolDeleteNodesRequest {
    /// The nodes to remove (ids of `GET /v1/clusters/{id}/nodes`), at least one.
    pub nodes: Vec<Uuid>,
}
