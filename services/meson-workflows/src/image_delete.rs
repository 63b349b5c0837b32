//! Delete an image: destroy its volume on its host, then forget it (it no
//! longer counts against `images_gb`). VMs created from it are copies and
//! are not touched.

use crate::DeleteStep;
use crate::Env;
use meson_core::action::ActionFailure;
use meson_core::image::ImageStatus;
use meson_core::{ActionId, ImageId, TenantId};
use meson_jobs::{EnqueueOpts, Enqueued, StepCtx, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Params {
    pub image_id: ImageId,
}

pub struct ImageDelete(pub Arc<Env>);

pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    image: ImageId,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    meson_jobs::enqueue::<ImageDelete>(
        tx,
        &Params { image_id: image },
        EnqueueOpts {
            action: Some(action),
            tenant: Some(tenant.to_string()),
            concurrency_key: Some(crate::keys::image(image)),
            // Deleting must get through transient faults; it has nothing to undo.
            max_attempts: 25,
            ..EnqueueOpts::default()
        },
    )
    .await
}

impl Workflow for ImageDelete {
    const KIND: &'static str = "image_delete";
    type Params = Params;
    type Step = DeleteStep;

    async fn run(&self, cx: &StepCtx<'_, Params, DeleteStep>, step: DeleteStep) -> StepResult {
        let env = &self.0;
        let image = meson_db::images::get_including_deleted(&env.pool, cx.params.image_id).await?;
        match step {
            DeleteStep::Destroy => crate::image_create::destroy(env, &image).await?,
            DeleteStep::Forget => meson_db::images::mark_deleted(&env.pool, image.id).await?,
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
        let image = meson_db::images::get_including_deleted(pool, params.image_id).await?;
        if image.status == ImageStatus::Deleting {
            let status = if image.atomos_id.is_some() {
                ImageStatus::Available
            } else {
                ImageStatus::Error
            };
            meson_db::images::set_status(pool, image.id, status, None).await?;
        }
        Ok(())
    }
}
