//! The `idempotency-key` metadata of gRPC calls whose REST route is not a
//! GET (those that change something, and quotes), by
//! the app layer's rules ([`crate::app::idempotency`]): the same key and the
//! same request message answer what the first call answered (with
//! `idempotent-replayed: true`), another message with the key is refused with
//! `conflict` (`FAILED_PRECONDITION`, as every `conflict`), and so is a
//! retry while the first call still runs. A server error is not kept: its retry runs again.

use super::status::{http_status_of, status_of};
use crate::app::idempotency::{self, Begun, Claim, IdempotencyKey, StoredResponse};
use crate::auth::Principal;
use crate::state::AppState;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use bytes_of::collect;
use meson_core::Error;
use tonic::body::Body;

pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// The metadata of an answer kept for replay: its content type and its
/// status (from the headers of an error answered at once, else from the
/// trailers).
const KEPT: [&str; 4] = [
    "content-type",
    "grpc-status",
    "grpc-message",
    "grpc-status-details-bin",
];

/// Largest answer kept for replay: one resource and an action, far smaller.
const MAX_STORED_RESPONSE: usize = 1024 * 1024;

/// The metadata of `m` kept for replay.
fn kept(m: &HeaderMap) -> Vec<(String, String)> {
    KEPT.iter()
        .filter_map(|name| {
            let value = m.get(*name)?.to_str().ok()?;
            Some((name.to_string(), value.to_owned()))
        })
        .collect()
}

/// Whether `req` names a key.
pub fn has_key(req: &Request<Body>) -> bool {
    req.headers().contains_key(IDEMPOTENCY_KEY)
}

/// Runs the call `req` (which names a key) once per key and request message;
/// `call` runs it. The answer of a call handing out a `credential` is kept
/// as the refusal a retry then gets, never as itself.
pub async fn call<F, Fut, E>(
    state: &AppState,
    principal: &Principal,
    credential: bool,
    req: Request<Body>,
    call: F,
) -> Result<Response<Body>, E>
where
    F: FnOnce(Request<Body>) -> Fut,
    Fut: Future<Output = Result<Response<Body>, E>>,
{
    let raw = req
        .headers()
        .get(IDEMPOTENCY_KEY)
        .map(HeaderValue::as_bytes);
    let key = match IdempotencyKey::parse(raw.unwrap_or_default()) {
        Ok(key) => key,
        Err(e) => return Ok(status_of(&e).into_http()),
    };
    let (parts, body) = req.into_parts();
    // The message as framed on the wire, at most the largest message
    // accepted and its 5-byte frame header.
    let max = state.config.limits.body_bytes;
    let Ok((message, _)) = collect(body, max + 5).await else {
        return Ok(status_of(&Error::PayloadTooLarge { limit: max }).into_http());
    };
    let hash = idempotency::fingerprint("GRPC", parts.uri.path(), &message);
    let claim = match state.app.idempotency_begin(principal, key, hash).await {
        Ok(Begun::Run(claim)) => claim,
        Ok(Begun::Replay(stored)) => return Ok(replay(stored)),
        Err(e) => return Ok(status_of(&e).into_http()),
    };
    let res = call(Request::from_parts(parts, bytes_of::full(message))).await?;
    Ok(finish(claim, res, credential).await)
}

/// The kept answer of the first call with the key: its message, then its
/// status in the trailers.
fn replay(stored: StoredResponse) -> Response<Body> {
    let mut headers = HeaderMap::new();
    let mut trailers = HeaderMap::new();
    for (name, value) in stored.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            if name.as_str().starts_with("grpc-") {
                trailers.insert(name, value);
            } else {
                headers.insert(name, value);
            }
        }
    }
    headers.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    let mut res = Response::new(bytes_of::with_trailers(stored.body.into(), trailers));
    *res.headers_mut() = headers;
    res
}

/// Keeps an answer for replay, unless it is a server error: then the key is
/// given up, and a retry runs again.
async fn finish(claim: Claim, res: Response<Body>, credential: bool) -> Response<Body> {
    let (parts, body) = res.into_parts();
    let Ok((message, trailers)) = collect(body, MAX_STORED_RESPONSE).await else {
        // Dropping the claim releases it.
        return status_of(&Error::internal("buffering a response for idempotency-key")).into_http();
    };
    let status = |m: &HeaderMap| {
        m.get("grpc-status")
            .and_then(|v| v.to_str().ok()?.parse().ok())
    };
    let code = status(&parts.headers)
        .or_else(|| trailers.as_ref().and_then(status))
        .map_or(tonic::Code::Unknown, tonic::Code::from_i32);
    if http_status_of(code) >= 500 {
        claim.release().await;
    } else if credential && code == tonic::Code::Ok {
        let stand_in: Response<Body> = status_of(&idempotency::credential_not_kept()).into_http();
        claim
            .complete(&StoredResponse {
                status: 200,
                body: Vec::new(),
                headers: kept(stand_in.headers()),
            })
            .await;
    } else {
        let mut headers = kept(&parts.headers);
        headers.extend(trailers.as_ref().map(kept).unwrap_or_default());
        claim
            .complete(&StoredResponse {
                status: 200,
                body: message.to_vec(),
                headers,
            })
            .await;
    }
    let body = match trailers {
        Some(trailers) => bytes_of::with_trailers(message, trailers),
        None => bytes_of::full(message),
    };
    Response::from_parts(parts, body)
}

/// gRPC bodies as bytes and trailers, and back.
mod bytes_of {
    use axum::body::Bytes;
    use axum::http::HeaderMap;
    use http_body::Frame;
    use http_body_util::{BodyExt, Full, Limited, StreamBody};
    use std::convert::Infallible;
    use tonic::body::Body;

    /// The data of `body` (at most `max` bytes) and its trailers.
    pub async fn collect(body: Body, max: usize) -> Result<(Bytes, Option<HeaderMap>), ()> {
        let collected = Limited::new(body, max).collect().await.map_err(|_| ())?;
        let trailers = collected.trailers().cloned();
        Ok((collected.to_bytes(), trailers))
    }

    pub fn full(data: Bytes) -> Body {
        Body::new(Full::new(data))
    }

    /// `data`, then `trailers`.
    pub fn with_trailers(data: Bytes, trailers: HeaderMap) -> Body {
        let mut frames: Vec<Result<Frame<Bytes>, Infallible>> = Vec::with_capacity(2);
        if !data.is_empty() {
            frames.push(Ok(Frame::data(data)));
        }
        frames.push(Ok(Frame::trailers(trailers)));
        Body::new(StreamBody::new(futures::stream::iter(frames)))
    }
}
