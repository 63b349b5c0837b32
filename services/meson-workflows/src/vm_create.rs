//! Create a VM: place → boot volume → cloud-init ISO → data volumes →
//! register → wait until running with an IPv4.

use crate::Env;
use crate::atomos::{destroy_volume, step_error, unregister_by_name, volume_by_name};
use atomos_driver::{AtomosClient, ImageVolumeCreate, Register, VmState, VolumeCreate};
use meson_core::action::ActionFailure;
use meson_core::cloudinit::VmCloudInit;
use meson_core::vm::{Placement, Vm, VmStatus};
use meson_core::volume::{Volume, VolumeKind, VolumeStatus};
use meson_core::{ActionId, TenantId, VmId};
use meson_jobs::{EnqueueOpts, Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The VM the workflow works on (shared by every VM workflow).
pub type Params = crate::VmParams;

pub struct VmCreate(pub Arc<Env>);

/// Step names are persisted: never rename one.
const STEPS: &[&str] = &[
    "place",
    "boot_volume",
    "cloudinit_volume",
    "data_volumes",
    "register",
    "wait_running",
];

/// The key that serializes every mutation of one VM.
pub fn concurrency_key(vm: VmId) -> String {
    format!("vm:{vm}")
}

/// Enqueues the workflow in the caller's transaction.
pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    vm: VmId,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    crate::enqueue_for_vm::<VmCreate>(tx, vm, action, tenant, EnqueueOpts::default().max_attempts)
        .await
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Created {
    atomos_id: String,
}

impl Workflow for VmCreate {
    const KIND: &'static str = "vm_create";
    type Params = Params;

    fn steps(&self) -> &'static [&'static str] {
        STEPS
    }

    async fn run(&self, cx: &StepCtx<'_, Params>, step: &'static str) -> StepResult {
        let vm = meson_db::vms::get(&self.0.pool, None, cx.params.vm_id).await?;
        match step {
            "place" => self.place(&vm).await,
            "boot_volume" => self.boot_volume(cx, &vm).await,
            "cloudinit_volume" => self.cloudinit_volume(cx, &vm).await,
            "data_volumes" => self.data_volumes(cx, &vm).await,
            "register" => self.register(cx, &vm).await,
            "wait_running" => self.wait_running(cx, &vm).await,
            other => Err(StepError::fatal(
                "service_error",
                format!("unknown step {other}"),
            )),
        }
    }

    async fn undo(&self, cx: &StepCtx<'_, Params>, step: &'static str) -> StepResult<()> {
        let env = &self.0;
        let vm = meson_db::vms::get(&env.pool, None, cx.params.vm_id).await?;
        if step == "place" {
            meson_db::vms::set_placement(&env.pool, vm.id, None).await?;
            return Ok(());
        }
        // Not placed (or placement already undone): nothing exists on AtomOS.
        let Some(placement) = vm.placement.clone() else {
            return Ok(());
        };
        match step {
            "register" => {
                let c = env.atomos.client(placement.target_id).await?;
                unregister_by_name(&c, &vm.atomos_name).await
            }
            "boot_volume" | "cloudinit_volume" | "data_volumes" => {
                let c = env.atomos.client(placement.target_id).await?;
                let kind = match step {
                    "boot_volume" => VolumeKind::Boot,
                    "cloudinit_volume" => VolumeKind::Cloudinit,
                    _ => VolumeKind::Data,
                };
                for v in volumes_of(env, vm.id, kind).await? {
                    // By name too: the step may have created it and crashed before recording.
                    if let Some(found) = volume_by_name(&c, &v.atomos_name).await? {
                        destroy_volume(&c, &found.id).await?;
                    }
                    if let Some(id) = &v.atomos_id {
                        destroy_volume(&c, id).await?;
                    }
                    meson_db::volumes::set_atomos(&env.pool, v.id, None, VolumeStatus::Error)
                        .await?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    async fn on_failed(&self, params: &Params, _failure: &ActionFailure) -> StepResult<()> {
        let pool = &self.0.pool;
        meson_db::vms::set_runtime(pool, params.vm_id, VmStatus::Error, None, None).await?;
        meson_db::volumes::set_status_for_vm(pool, params.vm_id, VolumeStatus::Error).await?;
        Ok(())
    }
}

async fn volumes_of(env: &Env, vm: VmId, kind: VolumeKind) -> StepResult<Vec<Volume>> {
    Ok(meson_db::volumes::list_for_vms(&env.pool, &[vm])
        .await?
        .into_iter()
        .filter(|v| v.kind == kind)
        .collect())
}

pub use crate::placement::placement_allows;

/// The driver's view of a VM spec.
pub fn driver_spec(vm: &Vm) -> atomos_driver::VmSpec {
    crate::placement::driver_spec(&vm.spec)
}

impl VmCreate {
    async fn client(&self, cx: &StepCtx<'_, Params>) -> StepResult<AtomosClient> {
        let placement: Placement = cx.output("place")?;
        self.0.atomos.client(placement.target_id).await
    }

    /// Asks every candidate target for a quote and takes the cheapest.
    async fn place(&self, vm: &Vm) -> StepResult {
        let env = &self.0;
        let survey = crate::placement::survey(env.atomos.enabled().await?, &vm.spec)
            .await
            .map_err(|e| e.step_error())?;
        let placement = survey.cheapest().placement.clone();
        tracing::info!(vm = %vm.id, host = %placement.host, price = placement.price_hourly, "placed vm");
        meson_db::vms::set_placement(&env.pool, vm.id, Some(&placement)).await?;
        to_output(placement)
    }

    /// Makes sure each volume of `kind` exists on AtomOS: found by name (or,
    /// with `replace`, destroyed and made again), else made by `create`; then
    /// records its AtomOS id. Returns the ids in order.
    async fn ensure_volumes<F, Fut>(
        &self,
        c: &AtomosClient,
        vm: &Vm,
        kind: VolumeKind,
        replace: bool,
        create: F,
    ) -> StepResult
    where
        F: Fn(Volume) -> Fut,
        Fut: std::future::Future<Output = Result<String, atomos_driver::DriverError>>,
    {
        let mut ids = Vec::new();
        for v in volumes_of(&self.0, vm.id, kind).await? {
            let id = match volume_by_name(c, &v.atomos_name).await? {
                Some(found) if !replace => found.id,
                found => {
                    if let Some(stale) = found {
                        destroy_volume(c, &stale.id).await?;
                    }
                    create(v.clone()).await.map_err(step_error)?
                }
            };
            meson_db::volumes::set_atomos(&self.0.pool, v.id, Some(&id), VolumeStatus::Creating)
                .await?;
            ids.push(id);
        }
        to_output(ids)
    }

    async fn boot_volume(&self, cx: &StepCtx<'_, Params>, vm: &Vm) -> StepResult {
        let c = self.client(cx).await?;
        let url = &vm.spec.os.image_url;
        self.ensure_volumes(&c, vm, VolumeKind::Boot, false, |v| {
            let req = ImageVolumeCreate {
                name: v.atomos_name,
                size_gb: v.size_gb,
                url: url.clone(),
            };
            let c = c.clone();
            async move { c.volume_create_from_image(&req).await }
        })
        .await
    }

    async fn cloudinit_volume(&self, cx: &StepCtx<'_, Params>, vm: &Vm) -> StepResult {
        let c = self.client(cx).await?;
        let ci = VmCloudInit {
            vm_id: vm.id,
            hostname: &vm.spec.name,
            ssh_keys: &vm.spec.ssh_keys,
            phone_home_url: None,
        };
        let (user_data, meta_data) = (ci.user_data(), ci.meta_data());
        // An ISO left by a crash may be half uploaded: replace it rather than trust it.
        self.ensure_volumes(&c, vm, VolumeKind::Cloudinit, true, |v| {
            let (c, u, m) = (c.clone(), user_data.clone(), meta_data.clone());
            async move { c.cloudinit_create(&v.atomos_name, &u, &m).await }
        })
        .await
    }

    async fn data_volumes(&self, cx: &StepCtx<'_, Params>, vm: &Vm) -> StepResult {
        let c = self.client(cx).await?;
        self.ensure_volumes(&c, vm, VolumeKind::Data, false, |v| {
            let spec = vm.spec.volumes.iter().find(|s| s.name == v.name);
            let req = VolumeCreate {
                name: v.atomos_name,
                size_gb: v.size_gb,
                bootable: spec.is_some_and(|s| s.bootable),
                readonly: spec.is_some_and(|s| s.readonly),
                shareable: spec.is_some_and(|s| s.shareable),
                private: spec.is_none_or(|s| s.private),
            };
            let c = c.clone();
            async move { c.volume_create(&req).await }
        })
        .await
    }

    async fn register(&self, cx: &StepCtx<'_, Params>, vm: &Vm) -> StepResult {
        let c = self.client(cx).await?;
        if c.vm_by_name(&vm.atomos_name)
            .await
            .map_err(step_error)?
            .is_none()
        {
            let mut volume_ids: Vec<String> = cx.output("boot_volume")?;
            volume_ids.extend(cx.output::<Vec<String>>("cloudinit_volume")?);
            volume_ids.extend(cx.output::<Vec<String>>("data_volumes")?);
            let req = Register {
                vm_name: vm.atomos_name.clone(),
                spec: driver_spec(vm),
                volume_ids,
                network_ids: vec![],
            };
            match c.register(&req).await {
                Ok(()) => {}
                // A retry after a crash between register and recording: it is ours.
                Err(e) if e.is_already_exists() => {}
                Err(e) => return Err(step_error(e)),
            }
        }
        meson_db::vms::set_status(&self.0.pool, vm.id, VmStatus::Starting).await?;
        to_output(())
    }

    async fn wait_running(&self, cx: &StepCtx<'_, Params>, vm: &Vm) -> StepResult {
        let env = &self.0;
        let c = self.client(cx).await?;
        let deadline = tokio::time::Instant::now() + env.config.vm_boot_timeout;
        loop {
            match c.vm_by_name(&vm.atomos_name).await {
                Ok(None) => {
                    return Err(StepError::fatal(
                        "service_error",
                        "the VM vanished from its hypervisor while booting",
                    ));
                }
                Ok(Some(found)) if found.state == VmState::Running && found.ipv4.is_some() => {
                    meson_db::vms::set_runtime(
                        &env.pool,
                        vm.id,
                        VmStatus::Running,
                        Some(&found.id),
                        found.ipv4,
                    )
                    .await?;
                    meson_db::volumes::set_status_for_vm(&env.pool, vm.id, VolumeStatus::Available)
                        .await?;
                    return to_output(Created {
                        atomos_id: found.id,
                    });
                }
                Ok(Some(_)) => {}
                Err(e) if e.is_transient() => {
                    tracing::debug!(error = %e, "status poll failed; polling again")
                }
                Err(e) => return Err(step_error(e)),
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(StepError::fatal(
                    "timeout",
                    format!(
                        "the VM did not come up within {} s",
                        env.config.vm_boot_timeout.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(env.config.poll_interval).await;
        }
    }
}
