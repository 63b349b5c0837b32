//! Virtual machines.

use crate::{DbResult, Tx, corrupt};
use chrono::{DateTime, Utc};
use meson_core::labels::Labels;
use meson_core::quota::{QuotaOverrides, Resources};
use meson_core::vm::{Placement, Vm, VmSpec, VmStatus};
use meson_core::{Error, TargetId, TenantId, VmId};
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

#[derive(sqlx::FromRow)]
pub struct VmRow {
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
    backup_policy: Option<Value>,
}

impl TryFrom<VmRow> for Vm {
    type Error = Error;
    fn try_from(r: VmRow) -> Result<Self, Error> {
        let placement = placement(
            r.target_id,
            r.target_name,
            r.provider,
            r.region,
            (r.price_hourly, r.price_monthly, r.currency),
        );
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
            ipv4: ipv4(r.ipv4.as_deref())?,
            created: r.created_at,
            error_message: r.error_message,
            backup_policy: r
                .backup_policy
                .map(serde_json::from_value)
                .transpose()
                .map_err(|e| corrupt("vm backup policy", e))?,
        })
    }
}

/// The placement of a VM row's columns (the host's name joined from its
/// target; the prices hourly, monthly and their currency): none until its
/// target, provider and region are set.
fn placement(
    target_id: Option<Uuid>,
    host: Option<String>,
    provider: Option<String>,
    region: Option<String>,
    (hourly, monthly, currency): (Option<f64>, Option<f64>, Option<String>),
) -> Option<Placement> {
    match (target_id, provider, region) {
        (Some(target_id), Some(provider), Some(region)) => Some(Placement {
            target_id: TargetId(target_id),
            host: host.unwrap_or_default(),
            provider,
            region,
            price_hourly: hourly.unwrap_or(0.0),
            price_monthly: monthly.unwrap_or(0.0),
            currency: currency.unwrap_or_else(|| "EUR".to_owned()),
        }),
        _ => None,
    }
}

/// A VM row's address (`host(ipv4)`).
fn ipv4(text: Option<&str>) -> Result<Option<std::net::Ipv4Addr>, Error> {
    text.map(str::parse)
        .transpose()
        .map_err(|_| corrupt("ipv4", text.unwrap_or_default()))
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

/// A VM to create in one statement ([`create`]): its rows, the action and
/// job that start it, the audit entry that records the request, and what it
/// adds to its tenant's usage.
pub struct NewVm<'a> {
    pub vm: &'a Vm,
    pub volumes: &'a [meson_core::volume::Volume],
    pub action: &'a meson_core::action::Action,
    pub job: &'a crate::jobs::NewJob,
    pub audit: Option<&'a meson_core::audit::AuditEntry>,
    /// The quotas of a tenant without overrides.
    pub defaults: Resources,
    /// The subject of the request: the member it counts against.
    pub created_by: &'a str,
}

/// What [`create`] did.
#[derive(Debug)]
pub enum Created {
    /// Everything is written and committed; the job's id.
    Written(meson_core::JobId),
    /// Nothing is written: the VM does not fit the tenant's quotas, as they
    /// and its usage stood (locked) when the statement ran; `over` names
    /// the quotas it would exceed.
    OverQuota {
        overrides: QuotaOverrides,
        usage: Resources,
        over: Vec<&'static str>,
    },
    /// Nothing is written: the VM does not fit the limits of the member
    /// creating it (VMs, vCPUs, MiB of RAM), as they and what it held
    /// (locked) stood.
    OverMemberLimit {
        limits: [i64; 3],
        held: [i64; 3],
        over: Vec<&'static str>,
    },
}

/// Creates a VM without networks or attached volumes in one statement, its
/// own transaction (one round trip, one commit): takes its tenant's quota
/// lock, and, if the VM fits the quotas, writes the VM, its volumes, its
/// action, the workflow's job and the audit entry. The tenant scope of the
/// current task ([`crate::scope::own_setting`]) is set first, for this
/// statement only: run it on the [`crate::scope::own_scope`] pool.
///
/// Whether the VM fits is decided by the quota rule (`meson_quota_over`)
/// on what its spec counts (`meson_vm_spec_usage`, the function the usage
/// triggers apply to the row once written).
pub async fn create(pool: &PgPool, new: &NewVm<'_>) -> Result<Created, Error> {
    let vm = new.vm;
    let labels = serde_json::to_value(&vm.labels).map_err(|e| Error::internal_from("labels", e))?;
    let spec = serde_json::to_value(&vm.spec).map_err(|e| Error::internal_from("spec", e))?;
    let vols = crate::volumes::VolumeColumns::of(new.volumes)?;
    let types: Vec<&str> = new
        .action
        .resources
        .iter()
        .map(|(t, _)| t.as_str())
        .collect();
    let ids: Vec<Uuid> = new.action.resources.iter().map(|(_, id)| *id).collect();
    let defaults: Vec<i64> = new.defaults.entries().iter().map(|(_, v)| *v).collect();
    let a = new.audit;
    let res = sqlx::query!(
        r#"with scope as materialized (
             select set_config('meson.tenant',
                               coalesce($1, current_setting('meson.tenant', true), ''),
                               true) as setting
           ), usage as (
             insert into tenant_usage as u (tenant_id) select $2::text from scope
             on conflict (tenant_id) do update set tenant_id = u.tenant_id
             returning u.tenant_id, u.vms, u.vcpus, u.ram_mib, u.storage_gb, u.clusters, u.nodes,
                       u.images_gb
           ), state as (
             select u.*, q.vms as q_vms, q.vcpus as q_vcpus, q.ram_mib as q_ram_mib,
                    q.storage_gb as q_storage_gb, q.clusters as q_clusters, q.nodes as q_nodes,
                    q.images_gb as q_images_gb
             from usage u
             left join lateral (select * from tenant_limits q where q.tenant_id = u.tenant_id) q
               on true
           ), over as (
             select meson_quota_over(
                      array[s.vms, s.vcpus, s.ram_mib, s.storage_gb, s.clusters, s.nodes, s.images_gb],
                      array[coalesce(s.q_vms, ($3::int8[])[1]), coalesce(s.q_vcpus, ($3::int8[])[2]),
                            coalesce(s.q_ram_mib, ($3::int8[])[3]), coalesce(s.q_storage_gb, ($3::int8[])[4]),
                            coalesce(s.q_clusters, ($3::int8[])[5]), coalesce(s.q_nodes, ($3::int8[])[6]),
                            coalesce(s.q_images_gb, ($3::int8[])[7])],
                      meson_vm_spec_usage($8::jsonb)) as over
             from state s
           ), member as (
             select array[coalesce(m.max_vms, 9223372036854775807),
                          coalesce(m.max_vcpus, 9223372036854775807),
                          coalesce(m.max_ram_mib, 9223372036854775807)] as limits
             from scope, members m
             where m.tenant_id = $2 and m.subject = $47
               and (m.max_vms is not null or m.max_vcpus is not null or m.max_ram_mib is not null)
           ), member_held as (
             insert into member_usage as mu (tenant_id, subject)
             select $2::text, $47::text from member
             on conflict (tenant_id, subject) do update set subject = mu.subject
             returning array[mu.vms, mu.vcpus, mu.ram_mib] as held
           ), member_over as (
             select meson_quota_over(h.held, m.limits, (meson_vm_spec_usage($8::jsonb))[1:3])
                      as over
             from member m, member_held h
           ), ok as (
             select 1 from over where cardinality(over.over) = 0
               and not exists (select 1 from member_over o where cardinality(o.over) > 0)
           ), vm as (
             insert into vms (id, tenant_id, name, status, labels, spec, atomos_name, created_at,
                              created_by)
             select $4::uuid, $2::text, $5::text, $6::text, $7::jsonb, $8::jsonb, $9::text,
                    $10::timestamptz, nullif($47::text, '')
             from ok
             returning id
           ), vol as (
             insert into volumes (id, tenant_id, vm_id, name, kind, size_gb, atomos_name,
                                  atomos_id, status, labels, bootable, readonly, created_at)
             select v.* from ok cross join
               unnest($11::uuid[], $12::text[], $13::uuid[], $14::text[], $15::text[],
                      $16::int4[], $17::text[], $18::text[], $19::text[], $20::jsonb[],
                      $21::bool[], $22::bool[], $23::timestamptz[]) as v
           ), action as (
             insert into actions (id, tenant_id, command, status, progress, started)
             select $24::uuid, $2::text, $25::text, 'running', 0, $26::timestamptz from ok
             returning id
           ), resources as (
             insert into action_resources (action_id, resource_type, resource_id)
             select action.id, r.t, r.id from action cross join unnest($27::text[], $28::uuid[]) as r(t, id)
           ), job as (
             insert into jobs (kind, args, priority, max_attempts, concurrency_key, action_id,
                               tenant_id, trace_context)
             select $29::text, $30::jsonb, $31::int2, $32::int4, $33::text, action.id, $34::text,
                    $35::jsonb
             from action
             on conflict (concurrency_key)
               where state in ('available', 'running') and concurrency_key is not null
             do nothing
             returning id
           ), audit as (
             insert into audit_log
               (tenant_id, subject, role, operation, method, path, resource_type, resource_id,
                action_id, status, correlation_id, at)
             select $2::text, $36::text, $37::text, $38::text, $39::text, $40::text, $41::text,
                    $42::text, action.id, $43::int2, $44::text, $45::timestamptz
             from action where $46::bool
           )
           select s.vms as "vms!", s.vcpus as "vcpus!", s.ram_mib as "ram_mib!",
                  s.storage_gb as "storage_gb!", s.clusters as "clusters!", s.nodes as "nodes!",
                  s.images_gb as "images_gb!",
                  s.q_vms, s.q_vcpus, s.q_ram_mib, s.q_storage_gb, s.q_clusters, s.q_nodes,
                  s.q_images_gb,
                  (select over from over) as "over!",
                  (select over from member_over) as "member_over?",
                  (select limits from member) as "member_limits?",
                  (select held from member_held) as "member_held?",
                  exists (select 1 from ok) as "written!",
                  (select id from job) as "job?"
           from state s"#,
        crate::scope::own_setting(),
        vm.tenant.as_str(),
        &defaults,
        vm.id.0,
        vm.name,
        vm.status.as_str(),
        labels,
        spec,
        vm.atomos_name,
        vm.created,
        &vols.ids,
        &vols.tenants,
        &vols.vms as &[Option<Uuid>],
        &vols.names,
        &vols.kinds,
        &vols.sizes,
        &vols.atomos_names,
        &vols.atomos_ids as &[Option<String>],
        &vols.statuses,
        &vols.labels,
        &vols.bootable,
        &vols.readonly,
        &vols.created,
        new.action.id.0,
        new.action.command,
        new.action.started,
        &types as &[&str],
        &ids,
        new.job.kind,
        new.job.args,
        new.job.priority,
        new.job.max_attempts,
        new.job.concurrency_key,
        new.job.tenant_id,
        new.job.trace_context,
        a.map(|a| a.subject.as_str()).unwrap_or_default(),
        a.map(|a| a.role.as_str()).unwrap_or_default(),
        a.map(|a| a.operation.as_str()).unwrap_or_default(),
        a.map(|a| a.method.as_str()).unwrap_or_default(),
        a.map(|a| a.path.as_str()).unwrap_or_default(),
        a.and_then(|a| a.resource_type.as_deref()),
        a.and_then(|a| a.resource_id.as_deref()),
        a.map(|a| i16::try_from(a.status).unwrap_or(500)).unwrap_or_default(),
        a.map(|a| a.correlation_id.as_str()).unwrap_or_default(),
        a.map(|a| a.at).unwrap_or(vm.created),
        a.is_some(),
        new.created_by,
    )
    .fetch_one(pool)
    .await;
    let r = crate::volumes::name_taken(name_taken(res)?)?.ctx("creating a vm")?;
    if let (false, Some(over), Some(limits), Some(held)) =
        (r.written, &r.member_over, &r.member_limits, &r.member_held)
        && !over.is_empty()
    {
        return Ok(Created::OverMemberLimit {
            limits: crate::members::three(limits)?,
            held: crate::members::three(held)?,
            over: crate::quotas::over_names(over),
        });
    }
    if !r.written {
        let (overrides, usage) = crate::quotas::overrides_and_usage!(r);
        return Ok(Created::OverQuota {
            overrides,
            usage,
            over: crate::quotas::over_names(&r.over),
        });
    }
    r.job
        .map(|id| Created::Written(meson_core::JobId(id)))
        .ok_or_else(|| Error::internal("a brand-new VM is already locked"))
}

/// Records who created VM `id` (the member it counts against), in `tx`.
pub async fn set_creator(tx: &mut Tx<'_>, id: VmId, created_by: &str) -> Result<(), Error> {
    sqlx::query!(
        "update vms set created_by = nullif($2, '') where id = $1",
        id.0,
        created_by
    )
    .execute(&mut **tx)
    .await
    .ctx("recording a vm's creator")?;
    Ok(())
}

/// A tenant's own live VM with its volumes (its own ones, boot first, then
/// cloud-init, then data volumes by name; then the standalone volumes
/// attached to it, by name) and its NICs, in one statement: the parts as
/// the `vm_parts` triggers keep them, not aggregated per read. The tenant
/// scope of the current task is set first, for this statement only: run it
/// on the [`crate::scope::own_scope`] pool.
pub async fn get_with_parts(
    pool: &PgPool,
    tenant: &TenantId,
    id: VmId,
) -> Result<
    (
        Vm,
        Vec<meson_core::volume::Volume>,
        Vec<meson_core::network::Attachment>,
    ),
    Error,
> {
    let r = sqlx::query!(
        r#"with scope as materialized (
             select set_config('meson.tenant',
                               coalesce($1, current_setting('meson.tenant', true), ''),
                               true) as setting
           )
           select v.id as "id!", v.tenant_id as "tenant_id!", v.name as "name!",
                  v.status as "status!", v.labels as "labels!", v.spec as "spec!",
                  v.atomos_name as "atomos_name!", v.atomos_id, v.target_id,
                  v.target_name as "target_name?", v.provider, v.region, v.ipv4 as "ipv4?",
                  v.price_hourly, v.price_monthly, v.currency, v.created_at as "created_at!",
                  v.error_message, v.backup_policy,
                  v.volumes as "volumes!: sqlx::types::Json<Vec<crate::volumes::VolumeRow>>",
                  v.nics as "nics!: sqlx::types::Json<Vec<crate::networks::AttachmentRow>>"
           from scope cross join lateral (
             select v.id, v.tenant_id, v.name, v.status, v.labels, v.spec, v.atomos_name,
                    v.atomos_id, v.target_id, t.name as target_name, v.provider, v.region,
                    host(v.ipv4) as ipv4, v.price_hourly, v.price_monthly, v.currency,
                    v.created_at, v.error_message, v.backup_policy,
                    coalesce(p.volumes, '[]') as volumes,
                    coalesce(p.nics, '[]') as nics
             from vms v left join atomos_targets t on t.id = v.target_id
                  left join vm_parts p on p.vm_id = v.id
             where v.id = $3 and v.tenant_id = $2 and v.cluster_id is null
               and v.deleted_at is null and scope.setting is not null
             offset 0
           ) v"#,
        crate::scope::own_setting(),
        tenant.as_str(),
        id.0,
    )
    .fetch_optional(pool)
    .await
    .ctx("fetching a vm")?
    .ok_or_else(|| Error::not_found("vm", id))?;
    let volumes = r
        .volumes
        .0
        .into_iter()
        .map(meson_core::volume::Volume::try_from)
        .collect::<Result<_, _>>()?;
    let nics = r
        .nics
        .0
        .into_iter()
        .map(meson_core::network::Attachment::try_from)
        .collect::<Result<_, _>>()?;
    let vm = Vm::try_from(VmRow {
        id: r.id,
        tenant_id: r.tenant_id,
        name: r.name,
        status: r.status,
        labels: r.labels,
        spec: r.spec,
        atomos_name: r.atomos_name,
        atomos_id: r.atomos_id,
        target_id: r.target_id,
        target_name: r.target_name,
        provider: r.provider,
        region: r.region,
        ipv4: r.ipv4,
        price_hourly: r.price_hourly,
        price_monthly: r.price_monthly,
        currency: r.currency,
        created_at: r.created_at,
        error_message: r.error_message,
        backup_policy: r.backup_policy,
    })?;
    Ok((vm, volumes, nics))
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
                  v.created_at, v.error_message, v.backup_policy
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
                  v.created_at, v.error_message, v.backup_policy
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

/// Where these VMs (of any tenant in scope, live or not) run, by id: their
/// placement and address, without reading their specs.
pub async fn locations(
    db: impl sqlx::PgExecutor<'_>,
    ids: &[VmId],
) -> Result<Vec<meson_core::vm::VmLocation>, Error> {
    let ids: Vec<Uuid> = ids.iter().map(|v| v.0).collect();
    let rows = sqlx::query!(
        r#"select v.id, v.target_id, t.name as "target_name?", v.provider, v.region,
                  host(v.ipv4) as "ipv4?", v.price_hourly, v.price_monthly, v.currency
           from vms v left join atomos_targets t on t.id = v.target_id
           where v.id = any($1)
           order by v.id"#,
        &ids,
    )
    .fetch_all(db)
    .await
    .ctx("locating vms")?;
    rows.into_iter()
        .map(|r| {
            Ok(meson_core::vm::VmLocation {
                id: VmId(r.id),
                ipv4: ipv4(r.ipv4.as_deref())?,
                placement: placement(
                    r.target_id,
                    r.target_name,
                    r.provider,
                    r.region,
                    (r.price_hourly, r.price_monthly, r.currency),
                ),
            })
        })
        .collect()
}

/// Which VMs to list and in what order.
pub use crate::ListFilter as VmFilter;

/// What a VM list draws from: the tenant's own VMs (cluster nodes apart).
impl crate::Listable for Vm {
    type Row = VmRow;
    type Filter = VmFilter;
    const SOURCE: crate::Source = crate::Source {
        table: "vms",
        only: "x.cluster_id is null",
        columns: "v.id, v.tenant_id, v.name, v.status, v.labels, v.spec, v.atomos_name, \
              v.atomos_id, v.target_id, t.name as target_name, v.provider, v.region, \
              host(v.ipv4) as ipv4, v.price_hourly, v.price_monthly, v.currency, \
              v.created_at, v.error_message, v.backup_policy",
        joins: "join vms v on v.id = page.id left join atomos_targets t on t.id = v.target_id",
        usage: Some("vms"),
        listing: "listing vms",
        counting: "counting vms",
    };
}

/// How a VM's rename and/or relabel reports (through [`crate::rename`]).
pub const RENAMED: crate::Renamed = crate::Renamed {
    kind: "vm",
    name_index: Some("vms_tenant_name"),
    context: "updating a vm",
    also: "",
};

/// Every tenant's live VMs placed on `target` (cluster nodes included,
/// with whether each is one), oldest first.
pub async fn on_target(
    db: impl sqlx::PgExecutor<'_>,
    target: meson_core::TargetId,
) -> Result<Vec<(VmId, TenantId, bool)>, Error> {
    let rows = sqlx::query!(
        r#"select id, tenant_id, cluster_id is not null as "node!" from vms
           where target_id = $1 and deleted_at is null order by created_at, id"#,
        target.0
    )
    .fetch_all(db)
    .await
    .ctx("listing a target's vms")?;
    Ok(rows
        .into_iter()
        .map(|r| (VmId(r.id), TenantId(r.tenant_id), r.node))
        .collect())
}

/// Records a VM's spec (a resize's new size, or the old one back after a
/// failed resize); the usage triggers count it.
pub async fn set_spec(
    db: impl sqlx::PgExecutor<'_>,
    id: VmId,
    spec: &meson_core::vm::VmSpec,
) -> Result<(), Error> {
    let spec = serde_json::to_value(spec).map_err(|e| Error::internal_from("spec", e))?;
    sqlx::query!("update vms set spec = $2 where id = $1", id.0, spec)
        .execute(db)
        .await
        .ctx("recording a vm's spec")?;
    Ok(())
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

/// Marks the VM `error`, saying why (the reason of the action that failed).
pub async fn set_error(
    db: impl sqlx::PgExecutor<'_>,
    id: VmId,
    message: &str,
) -> Result<(), Error> {
    sqlx::query!(
        "update vms set status = 'error', error_message = $2 where id = $1",
        id.0,
        message
    )
    .execute(db)
    .await
    .ctx("recording a vm's failure")?;
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

/// Records where each VM was placed, in one statement.
pub async fn set_placements(tx: &mut Tx<'_>, placed: &[(VmId, &Placement)]) -> Result<(), Error> {
    let ids: Vec<Uuid> = placed.iter().map(|(v, _)| v.0).collect();
    let targets: Vec<Uuid> = placed.iter().map(|(_, p)| p.target_id.0).collect();
    let providers: Vec<&str> = placed.iter().map(|(_, p)| p.provider.as_str()).collect();
    let regions: Vec<&str> = placed.iter().map(|(_, p)| p.region.as_str()).collect();
    let hourly: Vec<f64> = placed.iter().map(|(_, p)| p.price_hourly).collect();
    let monthly: Vec<f64> = placed.iter().map(|(_, p)| p.price_monthly).collect();
    let currencies: Vec<&str> = placed.iter().map(|(_, p)| p.currency.as_str()).collect();
    sqlx::query!(
        r#"update vms set target_id = u.target_id, provider = u.provider, region = u.region,
                          price_hourly = u.hourly, price_monthly = u.monthly, currency = u.currency
           from unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::float8[], $6::float8[], $7::text[])
                as u(id, target_id, provider, region, hourly, monthly, currency)
           where vms.id = u.id"#,
        &ids,
        &targets,
        &providers as &[&str],
        &regions as &[&str],
        &hourly,
        &monthly,
        &currencies as &[&str],
    )
    .execute(&mut **tx)
    .await
    .ctx("recording vm placements")?;
    Ok(())
}

/// Records AtomOS's id and address for the VM and its status.
pub async fn set_runtime(
    db: impl sqlx::PgExecutor<'_>,
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
    .execute(db)
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

/// Locks the VMs' rows until `tx` ends (in the order of their ids) and
/// returns those not placed yet, in that order: see [`lock_placement`].
pub async fn lock_unplaced(tx: &mut Tx<'_>, ids: &[VmId]) -> Result<Vec<VmId>, Error> {
    let ids: Vec<Uuid> = ids.iter().map(|v| v.0).collect();
    let rows = sqlx::query!(
        "select id, target_id from vms where id = any($1) order by id for update",
        &ids
    )
    .fetch_all(&mut **tx)
    .await
    .ctx("locking vms")?;
    Ok(rows
        .into_iter()
        .filter(|r| r.target_id.is_none())
        .map(|r| VmId(r.id))
        .collect())
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
