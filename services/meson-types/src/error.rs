//! The error envelope: `{"error": {code, message, details}}`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// Every error answer: `{"error": {code, message, details}}`.
/// The `conflict` message of a request whose Idempotency-Key the first
/// request with it still holds: the one conflict a client retries (the
/// first attempt's answer is then replayed).
pub const IDEMPOTENCY_KEY_IN_USE: &str =
    "the original request with this Idempotency-Key is still being processed; retry later";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorResponse {
    pub error: ErrorBody,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// Machine code: `invalid_input`, `not_found`, `locked`, ...
    #[schema(value_type = ErrorCode)]
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
    /// Per-code details, e.g. `fields` for `invalid_input`.
    #[schema(value_type = ErrorDetails)]
    pub details: serde_json::Value,
}

/// The codes an error can carry (documentation: the wire field is a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// A field (named in `details.fields`) is missing or wrong.
    InvalidInput,
    /// The body is not JSON, or not sent as `application/json`.
    JsonError,
    /// No valid bearer token.
    Unauthorized,
    /// The token's role does not allow this.
    Forbidden,
    NotFound,
    /// The request conflicts with the resource's state, or reuses an
    /// `Idempotency-Key` with another request.
    Conflict,
    /// An action runs on the resource (`details.action_id`).
    Locked,
    /// A unique field (named in `details.fields`) is taken.
    UniquenessError,
    RateLimitExceeded,
    /// A quota would be exceeded (`details.limits`).
    ResourceLimitExceeded,
    /// No capacity anywhere fits the request; the message says why.
    ResourceUnavailable,
    /// Something failed on meson's side; retry later.
    ServiceError,
    /// The request took too long.
    Timeout,
    /// The body is larger than the API accepts.
    PayloadTooLarge,
    /// The body is not sent as `application/json`.
    UnsupportedMediaType,
    /// meson cannot reach its database: nothing was done; retry after
    /// `Retry-After` seconds (`details.retry_after`).
    Unavailable,
}

/// `details` of an error: which members are present depends on the code;
/// `{}` when the code needs none.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetails {
    /// `invalid_input` and `uniqueness_error`: the rejected fields, named by
    /// their JSON path (`specs.req.cpu.numberOfCores`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub fields: Option<Vec<FieldError>>,
    /// `locked`: the running action that holds the resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub action_id: Option<Uuid>,
    /// `resource_limit_exceeded`: the quotas the request would exceed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub limits: Option<Vec<LimitExceeded>>,
    /// `rate_limit_exceeded` and `unavailable`: seconds until a retry may
    /// pass (as `Retry-After`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub retry_after: Option<u64>,
}

/// One rejected field and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FieldError {
    pub name: String,
    /// Absent for `uniqueness_error`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<String>,
}

/// A quota a request would exceed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LimitExceeded {
    pub name: String,
    pub quota: i64,
    pub current: i64,
}
