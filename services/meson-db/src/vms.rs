//! Virtual machines.

use crate::{DbResult, Tx, corrupt};
use chrono::{DateTime, Utc};
use meson_core::labels::Labels;
use meson_core::vm::{Placement, Vm, VmSpec, VmStatus};
use meson_core::{Error, TargetId, TenantId, VmId};
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

#[derive(sqlx::FromRow)]
struct VmRow {
    id: Uuid,
    tenant_id: String,
    name: String,
    status: String,
    labels: Value,
    spec: Value,
    atomos_name: String,
    atomos_id: Option<String>,
    target_id: Option<Uuid>,
    target_name: Option<String>,
    provider: Option<String>,
    region: Option<String>,
    ipv4: Option<String>,
    price_hourly: Option<f64>,
    price_monthly: Option<f64>,
    currency: Option<String>,
    created_at: DateTime<Utc>,
    error_message: Option<String>,
}

impl TryFrom<VmRow> for Vm {
    type Error = Error;
    fn try_from(r: VmRow) -> Result<Self, Error> {
        let placement = match (r.target_id, r.provider, r.region) {
            (Some(target_id), Some(provider), Some(region)) => Some(Placement {
                target_id: TargetId(target_id),
                host: r.target_name.unwrap_or_default(),
                provider,
                region,
                price_hourly: r.price_hourly.unwrap_or(0.0),
                price_monthly: r.price_monthly.unwrap_or(0.0),
                currency: r.currency.unwrap_or_else(|| "EUR".to_owned()),
            }),
            _ => None,
        };
        Ok(Vm {
            id: VmId(r.id),
            tenant: TenantId(r.tenant_id),
            name: r.name,
            status: VmStatus::parse(&r.status).ok_or_else(|| corrupt("vm status", &r.status))?,
            labels: serde_json::from_value::<Labels>(r.labels)
                .map_err(|e| Error::internal_from("decoding vm labels", e))?,
            spec: serde_json::from_value::<VmSpec>(r.spec)
                .map_err(|e| Error::internal_from("decoding vm spec", e))?,
            atomos_name: r.atomos_name,
            atomos_id: r.atomos_id,
            placement,
            ipv4: r
                .ipv4
                .as_deref()
                .map(str::parse)
                .transpose()
                .map_err(|_| corrupt("ipv4", "?"))?,
            created: r.created_at,
            error_message: r.error_message,
        })
    }
}

/// A write that broke the per-tenant name uniqueness becomes `uniqueness_error`
/// on `name`; any other result passes through.
fn name_taken<T>(res: Result<T, sqlx::Error>) -> Result<Result<T, sqlx::Error>, Error> {
    crate::unique_violation(res, "vms_tenant_name", "vm", "name")
}

pub async fn insert(tx: &mut Tx<'_>, vm: &Vm) -> Result<(), Error> {
    let labels = serde_json::to_value(&vm.labels).map_err(|e| Error::internal_from("labels", e))?;
    let spec = serde_json::to_value(&vm.spec).map_err(|e| Error::internal_from("spec", e))?;
    let res = sqlx::query!(
        r#"insert into vms (id, tenant_id, name, status, labels, spec, atomos_name, created_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8)"#,
        vm.id.0,
        vm.tenant.as_str(),
        vm.name,
        vm.status.as_str(),
        labels,
        spec,
        vm.atomos_name,
        vm.created,
    )
    .execute(&mut **tx)
    .await;
    name_taken(res)?.map(|_| ()).ctx("inserting a vm")
}

/// Writes a new VM and its volumes.
pub async fn insert_with_volumes(
    tx: &mut Tx<'_>,
    vm: &Vm,
    volumes: &[meson_core::volume::Volume],
) -> Result<(), Error> {
    insert(tx, vm).await?;
    crate::volumes::insert_many(tx, volumes).await
}

/// A tenant's own live VM (not a cluster's node).
pub async fn get(db: impl sqlx::PgExecutor<'_>, tenant: &TenantId, id: VmId) -> Result<Vm, Error> {
    get_with(db, Some(tenant), id, false).await
}

/// Any tenant's live VM, cluster nodes included (for workers).
pub async fn get_any(db: impl sqlx::PgExecutor<'_>, id: VmId) -> Result<Vm, Error> {
    get_with(db, None, id, false).await
}

/// Any VM even if it was deleted: a delete workflow resumed after its last
/// step must still find what it deleted.
pub async fn get_including_deleted(db: impl sqlx::PgExecutor<'_>, id: VmId) -> Result<Vm, Error> {
    get_with(db, None, id, true).await
}

/// A VM of `tenant` (None: any tenant's, nodes included), deleted ones too
/// when `include_deleted`.
async fn get_with(
    pool: impl sqlx::PgExecutor<'_>,
    tenant: Option<&TenantId>,
    id: VmId,
    include_deleted: bool,
) -> Result<Vm, Error> {
    sqlx::query_as!(
        VmRow,
        r#"select v.id, v.tenant_id, v.name, v.status, v.labels, v.spec, v.atomos_name,
                  v.atomos_id, v.target_id, t.name as "target_name?", v.provider, v.region,
                  host(v.ipv4) as "ipv4?", v.price_hourly, v.price_monthly, v.currency,
                  v.created_at, v.error_message
           from vms v left join atomos_targets t on t.id = v.target_id
           where v.id = $1 and ($2::text is null or (v.tenant_id = $2 and v.cluster_id is null))
             and ($3 or v.deleted_at is null)"#,
        id.0,
        tenant.map(TenantId::as_str),
        include_deleted,
    )
    .fetch_optional(pool)
    .await
    .ctx("fetching a vm")?
    .ok_or_else(|| Error::not_found("vm", id))?
    .try_into()
}

/// Several VMs by id (any tenant, deleted ones included), in id order; one
/// query however many (a cluster's view reads all its nodes' VMs).
pub async fn get_many(pool: impl sqlx::PgExecutor<'_>, ids: &[VmId]) -> Result<Vec<Vm>, Error> {
    let ids: Vec<Uuid> = ids.iter().map(|v| v.0).collect();
    sqlx::query_as!(
        VmRow,
        r#"select v.id, v.tenant_id, v.name, v.status, v.labels, v.spec, v.atomos_name,
                  v.atomos_id, v.target_id, t.name as "target_name?", v.provider, v.region,
                  host(v.ipv4) as "ipv4?", v.price_hourly, v.price_monthly, v.currency,
                  v.created_at, v.error_message
           from vms v left join atomos_targets t on t.id = v.target_id
           where v.id = any($1)
           order by v.id"#,
        &ids,
    )
    .fetch_all(pool)
    .await
    .ctx("fetching vms")?
    .into_iter()
    .map(Vm::try_from)
    .collect()
}

/// Which VMs to list and in what order.
pub use crate::ListFilter as VmFilter;

/// What a VM list draws from: the tenant's own VMs (cluster nodes apart).
const LISTED: crate::list::Source = crate::list::Source {
    table: "vms",
    only: "x.cluster_id is null",
    columns: "v.id, v.tenant_id, v.name, v.status, v.labels, v.spec, v.atomos_name, \
              v.atomos_id, v.target_id, t.name as target_name, v.provider, v.region, \
              host(v.ipv4) as ipv4, v.price_hourly, v.price_monthly, v.currency, \
              v.created_at, v.error_message",
    joins: "join vms v on v.id = page.id left join atomos_targets t on t.id = v.target_id",
    usage: Some("vms"),
    listing: "listing vms",
    counting: "counting vms",
};

/// One page of a tenant's VMs, and how many match in all. The order always
/// ends with the id, so pages are stable under inserts. In the default
/// order a page costs about the same however many VMs the tenant holds; the
/// total comes from the page itself when it can, else from the kept usage
/// (no filter) or a count.
pub async fn list(
    pool: &PgPool,
    tenant: &TenantId,
    filter: &VmFilter,
    limit: i64,
    offset: i64,
) -> Result<(Vec<Vm>, i64), Error> {
    LISTED
        .page_at::<VmRow, _>(pool, tenant, filter, limit, offset)
        .await
}

/// A page of at most `limit` from `start` (see [`list`]), on `conn`, and
/// where the next one starts: from a cursor ([`crate::Start::After`]) it
/// costs what the first page does however deep it is.
pub async fn page(
    conn: &mut sqlx::PgConnection,
    tenant: &TenantId,
    filter: &VmFilter,
    start: &crate::Start,
    limit: i64,
) -> Result<crate::Listed<Vm>, Error> {
    LISTED
        .page::<VmRow, _>(conn, tenant, filter, start, limit)
        .await
}

/// Renames a VM and/or replaces its labels.
pub async fn update(
    pool: &PgPool,
    tenant: &TenantId,
    id: VmId,
    name: Option<&str>,
    labels: Option<&Labels>,
) -> Result<(), Error> {
    let labels = crate::labels_json(labels)?;
    let res = sqlx::query!(
        r#"update vms set name = coalesce($3, name), labels = coalesce($4, labels)
           where id = $1 and tenant_id = $2 and deleted_at is null and cluster_id is null"#,
        id.0,
        tenant.as_str(),
        name,
        labels,
    )
    .execute(pool)
    .await;
    crate::updated(name_taken(res)?, "vm", id, "updating a vm")
}

pub async fn set_status(
    db: impl sqlx::PgExecutor<'_>,
    id: VmId,
    status: VmStatus,
) -> Result<(), Error> {
    sqlx::query!(
        "update vms set status = $2, error_message = null where id = $1",
        id.0,
        status.as_str()
    )
    .execute(db)
    .await
    .ctx("updating vm status")?;
    Ok(())
}

/// Records where the VM was placed (or clears it with `None`).
pub async fn set_placement(
    db: impl sqlx::PgExecutor<'_>,
    id: VmId,
    p: Option<&Placement>,
) -> Result<(), Error> {
    sqlx::query!(
        r#"update vms set target_id = $2, provider = $3, region = $4,
                          price_hourly = $5, price_monthly = $6, currency = $7
           where id = $1"#,
        id.0,
        p.map(|p| p.target_id.0),
        p.map(|p| p.provider.as_str()),
        p.map(|p| p.region.as_str()),
        p.map(|p| p.price_hourly),
        p.map(|p| p.price_monthly),
        p.map(|p| p.currency.as_str()),
    )
    .execute(db)
    .await
    .ctx("recording vm placement")?;
    Ok(())
}

/// Records AtomOS's id and address for the VM and its status.
pub async fn set_runtime(
    pool: &PgPool,
    id: VmId,
    status: VmStatus,
    atomos_id: Option<&str>,
    ipv4: Option<std::net::Ipv4Addr>,
) -> Result<(), Error> {
    sqlx::query!(
        "update vms set status = $2, atomos_id = $3, ipv4 = $4::text::inet, error_message = null
         where id = $1",
        id.0,
        status.as_str(),
        atomos_id,
        ipv4.map(|a| a.to_string()),
    )
    .execute(pool)
    .await
    .ctx("recording vm runtime state")?;
    Ok(())
}

/// Marks the VM and all its volumes deleted; they stay for the record.
pub async fn mark_deleted(tx: &mut Tx<'_>, id: VmId) -> Result<(), Error> {
    sqlx::query!(
        "update volumes set deleted_at = now(), status = 'deleting' where vm_id = $1 and deleted_at is null",
        id.0
    )
    .execute(&mut **tx)
    .await
    .ctx("deleting vm volumes")?;
    // Standalone volumes outlive it: available again, still on AtomOS.
    crate::volumes::detach_all(&mut **tx, id).await?;
    crate::networks::detach_vm(tx, id).await?;
    crate::reservations::release(&mut **tx, id).await?;
    sqlx::query!(
        "update vms set deleted_at = now(), status = 'deleting' where id = $1 and deleted_at is null",
        id.0
    )
    .execute(&mut **tx)
    .await
    .ctx("deleting a vm")?;
    Ok(())
}

/// A standalone VM as drift detection compares it with its host.
#[derive(Clone, Debug)]
pub struct Watched {
    pub id: VmId,
    pub atomos_name: String,
    pub status: VmStatus,
    pub target: TargetId,
    pub host: String,
}

/// Every tenant's standalone VMs (not cluster nodes: auto-repair watches
/// those) that meson records `running` or `off` on a host, with no action
/// running on them, ordered by host; and the database's time of the read.
pub async fn watched(pool: &PgPool) -> Result<(Vec<Watched>, DateTime<Utc>), Error> {
    let mut tx = pool.begin().await.ctx("beginning a transaction")?;
    let at = sqlx::query_scalar!(r#"select now() as "now!""#)
        .fetch_one(&mut *tx)
        .await
        .ctx("reading the time")?;
    let rows = sqlx::query!(
        r#"select v.id, v.atomos_name, v.status, v.target_id as "target_id!", t.name as host
           from vms v join atomos_targets t on t.id = v.target_id
           where v.deleted_at is null and v.cluster_id is null and v.status in ('running', 'off')
             and not exists (select 1 from jobs j where j.concurrency_key = 'vm:' || v.id::text
                             and j.state in ('available', 'running'))
           order by v.target_id, v.id"#
    )
    .fetch_all(&mut *tx)
    .await
    .ctx("listing the VMs to compare with AtomOS")?;
    tx.commit().await.ctx("ending a read")?;
    let out = rows
        .into_iter()
        .map(|r| {
            Ok(Watched {
                id: VmId(r.id),
                atomos_name: r.atomos_name,
                status: VmStatus::parse(&r.status)
                    .ok_or_else(|| corrupt("vm status", &r.status))?,
                target: TargetId(r.target_id),
                host: r.host,
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok((out, at))
}

/// Records what drift detection found: the VM goes from `from` to `to`
/// with `message`, unless it changed since `seen_at` (its host was listed
/// after that) or an action took it meanwhile. Returns whether it did.
pub async fn record_drift(
    pool: &PgPool,
    id: VmId,
    from: VmStatus,
    to: VmStatus,
    message: Option<&str>,
    seen_at: DateTime<Utc>,
) -> Result<bool, Error> {
    let done = sqlx::query!(
        r#"update vms set status = $3, error_message = $4
           where id = $1 and status = $2 and deleted_at is null and updated_at < $5
             and not exists (select 1 from jobs j where j.concurrency_key = 'vm:' || vms.id::text
                             and j.state in ('available', 'running'))"#,
        id.0,
        from.as_str(),
        to.as_str(),
        message,
        seen_at,
    )
    .execute(pool)
    .await
    .ctx("recording a VM's drift")?;
    Ok(done.rows_affected() == 1)
}

/// Locks the VM's row until `tx` ends and returns where it is placed now:
/// a placement racing another (a retried attempt of the same workflow)
/// keeps the one written first.
pub async fn lock_placement(tx: &mut Tx<'_>, id: VmId) -> Result<Option<Placement>, Error> {
    sqlx::query_scalar!("select id from vms where id = $1 for update", id.0)
        .fetch_optional(&mut **tx)
        .await
        .ctx("locking a vm")?;
    Ok(get_many(&mut **tx, &[id])
        .await?
        .into_iter()
        .next()
        .and_then(|v| v.placement))
}
