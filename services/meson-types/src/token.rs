//! API tokens issued by meson, on the wire.

use crate::Warning;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// An API token: a secret meson issued for a tenant's automation, with a
/// role. Its secret is shown once, when it is created.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ApiToken {
    pub id: Uuid,
    #[schema(example = "ci-deploys")]
    pub name: String,
    /// `viewer`, `editor` or `owner`.
    #[schema(value_type = TokenRole)]
    pub role: String,
    /// The secret's first characters, to tell tokens apart.
    #[schema(example = "meson_Xq3hT2")]
    pub prefix: String,
    /// The subject that created it.
    pub created_by: String,
    pub created: DateTime<Utc>,
    /// Null: it never expires.
    #[serde(default)]
    #[schema(required = true)]
    pub expires: Option<DateTime<Utc>>,
    /// When it last authenticated a request (to the minute); null: never.
    #[serde(default)]
    #[schema(required = true)]
    pub last_used: Option<DateTime<Utc>>,
    /// When it was revoked, and by whom; null while it is live.
    #[serde(default)]
    #[schema(required = true)]
    pub revoked: Option<DateTime<Utc>>,
    #[serde(default)]
    #[schema(required = true)]
    pub revoked_by: Option<String>,
}

/// A token's role (documentation: the wire field is a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TokenRole {
    Viewer,
    Editor,
    Owner,
}

/// `POST /v1/tokens`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TokenCreateRequest {
    /// 1 to 64 characters; unique among the tenant's live tokens.
    #[schema(example = "ci-deploys", min_length = 1, max_length = 64)]
    pub name: String,
    /// At most the creator's own role.
    #[schema(value_type = TokenRole)]
    pub role: String,
    /// Seconds until it expires, 60 to 63244800 (two years); absent or
    /// null: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = 7776000, minimum = 60, maximum = 63244800)]
    pub expires_in: Option<i64>,
}

/// A token just created, with its secret (shown this once).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TokenCreateResponse {
    pub token: ApiToken,
    /// The bearer token: `Authorization: Bearer meson_...`. meson keeps
    /// only its hash: it cannot be shown again.
    #[schema(example = "meson_Xq3hT2bN8kLm4pQr7sVw1yZa5cEf9gHj2kMn6pRs")]
    pub secret: String,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TokenResponse {
    pub token: ApiToken,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TokenList {
    /// Newest first.
    pub tokens: Vec<ApiToken>,
}
