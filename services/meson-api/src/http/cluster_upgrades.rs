//! `/v1/clusters/{id}/actions/upgrade` and
//! `/v1/clusters/{id}/actions/rotate-credentials`.

use super::responses::{ClusterBusy, ClusterNotRunning, NoSuchCluster};
use super::{AppState, JsonBody, parse_id};
use crate::auth::Principal;
use crate::error::ApiResult;
use crate::views;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use meson_types as wire;
use meson_types::ErrorResponse;
use meson_types::upgrade::{ClusterActionResponse, ClusterUpgradeRequest};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(upgrade))
        .routes(routes!(rotate_credentials))
}

/// Upgrades a cluster's Kubernetes.
#[utoipa::path(
    post,
    path = "/v1/clusters/{id}/actions/upgrade",
    tag = "clusters",
    operation_id = "cluster_upgrade",
    summary = "Upgrade a cluster",
    description = "Starts an `upgrade_cluster` action: a rolling replacement of every node \
        by a node of the new version, the control plane first (one node at a time, the new \
        one up before the old one goes), then each pool in turn (`max_surge` new nodes up \
        before their old ones go, and `max_unavailable` old nodes removed before their new \
        ones come up, at once). The cluster is `updating`, then `running` at the new \
        `kubernetes_version`; each node shows its own. Allowed to a later patch of the \
        cluster's minor or to a patch of the next minor that `GET /v1/kubernetes-versions` \
        lists. Forward-only: if it fails the cluster is `error` with the reason, the nodes \
        already replaced stay on the new version, and a later upgrade to the same version \
        (the cluster `running` again) replaces only the others.",
    params(("id" = uuid::Uuid, Path, description = "The cluster's id.")),
    request_body(content = ClusterUpgradeRequest, content_type = "application/json",
        example = json!({"kubernetes_version": "1.30.14"})),
    responses(
        (status = 201, description = "Accepted: the upgrade action.",
            body = ClusterActionResponse, links(("GetAction" = (operation_id = "action_get",
                parameters(("id" = "$response.body#/action/id")))))),
        (status = 400, description = "A version that is not a later patch of the cluster's \
            minor or a patch of the next minor in the catalogue, or a bad `max_surge` / \
            `max_unavailable` (`invalid_input`, named in `details.fields`).",
            body = ErrorResponse),
        (status = 403, description = "The token's role cannot upgrade (`forbidden`).",
            body = ErrorResponse),
        NoSuchCluster,
        ClusterNotRunning,
        ClusterBusy,
    ),
)]
async fn upgrade(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let (action, warnings) = s.app.cluster_upgrade(&p, parse_id(&id)?, &body).await?;
    Ok((
        StatusCode::CREATED,
        Json(ClusterActionResponse {
            action: views::action(&action),
            warnings: warnings.iter().map(views::warning).collect(),
        }),
    )
        .into_response())
}

/// Rotates a cluster's credentials.
#[utoipa::path(
    post,
    path = "/v1/clusters/{id}/actions/rotate-credentials",
    tag = "clusters",
    operation_id = "cluster_rotate_credentials",
    summary = "Rotate a cluster's credentials",
    description = "Starts a `rotate_credentials` action. Admin kubeconfigs are signed by a CA \
        of the cluster's own that its API servers trust beside the cluster CA: the rotation \
        makes a new one and replaces every control-plane node (one at a time, the new one up \
        before the old one goes) with one that trusts only the new CA; once it succeeds, \
        every kubeconfig issued before is refused and those fetched from then on work. It \
        also makes a new bootstrap token, which new nodes join with (the old one is deleted \
        from the cluster by the next control-plane nodes, and lapses within 24 hours). \
        The cluster CA, the etcd and front-proxy CAs, the service-account key and the \
        workers are untouched. The cluster is `updating`, then `running`; on failure it is \
        `error`, and a later rotation (the cluster `running` again) goes on with the same \
        new credentials.",
    params(("id" = uuid::Uuid, Path, description = "The cluster's id.")),
    responses(
        (status = 201, description = "Accepted: the rotation action.",
            body = wire::ActionResponse, links(("GetAction" = (operation_id = "action_get",
                parameters(("id" = "$response.body#/action/id")))))),
        (status = 403, description = "The token's role cannot rotate credentials \
            (`forbidden`).", body = ErrorResponse),
        NoSuchCluster,
        ClusterNotRunning,
        ClusterBusy,
    ),
)]
async fn rotate_credentials(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let action = s.app.cluster_rotate_credentials(&p, parse_id(&id)?).await?;
    Ok(super::action_created(&action))
}
