//! Backups: copies of a VM's volumes on its host, and VMs' backup policies.

use crate::{DbResult, Tx, corrupt};
use chrono::{DateTime, Utc};
use meson_core::backup::{Backup, BackupKind, BackupPolicy, BackupStatus, BackupVolume};
use meson_core::labels::Labels;
use meson_core::vm::VmSpec;
use meson_core::{ActionId, BackupId, Error, TargetId, TenantId, VmId};
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

/// A backup as its queries read it (with its host's name and place).
#[derive(Debug, sqlx::FromRow)]
pub struct BackupRow {
    id: Uuid,
    tenant_id: String,
    vm_id: Uuid,
    vm_name: String,
    name: String,
    labels: Value,
    kind: String,
    status: String,
    target_id: Uuid,
    host: String,
    provider: String,
    region: String,
    size_gb: i32,
    volumes: Value,
    spec: Value,
    error_message: Option<String>,
    created_at: DateTime<Utc>,
    expires_at: Option<DateTime<Utc>>,
}

impl TryFrom<BackupRow> for Backup {
    type Error = Error;
    fn try_from(r: BackupRow) -> Result<Self, Error> {
        Ok(Backup {
            id: BackupId(r.id),
            tenant: TenantId(r.tenant_id),
            vm_id: VmId(r.vm_id),
            vm_name: r.vm_name,
            name: r.name,
            labels: serde_json::from_value::<Labels>(r.labels)
                .map_err(|e| corrupt("backup labels", e))?,
            kind: BackupKind::parse(&r.kind).ok_or_else(|| corrupt("backup kind", &r.kind))?,
            status: BackupStatus::parse(&r.status)
                .ok_or_else(|| corrupt("backup status", &r.status))?,
            target_id: TargetId(r.target_id),
            host: r.host,
            provider: r.provider,
            region: r.region,
            size_gb: u32::try_from(r.size_gb).map_err(|_| corrupt("backup size", r.size_gb))?,
            volumes: serde_json::from_value::<Vec<BackupVolume>>(r.volumes)
                .map_err(|e| corrupt("backup volumes", e))?,
            spec: serde_json::from_value::<VmSpec>(r.spec)
                .map_err(|e| corrupt("backup spec", e))?,
            error_message: r.error_message,
            created: r.created_at,
            expires: r.expires_at,
        })
    }
}

fn json(what: &'static str, v: &impl serde::Serialize) -> Result<Value, Error> {
    serde_json::to_value(v).map_err(|e| Error::internal_from(what, e))
}

/// Writes a new backup (its size counts against `images_gb` from here).
pub async fn insert(tx: &mut Tx<'_>, b: &Backup) -> Result<(), Error> {
    sqlx::query!(
        r#"insert into backups (id, tenant_id, vm_id, vm_name, name, labels, kind, status,
                                target_id, size_gb, volumes, spec, created_at, expires_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"#,
        b.id.0,
        b.tenant.as_str(),
        b.vm_id.0,
        b.vm_name,
        b.name,
        json("labels", &b.labels)?,
        b.kind.as_str(),
        b.status.as_str(),
        b.target_id.0,
        i32::try_from(b.size_gb).map_err(|_| Error::invalid("size", "too large"))?,
        json("volumes", &b.volumes)?,
        json("spec", &b.spec)?,
        b.created,
        b.expires,
    )
    .execute(&mut **tx)
    .await
    .ctx("inserting a backup")?;
    Ok(())
}

/// Which backups a read returns: every condition given holds.
#[derive(Clone, Copy, Debug, Default)]
struct Select<'a> {
    id: Option<BackupId>,
    tenant: Option<&'a TenantId>,
    vm: Option<VmId>,
    /// Deleted ones too (for workers).
    deleted: bool,
}

/// The one read of backups, oldest first.
async fn select(db: impl sqlx::PgExecutor<'_>, s: Select<'_>) -> Result<Vec<Backup>, Error> {
    sqlx::query_as!(
        BackupRow,
        r#"select b.id, b.tenant_id, b.vm_id, b.vm_name, b.name, b.labels, b.kind, b.status,
                  b.target_id, t.name as host, t.provider, t.region, b.size_gb, b.volumes,
                  b.spec, b.error_message, b.created_at, b.expires_at
           from backups b join atomos_targets t on t.id = b.target_id
           where ($1::uuid is null or b.id = $1)
             and ($2::text is null or b.tenant_id = $2)
             and ($3::uuid is null or b.vm_id = $3)
             and ($4 or b.deleted_at is null)
           order by b.created_at, b.id"#,
        s.id.map(|i| i.0),
        s.tenant.map(|t| t.as_str()),
        s.vm.map(|v| v.0),
        s.deleted,
    )
    .fetch_all(db)
    .await
    .ctx("reading backups")?
    .into_iter()
    .map(TryInto::try_into)
    .collect()
}

async fn one(db: impl sqlx::PgExecutor<'_>, id: BackupId, s: Select<'_>) -> Result<Backup, Error> {
    select(db, Select { id: Some(id), ..s })
        .await?
        .pop()
        .ok_or_else(|| Error::not_found("backup", id))
}

/// A tenant's live backup.
pub async fn get(
    db: impl sqlx::PgExecutor<'_>,
    tenant: &TenantId,
    id: BackupId,
) -> Result<Backup, Error> {
    let s = Select {
        tenant: Some(tenant),
        ..Select::default()
    };
    one(db, id, s).await
}

/// A tenant's live backup, its row locked until the transaction ends (a
/// delete and a restore that reads it do not cross).
pub async fn lock(tx: &mut Tx<'_>, tenant: &TenantId, id: BackupId) -> Result<Backup, Error> {
    let found = sqlx::query_scalar!(
        r#"select id from backups where id = $1 and tenant_id = $2 and deleted_at is null
           for update"#,
        id.0,
        tenant.as_str(),
    )
    .fetch_optional(&mut **tx)
    .await
    .ctx("locking a backup")?;
    if found.is_none() {
        return Err(Error::not_found("backup", id));
    }
    one(&mut **tx, id, Select::default()).await
}

/// Any backup, deleted ones included (for workers).
pub async fn get_including_deleted(
    db: impl sqlx::PgExecutor<'_>,
    id: BackupId,
) -> Result<Backup, Error> {
    let s = Select {
        deleted: true,
        ..Select::default()
    };
    one(db, id, s).await
}

/// A VM's live backups, oldest first.
pub async fn of_vm(db: impl sqlx::PgExecutor<'_>, vm: VmId) -> Result<Vec<Backup>, Error> {
    let s = Select {
        vm: Some(vm),
        ..Select::default()
    };
    select(db, s).await
}

/// Sets a live backup's status, with why when it is `error`, if it is one
/// of `from`; answers whether it was.
pub async fn set_status(
    db: impl sqlx::PgExecutor<'_>,
    id: BackupId,
    from: &[BackupStatus],
    to: BackupStatus,
    error_message: Option<&str>,
) -> Result<bool, Error> {
    let from: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
    let done = sqlx::query!(
        r#"update backups set status = $3, error_message = $4
           where id = $1 and status = any($2) and deleted_at is null"#,
        id.0,
        &from as &[&str],
        to.as_str(),
        error_message,
    )
    .execute(db)
    .await
    .ctx("updating a backup's status")?;
    Ok(done.rows_affected() == 1)
}

/// Records the copies a host took: the backup is `available`, its size
/// theirs.
pub async fn record_taken(
    db: impl sqlx::PgExecutor<'_>,
    id: BackupId,
    volumes: &[BackupVolume],
    size_gb: u32,
) -> Result<(), Error> {
    sqlx::query!(
        r#"update backups set status = 'available', volumes = $2, size_gb = $3,
                  error_message = null
           where id = $1 and deleted_at is null and status = 'creating'"#,
        id.0,
        json("volumes", &volumes)?,
        i32::try_from(size_gb.max(1)).map_err(|_| corrupt("backup size", size_gb))?,
    )
    .execute(db)
    .await
    .ctx("recording a backup")?;
    Ok(())
}

/// How a backup is renamed and relabelled ([`crate::rename`]); names
/// repeat.
pub const RENAMED: crate::Renamed = crate::Renamed {
    kind: "backup",
    name_index: None,
    context: "updating a backup",
    also: "",
};

/// Forgets a backup (it no longer counts against the quota).
pub async fn mark_deleted(db: impl sqlx::PgExecutor<'_>, id: BackupId) -> Result<(), Error> {
    sqlx::query!(
        r#"update backups set deleted_at = now(), status = 'deleting'
           where id = $1 and deleted_at is null"#,
        id.0
    )
    .execute(db)
    .await
    .ctx("deleting a backup")?;
    Ok(())
}

/// Sets (or clears, `None`) when a VM's automatic backups expire: set when
/// the VM goes or its policy is disabled, cleared when it is enabled again.
pub async fn set_expiry(
    db: impl sqlx::PgExecutor<'_>,
    vm: VmId,
    expires: Option<DateTime<Utc>>,
) -> Result<(), Error> {
    sqlx::query!(
        r#"update backups set expires_at = $2
           where vm_id = $1 and kind = 'automatic' and deleted_at is null"#,
        vm.0,
        expires,
    )
    .execute(db)
    .await
    .ctx("setting backups' expiry")?;
    Ok(())
}

/// Sets (or clears) a tenant's VM's backup policy; `not_found` for no
/// such live VM.
pub async fn set_policy(
    db: impl sqlx::PgExecutor<'_>,
    tenant: &TenantId,
    vm: VmId,
    policy: Option<&BackupPolicy>,
) -> Result<(), Error> {
    let policy = policy.map(|p| json("backup policy", p)).transpose()?;
    let res = sqlx::query!(
        r#"update vms set backup_policy = $3
           where id = $1 and tenant_id = $2 and deleted_at is null and cluster_id is null"#,
        vm.0,
        tenant.as_str(),
        policy,
    )
    .execute(db)
    .await;
    crate::updated(res, "vm", vm, "setting a vm's backup policy")
}

/// A VM whose automatic backup is due: it has a policy, runs or is off on
/// a host, and its newest automatic backup (not failed) is older than
/// `since` (or it has none).
#[derive(Clone, Debug)]
pub struct Due {
    pub vm: VmId,
    pub tenant: TenantId,
    pub target_id: TargetId,
    pub policy: BackupPolicy,
}

/// Every VM whose automatic backup is due (newest none since `since`),
/// oldest due first.
pub async fn due(pool: &PgPool, since: DateTime<Utc>) -> Result<Vec<Due>, Error> {
    let rows = sqlx::query!(
        r#"select v.id, v.tenant_id, v.target_id as "target_id!", v.backup_policy as "policy!"
           from vms v
           left join lateral (
               select max(b.created_at) as last from backups b
               where b.vm_id = v.id and b.kind = 'automatic' and b.deleted_at is null
                 and b.status <> 'error'
           ) b on true
           where v.backup_policy is not null and v.deleted_at is null
             and v.cluster_id is null and v.target_id is not null
             and v.status in ('running', 'off')
             and (b.last is null or b.last < $1)
           order by b.last nulls first, v.id"#,
        since,
    )
    .fetch_all(pool)
    .await
    .ctx("finding due backups")?;
    rows.into_iter()
        .map(|r| {
            Ok(Due {
                vm: VmId(r.id),
                tenant: TenantId(r.tenant_id),
                target_id: TargetId(r.target_id),
                policy: serde_json::from_value(r.policy)
                    .map_err(|e| corrupt("vm backup policy", e))?,
            })
        })
        .collect()
}

/// How many backups each host is taking now.
pub async fn creating_per_host(pool: &PgPool) -> Result<Vec<(TargetId, i64)>, Error> {
    let rows = sqlx::query!(
        r#"select target_id, count(*) as "n!" from backups
           where status = 'creating' and deleted_at is null group by target_id"#
    )
    .fetch_all(pool)
    .await
    .ctx("counting backups in progress")?;
    Ok(rows
        .into_iter()
        .map(|r| (TargetId(r.target_id), r.n))
        .collect())
}

/// A backup the reconciler deletes: beyond its VM's policy's `keep`, or
/// expired.
#[derive(Clone, Debug)]
pub struct Unwanted {
    pub id: BackupId,
    pub tenant: TenantId,
    pub why: &'static str,
}

/// Automatic backups beyond their VM's `keep` (the newest available kept),
/// and backups whose expiry is past `now`.
pub async fn unwanted(pool: &PgPool, now: DateTime<Utc>) -> Result<Vec<Unwanted>, Error> {
    let rows = sqlx::query!(
        r#"select id as "id!", tenant_id as "tenant_id!", why as "why!" from (
               select b.id, b.tenant_id, 'rotated' as why,
                      row_number() over (partition by b.vm_id
                                         order by b.created_at desc, b.id desc) as n,
                      (v.backup_policy->>'keep')::int as keep
               from backups b join vms v on v.id = b.vm_id
               where b.kind = 'automatic' and b.status = 'available' and b.deleted_at is null
                 and v.backup_policy is not null and v.deleted_at is null
           ) r where n > keep
           union all
           select id, tenant_id, 'expired' from backups
           where expires_at <= $1 and deleted_at is null and status in ('available', 'error')"#,
        now,
    )
    .fetch_all(pool)
    .await
    .ctx("finding backups to delete")?;
    Ok(rows
        .into_iter()
        .map(|r| Unwanted {
            id: BackupId(r.id),
            tenant: TenantId(r.tenant_id),
            why: if r.why == "rotated" {
                "rotated"
            } else {
                "expired"
            },
        })
        .collect())
}

/// The running action that has a backup among its resources (its create,
/// a restore reading it), if any.
pub async fn running_action(tx: &mut Tx<'_>, id: BackupId) -> Result<Option<ActionId>, Error> {
    let found = sqlx::query_scalar!(
        r#"select a.id from actions a
           join action_resources r on r.action_id = a.id
           where r.resource_type = 'backup' and r.resource_id = $1 and a.status = 'running'
           order by a.started desc limit 1"#,
        id.0
    )
    .fetch_optional(&mut **tx)
    .await
    .ctx("finding a backup's running action")?;
    Ok(found.map(ActionId))
}

/// Which backups a list returns: the list's filters, and one VM's.
#[derive(Clone, Debug, Default)]
pub struct BackupFilter {
    pub list: crate::ListFilter,
    pub vm: Option<VmId>,
}

impl crate::list::Filter for BackupFilter {
    fn push_conditions(
        &self,
        qb: &mut sqlx::QueryBuilder<'_, sqlx::Postgres>,
    ) -> Result<(), Error> {
        self.list.push_conditions(qb)?;
        if let Some(vm) = self.vm {
            qb.push(" and x.vm_id = ").push_bind(vm.0);
        }
        Ok(())
    }

    fn matches_all(&self) -> bool {
        self.list.matches_all() && self.vm.is_none()
    }

    fn sort(&self) -> &[String] {
        self.list.sort()
    }
}

/// What a backup list draws from: the tenant's live backups.
impl crate::Listable for Backup {
    type Row = BackupRow;
    type Filter = BackupFilter;
    const SOURCE: crate::Source = crate::Source {
        table: "backups",
        only: "",
        columns: "b.id, b.tenant_id, b.vm_id, b.vm_name, b.name, b.labels, b.kind, b.status, \
              b.target_id, t.name as host, t.provider, t.region, b.size_gb, b.volumes, b.spec, \
              b.error_message, b.created_at, b.expires_at",
        joins: "join backups b on b.id = page.id join atomos_targets t on t.id = b.target_id",
        usage: None,
        listing: "listing backups",
        counting: "counting backups",
    };
}

/// The message of a backup drift detection found missing from its host.
pub const MISSING: &str = "the backup is missing from its host";

/// Every backup drift detection compares with its host: `available` ones,
/// and those it found missing, that no running action names; with the time
/// they were read (a change after it is not overwritten).
pub async fn watched(pool: &PgPool) -> Result<(Vec<Backup>, DateTime<Utc>), Error> {
    let mut tx = pool.begin().await.ctx("reading backups")?;
    let now = sqlx::query_scalar!(r#"select now() as "now!""#)
        .fetch_one(&mut *tx)
        .await
        .ctx("reading the time")?;
    let ids = sqlx::query_scalar!(
        r#"select b.id from backups b
           where b.deleted_at is null
             and (b.status = 'available'
                  or (b.status = 'error' and b.error_message like $1 || '%'))
             and not exists (select 1 from action_resources r
                             join actions a on a.id = r.action_id
                             where r.resource_type = 'backup' and r.resource_id = b.id
                               and a.status = 'running')"#,
        MISSING,
    )
    .fetch_all(&mut *tx)
    .await
    .ctx("reading backups")?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        out.push(one(&mut *tx, BackupId(id), Select::default()).await?);
    }
    tx.commit().await.ctx("reading backups")?;
    Ok((out, now))
}

/// Records what drift detection found, unless the backup changed since
/// `seen_at`; answers whether it did.
pub async fn record_drift(
    pool: &PgPool,
    id: BackupId,
    from: BackupStatus,
    to: BackupStatus,
    message: Option<&str>,
    seen_at: DateTime<Utc>,
) -> Result<bool, Error> {
    let done = sqlx::query!(
        r#"update backups set status = $3, error_message = $4
           where id = $1 and status = $2 and deleted_at is null and updated_at <= $5"#,
        id.0,
        from.as_str(),
        to.as_str(),
        message,
        seen_at,
    )
    .execute(pool)
    .await
    .ctx("recording a backup's drift")?;
    Ok(done.rows_affected() == 1)
}
