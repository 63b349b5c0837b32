//! `/v1/actions`.

use super::{AppState, parse_id, query_pairs};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::views;
use axum::extract::{Path, RawQuery, State};
use axum::routing::get;
use axum::{Json, Router};
use meson_core::Error;
use meson_core::action::ActionStatus;
use meson_types as wire;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/actions", get(list))
        .route("/v1/actions/{id}", get(read))
}

async fn read(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<wire::ActionResponse>> {
    let a = s.app.action_get(&p, parse_id(&id)?).await?;
    Ok(Json(wire::ActionResponse {
        action: views::action(&a),
    }))
}

async fn list(
    State(s): State<AppState>,
    p: Principal,
    RawQuery(q): RawQuery,
) -> ApiResult<Json<wire::ActionList>> {
    let mut ids = Vec::new();
    let mut status = Vec::new();
    for (k, v) in query_pairs(q.as_deref())? {
        match k.as_str() {
            "id" => ids.push(parse_id(&v)?),
            "status" => status.push(ActionStatus::parse(&v).ok_or_else(|| {
                ApiError(Error::invalid(
                    "status",
                    "must be running, success or error",
                ))
            })?),
            _ => {}
        }
    }
    let actions = s.app.action_list(&p, &ids, &status).await?;
    Ok(Json(wire::ActionList {
        actions: actions.iter().map(views::action).collect(),
    }))
}
