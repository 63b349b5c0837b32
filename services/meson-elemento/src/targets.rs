//! The target daemon's organisation targets, grants and scenarios over
//! meson's providers (`/v1/providers`): what Electros' cloud pages read.
//!
//! A meson provider is a target, `meson-<provider>` (type
//! `meson_private`), of every tenant: meson places a tenant's VMs, volumes
//! and clusters on any provider's enabled hosts. So the organisation's
//! targets (`GET /org-targets`) are meson's providers, every one granted to
//! the caller (`GET /target-grants`, `GET /grants/me/target-grants/{id}`)
//! and connected; a target's usage (`GET /org-targets/{id}/usage`) is what
//! the tenant holds on that provider. meson has no scenarios (lists are
//! empty, an id is a 404), keeps no target settings (`{}`) and issues no
//! target certificate (a 404 saying so). A target id that is no provider
//! is a 404 naming the ones there are.
//!
//! The writes (creating targets or scenarios, granting, settings) stay
//! `501`: meson's operators register hosts, and every tenant may use every
//! provider.

use crate::catalog::Daemon;
use crate::error::{DResult, Detail};
use crate::routes::{AppState, Authed};
use axum::extract::Path;
use axum::http::StatusCode;
use axum::{Json, Router};
use meson_client::VolumeFilter;
use meson_types::catalog::Provider;
use serde_json::{Value, json};
use std::collections::HashMap;
use uuid::Uuid;

/// The GET routes served (all on the target daemon), relative to its base.
const GETS: [&str; 15] = [
    "/cert",
    "/grants/me/scenario/{scenario_id}",
    "/grants/me/target-grants/{target_id}",
    "/grants/me/target-grants/{target_id}/reachable",
    "/grants/me/target-grants/{target_id}/status",
    "/grants/me/target-grants/{target_id}/version",
    "/org-targets",
    "/org-targets/{target_id}",
    "/org-targets/{target_id}/usage",
    "/scenarios",
    "/scenarios/{scenario_id}",
    "/scenarios/{scenario_id}/grants",
    "/settings",
    "/target-grants",
    "/target-grants/members/{member}",
];

/// The routes served, `(method, path)`.
pub fn served() -> Vec<(&'static str, String)> {
    let b = Daemon::Target.base();
    GETS.iter().map(|p| ("GET", format!("{b}{p}"))).collect()
}

pub fn routes() -> Router<AppState> {
    use axum::routing::get;
    let b = Daemon::Target.base();
    let at = |p: &str| format!("{b}{p}");
    Router::new()
        .route(&at("/cert"), get(|| async { no_certificate() }))
        .route(&at("/grants/me/scenario/{scenario_id}"), get(scenario))
        .route(&at("/grants/me/target-grants/{target_id}"), get(grant))
        .route(
            &at("/grants/me/target-grants/{target_id}/reachable"),
            get(reachable),
        )
        .route(
            &at("/grants/me/target-grants/{target_id}/status"),
            get(target_status),
        )
        .route(
            &at("/grants/me/target-grants/{target_id}/version"),
            get(target_version),
        )
        .route(&at("/org-targets"), get(org_target_list))
        .route(&at("/org-targets/{target_id}"), get(org_target_one))
        .route(&at("/org-targets/{target_id}/usage"), get(usage))
        .route(
            &at("/scenarios"),
            get(|_: Authed| async { Json(json!({"scenarios": []})) }),
        )
        .route(&at("/scenarios/{scenario_id}"), get(scenario))
        .route(&at("/scenarios/{scenario_id}/grants"), get(scenario))
        .route(&at("/settings"), get(|_: Authed| async { Json(json!({})) }))
        .route(&at("/target-grants"), get(target_grants))
        .route(&at("/target-grants/members/{member}"), get(member_grants))
}

/// A provider's target id.
pub fn target_id(provider: &str) -> String {
    format!("meson-{provider}")
}

/// A meson provider as an organisation target: `target_id`
/// `meson-<provider>`, its name, `target_type` `meson_private`, and in
/// `target_config` its continents, regions and enabled hosts (as
/// `/v1/providers` counts them). `provider` and `regions` (the regions'
/// names) are repeated at the top, as `grants/me` has always shown them.
pub fn org_target(p: &Provider) -> Value {
    let hosts: u32 = p.regions.iter().map(|r| r.hosts).sum();
    json!({
        "target_id": target_id(&p.name),
        "target_name": p.name,
        "target_type": "meson_private",
        "provider": p.name,
        "regions": p.regions.iter().map(|r| r.name.clone()).collect::<Vec<_>>(),
        "target_config": {
            "provider": p.name,
            "continents": p.continents,
            "regions": p.regions.iter().map(|r| json!({
                "name": r.name, "continent": r.continent, "hosts": r.hosts,
            })).collect::<Vec<_>>(),
            "hosts": hosts,
        },
    })
}

/// Every provider meson has, as organisation targets.
pub(crate) async fn org_targets(a: &Authed) -> DResult<Vec<Value>> {
    let providers = a.meson.providers().await.map_err(Detail::meson)?;
    Ok(providers.iter().map(org_target).collect())
}

/// The provider a target id names, else a 404 naming those there are.
async fn provider(a: &Authed, id: &str) -> DResult<Provider> {
    let providers = a.meson.providers().await.map_err(Detail::meson)?;
    let wanted = id.trim();
    if let Some(p) = providers.iter().find(|p| target_id(&p.name) == wanted) {
        return Ok(p.clone());
    }
    let known: Vec<String> = providers.iter().map(|p| target_id(&p.name)).collect();
    Err(Detail::new(
        StatusCode::NOT_FOUND,
        format!(
            "no target {wanted:?}: meson's targets are its providers ({})",
            if known.is_empty() {
                "none yet".to_owned()
            } else {
                known.join(", ")
            }
        ),
    ))
}

/// The version of the meson that serves every target.
async fn meson_version(a: &Authed) -> DResult<String> {
    Ok(a.meson.index().await.map_err(Detail::meson)?.version)
}

/// A target as granted to the caller: the organisation target, active
/// (connected), healthy as far as meson answers, meson's version. meson
/// does not say since when a tenant may use a provider (`assigned_at`).
fn granted(p: &Provider, version: &str) -> Value {
    let mut t = org_target(p);
    t["assigned_at"] = Value::Null;
    t["active"] = json!(true);
    t["status"] = json!({"pingable": true, "health": "ok"});
    t["version"] = json!({"daemon": "meson", "semver": version});
    t
}

/// `GET /org-targets`: `{targets}`, every provider meson has.
async fn org_target_list(a: Authed) -> DResult<Json<Value>> {
    Ok(Json(json!({"targets": org_targets(&a).await?})))
}

/// `GET /org-targets/{target_id}`: one provider.
async fn org_target_one(a: Authed, Path(id): Path<String>) -> DResult<Json<Value>> {
    Ok(Json(org_target(&provider(&a, &id).await?)))
}

/// `GET /grants/me/target-grants/{target_id}`: the caller's grant on a
/// provider (every tenant has every one).
async fn grant(a: Authed, Path(id): Path<String>) -> DResult<Json<Value>> {
    let p = provider(&a, &id).await?;
    Ok(Json(granted(&p, &meson_version(&a).await?)))
}

/// `GET .../{target_id}/reachable`: meson, which serves the target,
/// answered, and the provider has enabled hosts (meson lists none else).
async fn reachable(a: Authed, Path(id): Path<String>) -> DResult<Json<Value>> {
    let p = provider(&a, &id).await?;
    let hosts: u32 = p.regions.iter().map(|r| r.hosts).sum();
    Ok(Json(json!({
        "target_id": target_id(&p.name),
        "target_type": "meson_private",
        "reachable": hosts > 0,
        "pingable": hosts > 0,
        "health": if hosts > 0 { "ok" } else { "unavailable" },
        "hosts": hosts,
    })))
}

/// `GET .../{target_id}/status`: connected, as `connections-status` shows
/// every provider.
async fn target_status(a: Authed, Path(id): Path<String>) -> DResult<Json<Value>> {
    let p = provider(&a, &id).await?;
    let hosts: u32 = p.regions.iter().map(|r| r.hosts).sum();
    Ok(Json(json!({
        "target_id": target_id(&p.name),
        "connected": true,
        "reachable": hosts > 0,
        "active": true,
        "status": "connected",
        "hosts": hosts,
    })))
}

/// `GET .../{target_id}/version`: the version of the meson serving it.
async fn target_version(a: Authed, Path(id): Path<String>) -> DResult<Json<Value>> {
    let p = provider(&a, &id).await?;
    let version = meson_version(&a).await?;
    Ok(Json(json!({
        "target_id": target_id(&p.name),
        "daemon": "meson",
        "semver": version,
        "version": version,
    })))
}

/// `GET /org-targets/{target_id}/usage`: what the caller's tenant holds on
/// the provider, from its lists of VMs, volumes and clusters (meson's own
/// lists, so only the tenant's): how many of each, the VMs' vCPUs and RAM,
/// the volumes' GB (a VM's own volumes are where it is), and their ids. `holders` is the caller (meson grants
/// every provider to every user of a tenant); meson has no scenarios.
async fn usage(a: Authed, Path(id): Path<String>) -> DResult<Json<Value>> {
    let p = provider(&a, &id).await?;
    let filter = VolumeFilter::default();
    let (vms, volumes, clusters) = tokio::try_join!(
        a.meson.vm_list_all(),
        a.meson.volume_list_all(&filter),
        a.meson.cluster_list_all(),
    )
    .map_err(Detail::meson)?;
    let here = |provider: Option<&str>| provider == Some(p.name.as_str());
    // A VM's own volumes live with it: they have no placement of their own.
    let vm_provider: HashMap<Uuid, Option<&str>> =
        vms.iter().map(|v| (v.id, v.provider.as_deref())).collect();
    let volumes: Vec<_> = volumes
        .iter()
        .filter(|v| match v.provider.as_deref() {
            Some(provider) => here(Some(provider)),
            None => here(
                v.vm.or(v.attached_to)
                    .and_then(|vm| vm_provider.get(&vm).copied().flatten()),
            ),
        })
        .collect();
    let vms: Vec<_> = vms.iter().filter(|v| here(v.provider.as_deref())).collect();
    let clusters: Vec<_> = clusters
        .iter()
        .filter(|c| here(c.provider.as_deref()))
        .collect();
    Ok(Json(json!({
        "target_id": target_id(&p.name),
        "target_name": p.name,
        "provider": p.name,
        "holders": [a.session.username],
        "scenarios": [],
        "usage": {
            "vms": vms.len(),
            "vcpus": vms.iter().map(|v| u64::from(v.specs.vcpus)).sum::<u64>(),
            "ram_mib": vms.iter().map(|v| v.specs.memory_mib).sum::<u64>(),
            "volumes": volumes.len(),
            "storage_gb": volumes.iter().map(|v| u64::from(v.size)).sum::<u64>(),
            "clusters": clusters.len(),
        },
        "vms": vms.iter().map(|v| v.id).collect::<Vec<_>>(),
        "volumes": volumes.iter().map(|v| v.id).collect::<Vec<_>>(),
        "clusters": clusters.iter().map(|c| c.id).collect::<Vec<_>>(),
    })))
}

/// `GET /target-grants`: `{target_grants}`, every provider with the users
/// granted it: the caller (meson knows no other member here).
async fn target_grants(a: Authed) -> DResult<Json<Value>> {
    let grants: Vec<Value> = org_targets(&a)
        .await?
        .into_iter()
        .map(|mut t| {
            t["users"] = json!([a.session.username]);
            t
        })
        .collect();
    Ok(Json(json!({"target_grants": grants})))
}

/// `GET /target-grants/members/{member}`: the caller's own grants (every
/// provider, as granted targets); another member is a 404: the gateway
/// knows only the session's user.
async fn member_grants(a: Authed, Path(member): Path<String>) -> DResult<Json<Value>> {
    if member.trim() != a.session.username {
        return Err(Detail::new(
            StatusCode::NOT_FOUND,
            format!(
                "member: no member {member:?} known here: meson shows a user's grants to \
                 that user only (this session's is {:?}); every user of a tenant may use \
                 every provider",
                a.session.username
            ),
        ));
    }
    let providers = a.meson.providers().await.map_err(Detail::meson)?;
    let version = meson_version(&a).await?;
    let grants: Vec<Value> = providers.iter().map(|p| granted(p, &version)).collect();
    Ok(Json(json!({"target_grants": grants})))
}

/// Any scenario: meson has none.
async fn scenario(Path(id): Path<String>) -> Detail {
    Detail::new(
        StatusCode::NOT_FOUND,
        format!(
            "no scenario {:?}: meson has no scenarios (its targets are its providers, \
             all connected)",
            id.trim()
        ),
    )
}

/// `GET /cert`: nothing to trust.
fn no_certificate() -> Detail {
    Detail::new(
        StatusCode::NOT_FOUND,
        "meson issues no target certificate: its targets are its providers, reached only \
         through meson's API, never a host of theirs directly",
    )
}
