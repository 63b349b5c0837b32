//! Tenant quotas: overrides of the configured defaults, and usage.

use crate::{DbResult, Tx};
use meson_core::quota::{QuotaOverrides, Resources};
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
            },
            meson_core::quota::Resources {
                vms: $r.vms,
                vcpus: $r.vcpus,
                ram_mib: $r.ram_mib,
                storage_gb: $r.storage_gb,
                clusters: $r.clusters,
                nodes: $r.nodes,
            },
        )
    };
}
pub(crate) use overrides_and_usage;

/// A tenant's overrides (none set: all defaults).
pub async fn get(
    db: impl sqlx::PgExecutor<'_>,
    tenant: &TenantId,
) -> Result<QuotaOverrides, Error> {
    let row = sqlx::query!(
        r#"select vms, vcpus, ram_mib, storage_gb, clusters, nodes
           from tenant_quotas where tenant_id = $1"#,
        tenant.as_str()
    )
    .fetch_optional(db)
    .await
    .ctx("reading a tenant's quotas")?;
    Ok(row
        .map(|r| QuotaOverrides {
            vms: r.vms,
            vcpus: r.vcpus,
            ram_mib: r.ram_mib,
            storage_gb: r.storage_gb,
            clusters: r.clusters,
            nodes: r.nodes,
        })
        .unwrap_or_default())
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
             (tenant_id, vms, vcpus, ram_mib, storage_gb, clusters, nodes, updated_by)
           values ($1, $2, $3, $4, $5, $6, $7, $8)
           on conflict (tenant_id) do update set
             vms = excluded.vms, vcpus = excluded.vcpus, ram_mib = excluded.ram_mib,
             storage_gb = excluded.storage_gb, clusters = excluded.clusters,
             nodes = excluded.nodes, updated_by = excluded.updated_by"#,
        tenant.as_str(),
        o.vms,
        o.vcpus,
        o.ram_mib,
        o.storage_gb,
        o.clusters,
        o.nodes,
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
        r#"select vms, vcpus, ram_mib, storage_gb, clusters, nodes
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
    })
    .unwrap_or_default())
}

/// What a tenant holds, counted from scratch: its VMs (cluster nodes
/// apart) by their specs, its standalone volumes by their size, its
/// clusters, and their nodes at the control plane's size and every pool's
/// `desired_nodes`. Deleting resources count
/// until they are gone. [`usage`] must always agree; tests hold it to that.
pub async fn recount(db: impl sqlx::PgExecutor<'_>, tenant: &TenantId) -> Result<Resources, Error> {
    let r = sqlx::query!(
        r#"with v as (
             select count(*) as vms,
                    sum((spec->'cpu'->>'cores')::bigint
                        * (spec->'cpu'->>'threads_per_core')::bigint) as vcpus,
                    sum((spec->>'memory_mib')::bigint) as ram_mib,
                    sum((spec->>'boot_volume_gb')::bigint
                        + coalesce((select sum((x->>'size_gb')::bigint)
                                    from jsonb_array_elements(spec->'volumes') x), 0)) as storage_gb
             from vms
             where tenant_id = $1 and deleted_at is null and cluster_id is null
           ), sv as (
             select sum(size_gb)::bigint as storage_gb from volumes
             where tenant_id = $1 and deleted_at is null and vm_id is null
           ), c as (
             select id, spec from clusters where tenant_id = $1 and deleted_at is null
           ), groups as (
             select (c.spec->'control_plane'->>'nodes')::bigint as n,
                    c.spec->'control_plane'->'specs' as s
             from c
             union all
             select p.desired_nodes::bigint, p.spec->'specs'
             from node_pools p join c on c.id = p.cluster_id
             where p.deleted_at is null
           ), k as (
             select sum(n) as nodes,
                    sum(n * (s->>'cpu')::bigint) as vcpus,
                    sum(n * (s->>'ram_mib')::bigint) as ram_mib,
                    sum(n * (s->>'storage_gb')::bigint) as storage_gb
             from groups
           )
           select v.vms as "vms!",
                  (coalesce(v.vcpus, 0) + coalesce(k.vcpus, 0))::bigint as "vcpus!",
                  (coalesce(v.ram_mib, 0) + coalesce(k.ram_mib, 0))::bigint as "ram_mib!",
                  (coalesce(v.storage_gb, 0) + coalesce(k.storage_gb, 0)
                   + coalesce(sv.storage_gb, 0))::bigint as "storage_gb!",
                  (select count(*) from c) as "clusters!",
                  coalesce(k.nodes, 0)::bigint as "nodes!"
           from v, k, sv"#,
        tenant.as_str()
    )
    .fetch_one(db)
    .await
    .ctx("counting a tenant's usage")?;
    Ok(Resources {
        vms: r.vms,
        vcpus: r.vcpus,
        ram_mib: r.ram_mib,
        storage_gb: r.storage_gb,
        clusters: r.clusters,
        nodes: r.nodes,
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
             returning vms, vcpus, ram_mib, storage_gb, clusters, nodes
           )
           select u.vms as "vms!", u.vcpus as "vcpus!", u.ram_mib as "ram_mib!",
                  u.storage_gb as "storage_gb!", u.clusters as "clusters!", u.nodes as "nodes!",
                  q.vms as "q_vms?", q.vcpus as "q_vcpus?", q.ram_mib as "q_ram_mib?",
                  q.storage_gb as "q_storage_gb?", q.clusters as "q_clusters?",
                  q.nodes as "q_nodes?"
           from u left join tenant_quotas q on q.tenant_id = $1"#,
        tenant.as_str()
    )
    .fetch_one(&mut **tx)
    .await
    .ctx("locking a tenant's usage")?;
    Ok(overrides_and_usage!(r))
}
