//! `/v1/networks/{id}/port-forwards`: public ports of a network's VMs' hosts
//! relayed to the VMs.

use super::responses::{BadId, BadIds, CannotModify, NoSuchForward, NoSuchNetwork, VmBusy};
use super::{AppState, JsonBody, parse_id};
use crate::auth::Principal;
use crate::error::ApiResult;
use crate::views;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use meson_types::ErrorResponse;
use meson_types::port_forward::{
    PortForwardCreateRequest, PortForwardCreateResponse, PortForwardList, PortForwardResponse,
};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(read, delete))
}

/// Lists a network's port forwards.
#[utoipa::path(
    get,
    path = "/v1/networks/{id}/port-forwards",
    tag = "networks",
    operation_id = "port_forward_list",
    summary = "List a network's port forwards",
    params(("id" = uuid::Uuid, Path, description = "The network's id.")),
    responses(
        (status = 200, description = "Its forwards, oldest first (at most 64).",
            body = PortForwardList),
        BadId,
        NoSuchNetwork,
    ),
)]
async fn list(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<PortForwardList>> {
    let forwards = s.app.port_forward_list(&p, parse_id(&id)?).await?;
    Ok(Json(PortForwardList {
        port_forwards: forwards.iter().map(views::port_forward).collect(),
    }))
}

/// Forwards a public port to a VM of the network.
#[utoipa::path(
    post,
    path = "/v1/networks/{id}/port-forwards",
    tag = "networks",
    operation_id = "port_forward_create",
    summary = "Forward a public port to a VM",
    description = "Stores a forward (`creating`) of `public_port` on the AtomOS host of `vm` \
        (a VM on this network, placed and `running` or `off`) to the VM's `private_port`, \
        and starts its `create_port_forward` action, which sets it up on the host; it is \
        then `active`, reached at `public_ip:public_port`. The public port is held from the \
        request on: no other forward on that host, of any tenant, can take it. A port the \
        host turns out to use already fails the action, and the forward is `error`. A VM \
        with forwards cannot migrate or leave this network until they are deleted; \
        deleting the VM deletes them.",
    params(("id" = uuid::Uuid, Path, description = "The network's id.")),
    request_body(content = PortForwardCreateRequest, content_type = "application/json",
        example = json!({"public_port": 2222, "vm": "0192d0b2-6a4b-7c61-8b0e-5f1d2c3b4a59",
            "private_port": 22})),
    responses(
        (status = 201, description = "Accepted: the forward (`creating`) and its action.",
            body = PortForwardCreateResponse, links(
                ("GetPortForward" = (operation_id = "port_forward_get",
                    parameters(("id" = "$request.path.id"),
                        ("forward_id" = "$response.body#/port_forward/id")))),
                ("GetAction" = (operation_id = "action_get",
                    parameters(("id" = "$response.body#/action/id")))),
            )),
        (status = 400, description = "A bad field (`invalid_input`, every rejected field \
            named in `details.fields`: `vm` when it is no VM of the tenant's or not on the \
            network, `public_port` when it is one of the host's AtomOS daemons'), malformed \
            JSON (`json_error`), the id is not a UUID, or a bad `Idempotency-Key`.",
            body = ErrorResponse),
        CannotModify,
        NoSuchNetwork,
        (status = 409, description = "The public port is taken on the VM's host, the VM is \
            neither `running` nor `off`, the network has 64 forwards (`conflict`), or the \
            Idempotency-Key was used with another body (`conflict`).", body = ErrorResponse),
        VmBusy,
    ),
)]
async fn create(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let c = s.app.port_forward_create(&p, parse_id(&id)?, &body).await?;
    let res = PortForwardCreateResponse {
        port_forward: views::port_forward(&c.port_forward),
        action: views::action(&c.action),
        warnings: c.warnings.iter().map(views::warning).collect(),
    };
    Ok((StatusCode::CREATED, Json(res)).into_response())
}

/// Reads a port forward.
#[utoipa::path(
    get,
    path = "/v1/networks/{id}/port-forwards/{forward_id}",
    tag = "networks",
    operation_id = "port_forward_get",
    summary = "Get a port forward",
    params(
        ("id" = uuid::Uuid, Path, description = "The network's id."),
        ("forward_id" = uuid::Uuid, Path, description = "The forward's id."),
    ),
    responses(
        (status = 200, description = "The forward.", body = PortForwardResponse),
        BadIds,
        NoSuchForward,
    ),
)]
async fn read(
    State(s): State<AppState>,
    p: Principal,
    Path((id, forward_id)): Path<(String, String)>,
) -> ApiResult<Json<PortForwardResponse>> {
    let f = s
        .app
        .port_forward_get(&p, parse_id(&id)?, parse_id(&forward_id)?)
        .await?;
    Ok(Json(PortForwardResponse {
        port_forward: views::port_forward(&f),
    }))
}

/// Deletes a port forward.
#[utoipa::path(
    delete,
    path = "/v1/networks/{id}/port-forwards/{forward_id}",
    tag = "networks",
    operation_id = "port_forward_delete",
    summary = "Delete a port forward",
    description = "Starts its `delete_port_forward` action: the host stops forwarding, then \
        the forward is gone and its public port free. A forward in `error` is deleted the \
        same way.",
    params(
        ("id" = uuid::Uuid, Path, description = "The network's id."),
        ("forward_id" = uuid::Uuid, Path, description = "The forward's id."),
    ),
    responses(
        (status = 200, description = "Accepted: the delete action.",
            body = meson_types::ActionResponse),
        BadIds,
        CannotModify,
        NoSuchForward,
        VmBusy,
    ),
)]
async fn delete(
    State(s): State<AppState>,
    p: Principal,
    Path((id, forward_id)): Path<(String, String)>,
) -> ApiResult<Json<meson_types::ActionResponse>> {
    let action = s
        .app
        .port_forward_delete(&p, parse_id(&id)?, parse_id(&forward_id)?)
        .await?;
    Ok(super::action_answer(&action))
}
