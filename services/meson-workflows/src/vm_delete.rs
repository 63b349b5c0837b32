//! Delete a VM: remove its port forwards, unregister it, destroy every
//! volume it owns, forget it. Its backups stay: manual ones until deleted,
//! automatic ones `keep` days (its policy's).

use crate::Env;
use crate::atomos::unregister_by_name;
use meson_core::action::ActionFailure;
use meson_core::{ActionId, TenantId, VmId};
use meson_jobs::{Enqueued, StepCtx, StepResult, Workflow, to_output};
use std::sync::Arc;

/// The VM the workflow works on (shared by every VM workflow).
pub type Params = crate::VmParams;

pub struct VmDelete(pub Arc<Env>);

meson_jobs::steps! {
    pub enum VmDeleteStep {
        /// Removes the VM's port forwards from its host and forgets them.
        PortForwards = "port_forwards",
        Unregister = "unregister",
        DestroyVolumes = "destroy_volumes",
        Forget = "forget",
    }
}

pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    vm: VmId,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    // Deleting must get through transient faults; it has nothing to undo.
    crate::enqueue_for_vm::<VmDelete>(tx, vm, action, tenant, 25).await
}

impl Workflow for VmDelete {
    const KIND: &'static str = "vm_delete";
    type Params = Params;
    type Step = VmDeleteStep;

    async fn run(&self, cx: &StepCtx<'_, Params, VmDeleteStep>, step: VmDeleteStep) -> StepResult {
        let env = &self.0;
        let vm = meson_db::vms::get_including_deleted(&env.pool, cx.params.vm_id).await?;
        let client = match &vm.placement {
            Some(p) => Some(env.atomos.client(p.target_id).await?),
            // Never placed: nothing exists on AtomOS.
            None => None,
        };
        match (step, client) {
            (VmDeleteStep::PortForwards, _) => {
                crate::port_forward::remove_all_of(env, vm.id).await?
            }
            (VmDeleteStep::Unregister, Some(c)) => unregister_by_name(&c, &vm.atomos_name).await?,
            (VmDeleteStep::DestroyVolumes, Some(_)) => crate::provision::teardown(env, &vm).await?,
            (VmDeleteStep::Forget, _) => {
                let mut tx = meson_db::begin(&env.pool).await?;
                meson_db::vms::mark_deleted(&mut tx, vm.id).await?;
                // Its automatic backups outlive it by as many days as its
                // policy kept them.
                if let Some(policy) = vm.backup_policy {
                    let expires = chrono::Utc::now() + chrono::Duration::days(policy.keep.into());
                    meson_db::backups::set_expiry(&mut *tx, vm.id, Some(expires)).await?;
                }
                meson_db::commit(tx).await?;
            }
            (VmDeleteStep::Unregister | VmDeleteStep::DestroyVolumes, None) => {}
        }
        to_output(())
    }

    async fn undo(&self, _: &StepCtx<'_, Params, VmDeleteStep>, _: VmDeleteStep) -> StepResult<()> {
        // Deleting is forward-only: a half-deleted VM is not brought back.
        Ok(())
    }

    async fn on_failed(&self, params: &Params, failure: &ActionFailure) -> StepResult<()> {
        meson_db::vms::set_error(&self.0.pool, params.vm_id, &failure.message).await?;
        Ok(())
    }
}
