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
