//! The audit log: appended for every audited request, read by operators.

use super::{App, Page};
use crate::auth::{Principal, Role};
use meson_core::audit::{AuditEntry, AuditFilter};
use meson_core::{Error, Result};

impl App {
    /// Appends an entry in the caller's tenant.
    pub async fn audit_record(&self, entry: &AuditEntry) -> Result<()> {
        meson_db::audit::insert(&self.pool, entry).await
    }

    /// Entries of every tenant (or those `filter` names), newest first; a
    /// tenant's owner sees its own tenant's only.
    pub async fn audit_list(
        &self,
        p: &Principal,
        page: Page,
        filter: &AuditFilter,
    ) -> Result<(Vec<AuditEntry>, u64)> {
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
