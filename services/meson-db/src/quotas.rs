//! Tenant quotas: overrides of the configured defaults, and usage.

use crate::{DbResult, Tx};
use meson_core::quota::{NAMES, QuotaOverrides, Resources};
use meson_core::{Error, TenantId};

/// A tenant's quota overrides (`q_vms`, `q_vcpus`, …) and kept usage (`vms`,
/// `vcpus`, …) out of a row that selects both, as every statement reading
/// the tenant's usage row does.
macro_rules! overrides_and_usage {
    ($r:expr) => {
        (
            meson_core::quota::QuotaOverrides {
                vms: $r.q_vms,
                vcpus: $r.q_vcpus,
                ram_mib: $r.q_ram_mib,
                storage_gb: $r.q_storage_gb,
                clusters: $r.q_clusters,
                nodes: $r.q_nodes,
                images_gb: $r.q_images_gb,
            },
            meson_core::quota::Resources {
                vms: $r.vms,
                vcpus: $r.vcpus,
                ram_mib: $r.ram_mib,
                storage_gb: $r.storage_gb,
                clusters: $r.clusters,
                nodes: $r.nodes,
                images_gb: $r.images_gb,
            },
        )
    };
}
pub(crate) use overrides_and_usage;

/// Quota overrides out of a row with a column per resource (`vms`, …):
/// a tenant's own, or a plan's.
macro_rules! overrides {
    ($r:expr) => {
        meson_core::quota::QuotaOverrides {
            vms: $r.vms,
            vcpus: $r.vcpus,
            ram_mib: $r.ram_mib,
            storage_gb: $r.storage_gb,
            clusters: $r.clusters,
            nodes: $r.nodes,
            images_gb: $r.images_gb,
        }
    };
}
pub(crate) use overrides;

/// A tenant's overrides (none set: all defaults).
pub async fn get(
    db: impl sqlx::PgExecutor<'_>,
    tenant: &TenantId,
) -> Result<QuotaOverrides, Error> {
    let row = sqlx::query!(
        r#"select vms, vcpus, ram_mib, storage_gb, clusters, nodes, images_gb
           from tenant_quotas where tenant_id = $1"#,
        tenant.as_str()
    )
    .fetch_optional(db)
    .await
    .ctx("reading a tenant's quotas")?;
    Ok(row.map(|r| overrides!(r)).unwrap_or_default())
}

/// Stores a tenant's overrides, by whom.
pub async fn set(
    db: impl sqlx::PgExecutor<'_>,
    tenant: &TenantId,
    o: &QuotaOverrides,
    by: &str,
) -> Result<(), Error> {
    sqlx::query!(
        r#"insert into tenant_quotas
             (tenant_id, vms, vcpus, ram_mib, storage_gb, clusters, nodes, images_gb, updated_by)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9)
           on conflict (tenant_id) do update set
             vms = excluded.vms, vcpus = excluded.vcpus, ram_mib = excluded.ram_mib,
             storage_gb = excluded.storage_gb, clusters = excluded.clusters,
             nodes = excluded.nodes, images_gb = excluded.images_gb,
             updated_by = excluded.updated_by"#,
        tenant.as_str(),
        o.vms,
        o.vcpus,
        o.ram_mib,
        o.storage_gb,
        o.clusters,
        o.nodes,
        o.images_gb,
        by,
    )
    .execute(db)
    .await
    .ctx("storing a tenant's quotas")?;
    Ok(())
}

/// What a tenant holds, as the `tenant_usage` triggers keep it.
pub async fn usage(db: impl sqlx::PgExecutor<'_>, tenant: &TenantId) -> Result<Resources, Error> {
    let r = sqlx::query!(
        r#"select vms, vcpus, ram_mib, storage_gb, clusters, nodes, images_gb
           from tenant_usage where tenant_id = $1"#,
        tenant.as_str()
    )
    .fetch_optional(db)
    .await
    .ctx("reading a tenant's usage")?;
    Ok(r.map(|r| Resources {
        vms: r.vms,
        vcpus: r.vcpus,
        ram_mib: r.ram_mib,
        storage_gb: r.storage_gb,
        clusters: r.clusters,
        nodes: r.nodes,
        images_gb: r.images_gb,
    })
    .unwrap_or_default())
}

/// What a tenant holds, counted from scratch by the same per-row rules the
/// usage triggers apply (`meson_usage_recount`): its VMs (cluster nodes
/// apart) by their specs, its standalone volumes by their size, its
/// clusters, and their nodes at the control plane's size and every pool's
/// `desired_nodes`. Deleting resources count until they are gone. [`usage`]
/// must always agree; tests hold it to that.
pub async fn recount(db: impl sqlx::PgExecutor<'_>, tenant: &TenantId) -> Result<Resources, Error> {
    let u = sqlx::query_scalar!(
        r#"select meson_usage_recount($1) as "usage!""#,
        tenant.as_str()
    )
    .fetch_one(db)
    .await
    .ctx("counting a tenant's usage")?;
    resources(&u)
}

/// Resources from one of the SQL usage arrays (in [`NAMES`] order).
fn resources(u: &[i64]) -> Result<Resources, Error> {
    <[i64; 7]>::try_from(u)
        .map(Resources::from_array)
        .map_err(|_| crate::corrupt("usage", format!("{u:?}")))
}

/// The names of the 1-based resource positions `meson_quota_over` answers.
pub(crate) fn over_names(over: &[i32]) -> Vec<&'static str> {
    over.iter()
        .filter_map(|i| usize::try_from(*i - 1).ok())
        .filter_map(|i| NAMES.get(i).copied())
        .collect()
}

/// What [`over`] found: the tenant's quotas (overrides over `defaults`),
/// what it held before the request, and the resources the request takes
/// over their quotas (none: it fits).
#[derive(Debug)]
pub struct QuotaCheck {
    pub quotas: Resources,
    pub held: Resources,
    pub over: Vec<&'static str>,
}

/// Applies the quota rule (`meson_quota_over`) to what the writes of `tx`
/// since [`lock`] (which read `held`) added to the tenant's usage: the
/// triggers counted the rows, so what a request adds is defined where
/// usage is, once. Call it after the request's writes, before committing.
pub async fn over(
    tx: &mut Tx<'_>,
    tenant: &TenantId,
    held: &Resources,
    defaults: &Resources,
) -> Result<QuotaCheck, Error> {
    let held_v: Vec<i64> = held.entries().iter().map(|(_, v)| *v).collect();
    let defaults_v: Vec<i64> = defaults.entries().iter().map(|(_, v)| *v).collect();
    let r = sqlx::query!(
        r#"with s as (
             select array[u.vms, u.vcpus, u.ram_mib, u.storage_gb, u.clusters, u.nodes,
                          u.images_gb] as now,
                    array[coalesce(q.vms, ($3::int8[])[1]), coalesce(q.vcpus, ($3::int8[])[2]),
                          coalesce(q.ram_mib, ($3::int8[])[3]), coalesce(q.storage_gb, ($3::int8[])[4]),
                          coalesce(q.clusters, ($3::int8[])[5]), coalesce(q.nodes, ($3::int8[])[6]),
                          coalesce(q.images_gb, ($3::int8[])[7])] as quota
             from tenant_usage u left join tenant_limits q on q.tenant_id = u.tenant_id
             where u.tenant_id = $1
           )
           select s.quota as "quota!",
                  meson_quota_over($2, s.quota,
                                   array(select n - h from unnest(s.now, $2::int8[]) as x(n, h)))
                    as "over!"
           from s"#,
        tenant.as_str(),
        &held_v,
        &defaults_v
    )
    .fetch_one(&mut **tx)
    .await
    .ctx("checking a tenant's quotas")?;
    Ok(QuotaCheck {
        quotas: resources(&r.quota)?,
        held: *held,
        over: over_names(&r.over),
    })
}

/// Locks the tenant's usage row for the rest of `tx` and reads it with the
/// tenant's overrides, in one round trip. Every request that adds to a
/// tenant's usage does this in the transaction that writes the addition,
/// so two of them cannot both pass a check that only one of them fits: the
/// second waits, then reads the first's addition (the triggers wrote it).
pub async fn lock(
    tx: &mut Tx<'_>,
    tenant: &TenantId,
) -> Result<(QuotaOverrides, Resources), Error> {
    let r = sqlx::query!(
        r#"with u as (
             insert into tenant_usage as u (tenant_id) values ($1)
             on conflict (tenant_id) do update set tenant_id = u.tenant_id
             returning vms, vcpus, ram_mib, storage_gb, clusters, nodes, images_gb
           )
           select u.vms as "vms!", u.vcpus as "vcpus!", u.ram_mib as "ram_mib!",
                  u.storage_gb as "storage_gb!", u.clusters as "clusters!", u.nodes as "nodes!",
                  u.images_gb as "images_gb!",
                  q.vms as "q_vms?", q.vcpus as "q_vcpus?", q.ram_mib as "q_ram_mib?",
                  q.storage_gb as "q_storage_gb?", q.clusters as "q_clusters?",
                  q.nodes as "q_nodes?", q.images_gb as "q_images_gb?"
           from u left join tenant_limits q on q.tenant_id = $1"#,
        tenant.as_str()
    )
    .fetch_one(&mut **tx)
    .await
    .ctx("locking a tenant's usage")?;
    Ok(overrides_and_usage!(r))
}

#[cfg(test)]
mod tests {
    /// Row triggers fire in the order of their names. On every table whose
    /// rows count for both, the tenant's usage trigger must fire before the
    /// member's, the order a VM create takes the two rows in its own
    /// statement; the other order deadlocked a delete against a create.
    #[tokio::test]
    async fn usage_triggers_take_the_tenant_row_before_the_member_row() {
        let db = crate::testing::TestDatabase::new().await;
        let rows = sqlx::query!(
            r#"select t.tgrelid::regclass::text as "table!", t.tgname::text as "name!",
                      p.proname::text as "function!"
               from pg_trigger t join pg_proc p on p.oid = t.tgfoid
               where not t.tgisinternal
                 and p.proname in ('usage_track', 'member_usage_track')
               order by 1, t.tgname collate "C""#
        )
        .fetch_all(&db.pool)
        .await
        .unwrap();
        let tables: std::collections::BTreeSet<&str> = rows
            .iter()
            .filter(|r| r.function == "member_usage_track")
            .map(|r| r.table.as_str())
            .collect();
        assert!(tables.contains("vms"), "{rows:?}");
        for table in tables {
            let order: Vec<&str> = rows
                .iter()
                .filter(|r| r.table == table)
                .map(|r| r.function.as_str())
                .collect();
            let last_tenant = order.iter().rposition(|f| *f == "usage_track");
            let first_member = order.iter().position(|f| *f == "member_usage_track");
            assert!(
                last_tenant < first_member,
                "{table}'s triggers fire in the order {order:?}"
            );
        }
    }

    /// `meson_quota_over` on (held, quota, more), as resource names.
    async fn over<const N: usize>(
        pool: &sqlx::PgPool,
        held: [i64; N],
        quota: [i64; N],
        more: [i64; N],
    ) -> Vec<&'static str> {
        let v = sqlx::query_scalar!(
            r#"select meson_quota_over($1, $2, $3) as "over!""#,
            &held[..],
            &quota[..],
            &more[..]
        )
        .fetch_one(pool)
        .await
        .unwrap();
        super::over_names(&v)
    }

    #[tokio::test]
    async fn the_quota_rule_refuses_past_the_edge_what_a_request_raises() {
        let db = crate::testing::TestDatabase::new().await;
        let p = &db.pool;
        let q = [2, 4, 100, 100, 1, 10];
        // At the edge passes, one past it is refused, naming each quota.
        assert!(
            over(p, [1, 2, 0, 0, 0, 0], q, [1, 2, 0, 0, 0, 0])
                .await
                .is_empty()
        );
        assert_eq!(
            over(p, [2, 3, 0, 0, 0, 0], q, [1, 2, 0, 0, 0, 0]).await,
            ["vms", "vcpus"]
        );
        // Over a lowered quota already, a request that raises nothing (or
        // something else) passes; one raising it does not.
        assert!(
            over(p, [1, 8, 0, 0, 0, 0], q, [0, 0, 0, 0, 0, 0])
                .await
                .is_empty()
        );
        assert!(
            over(p, [1, 8, 0, 0, 0, 0], q, [1, -2, 0, 0, 0, 0])
                .await
                .is_empty()
        );
        assert_eq!(
            over(p, [1, 8, 0, 0, 0, 0], q, [0, 1, 0, 0, 0, 0]).await,
            ["vcpus"]
        );
        // i64::MAX is no limit, and the rule cannot overflow.
        let unlimited = [i64::MAX; 6];
        assert!(
            over(p, [i64::MAX - 1; 6], unlimited, [5; 6])
                .await
                .is_empty()
        );
        assert_eq!(
            over(p, [0, 0, 0, 0, 0, 0], q, [0, 0, 0, 0, 0, i64::MAX]).await,
            ["nodes"]
        );
        // The seventh resource is named too.
        assert_eq!(
            over(p, [0; 7], [1; 7], [0, 0, 0, 0, 0, 0, 2]).await,
            ["images_gb"]
        );
    }
}
