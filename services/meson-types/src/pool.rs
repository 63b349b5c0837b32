//! A cluster's node pools on the wire. The pool object is
//! [`crate::cluster::Pool`]; a new pool's body is the KaaS request's
//! [`crate::kaas::NodePoolRequest`].

use crate::cluster::Pool;
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

crate::kaas::counted! {
    /// `PATCH /v1/clusters/{id}/pools/{pool_id}`: the fields given change,
    /// the others keep their value; afterwards `min_nodes <= desired_nodes
    /// <= max_nodes`. A `desired_nodes` given, and different from the pool's
    /// nodes now, starts a `scale_node_pool` action (given again after a
    /// failed one, it retries).
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
    pub struct NodePoolUpdateRequest {}
}

/// `POST /v1/clusters/{id}/pools/{pool_id}/actions/delete-nodes`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PoolDeleteNodesRequest {
    /// The nodes to remove (ids of `GET /v1/clusters/{id}/nodes`), at least one.
    pub nodes: Vec<Uuid>,
}
