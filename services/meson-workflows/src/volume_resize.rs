//! Grow a volume, standalone or a VM's data volume: AtomOS's
//! `/update/resize` on its host, attached or not, its VM running or off. The API records the new size
//! when it accepts (so the `storage_gb` quota counts it at once); a resize
//! that fails puts back the size the host really has. Nothing is undone:
//! a volume cannot shrink, and a grown one loses nothing.

use crate::Env;
use crate::atomos::step_error;
use meson_core::action::ActionFailure;
use meson_core::volume::Volume;
use meson_core::{ActionId, Code, TenantId, VmId, VolumeId};
use meson_jobs::{Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Params {
    pub volume_id: VolumeId,
    /// GB, before and after.
    pub from_gb: u32,
    pub to_gb: u32,
}

meson_jobs::steps! {
    pub enum ResizeStep {
        /// Asks the volume's host to grow it.
        Resize = "resize",
        /// Reads the volume back: the host reports the new size.
        Confirm = "confirm",
    }
}

pub struct VolumeResize(pub Arc<Env>);

/// Enqueues the resize in the caller's transaction (which recorded the
/// new size), under the volume's concurrency key, or its VM's for a VM's
/// own volume (`owner`).
pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    params: &Params,
    owner: Option<VmId>,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    let key = match owner {
        Some(vm) => crate::keys::vm(vm),
        None => crate::keys::volume(params.volume_id),
    };
    crate::enqueue_keyed::<VolumeResize>(tx, params, key, action, tenant).await
}

/// The client of the volume's host (a VM's volume is on its VM's) and the
/// size the host reports, GB.
async fn on_host(env: &Env, v: &Volume) -> StepResult<(atomos_driver::AtomosClient, String, f64)> {
    let target = match (&v.placement, v.vm_id) {
        (Some(p), _) => Some(p.target_id),
        (None, Some(vm)) => meson_db::vms::get_including_deleted(&env.pool, vm)
            .await?
            .placement
            .map(|p| p.target_id),
        (None, None) => None,
    };
    let (Some(target), Some(id)) = (target, &v.atomos_id) else {
        return Err(StepError::fatal(
            Code::Conflict,
            "the volume is not on AtomOS",
        ));
    };
    let c = env.atomos.client(target).await?;
    let found = c.volume_info(id).await.map_err(step_error)?;
    Ok((c, found.id, found.size_gb))
}

impl Workflow for VolumeResize {
    const KIND: &'static str = "volume_resize";
    type Params = Params;
    type Step = ResizeStep;

    async fn run(&self, cx: &StepCtx<'_, Params, ResizeStep>, step: ResizeStep) -> StepResult {
        let env = &self.0;
        let v = meson_db::volumes::get_including_deleted(&env.pool, cx.params.volume_id).await?;
        let (c, id, size) = on_host(env, &v).await?;
        let to = f64::from(cx.params.to_gb);
        let grown = size + 1e-9 >= to;
        match step {
            ResizeStep::Resize if !grown => c
                .volume_resize(&id, cx.params.to_gb)
                .await
                .map_err(step_error)?,
            ResizeStep::Resize => {}
            ResizeStep::Confirm if !grown => {
                return Err(StepError::fatal(
                    Code::ServiceError,
                    format!("the hypervisor accepted the resize but reports {size} GB"),
                ));
            }
            ResizeStep::Confirm => {}
        }
        to_output(())
    }

    async fn undo(&self, _: &StepCtx<'_, Params, ResizeStep>, _: ResizeStep) -> StepResult<()> {
        crate::forward_only()
    }

    /// The row takes the size the host has (the old one, unless the host
    /// grew it before the failure).
    async fn on_failed(&self, params: &Params, _: &ActionFailure) -> StepResult<()> {
        let env = &self.0;
        let v = meson_db::volumes::get_including_deleted(&env.pool, params.volume_id).await?;
        let size = match on_host(env, &v).await {
            Ok((_, _, size)) if size + 1e-9 >= f64::from(params.to_gb) => params.to_gb,
            Ok(_) | Err(StepError::Fatal { .. }) => params.from_gb,
            Err(e) => return Err(e),
        };
        meson_db::volumes::set_size(&env.pool, params.volume_id, size).await?;
        Ok(())
    }
}
