//! What one request may take: body and header sizes, JSON nesting, time.

use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use meson_core::Error;
use std::time::Duration;

/// Limits on one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestLimits {
    /// Largest body, in bytes.
    pub body_bytes: usize,
    /// Deepest nesting of arrays and objects in a JSON body.
    pub json_depth: usize,
    /// Largest sum of header names and values, in bytes.
    pub header_bytes: usize,
    /// How long a request may take before it answers `504 timeout` (the
    /// wait for the response's head; a streamed body is not limited).
    pub timeout: Duration,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            body_bytes: 1024 * 1024,
            json_depth: 32,
            header_bytes: 16 * 1024,
            timeout: Duration::from_secs(30),
        }
    }
}

/// Refuses requests whose headers are too large (`431`, `invalid_input`),
/// bounds the time of the rest, and hands the limits to the extractors.
pub async fn limits(State(l): State<RequestLimits>, mut req: Request, next: Next) -> Response {
    let size: usize = req
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len())
        .sum();
    if size > l.header_bytes {
        let mut res = ApiError(Error::invalid(
            "(headers)",
            format!(
                "the headers take {size} bytes, more than {}",
                l.header_bytes
            ),
        ))
        .into_response();
        *res.status_mut() = StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE;
        return res;
    }
    req.extensions_mut().insert(l);
    match tokio::time::timeout(l.timeout, next.run(req)).await {
        Ok(res) => res,
        // Dropping the handler's future cancels its work.
        Err(_) => ApiError(Error::Timeout).into_response(),
    }
}

/// Fails with `json_error` when `json` nests arrays and objects deeper than
/// `max` (strings are skipped, escapes included), before any parser
/// recurses into it.
pub fn check_depth(json: &[u8], max: usize) -> Result<(), Error> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in json {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return Err(Error::Json {
                        message: format!(
                            "the body nests arrays and objects deeper than {max} levels"
                        ),
                    });
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_nesting_outside_strings() {
        assert!(check_depth(br#"{"a":[1,{"b":2}]}"#, 3).is_ok());
        assert!(check_depth(br#"{"a":[1,{"b":2}]}"#, 2).is_err());
        // Brackets in strings, escaped quotes included, do not count.
        assert!(check_depth(br#"{"a":"[[[[\"[[[["}"#, 1).is_ok());
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let Err(Error::Json { message }) = check_depth(deep.as_bytes(), 32) else {
            panic!("a deep body passed")
        };
        assert!(message.contains("deeper than 32"), "{message}");
    }
}
