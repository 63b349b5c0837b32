//! What every REST handler, gRPC method and middleware shares: the app
//! layer, authentication, the action feed and limits ([`AppState`]), and
//! each API operation's authorization rule by route ([`Operations`]). The
//! REST router, the gRPC gate and the shared gate all take them from here.

use crate::app::App;
use crate::auth::Auth;
use crate::authz::{self, Rule};
use crate::http::{ActionFeed, RequestLimits};
use crate::ratelimit::{RateLimitConfig, RateLimits};
use axum::http::Method;
use std::collections::HashMap;
use std::sync::Arc;

/// How the REST API treats requests, beyond what the app layer decides.
#[derive(Clone, Debug, Default)]
pub struct ApiConfig {
    pub rate_limits: RateLimitConfig,
    pub limits: RequestLimits,
    /// Browser origins allowed to call the API besides its own pages (the
    /// Electros dashboard's).
    pub cors_origins: Vec<meson_edge::Origin>,
    /// The names the API answers to (`Host`); by default the loopback ones.
    pub hosts: meson_edge::Hosts,
    /// The API's base URL as its clients reach it (consoles' WebSocket URLs
    /// are on it); the server sets `http://<its address>` when none is given.
    pub public_url: Option<String>,
    pub console: crate::console::ConsoleConfig,
}

/// What every handler and middleware shares; cloned for each of them per
/// request, so one reference count, not a copy of each part.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

pub struct Shared {
    pub app: App,
    pub auth: Auth,
    /// Live action changes for `/v1/actions/stream`.
    pub actions: ActionFeed,
    pub limits: RateLimits,
    pub config: ApiConfig,
}

impl AppState {
    pub fn new(app: App, auth: Auth, actions: ActionFeed, config: ApiConfig) -> AppState {
        AppState(Arc::new(Shared {
            app,
            auth,
            actions,
            limits: RateLimits::new(config.rate_limits),
            config,
        }))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

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

    /// The operations of every route whose method is not GET.
    pub fn changing(&self) -> std::collections::HashSet<&'static str> {
        self.0
            .iter()
            .filter(|((method, _), _)| method != Method::GET)
            .map(|(_, rule)| rule.operation)
            .collect()
    }

    pub(crate) fn rule(&self, method: &Method, path: &str) -> Option<&'static Rule> {
        self.0.get(&(method.clone(), path.to_owned())).copied()
    }

    /// True when some method of `path` has a rule (another method of it
    /// answers `405`).
    pub(crate) fn knows_path(&self, path: &str) -> bool {
        self.0.keys().any(|(_, p)| p == path)
    }
}

/// Each operation's rule (`authz::rules()`), by route.
pub fn operations() -> Operations {
    Operations::from_openapi(&crate::http::openapi()).unwrap_or_else(|missing| {
        // The test `every_route_has_a_rule` keeps this from shipping; should
        // it anyway, those routes refuse every call.
        tracing::error!(?missing, "routes without an authorization rule");
        Operations::default()
    })
}
