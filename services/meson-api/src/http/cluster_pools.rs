//! `/v1/clusters/{id}/pools`: a cluster's node pools.

use super::responses::{BadId, BadIds, CannotModify, ClusterBusy, NoSuchCluster, NoSuchPool};
use super::{AppState, JsonBody, parse_id};
use crate::app::PoolView;
use crate::auth::Principal;
use crate::error::ApiResult;
use crate::views;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use meson_types as wire;
use meson_types::ErrorResponse;
use meson_types::kaas::NodePoolRequest;
use meson_types::pool::NodePoolUpdateRequest;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(read, update, delete))
        .routes(routes!(delete_nodes))
}

fn pool(v: &PoolView) -> wire::cluster::Pool {
    views::pool(&v.pool, &v.nodes)
}

/// Lists a cluster's node pools.
#[utoipa::path(
    get,
    path = "/v1/clusters/{id}/pools",
    tag = "clusters",
    operation_id = "cluster_pool_list",
    summary = "List a cluster's node pools",
    params(("id" = uuid::Uuid, Path, description = "The cluster's id.")),
    responses(
        (status = 200, description = "The pools, oldest first.", body = wire::pool::PoolList),
        BadId,
        NoSuchCluster,
    ),
)]
async fn list(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<wire::pool::PoolList>> {
    let pools = s.app.pool_list(&p, parse_id(&id)?).await?;
    Ok(Json(wire::pool::PoolList {
        pools: pools.iter().map(pool).collect(),
    }))
}

/// Adds a node pool to a cluster.
#[utoipa::path(
    post,
    path = "/v1/clusters/{id}/pools",
    tag = "clusters",
    operation_id = "cluster_pool_create",
    summary = "Add a node pool",
    description = "Takes one pool as in the KaaS request's `nodepool` (fields named from the \
        root: `pool_name`, `min_nodes`, ...). Its `create_node_pool` action brings up \
        `desired_nodes` nodes in parallel, each joining the cluster; the cluster is \
        `updating` meanwhile, `running` after (or `error`, and the pool is removed, when the \
        nodes could not be made). Without DHCP the cluster network must hold every node at \
        its maximum, this pool's included, plus the API endpoint.",
    params(("id" = uuid::Uuid, Path, description = "The cluster's id.")),
    request_body(content = NodePoolRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "Accepted: the pool and its create action.",
            body = wire::pool::PoolCreateResponse),
        (status = 400, description = "A bad field (`invalid_input`, named in \
            `details.fields`; `max_nodes` when the cluster network cannot hold the nodes) or \
            malformed JSON (`json_error`).", body = ErrorResponse),
        (status = 403, description = "The token's role cannot modify (`forbidden`), or \
            the cluster has 16 pools already or the pool's nodes would take the tenant over \
            a quota (`resource_limit_exceeded`, in `details.limits`).", body = ErrorResponse),
        NoSuchCluster,
        (status = 409, description = "The cluster has a pool of this name \
            (`uniqueness_error` on `pool_name`), its control plane is not up (`conflict`), \
            or the Idempotency-Key was used with another body (`conflict`).",
            body = ErrorResponse),
        ClusterBusy,
    ),
)]
async fn create(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let c = s.app.pool_create(&p, parse_id(&id)?, &body).await?;
    let res = wire::pool::PoolCreateResponse {
        pool: pool(&c.view),
        action: c
            .action
            .as_ref()
            .map(views::action)
            .ok_or_else(|| meson_core::Error::internal("a pool create without its action"))?,
        warnings: c.warnings.iter().map(views::warning).collect(),
    };
    Ok((StatusCode::CREATED, Json(res)).into_response())
}

/// Reads a node pool.
#[utoipa::path(
    get,
    path = "/v1/clusters/{id}/pools/{pool_id}",
    tag = "clusters",
    operation_id = "cluster_pool_get",
    summary = "Get a node pool",
    params(
        ("id" = uuid::Uuid, Path, description = "The cluster's id."),
        ("pool_id" = uuid::Uuid, Path, description = "The pool's id."),
    ),
    responses(
        (status = 200, description = "The pool.", body = wire::pool::PoolResponse),
        BadIds,
        NoSuchPool,
    ),
)]
async fn read(
    State(s): State<AppState>,
    p: Principal,
    Path((id, pool_id)): Path<(String, String)>,
) -> ApiResult<Json<wire::pool::PoolResponse>> {
    let v = s
        .app
        .pool_get(&p, parse_id(&id)?, parse_id(&pool_id)?)
        .await?;
    Ok(Json(wire::pool::PoolResponse { pool: pool(&v) }))
}

/// Resizes a node pool or changes its bounds.
#[utoipa::path(
    patch,
    path = "/v1/clusters/{id}/pools/{pool_id}",
    tag = "clusters",
    operation_id = "cluster_pool_update",
    summary = "Update a node pool",
    description = "Changes any of `desired_nodes`, `min_nodes`, `max_nodes` and `autoscale`; \
        afterwards `min_nodes <= desired_nodes <= max_nodes`. A `desired_nodes` that differs \
        from the pool's node count starts a `scale_node_pool` action: new nodes are brought \
        up in parallel, or surplus ones removed (`creation_error` and `not_ready` nodes \
        first, then the newest), the cluster `updating` meanwhile. Otherwise the change is \
        stored and the answer has no action.",
    params(
        ("id" = uuid::Uuid, Path, description = "The cluster's id."),
        ("pool_id" = uuid::Uuid, Path, description = "The pool's id."),
    ),
    request_body(content = NodePoolUpdateRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The pool as it is now, and the action resizing it \
            when its node count changes.", body = wire::pool::PoolUpdateResponse),
        (status = 400, description = "A bad field (`invalid_input`, named in \
            `details.fields`: the bounds, the cluster's last worker, or `max_nodes` when the \
            cluster network cannot hold the nodes) or malformed JSON (`json_error`).",
            body = ErrorResponse),
        (status = 403, description = "The token's role cannot modify (`forbidden`), or a \
            larger `desired_nodes` would take the tenant over a quota \
            (`resource_limit_exceeded`, in `details.limits`).", body = ErrorResponse),
        NoSuchPool,
        (status = 409, description = "The cluster's control plane is not up (`conflict`).",
            body = ErrorResponse),
        ClusterBusy,
    ),
)]
async fn update(
    State(s): State<AppState>,
    p: Principal,
    Path((id, pool_id)): Path<(String, String)>,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<wire::pool::PoolUpdateResponse>> {
    let c = s
        .app
        .pool_update(&p, parse_id(&id)?, parse_id(&pool_id)?, &body)
        .await?;
    Ok(Json(wire::pool::PoolUpdateResponse {
        pool: pool(&c.view),
        action: c.action.as_ref().map(views::action),
        warnings: c.warnings.iter().map(views::warning).collect(),
    }))
}

/// Deletes a node pool.
#[utoipa::path(
    delete,
    path = "/v1/clusters/{id}/pools/{pool_id}",
    tag = "clusters",
    operation_id = "cluster_pool_delete",
    summary = "Delete a node pool",
    description = "Starts its `delete_node_pool` action: every node of the pool leaves AtomOS \
        (its address is free again), then the pool is gone. The cluster's last pool, or the \
        last with a worker, cannot be deleted.",
    params(
        ("id" = uuid::Uuid, Path, description = "The cluster's id."),
        ("pool_id" = uuid::Uuid, Path, description = "The pool's id."),
    ),
    responses(
        (status = 200, description = "Accepted: the delete action.", body = wire::ActionResponse),
        BadIds,
        CannotModify,
        NoSuchPool,
        (status = 409, description = "It is the cluster's last pool, or the last with a \
            worker, or the cluster's control plane is not up (`conflict`).",
            body = ErrorResponse),
        ClusterBusy,
    ),
)]
async fn delete(
    State(s): State<AppState>,
    p: Principal,
    Path((id, pool_id)): Path<(String, String)>,
) -> ApiResult<Json<wire::ActionResponse>> {
    let action = s
        .app
        .pool_delete(&p, parse_id(&id)?, parse_id(&pool_id)?)
        .await?;
    Ok(super::action_answer(&action))
}

/// Removes chosen nodes of a pool.
#[utoipa::path(
    post,
    path = "/v1/clusters/{id}/pools/{pool_id}/actions/delete-nodes",
    tag = "clusters",
    operation_id = "cluster_pool_delete_nodes",
    summary = "Remove chosen nodes of a node pool",
    description = "Lowers the pool's `desired_nodes` by as many nodes as named and starts a \
        `scale_node_pool` action that removes exactly those (how the cluster-autoscaler \
        scales down). Not below `min_nodes`.",
    params(
        ("id" = uuid::Uuid, Path, description = "The cluster's id."),
        ("pool_id" = uuid::Uuid, Path, description = "The pool's id."),
    ),
    request_body(content = wire::pool::PoolDeleteNodesRequest, content_type = "application/json",
        example = json!({"nodes": ["0192d0b2-6a4b-7c61-8b0e-5f1d2c3b4a59"]})),
    responses(
        (status = 201, description = "Accepted: the pool as it is now and the action.",
            body = wire::pool::PoolUpdateResponse),
        (status = 400, description = "An id is not a UUID, no node, a node of another pool, \
            or below `min_nodes` (`invalid_input`), or malformed JSON (`json_error`).",
            body = ErrorResponse),
        NoSuchPool,
        (status = 409, description = "A node is already being deleted, or the cluster's \
            control plane is not up (`conflict`).", body = ErrorResponse),
        ClusterBusy,
    ),
)]
async fn delete_nodes(
    State(s): State<AppState>,
    p: Principal,
    Path((id, pool_id)): Path<(String, String)>,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let nodes = meson_core::kaas::delete_nodes(&body)?;
    let c = s
        .app
        .pool_delete_nodes(&p, parse_id(&id)?, parse_id(&pool_id)?, &nodes)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(wire::pool::PoolUpdateResponse {
            pool: pool(&c.view),
            action: c.action.as_ref().map(views::action),
            warnings: Vec::new(),
        }),
    )
        .into_response())
}
