//! The audit log: appended for every audited request, read by operators.

use super::{App, Page};
use crate::auth::Principal;
use meson_core::Result;
use meson_core::audit::{AuditEntry, AuditFilter};

impl App {
    /// Appends an entry in the caller's tenant.
    pub async fn audit_record(&self, entry: &AuditEntry) -> Result<()> {
        meson_db::audit::insert(&self.pool, entry).await
    }

    /// Entries of every tenant (or those `filter` names), newest first.
    pub async fn audit_list(
        &self,
        _p: &Principal,
        page: Page,
        filter: &AuditFilter,
    ) -> Result<(Vec<AuditEntry>, u64)> {
        let (entries, total) = meson_db::scope::system(meson_db::audit::list(
            &self.pool,
            filter,
            i64::from(page.per_page),
            page.offset(),
        ))
        .await?;
        Ok((entries, total.max(0) as u64))
    }
}
