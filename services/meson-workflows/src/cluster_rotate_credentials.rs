//! Rotate a cluster's credentials: stage → control plane → finish.
//!
//! What rotates, and how (see `meson_kaas::pki` for the CAs):
//! - **Admin kubeconfigs.** They are signed by the cluster's admin CA, which
//!   the API servers trust beside the cluster CA. `stage` makes a new admin
//!   CA (pending, sealed with the cluster's secrets); `control_plane`
//!   replaces every control-plane node, one at a time, surging, and each
//!   new one trusts the new admin CA and not the old; `finish` makes the
//!   new CA the one kubeconfigs are signed with. Once it succeeds, no API
//!   server accepts a kubeconfig issued before, and kubeconfigs fetched
//!   from then on work. (A kubeconfig fetched while the rotation runs is
//!   signed by the outgoing CA: fetch again once it is done.)
//! - **The bootstrap token** nodes join with. `stage` makes a new one; the
//!   first new control-plane node joins with the old token and registers
//!   the new one in the cluster; once it is up, meson joins every later
//!   node with the new token and the next control-plane nodes delete the
//!   old one from the cluster (with a single control-plane node, the old
//!   token lapses at its expiry, 24 h at most, or when the next
//!   control-plane node is made).
//! - Not rotated: the cluster, etcd and front-proxy CAs and the
//!   service-account key (every node and workload trusts them; rotating
//!   them is a different, disruptive operation), and workers (they hold
//!   no admin trust and have joined already).
//!
//! Forward-only like an upgrade: on failure the cluster is `error`, the
//! control-plane nodes already replaced stay, the pending credentials are
//! kept, and a new rotation goes on with them.

use crate::Env;
use crate::cluster_create::{Params, enqueue_for_cluster};
use crate::nodes;
use crate::rolling::{self, Mode};
use meson_core::action::ActionFailure;
use meson_core::cluster::{Cluster, ClusterStatus, NodeRole};

meson_jobs::steps! {
    pub enum RotateCredentialsStep {
        Stage = "stage",
        ControlPlane = "control_plane",
        Finish = "finish",
    }
}
use meson_core::{ActionId, ClusterId, NodeId, TenantId};
use meson_jobs::{Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};
use meson_kaas::ClusterSecrets;
use std::sync::Arc;

pub struct ClusterRotateCredentials(pub Arc<Env>);

pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    cluster: ClusterId,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    enqueue_for_cluster::<ClusterRotateCredentials>(tx, cluster, action, tenant, 10).await
}

fn kaas_error(e: meson_kaas::KaasError) -> StepError {
    StepError::internal(format!("cluster secrets: {e}"))
}

/// Opens the cluster's secrets, applies `change`, and stores them again
/// if it changed anything. Returns what `change` returned.
async fn update_secrets(
    env: &Env,
    cluster: &Cluster,
    change: impl FnOnce(&mut ClusterSecrets) -> StepResult<bool>,
) -> StepResult<bool> {
    let mut secrets = nodes::open_secrets(env, &env.pool, cluster.id).await?;
    let changed = change(&mut secrets)?;
    if changed {
        let sealed =
            meson_kaas::sealed::seal_secrets(&env.config.secrets_key, cluster.id, &secrets)
                .map_err(kaas_error)?;
        meson_db::clusters::set_secrets(&env.pool, cluster.id, &sealed, false).await?;
    }
    Ok(changed)
}

impl Workflow for ClusterRotateCredentials {
    const KIND: &'static str = "cluster_rotate_credentials";
    type Params = Params;
    type Step = RotateCredentialsStep;

    async fn run(
        &self,
        cx: &StepCtx<'_, Params, RotateCredentialsStep>,
        step: RotateCredentialsStep,
    ) -> StepResult {
        let env = &self.0;
        let cluster = meson_db::clusters::get_any(&env.pool, cx.params.cluster_id).await?;
        match step {
            RotateCredentialsStep::Stage => {
                let began = update_secrets(env, &cluster, |s| {
                    s.begin_rotation(&cluster.name).map_err(kaas_error)
                })
                .await?;
                tracing::info!(cluster = %cluster.id, began, "credentials rotation staged");
                // Every control-plane node there is now gets replaced.
                let cps: Vec<NodeId> = meson_db::clusters::nodes(&env.pool, cluster.id)
                    .await?
                    .into_iter()
                    .filter(|n| n.role == NodeRole::ControlPlane)
                    .map(|n| n.id)
                    .collect();
                to_output(cps)
            }
            RotateCredentialsStep::ControlPlane => {
                let cps: Vec<NodeId> = cx.output(RotateCredentialsStep::Stage)?;
                let items = cps.iter().map(|id| (id.to_string(), *id)).collect();
                let cluster = &cluster;
                cx.fan_out(items, 1, |old| async move {
                    let new = rolling::roll_one(
                        env,
                        cluster,
                        old,
                        &cluster.kubernetes_version,
                        Mode::Surge,
                    )
                    .await?;
                    if new.is_some() {
                        // That node registered the new token: join with it now.
                        update_secrets(env, cluster, |s| Ok(s.promote_rotated_token())).await?;
                    }
                    Ok(new)
                })
                .await?;
                to_output(())
            }
            RotateCredentialsStep::Finish => {
                update_secrets(env, &cluster, |s| Ok(s.finish_rotation())).await?;
                meson_db::clusters::set_status(&env.pool, cluster.id, ClusterStatus::Running, None)
                    .await?;
                tracing::info!(cluster = %cluster.id, "credentials rotated");
                to_output(())
            }
        }
    }

    async fn undo(
        &self,
        cx: &StepCtx<'_, Params, RotateCredentialsStep>,
        step: RotateCredentialsStep,
    ) -> StepResult<()> {
        match step {
            RotateCredentialsStep::ControlPlane => {
                rolling::undo_half_made(
                    &self.0,
                    cx.params.cluster_id,
                    "the credentials rotation stopped before this node came up; replace it",
                )
                .await
            }
            RotateCredentialsStep::Stage | RotateCredentialsStep::Finish => Ok(()),
        }
    }

    async fn on_failed(&self, params: &Params, failure: &ActionFailure) -> StepResult<()> {
        let reason = format!("credentials rotation failed: {}", failure.message);
        crate::cluster_failed(&self.0, params.cluster_id, &reason).await
    }
}
