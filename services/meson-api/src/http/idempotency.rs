//! `Idempotency-Key` on POST: a retry with the same key and request replays
//! the first response. The rules are the app layer's
//! ([`crate::app::idempotency`]); this is REST's request and answer.

use super::{AppState, RequestLimits};
use crate::app::idempotency::{self, Begun, Claim, IdempotencyKey, StoredResponse};
use crate::auth::Principal;
use crate::error::ApiError;
use axum::body::Body;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use meson_core::Error;
use std::sync::{Arc, Mutex};

pub static IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
pub static IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// Response headers replayed with the body; the others (the correlation id,
/// ...) belong to each answer.
const REPLAYED_HEADERS: [HeaderName; 3] = [header::CONTENT_TYPE, header::LOCATION, header::LINK];

/// Largest response stored for replay: POST answers are one resource and an
/// action, far smaller.
const MAX_STORED_RESPONSE: usize = 1024 * 1024;

/// A request's claim of its key, kept across the attempts the gate runs it
/// in (`super::gate`): a later attempt goes on with the claim of the
/// first. Dropped with the request, a claim still held is released.
#[derive(Clone, Default)]
pub struct HeldClaim(Arc<Mutex<Option<Claim>>>);

impl HeldClaim {
    fn take(&self) -> Option<Claim> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn keep(&self, claim: Claim) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(claim);
    }
}

/// The middleware: POSTs with an `Idempotency-Key` claim the key for their
/// tenant, run once, and store the answer; retries get the stored answer.
pub async fn idempotency(State(s): State<AppState>, req: Request, next: Next) -> Response {
    if req.method() != Method::POST || !req.headers().contains_key(&IDEMPOTENCY_KEY) {
        return next.run(req).await;
    }
    let (mut parts, body) = req.into_parts();
    // Keys are scoped per tenant; without a valid token the handler answers 401.
    let Ok(principal) = Principal::from_request_parts(&mut parts, &s).await else {
        return next.run(Request::from_parts(parts, body)).await;
    };
    let raw = parts
        .headers
        .get(&IDEMPOTENCY_KEY)
        .map(HeaderValue::as_bytes);
    let key = match IdempotencyKey::parse(raw.unwrap_or_default()) {
        Ok(key) => key,
        Err(e) => return ApiError(e).into_response(),
    };
    // A broken connection cannot read an answer anyway, so the only failure a
    // client can see is an oversized body.
    let max = parts
        .extensions
        .get::<RequestLimits>()
        .copied()
        .unwrap_or_default()
        .body_bytes;
    let Ok(bytes) = axum::body::to_bytes(body, max).await else {
        return ApiError(Error::invalid(
            "(body)",
            format!("the body exceeds {max} bytes"),
        ))
        .into_response();
    };
    let target = parts
        .uri
        .path_and_query()
        .map_or(parts.uri.path(), |pq| pq.as_str());
    let hash = idempotency::fingerprint(parts.method.as_str(), target, &bytes);
    let held = parts.extensions.get::<HeldClaim>().cloned();
    let claim = match held.as_ref().and_then(HeldClaim::take) {
        // The request's later attempt: its key is claimed already.
        Some(claim) => claim,
        None => match s.app.idempotency_begin(&principal, key, hash).await {
            Ok(Begun::Run(claim)) => claim,
            Ok(Begun::Replay(stored)) => return replay(stored),
            Err(e) => return ApiError(e).into_response(),
        },
    };
    let credential = parts
        .extensions
        .get::<&'static crate::authz::Rule>()
        .is_some_and(|r| r.credential);
    let res = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    finish(claim, res, credential, held).await
}

/// The stored answer of the first request with the key.
fn replay(stored: StoredResponse) -> Response {
    let Ok(status) = StatusCode::from_u16(stored.status) else {
        return ApiError(Error::internal(format!(
            "stored idempotent response has status {}",
            stored.status
        )))
        .into_response();
    };
    let mut res = Response::new(Body::from(stored.body));
    *res.status_mut() = status;
    for (name, value) in stored.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            res.headers_mut().insert(name, value);
        }
    }
    res.headers_mut().insert(
        IDEMPOTENT_REPLAYED.clone(),
        HeaderValue::from_static("true"),
    );
    res
}

/// Stores a 2xx/4xx answer for replay; server errors are not stored, so the
/// client can retry them. An answer holding a `credential` is kept as the
/// refusal a retry then gets, never as itself. A request the gate may run
/// again (the database went away) keeps its claim for that (`held`).
async fn finish(
    claim: Claim,
    res: Response,
    credential: bool,
    held: Option<HeldClaim>,
) -> Response {
    if res.status().is_server_error() {
        let outage = res
            .extensions()
            .get::<crate::error::OutageAnswer>()
            .is_some();
        match held {
            Some(held) if outage => held.keep(claim),
            _ => claim.release().await,
        }
        return res;
    }
    if credential && res.status().is_success() {
        let stand_in = ApiError(idempotency::credential_not_kept()).into_response();
        let (parts, body) = stand_in.into_parts();
        let body = axum::body::to_bytes(body, MAX_STORED_RESPONSE)
            .await
            .unwrap_or_default();
        claim.complete(&stored(&parts, &body)).await;
        return res;
    }
    let (parts, body) = res.into_parts();
    let body = match axum::body::to_bytes(body, MAX_STORED_RESPONSE).await {
        Ok(body) => body,
        // Dropping the claim releases it.
        Err(e) => {
            return ApiError(Error::internal_from(
                "buffering a response for Idempotency-Key",
                e,
            ))
            .into_response();
        }
    };
    claim.complete(&stored(&parts, &body)).await;
    Response::from_parts(parts, Body::from(body))
}

/// An answer as kept for replay.
fn stored(parts: &axum::http::response::Parts, body: &[u8]) -> StoredResponse {
    StoredResponse {
        status: parts.status.as_u16(),
        body: body.to_vec(),
        headers: REPLAYED_HEADERS
            .iter()
            .filter_map(|name| {
                let value = parts.headers.get(name)?.to_str().ok()?;
                Some((name.as_str().to_owned(), value.to_owned()))
            })
            .collect(),
    }
}
