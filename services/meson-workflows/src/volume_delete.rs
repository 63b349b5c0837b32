//! Delete a standalone volume: destroy it on its host, then forget it.
//! Accepted only while no VM has it attached (the API checks under the
//! volume's row lock), so AtomOS lets it go.

use crate::DeleteStep;
use crate::Env;
use meson_core::action::ActionFailure;
use meson_core::volume::VolumeStatus;
use meson_core::{ActionId, TenantId, VolumeId};
use meson_jobs::{EnqueueOpts, Enqueued, StepCtx, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Params {
    pub volume_id: VolumeId,
}

pub struct VolumeDelete(pub Arc<Env>);

pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    volume: VolumeId,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    meson_jobs::enqueue::<VolumeDelete>(
        tx,
        &Params { volume_id: volume },
        EnqueueOpts {
            action: Some(action),
            tenant: Some(tenant.to_string()),
            concurrency_key: Some(crate::keys::volume(volume)),
            // Deleting must get through transient faults; it has nothing to undo.
            max_attempts: 25,
            ..EnqueueOpts::default()
        },
    )
    .await
}

impl Workflow for VolumeDelete {
    const KIND: &'static str = "volume_delete";
    type Params = Params;
    type Step = DeleteStep;

    async fn run(&self, cx: &StepCtx<'_, Params, DeleteStep>, step: DeleteStep) -> StepResult {
        let env = &self.0;
        let v = meson_db::volumes::get_including_deleted(&env.pool, cx.params.volume_id).await?;
        match step {
            DeleteStep::Destroy => crate::volume_create::destroy(env, &v).await?,
            DeleteStep::Forget => meson_db::volumes::mark_deleted(&env.pool, v.id).await?,
        }
        to_output(())
    }

    async fn undo(&self, _: &StepCtx<'_, Params, DeleteStep>, _: DeleteStep) -> StepResult<()> {
        crate::forward_only()
    }

    async fn on_failed(&self, params: &Params, _failure: &ActionFailure) -> StepResult<()> {
        // Still on its host (and recorded) it is usable again; otherwise it
        // is `error`, and deleting it again finishes the job.
        let pool = &self.0.pool;
        let v = meson_db::volumes::get_including_deleted(pool, params.volume_id).await?;
        if v.status == VolumeStatus::Deleting {
            let status = if v.atomos_id.is_some() {
                VolumeStatus::Available
            } else {
                VolumeStatus::Error
            };
            meson_db::volumes::set_status(pool, v.id, status).await?;
        }
        Ok(())
    }
}
