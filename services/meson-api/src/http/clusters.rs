//! `/v1/clusters` (and its alias `POST /v1/kaas`).

use super::resource::prelude::*;
use super::responses::{
    BadBody, BadBodyField, BadId, CannotDelete, CannotModify, ClusterBusy, ClusterOverQuota,
    NameTakenOrKeyReused, NoSuchCluster,
};
use super::{JsonBody, query_pairs};
use crate::app::{ClusterView, ListQuery, Paged};
use crate::error::ApiError;
use axum::Json;
use axum::extract::RawQuery;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use meson_core::ClusterId;
use meson_core::Error;
use meson_core::cluster::ClusterStatus;
use meson_types as wire;
use meson_types::cluster::{ClusterListQuery, ClusterUpdateRequest};
use meson_types::kaas::KaasCreateRequest;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(create_kaas))
        .routes(routes!(read, delete, update))
        .routes(routes!(nodes))
        .routes(routes!(kubeconfig))
        .routes(routes!(phone_home))
}

resource::create_operation! {
    Clusters;
    /// Creates a Kubernetes cluster.
    #[utoipa::path(
        post,
        path = "/v1/clusters",
        tag = "clusters",
        operation_id = "cluster_create",
        summary = "Create a cluster",
        description = "Takes the KaaS payload as Elemento's clients send it. The nodes' network, \
            the cluster's certificates and one VM per node are made by its `create_cluster` \
            action: the control plane first (`kubeadm init`), then every pool's workers in \
            parallel; the cluster is `running` once every node reported its kubelet up.",
        request_body(content = KaasCreateRequest, content_type = "application/json"),
        params(("Idempotency-Key" = Option<String>, Header,
            description = "Makes a retried POST safe: the first response is replayed.")),
        responses(
            (status = 201, description = "Accepted: the cluster and its create action.",
                body = wire::cluster::ClusterCreateResponse),
            BadBodyField,
            ClusterOverQuota,
            NameTakenOrKeyReused,
        ),
    )]
}

impl Creatable for Clusters {
    type Created = wire::cluster::ClusterCreateResponse;

    async fn create(app: &App, p: &Principal, body: &serde_json::Value) -> Result<Self::Created> {
        let c = app.cluster_create(p, body).await?;
        Ok(wire::cluster::ClusterCreateResponse {
            cluster: views::cluster(&c.view),
            action: views::action(&c.action),
            warnings: c.warnings.iter().map(views::warning).collect(),
        })
    }
}

/// Creates a Kubernetes cluster (Elemento's original path).
#[utoipa::path(
    post,
    path = "/v1/kaas",
    tag = "clusters",
    operation_id = "kaas_create",
    summary = "Create a cluster (alias)",
    description = "The same as `POST /v1/clusters`.",
    request_body(content = KaasCreateRequest, content_type = "application/json"),
    params(("Idempotency-Key" = Option<String>, Header,
        description = "Makes a retried POST safe: the first response is replayed.")),
    responses(
        (status = 201, description = "Accepted: the cluster and its create action.",
            body = wire::cluster::ClusterCreateResponse),
        BadBody,
        ClusterOverQuota,
        NameTakenOrKeyReused,
    ),
)]
async fn create_kaas(s: State<AppState>, p: Principal, body: JsonBody) -> ApiResult<Response> {
    resource::create::<Clusters>(s, p, body).await
}

resource::get_operation! {
    Clusters => wire::cluster::ClusterResponse,
    doc: "Reads a cluster.",
    path: "/v1/clusters/{id}",
    tag: "clusters",
    operation_id: "cluster_get",
    summary: "Get a cluster",
    id: "The cluster's id.",
    found: "The cluster.",
    missing: NoSuchCluster,
}

resource::list_operation! {
    Clusters => wire::cluster::ClusterList,
    doc: "Lists clusters.",
    path: "/v1/clusters",
    tag: "clusters",
    operation_id: "cluster_list",
    summary: "List clusters",
    query: ClusterListQuery,
    found: "A page of clusters.",
}

resource::update_operation! {
    Clusters => wire::cluster::ClusterResponse;
    /// Relabels a cluster or changes its update policy.
    #[utoipa::path(
        patch,
        path = "/v1/clusters/{id}",
        tag = "clusters",
        operation_id = "cluster_update",
        summary = "Update a cluster",
        params(("id" = uuid::Uuid, Path, description = "The cluster's id.")),
        request_body(content = ClusterUpdateRequest, content_type = "application/json"),
        responses(
            (status = 200, description = "The cluster as it is now.",
                body = wire::cluster::ClusterResponse),
            BadBody,
            CannotModify,
            NoSuchCluster,
        ),
    )]
}

resource::delete_operation! {
    Clusters;
    /// Deletes a cluster.
    #[utoipa::path(
        delete,
        path = "/v1/clusters/{id}",
        tag = "clusters",
        operation_id = "cluster_delete",
        summary = "Delete a cluster",
        description = "Starts its `delete_cluster` action: every node's VM and volumes and the \
            nodes' network leave every AtomOS host, then the cluster is gone.",
        params(("id" = uuid::Uuid, Path, description = "The cluster's id.")),
        responses(
            (status = 200, description = "Accepted: the delete action.", body = wire::ActionResponse),
            BadId,
            CannotDelete,
            NoSuchCluster,
            ClusterBusy,
        ),
    )]
}

/// Lists a cluster's nodes.
#[utoipa::path(
    get,
    path = "/v1/clusters/{id}/nodes",
    tag = "clusters",
    operation_id = "cluster_nodes",
    summary = "List a cluster's nodes",
    params(("id" = uuid::Uuid, Path, description = "The cluster's id.")),
    responses(
        (status = 200, description = "The nodes: control plane first, then by pool.",
            body = wire::cluster::NodeList),
        BadId,
        NoSuchCluster,
    ),
)]
async fn nodes(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<wire::cluster::NodeList>> {
    let v = s.app.cluster_get(&p, parse_id(&id)?).await?;
    Ok(Json(wire::cluster::NodeList {
        nodes: views::nodes(&v),
    }))
}

/// Issues an admin kubeconfig.
#[utoipa::path(
    get,
    path = "/v1/clusters/{id}/kubeconfig",
    tag = "clusters",
    operation_id = "cluster_kubeconfig",
    summary = "Get an admin kubeconfig",
    description = "A kubeconfig whose client certificate (`kubernetes-admin`, group \
        `system:masters`) is newly signed by the cluster's admin CA (the API servers trust \
        it until a credentials rotation replaces it); the server is verified with the \
        cluster CA. Editors and admins only.",
    params(
        ("id" = uuid::Uuid, Path, description = "The cluster's id."),
        ("expiry_seconds" = Option<u64>, Query, minimum = 60, maximum = 31536000,
            description = "How long the certificate is valid (default 86400)."),
    ),
    responses(
        (status = 200, description = "The kubeconfig (YAML).", content_type = "application/yaml",
            body = String),
        (status = 400, description = "A bad id or `expiry_seconds` (`invalid_input`).",
            body = ErrorResponse),
        (status = 403, description = "The token's role may not hold the cluster \
            (`forbidden`).", body = ErrorResponse),
        NoSuchCluster,
        (status = 409, description = "The cluster's certificates are not made yet \
            (`conflict`).", body = ErrorResponse),
    ),
)]
async fn kubeconfig(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let pairs = query_pairs(q.as_deref())?;
    let mut expiry = None;
    for (k, v) in &pairs {
        if k == "expiry_seconds" {
            expiry = Some(v.parse::<u64>().map_err(|_| {
                ApiError(Error::invalid(
                    "expiry_seconds",
                    "must be a whole number of seconds",
                ))
            })?);
        }
    }
    let yaml = s.app.cluster_kubeconfig(&p, parse_id(&id)?, expiry).await?;
    Ok((
        [
            (header::CONTENT_TYPE, "application/yaml"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        yaml,
    )
        .into_response())
}

/// A node reports its kubelet up.
#[utoipa::path(
    post,
    path = "/v1/clusters/{id}/nodes/{node}/phone-home",
    tag = "clusters",
    operation_id = "node_phone_home",
    summary = "Node phone-home (called by the node)",
    description = "Called by a node's cloud-init once its kubelet is healthy, with the \
        node's own secret instead of a bearer token; the body (cloud-init's form) is ignored.",
    security(()),
    params(
        ("id" = uuid::Uuid, Path, description = "The cluster's id."),
        ("node" = uuid::Uuid, Path, description = "The node's id."),
        ("token" = String, Query, description = "The node's phone-home secret."),
    ),
    responses(
        (status = 204, description = "Recorded: the node is ready."),
        (status = 400, description = "A bad id (`invalid_input`).", body = ErrorResponse),
        (status = 404, description = "No such node, or not its secret (`not_found`).",
            body = ErrorResponse),
    ),
)]
async fn phone_home(
    State(s): State<AppState>,
    Path((id, node)): Path<(String, String)>,
    RawQuery(q): RawQuery,
) -> ApiResult<StatusCode> {
    let pairs = query_pairs(q.as_deref())?;
    let token = pairs
        .iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.as_str())
        .unwrap_or_default();
    s.app
        .node_phone_home(parse_id(&id)?, parse_id(&node)?, token)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Clusters through the shared handlers.
pub struct Clusters;

impl Resource for Clusters {
    type Id = ClusterId;
    type Item = ClusterView;
    type Got = wire::cluster::ClusterResponse;
    type Updated = wire::cluster::ClusterResponse;
    type Listed = Paged<ClusterView>;
    type Page = wire::cluster::ClusterList;
    const PATH: &'static str = "/v1/clusters";

    async fn get(app: &App, p: &Principal, id: ClusterId) -> Result<ClusterView> {
        app.cluster_get(p, id).await
    }

    async fn update(
        app: &App,
        p: &Principal,
        id: ClusterId,
        body: &serde_json::Value,
    ) -> Result<(ClusterView, Vec<Warning>)> {
        app.cluster_update(p, id, body).await
    }

    async fn list(app: &App, p: &Principal, query: &[(String, String)]) -> Result<Self::Listed> {
        let q = ListQuery::parse(query, |v| ClusterStatus::parse(v).is_some())?;
        app.cluster_list(p, &q).await
    }

    fn got(c: &ClusterView) -> Self::Got {
        Self::updated(c, vec![])
    }

    fn updated(c: &ClusterView, warnings: Vec<wire::Warning>) -> Self::Updated {
        wire::cluster::ClusterResponse {
            cluster: views::cluster(c),
            warnings,
        }
    }

    fn page(listed: &Self::Listed, meta: wire::Meta) -> Self::Page {
        wire::cluster::ClusterList {
            clusters: listed.items.iter().map(views::cluster).collect(),
            meta,
        }
    }
}

impl Deletable for Clusters {
    async fn delete(app: &App, p: &Principal, id: ClusterId) -> Result<Action> {
        app.cluster_delete(p, id).await
    }
}
