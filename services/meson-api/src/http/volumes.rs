//! `/v1/volumes`.

use super::{AppState, page_of, pagination, parse_id, query_pairs};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use meson_core::Error;
use meson_core::volume::VolumeKind;
use meson_types::volume as wire;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/volumes", get(list))
        .route("/v1/volumes/{id}", get(read))
}

fn view(v: &meson_core::volume::Volume) -> wire::Volume {
    wire::Volume {
        id: v.id.0,
        name: v.name.clone(),
        kind: v.kind.as_str().to_owned(),
        size: v.size_gb,
        status: v.status.as_str().to_owned(),
        vm: v.vm_id.map(|id| id.0),
    }
}

async fn read(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<wire::VolumeResponse>> {
    let v = s.app.volume_get(&p, parse_id(&id)?).await?;
    Ok(Json(wire::VolumeResponse { volume: view(&v) }))
}

/// `vm=<id>` and `kind=boot|cloudinit|data` filter the list.
async fn list(
    State(s): State<AppState>,
    p: Principal,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let pairs = query_pairs(q.as_deref())?;
    let page = page_of(&pairs)?;
    let (mut vm, mut kind) = (None, None);
    for (k, v) in &pairs {
        match k.as_str() {
            "vm" => {
                vm = Some(v.parse().map_err(|_| {
                    ApiError(Error::invalid("vm", format!("'{v}' is not a valid id")))
                })?)
            }
            "kind" => {
                kind = Some(VolumeKind::parse(v).ok_or_else(|| {
                    ApiError(Error::invalid("kind", "must be boot, cloudinit or data"))
                })?)
            }
            _ => {}
        }
    }
    let (volumes, total) = s.app.volume_list(&p, page, vm, kind).await?;
    let (meta, link) = pagination("/v1/volumes", page, total);
    Ok(super::paged(
        wire::VolumeList {
            volumes: volumes.iter().map(view).collect(),
            meta,
        },
        link,
    ))
}
