//! Usage, market prices and billing over meson's metering (`/v1/usage`,
//! `/v1/statements`, `/v1/prices`) and its quotes: what Electros' usage,
//! pricing and billing pages read.
//!
//! The compute daemon's `GET /usage` is the caller's tenant's usage and
//! cost this month (or `?from=&to=`), per meter and per resource; `GET
//! /marketprices` prices every flavour where it can run (meson's quotes)
//! and lists the price list's prices in force; `POST /marketprices` with a
//! specfile prices that VM. The auth daemon's `GET /billing/my/transactions`
//! lists the tenant's monthly statements as billing transactions: the
//! running month (`pending`), then each closed month (`closed`).
//!
//! Every call names the caller's own tenant (as meson knows it from the
//! session's token), so an operator's session, which meson would answer
//! with every tenant's usage, sees its own tenant's here too.

use crate::catalog::Daemon;
use crate::error::{DResult, Detail};
use crate::routes::{AppState, Authed, Body};
use crate::wire;
use axum::extract::Query;
use axum::http::StatusCode;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use meson_client::UsageQuery;
use meson_types::quote::{QuoteAnswer, QuoteResponse};
use meson_types::requests::VmCreateRequest;
use serde_json::Value;
use std::collections::BTreeMap;

/// The routes served for daemon `d`, `(method, path)`.
pub fn served(d: Daemon) -> Vec<(&'static str, String)> {
    let b = d.base();
    let rel: &[(&'static str, &str)] = match d {
        Daemon::Compute => &[
            ("GET", "/usage"),
            ("GET", "/marketprices"),
            ("POST", "/marketprices"),
        ],
        Daemon::Auth => &[("GET", "/billing/my/transactions")],
        _ => &[],
    };
    rel.iter().map(|(m, p)| (*m, format!("{b}{p}"))).collect()
}

/// The routes of daemon `d`.
pub fn routes(d: Daemon) -> Router<AppState> {
    use axum::routing::get;
    let b = d.base();
    match d {
        Daemon::Compute => Router::new()
            .route(&format!("{b}/usage"), get(usage))
            .route(
                &format!("{b}/marketprices"),
                get(market_prices).post(market_prices_for),
            ),
        Daemon::Auth => {
            Router::new().route(&format!("{b}/billing/my/transactions"), get(transactions))
        }
        _ => Router::new(),
    }
}

/// The caller's tenant, as meson knows it from the session's token.
async fn own_tenant(a: &Authed) -> DResult<String> {
    Ok(a.meson.quotas().await.map_err(Detail::meson)?.tenant)
}

/// An optional RFC 3339 time of the query.
fn time(q: &BTreeMap<String, String>, key: &str) -> DResult<Option<DateTime<Utc>>> {
    match q.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => DateTime::parse_from_rfc3339(v)
            .map(|t| Some(t.to_utc()))
            .map_err(|_| {
                Detail::field(
                    key,
                    format!("{v:?} is not an RFC 3339 time, like 2026-11-01T00:00:00Z"),
                )
            }),
    }
}

/// The currency meson bills in when nothing was used yet: the price
/// list's first (as meson's running statement takes it).
pub(crate) async fn list_currency(a: &Authed) -> DResult<String> {
    let prices = a.meson.price_list().await.map_err(Detail::meson)?;
    Ok(prices
        .iter()
        .min_by_key(|p| p.effective_from)
        .map_or_else(|| "EUR".to_owned(), |p| p.currency.clone()))
}

/// `GET /usage[?from=&to=]`: the tenant's usage and cost within `[from,
/// to)` (meson's defaults: the start of this month, now), grouped by
/// resource, as [`wire::usage_object`].
async fn usage(a: Authed, Query(q): Query<BTreeMap<String, String>>) -> DResult<Json<Value>> {
    let tenant = own_tenant(&a).await?;
    let query = UsageQuery {
        from: time(&q, "from")?,
        to: time(&q, "to")?,
        group_by: Some("resource".to_owned()),
        tenant: Some(tenant.clone()),
    };
    let u = a.meson.usage(&query).await.map_err(Detail::meson)?;
    let currency = match u.totals.first() {
        Some(t) => t.currency.clone(),
        None => list_currency(&a).await?,
    };
    Ok(Json(wire::usage_object(&u, &tenant, &currency)))
}

/// meson found no host for the VM.
fn unplaceable(e: &meson_client::Error) -> bool {
    matches!(e, meson_client::Error::Api { code, .. } if code == "resource_unavailable")
}

fn vm_quote(answer: QuoteAnswer) -> DResult<QuoteResponse> {
    match answer {
        QuoteAnswer::Vm(q) => Ok(q),
        QuoteAnswer::Kaas(_) => Err(Detail::new(
            StatusCode::BAD_GATEWAY,
            "meson quoted a cluster for a VM",
        )),
    }
}

/// Every flavour quoted (at once), then the price list in force now.
async fn catalogue(a: &Authed) -> DResult<Value> {
    let flavors = a.meson.flavors().await.map_err(Detail::meson)?;
    let list = a.meson.price_list().await.map_err(Detail::meson)?;
    let mut asked = tokio::task::JoinSet::new();
    for (i, f) in flavors.iter().enumerate() {
        // The flavour as the template `GET /templates` shows, quoted as
        // `canallocate` quotes a template.
        let spec = wire::specfile_to_vm(&wire::template(f), "quote")?;
        let req: VmCreateRequest = Detail::typed(spec, &wire::specfile_field)?;
        let meson = a.meson.clone();
        asked.spawn(async move { (i, meson.quote(&req.into()).await) });
    }
    let mut quotes: Vec<Option<QuoteResponse>> = vec![None; flavors.len()];
    while let Some(done) = asked.join_next().await {
        let (i, answer) = done.map_err(|e| {
            Detail::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("a quote failed: {e}"),
            )
        })?;
        match answer {
            Ok(answer) => quotes[i] = Some(vm_quote(answer)?),
            // A flavour no host can run has no market price.
            Err(e) if unplaceable(&e) => {}
            Err(e) => return Err(Detail::meson(e)),
        }
    }
    let in_force = wire::prices_in_force(&list, Utc::now());
    Ok(wire::market_prices(&flavors, &quotes, &in_force))
}

/// `GET /marketprices`: [`wire::market_prices`].
async fn market_prices(a: Authed) -> DResult<Json<Value>> {
    catalogue(&a).await.map(Json)
}

/// `POST /marketprices`: a specfile's prices ([`wire::spec_market_prices`],
/// meson's refusals under the specfile's field names); no specfile (an
/// empty body or `{}`), the whole catalogue as `GET`.
async fn market_prices_for(a: Authed, Body(b): Body) -> DResult<Json<Value>> {
    let empty = match &b {
        Value::Null => true,
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    if empty {
        return catalogue(&a).await.map(Json);
    }
    let req: VmCreateRequest =
        Detail::typed(wire::specfile_to_vm(&b, "quote")?, &wire::specfile_field)?;
    let answer = a
        .meson
        .quote(&req.into())
        .await
        .map_err(|e| Detail::from_meson(e, &wire::specfile_field))?;
    Ok(Json(wire::spec_market_prices(&vm_quote(answer)?)))
}

/// `GET /billing/my/transactions[?billing_uuid=]`: the tenant's statements
/// (the running month first, then the closed ones, newest first) as
/// [`wire::transaction`]s, a bare list; `billing_uuid` keeps the one with
/// that id (`current`: the running month), none if there is no such one.
async fn transactions(
    a: Authed,
    Query(q): Query<BTreeMap<String, String>>,
) -> DResult<Json<Value>> {
    let tenant = own_tenant(&a).await?;
    let statements = a
        .meson
        .statement_list(Some(&tenant))
        .await
        .map_err(Detail::meson)?;
    let wanted = q.get("billing_uuid").map(|s| s.trim());
    Ok(Json(
        statements
            .iter()
            .filter(|s| wanted.is_none_or(|w| s.id.eq_ignore_ascii_case(w)))
            .map(|s| wire::transaction(s, &a.session.username))
            .collect(),
    ))
}
