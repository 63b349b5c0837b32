//! Delete a standalone volume: destroy it on its host, then forget it.
//! Accepted only while no VM has it attached (the API checks under the
//! volume's row lock), so AtomOS lets it go.

use crate::Env;
use meson_core::action::ActionFailure;
use meson_core::volume::VolumeStatus;
use meson_core::{ActionId, TenantId, VolumeId};
use meson_jobs::{EnqueueOpts, Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Params {
    pub volume_id: VolumeId,
}

pub struct VolumeDelete(pub Arc<Env>);

/// Step names are persisted: never rename one.
const STEPS: &[&str] = &["destroy", "forget"];

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
            concurrency_key: Some(crate::volume_create::concurrency_key(volume)),
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

    fn steps(&self) -> &'static [&'static str] {
        STEPS
    }

    async fn run(&self, cx: &StepCtx<'_, Params>, step: &'static str) -> StepResult {
        let env = &self.0;
        let v = meson_db::volumes::get_including_deleted(&env.pool, cx.params.volume_id).await?;
        match step {
            "destroy" => crate::volume_create::destroy(env, &v).await?,
            "forget" => meson_db::volumes::mark_deleted(&env.pool, v.id).await?,
            other => {
                return Err(StepError::fatal(
                    "service_error",
                    format!("unknown step {other}"),
                ));
            }
        }
        to_output(())
    }

    async fn undo(&self, _cx: &StepCtx<'_, Params>, _step: &'static str) -> StepResult<()> {
        // Forward-only, like every delete.
        Ok(())
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
