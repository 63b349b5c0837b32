//! The application layer: what the API can do, independent of transport.
//!
//! REST handlers (and later gRPC) call these methods; they validate, check
//! authorization, run transactions and enqueue workflows.

mod actions;
mod audit;
pub mod autoscaler;
mod backups;
pub use backups::{BackupCreated, Restored};
mod catalog;
mod cluster_nodes;
mod cluster_pools;
mod cluster_upgrades;
mod clusters;
pub mod consoles;
pub mod idempotency;
pub mod list;
pub mod members;
pub mod organizations;
mod quotas;
mod quotes;
mod targets;
pub mod usage;
mod vms;
mod volumes;

use crate::auth::Principal;
use meson_core::ActionId;
use meson_core::action::{Action, ActionStatus, Command, ResourceType};
use meson_core::quota::Resources;
use meson_db::PgPool;

pub use audit::{AuditBacklog, offered};
pub use cluster_nodes::NodeAction;
pub use cluster_pools::{PoolChanged, PoolView};
pub use clusters::{ClusterCreated, ClusterView};
pub use list::{ActionQuery, ListQuery, Page, Paged, VolumeQuery};
pub use quotas::{QuotaView, parse_tenant};
pub use quotes::{KaasQuotes, Quotes, VmQuotes};
pub use targets::Drained;
pub(crate) use vms::live_on_host;
pub use vms::{VmCreated, VmPage, VmParts};
pub use volumes::VolumeCreated;

#[derive(Clone)]
pub struct App {
    pub pool: PgPool,
    /// Beside `pool`, for the statements that set their tenant scope
    /// themselves (`meson_db::scope::own_scope`): a VM's create and read.
    pub own: PgPool,
    /// Opens cluster secrets (kubeconfigs, rotation); without it those answer
    /// `service_error`.
    pub secrets_key: Option<meson_kaas::SecretKey>,
    /// Every tenant's quotas, unless set for it.
    pub quotas: Resources,
    /// Where clusters' autoscalers reach meson, when it serves them.
    pub autoscaler: Option<autoscaler::AutoscalerEndpoint>,
    /// Opened by a database outage: requests are refused at once
    /// (`503 unavailable`) until the database is tried again.
    pub breaker: std::sync::Arc<meson_db::outage::Breaker>,
    /// Audit entries kept in memory while the database is down.
    pub audit_backlog: std::sync::Arc<AuditBacklog>,
}

impl App {
    /// `pool` must be a scoped pool ([`meson_db::scope::connect_scoped`]):
    /// the transports run every request in its tenant's scope.
    pub fn new(pool: PgPool) -> Self {
        let own = meson_db::scope::own_scope(&pool);
        App {
            breaker: meson_db::outage::Breaker::with_hold(
                meson_db::outage::DEFAULT_PAUSE,
                meson_db::outage::DEFAULT_HOLD,
                vec![pool.clone(), own.clone()],
            ),
            own,
            pool,
            secrets_key: None,
            quotas: Resources::DEFAULT_QUOTAS,
            autoscaler: None,
            audit_backlog: std::sync::Arc::new(AuditBacklog::new(AuditBacklog::CAPACITY)),
        }
    }

    /// How long a request waits for an unreachable database before it is
    /// answered `503` (see [`meson_db::outage::Breaker::wait_closed`]).
    pub fn with_db_hold(mut self, hold: std::time::Duration) -> Self {
        self.breaker = meson_db::outage::Breaker::with_hold(
            meson_db::outage::DEFAULT_PAUSE,
            hold,
            vec![self.pool.clone(), self.own.clone()],
        );
        self
    }

    pub fn with_secrets_key(mut self, key: meson_kaas::SecretKey) -> Self {
        self.secrets_key = Some(key);
        self
    }

    /// Ready when the database answers; not ready at once while the
    /// breaker is open.
    pub async fn ready(&self) -> bool {
        if self.breaker.is_open() {
            return false;
        }
        self.watched(meson_db::ping(&self.pool)).await
    }

    /// Runs `f` under the breaker: a database outage it meets opens it.
    pub async fn watched<F: std::future::Future>(&self, f: F) -> F::Output {
        meson_db::outage::watched(self.breaker.clone(), f).await
    }
}

impl App {
    /// Renames and/or relabels the tenant's `T` `id` as a `PATCH` body asks
    /// (`{"name", "labels"}`, a name at most `max_name_len` long): the
    /// body's warnings.
    pub(crate) async fn rename<T: meson_db::Listable>(
        &self,
        tenant: &meson_core::TenantId,
        id: uuid::Uuid,
        body: &serde_json::Value,
        max_name_len: usize,
        how: meson_db::Renamed,
    ) -> meson_core::Result<Vec<meson_core::parse::Warning>> {
        let patch = meson_core::patch::NameLabels::parse(body, max_name_len)?;
        let (name, labels) = (patch.name.as_deref(), patch.labels.as_ref());
        meson_db::rename::<T>(&self.pool, tenant, id, name, labels, how).await?;
        Ok(patch.warnings)
    }
}

/// What meson stores of a secret it hands out (an API token's, a console
/// URL's token): its SHA-256, which a presented secret is looked up by.
pub(crate) fn secret_hash(secret: &str) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// A new running action of the caller's tenant on `resources`.
/// The host a VM migrates or a volume moves to (`what` says which): a
/// target named `host`, not the one it is on (`from`), of its `provider`,
/// taking new work; else a `400` naming `host` and why.
pub(crate) fn destination<'a>(
    targets: &'a [meson_core::target::Target],
    host: &str,
    from: meson_core::TargetId,
    provider: &str,
    what: &str,
) -> meson_core::Result<&'a meson_core::target::Target> {
    let t = targets
        .iter()
        .find(|t| t.name == host)
        .ok_or_else(|| meson_core::Error::invalid("host", format!("no host is named {host}")))?;
    let why = if t.id == from {
        format!("the {what} is on host {host} already")
    } else if t.provider != provider {
        format!(
            "host {host} is provider {}'s; a {what} moves within its provider, {provider}",
            t.provider
        )
    } else if !t.enabled {
        format!("host {host} takes nothing new (drained or disabled)")
    } else {
        return Ok(t);
    };
    Err(meson_core::Error::invalid("host", why))
}

pub(crate) fn new_action(
    p: &Principal,
    command: Command,
    resources: Vec<(ResourceType, uuid::Uuid)>,
) -> Action {
    Action {
        id: ActionId::new(),
        tenant: p.tenant.clone(),
        command: command.as_str().to_owned(),
        status: ActionStatus::Running,
        progress: 0,
        started: chrono::Utc::now(),
        finished: None,
        resources,
        error: None,
    }
}
