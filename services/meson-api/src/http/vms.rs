//! `/v1/vms`.

use super::{AppState, JsonBody, page_of, pagination, parse_id, query_pairs};
use crate::auth::Principal;
use crate::error::ApiResult;
use crate::views;
use axum::extract::{Path, RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use meson_types as wire;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/vms", get(list).post(create))
        .route("/v1/vms/{id}", get(read).delete(delete))
        .route("/v1/vms/{id}/actions/{command}", axum::routing::post(power))
}

async fn create(
    State(s): State<AppState>,
    p: Principal,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let c = s.app.vm_create(&p, &body).await?;
    let res = wire::VmCreateResponse {
        vm: views::vm(&c.vm, &c.volumes),
        action: views::action(&c.action),
        next_actions: vec![],
        warnings: c.warnings.iter().map(views::warning).collect(),
    };
    Ok((StatusCode::CREATED, Json(res)).into_response())
}

async fn read(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<wire::VmResponse>> {
    let (vm, volumes) = s.app.vm_get(&p, parse_id(&id)?).await?;
    Ok(Json(wire::VmResponse {
        vm: views::vm(&vm, &volumes),
    }))
}

async fn list(
    State(s): State<AppState>,
    p: Principal,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let page = page_of(&query_pairs(q.as_deref())?)?;
    let res = s.app.vm_list(&p, page).await?;
    let (meta, link) = pagination("/v1/vms", page, res.total);
    let body = wire::VmList {
        vms: res.vms.iter().map(|v| views::vm(v, &res.volumes)).collect(),
        meta,
    };
    let mut out = Json(body).into_response();
    if let Some(link) = link {
        out.headers_mut().insert(header::LINK, link);
    }
    Ok(out)
}

async fn delete(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<wire::ActionResponse>> {
    let action = s.app.vm_delete(&p, parse_id(&id)?).await?;
    Ok(Json(wire::ActionResponse {
        action: views::action(&action),
    }))
}

async fn power(
    State(s): State<AppState>,
    p: Principal,
    Path((id, command)): Path<(String, String)>,
) -> ApiResult<Response> {
    let op = crate::app::PowerAction::parse(&command).ok_or_else(|| {
        crate::error::ApiError(meson_core::Error::NotFound {
            kind: "vm action",
            id: command.clone(),
        })
    })?;
    let action = s.app.vm_power(&p, parse_id(&id)?, op).await?;
    Ok((
        StatusCode::CREATED,
        Json(wire::ActionResponse {
            action: views::action(&action),
        }),
    )
        .into_response())
}
