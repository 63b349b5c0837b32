//! Volumes: a VM's own (boot, cloud-init, data) and standalone ones.

use crate::{DbResult, Tx, corrupt};
use meson_core::labels::Labels;
use meson_core::volume::{Volume, VolumeKind, VolumePlacement, VolumeStatus};
use meson_core::{Error, TargetId, TenantId, VmId, VolumeId};
use sqlx::PgPool;
use uuid::Uuid;

/// A volume as its queries read it (also from JSON: a VM read aggregates
/// its volumes into one column).
#[derive(Debug, sqlx::FromRow, serde::Deserialize)]
pub struct VolumeRow {
    id: Uuid,
    tenant_id: String,
    vm_id: Option<Uuid>,
    name: String,
    kind: String,
    size_gb: i32,
    atomos_name: String,
    atomos_id: Option<String>,
    status: String,
    labels: serde_json::Value,
    bootable: bool,
    readonly: bool,
    target_id: Option<Uuid>,
    host: Option<String>,
    provider: Option<String>,
    region: Option<String>,
    attached_vm_id: Option<Uuid>,
    created_at: chrono::DateTime<chrono::Utc>,
}

impl TryFrom<VolumeRow> for Volume {
    type Error = Error;
    fn try_from(r: VolumeRow) -> Result<Self, Error> {
        let placement = match (r.target_id, r.host, r.provider, r.region) {
            (Some(t), Some(host), Some(provider), Some(region)) => Some(VolumePlacement {
                target_id: TargetId(t),
                host,
                provider,
                region,
            }),
            _ => None,
        };
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
            labels: serde_json::from_value::<Labels>(r.labels)
                .map_err(|e| corrupt("volume labels", e))?,
            bootable: r.bootable,
            readonly: r.readonly,
            placement,
            attached_to: r.attached_vm_id.map(VmId),
            created: r.created_at,
        })
    }
}

pub(crate) fn name_taken<T>(res: Result<T, sqlx::Error>) -> Result<Result<T, sqlx::Error>, Error> {
    crate::unique_violation(res, "volumes_tenant_name", "volume", "name")
}

pub async fn insert(tx: &mut Tx<'_>, v: &Volume) -> Result<(), Error> {
    insert_many(tx, std::slice::from_ref(v)).await
}

/// New volumes as the columns of an `unnest` insert, one array a column.
pub(crate) struct VolumeColumns {
    pub ids: Vec<Uuid>,
    pub tenants: Vec<String>,
    pub vms: Vec<Option<Uuid>>,
    pub names: Vec<String>,
    pub kinds: Vec<String>,
    pub sizes: Vec<i32>,
    pub atomos_names: Vec<String>,
    pub atomos_ids: Vec<Option<String>>,
    pub statuses: Vec<String>,
    pub labels: Vec<serde_json::Value>,
    pub bootable: Vec<bool>,
    pub readonly: Vec<bool>,
    pub created: Vec<chrono::DateTime<chrono::Utc>>,
}

impl VolumeColumns {
    pub fn of(vs: &[Volume]) -> Result<VolumeColumns, Error> {
        let mut c = VolumeColumns {
            ids: Vec::new(),
            tenants: Vec::new(),
            vms: Vec::new(),
            names: Vec::new(),
            kinds: Vec::new(),
            sizes: Vec::new(),
            atomos_names: Vec::new(),
            atomos_ids: Vec::new(),
            statuses: Vec::new(),
            labels: Vec::new(),
            bootable: Vec::new(),
            readonly: Vec::new(),
            created: Vec::new(),
        };
        for v in vs {
            c.ids.push(v.id.0);
            c.tenants.push(v.tenant.as_str().to_owned());
            c.vms.push(v.vm_id.map(|id| id.0));
            c.names.push(v.name.clone());
            c.kinds.push(v.kind.as_str().to_owned());
            c.sizes
                .push(i32::try_from(v.size_gb).map_err(|_| Error::invalid("size", "too large"))?);
            c.atomos_names.push(v.atomos_name.clone());
            c.atomos_ids.push(v.atomos_id.clone());
            c.statuses.push(v.status.as_str().to_owned());
            c.labels.push(
                serde_json::to_value(&v.labels).map_err(|e| Error::internal_from("labels", e))?,
            );
            c.bootable.push(v.bootable);
            c.readonly.push(v.readonly);
            c.created.push(v.created);
        }
        Ok(c)
    }
}

/// Several volumes in one statement (a VM's boot, cloud-init and data
/// volumes); unplaced and unattached.
pub async fn insert_many(tx: &mut Tx<'_>, vs: &[Volume]) -> Result<(), Error> {
    let c = VolumeColumns::of(vs)?;
    let res = sqlx::query!(
        r#"insert into volumes (id, tenant_id, vm_id, name, kind, size_gb, atomos_name, atomos_id,
                                status, labels, bootable, readonly, created_at)
           select * from unnest($1::uuid[], $2::text[], $3::uuid[], $4::text[], $5::text[],
                                $6::int4[], $7::text[], $8::text[], $9::text[], $10::jsonb[],
                                $11::bool[], $12::bool[], $13::timestamptz[])"#,
        &c.ids,
        &c.tenants,
        &c.vms as &[Option<Uuid>],
        &c.names,
        &c.kinds,
        &c.sizes,
        &c.atomos_names,
        &c.atomos_ids as &[Option<String>],
        &c.statuses,
        &c.labels,
        &c.bootable,
        &c.readonly,
        &c.created,
    )
    .execute(&mut **tx)
    .await;
    name_taken(res)?.map(|_| ()).ctx("inserting volumes")
}

/// The live volumes some VMs own, boot first, then cloud-init, then data
/// volumes by name (not the standalone volumes attached to them).
pub async fn list_for_vms(
    pool: impl sqlx::PgExecutor<'_>,
    vms: &[VmId],
) -> Result<Vec<Volume>, Error> {
    let ids: Vec<Uuid> = vms.iter().map(|v| v.0).collect();
    sqlx::query_as!(
        VolumeRow,
        r#"select v.id, v.tenant_id, v.vm_id, v.name, v.kind, v.size_gb, v.atomos_name,
                  v.atomos_id, v.status, v.labels, v.bootable, v.readonly, v.target_id,
                  t.name as "host?", v.provider, v.region, v.attached_vm_id, v.created_at
           from volumes v left join atomos_targets t on t.id = v.target_id
           where v.vm_id = any($1) and v.deleted_at is null
           order by v.vm_id, array_position(array['boot', 'cloudinit', 'data'], v.kind), v.name"#,
        &ids,
    )
    .fetch_all(pool)
    .await
    .ctx("listing volumes")?
    .into_iter()
    .map(Volume::try_from)
    .collect()
}

/// The live standalone volumes attached to some VMs, by name.
pub async fn attached_to_vms(
    pool: impl sqlx::PgExecutor<'_>,
    vms: &[VmId],
) -> Result<Vec<Volume>, Error> {
    let ids: Vec<Uuid> = vms.iter().map(|v| v.0).collect();
    sqlx::query_as!(
        VolumeRow,
        r#"select v.id, v.tenant_id, v.vm_id, v.name, v.kind, v.size_gb, v.atomos_name,
                  v.atomos_id, v.status, v.labels, v.bootable, v.readonly, v.target_id,
                  t.name as "host?", v.provider, v.region, v.attached_vm_id, v.created_at
           from volumes v left join atomos_targets t on t.id = v.target_id
           where v.attached_vm_id = any($1) and v.deleted_at is null
           order by v.attached_vm_id, v.name"#,
        &ids,
    )
    .fetch_all(pool)
    .await
    .ctx("listing attached volumes")?
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

/// Marks the volumes a VM owns with a status.
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

/// Sets a live volume's status (not `attached`: see [`attach`]).
pub async fn set_status(
    db: impl sqlx::PgExecutor<'_>,
    id: VolumeId,
    status: VolumeStatus,
) -> Result<(), Error> {
    sqlx::query!(
        "update volumes set status = $2 where id = $1 and deleted_at is null",
        id.0,
        status.as_str()
    )
    .execute(db)
    .await
    .ctx("updating volume status")?;
    Ok(())
}

/// Records (or clears) where a standalone volume lives.
pub async fn set_placement(
    pool: &PgPool,
    id: VolumeId,
    placement: Option<&VolumePlacement>,
) -> Result<(), Error> {
    sqlx::query!(
        "update volumes set target_id = $2, provider = $3, region = $4 where id = $1",
        id.0,
        placement.map(|p| p.target_id.0),
        placement.map(|p| p.provider.as_str()),
        placement.map(|p| p.region.as_str()),
    )
    .execute(pool)
    .await
    .ctx("recording a volume's placement")?;
    Ok(())
}

/// Which volumes a list returns.
#[derive(Clone, Debug, Default)]
pub struct VolumeFilter {
    /// Owned by or attached to this VM.
    pub vm: Option<VmId>,
    pub kind: Option<VolumeKind>,
    /// Only standalone volumes (`true`) or only VMs' own (`false`).
    pub standalone: Option<bool>,
}

impl crate::list::Filter for VolumeFilter {
    fn push_conditions(
        &self,
        qb: &mut sqlx::QueryBuilder<'_, sqlx::Postgres>,
    ) -> Result<(), Error> {
        if let Some(vm) = self.vm {
            qb.push(" and (x.vm_id = ")
                .push_bind(vm.0)
                .push(" or x.attached_vm_id = ")
                .push_bind(vm.0)
                .push(")");
        }
        if let Some(kind) = self.kind {
            qb.push(" and x.kind = ").push_bind(kind.as_str());
        }
        if let Some(standalone) = self.standalone {
            qb.push(" and (x.vm_id is null) = ").push_bind(standalone);
        }
        Ok(())
    }

    fn matches_all(&self) -> bool {
        self.vm.is_none() && self.kind.is_none() && self.standalone.is_none()
    }
}

/// What a volume list draws from.
impl crate::Listable for Volume {
    type Row = VolumeRow;
    type Filter = VolumeFilter;
    const SOURCE: crate::Source = crate::Source {
        table: "volumes",
        only: "",
        columns: "v.id, v.tenant_id, v.vm_id, v.name, v.kind, v.size_gb, v.atomos_name, \
              v.atomos_id, v.status, v.labels, v.bootable, v.readonly, v.target_id, \
              t.name as host, v.provider, v.region, v.attached_vm_id, v.created_at",
        joins: "join volumes v on v.id = page.id left join atomos_targets t on t.id = v.target_id",
        usage: None,
        listing: "listing volumes",
        counting: "counting volumes",
    };
}

/// A tenant's live volume.
pub async fn get(
    db: impl sqlx::PgExecutor<'_>,
    tenant: &TenantId,
    id: VolumeId,
) -> Result<Volume, Error> {
    sqlx::query_as!(
        VolumeRow,
        r#"select v.id, v.tenant_id, v.vm_id, v.name, v.kind, v.size_gb, v.atomos_name,
                  v.atomos_id, v.status, v.labels, v.bootable, v.readonly, v.target_id,
                  t.name as "host?", v.provider, v.region, v.attached_vm_id, v.created_at
           from volumes v left join atomos_targets t on t.id = v.target_id
           where v.id = $1 and v.tenant_id = $2 and v.deleted_at is null"#,
        id.0,
        tenant.as_str(),
    )
    .fetch_optional(db)
    .await
    .ctx("fetching a volume")?
    .ok_or_else(|| Error::not_found("volume", id))?
    .try_into()
}

/// Any tenant's volume, deleted ones included (for workers).
pub async fn get_including_deleted(
    db: impl sqlx::PgExecutor<'_>,
    id: VolumeId,
) -> Result<Volume, Error> {
    sqlx::query_as!(
        VolumeRow,
        r#"select v.id, v.tenant_id, v.vm_id, v.name, v.kind, v.size_gb, v.atomos_name,
                  v.atomos_id, v.status, v.labels, v.bootable, v.readonly, v.target_id,
                  t.name as "host?", v.provider, v.region, v.attached_vm_id, v.created_at
           from volumes v left join atomos_targets t on t.id = v.target_id
           where v.id = $1"#,
        id.0,
    )
    .fetch_optional(db)
    .await
    .ctx("fetching a volume")?
    .ok_or_else(|| Error::not_found("volume", id))?
    .try_into()
}

/// Locks a tenant's live standalone volume for the rest of `tx` (a VM
/// create attaching it, a delete) and reads it.
pub async fn lock_standalone(
    tx: &mut Tx<'_>,
    tenant: &TenantId,
    id: VolumeId,
) -> Result<Volume, Error> {
    let found = sqlx::query_scalar!(
        r#"select id from volumes
           where id = $1 and tenant_id = $2 and deleted_at is null and vm_id is null
           for update"#,
        id.0,
        tenant.as_str(),
    )
    .fetch_optional(&mut **tx)
    .await
    .ctx("locking a volume")?;
    if found.is_none() {
        return Err(Error::not_found("volume", id));
    }
    get(&mut **tx, tenant, id).await
}

/// Attaches a locked, available standalone volume to a VM.
pub async fn attach(tx: &mut Tx<'_>, id: VolumeId, vm: VmId) -> Result<(), Error> {
    sqlx::query!(
        "update volumes set attached_vm_id = $2, status = 'attached' where id = $1",
        id.0,
        vm.0
    )
    .execute(&mut **tx)
    .await
    .ctx("attaching a volume")?;
    Ok(())
}

/// Detaches a standalone volume from `vm` (if still attached to it): it is
/// available again.
pub async fn detach(db: impl sqlx::PgExecutor<'_>, id: VolumeId, vm: VmId) -> Result<(), Error> {
    sqlx::query!(
        r#"update volumes set attached_vm_id = null, status = 'available'
           where id = $1 and attached_vm_id = $2 and deleted_at is null"#,
        id.0,
        vm.0
    )
    .execute(db)
    .await
    .ctx("detaching a volume")?;
    Ok(())
}

/// Records where a volume is now after its VM moved host: its AtomOS id
/// there and, for a standalone volume, its placement (a VM's own volumes
/// live on their VM's host). Its status stays.
pub async fn moved(
    db: impl sqlx::PgExecutor<'_>,
    id: VolumeId,
    atomos_id: &str,
    placement: Option<&VolumePlacement>,
) -> Result<(), Error> {
    sqlx::query!(
        r#"update volumes set atomos_id = $2,
                  target_id = coalesce($3, target_id), provider = coalesce($4, provider),
                  region = coalesce($5, region)
           where id = $1"#,
        id.0,
        atomos_id,
        placement.map(|p| p.target_id.0),
        placement.map(|p| p.provider.as_str()),
        placement.map(|p| p.region.as_str()),
    )
    .execute(db)
    .await
    .ctx("moving a volume")?;
    Ok(())
}

/// Records a volume's size (a resize's, or AtomOS's after a failed one);
/// a VM's data volume's size in the VM's spec too (its entry of the same
/// name), so placement and the spec say what the VM has.
pub async fn set_size(
    db: impl sqlx::PgExecutor<'_>,
    id: VolumeId,
    size_gb: u32,
) -> Result<(), Error> {
    sqlx::query!(
        r#"with v as (
               update volumes set size_gb = $2 where id = $1
               returning vm_id, name, kind)
           update vms set spec = jsonb_set(vms.spec, array['volumes', (
                   select (x.ord - 1)::text
                   from jsonb_array_elements(vms.spec -> 'volumes') with ordinality as x(e, ord)
                   where x.e ->> 'name' = v.name limit 1), 'size_gb'], to_jsonb($2::int))
           from v
           where vms.id = v.vm_id and v.kind = 'data'
             and vms.spec -> 'volumes' @> jsonb_build_array(jsonb_build_object('name', v.name))"#,
        id.0,
        size_gb as i32
    )
    .execute(db)
    .await
    .ctx("resizing a volume")?;
    Ok(())
}

/// Detaches every standalone volume attached to a VM: they are available again.
pub async fn detach_all(db: impl sqlx::PgExecutor<'_>, vm: VmId) -> Result<(), Error> {
    sqlx::query!(
        r#"update volumes set attached_vm_id = null, status = 'available'
           where attached_vm_id = $1 and deleted_at is null"#,
        vm.0
    )
    .execute(db)
    .await
    .ctx("detaching volumes")?;
    Ok(())
}

/// How a standalone volume's rename and/or relabel reports (through
/// [`crate::rename`]); a VM's own volumes are named by the VM.
pub const RENAMED: crate::Renamed = crate::Renamed {
    kind: "volume",
    name_index: Some("volumes_tenant_name"),
    context: "updating a volume",
    also: "x.vm_id is null",
};

/// Forgets a standalone volume (it no longer counts against the quota).
pub async fn mark_deleted(db: impl sqlx::PgExecutor<'_>, id: VolumeId) -> Result<(), Error> {
    sqlx::query!(
        r#"update volumes set deleted_at = now(), status = 'deleting'
           where id = $1 and deleted_at is null"#,
        id.0
    )
    .execute(db)
    .await
    .ctx("deleting a volume")?;
    Ok(())
}
