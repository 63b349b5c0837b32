//! What every call of the API passes before its operation runs, whatever the
//! transport (`http::gate` for REST, `grpc::gate` for gRPC): the bearer
//! token, the tenant's rate limit, the operation's rule from
//! `authz::rules()`; then the tenant's database scope, and the audit log.

use crate::auth::Principal;
use crate::authz::{self, Rule};
use crate::ratelimit::Decision;
use crate::state::AppState;
use meson_core::Error;
use meson_core::audit::AuditEntry;
use meson_db::scope::{self, Scope};

/// The bearer token of an `Authorization` header value (`None`: no header,
/// or one that is not text), or why it holds none, for the log.
pub fn bearer(authorization: Option<&str>) -> Result<&str, &'static str> {
    let value = authorization.ok_or("no Authorization header")?;
    let (scheme, token) = value
        .split_once(' ')
        .ok_or("the Authorization header is not `Bearer <token>`")?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err("the Authorization header's scheme is not Bearer");
    }
    let token = token.trim();
    if token.is_empty() {
        return Err("the Authorization header's bearer token is empty");
    }
    Ok(token)
}

/// The caller a bearer token stands for: one of meson's own API tokens
/// (`meson_...`, read from the database at every request, so a revoked
/// one is refused at once everywhere), or a JWT of the configured issuer.
pub async fn authenticate(state: &AppState, token: &str) -> Result<Principal, Error> {
    if token.starts_with(meson_core::token::SECRET_PREFIX) {
        state.app.token_principal(token).await
    } else {
        state.auth.verify(token).await
    }
}

/// The header (gRPC metadata key) naming the organisation a call acts in,
/// when not the one its token names: one the caller is a member of, or one
/// below an organisation it owns or manages.
pub const ORGANIZATION_HEADER: &str = "meson-organization";

/// The organisation a request's headers ask to act in, if any: the
/// [`ORGANIZATION_HEADER`]'s value, as text.
pub fn organization(headers: &axum::http::HeaderMap) -> Result<Option<String>, Error> {
    match headers.get(ORGANIZATION_HEADER) {
        None => Ok(None),
        Some(v) => match v.to_str() {
            Ok(s) if !s.trim().is_empty() => Ok(Some(s.trim().to_owned())),
            _ => Err(Error::invalid(
                ORGANIZATION_HEADER,
                "must be an organisation's id",
            )),
        },
    }
}

/// Where a call came from, for its audit entry.
pub struct CallInfo {
    /// `GET`, `POST`, ... or `GRPC`.
    pub method: String,
    /// The URL path, or the gRPC method's (`/meson.v1.VmService/CreateVm`).
    pub path: String,
    /// The resource the call names, when known before it runs.
    pub resource: Option<(String, String)>,
    pub correlation_id: String,
    /// The organisation it asks to act in ([`organization`]), if not the
    /// token's.
    pub organization: Option<String>,
}

/// The outcome of [`admit`].
pub enum Admission {
    /// Run the operation with [`Admitted::run`].
    Admitted(Admitted),
    /// Answer `error` (with the rate-limit headers when a tenant is known).
    Refused {
        error: Error,
        decision: Option<Decision>,
        /// For refusals worth recording (a role too low).
        audit: Option<Audit>,
    },
}

pub struct Admitted {
    pub principal: Principal,
    pub decision: Decision,
    pub audit: Option<Audit>,
    breaker: std::sync::Arc<meson_db::outage::Breaker>,
}

/// Authenticates the caller (`token` as [`bearer`] read it), takes one
/// request from its tenant's budget and checks the operation's rule. Why a
/// caller was refused is logged, never returned.
pub async fn admit(
    state: &AppState,
    rule: &'static Rule,
    token: Result<&str, &str>,
    call: CallInfo,
) -> Admission {
    let principal = match token {
        Ok(token) => authenticate(state, token).await,
        Err(reason) => {
            // The request's span names its path and correlation id.
            tracing::info!(%reason, operation = rule.operation, "unauthenticated request");
            Err(Error::Unauthorized)
        }
    };
    let principal = match principal {
        Ok(p) => {
            state
                .app
                .standing(p, call.organization.as_deref(), rule)
                .await
        }
        Err(e) => Err(e),
    };
    let principal = match principal {
        Ok(p) => p,
        Err(error) => {
            return Admission::Refused {
                error,
                decision: None,
                audit: None,
            };
        }
    };
    let span = tracing::Span::current();
    span.record("operation", rule.operation);
    span.record("tenant", principal.tenant.as_str());
    span.record("subject", principal.subject.as_str());
    let decision = state.limits.check(&principal.tenant, rule.budget);
    if let Some(retry_after) = decision.retry_after {
        tracing::info!(tenant = %principal.tenant, operation = rule.operation, "rate limited");
        return Admission::Refused {
            error: Error::RateLimited { retry_after },
            decision: Some(decision),
            audit: None,
        };
    }
    let audit = rule
        .audit
        .then(|| Audit::start(&principal, rule.operation, call));
    // While the database is down, held for a moment (a failover), then
    // refused (and audited later).
    let breaker = &state.app.breaker;
    let allowed = match authz::authorize(&principal, rule) {
        Ok(()) if breaker.wait_closed(breaker.hold()).await => Ok(()),
        Ok(()) => breaker.check(),
        Err(e) => Err(e),
    };
    match allowed {
        Err(error) => Admission::Refused {
            error,
            decision: Some(decision),
            audit,
        },
        Ok(()) => Admission::Admitted(Admitted {
            principal,
            decision,
            audit,
            breaker: state.app.breaker.clone(),
        }),
    }
}

impl Admitted {
    /// Runs `f` in the caller's tenant scope: every query it makes sees
    /// that tenant's rows only; a database outage it meets opens the
    /// breaker.
    pub async fn run<F: Future>(&self, f: F) -> F::Output {
        self.run_connecting(f).await.0
    }

    /// [`Admitted::run`], and whether `f` had a live database connection
    /// (until then, running it again cannot do anything twice).
    async fn run_connecting<F: Future>(&self, f: F) -> (F::Output, bool) {
        let scoped = scope::run(Scope::Tenant(self.principal.tenant.clone()), f);
        meson_db::outage::watched_connecting(self.breaker.clone(), scoped).await
    }

    /// [`Admitted::run`], offering the call's audit entry to the operation
    /// (`crate::app::offered`), answered `created` if it writes it (what
    /// the transport answers a created resource with). True when it did:
    /// the entry must not be written again.
    pub async fn run_offering<F: Future>(&self, created: u16, f: F) -> (F::Output, bool) {
        let (out, written, _) = self.run_offering_connecting(created, f).await;
        (out, written)
    }

    /// [`Admitted::run_offering`], and whether `f` had a live database
    /// connection.
    pub async fn run_offering_connecting<F: Future>(
        &self,
        created: u16,
        f: F,
    ) -> (F::Output, bool, bool) {
        match &self.audit {
            Some(a) => {
                let entry = AuditEntry {
                    status: created,
                    ..a.entry.clone()
                };
                let ((out, written), connected) =
                    self.run_connecting(crate::app::offered(entry, f)).await;
                (out, written, connected)
            }
            None => {
                let (out, connected) = self.run_connecting(f).await;
                (out, false, connected)
            }
        }
    }

    /// The breaker the call runs under.
    pub fn breaker(&self) -> &meson_db::outage::Breaker {
        &self.breaker
    }
}

/// An audit entry being written: what is known before the operation runs.
pub struct Audit {
    pub entry: AuditEntry,
}

impl Audit {
    /// An entry for `operation` called by `p`.
    pub fn start(p: &Principal, operation: &str, call: CallInfo) -> Audit {
        let (resource_type, resource_id) = call.resource.unzip();
        Audit {
            entry: AuditEntry {
                id: 0,
                at: chrono::Utc::now(),
                tenant: p.tenant.to_string(),
                subject: p.subject.clone(),
                role: p.role.as_str().to_owned(),
                operation: operation.to_owned(),
                method: call.method,
                path: call.path,
                resource_type,
                resource_id,
                action_id: None,
                status: 0,
                correlation_id: call.correlation_id,
            },
        }
    }

    /// Appends the entry, answered with `status`, in the caller's tenant
    /// scope. While the database is down the entry is kept in memory and
    /// written when it is back ([`crate::app::App::audit_flush`]); another
    /// failure is logged: the change it records has happened either way.
    pub async fn record(mut self, state: &AppState, status: u16) {
        self.entry.status = status;
        let app = &state.app;
        if app.breaker.is_open() || !app.audit_backlog.is_empty() {
            // In line behind those kept already.
            app.audit_backlog.push(self.entry);
            return;
        }
        let tenant = Scope::Tenant(meson_core::TenantId(self.entry.tenant.clone()));
        match app
            .watched(scope::run(tenant, app.audit_record(&self.entry)))
            .await
        {
            Ok(()) => {}
            Err(e) if e.code() == "unavailable" => {
                tracing::warn!(entry = ?self.entry,
                    "the database is down: the audit entry is kept until it is back");
                app.audit_backlog.push(self.entry);
            }
            Err(e) => {
                tracing::error!(error = %e, source = ?std::error::Error::source(&e),
                    entry = ?self.entry, "appending to the audit log failed");
            }
        }
    }
}

/// Writes the audit entries kept while the database was down, now and then
/// and once more at `stop`.
pub async fn flush_audit_backlog(state: AppState, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        let stopping = tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(500)) => false,
            _ = stop.wait_for(|s| *s) => true,
        };
        if !state.app.audit_backlog.is_empty() {
            state.app.audit_flush().await;
        }
        if stopping {
            let left = state.app.audit_backlog.len();
            if left > 0 {
                tracing::error!(
                    left,
                    "stopping with audit entries the database could not take: they are lost"
                );
            }
            return;
        }
    }
}
