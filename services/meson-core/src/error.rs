//! The one error enum a caller can act on, shared by every layer.
//!
//! Each variant maps to exactly one public error code (see [`Error::code`]);
//! transports map codes to HTTP statuses or gRPC codes once. Internal causes are
//! kept as `#[source]` for the logs and never reach the client.

use serde::Serialize;
use uuid::Uuid;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One rejected input field and why, named by its JSON path (`specs.req.cpu.numberOfCores`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub name: String,
    pub messages: Vec<String>,
}

/// A quota that a request would exceed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LimitExceeded {
    pub name: String,
    pub quota: i64,
    pub current: i64,
}

/// The public error codes, on the wire and in actions' errors. The strings
/// are persisted and sent to clients: never change one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Code {
    NotFound,
    InvalidInput,
    Json,
    Conflict,
    Locked,
    Uniqueness,
    ResourceLimitExceeded,
    RateLimitExceeded,
    ResourceUnavailable,
    /// Something failed on meson's side; a retry may pass.
    ServiceError,
    Unavailable,
    PayloadTooLarge,
    UnsupportedMediaType,
    Timeout,
    Unauthorized,
    Forbidden,
}

impl Code {
    pub const fn as_str(self) -> &'static str {
        match self {
            Code::NotFound => "not_found",
            Code::InvalidInput => "invalid_input",
            Code::Json => "json_error",
            Code::Conflict => "conflict",
            Code::Locked => "locked",
            Code::Uniqueness => "uniqueness_error",
            Code::ResourceLimitExceeded => "resource_limit_exceeded",
            Code::RateLimitExceeded => "rate_limit_exceeded",
            Code::ResourceUnavailable => "resource_unavailable",
            Code::ServiceError => "service_error",
            Code::Unavailable => "unavailable",
            Code::PayloadTooLarge => "payload_too_large",
            Code::UnsupportedMediaType => "unsupported_media_type",
            Code::Timeout => "timeout",
            Code::Unauthorized => "unauthorized",
            Code::Forbidden => "forbidden",
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<Code> for String {
    fn from(c: Code) -> String {
        c.as_str().to_owned()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{kind} not found")]
    NotFound { kind: &'static str, id: String },

    #[error("invalid input in fields {}", field_names(.fields))]
    InvalidInput { fields: Vec<FieldError> },

    #[error("malformed JSON: {message}")]
    Json { message: String },

    #[error("{message}")]
    Conflict { message: String },

    #[error("{kind} {id} is locked by a running action")]
    Locked {
        kind: &'static str,
        id: String,
        action_id: Uuid,
    },

    #[error("{kind} with this {field} already exists")]
    AlreadyExists { kind: &'static str, field: String },

    #[error("quota exceeded")]
    QuotaExceeded { limits: Vec<LimitExceeded> },

    #[error("rate limit exceeded: retry in {retry_after} seconds")]
    RateLimited { retry_after: u64 },

    #[error("no capacity available: {reason}")]
    InsufficientCapacity { reason: String },

    #[error("service temporarily unavailable: {message}")]
    Unavailable { message: String },

    /// A dependency meson cannot work without (the database) is down: the
    /// request was not carried out; retry after `retry_after` seconds.
    #[error("{what} is unreachable: retry in {retry_after} seconds")]
    Outage {
        what: &'static str,
        retry_after: u64,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },

    #[error("the body exceeds {limit} bytes")]
    PayloadTooLarge { limit: usize },

    #[error("{message}")]
    UnsupportedMediaType { message: String },

    #[error("request timed out")]
    Timeout,

    #[error("unauthorized")]
    Unauthorized,

    #[error("forbidden: {message}")]
    Forbidden { message: String },

    #[error("internal error: {context}")]
    Internal {
        context: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

fn field_names(fields: &[FieldError]) -> String {
    fields
        .iter()
        .map(|f| f.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Error {
    pub fn not_found(kind: &'static str, id: impl ToString) -> Self {
        Error::NotFound {
            kind,
            id: id.to_string(),
        }
    }

    /// A single bad field.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidInput {
            fields: vec![FieldError {
                name: field.into(),
                messages: vec![message.into()],
            }],
        }
    }

    /// Seconds after which a retry may pass, when the answer says so
    /// (`Retry-After`).
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            Error::RateLimited { retry_after } | Error::Outage { retry_after, .. } => {
                Some(*retry_after)
            }
            _ => None,
        }
    }

    pub fn internal(context: impl Into<String>) -> Self {
        Error::Internal {
            context: context.into(),
            source: None,
        }
    }

    pub fn internal_from(
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Internal {
            context: context.into(),
            source: Some(Box::new(source)),
        }
    }

    /// The public, stable error code (Hetzner's vocabulary).
    pub fn code(&self) -> &'static str {
        self.kind_code().as_str()
    }

    /// [`Error::code`] as the enum.
    pub fn kind_code(&self) -> Code {
        match self {
            Error::NotFound { .. } => Code::NotFound,
            Error::InvalidInput { .. } => Code::InvalidInput,
            Error::Json { .. } => Code::Json,
            Error::Conflict { .. } => Code::Conflict,
            Error::Locked { .. } => Code::Locked,
            Error::AlreadyExists { .. } => Code::Uniqueness,
            Error::QuotaExceeded { .. } => Code::ResourceLimitExceeded,
            Error::RateLimited { .. } => Code::RateLimitExceeded,
            Error::InsufficientCapacity { .. } => Code::ResourceUnavailable,
            Error::Unavailable { .. } => Code::ServiceError,
            Error::Outage { .. } => Code::Unavailable,
            Error::PayloadTooLarge { .. } => Code::PayloadTooLarge,
            Error::UnsupportedMediaType { .. } => Code::UnsupportedMediaType,
            Error::Timeout => Code::Timeout,
            Error::Unauthorized => Code::Unauthorized,
            Error::Forbidden { .. } => Code::Forbidden,
            Error::Internal { .. } => Code::ServiceError,
        }
    }

    /// The message a client may see. Internal details never leave the process.
    pub fn public_message(&self) -> String {
        match self {
            Error::NotFound { kind, .. } => format!("{kind} not found"),
            Error::InvalidInput { fields } => {
                format!("invalid input in fields {}", field_names(fields))
            }
            Error::Internal { .. } => "internal error, please retry later".to_owned(),
            other => other.to_string(),
        }
    }

    /// Machine-readable details, per code.
    pub fn details(&self) -> serde_json::Value {
        use serde_json::json;
        match self {
            Error::InvalidInput { fields } => json!({ "fields": fields }),
            Error::Locked { action_id, .. } => json!({ "action_id": action_id }),
            Error::AlreadyExists { field, .. } => json!({ "fields": [{ "name": field }] }),
            Error::QuotaExceeded { limits } => json!({ "limits": limits }),
            Error::RateLimited { retry_after } | Error::Outage { retry_after, .. } => {
                json!({ "retry_after": retry_after })
            }
            _ => json!({}),
        }
    }
}

/// Collects field errors while validating a request, so that every bad field
/// is reported at once instead of the first one only.
#[derive(Debug, Default)]
pub struct FieldErrors {
    fields: Vec<FieldError>,
}

impl FieldErrors {
    pub fn add(&mut self, name: impl Into<String>, message: impl Into<String>) {
        let name = name.into();
        let message = message.into();
        match self.fields.iter_mut().find(|f| f.name == name) {
            Some(f) => f.messages.push(message),
            None => self.fields.push(FieldError {
                name,
                messages: vec![message],
            }),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    pub fn has(&self, name: &str) -> bool {
        self.fields.iter().any(|f| f.name == name)
    }

    /// `Ok(value)` when nothing was rejected.
    pub fn finish<T>(self, value: T) -> Result<T> {
        if self.fields.is_empty() {
            Ok(value)
        } else {
            Err(Error::InvalidInput {
                fields: self.fields,
            })
        }
    }

    pub fn into_error(self) -> Option<Error> {
        (!self.fields.is_empty()).then_some(Error::InvalidInput {
            fields: self.fields,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_errors_merge_messages_per_field() {
        let mut errs = FieldErrors::default();
        errs.add("a", "one");
        errs.add("b", "two");
        errs.add("a", "three");
        let Err(Error::InvalidInput { fields }) = errs.finish(()) else {
            panic!("expected error")
        };
        assert_eq!(fields.len(), 2);
        assert_eq!(fields[0].messages, vec!["one", "three"]);
    }

    #[test]
    fn internal_errors_do_not_leak() {
        let e = Error::internal("database exploded at 10.0.0.3");
        assert_eq!(e.code(), "service_error");
        assert!(!e.public_message().contains("10.0.0.3"));
    }
}
