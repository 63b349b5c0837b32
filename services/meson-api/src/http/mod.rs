//! The router, its middleware, and the extractors every handler shares.

mod actions;
mod admin;
mod autoscaler;
mod catalog;
mod cluster_nodes;
mod cluster_pools;
mod cluster_upgrades;
mod clusters;
pub mod guard;
mod idempotency;
pub mod limits;
mod networks;
pub mod openapi;
mod ops;
mod quotes;
mod stream;
mod vms;
mod volumes;

pub use actions::filters as actions_filters;
pub use limits::RequestLimits;
pub use stream::ActionFeed;

use crate::app::{App, Page};
use crate::auth::Auth;
use crate::error::{ApiError, ApiResult};
use crate::ratelimit::{RateLimitConfig, RateLimits};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use meson_core::Error;
use std::sync::Arc;
use tower_http::catch_panic::CatchPanicLayer;
use utoipa_axum::router::OpenApiRouter;

/// How the REST API treats requests, beyond what the app layer decides.
#[derive(Clone, Debug, Default)]
pub struct ApiConfig {
    pub rate_limits: RateLimitConfig,
    pub limits: RequestLimits,
    /// Browser origins allowed to call the API (the Electros dashboard's).
    pub cors_origins: Vec<String>,
}

#[derive(Clone)]
pub struct AppState {
    pub app: App,
    pub auth: Auth,
    /// Live action changes for `/v1/actions/stream`.
    pub actions: ActionFeed,
    pub limits: Arc<RateLimits>,
    pub config: ApiConfig,
}

impl AppState {
    pub fn new(app: App, auth: Auth, actions: ActionFeed, config: ApiConfig) -> AppState {
        AppState {
            app,
            auth,
            actions,
            limits: Arc::new(RateLimits::new(config.rate_limits)),
            config,
        }
    }
}

/// The request's correlation id, for whoever needs it below the middleware.
#[derive(Clone, Debug)]
pub struct CorrelationId(pub String);

pub static CORRELATION_ID: HeaderName = HeaderName::from_static("x-correlation-id");

/// The `/v1` routes, each with its documentation: one source for both.
fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::base())
        .merge(vms::routes())
        .merge(actions::routes())
        .merge(catalog::routes())
        .merge(quotes::routes())
        .merge(volumes::routes())
        .merge(networks::routes())
        .merge(clusters::routes())
        .merge(cluster_nodes::routes())
        .merge(cluster_pools::routes())
        .merge(cluster_upgrades::routes())
        .merge(admin::routes())
        .merge(autoscaler::routes())
}

/// The OpenAPI document of the REST API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = api_routes().into_openapi();
    doc.merge(ops::routes().into_openapi());
    openapi::finish(doc)
}

/// The OpenAPI document as `GET /openapi.json` serves it and
/// `openapi/meson.json` holds it.
pub fn openapi_json() -> String {
    openapi::render(&openapi())
}

/// Each operation's rule (`authz::RULES`), by route.
pub fn operations() -> guard::Operations {
    guard::Operations::from_openapi(&openapi()).unwrap_or_else(|missing| {
        // The test `every_route_has_a_rule` keeps this from shipping; should
        // it anyway, those routes refuse every call.
        tracing::error!(?missing, "routes without an authorization rule");
        guard::Operations::default()
    })
}

/// Builds the REST router. Layers, outermost first: correlation id, CORS,
/// panics to `service_error`, request limits and timeout; then, per route,
/// the guard (rule, token, rate limit, role, tenant scope, audit) and
/// idempotency keys.
pub fn router(state: AppState) -> Router {
    let (api, mut doc) = api_routes().split_for_parts();
    let (ops, ops_doc) = ops::routes().split_for_parts();
    doc.merge(ops_doc);
    let guarded = guard::GuardState {
        state: state.clone(),
        operations: operations(),
    };
    let api = api
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            idempotency::idempotency,
        ))
        .layer(axum::middleware::from_fn_with_state(guarded, guard::guard))
        .with_state(state.clone());
    let limits = state.config.limits;
    let cors = limits::cors(&state.config.cors_origins);
    crate::metrics::handle();
    let router = Router::new()
        .merge(ops.with_state(state))
        .merge(openapi::routes(openapi::render(&openapi::finish(doc))))
        .merge(api)
        // Per route (so it sees the route's template), inside the limits.
        .layer(axum::middleware::from_fn(crate::metrics::http))
        .layer(axum::extract::DefaultBodyLimit::max(limits.body_bytes))
        .layer(axum::middleware::from_fn_with_state(limits, limits::limits))
        .layer(CatchPanicLayer::custom(|_| {
            ApiError(Error::internal("handler panicked")).into_response()
        }));
    match cors {
        Some(cors) => router.layer(cors),
        None => router,
    }
    .layer(axum::middleware::from_fn(correlation))
}

/// Gives every request a correlation id (the caller's, if sane), a span, and
/// puts the id on every response, errors and panics included.
async fn correlation(mut req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get(&CORRELATION_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|s| {
            !s.is_empty()
                && s.len() <= 64
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    req.extensions_mut().insert(CorrelationId(id.clone()));
    let span = tracing::info_span!(
        "http",
        method = %req.method(),
        path = %req.uri().path(),
        correlation_id = %id,
        // Filled in by the guard once the caller is known.
        operation = tracing::field::Empty,
        tenant = tracing::field::Empty,
        subject = tracing::field::Empty,
    );
    crate::trace_context::continue_trace(&span, req.headers());
    let start = std::time::Instant::now();
    let mut res = tracing::Instrument::instrument(next.run(req), span.clone()).await;
    span.in_scope(|| {
        tracing::info!(
            status = res.status().as_u16(),
            ms = start.elapsed().as_millis() as u64,
            "request"
        )
    });
    if let Ok(v) = HeaderValue::from_str(&id) {
        res.headers_mut().insert(CORRELATION_ID.clone(), v);
    }
    res
}

async fn not_found() -> ApiError {
    ApiError(Error::NotFound {
        kind: "route",
        id: String::new(),
    })
}

async fn method_not_allowed() -> Response {
    let mut res = ApiError(Error::invalid(
        "method",
        "this method is not allowed on this route",
    ))
    .into_response();
    *res.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    res
}

/// A JSON request body as a `serde_json::Value`. A body sent as anything but
/// JSON, or with no `Content-Type`, answers `415 unsupported_media_type`; an
/// oversized one `413 payload_too_large`; malformed JSON, or an object
/// naming a key twice, `json_error`; too deep nesting `invalid_input`.
pub struct JsonBody(pub serde_json::Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let limits = req
            .extensions()
            .get::<RequestLimits>()
            .copied()
            .unwrap_or_default();
        let ct = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap_or("(not text)").to_owned());
        if let Some(ct) = &ct
            && !is_json(ct)
        {
            return Err(ApiError(Error::UnsupportedMediaType {
                message: format!("expected Content-Type application/json, got {ct}"),
            }));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError(Error::PayloadTooLarge {
                    limit: limits.body_bytes,
                })
            } else {
                ApiError(Error::Json {
                    message: "could not read the body".into(),
                })
            }
        })?;
        // No Content-Type: an empty body is no body (the operation says
        // whether it needs one); a body must say it is JSON.
        if ct.is_none() && !bytes.is_empty() {
            return Err(ApiError(Error::UnsupportedMediaType {
                message: "the body has no Content-Type: send it as application/json".into(),
            }));
        }
        limits::check_depth(&bytes, limits.json_depth)?;
        let text = std::str::from_utf8(&bytes).map_err(|e| {
            ApiError(Error::Json {
                message: format!("the body is not valid UTF-8 (byte {})", e.valid_up_to()),
            })
        })?;
        meson_core::parse::json_value(text)
            .map(JsonBody)
            .map_err(|e| {
                ApiError(Error::Json {
                    message: e.to_string(),
                })
            })
    }
}

/// `application/json`, or a `+json` type, with any parameters.
fn is_json(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Parses a resource id from the path; a malformed id names the field.
pub fn parse_id<T: std::str::FromStr>(raw: &str) -> ApiResult<T> {
    raw.parse()
        .map_err(|_| ApiError(Error::invalid("id", format!("'{raw}' is not a valid id"))))
}

/// Query parameters as (key, value) pairs, keeping repeated keys.
pub fn query_pairs(query: Option<&str>) -> ApiResult<Vec<(String, String)>> {
    serde_urlencoded::from_str(query.unwrap_or(""))
        .map_err(|_| ApiError(Error::invalid("(query)", "malformed query string")))
}

/// `page` and `per_page` from the query.
pub fn page_of(pairs: &[(String, String)]) -> ApiResult<Page> {
    let mut page = Page {
        page: 1,
        per_page: 25,
    };
    for (k, v) in pairs {
        match k.as_str() {
            "page" => {
                page.page = v.parse().ok().filter(|p| *p >= 1).ok_or_else(|| {
                    ApiError(Error::invalid("page", "must be an integer of at least 1"))
                })?
            }
            "per_page" => {
                page.per_page = v
                    .parse()
                    .ok()
                    .filter(|p| (1..=Page::MAX_PER_PAGE).contains(p))
                    .ok_or_else(|| {
                        ApiError(Error::invalid(
                            "per_page",
                            format!("must be an integer from 1 to {}", Page::MAX_PER_PAGE),
                        ))
                    })?
            }
            _ => {}
        }
    }
    Ok(page)
}

/// `name=`, `status=` (repeatable), `label_selector=`, `sort=` (up to two).
/// `is_status` says which statuses exist for the resource.
pub fn list_filter(
    pairs: &[(String, String)],
    is_status: impl Fn(&str) -> bool,
) -> ApiResult<meson_db::ListFilter> {
    let mut f = meson_db::ListFilter::default();
    for (k, v) in pairs {
        match k.as_str() {
            // PostgreSQL text cannot hold NUL, and no name contains one.
            "name" if v.contains('\0') => {
                return Err(ApiError(Error::invalid(
                    "name",
                    "must not contain NUL characters",
                )));
            }
            "name" => f.name = Some(v.clone()),
            "status" => {
                if !is_status(v) {
                    return Err(ApiError(Error::invalid(
                        "status",
                        format!("unknown status '{v}'"),
                    )));
                }
                f.statuses.push(v.clone());
            }
            "label_selector" => f.selector.extend(meson_core::selector::parse(v)?),
            "sort" => {
                let (field, dir) = v.split_once(':').unwrap_or((v, "asc"));
                if !["id", "name", "status", "created"].contains(&field)
                    || !["asc", "desc"].contains(&dir)
                {
                    return Err(ApiError(Error::invalid(
                        "sort",
                        format!(
                            "'{v}': sort by id, name, status or created, optionally :asc or :desc"
                        ),
                    )));
                }
                if f.sort.len() == 2 {
                    return Err(ApiError(Error::invalid("sort", "at most two sort keys")));
                }
                f.sort.push(format!("{field}:{dir}"));
            }
            _ => {}
        }
    }
    Ok(f)
}

/// A list response: the body plus its `Link` header.
pub fn paged(body: impl serde::Serialize, link: Option<HeaderValue>) -> Response {
    let mut out = axum::Json(body).into_response();
    if let Some(link) = link {
        out.headers_mut().insert(axum::http::header::LINK, link);
    }
    out
}

/// `meta.pagination` and the `Link` header for a page of `total` entries.
pub fn pagination(path: &str, page: Page, total: u64) -> (meson_types::Meta, Option<HeaderValue>) {
    let last = total.div_ceil(u64::from(page.per_page)).max(1) as u32;
    let p = meson_types::Pagination {
        page: page.page,
        per_page: page.per_page,
        previous_page: (page.page > 1).then(|| page.page - 1),
        next_page: (page.page < last).then(|| page.page + 1),
        last_page: Some(last),
        total_entries: Some(total),
    };
    let link = |n: u32, rel: &str| {
        format!(
            "<{path}?page={n}&per_page={}>; rel=\"{rel}\"",
            page.per_page
        )
    };
    let mut links = Vec::new();
    if let Some(n) = p.previous_page {
        links.push(link(n, "prev"));
    }
    if let Some(n) = p.next_page {
        links.push(link(n, "next"));
    }
    links.push(link(last, "last"));
    (
        meson_types::Meta { pagination: p },
        HeaderValue::from_str(&links.join(", ")).ok(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_filter_with_nul_is_invalid_input() {
        let pairs = [("name".to_owned(), "a\0b".to_owned())];
        match list_filter(&pairs, |_| true) {
            Err(ApiError(Error::InvalidInput { fields })) => assert_eq!(fields[0].name, "name"),
            other => panic!("expected invalid_input, got {:?}", other.map(|_| ())),
        }
        let pairs = [("name".to_owned(), "web-1".to_owned())];
        assert!(list_filter(&pairs, |_| true).is_ok());
    }
}
