//! `Idempotency-Key` on POST: a retry with the same key and request replays the first response.

use super::{AppState, RequestLimits};
use crate::auth::Principal;
use crate::error::ApiError;
use axum::body::Body;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use meson_core::{Error, TenantId};
use meson_db::PgPool;
use meson_db::idempotency::{self as store, Claim, StoredResponse};
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicI64, Ordering};

pub static IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
pub static IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// Response headers replayed with the body; the others (the correlation id,
/// ...) belong to each answer.
const REPLAYED_HEADERS: [HeaderName; 3] = [header::CONTENT_TYPE, header::LOCATION, header::LINK];

/// Largest response stored for replay: POST answers are one resource and an
/// action, far smaller.
const MAX_STORED_RESPONSE: usize = 1024 * 1024;

/// Expired keys are pruned by the API itself, at most this often per process,
/// in the background: cheap enough to need no separate job.
const PRUNE_EVERY_SECS: i64 = 600;
const PRUNE_BATCH: i64 = 10_000;

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
    let key = match parse_key(parts.headers.get(&IDEMPOTENCY_KEY)) {
        Ok(key) => key,
        Err(e) => return e.into_response(),
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
    let hash = request_hash(&parts.method, &parts.uri, &bytes);
    let pool = &s.app.pool;
    match store::claim(pool, &principal.tenant, &key, &hash).await {
        Ok(Claim::Claimed) => {}
        Ok(Claim::Existing {
            request_hash,
            response,
        }) => return replay(&hash, &request_hash, response),
        Err(e) => return ApiError(e).into_response(),
    }
    maybe_prune(pool);
    let claim = ClaimGuard {
        pool: pool.clone(),
        tenant: principal.tenant,
        key,
        hash,
        armed: true,
    };
    let res = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    claim.finish(res).await
}

fn parse_key(value: Option<&HeaderValue>) -> Result<String, ApiError> {
    value
        .and_then(|v| v.to_str().ok())
        .filter(|k| (1..=255).contains(&k.len()) && k.bytes().all(|b| (0x20..=0x7e).contains(&b)))
        .map(str::to_owned)
        .ok_or_else(|| {
            ApiError(Error::invalid(
                "Idempotency-Key",
                "must be 1 to 255 printable ASCII characters",
            ))
        })
}

/// What makes two requests "the same": method, path with query, and body.
fn request_hash(method: &Method, uri: &Uri, body: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(method.as_str());
    h.update(b" ");
    h.update(uri.path_and_query().map_or(uri.path(), |pq| pq.as_str()));
    h.update(b"\n");
    h.update(body);
    h.finalize().into()
}

/// The answer to a request whose key is already claimed.
fn replay(hash: &[u8], claimed_hash: &[u8], stored: Option<StoredResponse>) -> Response {
    if hash != claimed_hash {
        return conflict("Idempotency-Key reused with a different request");
    }
    let Some(stored) = stored else {
        return conflict(
            "the original request with this Idempotency-Key is still being processed; retry later",
        );
    };
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

fn conflict(message: &str) -> Response {
    ApiError(Error::Conflict {
        message: message.into(),
    })
    .into_response()
}

/// A claimed key. Unless [`ClaimGuard::finish`] stores the answer, dropping it
/// releases the claim: a timeout or a client hang-up drops the request's
/// future and a panic unwinds through it, and the key must not then look
/// "in flight" for 24 hours.
struct ClaimGuard {
    pool: PgPool,
    tenant: TenantId,
    key: String,
    hash: [u8; 32],
    armed: bool,
}

impl ClaimGuard {
    /// Stores a 2xx/4xx answer for replay; server errors are not stored, so
    /// the client can retry them.
    async fn finish(mut self, res: Response) -> Response {
        if res.status().is_server_error() {
            self.release().await;
            return res;
        }
        let (parts, body) = res.into_parts();
        let body = match axum::body::to_bytes(body, MAX_STORED_RESPONSE).await {
            Ok(body) => body,
            // Dropping `self` releases the claim.
            Err(e) => {
                return ApiError(Error::internal_from(
                    "buffering a response for Idempotency-Key",
                    e,
                ))
                .into_response();
            }
        };
        let stored = StoredResponse {
            status: parts.status.as_u16(),
            body: body.to_vec(),
            headers: REPLAYED_HEADERS
                .iter()
                .filter_map(|name| {
                    let value = parts.headers.get(name)?.to_str().ok()?;
                    Some((name.as_str().to_owned(), value.to_owned()))
                })
                .collect(),
        };
        match store::complete(&self.pool, &self.tenant, &self.key, &self.hash, &stored).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(key = %self.key, "idempotency claim vanished before its response was stored")
            }
            // The request did its work: answer it, and leave the claim in
            // place so that a retry cannot do the work twice.
            Err(e) => {
                tracing::error!(error = %e, key = %self.key, "could not store an idempotent response")
            }
        }
        self.armed = false;
        Response::from_parts(parts, Body::from(body))
    }

    async fn release(&mut self) {
        self.armed = false;
        if let Err(e) = store::release(&self.pool, &self.tenant, &self.key, &self.hash).await {
            tracing::warn!(error = %e, key = %self.key, "could not release an idempotency key");
        }
    }
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut claim = ClaimGuard {
            pool: self.pool.clone(),
            tenant: self.tenant.clone(),
            key: std::mem::take(&mut self.key),
            hash: self.hash,
            armed: false,
        };
        // A spawned task starts outside the request's scope: give it the tenant's.
        let scope = meson_db::scope::Scope::Tenant(claim.tenant.clone());
        rt.spawn(meson_db::scope::run(
            scope,
            async move { claim.release().await },
        ));
    }
}

/// Starts a background prune of expired keys when the last one is old enough.
fn maybe_prune(pool: &PgPool) {
    static NEXT_PRUNE: AtomicI64 = AtomicI64::new(0);
    let now = chrono::Utc::now().timestamp();
    let next = NEXT_PRUNE.load(Ordering::Relaxed);
    // Only the request that moves the deadline prunes.
    if now < next
        || NEXT_PRUNE
            .compare_exchange(
                next,
                now + PRUNE_EVERY_SECS,
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_err()
    {
        return;
    }
    let pool = pool.clone();
    // Every tenant's expired keys.
    tokio::spawn(meson_db::scope::system(async move {
        match store::prune(&pool, PRUNE_BATCH).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(pruned = n, "pruned expired idempotency keys"),
            Err(e) => tracing::warn!(error = %e, "could not prune idempotency keys"),
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_hashes() {
        let ok = HeaderValue::from_static("a-key_1 with space");
        assert_eq!(parse_key(Some(&ok)).unwrap(), "a-key_1 with space");
        let long = HeaderValue::from_str(&"k".repeat(256)).unwrap();
        assert!(parse_key(Some(&long)).is_err());
        let tab = HeaderValue::from_static("a\tb");
        assert!(parse_key(Some(&tab)).is_err());
        assert!(parse_key(Some(&HeaderValue::from_static(""))).is_err());

        let uri: Uri = "/v1/vms?x=1".parse().unwrap();
        let h = request_hash(&Method::POST, &uri, b"{}");
        assert_eq!(h, request_hash(&Method::POST, &uri, b"{}"));
        assert_ne!(h, request_hash(&Method::POST, &uri, b"{ }"));
        assert_ne!(
            h,
            request_hash(&Method::POST, &"/v1/vms".parse().unwrap(), b"{}")
        );
    }
}
