//! Liveness and readiness answers.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /healthz` and `GET /readyz`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// `ok` (`/healthz`), `ready` or `unavailable` (`/readyz`).
    #[schema(value_type = HealthStatus)]
    pub status: String,
    /// What is down, when `unavailable`: `database`'s value is `down`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, example = "down")]
    pub database: Option<String>,
}

/// (documentation: the wire field is a string)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum HealthStatus {
    Ok,
    Ready,
    Unavailable,
}
