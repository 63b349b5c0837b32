//! Resize a VM (cores, memory): AtomOS's `/update` on its host, which
//! wants the VM shut off, as Hetzner's server type change does. With
//! `stop`, a running VM is stopped first and started again after. The API
//! records the new size when it accepts (so the quotas count it at once);
//! a resize that fails is undone step by step (the VM restarted, its old
//! size back) and the old size recorded again. Last, the host quotes the
//! new size, and that price is the VM's from then on (what metering bills).

use crate::Env;
use crate::atomos::step_error;
use crate::vm_power::{self, PowerOff, PowerOn, locate};
use meson_core::action::ActionFailure;
use meson_core::vm::Vm;
use meson_core::{ActionId, TenantId, VmId};
use meson_jobs::{Enqueued, StepCtx, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Params {
    pub vm_id: VmId,
    /// Cores and memory (MiB) before, and asked for.
    pub from: Size,
    pub to: Size,
    /// The VM was running and the request said `stop`: it is stopped for
    /// the change and started again after.
    pub restart: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Size {
    pub cores: u32,
    pub memory_mib: u64,
}

impl Size {
    pub fn of(vm: &Vm) -> Size {
        Size {
            cores: vm.spec.cpu.cores,
            memory_mib: vm.spec.memory_mib,
        }
    }
}

meson_jobs::steps! {
    pub enum ResizeStep {
        /// Stops a running VM (with `stop`).
        Stop = "stop",
        /// Asks the host for the new size.
        Resize = "resize",
        /// Starts the VM again (with `stop`).
        Start = "start",
        /// Records the host's price for the new size.
        Price = "price",
    }
}

pub struct VmResize(pub Arc<Env>);

/// Enqueues the resize in the caller's transaction (which recorded the new
/// size), under the VM's concurrency key.
pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    params: &Params,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    crate::enqueue_keyed::<VmResize>(tx, params, crate::keys::vm(params.vm_id), action, tenant)
        .await
}

/// Gives the VM `size` on its host, unless it has it already.
async fn ensure_size(env: &Env, vm: &Vm, size: Size) -> StepResult<()> {
    let (c, found) = locate(env, vm).await?;
    let slots = size.cores * vm.spec.cpu.threads_per_core.max(1);
    if found.slots == slots && found.ram_mib == size.memory_mib {
        return Ok(());
    }
    c.vm_update(&found.id, slots, size.memory_mib)
        .await
        .map_err(step_error)
}

/// Records the VM's host's quote for its (new) size as its price. A host
/// too full to quote the size again leaves the old price, with a warning:
/// the resize itself has succeeded.
async fn reprice(env: &Env, vm: &Vm) -> StepResult<()> {
    let Some(at) = vm.placement.clone() else {
        return Ok(());
    };
    let (c, _) = locate(env, vm).await?;
    match c
        .can_allocate(&crate::placement::driver_spec(&vm.spec))
        .await
    {
        Ok(quotes) => {
            if let Some(q) = quotes
                .into_iter()
                .min_by(|a, b| a.price_hour.total_cmp(&b.price_hour))
            {
                let priced = meson_core::vm::Placement {
                    price_hourly: q.price_hour,
                    price_monthly: q.price_month,
                    currency: q.currency,
                    ..at
                };
                meson_db::vms::set_placement(&env.pool, vm.id, Some(&priced)).await?;
            }
            Ok(())
        }
        Err(e) if e.is_capacity() => {
            tracing::warn!(vm = %vm.id, error = %e, "the host cannot quote the new size: the old price stays");
            Ok(())
        }
        Err(e) => Err(step_error(e)),
    }
}

impl Workflow for VmResize {
    const KIND: &'static str = "vm_resize";
    type Params = Params;
    type Step = ResizeStep;

    async fn run(&self, cx: &StepCtx<'_, Params, ResizeStep>, step: ResizeStep) -> StepResult {
        let env = &self.0;
        let p = cx.params;
        let vm = meson_db::vms::get_any(&env.pool, p.vm_id).await?;
        match step {
            ResizeStep::Stop if p.restart => vm_power::power::<PowerOff>(env, &vm).await?,
            ResizeStep::Resize => ensure_size(env, &vm, p.to).await?,
            ResizeStep::Start if p.restart => vm_power::power::<PowerOn>(env, &vm).await?,
            ResizeStep::Price => reprice(env, &vm).await?,
            ResizeStep::Stop | ResizeStep::Start => {}
        }
        to_output(())
    }

    /// Puts the VM back as it was: stopped again if it was started, its
    /// old size, running again if it was stopped for the change.
    async fn undo(&self, cx: &StepCtx<'_, Params, ResizeStep>, step: ResizeStep) -> StepResult<()> {
        let env = &self.0;
        let p = cx.params;
        let vm = meson_db::vms::get_any(&env.pool, p.vm_id).await?;
        match step {
            ResizeStep::Start if p.restart => vm_power::power::<PowerOff>(env, &vm).await,
            ResizeStep::Resize => ensure_size(env, &vm, p.from).await,
            ResizeStep::Stop if p.restart => vm_power::power::<PowerOn>(env, &vm).await,
            ResizeStep::Stop | ResizeStep::Start | ResizeStep::Price => Ok(()),
        }
    }

    /// The old size is the VM's again (the quotas count it back), and its
    /// status is what the host shows.
    async fn on_failed(&self, params: &Params, _: &ActionFailure) -> StepResult<()> {
        let env = &self.0;
        let vm = meson_db::vms::get_any(&env.pool, params.vm_id).await?;
        let mut spec = vm.spec.clone();
        spec.cpu.cores = params.from.cores;
        spec.memory_mib = params.from.memory_mib;
        meson_db::vms::set_spec(&env.pool, vm.id, &spec).await?;
        vm_power::settle(env, &vm).await?;
        Ok(())
    }
}
