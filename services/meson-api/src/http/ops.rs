//! Liveness and readiness.

use super::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use meson_types::ops::Health;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
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
            example = json!({"status": "unavailable", "database": "down"})),
    ),
)]
async fn readyz(State(s): State<AppState>) -> (StatusCode, Json<Health>) {
    if s.app.ready().await {
        (
            StatusCode::OK,
            Json(Health {
                status: "ready".into(),
                database: None,
            }),
        )
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(Health {
                status: "unavailable".into(),
                database: Some("down".into()),
            }),
        )
    }
}
