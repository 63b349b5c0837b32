//! Volumes.

use crate::{DbResult, Tx, corrupt};
use meson_core::volume::{Volume, VolumeKind, VolumeStatus};
use meson_core::{Error, TenantId, VmId, VolumeId};
use sqlx::PgPool;
use uuid::Uuid;

struct VolumeRow {
    id: Uuid,
    tenant_id: String,
    vm_id: Option<Uuid>,
    name: String,
    kind: String,
    size_gb: i32,
    atomos_name: String,
    atomos_id: Option<String>,
    status: String,
}

impl TryFrom<VolumeRow> for Volume {
    type Error = Error;
    fn try_from(r: VolumeRow) -> Result<Self, Error> {
        Ok(Volume {
            id: VolumeId(r.id),
            tenant: TenantId(r.tenant_id),
            vm_id: r.vm_id.map(VmId),
            name: r.name,
            kind: VolumeKind::parse(&r.kind).ok_or_else(|| corrupt("volume kind", &r.kind))?,
            size_gb: u32::try_from(r.size_gb).map_err(|_| corrupt("volume size", r.size_gb))?,
            atomos_name: r.atomos_name,
            atomos_id: r.atomos_id,
            status: VolumeStatus::parse(&r.status)
                .ok_or_else(|| corrupt("volume status", &r.status))?,
        })
    }
}

pub async fn insert(tx: &mut Tx<'_>, v: &Volume) -> Result<(), Error> {
    insert_many(tx, std::slice::from_ref(v)).await
}

/// Several volumes in one statement (a VM's boot, cloud-init and data volumes).
pub async fn insert_many(tx: &mut Tx<'_>, vs: &[Volume]) -> Result<(), Error> {
    let mut cols = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for v in vs {
        cols.0.push(v.id.0);
        cols.1.push(v.tenant.as_str().to_owned());
        cols.2.push(v.vm_id.map(|id| id.0));
        cols.3.push(v.name.clone());
        cols.4.push(v.kind.as_str().to_owned());
        cols.5
            .push(i32::try_from(v.size_gb).map_err(|_| Error::invalid("size", "too large"))?);
        cols.6.push(v.atomos_name.clone());
        cols.7.push(v.atomos_id.clone());
        cols.8.push(v.status.as_str().to_owned());
    }
    sqlx::query!(
        r#"insert into volumes (id, tenant_id, vm_id, name, kind, size_gb, atomos_name, atomos_id, status)
           select * from unnest($1::uuid[], $2::text[], $3::uuid[], $4::text[], $5::text[],
                                $6::int4[], $7::text[], $8::text[], $9::text[])"#,
        &cols.0,
        &cols.1,
        &cols.2 as &[Option<Uuid>],
        &cols.3,
        &cols.4,
        &cols.5,
        &cols.6,
        &cols.7 as &[Option<String>],
        &cols.8,
    )
    .execute(&mut **tx)
    .await
    .ctx("inserting volumes")?;
    Ok(())
}

/// The live volumes of some VMs, boot first, then cloud-init, then data volumes by name.
pub async fn list_for_vms(
    pool: impl sqlx::PgExecutor<'_>,
    vms: &[VmId],
) -> Result<Vec<Volume>, Error> {
    let ids: Vec<Uuid> = vms.iter().map(|v| v.0).collect();
    sqlx::query_as!(
        VolumeRow,
        r#"select id, tenant_id, vm_id, name, kind, size_gb, atomos_name, atomos_id, status
           from volumes where vm_id = any($1) and deleted_at is null
           order by vm_id, array_position(array['boot', 'cloudinit', 'data'], kind), name"#,
        &ids,
    )
    .fetch_all(pool)
    .await
    .ctx("listing volumes")?
    .into_iter()
    .map(Volume::try_from)
    .collect()
}

/// Records the AtomOS id of a volume (or forgets it with `None`) and its status.
pub async fn set_atomos(
    pool: &PgPool,
    id: VolumeId,
    atomos_id: Option<&str>,
    status: VolumeStatus,
) -> Result<(), Error> {
    sqlx::query!(
        "update volumes set atomos_id = $2, status = $3 where id = $1",
        id.0,
        atomos_id,
        status.as_str()
    )
    .execute(pool)
    .await
    .ctx("recording a volume's AtomOS id")?;
    Ok(())
}

/// Marks a VM's volumes with a status.
pub async fn set_status_for_vm(pool: &PgPool, vm: VmId, status: VolumeStatus) -> Result<(), Error> {
    sqlx::query!(
        "update volumes set status = $2 where vm_id = $1 and deleted_at is null",
        vm.0,
        status.as_str()
    )
    .execute(pool)
    .await
    .ctx("updating volume status")?;
    Ok(())
}

/// One page of a tenant's live volumes (optionally one VM's or one kind),
/// in id order, and how many match in all.
pub async fn list(
    pool: &PgPool,
    tenant: &TenantId,
    vm: Option<VmId>,
    kind: Option<VolumeKind>,
    limit: i64,
    offset: i64,
) -> Result<(Vec<Volume>, i64), Error> {
    let rows = sqlx::query!(
        r#"select id, tenant_id, vm_id, name, kind, size_gb, atomos_name, atomos_id, status,
                  count(*) over () as "total!"
           from volumes
           where tenant_id = $1 and deleted_at is null
             and ($2::uuid is null or vm_id = $2) and ($3::text is null or kind = $3)
           order by id limit $4 offset $5"#,
        tenant.as_str(),
        vm.map(|v| v.0),
        kind.map(VolumeKind::as_str),
        limit,
        offset,
    )
    .fetch_all(pool)
    .await
    .ctx("listing volumes")?;
    let total = rows.first().map(|r| r.total);
    let volumes = rows
        .into_iter()
        .map(|r| {
            Volume::try_from(VolumeRow {
                id: r.id,
                tenant_id: r.tenant_id,
                vm_id: r.vm_id,
                name: r.name,
                kind: r.kind,
                size_gb: r.size_gb,
                atomos_name: r.atomos_name,
                atomos_id: r.atomos_id,
                status: r.status,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let total = match total {
        Some(n) => n,
        None if offset > 0 => Box::pin(list(pool, tenant, vm, kind, 1, 0)).await?.1,
        None => 0,
    };
    Ok((volumes, total))
}

/// A tenant's live volume.
pub async fn get(pool: &PgPool, tenant: &TenantId, id: VolumeId) -> Result<Volume, Error> {
    sqlx::query_as!(
        VolumeRow,
        r#"select id, tenant_id, vm_id, name, kind, size_gb, atomos_name, atomos_id, status
           from volumes where id = $1 and tenant_id = $2 and deleted_at is null"#,
        id.0,
        tenant.as_str(),
    )
    .fetch_optional(pool)
    .await
    .ctx("fetching a volume")?
    .ok_or_else(|| Error::not_found("volume", id))?
    .try_into()
}
