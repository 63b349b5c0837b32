//! HTTP front of a simulated host: one router per daemon, FastAPI-style errors, the fault gate.

mod auth;
mod backup;
mod compute;
mod console;
mod network;
mod storage;

use crate::faults::Verdict;
use crate::host::SimHost;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::de::DeserializeOwned;
use serde_json::json;

/// The four daemons of a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Daemon {
    Compute,
    Storage,
    Network,
    Auth,
}

impl Daemon {
    pub(crate) const ALL: [Daemon; 4] = [
        Daemon::Compute,
        Daemon::Storage,
        Daemon::Network,
        Daemon::Auth,
    ];

    fn base_path(self) -> &'static str {
        match self {
            Daemon::Compute => "/api/v1.0/client/vm",
            Daemon::Storage => "/api/v1.0/client/volume",
            Daemon::Network => "/api/v1.0/client/network",
            Daemon::Auth => "/api/v1/authenticate",
        }
    }

    /// Same labels as the driver's routes, so a fault named after a driver
    /// error hits the call that produced it.
    fn label(self) -> &'static str {
        match self {
            Daemon::Compute => "vm",
            Daemon::Storage => "volume",
            Daemon::Network => "network",
            Daemon::Auth => "authenticate",
        }
    }

    fn greeting(self) -> &'static str {
        match self {
            Daemon::Compute => "This is an Elemento Matcher Client!",
            Daemon::Storage => "This is an Elemento Storage Client!",
            Daemon::Network => "This is an Elemento Network Client!",
            Daemon::Auth => "This is an Elemento Authenticator!",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Daemon::Compute => "compute",
            Daemon::Storage => "storage",
            Daemon::Network => "network",
            Daemon::Auth => "auth",
        }
    }
}

/// A non-2xx answer with FastAPI's `{"detail": ...}` body.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    detail: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        ApiError {
            status,
            detail: detail.into(),
        }
    }

    pub(crate) fn bad_request(detail: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, detail)
    }

    /// 422, FastAPI's answer to a well-formed body with impossible values;
    /// the driver keeps it apart from canallocate's capacity refusals.
    pub(crate) fn unprocessable(detail: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, detail)
    }

    pub(crate) fn not_found(detail: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, detail)
    }

    pub(crate) fn conflict(detail: impl Into<String>) -> Self {
        ApiError::new(StatusCode::CONFLICT, detail)
    }

    /// 507: the driver's capacity signal.
    pub(crate) fn no_capacity(detail: impl Into<String>) -> Self {
        ApiError::new(StatusCode::INSUFFICIENT_STORAGE, detail)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(json!({ "detail": self.detail }))).into_response()
    }
}

pub(crate) type ApiResult = Result<Response, ApiError>;

/// Parses a JSON object body; anything unreadable is a 400 naming the
/// problem. Every body of the protocol is an object, and serde would
/// otherwise read a struct from an array (`[1, 2]`).
pub(crate) fn parse<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    serde_json::from_value(value)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

/// A 200 JSON answer.
pub(crate) fn ok<T: serde::Serialize>(value: T) -> ApiResult {
    Ok(axum::Json(value).into_response())
}

/// Largest accepted body; cloud-init user-data can be tens of KiB.
const BODY_LIMIT: usize = 16 * 1024 * 1024;

/// The router of one daemon of `host`.
pub(crate) fn router(daemon: Daemon, host: SimHost) -> Router {
    let api = match daemon {
        Daemon::Compute => compute::routes(),
        Daemon::Storage => storage::routes(),
        Daemon::Network => network::routes(),
        Daemon::Auth => auth::routes(),
    };
    Router::new()
        .route("/", get(move || async move { daemon.greeting() }))
        .route(
            "/version",
            get(move || async move {
                axum::Json(json!({
                    "version": concat!(env!("CARGO_PKG_VERSION"), "-sim"),
                    "daemon": daemon.name(),
                }))
            }),
        )
        .nest(daemon.base_path(), api)
        .fallback(|| async { ApiError::not_found("Not Found") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
        })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn_with_state((host.clone(), daemon), gate))
        .with_state(host)
}

/// The label of every console tunnel's status (its path carries the id),
/// as the driver names it.
const CONSOLE_STATUS: &str = "/porttunnel/vncWebSocket/{instance_id}";

/// Route label of a request path: `vm/register`; the data segment of
/// cloud-init uploads is dropped so one label covers every upload, and a
/// console tunnel's id is [`CONSOLE_STATUS`]'s placeholder.
pub(crate) fn route_label(daemon: Daemon, path: &str) -> String {
    let rest = path.strip_prefix(daemon.base_path()).unwrap_or(path);
    let rest = if rest.starts_with("/cloudinit/metadata/") {
        "/cloudinit/metadata"
    } else if daemon == Daemon::Compute
        && let Some(id) = rest.strip_prefix("/porttunnel/vncWebSocket/")
        && !matches!(id.trim_end_matches('/'), "" | "stop")
    {
        CONSOLE_STATUS
    } else {
        rest
    };
    format!("{}{}", daemon.label(), rest.trim_end_matches('/'))
}

/// POST routes that change nothing: the scheduler asks every host for a
/// quote per placement, so these skip the state file (which would be left
/// unchanged anyway).
const READ_ONLY_POSTS: [&str; 4] = [
    "vm/canallocate",
    "volume/info",
    "volume/cancreate",
    "network/info",
];

/// The answer to a request whose effect could not be written to the state file.
pub(crate) fn saving_failed(host: &SimHost, e: &std::io::Error) -> ApiError {
    tracing::error!(host = host.name(), error = %e, "the host's state could not be saved");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("the host's state could not be saved: {e}"),
    )
}

/// Applies the host's injected faults before the handler runs, and writes
/// the state through after every request but a GET.
async fn gate(
    State((host, daemon)): State<(SimHost, Daemon)>,
    request: Request,
    next: Next,
) -> Response {
    let route = route_label(daemon, request.uri().path());
    let (latency, verdict) = host.faults().verdict(&route);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    match verdict {
        Verdict::Serve => {
            let reads_only = request.method() == Method::GET
                || request.method() == Method::HEAD
                || READ_ONLY_POSTS.contains(&route.as_str());
            let response = next.run(request).await;
            tracing::debug!(host = host.name(), %route, status = response.status().as_u16(), "served");
            if reads_only {
                return response;
            }
            // Write-through: what the answer acknowledges is on disk first.
            match host.save().await {
                Ok(()) => response,
                Err(e) => saving_failed(&host, &e).into_response(),
            }
        }
        Verdict::Fail(status) => {
            tracing::info!(host = host.name(), %route, status, "injected failure");
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            ApiError::new(status, format!("injected fault on {route}")).into_response()
        }
        Verdict::Hang => {
            tracing::info!(host = host.name(), %route, "injected hang");
            // Never completes; hyper drops this future when the client hangs up.
            std::future::pending::<Response>().await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_labelled_like_the_driver() {
        assert_eq!(
            route_label(Daemon::Compute, "/api/v1.0/client/vm/register"),
            "vm/register"
        );
        assert_eq!(
            route_label(
                Daemon::Storage,
                "/api/v1.0/client/volume/cloudinit/metadata/eyJ9"
            ),
            "volume/cloudinit/metadata"
        );
        assert_eq!(
            route_label(Daemon::Auth, "/api/v1/authenticate/login"),
            "authenticate/login"
        );
        assert_eq!(route_label(Daemon::Compute, "/"), "vm");
        assert_eq!(
            route_label(Daemon::Network, "/api/v1.0/client/network/portforward"),
            "network/portforward"
        );
        assert_eq!(
            route_label(Daemon::Network, "/api/v1.0/client/network/portforwards"),
            "network/portforwards"
        );
        for (path, label) in [
            ("/api/v1.0/client/vm/backup", "vm/backup"),
            ("/api/v1.0/client/vm/backup/restore", "vm/backup/restore"),
            ("/api/v1.0/client/vm/backups", "vm/backups"),
            ("/api/v1.0/client/vm/backups/search", "vm/backups/search"),
            (
                "/api/v1.0/client/vm/porttunnel/vncWebSocket",
                "vm/porttunnel/vncWebSocket",
            ),
            (
                "/api/v1.0/client/vm/porttunnel/vncWebSocket/stop",
                "vm/porttunnel/vncWebSocket/stop",
            ),
            (
                "/api/v1.0/client/vm/porttunnel/vncWebSocket/6f1c1b1e",
                "vm/porttunnel/vncWebSocket/{instance_id}",
            ),
        ] {
            assert_eq!(route_label(Daemon::Compute, path), label);
        }
    }
}
