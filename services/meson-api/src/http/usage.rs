//! `/v1/usage`, `/v1/statements` and `/v1/prices`: metering, as JSON or
//! CSV.

use super::responses::BadQuery;
use super::{AppState, JsonBody, query_pairs};
use crate::app::usage::UsageQuery;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use meson_core::Error;
use meson_types::ErrorResponse;
use meson_types::usage::{
    PriceCreateRequest, PriceList, PriceResponse, Statement, StatementList, StatementResponse,
    Usage,
};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(usage))
        .routes(routes!(statement_list))
        .routes(routes!(statement_get))
        .routes(routes!(price_list))
        .routes(routes!(price_create))
}

/// The first value of each parameter this route knows.
fn param<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Whether the caller asked for CSV: `format=csv`, or `Accept: text/csv`.
fn wants_csv(pairs: &[(String, String)], headers: &HeaderMap) -> ApiResult<bool> {
    match param(pairs, "format") {
        Some("csv") => Ok(true),
        Some("json") => Ok(false),
        Some(_) => Err(ApiError(Error::invalid("format", "must be json or csv"))),
        None => Ok(headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.split(',').any(|t| t.trim().starts_with("text/csv")))),
    }
}

fn csv_response(rows: Vec<Vec<String>>, filename: &str) -> ApiResult<Response> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for row in rows {
        w.write_record(&row)
            .map_err(|e| ApiError(Error::internal_from("writing CSV", e)))?;
    }
    let body = w
        .into_inner()
        .map_err(|e| ApiError(Error::internal(format!("writing CSV: {e}"))))?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{filename}\""),
            ),
        ],
        body,
    )
        .into_response())
}

fn usage_csv(u: &Usage) -> Vec<Vec<String>> {
    let mut rows = vec![
        [
            "tenant", "group", "name", "meter", "unit", "quantity", "cost", "currency",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for l in &u.lines {
        rows.push(vec![
            l.tenant.clone(),
            l.group.clone().unwrap_or_default(),
            l.name.clone().unwrap_or_default(),
            l.meter.as_str().to_owned(),
            l.unit.clone(),
            l.quantity.clone(),
            l.cost.clone(),
            l.currency.clone(),
        ]);
    }
    rows
}

fn statement_csv(s: &Statement) -> Vec<Vec<String>> {
    let mut rows = vec![
        [
            "period_start",
            "meter",
            "resource_id",
            "resource_name",
            "cluster_id",
            "unit",
            "quantity",
            "cost",
            "currency",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for l in s.lines.iter().flatten() {
        rows.push(vec![
            s.period_start.format("%Y-%m").to_string(),
            l.meter.as_str().to_owned(),
            l.resource_id.to_string(),
            l.resource_name.clone(),
            l.cluster_id.map(|c| c.to_string()).unwrap_or_default(),
            l.unit.clone(),
            l.quantity.clone(),
            l.cost.clone(),
            s.currency.clone(),
        ]);
    }
    rows.push(vec![
        s.period_start.format("%Y-%m").to_string(),
        "total".into(),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        s.total.clone(),
        s.currency.clone(),
    ]);
    rows
}

/// Usage and cost.
#[utoipa::path(
    get,
    path = "/v1/usage",
    tag = "usage",
    operation_id = "usage_get",
    summary = "Get usage and cost",
    description = "What the tenant used within `[from, to)` and what it cost, at the prices \
        in force at the time: a running VM per hour at its host's quote; volumes, images and \
        backups per GB-hour and a running cluster per hour at the price list's (`GET \
        /v1/prices`). Usage is metered from the state changes meson records, in the same \
        transaction, so a crash neither loses nor counts twice a second. Grouped by \
        `resource` (default), `day` (UTC), `tenant` or `label:<key>`; each line is one \
        group's use of one meter, with six decimals, and the totals are per currency, to \
        the cent. CSV with `format=csv` or `Accept: text/csv`. An operator reads any \
        tenant's (`tenant`), or every tenant's at once.",
    params(
        ("from" = Option<String>, Query, description = "RFC 3339; default: the start of this \
            month (UTC)."),
        ("to" = Option<String>, Query, description = "RFC 3339, after `from`, at most 366 \
            days later; default: now."),
        ("group_by" = Option<String>, Query, description = "`resource`, `day`, `tenant` or \
            `label:<key>`."),
        ("tenant" = Option<String>, Query, description = "Operators: whose usage (default: \
            every tenant's). A tenant may only name itself."),
        ("format" = Option<String>, Query, description = "`json` (default) or `csv`."),
    ),
    responses(
        (status = 200, description = "The usage.",
            content((Usage = "application/json"), (String = "text/csv"))),
        BadQuery,
        (status = 403, description = "A tenant named another (`forbidden`).",
            body = ErrorResponse),
    ),
)]
async fn usage(
    State(s): State<AppState>,
    p: Principal,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let pairs = query_pairs(q.as_deref())?;
    let csv = wants_csv(&pairs, &headers)?;
    let query = UsageQuery::parse(
        param(&pairs, "from"),
        param(&pairs, "to"),
        param(&pairs, "group_by"),
        param(&pairs, "tenant"),
    )?;
    let u = s.app.usage(&p, &query).await?;
    if csv {
        return csv_response(usage_csv(&u), "usage.csv");
    }
    Ok(Json(u).into_response())
}

/// Monthly statements.
#[utoipa::path(
    get,
    path = "/v1/statements",
    tag = "usage",
    operation_id = "statement_list",
    summary = "List statements",
    description = "The running month (`id` = `current`, `status` = `open`: what it has cost \
        so far), then every closed month, newest first. A month's statement is written once \
        the month (UTC) is over, one per currency, and never changes after. An operator \
        reads any tenant's (`tenant`), or every tenant's closed statements at once.",
    params(("tenant" = Option<String>, Query, description = "Operators: whose statements.")),
    responses(
        (status = 200, description = "The statements, without their lines.",
            body = StatementList),
        BadQuery,
        (status = 403, description = "A tenant named another (`forbidden`).",
            body = ErrorResponse),
    ),
)]
async fn statement_list(
    State(s): State<AppState>,
    p: Principal,
    RawQuery(q): RawQuery,
) -> ApiResult<Json<StatementList>> {
    let pairs = query_pairs(q.as_deref())?;
    let statements = s.app.statement_list(&p, param(&pairs, "tenant")).await?;
    Ok(Json(StatementList { statements }))
}

/// A statement with its lines.
#[utoipa::path(
    get,
    path = "/v1/statements/{id}",
    tag = "usage",
    operation_id = "statement_get",
    summary = "Get a statement",
    description = "A statement with a line per resource: a closed one by its id, or \
        `current`, the running month so far. CSV with `format=csv` or `Accept: text/csv`, \
        with a last line for the total.",
    params(
        ("id" = String, Path, description = "A statement's id, or `current`."),
        ("tenant" = Option<String>, Query, description = "Operators: whose running month \
            `current` is."),
        ("format" = Option<String>, Query, description = "`json` (default) or `csv`."),
    ),
    responses(
        (status = 200, description = "The statement.",
            content((StatementResponse = "application/json"), (String = "text/csv"))),
        BadQuery,
        (status = 403, description = "A tenant named another (`forbidden`).",
            body = ErrorResponse),
        (status = 404, description = "No such statement for this tenant (`not_found`).",
            body = ErrorResponse),
    ),
)]
async fn statement_get(
    State(s): State<AppState>,
    p: Principal,
    headers: HeaderMap,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let pairs = query_pairs(q.as_deref())?;
    let csv = wants_csv(&pairs, &headers)?;
    let statement = s
        .app
        .statement_get(&p, &id, param(&pairs, "tenant"))
        .await?;
    if csv {
        let name = format!(
            "statement-{}-{}.csv",
            statement.tenant,
            statement.period_start.format("%Y-%m")
        );
        return csv_response(statement_csv(&statement), &name);
    }
    Ok(Json(StatementResponse { statement }).into_response())
}

/// The price list.
#[utoipa::path(
    get,
    path = "/v1/prices",
    tag = "usage",
    operation_id = "price_list",
    summary = "List prices",
    description = "What a GB-hour of a volume, image or backup and an hour of a cluster cost, \
        per provider (`*`: every provider without its own), each from `effective_from` until \
        `until` (null: until further notice). A VM costs its host's quote (`price` on the \
        VM, `POST /v1/quotes`).",
    responses((status = 200, description = "The prices.", body = PriceList)),
)]
async fn price_list(State(s): State<AppState>) -> ApiResult<Json<PriceList>> {
    Ok(Json(PriceList {
        prices: s.app.price_list().await?,
    }))
}

/// Sets a price (operators).
#[utoipa::path(
    post,
    path = "/v1/admin/prices",
    tag = "usage",
    operation_id = "price_create",
    summary = "Add a price (admin)",
    description = "A new price for a meter (and provider) from `effective_from` (default: \
        now) on. The past keeps its prices: a time before now is refused, and usage before \
        it is still costed at the price it had.",
    request_body(content = PriceCreateRequest, content_type = "application/json",
        example = json!({"meter": "volume", "unit_price": "0.00007", "currency": "EUR",
            "effective_from": "2027-01-01T00:00:00Z"})),
    responses(
        (status = 201, description = "The price.", body = PriceResponse),
        (status = 400, description = "A bad field (`invalid_input`, every rejected field \
            named), or malformed JSON (`json_error`).", body = ErrorResponse),
        (status = 403, description = "Not an operator (`forbidden`).", body = ErrorResponse),
        (status = 409, description = "The time is past, or a price of this meter and \
            provider starts then already (`conflict`).", body = ErrorResponse),
    ),
)]
async fn price_create(State(s): State<AppState>, JsonBody(body): JsonBody) -> ApiResult<Response> {
    let price = s.app.price_create(&body).await?;
    Ok((StatusCode::CREATED, Json(PriceResponse { price })).into_response())
}
