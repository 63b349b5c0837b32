//! `/v1/clusters/{id}/autoscaler-credentials`: what a cluster's
//! cluster-autoscaler needs to call meson's `externalgrpc` endpoint.

use super::responses::{BadId, NoSuchCluster};
use super::{AppState, parse_id};
use crate::app::autoscaler::cloud_config;
use crate::auth::Principal;
use crate::error::ApiResult;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use meson_types::ErrorResponse;
use meson_types::cluster::{AutoscalerCredentials, AutoscalerCredentialsResponse};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(issue))
}

/// Issues a credential for the cluster's autoscaler.
#[utoipa::path(
    post,
    path = "/v1/clusters/{id}/autoscaler-credentials",
    tag = "clusters",
    operation_id = "cluster_autoscaler_credentials",
    summary = "Issue the cluster autoscaler's credential",
    description = "A client certificate for meson's `externalgrpc` endpoint (mutual TLS), \
        which the upstream cluster-autoscaler speaks: its node groups are the cluster's pools \
        with `autoscale: true`, between `min_nodes` and `max_nodes`. Issuing one revokes the \
        one before; the key is not kept, so keep it.",
    params(("id" = uuid::Uuid, Path, description = "The cluster's id.")),
    responses(
        (status = 201, description = "The credential.", body = AutoscalerCredentialsResponse),
        BadId,
        NoSuchCluster,
        (status = 503, description = "This deployment serves no autoscaler endpoint \
            (`service_error`).", body = ErrorResponse),
    ),
)]
async fn issue(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let c = s.app.autoscaler_credentials(&p, parse_id(&id)?).await?;
    let body = AutoscalerCredentialsResponse {
        credentials: AutoscalerCredentials {
            cloud_config: cloud_config(&c.address, "/etc/meson-autoscaler"),
            address: c.address,
            ca_cert: c.ca_pem,
            cert: c.cert_pem,
            key: c.key_pem,
            expires: c.expires,
        },
    };
    Ok((StatusCode::CREATED, Json(body)).into_response())
}
