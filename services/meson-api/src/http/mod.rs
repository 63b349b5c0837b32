//! The router, its middleware, and the extractors every handler shares.

mod actions;
mod admin;
mod autoscaler;
mod backups;
mod catalog;
mod cluster_nodes;
mod cluster_pools;
mod cluster_upgrades;
mod clusters;
mod consoles;
pub mod gate;
mod idempotency;
pub mod limits;
mod members;
pub mod openapi;
mod ops;
mod organizations;
mod quotes;
pub(crate) mod resource;
pub mod responses;
mod stream;
mod usage;
mod vms;
mod volumes;

pub use crate::state::{ApiConfig, AppState};
pub use limits::RequestLimits;
pub use stream::ActionFeed;

use crate::error::{ApiError, ApiResult};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use meson_core::Error;
use tower_http::catch_panic::CatchPanicLayer;
use utoipa_axum::router::OpenApiRouter;

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
        .merge(backups::routes())
        .merge(consoles::routes())
        .merge(members::routes())
        .merge(organizations::routes())
        .merge(usage::routes())
        .merge(clusters::routes())
        .merge(cluster_nodes::routes())
        .merge(cluster_pools::routes())
        .merge(cluster_upgrades::routes())
        .merge(admin::routes())
        .merge(autoscaler::routes())
        .merge(crate::resources::routes())
}

/// The OpenAPI document of the REST API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = api_routes().into_openapi();
    doc.merge(ops::routes().into_openapi());
    openapi::finish(doc)
}

/// Every operation id of the REST API (each test that holds an interface
/// to the API's operations starts from these).
#[cfg(test)]
pub(crate) fn operation_ids() -> std::collections::BTreeSet<String> {
    openapi()
        .paths
        .paths
        .values()
        .flat_map(|item| {
            [&item.get, &item.post, &item.put, &item.patch, &item.delete]
                .into_iter()
                .flatten()
                .filter_map(|op| op.operation_id.clone())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The OpenAPI document as `GET /openapi.json` serves it and
/// `openapi/meson.json` holds it.
pub fn openapi_json() -> String {
    openapi::render(&openapi())
}

/// Builds the REST router. Layers, outermost first: correlation id, the
/// edge (`Host`, CORS, pages of other origins, a declared body's size),
/// panics to `service_error`, request limits and timeout; then, per route,
/// the gate (rule, token, rate limit, role, tenant scope, audit) and
/// idempotency keys.
pub fn router(state: AppState) -> Router {
    let (api, mut doc) = api_routes().split_for_parts();
    let (ops, ops_doc) = ops::routes().split_for_parts();
    doc.merge(ops_doc);
    let guarded = gate::GateState {
        state: state.clone(),
        operations: crate::state::operations(),
    };
    let api = api
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            idempotency::idempotency,
        ))
        .layer(axum::middleware::from_fn_with_state(guarded, gate::gate))
        .with_state(state.clone());
    let limits = state.config.limits;
    let edge = std::sync::Arc::new(edge(&state.config));
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
    router
        .layer(axum::middleware::from_fn_with_state(
            edge,
            meson_edge::guard,
        ))
        .layer(axum::middleware::from_fn(correlation))
}

/// The API's edge: its names, its allowed origins (whose pages may read its
/// answers and call it with a bearer token), state changes only from a
/// first party, refusals in the API's error envelope.
fn edge(config: &ApiConfig) -> meson_edge::Edge {
    use axum::http::header;
    let mut edge = meson_edge::Edge::new(
        config.hosts.clone(),
        config.cors_origins.clone(),
        meson_edge::Scope::StateChanges,
    );
    edge.max_body = Some(config.limits.body_bytes as u64);
    edge.allow_headers = vec![
        header::AUTHORIZATION,
        header::CONTENT_TYPE,
        HeaderName::from_static("idempotency-key"),
        HeaderName::from_static("x-correlation-id"),
        HeaderName::from_static("traceparent"),
        HeaderName::from_static("last-event-id"),
        HeaderName::from_static(crate::gate::ORGANIZATION_HEADER),
    ];
    edge.expose_headers = [
        "x-correlation-id",
        "ratelimit-limit",
        "ratelimit-remaining",
        "ratelimit-reset",
        "retry-after",
        "link",
        "location",
        "idempotent-replayed",
    ]
    .map(HeaderName::from_static)
    .to_vec();
    edge.render = |r| {
        use meson_edge::Refusal;
        let message = r.to_string();
        let error = match r {
            Refusal::BodyTooLarge { limit, .. } => Error::PayloadTooLarge {
                limit: *limit as usize,
            },
            Refusal::BadHost { .. } => Error::invalid("(headers)", message),
            Refusal::UnknownHost { .. } | Refusal::ForeignOrigin { .. } | Refusal::CrossSite => {
                Error::Forbidden { message }
            }
        };
        let mut res = ApiError(error).into_response();
        *res.status_mut() = r.status();
        res
    };
    edge
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
        // Filled in by the gate once the caller is known.
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
            && !meson_edge::is_json(ct)
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

/// Parses a resource id from the path; a malformed id names the field.
pub fn parse_id<T: std::str::FromStr>(raw: &str) -> ApiResult<T> {
    crate::app::list::id("id", raw).map_err(ApiError)
}

/// Query parameters as (key, value) pairs, keeping repeated keys.
pub fn query_pairs(query: Option<&str>) -> ApiResult<Vec<(String, String)>> {
    serde_urlencoded::from_str(query.unwrap_or(""))
        .map_err(|_| ApiError(Error::invalid("(query)", "malformed query string")))
}

/// An action as its answer, `{"action": ...}`.
pub fn action_answer(a: &meson_core::action::Action) -> axum::Json<meson_types::ActionResponse> {
    axum::Json(meson_types::ActionResponse {
        action: crate::views::action(a),
        warnings: vec![],
    })
}

/// A started action as its `201 Created` answer, with the request's
/// ignored fields.
pub fn action_created_warned(
    a: &meson_core::action::Action,
    warnings: &[meson_core::parse::Warning],
) -> Response {
    let body = meson_types::ActionResponse {
        action: crate::views::action(a),
        warnings: warnings.iter().map(crate::views::warning).collect(),
    };
    (StatusCode::CREATED, axum::Json(body)).into_response()
}

/// A started action as its `201 Created` answer.
pub fn action_created(a: &meson_core::action::Action) -> Response {
    (StatusCode::CREATED, action_answer(a)).into_response()
}

/// A list response: the body plus its `Link` header.
pub fn paged(body: impl serde::Serialize, link: Option<HeaderValue>) -> Response {
    let mut out = axum::Json(body).into_response();
    if let Some(link) = link {
        out.headers_mut().insert(axum::http::header::LINK, link);
    }
    out
}

/// `meta.pagination` `p` of a list at `path` and its `Link` header: `next`
/// by cursor when the list gives one (else by number), `prev` and `last` by
/// number, each with the call's other parameters (`query`) as they were.
pub fn pagination(
    path: &str,
    query: &[(String, String)],
    p: meson_types::Pagination,
) -> (meson_types::Meta, Option<HeaderValue>) {
    let kept: Vec<(&str, &str)> = query
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "page" | "per_page" | "cursor"))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let per_page = p.per_page.to_string();
    let link = |at: (&str, &str), rel: &str| {
        let mut q = kept.clone();
        q.push(at);
        q.push(("per_page", &per_page));
        let q = serde_urlencoded::to_string(&q).unwrap_or_default();
        format!("<{path}?{q}>; rel=\"{rel}\"")
    };
    let mut links = Vec::new();
    if let Some(n) = p.previous_page {
        links.push(link(("page", &n.to_string()), "prev"));
    }
    match (&p.next_cursor, p.next_page) {
        (Some(c), _) => links.push(link(("cursor", c), "next")),
        (None, Some(n)) => links.push(link(("page", &n.to_string()), "next")),
        (None, None) => {}
    }
    links.push(link(
        ("page", &p.last_page.unwrap_or(1).to_string()),
        "last",
    ));
    (
        meson_types::Meta { pagination: p },
        HeaderValue::from_str(&links.join(", ")).ok(),
    )
}
