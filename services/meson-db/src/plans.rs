//! Plans: named quota sets operators put tenants on (`meson_core::quota::Plan`).

use crate::DbResult;
use meson_core::quota::{Plan, QuotaOverrides};
use meson_core::{Error, TenantId};
use sqlx::PgPool;

macro_rules! plan {
    ($r:expr) => {
        Plan {
            name: $r.name,
            description: $r.description,
            quotas: crate::quotas::overrides!($r),
            tenants: $r.tenants,
        }
    };
}

/// Every plan, by name.
pub async fn list(db: impl sqlx::PgExecutor<'_>) -> Result<Vec<Plan>, Error> {
    let rows = sqlx::query!(
        r#"select p.name, p.description, p.vms, p.vcpus, p.ram_mib, p.storage_gb, p.clusters,
                  p.nodes, p.images_gb,
                  (select count(*) from tenant_quotas t where t.plan = p.name) as "tenants!"
           from plans p order by p.name"#
    )
    .fetch_all(db)
    .await
    .ctx("listing plans")?;
    Ok(rows.into_iter().map(|r| plan!(r)).collect())
}

pub async fn get(db: impl sqlx::PgExecutor<'_>, name: &str) -> Result<Plan, Error> {
    let r = sqlx::query!(
        r#"select p.name, p.description, p.vms, p.vcpus, p.ram_mib, p.storage_gb, p.clusters,
                  p.nodes, p.images_gb,
                  (select count(*) from tenant_quotas t where t.plan = p.name) as "tenants!"
           from plans p where p.name = $1"#,
        name
    )
    .fetch_optional(db)
    .await
    .ctx("reading a plan")?
    .ok_or_else(|| Error::not_found("plan", name))?;
    Ok(plan!(r))
}

/// Creates or replaces plan `name`; true when it was created.
pub async fn put(
    db: impl sqlx::PgExecutor<'_>,
    name: &str,
    description: &str,
    q: &QuotaOverrides,
    by: &str,
) -> Result<bool, Error> {
    let created = sqlx::query_scalar!(
        r#"insert into plans (name, description, vms, vcpus, ram_mib, storage_gb, clusters,
                              nodes, images_gb, updated_by)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
           on conflict (name) do update set
             description = excluded.description, vms = excluded.vms, vcpus = excluded.vcpus,
             ram_mib = excluded.ram_mib, storage_gb = excluded.storage_gb,
             clusters = excluded.clusters, nodes = excluded.nodes,
             images_gb = excluded.images_gb, updated_by = excluded.updated_by
           returning (xmax = 0) as "created!""#,
        name,
        description,
        q.vms,
        q.vcpus,
        q.ram_mib,
        q.storage_gb,
        q.clusters,
        q.nodes,
        q.images_gb,
        by,
    )
    .fetch_one(db)
    .await
    .ctx("storing a plan")?;
    Ok(created)
}

/// Deletes plan `name`, unless a tenant is on it (`conflict`).
pub async fn delete(pool: &PgPool, name: &str) -> Result<(), Error> {
    let done = sqlx::query!(
        r#"delete from plans p where p.name = $1
             and not exists (select 1 from tenant_quotas t where t.plan = p.name)"#,
        name
    )
    .execute(pool)
    .await
    .ctx("deleting a plan")?;
    if done.rows_affected() == 1 {
        return Ok(());
    }
    let plan = get(pool, name).await?;
    Err(Error::Conflict {
        message: format!(
            "plan {name} has {} tenant(s) on it: move them to another plan first",
            plan.tenants
        ),
    })
}

/// The plan tenant `tenant` is on (`None`: the defaults).
pub async fn of_tenant(
    db: impl sqlx::PgExecutor<'_>,
    tenant: &TenantId,
) -> Result<Option<Plan>, Error> {
    let r = sqlx::query!(
        r#"select p.name, p.description, p.vms, p.vcpus, p.ram_mib, p.storage_gb, p.clusters,
                  p.nodes, p.images_gb,
                  (select count(*) from tenant_quotas o where o.plan = p.name) as "tenants!"
           from tenant_quotas t join plans p on p.name = t.plan
           where t.tenant_id = $1"#,
        tenant.as_str()
    )
    .fetch_optional(db)
    .await
    .ctx("reading a tenant's plan")?;
    Ok(r.map(|r| plan!(r)))
}

/// Puts tenant `tenant` on plan `plan` (`None`: the defaults), by whom. An
/// unknown plan is `not_found`.
pub async fn assign(
    db: impl sqlx::PgExecutor<'_>,
    tenant: &TenantId,
    plan: Option<&str>,
    by: &str,
) -> Result<(), Error> {
    let r = sqlx::query!(
        r#"insert into tenant_quotas (tenant_id, plan, updated_by)
           select $1, $2, $3 where $2::text is null or exists (select 1 from plans where name = $2)
           on conflict (tenant_id) do update set plan = excluded.plan, updated_by = excluded.updated_by"#,
        tenant.as_str(),
        plan,
        by
    )
    .execute(db)
    .await
    .ctx("putting a tenant on a plan")?;
    if r.rows_affected() == 0 {
        return Err(Error::invalid(
            "plan",
            format!("no plan is named {:?}", plan.unwrap_or_default()),
        ));
    }
    Ok(())
}
