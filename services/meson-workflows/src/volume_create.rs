//! Create a standalone volume: place it on an AtomOS host that has room
//! (and meets the request's provider/continent/region), then make it there.
//! It is then `available`, to be attached by a VM created on that host.

use crate::Env;
use crate::atomos::{destroy_volume, step_error};
use crate::placement::StepFailure;
use atomos_driver::VolumeCreate as DriverVolumeCreate;
use meson_core::action::ActionFailure;
use meson_core::volume::{Volume, VolumePlacement, VolumeStatus};
use meson_core::{ActionId, TenantId, VolumeId};
use meson_jobs::{EnqueueOpts, Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Params {
    pub volume_id: VolumeId,
    /// Where it may go (the request's constraints).
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub continent: Option<String>,
    #[serde(default)]
    pub region: Option<String>,
}

pub struct VolumeCreate(pub Arc<Env>);

meson_jobs::steps! {
    pub enum VolumeCreateStep {
        Place = "place",
        Create = "create",
    }
}

/// Enqueues the workflow in the caller's transaction.
pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    params: &Params,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    meson_jobs::enqueue::<VolumeCreate>(
        tx,
        params,
        EnqueueOpts {
            action: Some(action),
            tenant: Some(tenant.to_string()),
            concurrency_key: Some(crate::keys::volume(params.volume_id)),
            ..EnqueueOpts::default()
        },
    )
    .await
}

impl Workflow for VolumeCreate {
    const KIND: &'static str = "volume_create";
    type Params = Params;
    type Step = VolumeCreateStep;

    async fn run(
        &self,
        cx: &StepCtx<'_, Params, VolumeCreateStep>,
        step: VolumeCreateStep,
    ) -> StepResult {
        let env = &self.0;
        let v = meson_db::volumes::get_including_deleted(&env.pool, cx.params.volume_id).await?;
        match step {
            VolumeCreateStep::Place => to_output(self.place(cx.params, &v).await?),
            VolumeCreateStep::Create => to_output(ensure_volume(env, &v).await?),
        }
    }

    async fn undo(
        &self,
        cx: &StepCtx<'_, Params, VolumeCreateStep>,
        step: VolumeCreateStep,
    ) -> StepResult<()> {
        let env = &self.0;
        let v = meson_db::volumes::get_including_deleted(&env.pool, cx.params.volume_id).await?;
        match step {
            VolumeCreateStep::Place => {
                meson_db::volumes::set_placement(&env.pool, v.id, None).await?
            }
            VolumeCreateStep::Create => destroy(env, &v).await?,
        }
        Ok(())
    }

    async fn on_failed(&self, params: &Params, _failure: &ActionFailure) -> StepResult<()> {
        meson_db::volumes::set_status(&self.0.pool, params.volume_id, VolumeStatus::Error).await?;
        Ok(())
    }
}

impl VolumeCreate {
    /// The first host by name that meets the constraints and has room.
    async fn place(&self, params: &Params, v: &Volume) -> StepResult<VolumePlacement> {
        let env = &self.0;
        if let Some(known) = &v.placement {
            return Ok(known.clone());
        }
        let constraints = [&params.provider, &params.continent, &params.region];
        let target =
            crate::placement::place_volume(env.atomos.enabled().await?, constraints, v.size_gb)
                .await
                .map_err(|e| e.step_error())?;
        let placement = VolumePlacement {
            target_id: target.id,
            host: target.name,
            provider: target.provider,
            region: target.region,
        };
        tracing::info!(volume = %v.id, host = %placement.host, "placed volume");
        meson_db::volumes::set_placement(&env.pool, v.id, Some(&placement)).await?;
        Ok(placement)
    }
}

/// Makes the volume on its host unless it is there already (found by
/// name); records its AtomOS id; it is then `available`.
async fn ensure_volume(env: &Env, v: &Volume) -> StepResult<String> {
    let placement = v
        .placement
        .as_ref()
        .ok_or_else(|| StepError::internal("the volume has no placement yet"))?;
    let c = env.atomos.client(placement.target_id).await?;
    let id = match env
        .atomos
        .volume_by_name(placement.target_id, &c, &v.atomos_name)
        .await?
    {
        Some(found) => found.id,
        None => c
            .volume_create(&DriverVolumeCreate {
                name: v.atomos_name.clone(),
                size_gb: v.size_gb,
                bootable: v.bootable,
                readonly: v.readonly,
                shareable: false,
                private: true,
            })
            .await
            .map_err(step_error)?,
    };
    meson_db::volumes::set_atomos(&env.pool, v.id, Some(&id), VolumeStatus::Available).await?;
    Ok(id)
}

/// Destroys the volume on its host (found by name too: a crash may have
/// left it unrecorded) and forgets its AtomOS id. Used by the create's
/// undo and by the delete.
pub async fn destroy(env: &Env, v: &Volume) -> StepResult<()> {
    let Some(placement) = &v.placement else {
        // Never placed: nothing exists on AtomOS.
        return Ok(());
    };
    let c = env.atomos.client(placement.target_id).await?;
    if let Some(found) = env
        .atomos
        .volume_by_name(placement.target_id, &c, &v.atomos_name)
        .await?
    {
        destroy_volume(&c, &found.id).await?;
    }
    if let Some(id) = &v.atomos_id {
        destroy_volume(&c, id).await?;
    }
    let status = if v.status == VolumeStatus::Deleting {
        VolumeStatus::Deleting
    } else {
        VolumeStatus::Error
    };
    meson_db::volumes::set_atomos(&env.pool, v.id, None, status).await?;
    Ok(())
}
