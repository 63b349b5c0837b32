//! Cluster upgrades and credential rotation on the wire.

use crate::lenient;
use crate::{Action, Warning};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `POST /v1/clusters/{id}/actions/upgrade`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClusterUpgradeRequest {
    /// The version to upgrade to: a later patch of the cluster's minor, or a
    /// patch of the next minor, from `GET /v1/kubernetes-versions`
    /// (`1.36.4`, `v1.36.4`, or `1.36` for that minor's latest patch).
    #[schema(example = "1.36.4")]
    pub kubernetes_version: String,
    /// Worker nodes of a pool replaced at once by surging: each new node is
    /// up before the node it replaces is removed (default 1).
    #[serde(
        default,
        deserialize_with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 0, maximum = 10, default = 1)]
    pub max_surge: Option<u32>,
    /// Worker nodes of a pool replaced at once by removing the old node
    /// first: the pool is short of up to this many nodes meanwhile
    /// (default 0). Not both 0. The control plane always goes one node at
    /// a time, surging.
    #[serde(
        default,
        deserialize_with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 0, maximum = 10, default = 0)]
    pub max_unavailable: Option<u32>,
}

/// A command's action on a cluster, with the request's ignored fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClusterActionResponse {
    pub action: Action,
    /// What the caller should know: unknown fields that were ignored, a
    /// minor resolved to its patch, a version past its end of life; absent
    /// when there is nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}
