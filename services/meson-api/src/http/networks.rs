//! `/v1/networks`.

use super::responses::{
    BadBody, BadBodyField, BadId, BadQuery, CannotDelete, CannotModify, NameTakenOrKeyReused,
    NoSuchNetwork,
};
use super::{AppState, JsonBody, pagination, parse_id, query_pairs};
use crate::app::ListQuery;
use crate::auth::Principal;
use crate::error::ApiResult;
use crate::views;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use meson_types as wire;
use meson_types::ErrorResponse;
use meson_types::network::{NetworkCreateRequest, NetworkListQuery};
use meson_types::requests::{CursorQuery, PageQuery, VmUpdateRequest};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(read, delete, update))
}

/// Creates a private network.
#[utoipa::path(
    post,
    path = "/v1/networks",
    tag = "networks",
    operation_id = "network_create",
    summary = "Create a network",
    description = "A private IPv4 network. It is made on an AtomOS host when the first VM \
        placed there joins it (`networks` in `POST /v1/vms`). With `dhcp` false, meson hands \
        each VM the lowest free address of the range and configures it in the guest.",
    request_body(content = NetworkCreateRequest, content_type = "application/json"),
    params(("Idempotency-Key" = Option<String>, Header,
        description = "Makes a retried POST safe: the first response is replayed.")),
    responses(
        (status = 201, description = "The network.", body = wire::network::NetworkResponse),
        BadBodyField,
        (status = 403, description = "The token's role cannot create (`forbidden`).",
            body = ErrorResponse),
        NameTakenOrKeyReused,
    ),
)]
async fn create(
    State(s): State<AppState>,
    p: Principal,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let (network, warnings) = s.app.network_create(&p, &body).await?;
    let res = wire::network::NetworkResponse {
        network: views::network(&network, &[]),
        warnings: warnings.iter().map(views::warning).collect(),
    };
    Ok((StatusCode::CREATED, Json(res)).into_response())
}

/// Reads a network.
#[utoipa::path(
    get,
    path = "/v1/networks/{id}",
    tag = "networks",
    operation_id = "network_get",
    summary = "Get a network",
    params(("id" = uuid::Uuid, Path, description = "The network's id.")),
    responses(
        (status = 200, description = "The network.", body = wire::network::NetworkResponse),
        BadId,
        NoSuchNetwork,
    ),
)]
async fn read(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<wire::network::NetworkResponse>> {
    let (network, vms) = s.app.network_get(&p, parse_id(&id)?).await?;
    Ok(Json(wire::network::NetworkResponse {
        network: views::network(&network, &vms),
        warnings: vec![],
    }))
}

/// Lists networks.
#[utoipa::path(
    get,
    path = "/v1/networks",
    tag = "networks",
    operation_id = "network_list",
    summary = "List networks",
    params(PageQuery, CursorQuery, NetworkListQuery),
    responses(
        (status = 200, description = "A page of networks.", body = wire::network::NetworkList,
            headers(("Link" = String, description = "RFC 8288 links to the `next` page \
                (by cursor) and the `prev` and `last` pages (by number), with the call's \
                filters and sort."))),
        BadQuery,
    ),
)]
async fn list(
    State(s): State<AppState>,
    p: Principal,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let pairs = query_pairs(q.as_deref())?;
    let q = ListQuery::parse(&pairs, |v| {
        meson_core::network::NetworkStatus::parse(v).is_some()
    })?;
    let networks = s.app.network_list(&p, &q).await?;
    let (meta, link) = pagination("/v1/networks", &pairs, networks.pagination());
    let body = wire::network::NetworkList {
        networks: networks
            .items
            .iter()
            .map(|(n, vms)| views::network(n, vms))
            .collect(),
        meta,
    };
    Ok(super::paged(body, link))
}

/// Renames and/or relabels a network.
#[utoipa::path(
    patch,
    path = "/v1/networks/{id}",
    tag = "networks",
    operation_id = "network_update",
    summary = "Update a network",
    description = "Changes the name and/or replaces the labels; the subnet cannot change.",
    params(("id" = uuid::Uuid, Path, description = "The network's id.")),
    request_body(content = VmUpdateRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The network as it is now.",
            body = wire::network::NetworkResponse),
        BadBody,
        CannotModify,
        NoSuchNetwork,
        (status = 409, description = "The name is taken (`uniqueness_error`).",
            body = ErrorResponse),
    ),
)]
async fn update(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<wire::network::NetworkResponse>> {
    let (network, vms, warnings) = s.app.network_update(&p, parse_id(&id)?, &body).await?;
    Ok(Json(wire::network::NetworkResponse {
        network: views::network(&network, &vms),
        warnings: warnings.iter().map(views::warning).collect(),
    }))
}

/// Deletes an unused network.
#[utoipa::path(
    delete,
    path = "/v1/networks/{id}",
    tag = "networks",
    operation_id = "network_delete",
    summary = "Delete a network",
    description = "Starts its `delete_network` action, which removes the network from every \
        AtomOS host it was made on. Refused while VMs are attached.",
    params(("id" = uuid::Uuid, Path, description = "The network's id.")),
    responses(
        (status = 200, description = "Accepted: the delete action.", body = wire::ActionResponse),
        BadId,
        CannotDelete,
        NoSuchNetwork,
        (status = 409, description = "VMs are attached to it (`conflict`).",
            body = ErrorResponse),
        (status = 423, description = "It is already being deleted (`locked`; the action id \
            in `details.action_id`).", body = ErrorResponse),
    ),
)]
async fn delete(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<wire::ActionResponse>> {
    let action = s.app.network_delete(&p, parse_id(&id)?).await?;
    Ok(super::action_answer(&action))
}
