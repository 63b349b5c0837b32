//! Move a free standalone volume to another host of its provider: the old
//! host's storage daemon copies it to the new one (`/update/transfer`,
//! which hands it to the new host's `/import`), meson records it there, and
//! only then is the old copy destroyed. Until that last step a failure
//! undoes everything, the volume where it was; from it (the old copy is
//! being given up) the move rolls forward. Either way the volume ends on
//! exactly one host. It runs under the volume's key: no attach, resize or
//! delete of the volume meanwhile.

use crate::Env;
use crate::atomos::{destroy_volume, step_error};
use meson_core::volume::{Volume, VolumePlacement};
use meson_core::{ActionId, Code, TenantId, VolumeId};
use meson_jobs::{Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Params {
    pub volume_id: VolumeId,
    pub from: VolumePlacement,
    pub to: VolumePlacement,
}

meson_jobs::steps! {
    pub enum MoveStep {
        /// Copies the volume to the new host.
        Copy = "copy",
        /// Records it on the new host.
        Switch = "switch",
        /// Destroys the old host's copy.
        Clean = "clean",
    }
}

/// The volume's AtomOS ids on the old host and the new one.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Copied {
    pub from: String,
    pub to: String,
}

pub struct VolumeMove(pub Arc<Env>);

/// The workflow's kind: the job of a volume being moved.
pub const KIND: &str = "volume_move";

/// Enqueues the move in the caller's transaction, under the volume's key.
pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    params: &Params,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    crate::enqueue_keyed::<VolumeMove>(
        tx,
        params,
        crate::keys::volume(params.volume_id),
        action,
        tenant,
    )
    .await
}

/// The volume's copy on `at`, found by its AtomOS name.
async fn copy_on(env: &Env, v: &Volume, at: &VolumePlacement) -> StepResult<Option<String>> {
    let c = env.atomos.client(at.target_id).await?;
    Ok(env
        .atomos
        .volume_by_name(at.target_id, &c, &v.atomos_name)
        .await?
        .map(|found| found.id))
}

impl Workflow for VolumeMove {
    const KIND: &'static str = KIND;
    type Params = Params;
    type Step = MoveStep;

    async fn run(&self, cx: &StepCtx<'_, Params, MoveStep>, step: MoveStep) -> StepResult {
        let env = &self.0;
        let p = cx.params;
        let v = meson_db::volumes::get_including_deleted(&env.pool, p.volume_id).await?;
        match step {
            MoveStep::Copy => {
                // Recorded on the old host until `Switch`.
                let from = v.atomos_id.clone().ok_or_else(|| {
                    StepError::fatal(Code::Conflict, "the volume is not on AtomOS")
                })?;
                if let Some(to) = copy_on(env, &v, &p.to).await? {
                    return to_output(Copied { from, to });
                }
                let origin = env.atomos.client(p.to.target_id).await?;
                let origin = origin.target().storage_origin();
                let c = env.atomos.client(p.from.target_id).await?;
                let to = c
                    .volume_transfer(&from, &origin)
                    .await
                    .map_err(step_error)?;
                to_output(Copied { from, to })
            }
            MoveStep::Switch => {
                let copied: Copied = cx.output(MoveStep::Copy)?;
                meson_db::volumes::moved(&env.pool, p.volume_id, &copied.to, Some(&p.to)).await?;
                to_output(())
            }
            MoveStep::Clean => {
                let copied: Copied = cx.output(MoveStep::Copy)?;
                let c = env.atomos.client(p.from.target_id).await?;
                destroy_volume(&c, &copied.from).await?;
                to_output(())
            }
        }
    }

    /// Puts the volume back on its old host; past the commit point (the
    /// old copy gone) nothing is undone.
    async fn undo(&self, cx: &StepCtx<'_, Params, MoveStep>, step: MoveStep) -> StepResult<()> {
        let env = &self.0;
        let p = cx.params;
        let v = meson_db::volumes::get_including_deleted(&env.pool, p.volume_id).await?;
        let Some(old) = copy_on(env, &v, &p.from).await? else {
            return Ok(());
        };
        match step {
            MoveStep::Switch => {
                meson_db::volumes::moved(&env.pool, p.volume_id, &old, Some(&p.from)).await?
            }
            MoveStep::Copy => {
                if let Some(new) = copy_on(env, &v, &p.to).await? {
                    let c = env.atomos.client(p.to.target_id).await?;
                    destroy_volume(&c, &new).await?;
                }
            }
            MoveStep::Clean => {}
        }
        Ok(())
    }
}
