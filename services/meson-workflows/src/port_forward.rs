//! Port forwards on a VM's host: create one (AtomOS's network daemon
//! `POST /portforward`, with meson's id as its `forward_uid`, so a retried
//! call finds what the first made) and delete one. Both run under the VM's
//! concurrency key: a forward is never made while its VM is being deleted,
//! migrated or taken off the network. A VM's delete removes its forwards
//! itself ([`remove_all_of`]).

use crate::atomos::step_error;
use crate::vm_power::locate;
use crate::{DeleteStep, Env};
use atomos_driver::{AtomosClient, ErrorKind};
use meson_core::action::ActionFailure;
use meson_core::port_forward::{PortForward, PortForwardStatus};
use meson_core::{ActionId, Code, PortForwardId, TenantId, VmId};
use meson_jobs::{Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Params {
    pub forward_id: PortForwardId,
    pub vm_id: VmId,
}

meson_jobs::steps! {
    pub enum CreateStep {
        /// Asks the VM's host to forward the public port to the VM.
        Forward = "forward",
        /// Reads the host's forwards back: it lists this one.
        Confirm = "confirm",
    }
}

pub struct PortForwardCreate(pub Arc<Env>);
pub struct PortForwardDelete(pub Arc<Env>);

/// Enqueues a create (`create`) or a delete in the caller's transaction,
/// under the VM's key.
pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    params: &Params,
    create: bool,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    let key = crate::keys::vm(params.vm_id);
    if create {
        crate::enqueue_keyed::<PortForwardCreate>(tx, params, key, action, tenant).await
    } else {
        crate::enqueue_keyed::<PortForwardDelete>(tx, params, key, action, tenant).await
    }
}

/// The forward's host client.
async fn host(env: &Env, f: &PortForward) -> StepResult<AtomosClient> {
    env.atomos.client(f.target_id).await
}

/// Removes a forward from its host; one the host does not have is gone.
async fn remove(c: &AtomosClient, f: &PortForward) -> StepResult<()> {
    match c.port_forward_delete(&f.id.to_string()).await {
        Err(e) if !e.is_not_found() => Err(step_error(e)),
        _ => Ok(()),
    }
}

/// Removes every live forward of a VM from its host and forgets them (a
/// VM's delete, before the VM goes).
pub async fn remove_all_of(env: &Env, vm: VmId) -> StepResult<()> {
    for f in meson_db::port_forwards::list(&env.pool, meson_db::port_forwards::Of::Vm(vm)).await? {
        remove(&host(env, &f).await?, &f).await?;
        meson_db::port_forwards::mark_deleted(&env.pool, f.id).await?;
    }
    Ok(())
}

impl Workflow for PortForwardCreate {
    const KIND: &'static str = "port_forward_create";
    type Params = Params;
    type Step = CreateStep;

    async fn run(&self, cx: &StepCtx<'_, Params, CreateStep>, step: CreateStep) -> StepResult {
        let env = &self.0;
        let f =
            meson_db::port_forwards::get_including_deleted(&env.pool, cx.params.forward_id).await?;
        match step {
            CreateStep::Forward => {
                let vm = meson_db::vms::get_any(&env.pool, f.vm_id).await?;
                let (c, found) = locate(env, &vm).await?;
                if vm.placement.as_ref().map(|p| p.target_id) != Some(f.target_id) {
                    return Err(StepError::fatal(
                        Code::Conflict,
                        "the VM is no longer on the host the forward was made for",
                    ));
                }
                let req = atomos_driver::PortForwardCreate {
                    id: f.id.to_string(),
                    protocol: f.protocol.as_str().to_owned(),
                    port: f.public_port,
                    vm_id: found.id,
                    vm_name: found.name,
                    target_port: f.private_port,
                };
                c.port_forward_create(&req).await.map_err(|e| {
                    if e.kind == ErrorKind::AlreadyExists {
                        StepError::fatal(
                            Code::Conflict,
                            format!(
                                "public_port {}/{} is in use on host {}: {}",
                                f.public_port,
                                f.protocol.as_str(),
                                f.host,
                                e.message
                            ),
                        )
                    } else {
                        step_error(e)
                    }
                })?;
            }
            CreateStep::Confirm => {
                let listed = host(env, &f)
                    .await?
                    .port_forwards()
                    .await
                    .map_err(step_error)?;
                if !listed.iter().any(|l| l.id == f.id.to_string()) {
                    return Err(StepError::fatal(
                        Code::ServiceError,
                        "the hypervisor accepted the forward but does not list it",
                    ));
                }
                meson_db::port_forwards::set_status(
                    &env.pool,
                    f.id,
                    &[PortForwardStatus::Creating],
                    PortForwardStatus::Active,
                    None,
                )
                .await?;
            }
        }
        to_output(())
    }

    /// Removes the forward from the host again.
    async fn undo(&self, cx: &StepCtx<'_, Params, CreateStep>, step: CreateStep) -> StepResult<()> {
        if step != CreateStep::Forward {
            return Ok(());
        }
        let env = &self.0;
        let f =
            meson_db::port_forwards::get_including_deleted(&env.pool, cx.params.forward_id).await?;
        remove(&host(env, &f).await?, &f).await
    }

    /// The forward is not there (undone, `active` or not by then):
    /// `error`, with why, and its public port free.
    async fn on_failed(&self, params: &Params, failure: &ActionFailure) -> StepResult<()> {
        meson_db::port_forwards::set_status(
            &self.0.pool,
            params.forward_id,
            &[PortForwardStatus::Creating, PortForwardStatus::Active],
            PortForwardStatus::Error,
            Some(&failure.message),
        )
        .await?;
        Ok(())
    }
}

impl Workflow for PortForwardDelete {
    const KIND: &'static str = "port_forward_delete";
    type Params = Params;
    type Step = DeleteStep;

    async fn run(&self, cx: &StepCtx<'_, Params, DeleteStep>, step: DeleteStep) -> StepResult {
        let env = &self.0;
        let f =
            meson_db::port_forwards::get_including_deleted(&env.pool, cx.params.forward_id).await?;
        match step {
            DeleteStep::Destroy => remove(&host(env, &f).await?, &f).await?,
            DeleteStep::Forget => meson_db::port_forwards::mark_deleted(&env.pool, f.id).await?,
        }
        to_output(())
    }

    async fn undo(&self, _: &StepCtx<'_, Params, DeleteStep>, _: DeleteStep) -> StepResult<()> {
        crate::forward_only()
    }

    /// Still recorded, it is `error` (it may or may not forward): deleting
    /// it again finishes the job.
    async fn on_failed(&self, params: &Params, failure: &ActionFailure) -> StepResult<()> {
        meson_db::port_forwards::set_status(
            &self.0.pool,
            params.forward_id,
            &[PortForwardStatus::Deleting],
            PortForwardStatus::Error,
            Some(&format!("its delete failed: {}", failure.message)),
        )
        .await?;
        Ok(())
    }
}
