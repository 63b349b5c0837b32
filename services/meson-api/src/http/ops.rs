//! The index, liveness, readiness and metrics: no token needed.

use super::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use meson_types::ops::{Health, Index, IndexLinks};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(index))
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
}

/// What this server is, and the paths to start from.
#[utoipa::path(
    get,
    path = "/",
    tag = "ops",
    operation_id = "index",
    summary = "Index",
    description = "The server's name and version, and where its documentation, OpenAPI \
        document, API, health checks and metrics are. No token needed.",
    responses((status = 200, description = "The index.", body = Index,
        example = json!({"name": "meson", "version": "0.1.0", "links": {"docs": "/docs",
            "openapi": "/openapi.json", "api": "/v1", "healthz": "/healthz",
            "readyz": "/readyz", "metrics": "/metrics"}}))),
)]
async fn index() -> Json<Index> {
    Json(Index {
        name: "meson".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        links: IndexLinks {
            docs: "/docs".into(),
            openapi: "/openapi.json".into(),
            api: "/v1".into(),
            healthz: "/healthz".into(),
            readyz: "/readyz".into(),
            metrics: "/metrics".into(),
        },
    })
}

/// Prometheus metrics.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "ops",
    operation_id = "metrics",
    summary = "Prometheus metrics",
    description = "Requests, actions, the job queue, AtomOS calls, placement failures, \
        clusters and nodes by status, in Prometheus's text format.",
    responses((status = 200, description = "The metrics.",
        content_type = "text/plain; version=0.0.4", body = String)),
)]
async fn metrics(State(s): State<AppState>) -> impl axum::response::IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        crate::metrics::render(&s.app.pool).await,
    )
}

/// The process is up.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "ops",
    operation_id = "healthz",
    summary = "Liveness",
    responses((status = 200, description = "The process is up.", body = Health,
        example = json!({"status": "ok"}))),
)]
async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        database: None,
    })
}

/// Ready to serve: the database answers.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "ops",
    operation_id = "readyz",
    summary = "Readiness",
    responses(
        (status = 200, description = "Ready: the database answers.", body = Health,
            example = json!({"status": "ready"})),
        (status = 503, description = "Not ready: the database does not answer.", body = Health,
            headers(("Retry-After" = u64, description = "Seconds after which the database is \
                tried again.")),
            example = json!({"status": "unavailable", "database": "down"})),
    ),
)]
async fn readyz(State(s): State<AppState>) -> axum::response::Response {
    use axum::response::IntoResponse;
    if s.app.ready().await {
        let ready = Health {
            status: "ready".into(),
            database: None,
        };
        (StatusCode::OK, Json(ready)).into_response()
    } else {
        let down = Health {
            status: "unavailable".into(),
            database: Some("down".into()),
        };
        (
            StatusCode::SERVICE_UNAVAILABLE,
            [(
                axum::http::header::RETRY_AFTER,
                s.app.breaker.retry_after().to_string(),
            )],
            Json(down),
        )
            .into_response()
    }
}
