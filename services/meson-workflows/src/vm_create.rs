//! Create a VM: place → its private networks on the host → boot volume →
//! cloud-init ISO → data volumes → (restored from a backup) → register →
//! wait until running with an IPv4.
//!
//! The steps are the pieces of [`crate::provision`]; this workflow adds the
//! placement (the cheapest host that fits) and the unwind.

use crate::Env;
use crate::provision;
use meson_core::action::ActionFailure;
use meson_core::vm::{Vm, VmStatus};
use meson_core::volume::{VolumeKind, VolumeStatus};
use meson_core::{ActionId, TenantId, VmId};
use meson_jobs::{EnqueueOpts, Enqueued, StepCtx, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The VM the workflow works on (shared by every VM workflow).
pub type Params = crate::VmParams;

pub struct VmCreate(pub Arc<Env>);

meson_jobs::steps! {
    pub enum VmCreateStep {
        Place = "place",
        Networks = "networks",
        BootVolume = "boot_volume",
        CloudinitVolume = "cloudinit_volume",
        DataVolumes = "data_volumes",
        /// A VM restored from a backup: its volumes written from it.
        Restore = "restore",
        Register = "register",
        WaitRunning = "wait_running",
    }
}

/// Enqueues the workflow in the caller's transaction.
pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    vm: VmId,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    crate::enqueue_for_vm::<VmCreate>(tx, vm, action, tenant, EnqueueOpts::default().max_attempts)
        .await
}

/// The workflow's job, for a statement that writes it with the VM.
pub fn job(
    vm: VmId,
    action: ActionId,
    tenant: &TenantId,
) -> Result<meson_db::jobs::NewJob, meson_core::Error> {
    crate::job_for_vm::<VmCreate>(vm, action, tenant, EnqueueOpts::default().max_attempts)
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Created {
    atomos_id: String,
}

impl Workflow for VmCreate {
    const KIND: &'static str = "vm_create";
    type Params = Params;
    type Step = VmCreateStep;

    async fn run(&self, cx: &StepCtx<'_, Params, VmCreateStep>, step: VmCreateStep) -> StepResult {
        let env = &self.0;
        let vm = meson_db::vms::get_any(&env.pool, cx.params.vm_id).await?;
        match step {
            VmCreateStep::Place => self.place(&vm).await,
            VmCreateStep::Networks => to_output(provision::ensure_networks(env, &vm).await?),
            VmCreateStep::BootVolume => to_output(provision::ensure_boot_volume(env, &vm).await?),
            VmCreateStep::CloudinitVolume => {
                let files = provision::vm_cloudinit_files(env, &vm).await?;
                to_output(provision::ensure_cloudinit_volume(env, &vm, files).await?)
            }
            VmCreateStep::DataVolumes => to_output(provision::ensure_data_volumes(env, &vm).await?),
            VmCreateStep::Restore => {
                if let Some(backup) = vm.spec.backup {
                    crate::vm_restore::write(env, backup, &vm).await?;
                }
                to_output(())
            }
            VmCreateStep::Register => {
                to_output(provision::register_placed(env, vm.id, &provision::PlainVm).await?)
            }
            VmCreateStep::WaitRunning => to_output(Created {
                atomos_id: provision::wait_running(env, &vm).await?,
            }),
        }
    }

    async fn undo(
        &self,
        cx: &StepCtx<'_, Params, VmCreateStep>,
        step: VmCreateStep,
    ) -> StepResult<()> {
        let env = &self.0;
        let vm = meson_db::vms::get_any(&env.pool, cx.params.vm_id).await?;
        if step == VmCreateStep::Place {
            provision::unplace(env, vm.id).await?;
            return Ok(());
        }
        // Not placed (or placement already undone): nothing exists on AtomOS.
        if vm.placement.is_none() {
            return Ok(());
        }
        match step {
            VmCreateStep::Register => {
                let c = provision::client(env, &vm).await?;
                crate::atomos::unregister_by_name(&c, &vm.atomos_name).await
            }
            VmCreateStep::BootVolume => provision::undo_volumes(env, &vm, VolumeKind::Boot).await,
            VmCreateStep::CloudinitVolume => {
                provision::undo_volumes(env, &vm, VolumeKind::Cloudinit).await
            }
            VmCreateStep::DataVolumes => provision::undo_volumes(env, &vm, VolumeKind::Data).await,
            // Placement is undone above; the rest leave nothing to remove.
            // The volumes written go with their own steps' undo.
            VmCreateStep::Place
            | VmCreateStep::Networks
            | VmCreateStep::Restore
            | VmCreateStep::WaitRunning => Ok(()),
        }
    }

    async fn on_failed(&self, params: &Params, failure: &ActionFailure) -> StepResult<()> {
        let pool = &self.0.pool;
        meson_db::vms::set_runtime(pool, params.vm_id, VmStatus::Error, None, None).await?;
        // The VM says why, as its action does.
        meson_db::vms::set_error(pool, params.vm_id, &failure.message).await?;
        meson_db::reservations::release(pool, params.vm_id).await?;
        meson_db::volumes::set_status_for_vm(pool, params.vm_id, VolumeStatus::Error).await?;
        // The standalone volumes it was to attach are free again.
        meson_db::volumes::detach_all(pool, params.vm_id).await?;
        Ok(())
    }
}

pub use crate::placement::placement_allows;

/// The driver's view of a VM spec.
pub fn driver_spec(vm: &Vm) -> atomos_driver::VmSpec {
    crate::placement::driver_spec(&vm.spec)
}

impl VmCreate {
    /// Asks every candidate target for a quote and takes the cheapest that
    /// still fits with the placements in flight (reserving its share); a VM
    /// attaching standalone volumes goes to their host.
    async fn place(&self, vm: &Vm) -> StepResult {
        let env = &self.0;
        if let Some(placed) = &vm.placement {
            // Placed before a crash, or placed again by `register`.
            return to_output(placed.clone());
        }
        // A VM asked for long ago may have been made by a run the
        // database no longer remembers (restored from a backup): look for
        // it first. A fresh one cannot be anywhere yet: no host is asked.
        let asked = chrono::Utc::now() - vm.created;
        let late = asked
            .to_std()
            .is_ok_and(|a| a > crate::placement::LATE_PLACEMENT);
        if late && let Some(found) = crate::placement::found_on_a_host(env, vm).await? {
            tracing::warn!(vm = %vm.id, host = %found.host,
                "the VM is on a host already (made by a run the database no longer remembers)");
            return to_output(found);
        }
        let placement = crate::placement::place_vm(env, vm, &[]).await?;
        tracing::info!(vm = %vm.id, host = %placement.host, price = placement.price_hourly, "placed vm");
        to_output(placement)
    }
}
