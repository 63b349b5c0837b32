//! Quotas: a tenant reads its own, operators read and set anyone's, and
//! every request that adds to a tenant's usage locks it before its writes
//! and checks the quotas after them, before it commits.

use super::App;
use crate::auth::Principal;
use meson_core::quota::{self, DEFAULT_PLAN, Plan, QuotaOverrides, Resources};
use meson_core::{Error, Result, TenantId};
use meson_db::Tx;

/// A tenant's quotas in force, which of them are defaults, and its usage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaView {
    pub tenant: TenantId,
    /// The plan the tenant is on (`None`: the defaults).
    pub plan: Option<String>,
    /// The quotas set for the tenant or by its plan.
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
        let own = meson_db::quotas::get(&self.pool, &tenant).await?;
        let plan = meson_db::plans::of_tenant(&self.pool, &tenant).await?;
        let overrides = own.over(&plan.as_ref().map(|p| p.quotas).unwrap_or_default());
        let usage = meson_db::quotas::usage(&self.pool, &tenant).await?;
        Ok(QuotaView {
            quotas: overrides.effective(&self.quotas),
            plan: plan.map(|p| p.name),
            overrides,
            usage,
            tenant,
        })
    }

    /// Every plan: the deployment's defaults (`default`) first, then the
    /// operators' by name, each with its quotas in force.
    pub async fn plan_list(&self) -> Result<Vec<(Plan, Resources)>> {
        let plans = meson_db::scope::system(meson_db::plans::list(&self.pool)).await?;
        let mut all = vec![self.default_plan()];
        all.extend(plans.into_iter().map(|p| {
            let q = p.quotas.effective(&self.quotas);
            (p, q)
        }));
        Ok(all)
    }

    fn default_plan(&self) -> (Plan, Resources) {
        (
            Plan {
                name: DEFAULT_PLAN.into(),
                description: "The deployment's defaults: the plan of a tenant on none".into(),
                quotas: QuotaOverrides::default(),
                tenants: 0,
            },
            self.quotas,
        )
    }

    pub async fn plan_get(&self, name: &str) -> Result<(Plan, Resources)> {
        if name == DEFAULT_PLAN {
            return Ok(self.default_plan());
        }
        // A name no plan can have is none (and never reaches the database).
        quota::plan_name("name", name).map_err(|_| Error::not_found("plan", name))?;
        let p = meson_db::scope::system(meson_db::plans::get(&self.pool, name)).await?;
        let q = p.quotas.effective(&self.quotas);
        Ok((p, q))
    }

    /// Creates or replaces a plan (operators); true when created. Its
    /// tenants' quotas follow at once.
    pub async fn plan_put(
        &self,
        p: &Principal,
        name: &str,
        body: &serde_json::Value,
    ) -> Result<((Plan, Resources), bool)> {
        let name = quota::plan_name("name", name)?;
        let (description, quotas) = quota::parse_plan(body)?;
        let created = meson_db::scope::system(meson_db::plans::put(
            &self.pool,
            &name,
            &description,
            &quotas,
            &p.subject,
        ))
        .await?;
        tracing::info!(plan = %name, by = %p.subject, ?quotas, created, "plan set");
        Ok((self.plan_get(&name).await?, created))
    }

    /// Deletes a plan no tenant is on (operators).
    pub async fn plan_delete(&self, name: &str) -> Result<()> {
        if name == DEFAULT_PLAN {
            return Err(Error::Conflict {
                message: "the default plan is the deployment's defaults: it cannot be deleted"
                    .into(),
            });
        }
        quota::plan_name("name", name).map_err(|_| Error::not_found("plan", name))?;
        meson_db::scope::system(meson_db::plans::delete(&self.pool, name)).await
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
            let (next, plan) = current.patch_tenant(body)?;
            meson_db::quotas::set(&mut *tx, &tenant, &next, &p.subject).await?;
            if let Some(plan) = &plan {
                meson_db::plans::assign(&mut *tx, &tenant, plan.as_deref(), &p.subject).await?;
            }
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
