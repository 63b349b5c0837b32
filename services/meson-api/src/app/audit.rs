//! The audit log: appended for every audited request, read by operators.

use super::{App, Page};
use crate::auth::{Principal, Role};
use meson_core::audit::{AuditEntry, AuditFilter};
use meson_core::{Error, Result};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Audit entries that could not be written while the database was down,
/// oldest first, written when it is back ([`App::audit_flush`]). Bounded:
/// past its capacity the oldest are dropped, and the log says how many.
#[derive(Debug)]
pub struct AuditBacklog {
    entries: Mutex<VecDeque<AuditEntry>>,
    capacity: usize,
    dropped: AtomicU64,
}

impl AuditBacklog {
    /// Entries kept at most (a few MiB).
    pub const CAPACITY: usize = 10_000;

    pub fn new(capacity: usize) -> AuditBacklog {
        AuditBacklog {
            entries: Mutex::new(VecDeque::new()),
            capacity: capacity.max(1),
            dropped: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<AuditEntry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Entries waiting.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries lost to the capacity since the start.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Keeps `entry` until the database is back.
    pub fn push(&self, entry: AuditEntry) {
        let mut entries = self.lock();
        if entries.len() >= self.capacity {
            let lost = entries.pop_front();
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            // Every loss counts; the log says so at 1, 2, 4, 8, ...
            metrics::counter!("meson_audit_entries_dropped_total").increment(1);
            if n.is_power_of_two() {
                tracing::error!(
                    dropped = n,
                    capacity = self.capacity,
                    lost = ?lost,
                    "the audit backlog is full while the database is down: dropping its oldest entries"
                );
            }
        }
        entries.push_back(entry);
    }

    fn pop(&self) -> Option<AuditEntry> {
        self.lock().pop_front()
    }

    fn unpop(&self, entry: AuditEntry) {
        let mut entries = self.lock();
        if entries.len() < self.capacity {
            entries.push_front(entry);
        }
    }
}

/// The audit entry of the call being served, offered by its transport to
/// the operation: an operation that commits its change in one transaction
/// (a VM's create) writes the entry in that same transaction, so the change
/// and its record are durable together, in one commit. The transport then
/// writes no entry of its own; when the operation did not take the offer, or
/// failed, it writes the entry as for any other call.
struct Offer {
    /// The entry, its status the one the transport answers a created
    /// resource with.
    entry: AuditEntry,
    written: AtomicBool,
}

tokio::task_local! {
    static OFFERED: Arc<Offer>;
}

/// Runs `f` offering `entry` (its `status` what the transport answers a
/// resource created with); true when `f` wrote it.
pub async fn offered<F: Future>(entry: AuditEntry, f: F) -> (F::Output, bool) {
    let offer = Arc::new(Offer {
        entry,
        written: AtomicBool::new(false),
    });
    let out = OFFERED.scope(offer.clone(), f).await;
    (out, offer.written.load(Ordering::Acquire))
}

/// The offered entry of the current call, if any: taken by an operation
/// that writes it with its change ([`Taken::written`] once committed).
pub(crate) fn take_offer() -> Option<Taken> {
    OFFERED.try_with(|o| Taken(o.clone())).ok()
}

pub(crate) struct Taken(Arc<Offer>);

impl Taken {
    /// The entry, completed with the resource created and the action started.
    pub fn entry(
        &self,
        resource_type: &str,
        resource_id: String,
        action: uuid::Uuid,
    ) -> AuditEntry {
        AuditEntry {
            resource_type: Some(resource_type.to_owned()),
            resource_id: Some(resource_id),
            action_id: Some(action),
            ..self.0.entry.clone()
        }
    }

    /// The entry is committed with the operation's change.
    pub fn written(self) {
        self.0.written.store(true, Ordering::Release);
    }
}

impl App {
    /// Appends an entry in the caller's tenant.
    pub async fn audit_record(&self, entry: &AuditEntry) -> Result<()> {
        meson_db::audit::insert(&self.pool, entry).await
    }

    /// Writes the backlog's entries, oldest first, each in its tenant's
    /// scope, until it is empty or the database fails again (the entry
    /// goes back first in line). How many were written.
    pub async fn audit_flush(&self) -> usize {
        let mut written = 0;
        while self.breaker.check().is_ok() {
            let Some(entry) = self.audit_backlog.pop() else {
                break;
            };
            let tenant = meson_db::scope::Scope::Tenant(meson_core::TenantId(entry.tenant.clone()));
            let insert = meson_db::scope::run(tenant, self.audit_record(&entry));
            match self.watched(insert).await {
                Ok(()) => written += 1,
                Err(e) if e.code() == "unavailable" => {
                    self.audit_backlog.unpop(entry);
                    break;
                }
                Err(e) => {
                    tracing::error!(error = %e, source = ?std::error::Error::source(&e),
                        entry = ?entry, "appending a kept audit entry failed: dropped");
                }
            }
        }
        if written > 0 {
            tracing::info!(
                written,
                left = self.audit_backlog.len(),
                "wrote audit entries kept while the database was down"
            );
        }
        written
    }

    /// Entries of every tenant (or those `filter` names), newest first; a
    /// tenant's owner sees its own tenant's only.
    pub async fn audit_list(
        &self,
        p: &Principal,
        page: &Page,
        filter: &AuditFilter,
    ) -> Result<(Vec<AuditEntry>, u64)> {
        super::list::by_number(page, "the audit log")?;
        let list = |filter| {
            meson_db::audit::list(&self.pool, filter, i64::from(page.per_page), page.offset())
        };
        let (entries, total) = if p.role >= Role::Admin {
            meson_db::scope::system(list(filter)).await?
        } else {
            if filter
                .tenant
                .as_deref()
                .is_some_and(|t| t != p.tenant.as_str())
            {
                return Err(Error::Forbidden {
                    message: "an owner reads its own tenant's audit log only".into(),
                });
            }
            let own = AuditFilter {
                tenant: Some(p.tenant.to_string()),
                ..filter.clone()
            };
            // The caller's tenant scope (the request's): row-level security
            // keeps other tenants' entries out as well.
            list(&own).await?
        };
        Ok((entries, total.max(0) as u64))
    }
}
