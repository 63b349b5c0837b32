//! Errors on the wire: one mapping from the domain error to HTTP.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use meson_core::Error;
use meson_types::{ErrorBody, ErrorResponse};

/// The API's error: a domain error rendered as `{"error": {code, message, details}}`.
#[derive(Debug)]
pub struct ApiError(pub Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError(e)
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// Marks an answer given because the database was unreachable: the gate
/// may run the request again once it answers.
#[derive(Clone, Copy, Debug)]
pub struct OutageAnswer;

pub fn status_of(e: &Error) -> StatusCode {
    match e {
        Error::NotFound { .. } => StatusCode::NOT_FOUND,
        Error::InvalidInput { .. } | Error::Json { .. } => StatusCode::BAD_REQUEST,
        Error::Conflict { .. } | Error::AlreadyExists { .. } => StatusCode::CONFLICT,
        Error::Locked { .. } => StatusCode::LOCKED,
        Error::QuotaExceeded { .. } | Error::Forbidden { .. } => StatusCode::FORBIDDEN,
        Error::InsufficientCapacity { .. } | Error::Unavailable { .. } | Error::Outage { .. } => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        Error::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        Error::UnsupportedMediaType { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        Error::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
        Error::Timeout => StatusCode::GATEWAY_TIMEOUT,
        Error::Unauthorized => StatusCode::UNAUTHORIZED,
        Error::Internal { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

pub fn body_of(e: &Error) -> ErrorResponse {
    ErrorResponse {
        error: ErrorBody {
            code: e.code().to_owned(),
            message: e.public_message(),
            details: e.details(),
        },
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = status_of(&self.0);
        if status.is_server_error() {
            // The full cause chain goes to the log, never to the client.
            let mut chain = String::new();
            let mut src = std::error::Error::source(&self.0);
            while let Some(s) = src {
                chain.push_str(": ");
                chain.push_str(&s.to_string());
                src = s.source();
            }
            tracing::error!(error = %self.0, cause = %chain, "request failed");
        }
        let mut res = (status, axum::Json(body_of(&self.0))).into_response();
        if matches!(self.0, Error::Outage { .. }) {
            res.extensions_mut().insert(OutageAnswer);
        }
        if let Some(after) = self.0.retry_after() {
            res.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, after.into());
        }
        res
    }
}
