//! The router, its middleware, and the extractors every handler shares.

mod actions;
mod catalog;
mod idempotency;
mod ops;
mod quotes;
mod stream;
mod vms;
mod volumes;

pub use stream::ActionFeed;

use crate::app::{App, Page};
use crate::auth::{Auth, HasAuth};
use crate::error::{ApiError, ApiResult};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use meson_core::Error;
use std::time::Duration;
use tower_http::catch_panic::CatchPanicLayer;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

#[derive(Clone)]
pub struct AppState {
    pub app: App,
    pub auth: Auth,
    /// Live action changes for `/v1/actions/stream`.
    pub actions: ActionFeed,
}

impl HasAuth for AppState {
    fn auth(&self) -> &Auth {
        &self.auth
    }
}

pub static CORRELATION_ID: HeaderName = HeaderName::from_static("x-correlation-id");

/// Builds the REST router.
pub fn router(state: AppState) -> Router {
    let api = Router::new()
        .merge(vms::routes())
        .merge(actions::routes())
        .merge(catalog::routes())
        .merge(quotes::routes())
        .merge(volumes::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            idempotency::idempotency,
        ))
        .with_state(state.clone());
    Router::new()
        .merge(ops::routes().with_state(state))
        .merge(api)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(CatchPanicLayer::custom(|_| {
            ApiError(Error::internal("handler panicked")).into_response()
        }))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::GATEWAY_TIMEOUT,
            Duration::from_secs(30),
        ))
        .layer(axum::middleware::from_fn(correlation))
}

/// Gives every request a correlation id (the caller's, if sane), a span, and
/// puts the id on every response, errors and panics included.
async fn correlation(req: Request, next: Next) -> Response {
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
    let span = tracing::info_span!("http", method = %req.method(), path = %req.uri().path(), correlation_id = %id);
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

/// A JSON request body as a `serde_json::Value`; malformed bodies answer
/// `json_error`, oversized ones `invalid_input`.
pub struct JsonBody(pub serde_json::Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let ct = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        if let Some(ct) = ct
            && !ct.starts_with("application/json")
            && !ct.contains("+json")
        {
            return Err(ApiError(Error::Json {
                message: format!("expected Content-Type application/json, got {ct}"),
            }));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError(Error::invalid(
                    "(body)",
                    format!("the body exceeds {MAX_BODY_BYTES} bytes"),
                ))
            } else {
                ApiError(Error::Json {
                    message: "could not read the body".into(),
                })
            }
        })?;
        let text = std::str::from_utf8(&bytes).map_err(|e| {
            ApiError(Error::Json {
                message: format!("the body is not valid UTF-8 (byte {})", e.valid_up_to()),
            })
        })?;
        serde_json::from_str(text).map(JsonBody).map_err(|e| {
            ApiError(Error::Json {
                message: e.to_string(),
            })
        })
    }
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
