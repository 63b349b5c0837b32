//! `/v1/clusters/{id}/nodes/{node}/actions/{replace|reboot}`.

use super::responses::{BadIdsOrKey, CannotModifyClusters, ClusterBusy, NoSuchNode};
use super::{AppState, parse_id};
use crate::app::NodeAction;
use crate::auth::Principal;
use crate::error::ApiResult;
use axum::extract::{Path, State};
use axum::response::Response;
use meson_types as wire;
use meson_types::ErrorResponse;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(replace))
        .routes(routes!(reboot))
}

async fn start(
    s: &AppState,
    p: &Principal,
    id: &str,
    node: &str,
    op: NodeAction,
) -> ApiResult<Response> {
    let action = s
        .app
        .cluster_node_action(p, parse_id(id)?, parse_id(node)?, op)
        .await?;
    Ok(super::action_created(&action))
}

/// Replaces a node.
#[utoipa::path(
    post,
    path = "/v1/clusters/{id}/nodes/{node}/actions/replace",
    tag = "clusters",
    operation_id = "cluster_node_replace",
    summary = "Replace a node",
    description = "Starts a `replace_node` action: a new node of the same role, pool and \
        Kubernetes version is made on a fresh VM (placed on a host holding as few nodes of \
        its group as possible), and once it has reported its kubelet up the old node's VM \
        and volumes leave AtomOS and its address is free again. The cluster must be \
        `running`; auto-repair replaces unhealthy nodes the same way (`repair_node`).",
    params(
        ("id" = uuid::Uuid, Path, description = "The cluster's id."),
        ("node" = uuid::Uuid, Path, description = "The node's id."),
    ),
    responses(
        (status = 201, description = "Accepted: the action.", body = wire::ActionResponse,
            links(("GetAction" = (operation_id = "action_get",
                parameters(("id" = "$response.body#/action/id")))))),
        BadIdsOrKey,
        CannotModifyClusters,
        NoSuchNode,
        (status = 409, description = "The cluster is not `running`, or the \
            `Idempotency-Key` was used with another request (`conflict`).",
            body = ErrorResponse),
        ClusterBusy,
    ),
)]
async fn replace(
    State(s): State<AppState>,
    p: Principal,
    Path((id, node)): Path<(String, String)>,
) -> ApiResult<Response> {
    start(&s, &p, &id, &node, NodeAction::Replace).await
}

/// Reboots a node.
#[utoipa::path(
    post,
    path = "/v1/clusters/{id}/nodes/{node}/actions/reboot",
    tag = "clusters",
    operation_id = "cluster_node_reboot",
    summary = "Reboot a node",
    description = "Starts a `reboot_node` action: the node's VM is rebooted on AtomOS; the \
        node is `not_ready` until AtomOS reports the VM running again, then `ready`. The \
        cluster must be `running` and the node `ready` or `not_ready` with its VM running.",
    params(
        ("id" = uuid::Uuid, Path, description = "The cluster's id."),
        ("node" = uuid::Uuid, Path, description = "The node's id."),
    ),
    responses(
        (status = 201, description = "Accepted: the action.", body = wire::ActionResponse,
            links(("GetAction" = (operation_id = "action_get",
                parameters(("id" = "$response.body#/action/id")))))),
        BadIdsOrKey,
        CannotModifyClusters,
        NoSuchNode,
        (status = 409, description = "The cluster is not `running`, the node cannot be \
            rebooted now (its VM is not running), or the `Idempotency-Key` was used with \
            another request (`conflict`).", body = ErrorResponse),
        ClusterBusy,
    ),
)]
async fn reboot(
    State(s): State<AppState>,
    p: Principal,
    Path((id, node)): Path<(String, String)>,
) -> ApiResult<Response> {
    start(&s, &p, &id, &node, NodeAction::Reboot).await
}
