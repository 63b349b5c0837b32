//! `/v1/flavors`, `/v1/providers` and `/v1/kubernetes-versions`.

use super::AppState;
use crate::auth::Principal;
use crate::error::ApiResult;
use crate::views;
use axum::Json;
use axum::extract::State;
use meson_types::catalog as wire;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(flavors))
        .routes(routes!(providers))
        .routes(routes!(kubernetes_versions))
}

/// The flavours: named VM sizes.
#[utoipa::path(
    get,
    path = "/v1/flavors",
    tag = "catalog",
    operation_id = "flavor_list",
    summary = "List flavours",
    responses((status = 200, description = "helium, neon, argon, argon2 and kripton with \
        their specs.", body = wire::FlavorList)),
)]
async fn flavors(State(s): State<AppState>, p: Principal) -> ApiResult<Json<wire::FlavorList>> {
    let flavors = s.app.flavors(&p)?.iter().map(views::flavor).collect();
    Ok(Json(wire::FlavorList { flavors }))
}

/// Where meson can place things.
#[utoipa::path(
    get,
    path = "/v1/providers",
    tag = "catalog",
    operation_id = "provider_list",
    summary = "List providers, continents and regions",
    responses((status = 200, description = "The providers of the enabled AtomOS hosts, \
        with their continents and regions.", body = wire::ProviderList)),
)]
async fn providers(State(s): State<AppState>, p: Principal) -> ApiResult<Json<wire::ProviderList>> {
    let providers = views::providers(s.app.placement_targets(&p).await?);
    Ok(Json(wire::ProviderList { providers }))
}

/// The Kubernetes versions clusters can run.
#[utoipa::path(
    get,
    path = "/v1/kubernetes-versions",
    tag = "catalog",
    operation_id = "kubernetes_version_list",
    summary = "List Kubernetes versions",
    description = "Every supported release, oldest first, with its minor's upstream release \
        and end-of-life dates: which one a cluster gets by default today (the latest patch of \
        the second-newest minor not past end of life), which are past upstream end of life \
        (still accepted, with a warning), and which each may upgrade to (a later patch of the \
        same minor, or any patch of the next minor).",
    responses((status = 200, description = "The supported Kubernetes releases.",
        body = wire::KubernetesVersionList)),
)]
async fn kubernetes_versions(
    State(s): State<AppState>,
    p: Principal,
) -> ApiResult<Json<wire::KubernetesVersionList>> {
    let today = meson_core::kubernetes::today();
    let kubernetes_versions = s
        .app
        .kubernetes_versions(&p)?
        .iter()
        .map(|r| views::kubernetes_version(r, today))
        .collect();
    Ok(Json(wire::KubernetesVersionList {
        kubernetes_versions,
    }))
}
