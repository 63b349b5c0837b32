//! Attach a living VM to one of its tenant's private networks, or detach
//! it: AtomOS's `/network/attach` and `/network/detach` on the VM's host,
//! running or off. The API records the NIC (its MAC, and its address on a
//! network without DHCP) when it accepts an attach, so the address is the
//! VM's meanwhile, and forgets it when a detach is done. Both hold the
//! VM's concurrency key: they run alone with the VM's other actions.

use crate::Env;
use crate::atomos::step_error;
use crate::vm_power::{locate, locate_if_there};
use meson_core::action::ActionFailure;
use meson_core::network::Attachment;
use meson_core::{ActionId, Code, NetworkId, TenantId, VmId};
use meson_jobs::{Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Params {
    pub vm_id: VmId,
    pub network_id: NetworkId,
}

meson_jobs::steps! {
    pub enum AttachStep {
        /// Makes the network on the VM's host if the host has none of it yet.
        Network = "network",
        /// Asks the VM's host to plug the NIC in, with meson's MAC.
        Attach = "attach",
        /// Reads the VM back: the host lists the network on it.
        Confirm = "confirm",
    }
}

meson_jobs::steps! {
    pub enum DetachStep {
        /// Asks the VM's host to unplug the NIC.
        Detach = "detach",
        /// Forgets the NIC: its address is free again.
        Forget = "forget",
    }
}

pub struct VmAttachNetwork(pub Arc<Env>);
pub struct VmDetachNetwork(pub Arc<Env>);

/// Enqueues an attach (`attach`) or a detach in the caller's transaction
/// (which records an attach's NIC), under the VM's key.
pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    params: &Params,
    attach: bool,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    let key = crate::keys::vm(params.vm_id);
    if attach {
        crate::enqueue_keyed::<VmAttachNetwork>(tx, params, key, action, tenant).await
    } else {
        crate::enqueue_keyed::<VmDetachNetwork>(tx, params, key, action, tenant).await
    }
}

/// The VM's NIC on the network, as the API recorded it.
async fn nic(env: &Env, p: &Params) -> StepResult<Option<Attachment>> {
    Ok(meson_db::networks::attachments_of(&env.pool, &[p.vm_id])
        .await?
        .into_iter()
        .find(|n| n.network_id == p.network_id))
}

/// The network's AtomOS id on the VM's host, if it was ever made there.
async fn host_network(env: &Env, p: &Params) -> StepResult<Option<String>> {
    let vm = meson_db::vms::get_any(&env.pool, p.vm_id).await?;
    let Some(at) = vm.placement.as_ref() else {
        return Ok(None);
    };
    Ok(meson_db::networks::host_networks(&env.pool, p.network_id)
        .await?
        .into_iter()
        .find(|h| h.target == at.target_id)
        .and_then(|h| h.atomos_id))
}

/// The VM's host's client and id for the VM, and whether the host lists
/// the network (`id`) on it; `None` when the VM is gone from its host.
async fn on_host(
    env: &Env,
    vm: VmId,
    id: &str,
) -> StepResult<Option<(atomos_driver::AtomosClient, String, bool)>> {
    Ok(locate_if_there(env, vm).await?.map(|(c, found)| {
        let on = found.network_ids.iter().any(|n| n == id);
        (c, found.id, on)
    }))
}

impl Workflow for VmAttachNetwork {
    const KIND: &'static str = "vm_attach_network";
    type Params = Params;
    type Step = AttachStep;

    async fn run(&self, cx: &StepCtx<'_, Params, AttachStep>, step: AttachStep) -> StepResult {
        let env = &self.0;
        let p = cx.params;
        let nic = nic(env, p)
            .await?
            .ok_or_else(|| StepError::internal("the VM's NIC on the network is not recorded"))?;
        if step == AttachStep::Network {
            let vm = meson_db::vms::get_any(&env.pool, p.vm_id).await?;
            let (c, _) = locate(env, &vm).await?;
            let at = vm
                .placement
                .as_ref()
                .ok_or_else(|| StepError::fatal(Code::Conflict, "the VM is not placed"))?;
            let id =
                crate::provision::ensure_host_network(env, &c, at.target_id, p.network_id).await?;
            return to_output(id);
        }
        let id: String = cx.output(AttachStep::Network)?;
        let Some((c, vm, on)) = on_host(env, p.vm_id, &id).await? else {
            return Err(StepError::fatal(
                Code::NotFound,
                "the VM is missing from its hypervisor",
            ));
        };
        match step {
            AttachStep::Network => unreachable!("answered above"),
            AttachStep::Attach if !on => c
                .network_attach(&vm, &id, &nic.mac)
                .await
                .map_err(step_error)?,
            AttachStep::Attach => {}
            AttachStep::Confirm if !on => {
                return Err(StepError::fatal(
                    Code::ServiceError,
                    "the hypervisor accepted the attach but does not list the network on the VM",
                ));
            }
            AttachStep::Confirm => {}
        }
        to_output(())
    }

    /// Unplugs the NIC again if the host has it on the VM. (A network made
    /// on the host stays there for the next VM and goes with the network.)
    async fn undo(&self, cx: &StepCtx<'_, Params, AttachStep>, step: AttachStep) -> StepResult<()> {
        if step != AttachStep::Attach {
            return Ok(());
        }
        let env = &self.0;
        let id: String = cx.output(AttachStep::Network)?;
        if let Some((c, vm, true)) = on_host(env, cx.params.vm_id, &id).await? {
            c.network_detach(&vm, &id).await.map_err(step_error)?;
        }
        Ok(())
    }

    /// The attach did not happen (or was undone): the NIC and its address go.
    async fn on_failed(&self, params: &Params, _: &ActionFailure) -> StepResult<()> {
        meson_db::networks::detach_network(&self.0.pool, params.vm_id, params.network_id).await?;
        Ok(())
    }
}

impl Workflow for VmDetachNetwork {
    const KIND: &'static str = "vm_detach_network";
    type Params = Params;
    type Step = DetachStep;

    async fn run(&self, cx: &StepCtx<'_, Params, DetachStep>, step: DetachStep) -> StepResult {
        let env = &self.0;
        let p = cx.params;
        match step {
            DetachStep::Detach => {
                if let Some(id) = host_network(env, p).await?
                    && let Some((c, vm, true)) = on_host(env, p.vm_id, &id).await?
                {
                    c.network_detach(&vm, &id).await.map_err(step_error)?;
                }
            }
            DetachStep::Forget => {
                meson_db::networks::detach_network(&env.pool, p.vm_id, p.network_id).await?
            }
        }
        to_output(())
    }

    async fn undo(&self, _: &StepCtx<'_, Params, DetachStep>, _: DetachStep) -> StepResult<()> {
        crate::forward_only()
    }

    /// A detach that failed half-way: the NIC stays recorded while the
    /// host still has it on the VM, and goes once it does not.
    async fn on_failed(&self, params: &Params, _: &ActionFailure) -> StepResult<()> {
        let env = &self.0;
        let gone = match host_network(env, params).await? {
            None => true,
            Some(id) => !matches!(on_host(env, params.vm_id, &id).await?, Some((_, _, true))),
        };
        if gone {
            meson_db::networks::detach_network(&env.pool, params.vm_id, params.network_id).await?;
        }
        Ok(())
    }
}
