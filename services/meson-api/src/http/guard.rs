//! The guard every `/v1` request passes, in this order: the operation's
//! rule (`authz::RULES`), the bearer token, the tenant's rate limit, the
//! role, then the handler in the tenant's database scope, and the audit log.

use super::{AppState, CorrelationId};
use crate::auth::Principal;
use crate::authz::{self, Access, Rule};
use crate::error::ApiError;
use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use meson_core::Error;
use meson_core::audit::AuditEntry;
use meson_db::scope::{self, Scope};
use std::collections::HashMap;
use std::sync::Arc;

/// Largest answer the audit reads an action or resource id from; larger
/// ones (none of the audited operations answer that much) are logged
/// without.
const MAX_AUDITED_BODY: usize = 256 * 1024;

/// Each route's rule, by method and path template.
#[derive(Clone, Default)]
pub struct Operations(Arc<HashMap<(Method, String), &'static Rule>>);

impl Operations {
    /// Maps every operation of `doc` to its rule; `Err` names operations
    /// the table lacks.
    pub fn from_openapi(doc: &utoipa::openapi::OpenApi) -> Result<Operations, Vec<String>> {
        let mut map = HashMap::new();
        let mut missing = Vec::new();
        for (path, item) in &doc.paths.paths {
            let ops = [
                (Method::GET, &item.get),
                (Method::POST, &item.post),
                (Method::PUT, &item.put),
                (Method::PATCH, &item.patch),
                (Method::DELETE, &item.delete),
            ];
            for (method, op) in ops {
                let Some(op) = op else { continue };
                let id = op.operation_id.clone().unwrap_or_default();
                match authz::rule_of(&id) {
                    Some(rule) => {
                        map.insert((method, path.clone()), rule);
                    }
                    None => missing.push(format!("{method} {path} ({id})")),
                }
            }
        }
        if missing.is_empty() {
            Ok(Operations(Arc::new(map)))
        } else {
            Err(missing)
        }
    }

    fn rule(&self, method: &Method, path: &str) -> Option<&'static Rule> {
        self.0.get(&(method.clone(), path.to_owned())).copied()
    }

    /// True when some method of `path` has a rule (another method of it
    /// answers `405`).
    fn knows_path(&self, path: &str) -> bool {
        self.0.keys().any(|(_, p)| p == path)
    }
}

/// What the guard middleware needs.
#[derive(Clone)]
pub struct GuardState {
    pub state: AppState,
    pub operations: Operations,
}

pub async fn guard(State(g): State<GuardState>, mut req: Request, next: Next) -> Response {
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
    let principal = match bearer(&req) {
        Some(token) => g.state.auth.verify(token).await,
        None => Err(Error::Unauthorized),
    };
    let principal = match principal {
        Ok(p) => p,
        Err(e) => {
            let mut res = ApiError(e).into_response();
            res.headers_mut()
                .insert(header::WWW_AUTHENTICATE, www_authenticate());
            return res;
        }
    };
    let span = tracing::Span::current();
    span.record("operation", rule.operation);
    span.record("tenant", principal.tenant.as_str());
    span.record("subject", principal.subject.as_str());
    let decision = g.state.limits.check(&principal.tenant, rule.budget);
    let mut res = if let Some(retry_after) = decision.retry_after {
        tracing::info!(tenant = %principal.tenant, operation = rule.operation, "rate limited");
        ApiError(Error::RateLimited { retry_after }).into_response()
    } else {
        let audit = rule
            .audit
            .then(|| Audit::start(&req, &template, &principal, rule));
        let res = match authz::authorize(&principal, rule) {
            Err(e) => ApiError(e).into_response(),
            Ok(()) => {
                let tenant = Scope::Tenant(principal.tenant.clone());
                req.extensions_mut().insert(principal);
                scope::run(tenant, next.run(req)).await
            }
        };
        match audit {
            Some(a) => a.finish(&g.state, res).await,
            None => res,
        }
    };
    decision.apply(res.headers_mut());
    res
}

/// The bearer token of a request, if it has one.
fn bearer(req: &Request) -> Option<&str> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
        .filter(|t| !t.is_empty())
}

/// An audit entry being written: what is known before the handler runs.
struct Audit {
    entry: AuditEntry,
}

impl Audit {
    fn start(req: &Request, template: &str, p: &Principal, rule: &Rule) -> Audit {
        let path = req.uri().path().to_owned();
        let (resource_type, resource_id) = resource_of(template, &path).unzip();
        Audit {
            entry: AuditEntry {
                id: 0,
                at: chrono::Utc::now(),
                tenant: p.tenant.to_string(),
                subject: p.subject.clone(),
                role: format!("{:?}", p.role).to_lowercase(),
                operation: rule.operation.to_owned(),
                method: req.method().to_string(),
                path,
                resource_type,
                resource_id,
                action_id: None,
                status: 0,
                correlation_id: req
                    .extensions()
                    .get::<CorrelationId>()
                    .map(|c| c.0.clone())
                    .unwrap_or_default(),
            },
        }
    }

    /// Completes the entry from the answer (its status; the action started
    /// and the resource created, from a JSON body) and appends it in the
    /// caller's tenant scope. A failed append is logged: the change it
    /// records has happened either way.
    async fn finish(mut self, state: &AppState, res: Response) -> Response {
        self.entry.status = res.status().as_u16();
        let json = res
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
        let res = if res.status().is_success() && json {
            let (parts, body) = res.into_parts();
            match axum::body::to_bytes(body, MAX_AUDITED_BODY).await {
                Ok(bytes) => {
                    self.read_ids(&bytes);
                    Response::from_parts(parts, Body::from(bytes))
                }
                Err(e) => {
                    tracing::error!(error = %e, "reading an answer for the audit log");
                    ApiError(Error::internal("reading the answer")).into_response()
                }
            }
        } else {
            res
        };
        let tenant = Scope::Tenant(meson_core::TenantId(self.entry.tenant.clone()));
        if let Err(e) = scope::run(tenant, state.app.audit_record(&self.entry)).await {
            tracing::error!(error = %e, source = ?std::error::Error::source(&e),
                entry = ?self.entry, "appending to the audit log failed");
        }
        res
    }

    /// Takes `action.id` and, unless the path named the resource, the id of
    /// the envelope's resource (`{"vm": {"id": ..}, "action": ..}`).
    fn read_ids(&mut self, body: &[u8]) {
        let Ok(serde_json::Value::Object(map)) = serde_json::from_slice(body) else {
            return;
        };
        self.entry.action_id = map
            .get("action")
            .and_then(|a| a.get("id"))
            .and_then(|v| v.as_str())
            .and_then(|s| s.parse().ok());
        if self.entry.method == "POST" && self.entry.resource_id.is_none()
            || self.entry.resource_type.is_none()
        {
            let created = map.iter().find_map(|(key, v)| {
                let id = v.get("id")?.as_str()?;
                (key != "action").then(|| (key.clone(), id.to_owned()))
            });
            if let Some((kind, id)) = created {
                self.entry.resource_type = Some(kind);
                self.entry.resource_id = Some(id);
            }
        }
    }
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
    let kind = match *t.get(i.checked_sub(1)?)? {
        "vms" => "vm",
        "volumes" => "volume",
        "networks" => "network",
        "clusters" => "cluster",
        "pools" => "node_pool",
        "nodes" => "node",
        "targets" => "target",
        "tenants" => "tenant",
        "actions" => "action",
        other => other,
    };
    Some((kind.to_owned(), p[i].to_owned()))
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
            panic!("routes without a rule in authz::RULES: {missing:?}");
        }
        let ids: std::collections::HashSet<String> = doc
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
            .collect();
        for rule in authz::RULES {
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
