//! Errors on the gRPC wire: one mapping from the domain error to
//! `tonic::Status`, with the REST error's code and details as
//! `google.rpc` error details.

use meson_core::Error;
use std::collections::HashMap;
use tonic::Code;
use tonic_types::{ErrorDetails, StatusExt};

/// `google.rpc.ErrorInfo.domain` of meson's errors.
pub const DOMAIN: &str = "meson.elemento.cloud";

/// The gRPC code of each error. Distinct enough that the audit log can
/// tell the REST status back ([`http_status_of`]).
pub fn code_of(e: &Error) -> Code {
    match e {
        Error::NotFound { .. } => Code::NotFound,
        Error::InvalidInput { .. }
        | Error::Json { .. }
        | Error::PayloadTooLarge { .. }
        | Error::UnsupportedMediaType { .. } => Code::InvalidArgument,
        Error::Conflict { .. } => Code::FailedPrecondition,
        Error::AlreadyExists { .. } => Code::AlreadyExists,
        // Another action holds the resource: retry later.
        Error::Locked { .. } => Code::Aborted,
        Error::QuotaExceeded { .. } | Error::RateLimited { .. } => Code::ResourceExhausted,
        Error::InsufficientCapacity { .. } | Error::Unavailable { .. } | Error::Outage { .. } => {
            Code::Unavailable
        }
        Error::Timeout => Code::DeadlineExceeded,
        Error::Unauthorized => Code::Unauthenticated,
        Error::Forbidden { .. } => Code::PermissionDenied,
        Error::Internal { .. } => Code::Internal,
    }
}

/// The HTTP status the REST API answers for what gRPC answered `code`.
pub fn http_status_of(code: Code) -> u16 {
    match code {
        Code::Ok => 200,
        Code::InvalidArgument | Code::OutOfRange => 400,
        Code::Unauthenticated => 401,
        Code::PermissionDenied | Code::ResourceExhausted => 403,
        Code::NotFound => 404,
        Code::AlreadyExists | Code::FailedPrecondition => 409,
        Code::Aborted => 423,
        Code::Unimplemented => 501,
        Code::Unavailable => 503,
        Code::DeadlineExceeded | Code::Cancelled => 504,
        _ => 500,
    }
}

/// The status of `e`: its public message, and `google.rpc.ErrorInfo`
/// (reason: the REST error code) with `BadRequest`, `QuotaFailure` or
/// `RetryInfo` as the error calls for. Internal causes are logged, never
/// sent.
pub fn status_of(e: &Error) -> tonic::Status {
    let code = code_of(e);
    if code == Code::Internal {
        tracing::error!(error = %e, source = ?std::error::Error::source(e), "request failed");
    }
    let mut details = ErrorDetails::new();
    let mut metadata = HashMap::new();
    match e {
        Error::InvalidInput { fields } => {
            for f in fields {
                for m in &f.messages {
                    details.add_bad_request_violation(f.name.clone(), m.clone());
                }
            }
        }
        Error::AlreadyExists { field, .. } => {
            details.add_bad_request_violation(field.clone(), "is taken");
        }
        Error::QuotaExceeded { limits } => {
            for l in limits {
                details.add_quota_failure_violation(
                    l.name.clone(),
                    format!("quota {}, current {}", l.quota, l.current),
                );
                metadata.insert(format!("{}.quota", l.name), l.quota.to_string());
                metadata.insert(format!("{}.current", l.name), l.current.to_string());
            }
        }
        Error::RateLimited { retry_after } | Error::Outage { retry_after, .. } => {
            details.set_retry_info(Some(std::time::Duration::from_secs(*retry_after)));
        }
        Error::Locked { action_id, .. } => {
            metadata.insert("action_id".to_owned(), action_id.to_string());
        }
        _ => {}
    }
    details.set_error_info(e.code(), DOMAIN, metadata);
    // Clients that read no details still learn what to fix.
    let message = match e {
        Error::InvalidInput { fields } => {
            let each: Vec<String> = fields
                .iter()
                .map(|f| format!("{}: {}", f.name, f.messages.join("; ")))
                .collect();
            format!("invalid input: {}", each.join(", "))
        }
        other => other.public_message(),
    };
    tonic::Status::with_error_details(code, message, details)
}

#[cfg(test)]
mod tests {
    use super::*;
    use meson_core::error::LimitExceeded;

    #[test]
    fn statuses_carry_the_rest_code_and_details() {
        let s = status_of(&Error::invalid("specs.vm_name", "is required"));
        assert_eq!(s.code(), Code::InvalidArgument);
        let d = s.get_error_details();
        assert_eq!(d.error_info().unwrap().reason, "invalid_input");
        let v = &d.bad_request().unwrap().field_violations[0];
        assert_eq!(
            (v.field.as_str(), v.description.as_str()),
            ("specs.vm_name", "is required")
        );

        let s = status_of(&Error::QuotaExceeded {
            limits: vec![LimitExceeded {
                name: "vms".into(),
                quota: 5,
                current: 5,
            }],
        });
        assert_eq!(s.code(), Code::ResourceExhausted);
        let d = s.get_error_details();
        assert_eq!(d.error_info().unwrap().metadata["vms.quota"], "5");
        assert_eq!(d.quota_failure().unwrap().violations[0].subject, "vms");

        let s = status_of(&Error::internal("the database at 10.0.0.3 is gone"));
        assert!(!s.message().contains("10.0.0.3"));
        for e in [
            Error::not_found("vm", "x"),
            Error::Timeout,
            Error::Unauthorized,
            Error::Conflict {
                message: "x".into(),
            },
        ] {
            assert_eq!(
                http_status_of(code_of(&e)),
                crate::error::status_of(&e).as_u16(),
                "{e:?}"
            );
        }
    }
}
