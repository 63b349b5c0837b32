//! `/v1/vms`.

use super::{AppState, JsonBody, page_of, pagination, parse_id, query_pairs};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::views;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use meson_db::vms::VmFilter;
use meson_types as wire;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/vms", get(list).post(create))
        .route("/v1/vms/{id}", get(read).delete(delete).patch(update))
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
    let pairs = query_pairs(q.as_deref())?;
    let page = page_of(&pairs)?;
    let filter = vm_filter(&pairs)?;
    let res = s.app.vm_list(&p, page, &filter).await?;
    let (meta, link) = pagination("/v1/vms", page, res.total);
    let body = wire::VmList {
        vms: res.vms.iter().map(|v| views::vm(v, &res.volumes)).collect(),
        meta,
    };
    Ok(super::paged(body, link))
}

/// `name=`, `status=` (repeatable), `label_selector=`, `sort=` (up to two).
fn vm_filter(pairs: &[(String, String)]) -> ApiResult<VmFilter> {
    use meson_core::Error;
    let mut f = VmFilter::default();
    for (k, v) in pairs {
        match k.as_str() {
            "name" => f.name = Some(v.clone()),
            "status" => {
                meson_core::vm::VmStatus::parse(v).ok_or_else(|| {
                    ApiError(Error::invalid("status", format!("unknown status '{v}'")))
                })?;
                f.statuses.push(v.clone());
            }
            "label_selector" => f.selector.extend(meson_core::selector::parse(v)?),
            "sort" => {
                let (field, dir) = v.split_once(':').unwrap_or((v, "asc"));
                if !["id", "name", "status", "created"].contains(&field)
                    || !["asc", "desc"].contains(&dir)
                {
                    return Err(ApiError(Error::invalid(
                        "sort",
                        format!(
                            "'{v}': sort by id, name, status or created, optionally :asc or :desc"
                        ),
                    )));
                }
                if f.sort.len() == 2 {
                    return Err(ApiError(Error::invalid("sort", "at most two sort keys")));
                }
                f.sort.push(format!("{field}:{dir}"));
            }
            _ => {}
        }
    }
    Ok(f)
}

async fn update(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<serde_json::Value>> {
    let (vm, volumes, warnings) = s.app.vm_update(&p, parse_id(&id)?, &body).await?;
    let mut out = serde_json::json!({ "vm": views::vm(&vm, &volumes) });
    if !warnings.is_empty() {
        out["warnings"] =
            serde_json::json!(warnings.iter().map(views::warning).collect::<Vec<_>>());
    }
    Ok(Json(out))
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
