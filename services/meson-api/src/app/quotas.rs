//! Quotas: a tenant reads its own, operators read and set anyone's, and
//! every request that adds to a tenant's usage locks it before its writes
//! and checks the quotas after them, before it commits.

use super::App;
use crate::auth::Principal;
use meson_core::quota::{self, QuotaOverrides, Resources};
use meson_core::{Error, Result, TenantId};
use meson_db::Tx;

/// A tenant's quotas in force, which of them are defaults, and its usage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaView {
    pub tenant: TenantId,
    pub overrides: QuotaOverrides,
    pub quotas: Resources,
    pub usage: Resources,
}

impl App {
    /// In `tx`, before it writes anything that adds to the tenant's usage:
    /// takes the tenant's quota lock (held until `tx` ends) and reads what
    /// the tenant holds. After the writes, [`App::within_quotas`] checks
    /// what they added.
    pub(crate) async fn hold_usage(&self, tx: &mut Tx<'_>, tenant: &TenantId) -> Result<Resources> {
        let (_, held) = meson_db::quotas::lock(tx, tenant).await?;
        Ok(held)
    }

    /// In `tx`, after its writes and before its commit: refuses with
    /// `resource_limit_exceeded` if what they added to the tenant's usage
    /// (as the usage triggers counted it) takes it over a quota. The caller
    /// drops `tx` on the refusal, so nothing is written.
    pub(crate) async fn within_quotas(
        &self,
        tx: &mut Tx<'_>,
        tenant: &TenantId,
        held: &Resources,
    ) -> Result<()> {
        let c = meson_db::quotas::over(tx, tenant, held, &self.quotas).await?;
        quota::exceeded(&c.quotas, &c.held, &c.over).inspect_err(|_| {
            tracing::info!(%tenant, over = ?c.over, ?held, "quota exceeded");
        })
    }

    /// The refusal of a request found over the tenant's quotas (`over`)
    /// by the statement that locked its `usage` under `overrides`.
    pub(crate) fn over_quota(
        &self,
        tenant: &TenantId,
        overrides: &QuotaOverrides,
        usage: &Resources,
        over: &[&str],
    ) -> Result<()> {
        quota::exceeded(&overrides.effective(&self.quotas), usage, over).inspect_err(|_| {
            tracing::info!(%tenant, ?over, ?usage, "quota exceeded");
        })
    }

    async fn quota_view(&self, tenant: TenantId) -> Result<QuotaView> {
        let overrides = meson_db::quotas::get(&self.pool, &tenant).await?;
        let usage = meson_db::quotas::usage(&self.pool, &tenant).await?;
        Ok(QuotaView {
            quotas: overrides.effective(&self.quotas),
            overrides,
            usage,
            tenant,
        })
    }

    /// The caller's own tenant's quotas.
    pub async fn quota_get(&self, p: &Principal) -> Result<QuotaView> {
        self.quota_view(p.tenant.clone()).await
    }

    /// Any tenant's quotas (operators).
    pub async fn tenant_quota_get(&self, _p: &Principal, tenant: &str) -> Result<QuotaView> {
        let tenant = parse_tenant(tenant)?;
        meson_db::scope::system(self.quota_view(tenant)).await
    }

    /// Sets any tenant's quotas (operators): see [`QuotaOverrides::patch`].
    pub async fn tenant_quota_update(
        &self,
        p: &Principal,
        tenant: &str,
        body: &serde_json::Value,
    ) -> Result<QuotaView> {
        let tenant = parse_tenant(tenant)?;
        meson_db::scope::system(async {
            let mut tx = meson_db::begin(&self.pool).await?;
            let current = meson_db::quotas::get(&mut *tx, &tenant).await?;
            let next = current.patch(body)?;
            meson_db::quotas::set(&mut *tx, &tenant, &next, &p.subject).await?;
            meson_db::commit(tx).await?;
            tracing::info!(%tenant, by = %p.subject, quotas = ?next, "tenant quotas set");
            self.quota_view(tenant).await
        })
        .await
    }
}

/// A tenant id as tokens carry it (see `auth`): 1 to 128 of `[A-Za-z0-9._:@-]`.
pub fn parse_tenant(raw: &str) -> Result<TenantId> {
    if (1..=128).contains(&raw.len())
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:@-".contains(&b))
    {
        Ok(TenantId(raw.to_owned()))
    } else {
        Err(Error::invalid(
            "tenant",
            "must be 1 to 128 letters, digits, '.', '_', ':', '@' or '-'",
        ))
    }
}
