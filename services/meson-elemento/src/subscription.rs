//! Subscriptions and organisation limits over meson's plans and quotas
//! (`/v1/plans`, `/v1/quotas`): what Electros' subscription and limits
//! pages read, on the auth daemon.
//!
//! A meson plan is a named set of quotas an operator puts tenants on; a
//! tenant on none has the deployment's defaults, the plan `default`. The
//! subscription tiers (`GET /api/v1.0/subscription/tiers`) are meson's
//! plans, `default` first; the caller's subscription (`GET
//! /api/v1.0/subscription/`, and as the organisation's only one, `GET
//! /api/v1.0/subscription/org`) is its tenant on its plan; the
//! organisation's limits (`GET /api/v1.0/orgs/{org_id}/limits`) are its
//! tenant's quotas in force with what it holds of each. An organisation is
//! a tenant, as `/status` shows it (`org_id`): the caller's own only, an
//! operator's too.
//!
//! A tenant never chooses its plan or quotas: meson's operators set them.
//! So subscribing, changing tier, cancelling, payment links and setting
//! limits answer `501`, saying so.

use crate::error::{DResult, Detail};
use crate::routes::{AppState, Authed};
use crate::wire;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::{Json, Router};
use chrono::Utc;
use meson_types::admin::Quota;
use serde_json::{Value, json};
use std::collections::BTreeMap;

const BASE: &str = "/api/v1.0/subscription";
const LIMITS: &str = "/api/v1.0/orgs/{org_id}/limits";

/// What a tenant does not decide: the subscription writes.
const WRITES: [(&str, &str); 4] = [
    ("POST", "/subscribe"),
    ("POST", "/subscribe/bulk"),
    ("POST", "/change-tier"),
    ("DELETE", "/cancel"),
];

/// What meson does not take: payments.
const PAYMENTS: [&str; 2] = ["/payment-links", "/payment-links/owner"];

/// The routes served (all on the auth daemon), `(method, path)`.
pub fn served() -> Vec<(&'static str, String)> {
    let mut routes = vec![
        ("GET", format!("{BASE}/tiers")),
        ("GET", BASE.to_owned()),
        ("GET", format!("{BASE}/")),
        ("GET", format!("{BASE}/org")),
        ("GET", format!("{BASE}/history")),
        ("GET", LIMITS.to_owned()),
        ("PUT", LIMITS.to_owned()),
    ];
    routes.extend(WRITES.iter().map(|(m, p)| (*m, format!("{BASE}{p}"))));
    routes.extend(PAYMENTS.iter().map(|p| ("POST", format!("{BASE}{p}"))));
    routes
}

/// The routes (the auth daemon's).
pub fn routes() -> Router<AppState> {
    use axum::routing::{delete, get, post};
    let mut r = Router::new()
        .route(&format!("{BASE}/tiers"), get(tiers))
        // FastAPI serves `/subscription/` (and redirects `/subscription`).
        .route(BASE, get(current))
        .route(&format!("{BASE}/"), get(current))
        .route(&format!("{BASE}/org"), get(org_subscriptions))
        // meson keeps no past plans: the history is the one in force.
        .route(&format!("{BASE}/history"), get(org_subscriptions))
        .route(LIMITS, get(org_limits).put(|| async { quotas_are_operators() }));
    for (m, p) in WRITES {
        let refuse = || async { plans_are_operators() };
        let path = format!("{BASE}{p}");
        r = match m {
            "DELETE" => r.route(&path, delete(refuse)),
            _ => r.route(&path, post(refuse)),
        };
    }
    for p in PAYMENTS {
        r = r.route(&format!("{BASE}{p}"), post(|| async { no_payments() }));
    }
    r
}

fn plans_are_operators() -> Detail {
    Detail::new(
        StatusCode::NOT_IMPLEMENTED,
        "not supported by meson: a tenant does not choose its plan, meson's operators put \
         it on one (PATCH /v1/tenants/{tenant}/quotas {\"plan\": ...}); \
         GET /api/v1.0/subscription/tiers lists them, GET /api/v1.0/subscription/ shows yours",
    )
}

fn no_payments() -> Detail {
    Detail::new(
        StatusCode::NOT_IMPLEMENTED,
        "not supported by meson: meson takes no payments (a plan has no price; usage is \
         billed in monthly statements, GET /api/v1/authenticate/billing/my/transactions)",
    )
}

fn quotas_are_operators() -> Detail {
    Detail::new(
        StatusCode::NOT_IMPLEMENTED,
        "not supported by meson: a tenant's quotas are set by meson's operators \
         (PATCH /v1/tenants/{tenant}/quotas)",
    )
}

/// The caller's tenant's quotas, usage and plan, as meson knows the
/// tenant from the session's token.
async fn own_quota(a: &Authed) -> DResult<Quota> {
    a.meson.quotas().await.map_err(Detail::meson)
}

/// How many providers meson has: the target daemon's connections.
async fn connections(a: &Authed) -> DResult<usize> {
    Ok(a.meson.providers().await.map_err(Detail::meson)?.len())
}

/// Refuses an organisation other than the caller's tenant (`asked`, from
/// the client's `field`; none asked is the caller's own).
fn only_own(asked: Option<&str>, tenant: &str, field: &str) -> DResult<()> {
    match asked.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(()),
        Some(org) if org == tenant => Ok(()),
        Some(_) => {
            let message = format!(
                "not your organisation: meson shows a tenant its own subscription and \
                 limits only (yours is {tenant:?})"
            );
            Err(Detail {
                status: StatusCode::FORBIDDEN,
                detail: format!("{field}: {message}"),
                fields: vec![json!({"name": field, "messages": [message]})],
            })
        }
    }
}

/// `GET /api/v1.0/subscription/tiers`: meson's plans, `default` first, as
/// [`wire::tier`]s, a bare list.
async fn tiers(a: Authed) -> DResult<Json<Value>> {
    let (plans, currency, providers) = tokio::try_join!(
        async { a.meson.plan_list().await.map_err(Detail::meson) },
        crate::billing::list_currency(&a),
        connections(&a),
    )?;
    Ok(Json(
        plans
            .iter()
            .enumerate()
            .map(|(i, p)| wire::tier(p, i + 1, &currency, providers.max(1)))
            .collect(),
    ))
}

/// The caller's subscription ([`wire::subscription`]); `?org=` another
/// organisation than the caller's is refused.
async fn subscription(a: &Authed, q: &BTreeMap<String, String>) -> DResult<Value> {
    let quota = own_quota(a).await?;
    only_own(q.get("org").map(String::as_str), &quota.tenant, "org")?;
    let name = quota.plan.as_deref().unwrap_or(wire::DEFAULT_PLAN);
    let (plan, providers) = tokio::try_join!(
        async { a.meson.plan_get(name).await.map_err(Detail::meson) },
        connections(a),
    )?;
    Ok(wire::subscription(
        &quota,
        &plan,
        &a.session.username,
        providers,
        Utc::now(),
    ))
}

/// `GET /api/v1.0/subscription/[?org=]`: the caller's subscription.
async fn current(a: Authed, Query(q): Query<BTreeMap<String, String>>) -> DResult<Json<Value>> {
    subscription(&a, &q).await.map(Json)
}

/// `GET /api/v1.0/subscription/org[?org=]`: the organisation's
/// subscriptions, a bare list: its tenant's one (there are no inactive
/// ones, whatever `include_inactive` says).
async fn org_subscriptions(
    a: Authed,
    Query(q): Query<BTreeMap<String, String>>,
) -> DResult<Json<Value>> {
    Ok(Json(json!([subscription(&a, &q).await?])))
}

/// `GET /api/v1.0/orgs/{org_id}/limits`: the organisation's quotas and
/// usage ([`wire::org_limits`]): the caller's own, or one it is a member
/// of (meson refuses any other).
async fn org_limits(a: Authed, Path(org_id): Path<String>) -> DResult<Json<Value>> {
    let quota = a
        .meson
        .organization(&org_id)
        .quotas()
        .await
        .map_err(Detail::meson)?;
    Ok(Json(wire::org_limits(&quota)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_organisation_is_refused_by_name() {
        assert!(only_own(None, "acme", "org").is_ok());
        assert!(only_own(Some(" "), "acme", "org").is_ok());
        assert!(only_own(Some("acme"), "acme", "org_id").is_ok());
        let e = only_own(Some("globex"), "acme", "org_id").unwrap_err();
        assert_eq!(e.status, StatusCode::FORBIDDEN);
        assert_eq!(e.fields[0]["name"], "org_id");
        assert!(e.detail.contains("\"acme\""), "{}", e.detail);
    }

    #[test]
    fn every_route_served_is_catalogued_on_the_auth_daemon() {
        use crate::catalog::{Daemon, ROUTES};
        for (m, p) in served() {
            let known = ROUTES
                .iter()
                .any(|(d, rm, rp)| *d == Daemon::Auth && *rm == m && *rp == p)
                || p == format!("{BASE}/");
            assert!(known, "{m} {p}");
        }
    }
}
