//! The gate every gRPC call passes: its method's operation (the
//! `(meson.v1.operation)` option each method carries in `proto/meson/v1/`,
//! read into [`OPERATIONS`] at build time: the same operations as the REST
//! routes), then [`crate::gate`] (token from
//! the `authorization` metadata, rate limit, role), the handler in the
//! tenant's database scope, and the audit log. Answers carry
//! `x-correlation-id` and the `ratelimit-*` metadata.

use super::status::{http_status_of, status_of};
use super::{AuditSlot, idempotency};
use crate::authz::{self, Access};
use crate::gate::{self, Admission, CallInfo};
use crate::state::AppState;
use axum::http::{HeaderValue, Request, Response};
use futures::future::BoxFuture;
use meson_core::Error;
use std::collections::HashSet;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::body::Body;
use tracing::Instrument;

pub use meson_proto::OPERATIONS;

/// The API operations gRPC does not carry, each with why: a new resource's
/// operations are carried by a method (its `(meson.v1.operation)` option) or named here (a test holds every operation of
/// the OpenAPI document to one of the two).
#[cfg(test)]
const REST_ONLY: &[(&str, &str)] = &[
    ("index", "the REST API's own front page"),
    ("healthz", "process health; gRPC serves grpc.health.v1"),
    ("readyz", "process readiness; gRPC serves grpc.health.v1"),
    ("metrics", "Prometheus scrapes HTTP"),
    ("node_phone_home", "called by a node's cloud-init with curl"),
    (
        "console_connect",
        "a WebSocket: gRPC's RequestConsole hands out its URL",
    ),
    (
        "kaas_create",
        "the /v1/kaas alias of cluster_create, for KaaS clients",
    ),
    ("audit_list", "an operators' route; mesonctl reaches it"),
    ("target_list", "an operators' route; mesonctl reaches it"),
    ("target_get", "an operators' route; mesonctl reaches it"),
    ("target_create", "an operators' route; mesonctl reaches it"),
    ("target_update", "an operators' route; mesonctl reaches it"),
    ("target_drain", "an operators' route; mesonctl reaches it"),
    ("target_undrain", "an operators' route; mesonctl reaches it"),
    ("orphan_list", "an operators' route; mesonctl reaches it"),
    ("orphan_get", "an operators' route; mesonctl reaches it"),
    ("orphan_adopt", "an operators' route; mesonctl reaches it"),
    ("orphan_delete", "an operators' route; mesonctl reaches it"),
    (
        "cluster_autoscaler_credentials",
        "the autoscaler's own gRPC (externalgrpc) authenticates with them",
    ),
    (
        "cluster_pool_delete_nodes",
        "the autoscaler deletes nodes over externalgrpc; meson.v1 lacks it yet",
    ),
];

/// Services anyone may call: discovery and health.
const PUBLIC_SERVICES: &[&str] = &[
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1.ServerReflection/",
    "/grpc.reflection.v1alpha.ServerReflection/",
];

fn operation_of(path: &str) -> Option<&'static str> {
    OPERATIONS
        .iter()
        .find(|(m, _)| *m == path)
        .map(|(_, op)| *op)
}

/// Wraps the gRPC server's routes in the gate.
#[derive(Clone)]
pub struct GrpcGateLayer {
    state: AppState,
    changes: Changes,
}

impl GrpcGateLayer {
    pub fn new(state: AppState) -> Self {
        GrpcGateLayer {
            state,
            changes: Changes(Arc::new(crate::state::operations().changing())),
        }
    }
}

/// The operations that change something (those REST serves with another
/// method than GET): their calls take an `idempotency-key`.
#[derive(Clone)]
struct Changes(Arc<HashSet<&'static str>>);

impl<S> tower::Layer<S> for GrpcGateLayer {
    type Service = GrpcGate<S>;

    fn layer(&self, inner: S) -> GrpcGate<S> {
        GrpcGate {
            inner,
            state: self.state.clone(),
            changes: self.changes.clone(),
        }
    }
}

#[derive(Clone)]
pub struct GrpcGate<S> {
    inner: S,
    state: AppState,
    changes: Changes,
}

impl<S> tower::Service<Request<Body>> for GrpcGate<S>
where
    S: tower::Service<Request<Body>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response<Body>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        // The clone that was polled ready serves this call.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let state = self.state.clone();
        let changes = self.changes.clone();
        let correlation = correlation_id(&req);
        let span = tracing::info_span!(
            "grpc",
            method = %req.uri().path(),
            correlation_id = %correlation,
            operation = tracing::field::Empty,
            tenant = tracing::field::Empty,
            subject = tracing::field::Empty,
        );
        crate::trace_context::continue_trace(&span, req.headers());
        Box::pin(
            async move {
                let start = std::time::Instant::now();
                let method = path_label(req.uri().path());
                let mut res = gated(inner, state, changes, req, correlation.clone()).await?;
                if let Ok(v) = HeaderValue::from_str(&correlation) {
                    res.headers_mut().insert("x-correlation-id", v);
                }
                let code = grpc_status(&res);
                tracing::info!(
                    grpc_status = code,
                    ms = start.elapsed().as_millis() as u64,
                    "call"
                );
                metrics::counter!("meson_grpc_requests_total",
                    "method" => method.clone(), "code" => format!("{:?}", tonic::Code::from_i32(code)))
                .increment(1);
                metrics::histogram!("meson_grpc_request_duration_seconds", "method" => method)
                    .record(start.elapsed().as_secs_f64());
                Ok(res)
            }
            .instrument(span),
        )
    }
}

async fn gated<S>(
    mut inner: S,
    state: AppState,
    changes: Changes,
    mut req: Request<Body>,
    correlation_id: String,
) -> Result<Response<Body>, S::Error>
where
    S: tower::Service<Request<Body>, Response = Response<Body>>,
{
    let path = req.uri().path().to_owned();
    if PUBLIC_SERVICES.iter().any(|p| path.starts_with(p)) {
        return inner.call(req).await;
    }
    let Some(operation) = operation_of(&path) else {
        if path.starts_with("/meson.v1.") {
            // Fail closed: a method the table forgot is nobody's. (Unknown
            // services answer `Unimplemented` from the router.)
            tracing::error!(%path, "gRPC method without an operation");
            return Ok(status_of(&Error::Forbidden {
                message: "this operation is not available".into(),
            })
            .into_http());
        }
        return inner.call(req).await;
    };
    let Some(rule) = authz::rule_of(operation).filter(|r| matches!(r.access, Access::Role(_)))
    else {
        tracing::error!(%path, operation, "gRPC method without a rule");
        return Ok(status_of(&Error::Forbidden {
            message: "this operation is not available".into(),
        })
        .into_http());
    };
    let authorization = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    let token = gate::bearer(authorization).map(str::to_owned);
    let organization = match gate::organization(req.headers()) {
        Ok(o) => o,
        Err(e) => return Ok(status_of(&e).into_http()),
    };
    let call = CallInfo {
        organization,
        method: "GRPC".to_owned(),
        path,
        resource: None,
        correlation_id,
    };
    match gate::admit(&state, rule, token.as_deref().map_err(|r| *r), call).await {
        Admission::Refused {
            error,
            decision,
            audit,
        } => {
            let status = status_of(&error);
            if let Some(a) = audit {
                a.record(&state, http_status_of(status.code())).await;
            }
            let mut res = status.into_http();
            if let Some(d) = decision {
                d.apply(res.headers_mut());
            }
            Ok(res)
        }
        Admission::Admitted(admitted) => {
            let slot = AuditSlot::default();
            req.extensions_mut().insert(admitted.principal.clone());
            req.extensions_mut().insert(slot.clone());
            let idempotent = changes.0.contains(operation) && idempotency::has_key(&req);
            let principal = admitted.principal.clone();
            // A call that succeeds answers OK (200 in the log); a create
            // may write its entry itself.
            let ok = http_status_of(tonic::Code::Ok);
            let (res, written) = if idempotent {
                let call = idempotency::call(&state, &principal, rule.credential, req, |req| {
                    inner.call(req)
                });
                admitted.run_offering(ok, call).await
            } else {
                admitted.run_offering(ok, inner.call(req)).await
            };
            let mut res = res?;
            if let Some(mut audit) = admitted.audit.filter(|_| !written) {
                let note = slot.take();
                if let Some((kind, id)) = note.resource {
                    audit.entry.resource_type = Some(kind);
                    audit.entry.resource_id = Some(id);
                }
                audit.entry.action_id = note.action;
                let code = tonic::Code::from_i32(grpc_status(&res));
                audit.record(&state, http_status_of(code)).await;
            }
            admitted.decision.apply(res.headers_mut());
            Ok(res)
        }
    }
}

/// A method's metrics label: known methods by name, anything else as one
/// label (so random paths make no new series).
fn path_label(path: &str) -> String {
    let known = OPERATIONS.iter().any(|(m, _)| *m == path)
        || PUBLIC_SERVICES.iter().any(|p| path.starts_with(p));
    if known {
        path.to_owned()
    } else {
        "unknown".to_owned()
    }
}

/// The answer's `grpc-status` when it is in the headers (an error answered
/// at once); otherwise the call is answering, and succeeded so far.
fn grpc_status(res: &Response<Body>) -> i32 {
    res.headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The caller's `x-correlation-id` when sane, else a new one.
fn correlation_id(req: &Request<Body>) -> String {
    req.headers()
        .get("x-correlation-id")
        .and_then(|v| v.to_str().ok())
        .filter(|s| {
            !s.is_empty()
                && s.len() <= 64
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// Every method of every `meson.v1` service has an operation with a
    /// rule, and every operation named exists.
    #[test]
    fn every_method_is_an_operation_with_a_rule() {
        let fds = prost_types::FileDescriptorSet::decode(meson_proto::FILE_DESCRIPTOR_SET)
            .expect("descriptor set");
        let mut methods = Vec::new();
        for file in fds.file.iter().filter(|f| f.package() == "meson.v1") {
            for svc in &file.service {
                for m in &svc.method {
                    methods.push(format!("/meson.v1.{}/{}", svc.name(), m.name()));
                }
            }
        }
        assert!(methods.len() >= 40, "{methods:?}");
        for m in &methods {
            let op = operation_of(m).unwrap_or_else(|| panic!("{m} has no operation"));
            assert!(authz::rule_of(op).is_some(), "{m}: no rule for {op}");
        }
        for (m, _) in OPERATIONS {
            assert!(methods.iter().any(|x| x == m), "{m} is not a method");
        }
        let services: std::collections::BTreeSet<String> = methods
            .iter()
            .map(|m| {
                m.trim_start_matches('/')
                    .split('/')
                    .next()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        let listed: std::collections::BTreeSet<String> = super::super::SERVICES
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(services, listed);
    }

    /// Every operation of the REST API is a gRPC method's, or is named in
    /// [`REST_ONLY`] with why: a resource cannot miss gRPC unnoticed.
    #[test]
    fn every_operation_is_carried_by_grpc_or_said_not_to_be() {
        let ops = crate::http::operation_ids();
        let over_grpc: std::collections::BTreeSet<&str> =
            OPERATIONS.iter().map(|(_, op)| *op).collect();
        let missing: Vec<&String> = ops
            .iter()
            .filter(|op| !over_grpc.contains(op.as_str()))
            .filter(|op| !REST_ONLY.iter().any(|(o, _)| o == op))
            .collect();
        assert!(
            missing.is_empty(),
            "operations neither in grpc::gate::OPERATIONS nor REST_ONLY: {missing:?}"
        );
        for (op, why) in REST_ONLY {
            assert!(ops.contains(*op), "REST_ONLY names no operation: {op}");
            assert!(!over_grpc.contains(op), "{op} is over gRPC, not REST only");
            assert!(!why.is_empty());
        }
    }
}
