//! `/v1/volumes`.

use super::{AppState, page_of, pagination, parse_id, query_pairs};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::views;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use meson_core::Error;
use meson_core::volume::VolumeKind;
use meson_types::ErrorResponse;
use meson_types::requests::{PageQuery, VolumeListQuery};
use meson_types::volume as wire;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(read))
}

/// Reads a volume.
#[utoipa::path(
    get,
    path = "/v1/volumes/{id}",
    tag = "volumes",
    operation_id = "volume_get",
    summary = "Get a volume",
    params(("id" = uuid::Uuid, Path, description = "The volume's id.")),
    responses(
        (status = 200, description = "The volume.", body = wire::VolumeResponse),
        (status = 400, description = "The id is not a UUID (`invalid_input`).",
            body = ErrorResponse),
        (status = 404, description = "No such volume for this tenant (`not_found`).",
            body = ErrorResponse),
    ),
)]
async fn read(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<wire::VolumeResponse>> {
    let v = s.app.volume_get(&p, parse_id(&id)?).await?;
    Ok(Json(wire::VolumeResponse {
        volume: views::volume(&v),
    }))
}

/// `vm=<id>` and `kind=boot|cloudinit|data` filter the list.
#[utoipa::path(
    get,
    path = "/v1/volumes",
    tag = "volumes",
    operation_id = "volume_list",
    summary = "List volumes",
    params(PageQuery, VolumeListQuery),
    responses(
        (status = 200, description = "A page of volumes.", body = wire::VolumeList,
            headers(("Link" = String, description = "RFC 8288 links to the `prev`, `next` \
                and `last` pages."))),
        (status = 400, description = "A bad query parameter (`invalid_input`, named in \
            `details.fields`).", body = ErrorResponse),
    ),
)]
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
            volumes: volumes.iter().map(views::volume).collect(),
            meta,
        },
        link,
    ))
}
