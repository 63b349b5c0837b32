//! Create an image: a copy of a VM's boot volume on the VM's host (a
//! snapshot), or a volume its host downloads from a URL (an import, placed
//! on a host with room within the request's provider/continent/region).
//! The image is then `available`.
//!
//! A snapshot runs under the VM's concurrency key, so the VM is not powered,
//! changed or deleted while its disk is copied; the copy is crash-consistent
//! (the guest keeps running). An import runs under the image's own key.

use crate::Env;
use crate::atomos::{destroy_volume, step_error};
use crate::placement::StepFailure;
use atomos_driver::UrlVolumeCreate;
use meson_core::action::ActionFailure;
use meson_core::image::{Image, ImageSource, ImageStatus};
use meson_core::volume::VolumePlacement;
use meson_core::{ActionId, Code, ImageId, TenantId, VolumeId};
use meson_jobs::{EnqueueOpts, Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Params {
    pub image_id: ImageId,
    /// A snapshot's source: the VM's boot volume.
    #[serde(default)]
    pub boot_volume: Option<VolumeId>,
    /// Where an import may go (the request's constraints).
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub continent: Option<String>,
    #[serde(default)]
    pub region: Option<String>,
}

pub struct ImageCreate(pub Arc<Env>);

meson_jobs::steps! {
    pub enum ImageCreateStep {
        Place = "place",
        Make = "make",
    }
}

/// Enqueues the workflow in the caller's transaction: a snapshot under its
/// VM's key, an import under the image's.
pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    image: &Image,
    params: &Params,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    let key = match &image.source {
        ImageSource::Snapshot { vm } => crate::keys::vm(*vm),
        ImageSource::Url { .. } => crate::keys::image(image.id),
    };
    meson_jobs::enqueue::<ImageCreate>(
        tx,
        params,
        EnqueueOpts {
            action: Some(action),
            tenant: Some(tenant.to_string()),
            concurrency_key: Some(key),
            ..EnqueueOpts::default()
        },
    )
    .await
}

impl Workflow for ImageCreate {
    const KIND: &'static str = "image_create";
    type Params = Params;
    type Step = ImageCreateStep;

    async fn run(
        &self,
        cx: &StepCtx<'_, Params, ImageCreateStep>,
        step: ImageCreateStep,
    ) -> StepResult {
        let env = &self.0;
        let image = meson_db::images::get_including_deleted(&env.pool, cx.params.image_id).await?;
        match step {
            ImageCreateStep::Place => to_output(self.place(cx.params, &image).await?),
            ImageCreateStep::Make => to_output(make(env, cx.params, &image).await?),
        }
    }

    async fn undo(
        &self,
        cx: &StepCtx<'_, Params, ImageCreateStep>,
        step: ImageCreateStep,
    ) -> StepResult<()> {
        let env = &self.0;
        let image = meson_db::images::get_including_deleted(&env.pool, cx.params.image_id).await?;
        match step {
            // A snapshot's host is its VM's, known from the start.
            ImageCreateStep::Place if cx.params.boot_volume.is_none() => {
                meson_db::images::set_placement(&env.pool, image.id, None).await?
            }
            ImageCreateStep::Place => {}
            ImageCreateStep::Make => destroy(env, &image).await?,
        }
        Ok(())
    }

    async fn on_failed(&self, params: &Params, failure: &ActionFailure) -> StepResult<()> {
        meson_db::images::set_status(
            &self.0.pool,
            params.image_id,
            ImageStatus::Error,
            Some(&failure.message),
        )
        .await?;
        Ok(())
    }
}

impl ImageCreate {
    /// A snapshot's host (set at its request), or the first host by name
    /// that meets an import's constraints and has room.
    async fn place(&self, params: &Params, image: &Image) -> StepResult<VolumePlacement> {
        let env = &self.0;
        if let Some(known) = &image.placement {
            return Ok(known.clone());
        }
        let constraints = [&params.provider, &params.continent, &params.region];
        let target =
            crate::placement::place_volume(env.atomos.enabled().await?, constraints, image.size_gb)
                .await
                .map_err(|e| e.step_error())?;
        let placement = VolumePlacement {
            target_id: target.id,
            host: target.name,
            provider: target.provider,
            region: target.region,
        };
        tracing::info!(image = %image.id, host = %placement.host, "placed image");
        meson_db::images::set_placement(&env.pool, image.id, Some(&placement)).await?;
        Ok(placement)
    }
}

/// Makes the image's volume on its host unless it is there already (found
/// by name: a crash may have left it unrecorded); records its AtomOS id; the
/// image is then `available`.
async fn make(env: &Env, params: &Params, image: &Image) -> StepResult<String> {
    let placement = image
        .placement
        .as_ref()
        .ok_or_else(|| StepError::internal("the image has no placement yet"))?;
    let c = env.atomos.client(placement.target_id).await?;
    let found = env
        .atomos
        .volume_by_name(placement.target_id, &c, &image.atomos_name)
        .await?;
    let id = match (found, &image.source) {
        (Some(found), _) => found.id,
        (None, ImageSource::Snapshot { vm }) => {
            let boot = params
                .boot_volume
                .ok_or_else(|| StepError::internal("a snapshot without its boot volume"))?;
            let boot = meson_db::volumes::get_including_deleted(&env.pool, boot).await?;
            let source = boot.atomos_id.ok_or_else(|| {
                StepError::fatal(
                    Code::Conflict,
                    format!("VM {vm}'s boot volume is not on its host: nothing to copy"),
                )
            })?;
            c.volume_clone(&source, &image.atomos_name)
                .await
                .map_err(step_error)?
        }
        (None, ImageSource::Url { url, checksum }) => {
            let made = c
                .volume_create_from_url(&UrlVolumeCreate {
                    name: image.atomos_name.clone(),
                    url: url.clone(),
                    size_gb: image.size_gb,
                    sha256: checksum.clone(),
                })
                .await
                .map_err(step_error)?;
            if let Some(sha256) = &made.sha256 {
                if let Some(expected) = checksum.as_ref().filter(|c| *c != sha256) {
                    // The host checks too; a host that does not is caught here.
                    destroy_volume(&c, &made.id).await?;
                    return Err(StepError::fatal(
                        Code::InvalidInput,
                        format!(
                            "the download from {url} has sha256 {sha256}, not the checksum \
                             {expected}"
                        ),
                    ));
                }
                meson_db::images::set_sha256(&env.pool, image.id, sha256).await?;
            }
            made.id
        }
    };
    meson_db::images::set_atomos(&env.pool, image.id, Some(&id), ImageStatus::Available).await?;
    Ok(id)
}

/// Destroys the image's volume on its host (found by name too) and forgets
/// its AtomOS id. Used by the create's undo and by the delete.
pub async fn destroy(env: &Env, image: &Image) -> StepResult<()> {
    let Some(placement) = &image.placement else {
        // Never placed: nothing exists on AtomOS.
        return Ok(());
    };
    let c = env.atomos.client(placement.target_id).await?;
    if let Some(found) = env
        .atomos
        .volume_by_name(placement.target_id, &c, &image.atomos_name)
        .await?
    {
        destroy_volume(&c, &found.id).await?;
    }
    if let Some(id) = &image.atomos_id {
        destroy_volume(&c, id).await?;
    }
    let status = if image.status == ImageStatus::Deleting {
        ImageStatus::Deleting
    } else {
        ImageStatus::Error
    };
    meson_db::images::set_atomos(&env.pool, image.id, None, status).await?;
    Ok(())
}
