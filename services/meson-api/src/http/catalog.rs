//! `/v1/flavors` and `/v1/providers`.

use super::AppState;
use crate::auth::Principal;
use crate::error::ApiResult;
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use meson_types::catalog as wire;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/flavors", get(flavors))
        .route("/v1/providers", get(providers))
}

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
