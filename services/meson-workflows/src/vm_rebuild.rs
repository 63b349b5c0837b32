//! Rebuild a VM: a new boot volume (a copy of an image, or a distribution's
//! cloud image) in place of the old one, on the VM's host; the VM keeps its
//! id, address, cloud-init volume (so its name, keys and network config)
//! and data volumes. A running VM is stopped for the swap and started
//! again, as Hetzner's rebuild does. The API records the new boot volume's
//! row and the VM's new spec when it accepts; a rebuild that fails is
//! undone step by step (the old boot volume back on the VM, the new one
//! destroyed) and the old spec recorded again, until its commit point: the
//! old boot volume given up, after which it rolls forward.

use crate::Env;
use crate::atomos::{destroy_volume, step_error};
use crate::vm_power::{self, PowerOff, PowerOn, locate};
use atomos_driver::ImageVolumeCreate;
use meson_core::action::ActionFailure;
use meson_core::volume::{Volume, VolumeStatus};
use meson_core::{ActionId, Code, ImageId, TenantId, VmId, VolumeId};
use meson_jobs::{Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Params {
    pub vm_id: VmId,
    /// The boot volume's row now, and the new one's (written at accept).
    pub old_boot: VolumeId,
    pub new_boot: VolumeId,
    /// The VM was running: it is stopped for the swap and started again.
    pub restart: bool,
    /// The spec before (put back if the rebuild fails).
    pub from: meson_core::vm::VmSpec,
}

meson_jobs::steps! {
    pub enum RebuildStep {
        /// Stops a running VM.
        Stop = "stop",
        /// Makes the new boot volume on the VM's host.
        Make = "make",
        /// Detaches the old boot volume and attaches the new one.
        Swap = "swap",
        /// Starts the VM again (if it was running).
        Start = "start",
        /// Destroys the old boot volume and records the new one.
        Clean = "clean",
    }
}

pub struct VmRebuild(pub Arc<Env>);

/// Enqueues the rebuild in the caller's transaction, under the VM's key.
pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    params: &Params,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    crate::enqueue_keyed::<VmRebuild>(tx, params, crate::keys::vm(params.vm_id), action, tenant)
        .await
}

async fn volume(env: &Env, id: VolumeId) -> StepResult<Volume> {
    Ok(meson_db::volumes::get_including_deleted(&env.pool, id).await?)
}

/// The rebuild is committed once the old boot volume's row is given up
/// (`Clean` does it first): it is not undone after that.
fn committed(old: &Volume) -> bool {
    old.status == VolumeStatus::Deleting
}

/// Makes the new boot volume on the VM's host (found by name after a
/// crash): a copy of the image, grown to the boot size, or the cloud image.
async fn make(env: &Env, vm: &meson_core::vm::Vm, new: &Volume) -> StepResult<String> {
    let (c, _) = locate(env, vm).await?;
    let target = vm
        .placement
        .as_ref()
        .ok_or_else(|| StepError::internal("a placed VM has no placement"))?
        .target_id;
    let id = match env
        .atomos
        .volume_by_name(target, &c, &new.atomos_name)
        .await?
    {
        Some(found) => found.id,
        None => match vm.spec.image {
            Some(image) => copy_of(env, &c, image, &new.atomos_name).await?,
            None => c
                .volume_create_from_image(&ImageVolumeCreate {
                    name: new.atomos_name.clone(),
                    size_gb: new.size_gb,
                    url: vm.spec.os.image_url.clone(),
                })
                .await
                .map_err(step_error)?,
        },
    };
    let has = c.volume_info(&id).await.map_err(step_error)?.size_gb;
    if has + 1e-9 < f64::from(new.size_gb) {
        c.volume_resize(&id, new.size_gb)
            .await
            .map_err(step_error)?;
    }
    meson_db::volumes::set_atomos(&env.pool, new.id, Some(&id), VolumeStatus::Creating).await?;
    Ok(id)
}

async fn copy_of(
    env: &Env,
    c: &atomos_driver::AtomosClient,
    image: ImageId,
    name: &str,
) -> StepResult<String> {
    let image = meson_db::images::get_including_deleted(&env.pool, image).await?;
    let source = image.atomos_id.ok_or_else(|| {
        StepError::fatal(
            Code::Conflict,
            format!("image {} is not on AtomOS", image.name),
        )
    })?;
    c.volume_clone(&source, name).await.map_err(step_error)
}

/// Puts `on` on the VM and `off` off it (AtomOS ids), each if needed.
async fn swap(
    env: &Env,
    vm: &meson_core::vm::Vm,
    off: Option<&str>,
    on: Option<&str>,
) -> StepResult<()> {
    let (c, found) = locate(env, vm).await?;
    if let Some(off) = off
        && found.volume_ids.iter().any(|v| v == off)
    {
        c.volume_detach(&found.id, off).await.map_err(step_error)?;
    }
    if let Some(on) = on
        && !found.volume_ids.iter().any(|v| v == on)
    {
        c.volume_attach(&found.id, on).await.map_err(step_error)?;
    }
    Ok(())
}

impl Workflow for VmRebuild {
    const KIND: &'static str = "vm_rebuild";
    type Params = Params;
    type Step = RebuildStep;

    async fn run(&self, cx: &StepCtx<'_, Params, RebuildStep>, step: RebuildStep) -> StepResult {
        let env = &self.0;
        let p = cx.params;
        let vm = meson_db::vms::get_any(&env.pool, p.vm_id).await?;
        let (old, new) = (
            volume(env, p.old_boot).await?,
            volume(env, p.new_boot).await?,
        );
        match step {
            RebuildStep::Stop if p.restart => vm_power::power::<PowerOff>(env, &vm).await?,
            RebuildStep::Make => {
                make(env, &vm, &new).await?;
            }
            RebuildStep::Swap => {
                swap(env, &vm, old.atomos_id.as_deref(), new.atomos_id.as_deref()).await?
            }
            RebuildStep::Start if p.restart => vm_power::power::<PowerOn>(env, &vm).await?,
            RebuildStep::Clean => {
                // The commit point, recorded before the old disk goes: from
                // here on a failure rolls forward (see `committed`).
                if !committed(&old) {
                    let mut tx = meson_db::begin(&env.pool).await?;
                    meson_db::volumes::mark_deleted(&mut *tx, old.id).await?;
                    meson_db::volumes::set_status(&mut *tx, new.id, VolumeStatus::Available)
                        .await?;
                    meson_db::commit(tx).await?;
                }
                let (c, _) = locate(env, &vm).await?;
                if let Some(id) = &old.atomos_id {
                    destroy_volume(&c, id).await?;
                }
            }
            RebuildStep::Stop | RebuildStep::Start => {}
        }
        to_output(())
    }

    /// Puts the VM back as it was, step by step; once committed (the old
    /// disk given up), nothing is undone: the rebuild stands.
    async fn undo(
        &self,
        cx: &StepCtx<'_, Params, RebuildStep>,
        step: RebuildStep,
    ) -> StepResult<()> {
        let env = &self.0;
        let p = cx.params;
        let vm = meson_db::vms::get_any(&env.pool, p.vm_id).await?;
        let (old, new) = (
            volume(env, p.old_boot).await?,
            volume(env, p.new_boot).await?,
        );
        if committed(&old) {
            return Ok(());
        }
        match step {
            RebuildStep::Start if p.restart => vm_power::power::<PowerOff>(env, &vm).await,
            RebuildStep::Swap => {
                swap(env, &vm, new.atomos_id.as_deref(), old.atomos_id.as_deref()).await
            }
            RebuildStep::Make => {
                let (c, _) = locate(env, &vm).await?;
                let target = vm.placement.as_ref().map(|pl| pl.target_id);
                if let Some(target) = target
                    && let Some(found) = env
                        .atomos
                        .volume_by_name(target, &c, &new.atomos_name)
                        .await?
                {
                    destroy_volume(&c, &found.id).await?;
                }
                if let Some(id) = &new.atomos_id {
                    destroy_volume(&c, id).await?;
                }
                meson_db::volumes::set_atomos(&env.pool, new.id, None, VolumeStatus::Creating)
                    .await?;
                Ok(())
            }
            RebuildStep::Stop if p.restart => vm_power::power::<PowerOn>(env, &vm).await,
            RebuildStep::Stop | RebuildStep::Start | RebuildStep::Clean => Ok(()),
        }
    }

    /// The new boot volume's row goes, the old spec is the VM's again, and
    /// its status is what the host shows.
    async fn on_failed(&self, params: &Params, _: &ActionFailure) -> StepResult<()> {
        let env = &self.0;
        if !committed(&volume(env, params.old_boot).await?) {
            let mut tx = meson_db::begin(&env.pool).await?;
            meson_db::volumes::mark_deleted(&mut *tx, params.new_boot).await?;
            meson_db::vms::set_spec(&mut *tx, params.vm_id, &params.from).await?;
            meson_db::commit(tx).await?;
        }
        let vm = meson_db::vms::get_any(&env.pool, params.vm_id).await?;
        vm_power::settle(env, &vm).await?;
        Ok(())
    }
}
