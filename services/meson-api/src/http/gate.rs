//! The gate every `/v1` request passes: the route's operation and its rule
//! (`authz::rules()`), then [`crate::gate`] (token, rate limit, role), the
//! handler in the tenant's database scope, and the audit log.

use super::CorrelationId;
use crate::authz::{Access, Rule};
use crate::error::ApiError;
use crate::gate::{self, Admission, Audit, CallInfo};
use crate::state::{AppState, Operations};
use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use meson_core::Error;

/// Largest answer the audit reads an action or resource id from; larger
/// ones (none of the audited operations answer that much) are logged
/// without.
const MAX_AUDITED_BODY: usize = 256 * 1024;

/// What the gate middleware needs.
#[derive(Clone)]
pub struct GateState {
    pub state: AppState,
    pub operations: Operations,
}

pub async fn gate(State(g): State<GateState>, mut req: Request, next: Next) -> Response {
    // Unrouted requests reach the fallback (`not_found`) unguarded.
    let Some(template) = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned())
    else {
        return next.run(req).await;
    };
    // HEAD runs the GET handler: the same rule.
    let method = match req.method() {
        &Method::HEAD => Method::GET,
        m => m.clone(),
    };
    let Some(rule) = g.operations.rule(&method, &template) else {
        if g.operations.knows_path(&template) {
            // A method the route does not have: the fallback answers 405.
            return next.run(req).await;
        }
        // Fail closed: a route the table forgot is nobody's.
        tracing::error!(method = %req.method(), path = %template, "route without an authorization rule");
        return ApiError(Error::Forbidden {
            message: "this operation is not available".into(),
        })
        .into_response();
    };
    let Access::Role(_) = rule.access else {
        // Public, or authenticated by the operation itself.
        return next.run(req).await;
    };
    let path = req.uri().path().to_owned();
    let organization = match gate::organization(req.headers()) {
        Ok(o) => o,
        Err(e) => return ApiError(e).into_response(),
    };
    let call = CallInfo {
        organization,
        method: req.method().to_string(),
        resource: resource_of(&template, &path),
        path,
        correlation_id: req
            .extensions()
            .get::<CorrelationId>()
            .map(|c| c.0.clone())
            .unwrap_or_default(),
    };
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let token = gate::bearer(authorization).map(str::to_owned);
    match gate::admit(&g.state, rule, token.as_deref().map_err(|r| *r), call).await {
        Admission::Refused {
            error,
            decision,
            audit,
        } => {
            let unauthorized = matches!(error, Error::Unauthorized);
            let mut res = ApiError(error).into_response();
            if unauthorized {
                res.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, www_authenticate());
            }
            if let Some(a) = audit {
                a.record(&g.state, res.status().as_u16()).await;
            }
            if let Some(d) = decision {
                d.apply(res.headers_mut());
            }
            res
        }
        Admission::Admitted(admitted) => {
            // A credential handed out on a GET: never to another site's
            // page (the edge refuses their state changes before routing).
            let first_party = req
                .extensions()
                .get::<meson_edge::Provenance>()
                .is_none_or(meson_edge::Provenance::is_first_party);
            if rule.first_party_only && !first_party {
                let mut res = ApiError(Error::Forbidden {
                    message: "this hands out a credential: not to pages of other origins".into(),
                })
                .into_response();
                if let Some(a) = admitted.audit {
                    a.record(&g.state, res.status().as_u16()).await;
                }
                admitted.decision.apply(res.headers_mut());
                return res;
            }
            req.extensions_mut().insert(admitted.principal.clone());
            // For the Idempotency-Key layer: whether the answer may be kept.
            req.extensions_mut().insert(rule);
            // A create answers 201 and may write its entry itself.
            let (res, written) = run_held(&admitted, rule, req, next).await;
            let mut res = match admitted.audit {
                Some(_) if written => {
                    if res.status() != axum::http::StatusCode::CREATED {
                        tracing::error!(status = %res.status(),
                            "the call's audit entry was written as 201, but it answered otherwise");
                    }
                    res
                }
                Some(mut audit) => {
                    let res = read_ids(&mut audit, res).await;
                    audit.record(&g.state, res.status().as_u16()).await;
                    res
                }
                None => res,
            };
            admitted.decision.apply(res.headers_mut());
            res
        }
    }
}

/// Largest body kept to run a request again.
const MAX_HELD_BODY: u64 = 1024 * 1024;

/// Runs the admitted request; when it met the database unreachable before
/// it had a live connection (so nothing it asked can have happened), or
/// at any point of a `GET` or `HEAD` (which change nothing) or of a
/// [`Rule::replayable`] operation (whose later attempt finds what an
/// earlier one wrote: each attempt makes the same ids, see
/// `meson_core::id::attempt`, and keeps the request's `Idempotency-Key`
/// claim), waits for the database and runs it again, within the breaker's
/// hold in all: a failover or a planned switchover is then a delay, not a
/// `503`. Requests whose body is not small and of known length, and
/// upgrades, run once.
async fn run_held(
    admitted: &gate::Admitted,
    rule: &'static Rule,
    req: Request,
    next: Next,
) -> (Response, bool) {
    let hold = admitted.breaker().hold();
    let length = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let bodiless = length.is_none()
        && !req.headers().contains_key(header::TRANSFER_ENCODING)
        && matches!(*req.method(), Method::GET | Method::HEAD | Method::DELETE);
    let keepable = (bodiless || length.is_some_and(|n| n <= MAX_HELD_BODY))
        && !req.headers().contains_key(header::UPGRADE);
    if hold.is_zero() || !keepable {
        return admitted.run_offering(201, next.run(req)).await;
    }
    let started = tokio::time::Instant::now();
    let again = rule.replayable || matches!(*req.method(), Method::GET | Method::HEAD);
    let (mut parts, body) = req.into_parts();
    parts
        .extensions
        .insert(super::idempotency::HeldClaim::default());
    let ids = meson_core::id::IdLog::default();
    let bytes = match axum::body::to_bytes(body, MAX_HELD_BODY as usize).await {
        Ok(bytes) => bytes,
        // The client's body broke off: the handler's own read says so.
        Err(e) => {
            return (
                ApiError(Error::invalid(
                    "(body)",
                    format!("the body could not be read: {e}"),
                ))
                .into_response(),
                false,
            );
        }
    };
    for attempt in 0.. {
        let req = Request::from_parts(parts.clone(), Body::from(bytes.clone()));
        let (res, written, connected) = admitted
            .run_offering_connecting(
                201,
                meson_core::id::attempt(&ids, attempt, next.clone().run(req)),
            )
            .await;
        let outage = res
            .extensions()
            .get::<crate::error::OutageAnswer>()
            .is_some();
        if !outage || (connected && !again) || written {
            return (res, written);
        }
        let left = hold.saturating_sub(started.elapsed());
        if left.is_zero() || !admitted.breaker().wait_closed(left).await {
            return (res, written);
        }
        tracing::info!("the database answers again: running the request once more");
    }
    unreachable!("attempts go on until one returns")
}

/// Completes an audit entry from a JSON answer: the action it started and,
/// unless the path named the resource, the resource it created (the
/// envelope's `{"vm": {"id": ..}, "action": ..}`).
async fn read_ids(audit: &mut Audit, res: Response) -> Response {
    let json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !res.status().is_success() || !json {
        return res;
    }
    let (parts, body) = res.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_AUDITED_BODY).await {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::error!(error = %e, "reading an answer for the audit log");
            return ApiError(Error::internal("reading the answer")).into_response();
        }
    };
    if let Ok(serde_json::Value::Object(map)) = serde_json::from_slice(&bytes) {
        let e = &mut audit.entry;
        e.action_id = map
            .get("action")
            .and_then(|a| a.get("id"))
            .and_then(|v| v.as_str())
            .and_then(|s| s.parse().ok());
        if e.method == "POST" && e.resource_id.is_none() || e.resource_type.is_none() {
            let created = map.iter().find_map(|(key, v)| {
                let id = v.get("id")?.as_str()?;
                (key != "action").then(|| (key.clone(), id.to_owned()))
            });
            if let Some((kind, id)) = created {
                e.resource_type = Some(kind);
                e.resource_id = Some(id);
            }
        }
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// The resource a path names: its last id parameter, typed by the segment
/// before it (`/v1/clusters/{id}/pools/{pool_id}` → `node_pool`, the pool's
/// id; a `{command}` names no resource).
fn resource_of(template: &str, path: &str) -> Option<(String, String)> {
    let t: Vec<&str> = template.split('/').collect();
    let p: Vec<&str> = path.split('/').collect();
    if t.len() != p.len() {
        return None;
    }
    let i = t
        .iter()
        .rposition(|s| s.starts_with('{') && *s != "{command}")?;
    Some((kind_of(t.get(i.checked_sub(1)?)?), p[i].to_owned()))
}

/// The kind of resource a collection of the API holds: its name, singular
/// (`ssh-keys` → `ssh_key`), as gRPC's calls name it; a cluster's `pools`
/// hold `node_pool`s.
pub fn kind_of(collection: &str) -> String {
    match collection {
        "pools" => "node_pool".to_owned(),
        plural => plural.strip_suffix('s').unwrap_or(plural).replace('-', "_"),
    }
}

/// `WWW-Authenticate` for 401 answers (RFC 6750), with nothing about why.
pub fn www_authenticate() -> HeaderValue {
    HeaderValue::from_static("Bearer realm=\"meson\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_has_a_rule_and_every_rule_a_route() {
        let doc = crate::http::openapi();
        if let Err(missing) = Operations::from_openapi(&doc) {
            panic!("routes without a rule in authz::rules(): {missing:?}");
        }
        let ids = crate::http::operation_ids();
        for rule in crate::authz::rules() {
            assert!(
                ids.contains(rule.operation),
                "a rule for no route: {}",
                rule.operation
            );
        }
    }

    #[test]
    fn the_resource_is_the_last_path_parameter() {
        assert_eq!(resource_of("/v1/vms", "/v1/vms"), None);
        assert_eq!(
            resource_of("/v1/vms/{id}", "/v1/vms/abc"),
            Some(("vm".into(), "abc".into()))
        );
        assert_eq!(
            resource_of(
                "/v1/vms/{id}/actions/{command}",
                "/v1/vms/abc/actions/poweroff"
            ),
            Some(("vm".into(), "abc".into()))
        );
        assert_eq!(
            resource_of(
                "/v1/clusters/{id}/nodes/{node}/actions/replace",
                "/v1/clusters/c/nodes/n/actions/replace"
            ),
            Some(("node".into(), "n".into()))
        );
        assert_eq!(
            resource_of(
                "/v1/clusters/{id}/pools/{pool_id}",
                "/v1/clusters/c/pools/p"
            ),
            Some(("node_pool".into(), "p".into()))
        );
    }
}
