//! Orphans: VMs a host holds that meson has no row for
//! ([`meson_core::orphan`]). The reconciler writes what each host reports
//! ([`observe`]); operators decide ([`decide`]); the reconciler carries the
//! decision out ([`adopt`], [`forget`]).

use crate::{DbResult, Tx, corrupt};
use chrono::{DateTime, Utc};
use meson_core::orphan::{Decision, Orphan, OrphanVolume};
use meson_core::{Error, OrphanId, TargetId, TenantId, VmId};
use sqlx::PgPool;
use uuid::Uuid;

/// A VM a host reported, with no row in `vms`.
#[derive(Clone, Debug)]
pub struct Seen {
    pub atomos_id: String,
    pub atomos_name: String,
    pub tenant: Option<TenantId>,
    pub state: String,
    pub vcpus: u32,
    pub ram_mib: u64,
    pub ipv4: Option<std::net::Ipv4Addr>,
    pub volumes: Vec<OrphanVolume>,
    pub reason: String,
}

struct Row {
    id: Uuid,
    target_id: Uuid,
    host: String,
    atomos_id: String,
    atomos_name: String,
    tenant_id: Option<String>,
    state: String,
    vcpus: i32,
    ram_mib: i64,
    ipv4: Option<String>,
    volumes: serde_json::Value,
    reason: String,
    decision: Option<String>,
    adopt_tenant: Option<String>,
    adopt_name: Option<String>,
    decided_by: Option<String>,
    decided_at: Option<DateTime<Utc>>,
    error_message: Option<String>,
    first_seen: DateTime<Utc>,
    last_seen: DateTime<Utc>,
}

impl TryFrom<Row> for Orphan {
    type Error = Error;
    fn try_from(r: Row) -> Result<Orphan, Error> {
        let decision = match (r.decision.as_deref(), r.adopt_tenant) {
            (None, _) => None,
            (Some("delete"), _) => Some(Decision::Delete),
            (Some("adopt"), Some(tenant)) => Some(Decision::Adopt {
                tenant: TenantId(tenant),
                name: r.adopt_name,
            }),
            (Some(other), _) => return Err(corrupt("orphans.decision", other)),
        };
        Ok(Orphan {
            id: OrphanId(r.id),
            target_id: TargetId(r.target_id),
            host: r.host,
            owner: meson_core::naming::parse_vm_atomos_name(&r.atomos_name),
            atomos_id: r.atomos_id,
            atomos_name: r.atomos_name,
            tenant: r.tenant_id.map(TenantId),
            state: r.state,
            vcpus: u32::try_from(r.vcpus).map_err(|_| corrupt("orphans.vcpus", r.vcpus))?,
            ram_mib: u64::try_from(r.ram_mib).map_err(|_| corrupt("orphans.ram_mib", r.ram_mib))?,
            ipv4: r
                .ipv4
                .as_deref()
                .map(str::parse)
                .transpose()
                .map_err(|_| corrupt("orphans.ipv4", r.ipv4.as_deref().unwrap_or_default()))?,
            volumes: serde_json::from_value(r.volumes)
                .map_err(|e| Error::internal_from("orphans.volumes", e))?,
            reason: r.reason,
            decision,
            decided_by: r.decided_by,
            decided_at: r.decided_at,
            error_message: r.error_message,
            first_seen: r.first_seen,
            last_seen: r.last_seen,
        })
    }
}

/// The names of `names` no VM row has (deleted ones included: a VM being
/// deleted is meson's until its host forgets it).
pub async fn unclaimed(pool: &PgPool, names: &[String]) -> Result<Vec<String>, Error> {
    sqlx::query_scalar!(
        r#"select n as "n!" from unnest($1::text[]) n
           where not exists (select 1 from vms where vms.atomos_name = n)"#,
        names
    )
    .fetch_all(pool)
    .await
    .ctx("finding unclaimed VMs")
}

/// The volume names of `names` no volume row has.
pub async fn unclaimed_volumes(pool: &PgPool, names: &[String]) -> Result<Vec<String>, Error> {
    sqlx::query_scalar!(
        r#"select n as "n!" from unnest($1::text[]) n
           where not exists (select 1 from volumes where volumes.atomos_name = n)"#,
        names
    )
    .fetch_all(pool)
    .await
    .ctx("finding unclaimed volumes")
}

/// Every tenant meson knows of: one that ever held a resource, or has a
/// member.
pub async fn known_tenants(pool: &PgPool) -> Result<Vec<TenantId>, Error> {
    let rows = sqlx::query_scalar!(
        r#"select tenant_id as "t!" from tenant_usage
           union select tenant_id from vms
           union select tenant_id from members"#
    )
    .fetch_all(pool)
    .await
    .ctx("listing known tenants")?;
    Ok(rows.into_iter().map(TenantId).collect())
}

/// Records what `target` reported of the VMs no row has: new ones are
/// added, known ones refreshed, and those it no longer reports (gone, or
/// claimed since) forgotten. Returns the target's orphans.
pub async fn observe(pool: &PgPool, target: TargetId, seen: &[Seen]) -> Result<Vec<Orphan>, Error> {
    let mut tx = crate::begin(pool).await?;
    let ids: Vec<String> = seen.iter().map(|s| s.atomos_id.clone()).collect();
    sqlx::query!(
        "delete from orphans where target_id = $1 and not (atomos_id = any($2::text[]))",
        target.0,
        &ids
    )
    .execute(&mut *tx)
    .await
    .ctx("forgetting vanished orphans")?;
    for s in seen {
        let volumes = serde_json::to_value(&s.volumes)
            .map_err(|e| Error::internal_from("orphan volumes", e))?;
        sqlx::query!(
            r#"insert into orphans (id, target_id, atomos_id, atomos_name, tenant_id, state,
                                    vcpus, ram_mib, ipv4, volumes, reason)
               values ($1, $2, $3, $4, $5, $6, $7, $8, $9::text::inet, $10, $11)
               on conflict (target_id, atomos_id) do update set
                 atomos_name = excluded.atomos_name, tenant_id = excluded.tenant_id,
                 state = excluded.state, vcpus = excluded.vcpus, ram_mib = excluded.ram_mib,
                 ipv4 = excluded.ipv4, volumes = excluded.volumes, reason = excluded.reason,
                 last_seen = now()"#,
            Uuid::now_v7(),
            target.0,
            s.atomos_id,
            s.atomos_name,
            s.tenant.as_ref().map(TenantId::as_str),
            s.state,
            i32::try_from(s.vcpus).unwrap_or(i32::MAX),
            i64::try_from(s.ram_mib).unwrap_or(i64::MAX),
            s.ipv4.map(|a| a.to_string()),
            volumes,
            s.reason,
        )
        .execute(&mut *tx)
        .await
        .ctx("recording an orphan")?;
    }
    let rows = select(&mut *tx, Some(target), None).await?;
    crate::commit(tx).await?;
    Ok(rows)
}

async fn select(
    db: impl sqlx::PgExecutor<'_>,
    target: Option<TargetId>,
    id: Option<OrphanId>,
) -> Result<Vec<Orphan>, Error> {
    let rows = sqlx::query_as!(
        Row,
        r#"select o.id, o.target_id, t.name as host, o.atomos_id, o.atomos_name, o.tenant_id,
                  o.state, o.vcpus, o.ram_mib, host(o.ipv4) as ipv4, o.volumes, o.reason,
                  o.decision, o.adopt_tenant, o.adopt_name, o.decided_by, o.decided_at,
                  o.error_message, o.first_seen, o.last_seen
           from orphans o join atomos_targets t on t.id = o.target_id
           where ($1::uuid is null or o.target_id = $1) and ($2::uuid is null or o.id = $2)
           order by o.first_seen, o.id"#,
        target.map(|t| t.0),
        id.map(|i| i.0),
    )
    .fetch_all(db)
    .await
    .ctx("reading orphans")?;
    rows.into_iter().map(Orphan::try_from).collect()
}

/// Every orphan, the longest known first.
pub async fn list(pool: &PgPool) -> Result<Vec<Orphan>, Error> {
    select(pool, None, None).await
}

pub async fn get(pool: &PgPool, id: OrphanId) -> Result<Orphan, Error> {
    select(pool, None, Some(id))
        .await?
        .pop()
        .ok_or_else(|| Error::not_found("orphan", id))
}

/// Records an operator's decision; an orphan holds one decision (a second
/// one is a conflict: it may be under way).
pub async fn decide(
    pool: &PgPool,
    id: OrphanId,
    decision: &Decision,
    by: &str,
) -> Result<Orphan, Error> {
    let (tenant, name) = match decision {
        Decision::Adopt { tenant, name } => (Some(tenant.as_str()), name.as_deref()),
        Decision::Delete => (None, None),
    };
    let done = sqlx::query!(
        r#"update orphans set decision = $2, adopt_tenant = $3, adopt_name = $4,
                              decided_by = $5, decided_at = now(), error_message = null
           where id = $1 and decision is null"#,
        id.0,
        decision.as_str(),
        tenant,
        name,
        by,
    )
    .execute(pool)
    .await
    .ctx("deciding for an orphan")?
    .rows_affected();
    let orphan = get(pool, id).await?;
    if done == 0 {
        return Err(Error::Conflict {
            message: format!(
                "orphan {id} is already decided ({}): meson carries it out on its next pass",
                orphan.decision.as_ref().map_or("none", Decision::as_str)
            ),
        });
    }
    Ok(orphan)
}

/// Records why a decision could not be carried out (tried again next pass).
pub async fn failed(pool: &PgPool, id: OrphanId, message: &str) -> Result<(), Error> {
    sqlx::query!(
        "update orphans set error_message = $2 where id = $1",
        id.0,
        message
    )
    .execute(pool)
    .await
    .ctx("recording an orphan's failure")?;
    Ok(())
}

/// Forgets an orphan its host no longer holds (deleted by decision).
pub async fn forget(pool: &PgPool, id: OrphanId) -> Result<(), Error> {
    sqlx::query!("delete from orphans where id = $1", id.0)
        .execute(pool)
        .await
        .ctx("forgetting an orphan")?;
    Ok(())
}

/// Adopts an orphan: writes `vm` (its status, placement and address
/// included) and `volumes`, and forgets the orphan, in one transaction.
/// `false` (nothing written) when the orphan is gone meanwhile; a
/// uniqueness error when the tenant has a VM of that name.
pub async fn adopt(
    pool: &PgPool,
    id: OrphanId,
    vm: &meson_core::vm::Vm,
    volumes: &[meson_core::volume::Volume],
) -> Result<bool, Error> {
    let mut tx: Tx<'_> = crate::begin(pool).await?;
    let gone = sqlx::query!("delete from orphans where id = $1", id.0)
        .execute(&mut *tx)
        .await
        .ctx("taking an orphan")?
        .rows_affected()
        == 0;
    if gone {
        return Ok(false);
    }
    crate::vms::insert_with_volumes(&mut tx, vm, volumes).await?;
    crate::vms::set_placement(&mut *tx, vm.id, vm.placement.as_ref()).await?;
    crate::vms::set_runtime(&mut *tx, vm.id, vm.status, vm.atomos_id.as_deref(), vm.ipv4).await?;
    crate::commit(tx).await?;
    Ok(true)
}

/// Whether a VM row of this id exists (an adoption must not reuse it).
pub async fn vm_exists(pool: &PgPool, id: VmId) -> Result<bool, Error> {
    sqlx::query_scalar!(
        r#"select exists (select 1 from vms where id = $1) as "e!""#,
        id.0
    )
    .fetch_one(pool)
    .await
    .ctx("looking for a vm")
}
