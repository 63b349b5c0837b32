//! Backups: take one (AtomOS's compute `POST /backup`, with meson's id as
//! its `backup_id`, so a retried call finds the copy the first made) and
//! delete one. A backup is taken under its VM's concurrency key: the VM is
//! not powered, changed or deleted while its volumes are copied; the copy
//! is crash-consistent (the guest keeps running). A delete runs under the
//! backup's own key: it outlives its VM.
//!
//! [`tick`] is the reconciler's schedule: it takes each VM's daily
//! automatic backup in the VM's window, at most
//! [`WorkflowConfig::backups_per_host`](crate::WorkflowConfig) at once on a
//! host, and deletes the automatic backups beyond a policy's `keep` and the
//! expired ones.

use crate::atomos::step_error;
use crate::vm_power::locate;
use crate::{DeleteStep, Env};
use atomos_driver::{AtomosClient, ErrorKind};
use chrono::{DateTime, Utc};
use meson_core::action::{Action, ActionFailure, ActionStatus, Command, ResourceType};
use meson_core::backup::{self, Backup, BackupKind, BackupStatus, BackupVolume};
use meson_core::volume::VolumeKind;
use meson_core::{ActionId, BackupId, Code, TenantId, VmId};
use meson_jobs::{Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Params {
    pub backup_id: BackupId,
    pub vm_id: VmId,
}

meson_jobs::steps! {
    pub enum CreateStep {
        /// Asks the VM's host to copy the VM's volumes, and records the copies.
        Take = "take",
    }
}

pub struct BackupCreate(pub Arc<Env>);
pub struct BackupDelete(pub Arc<Env>);

/// Enqueues a create (under the VM's key) in the caller's transaction.
pub async fn enqueue_create(
    tx: &mut meson_db::Tx<'_>,
    params: &Params,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    let key = crate::keys::vm(params.vm_id);
    crate::enqueue_keyed::<BackupCreate>(tx, params, key, action, tenant).await
}

/// Enqueues a delete (under the backup's key) in the caller's transaction.
pub async fn enqueue_delete(
    tx: &mut meson_db::Tx<'_>,
    params: &Params,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    let key = crate::keys::backup(params.backup_id);
    crate::enqueue_keyed::<BackupDelete>(tx, params, key, action, tenant).await
}

/// Removes a backup from its host; one the host does not have is gone.
async fn remove(c: &AtomosClient, b: &Backup) -> StepResult<()> {
    match c.backup_delete(&b.id.to_string()).await {
        Err(e) if !e.is_not_found() => Err(step_error(e)),
        _ => Ok(()),
    }
}

/// GB for a size the host reports (rounded up; at least 1).
fn whole_gb(gb: f64) -> u32 {
    (gb.ceil().max(1.0)) as u32
}

impl Workflow for BackupCreate {
    const KIND: &'static str = "backup_create";
    type Params = Params;
    type Step = CreateStep;

    async fn run(&self, cx: &StepCtx<'_, Params, CreateStep>, step: CreateStep) -> StepResult {
        let env = &self.0;
        let b = meson_db::backups::get_including_deleted(&env.pool, cx.params.backup_id).await?;
        match step {
            CreateStep::Take => {
                let vm = meson_db::vms::get_any(&env.pool, b.vm_id).await?;
                if vm.placement.as_ref().map(|p| p.target_id) != Some(b.target_id) {
                    return Err(StepError::fatal(
                        Code::Conflict,
                        "the VM is no longer on the host the backup was requested on",
                    ));
                }
                let (c, found) = locate(env, &vm).await?;
                let taken = c
                    .backup_create(&found.id, &b.id.to_string(), &b.name)
                    .await
                    .map_err(|e| match e.kind {
                        ErrorKind::Capacity => StepError::fatal(
                            Code::ResourceUnavailable,
                            format!("host {} has no room for the backup: {}", b.host, e.message),
                        ),
                        ErrorKind::AlreadyExists => StepError::fatal(
                            Code::Conflict,
                            format!("host {} has another backup with this id", b.host),
                        ),
                        _ => step_error(e),
                    })?;
                // Which of meson's volumes each copy is of.
                let mine: HashMap<String, meson_core::volume::Volume> =
                    meson_db::volumes::list_for_vms(&env.pool, &[vm.id])
                        .await?
                        .into_iter()
                        .filter_map(|v| v.atomos_id.clone().map(|id| (id, v)))
                        .collect();
                let volumes: Vec<BackupVolume> = taken
                    .volumes
                    .iter()
                    .map(|copy| {
                        let known = mine.get(&copy.volume_id);
                        BackupVolume {
                            volume: known.map(|v| v.id),
                            source: copy.volume_id.clone(),
                            kind: known.map_or(VolumeKind::Data, |v| v.kind),
                            standalone: known.is_some_and(|v| v.vm_id.is_none()),
                            size_gb: whole_gb(copy.size_gb),
                        }
                    })
                    .collect();
                meson_db::backups::record_taken(&env.pool, b.id, &volumes, whole_gb(taken.size_gb))
                    .await?;
                tracing::info!(backup = %b.id, vm = %vm.id, host = %b.host, size_gb = taken.size_gb,
                    "backup taken");
            }
        }
        to_output(())
    }

    /// Removes the copies from the host again.
    async fn undo(&self, cx: &StepCtx<'_, Params, CreateStep>, _: CreateStep) -> StepResult<()> {
        let env = &self.0;
        let b = meson_db::backups::get_including_deleted(&env.pool, cx.params.backup_id).await?;
        remove(&env.atomos.client(b.target_id).await?, &b).await
    }

    /// Nothing was kept: `error`, with why (deleting it forgets it).
    async fn on_failed(&self, params: &Params, failure: &ActionFailure) -> StepResult<()> {
        meson_db::backups::set_status(
            &self.0.pool,
            params.backup_id,
            &[BackupStatus::Creating, BackupStatus::Available],
            BackupStatus::Error,
            Some(&failure.message),
        )
        .await?;
        Ok(())
    }
}

impl Workflow for BackupDelete {
    const KIND: &'static str = "backup_delete";
    type Params = Params;
    type Step = DeleteStep;

    async fn run(&self, cx: &StepCtx<'_, Params, DeleteStep>, step: DeleteStep) -> StepResult {
        let env = &self.0;
        let b = meson_db::backups::get_including_deleted(&env.pool, cx.params.backup_id).await?;
        match step {
            DeleteStep::Destroy => remove(&env.atomos.client(b.target_id).await?, &b).await?,
            DeleteStep::Forget => meson_db::backups::mark_deleted(&env.pool, b.id).await?,
        }
        to_output(())
    }

    async fn undo(&self, _: &StepCtx<'_, Params, DeleteStep>, _: DeleteStep) -> StepResult<()> {
        crate::forward_only()
    }

    /// Still recorded, it is `error` (its copies may or may not be there):
    /// deleting it again finishes the job.
    async fn on_failed(&self, params: &Params, failure: &ActionFailure) -> StepResult<()> {
        meson_db::backups::set_status(
            &self.0.pool,
            params.backup_id,
            &[BackupStatus::Deleting],
            BackupStatus::Error,
            Some(&format!("its delete failed: {}", failure.message)),
        )
        .await?;
        Ok(())
    }
}

/// A system action (the tenant's, started by nobody in it) on `resources`.
fn system_action(
    tenant: &TenantId,
    command: Command,
    resources: Vec<(ResourceType, uuid::Uuid)>,
) -> Action {
    Action {
        id: ActionId::new(),
        tenant: tenant.clone(),
        command: command.as_str().to_owned(),
        status: ActionStatus::Running,
        progress: 0,
        started: Utc::now(),
        finished: None,
        resources,
        error: None,
    }
}

/// What one pass of the schedule did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// Automatic backups started: the VM, the backup, its action.
    pub taken: Vec<(VmId, BackupId, ActionId)>,
    /// Backups whose delete was started (rotated or expired), and the
    /// delete's action.
    pub deleted: Vec<(BackupId, ActionId)>,
    /// VMs due but left for a later pass: their host was taking its most
    /// backups at once, or the VM was busy.
    pub deferred: Vec<VmId>,
}

/// One pass of the backup schedule at time `now` (the reconciler passes
/// the clock's; tests pass a simulated one): starts the automatic backups
/// due in their windows, at most `backups_per_host` in progress on a host,
/// then deletes what the policies no longer keep and what has expired.
/// Several workers running it at once are harmless: a backup is taken
/// under its VM's key and a delete under the backup's.
pub async fn tick(env: &Env, now: DateTime<Utc>) -> meson_core::Result<Pass> {
    let mut pass = Pass::default();
    let limit = i64::from(env.config.backups_per_host);
    let mut busy: HashMap<meson_core::TargetId, i64> =
        meson_db::backups::creating_per_host(&env.pool)
            .await?
            .into_iter()
            .collect();
    for due in meson_db::backups::due(&env.pool, now - backup::DAILY).await? {
        if !due.policy.due_at(now) {
            continue;
        }
        let running = busy.entry(due.target_id).or_default();
        if *running >= limit {
            pass.deferred.push(due.vm);
            continue;
        }
        match take_automatic(env, &due, now).await {
            Ok(Some((id, action))) => {
                *running += 1;
                pass.taken.push((due.vm, id, action));
            }
            Ok(None) => pass.deferred.push(due.vm),
            // One VM's trouble (its quota, say) does not hold the others up.
            Err(e) => {
                tracing::warn!(vm = %due.vm, error = %e, "automatic backup not started");
                pass.deferred.push(due.vm);
            }
        }
    }
    for unwanted in meson_db::backups::unwanted(&env.pool, now).await? {
        match delete_unwanted(env, &unwanted).await {
            Ok(Some(action)) => pass.deleted.push((unwanted.id, action)),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(backup = %unwanted.id, error = %e, "backup delete not started")
            }
        }
    }
    Ok(pass)
}

/// Starts VM `due`'s automatic backup, taken at `now` (its id and its
/// action's); `None` when the VM is busy (another action holds its key).
async fn take_automatic(
    env: &Env,
    due: &meson_db::backups::Due,
    now: DateTime<Utc>,
) -> meson_core::Result<Option<(BackupId, ActionId)>> {
    let mut tx = meson_db::begin(&env.pool).await?;
    let vm = meson_db::vms::get_any(&mut *tx, due.vm).await?;
    let b = new_backup(
        &env.pool,
        &vm,
        BackupKind::Automatic,
        None,
        Default::default(),
        now,
    )
    .await?;
    let action = system_action(
        &vm.tenant,
        Command::CreateBackup,
        vec![(ResourceType::Backup, b.id.0), (ResourceType::Vm, vm.id.0)],
    );
    meson_db::actions::insert(&mut tx, &action).await?;
    let params = Params {
        backup_id: b.id,
        vm_id: vm.id,
    };
    if let Enqueued::Locked(_) = enqueue_create(&mut tx, &params, action.id, &vm.tenant).await? {
        return Ok(None);
    }
    // Counted against images_gb as a request's backup is.
    let (_, held) = meson_db::quotas::lock(&mut tx, &vm.tenant).await?;
    meson_db::backups::insert(&mut tx, &b).await?;
    let c = meson_db::quotas::over(&mut tx, &vm.tenant, &held, &env.config.quotas).await?;
    meson_core::quota::exceeded(&c.quotas, &c.held, &c.over)?;
    meson_db::commit(tx).await?;
    tracing::info!(backup = %b.id, vm = %vm.id, action = %action.id, "automatic backup started");
    Ok(Some((b.id, action.id)))
}

/// A new backup's row of `vm` (`creating`, on its host, sized as its
/// volumes), not written yet.
pub async fn new_backup(
    pool: &meson_db::PgPool,
    vm: &meson_core::vm::Vm,
    kind: BackupKind,
    name: Option<String>,
    labels: meson_core::labels::Labels,
    now: DateTime<Utc>,
) -> meson_core::Result<Backup> {
    let at = vm
        .placement
        .as_ref()
        .ok_or_else(|| meson_core::Error::Conflict {
            message: format!("VM {} is not on a host yet: nothing to back up", vm.name),
        })?;
    let volumes = meson_db::volumes::list_for_vms(pool, &[vm.id]).await?;
    let size_gb: u32 = volumes
        .iter()
        .filter(|v| v.kind != VolumeKind::Cloudinit)
        .map(|v| v.size_gb)
        .sum();
    Ok(Backup {
        id: BackupId::new(),
        tenant: vm.tenant.clone(),
        vm_id: vm.id,
        vm_name: vm.name.clone(),
        name: name.unwrap_or_else(|| backup::default_name(&vm.name, now)),
        labels,
        kind,
        status: BackupStatus::Creating,
        target_id: at.target_id,
        host: at.host.clone(),
        provider: at.provider.clone(),
        region: at.region.clone(),
        size_gb: size_gb.max(1),
        volumes: vec![],
        spec: vm.spec.clone(),
        error_message: None,
        created: now,
        expires: None,
    })
}

/// Starts deleting a backup the schedule no longer keeps (the delete's
/// action); `None` when it is busy (its create, a restore or another delete
/// running).
async fn delete_unwanted(
    env: &Env,
    u: &meson_db::backups::Unwanted,
) -> meson_core::Result<Option<ActionId>> {
    let mut tx = meson_db::begin(&env.pool).await?;
    let b = meson_db::backups::lock(&mut tx, &u.tenant, u.id).await?;
    if meson_db::backups::running_action(&mut tx, b.id)
        .await?
        .is_some()
    {
        return Ok(None);
    }
    let action = system_action(
        &b.tenant,
        Command::DeleteBackup,
        vec![(ResourceType::Backup, b.id.0)],
    );
    meson_db::actions::insert(&mut tx, &action).await?;
    let params = Params {
        backup_id: b.id,
        vm_id: b.vm_id,
    };
    if let Enqueued::Locked(_) = enqueue_delete(&mut tx, &params, action.id, &b.tenant).await? {
        return Ok(None);
    }
    meson_db::backups::set_status(
        &mut *tx,
        b.id,
        &[BackupStatus::Available, BackupStatus::Error],
        BackupStatus::Deleting,
        None,
    )
    .await?;
    meson_db::commit(tx).await?;
    tracing::info!(backup = %b.id, why = u.why, action = %action.id, "backup delete started");
    Ok(Some(action.id))
}
