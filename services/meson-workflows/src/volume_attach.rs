//! Attach a standalone volume to a living VM, or detach it: AtomOS's
//! `/volume/attach` and `/volume/detach` on the VM's host, running or off.
//! The API records the attachment when it accepts an attach (so no other
//! VM or delete can take the volume meanwhile) and clears it when a detach
//! is done. Both hold the VM's concurrency key: they run alone with the
//! VM's create, power, image and delete.

use crate::Env;
use crate::atomos::step_error;
use crate::vm_power::locate_if_there;
use meson_core::action::ActionFailure;
use meson_core::volume::Volume;
use meson_core::{ActionId, Code, TenantId, VmId, VolumeId};
use meson_jobs::{Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Params {
    pub volume_id: VolumeId,
    pub vm_id: VmId,
}

meson_jobs::steps! {
    pub enum AttachStep {
        /// Asks the VM's host to attach the volume.
        Attach = "attach",
        /// Reads the VM back: the host lists the volume on it.
        Confirm = "confirm",
    }
}

meson_jobs::steps! {
    pub enum DetachStep {
        /// Asks the VM's host to detach the volume.
        Detach = "detach",
        /// Clears the attachment: the volume is `available`.
        Forget = "forget",
    }
}

pub struct VolumeAttach(pub Arc<Env>);
pub struct VolumeDetach(pub Arc<Env>);

async fn enqueue<W: Workflow<Params = Params>>(
    tx: &mut meson_db::Tx<'_>,
    params: &Params,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    crate::enqueue_keyed::<W>(tx, params, crate::keys::vm(params.vm_id), action, tenant).await
}

/// Enqueues an attach in the caller's transaction (which recorded it).
pub async fn enqueue_attach(
    tx: &mut meson_db::Tx<'_>,
    params: &Params,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    enqueue::<VolumeAttach>(tx, params, action, tenant).await
}

/// Enqueues a detach in the caller's transaction.
pub async fn enqueue_detach(
    tx: &mut meson_db::Tx<'_>,
    params: &Params,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    enqueue::<VolumeDetach>(tx, params, action, tenant).await
}

/// The volume's id on AtomOS; a volume that has none was never made.
fn atomos_id(v: &Volume) -> StepResult<&str> {
    v.atomos_id
        .as_deref()
        .ok_or_else(|| StepError::fatal(Code::Conflict, "the volume is not on AtomOS"))
}

/// Whether the VM's host lists the volume on the VM; `None` when the VM
/// is gone from its host (nothing is attached to it any more).
async fn attached_on_host(
    env: &Env,
    vm: VmId,
    volume: &str,
) -> StepResult<Option<(atomos_driver::AtomosClient, String, bool)>> {
    Ok(locate_if_there(env, vm).await?.map(|(c, found)| {
        let on = found.volume_ids.iter().any(|v| v == volume);
        (c, found.id, on)
    }))
}

impl Workflow for VolumeAttach {
    const KIND: &'static str = "volume_attach";
    type Params = Params;
    type Step = AttachStep;

    async fn run(&self, cx: &StepCtx<'_, Params, AttachStep>, step: AttachStep) -> StepResult {
        let env = &self.0;
        let v = meson_db::volumes::get_including_deleted(&env.pool, cx.params.volume_id).await?;
        let id = atomos_id(&v)?;
        let Some((c, vm, on)) = attached_on_host(env, cx.params.vm_id, id).await? else {
            return Err(StepError::fatal(
                Code::NotFound,
                "the VM is missing from its hypervisor",
            ));
        };
        match step {
            AttachStep::Attach if !on => c.volume_attach(&vm, id).await.map_err(step_error)?,
            AttachStep::Attach => {}
            AttachStep::Confirm if !on => {
                return Err(StepError::fatal(
                    Code::ServiceError,
                    "the hypervisor accepted the attach but does not list the volume on the VM",
                ));
            }
            AttachStep::Confirm => {}
        }
        to_output(())
    }

    /// Detaches the volume again if the host has it on the VM.
    async fn undo(&self, cx: &StepCtx<'_, Params, AttachStep>, step: AttachStep) -> StepResult<()> {
        if step != AttachStep::Attach {
            return Ok(());
        }
        let env = &self.0;
        let v = meson_db::volumes::get_including_deleted(&env.pool, cx.params.volume_id).await?;
        let Some(id) = v.atomos_id.as_deref() else {
            return Ok(());
        };
        if let Some((c, vm, true)) = attached_on_host(env, cx.params.vm_id, id).await? {
            c.volume_detach(&vm, id).await.map_err(step_error)?;
        }
        Ok(())
    }

    /// The attach did not happen (or was undone): the volume is free again.
    async fn on_failed(&self, params: &Params, _: &ActionFailure) -> StepResult<()> {
        meson_db::volumes::detach(&self.0.pool, params.volume_id, params.vm_id).await?;
        Ok(())
    }
}

impl Workflow for VolumeDetach {
    const KIND: &'static str = "volume_detach";
    type Params = Params;
    type Step = DetachStep;

    async fn run(&self, cx: &StepCtx<'_, Params, DetachStep>, step: DetachStep) -> StepResult {
        let env = &self.0;
        match step {
            DetachStep::Detach => {
                let v = meson_db::volumes::get_including_deleted(&env.pool, cx.params.volume_id)
                    .await?;
                if let Some(id) = v.atomos_id.as_deref()
                    && let Some((c, vm, true)) = attached_on_host(env, cx.params.vm_id, id).await?
                {
                    c.volume_detach(&vm, id).await.map_err(step_error)?;
                }
            }
            DetachStep::Forget => {
                meson_db::volumes::detach(&env.pool, cx.params.volume_id, cx.params.vm_id).await?
            }
        }
        to_output(())
    }

    async fn undo(&self, _: &StepCtx<'_, Params, DetachStep>, _: DetachStep) -> StepResult<()> {
        crate::forward_only()
    }

    /// A detach that failed half-way: the row follows the host, so a volume
    /// the host no longer has on the VM is `available`, else still attached.
    async fn on_failed(&self, params: &Params, _: &ActionFailure) -> StepResult<()> {
        let env = &self.0;
        let v = meson_db::volumes::get_including_deleted(&env.pool, params.volume_id).await?;
        let Some(id) = v.atomos_id.as_deref() else {
            return Ok(());
        };
        if let Some((_, _, false)) | None = attached_on_host(env, params.vm_id, id).await? {
            meson_db::volumes::detach(&env.pool, params.volume_id, params.vm_id).await?;
        }
        Ok(())
    }
}
