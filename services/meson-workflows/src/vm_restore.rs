//! Restore a VM from a backup: AtomOS's compute `POST /backup/restore`
//! writes the backup's copies into the VM's volumes on the backup's host.
//!
//! Into the same VM: a running VM is stopped, its volumes overwritten (its
//! boot volume with the boot copy, each data volume still attached with
//! its own copy) and started again. Stopping is undone by starting; the
//! write is the commit point (the volumes' earlier bytes are gone), after
//! which the restore rolls forward.
//!
//! Into a new VM: [`crate::vm_create`] makes a VM like the backed-up one on
//! the backup's host and, before registering it, writes its boot and data
//! volumes from the backup with [`write`].

use crate::Env;
use crate::atomos::step_error;
use crate::vm_power::{self, PowerOff, PowerOn};
use meson_core::action::ActionFailure;
use meson_core::backup::{Backup, BackupStatus};
use meson_core::vm::Vm;
use meson_core::volume::VolumeKind;
use meson_core::{ActionId, BackupId, Code, TenantId, VmId};
use meson_jobs::{Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Params {
    pub vm_id: VmId,
    pub backup_id: BackupId,
    /// The VM was running: it is stopped for the write and started again.
    pub restart: bool,
}

meson_jobs::steps! {
    pub enum RestoreStep {
        /// Stops a running VM.
        Stop = "stop",
        /// Writes the backup's copies into the VM's volumes.
        Write = "write",
        /// Starts the VM again (if it was running).
        Start = "start",
    }
}

pub struct VmRestore(pub Arc<Env>);

/// Enqueues the restore in the caller's transaction, under the VM's key.
pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    params: &Params,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    crate::enqueue_keyed::<VmRestore>(tx, params, crate::keys::vm(params.vm_id), action, tenant)
        .await
}

/// Which copy of `b` goes into which of `vm`'s volumes, as AtomOS ids
/// `(copy, volume)`. Into the backed-up VM itself (`same`): the boot copy
/// into its boot volume, each data copy into its volume if still attached
/// (a volume the backup has but the VM no longer: `conflict`, naming it).
/// Into another VM (a new one made like the backed-up one): the boot copy
/// into its boot volume, each of the backed-up VM's own data volumes'
/// copies into the new VM's data volume of the same name; copies of
/// standalone volumes are left out.
pub async fn pairs(env: &Env, b: &Backup, vm: &Vm) -> StepResult<Vec<(String, String)>> {
    let volumes = meson_db::volumes::list_for_vms(&env.pool, &[vm.id]).await?;
    let same = vm.id == b.vm_id;
    let mut out = Vec::new();
    for copy in &b.volumes {
        let into = match (copy.kind, same) {
            (VolumeKind::Boot, _) => volumes.iter().find(|v| v.kind == VolumeKind::Boot),
            (VolumeKind::Cloudinit, _) => continue,
            (VolumeKind::Data, true) => {
                let found = volumes.iter().find(|v| Some(v.id) == copy.volume);
                if found.is_none() {
                    return Err(StepError::fatal(
                        Code::Conflict,
                        format!(
                            "volume {} of the backup is no longer attached to the VM: attach it \
                             again, or restore into a new VM",
                            copy.volume
                                .map(|v| v.to_string())
                                .unwrap_or(copy.source.clone())
                        ),
                    ));
                }
                found
            }
            (VolumeKind::Data, false) if copy.standalone => continue,
            (VolumeKind::Data, false) => {
                let Some(source) = copy.volume else { continue };
                let name = meson_db::volumes::get_including_deleted(&env.pool, source)
                    .await?
                    .name;
                volumes.iter().find(|v| {
                    v.kind == VolumeKind::Data && v.vm_id == Some(vm.id) && v.name == name
                })
            }
        };
        let into = into.and_then(|v| v.atomos_id.clone()).ok_or_else(|| {
            StepError::internal(format!(
                "the VM has no volume on its host for the backup's copy of {}",
                copy.source
            ))
        })?;
        out.push((copy.source.clone(), into));
    }
    if out.is_empty() {
        return Err(StepError::fatal(
            Code::Conflict,
            "the backup holds no copy of the VM's volumes",
        ));
    }
    Ok(out)
}

/// Writes backup `backup`'s copies into `vm`'s volumes on its host (the
/// backup's): the step both restores share. Writing again writes the same
/// bytes, so a retried step is harmless.
pub async fn write(env: &Env, backup: BackupId, vm: &Vm) -> StepResult<()> {
    let b = meson_db::backups::get_including_deleted(&env.pool, backup).await?;
    if b.status != BackupStatus::Available {
        return Err(StepError::fatal(
            Code::Conflict,
            format!("backup {} is {}, not available", b.name, b.status.as_str()),
        ));
    }
    if vm.placement.as_ref().map(|p| p.target_id) != Some(b.target_id) {
        return Err(StepError::fatal(
            Code::Conflict,
            format!(
                "the VM is not on host {}, where backup {} is",
                b.host, b.name
            ),
        ));
    }
    let pairs = pairs(env, &b, vm).await?;
    let c = env.atomos.client(b.target_id).await?;
    c.backup_restore(&b.id.to_string(), &pairs)
        .await
        .map_err(step_error)?;
    tracing::info!(backup = %b.id, vm = %vm.id, volumes = pairs.len(), "backup written");
    Ok(())
}

impl Workflow for VmRestore {
    const KIND: &'static str = "vm_restore";
    type Params = Params;
    type Step = RestoreStep;

    async fn run(&self, cx: &StepCtx<'_, Params, RestoreStep>, step: RestoreStep) -> StepResult {
        let env = &self.0;
        let p = cx.params;
        let vm = meson_db::vms::get_any(&env.pool, p.vm_id).await?;
        match step {
            RestoreStep::Stop if p.restart => vm_power::power::<PowerOff>(env, &vm).await?,
            RestoreStep::Write => write(env, p.backup_id, &vm).await?,
            RestoreStep::Start if p.restart => vm_power::power::<PowerOn>(env, &vm).await?,
            RestoreStep::Stop | RestoreStep::Start => {}
        }
        to_output(())
    }

    /// Starts a VM it stopped again; the write is not undone (its volumes'
    /// earlier bytes are gone): a failure after it leaves the restored VM.
    async fn undo(
        &self,
        cx: &StepCtx<'_, Params, RestoreStep>,
        step: RestoreStep,
    ) -> StepResult<()> {
        let env = &self.0;
        let p = cx.params;
        match step {
            RestoreStep::Stop if p.restart => {
                let vm = meson_db::vms::get_any(&env.pool, p.vm_id).await?;
                vm_power::power::<PowerOn>(env, &vm).await
            }
            RestoreStep::Stop | RestoreStep::Write | RestoreStep::Start => Ok(()),
        }
    }

    /// The VM's status is what its host shows.
    async fn on_failed(&self, params: &Params, _: &ActionFailure) -> StepResult<()> {
        let env = &self.0;
        let vm = meson_db::vms::get_any(&env.pool, params.vm_id).await?;
        vm_power::settle(env, &vm).await?;
        Ok(())
    }
}
