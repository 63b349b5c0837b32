//! The error envelope: `{"error": {code, message, details}}`.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorResponse {
    pub error: ErrorBody,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Machine code: `invalid_input`, `not_found`, `locked`, ...
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
    /// Per-code details, e.g. `fields` for `invalid_input`.
    pub details: serde_json::Value,
}
