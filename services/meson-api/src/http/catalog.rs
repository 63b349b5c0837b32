//! `/v1/flavors`, `/v1/providers` and `/v1/kubernetes-versions`.

use super::AppState;
use crate::auth::Principal;
use crate::error::ApiResult;
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
    let flavors = s
        .app
        .flavors(&p)?
        .iter()
        .map(|f| wire::Flavor {
            name: f.name.to_owned(),
            description: f.description.to_owned(),
            vcpus: f.vcpus,
            memory_mib: f.memory_mib,
            gpus: f.gpus,
            gpu_model: f.gpu_model.map(str::to_owned),
            cpu_flags: f.flags.iter().map(|x| (*x).to_owned()).collect(),
        })
        .collect();
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
    let mut providers: Vec<wire::Provider> = Vec::new();
    for t in s.app.placement_targets(&p).await? {
        if providers.last().is_none_or(|p| p.name != t.provider) {
            providers.push(wire::Provider {
                name: t.provider.clone(),
                continents: vec![],
                regions: vec![],
            });
        }
        let Some(p) = providers.last_mut() else {
            continue;
        };
        if !p.continents.contains(&t.continent) {
            p.continents.push(t.continent.clone());
        }
        match p.regions.iter_mut().find(|r| r.name == t.region) {
            Some(r) => r.hosts += 1,
            None => p.regions.push(wire::Region {
                name: t.region,
                continent: t.continent,
                hosts: 1,
            }),
        }
    }
    Ok(Json(wire::ProviderList { providers }))
}

/// The Kubernetes versions clusters can run.
#[utoipa::path(
    get,
    path = "/v1/kubernetes-versions",
    tag = "catalog",
    operation_id = "kubernetes_version_list",
    summary = "List Kubernetes versions",
    description = "Every supported release, oldest first: which one a cluster gets by \
        default, which are past upstream end of life (still accepted, with a warning), and \
        which each may upgrade to (a later patch of the same minor, or any patch of the next \
        minor).",
    responses((status = 200, description = "The supported Kubernetes releases.",
        body = wire::KubernetesVersionList)),
)]
async fn kubernetes_versions(
    State(s): State<AppState>,
    p: Principal,
) -> ApiResult<Json<wire::KubernetesVersionList>> {
    let kubernetes_versions = s
        .app
        .kubernetes_versions(&p)?
        .iter()
        .map(|r| wire::KubernetesVersion {
            version: r.version.to_string(),
            minor: r.version.minor_line(),
            default: r.is_default(),
            deprecated: r.deprecated,
            end_of_life: r.end_of_life.to_owned(),
            upgradable_to: meson_core::kubernetes::upgradable_to(&r.version)
                .iter()
                .map(|u| u.version.to_string())
                .collect(),
        })
        .collect();
    Ok(Json(wire::KubernetesVersionList {
        kubernetes_versions,
    }))
}
