//! Delete a network: remove it from every AtomOS host it was made on, then
//! forget it. Accepted only while no VM is attached (the API checks under
//! the network's row lock), so nothing on AtomOS still uses it.

use crate::DeleteStep;
use crate::Env;
use meson_core::action::ActionFailure;
use meson_core::network::NetworkStatus;
use meson_core::{ActionId, NetworkId, TenantId};
use meson_jobs::{EnqueueOpts, Enqueued, StepCtx, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Params {
    pub network_id: NetworkId,
}

pub struct NetworkDelete(pub Arc<Env>);

pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    network: NetworkId,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    meson_jobs::enqueue::<NetworkDelete>(
        tx,
        &Params {
            network_id: network,
        },
        EnqueueOpts {
            action: Some(action),
            tenant: Some(tenant.to_string()),
            concurrency_key: Some(crate::keys::network(network)),
            // Deleting must get through transient faults; it has nothing to undo.
            max_attempts: 25,
            ..EnqueueOpts::default()
        },
    )
    .await
}

impl Workflow for NetworkDelete {
    const KIND: &'static str = "network_delete";
    type Params = Params;
    type Step = DeleteStep;

    async fn run(&self, cx: &StepCtx<'_, Params, DeleteStep>, step: DeleteStep) -> StepResult {
        let env = &self.0;
        let id = cx.params.network_id;
        match step {
            DeleteStep::Destroy => crate::provision::remove_network_from_hosts(env, id).await?,
            DeleteStep::Forget => meson_db::networks::mark_deleted(&env.pool, id).await?,
        }
        to_output(())
    }

    async fn undo(&self, _: &StepCtx<'_, Params, DeleteStep>, _: DeleteStep) -> StepResult<()> {
        crate::forward_only()
    }

    async fn on_failed(&self, params: &Params, _failure: &ActionFailure) -> StepResult<()> {
        // Still there (on some hosts): usable again, and deletable again.
        meson_db::networks::set_status(&self.0.pool, params.network_id, NetworkStatus::Available)
            .await?;
        Ok(())
    }
}
