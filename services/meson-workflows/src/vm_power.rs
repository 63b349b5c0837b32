//! Power a VM on, off, or reboot it: ask AtomOS, then wait for the state.

use crate::Env;
use crate::atomos::step_error;
use atomos_driver::{AtomosClient, VmState};
use meson_core::Code;
use meson_core::action::ActionFailure;
use meson_core::vm::{Vm, VmStatus};
use meson_core::{ActionId, TenantId, VmId};
use meson_jobs::{Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};

meson_jobs::steps! {
    /// The steps of every power operation (a node's reboot too).
    pub enum PowerStep {
        Request = "request",
        Wait = "wait",
    }
}
use std::marker::PhantomData;
use std::sync::Arc;

pub type Params = crate::VmParams;

/// One power operation.
pub trait PowerOp: Send + Sync + 'static {
    /// The job kind, persisted.
    const KIND: &'static str;
    /// The VM's status while the operation runs.
    const TRANSIENT: VmStatus;
    /// The AtomOS state that ends it.
    const TARGET: VmState;
    /// The AtomOS states in which there is nothing to ask: the VM is where
    /// this op leads, or on its way there.
    const SETTLED: &'static [VmState];

    /// Asks AtomOS for the operation on VM `id`.
    fn ask(
        c: &AtomosClient,
        id: &str,
    ) -> impl Future<Output = Result<(), atomos_driver::DriverError>> + Send;
}

pub struct PowerOn;
pub struct PowerOff;
pub struct Reboot;

impl PowerOp for PowerOn {
    const KIND: &'static str = "vm_poweron";
    const TRANSIENT: VmStatus = VmStatus::Starting;
    const TARGET: VmState = VmState::Running;
    const SETTLED: &'static [VmState] = &[VmState::Running, VmState::Starting];

    async fn ask(c: &AtomosClient, id: &str) -> Result<(), atomos_driver::DriverError> {
        c.start(id).await
    }
}

impl PowerOp for PowerOff {
    const KIND: &'static str = "vm_poweroff";
    const TRANSIENT: VmStatus = VmStatus::Stopping;
    const TARGET: VmState = VmState::Off;
    const SETTLED: &'static [VmState] = &[VmState::Off, VmState::Stopping];

    async fn ask(c: &AtomosClient, id: &str) -> Result<(), atomos_driver::DriverError> {
        c.stop(id).await
    }
}

impl PowerOp for Reboot {
    const KIND: &'static str = "vm_reboot";
    const TRANSIENT: VmStatus = VmStatus::Starting;
    const TARGET: VmState = VmState::Running;
    /// Always asked: a reboot repeated after a crash reboots twice, which is
    /// harmless for a guest.
    const SETTLED: &'static [VmState] = &[];

    async fn ask(c: &AtomosClient, id: &str) -> Result<(), atomos_driver::DriverError> {
        c.reboot(id).await
    }
}

pub struct VmPower<O>(pub Arc<Env>, PhantomData<O>);

impl<O> VmPower<O> {
    pub fn new(env: Arc<Env>) -> Self {
        VmPower(env, PhantomData)
    }
}

pub async fn enqueue<O: PowerOp>(
    tx: &mut meson_db::Tx<'_>,
    vm: VmId,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    crate::enqueue_for_vm::<VmPower<O>>(tx, vm, action, tenant, 10).await
}

fn status_of(state: &VmState) -> VmStatus {
    match state {
        VmState::Running => VmStatus::Running,
        VmState::Starting => VmStatus::Starting,
        VmState::Stopping => VmStatus::Stopping,
        VmState::Off | VmState::Paused => VmStatus::Off,
        VmState::Unknown(_) => VmStatus::Error,
    }
}

/// The client of the VM's host and AtomOS's view of the VM; `not_found`
/// when the host lost it.
pub async fn locate(env: &Env, vm: &Vm) -> StepResult<(AtomosClient, atomos_driver::Vm)> {
    let placement = vm
        .placement
        .as_ref()
        .ok_or_else(|| StepError::fatal(Code::Conflict, "the VM is not placed on a host"))?;
    let c = env.atomos.client(placement.target_id).await?;
    let found = c.vm_by_name(&vm.atomos_name).await.map_err(step_error)?;
    let found = found
        .ok_or_else(|| StepError::fatal(Code::NotFound, "the VM is missing from its hypervisor"))?;
    Ok((c, found))
}

/// As [`locate`] for the VM as recorded now, `None` when the host no
/// longer has it.
pub async fn locate_if_there(
    env: &Env,
    vm: VmId,
) -> StepResult<Option<(AtomosClient, atomos_driver::Vm)>> {
    let vm = meson_db::vms::get_any(&env.pool, vm).await?;
    match locate(env, &vm).await {
        Ok(found) => Ok(Some(found)),
        Err(StepError::Fatal { code, .. }) if code == Code::NotFound.as_str() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Asks AtomOS for the power operation, unless the VM is already settled
/// where it leads; the VM is `O::TRANSIENT` meanwhile. Shared by every
/// workflow that powers a VM (a node's reboot too).
pub async fn request<O: PowerOp>(env: &Env, vm: &Vm) -> StepResult<()> {
    let (c, found) = locate(env, vm).await?;
    meson_db::vms::set_status(&env.pool, vm.id, O::TRANSIENT).await?;
    if O::SETTLED.contains(&found.state) {
        return Ok(());
    }
    O::ask(&c, &found.id).await.map_err(step_error)
}

/// Waits (bounded by the boot timeout) until AtomOS reports the state the
/// operation leads to, and records it.
pub async fn wait<O: PowerOp>(env: &Env, vm: &Vm) -> StepResult<()> {
    let deadline = tokio::time::Instant::now() + env.config.vm_boot_timeout;
    loop {
        let (_, found) = locate(env, vm).await?;
        let up = O::TARGET == VmState::Running;
        if found.state == O::TARGET && (!up || found.ipv4.is_some()) {
            let ipv4 = if up { found.ipv4 } else { vm.ipv4 };
            meson_db::vms::set_runtime(
                &env.pool,
                vm.id,
                status_of(&found.state),
                Some(&found.id),
                ipv4,
            )
            .await?;
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(StepError::fatal(
                Code::Timeout,
                "the VM did not reach the requested power state in time",
            ));
        }
        tokio::time::sleep(env.config.poll_interval).await;
    }
}

/// Asks for power operation `O` and waits until the VM is where it leads:
/// the power step of a workflow that stops or starts a VM around a change
/// (resize, rebuild, migrate).
pub async fn power<O: PowerOp>(env: &Env, vm: &Vm) -> StepResult<()> {
    request::<O>(env, vm).await?;
    wait::<O>(env, vm).await
}

/// After a failed power operation: waits (bounded) until the VM settles
/// running or off and records that status, not `starting`/`stopping`
/// (nothing else would update it later). Returns the status recorded.
pub async fn settle(env: &Env, vm: &Vm) -> StepResult<VmStatus> {
    let deadline = tokio::time::Instant::now() + env.config.vm_boot_timeout;
    let status = loop {
        match locate(env, vm).await {
            Ok((_, found))
                if matches!(found.state, VmState::Running | VmState::Off)
                    || tokio::time::Instant::now() >= deadline =>
            {
                break status_of(&found.state);
            }
            Ok(_) => tokio::time::sleep(env.config.poll_interval).await,
            Err(StepError::Retryable { .. }) => {
                return Err(StepError::temporary("the VM's state is unknown"));
            }
            Err(StepError::Fatal { .. }) => break VmStatus::Error,
        }
    };
    meson_db::vms::set_status(&env.pool, vm.id, status).await?;
    Ok(status)
}

impl<O: PowerOp> Workflow for VmPower<O> {
    const KIND: &'static str = O::KIND;
    type Params = Params;
    type Step = PowerStep;

    async fn run(&self, cx: &StepCtx<'_, Params, PowerStep>, step: PowerStep) -> StepResult {
        let env = &self.0;
        let vm = meson_db::vms::get_any(&env.pool, cx.params.vm_id).await?;
        match step {
            PowerStep::Request => to_output(request::<O>(env, &vm).await?),
            PowerStep::Wait => to_output(wait::<O>(env, &vm).await?),
        }
    }

    async fn undo(&self, _: &StepCtx<'_, Params, PowerStep>, _: PowerStep) -> StepResult<()> {
        crate::forward_only()
    }

    /// Shows the VM as it really is once it settles (running or off), not
    /// stuck in `starting`/`stopping`: nothing else would update it later.
    async fn on_failed(&self, params: &Params, _failure: &ActionFailure) -> StepResult<()> {
        let env = &self.0;
        let vm = meson_db::vms::get_any(&env.pool, params.vm_id).await?;
        settle(env, &vm).await?;
        Ok(())
    }
}
