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

/// `GET /`: what this server is and where to go from here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Index {
    #[schema(example = "meson")]
    pub name: String,
    /// The server's version.
    #[schema(example = "0.1.0")]
    pub version: String,
    pub links: IndexLinks,
}

/// The paths of `GET /`'s answer, relative to the server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IndexLinks {
    /// The API's documentation (Swagger UI).
    #[schema(example = "/docs")]
    pub docs: String,
    /// The OpenAPI document.
    #[schema(example = "/openapi.json")]
    pub openapi: String,
    /// The REST API's root (a bearer token is needed below it).
    #[schema(example = "/v1")]
    pub api: String,
    #[schema(example = "/healthz")]
    pub healthz: String,
    #[schema(example = "/readyz")]
    pub readyz: String,
    #[schema(example = "/metrics")]
    pub metrics: String,
}
