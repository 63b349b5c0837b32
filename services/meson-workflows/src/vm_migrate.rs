//! Migrate a VM to another host of its provider, cold: stopped (if it
//! runs), its volumes (its own and the standalone ones attached to it)
//! copied to the new host by the old one's storage daemon
//! (`/update/transfer`, which hands each to the new host's `/import`),
//! registered there, recorded there, started there, and only then taken
//! off the old host. Until that last step a failure undoes everything, the
//! VM running on its old host again; from it (the old host's copy is being
//! given up) the migration rolls forward. Either way the VM ends on exactly
//! one host. Its private networks are made on the new host when it has
//! none of them yet (meson defines a network per host); its NICs keep
//! their MACs and meson's addresses.

use crate::Env;
use crate::atomos::{destroy_volume, step_error};
use crate::vm_power::{self, PowerOff, PowerOn};
use atomos_driver::{AtomosClient, Register};
use meson_core::action::ActionFailure;
use meson_core::vm::{Placement, Vm};
use meson_core::volume::{Volume, VolumePlacement};
use meson_core::{ActionId, Code, TargetId, TenantId, VmId, VolumeId};
use meson_jobs::{Enqueued, StepCtx, StepError, StepResult, Workflow, to_output};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Params {
    pub vm_id: VmId,
    /// The host asked for (a target's name); otherwise placement picks one.
    #[serde(default)]
    pub host: Option<String>,
    /// The VM was running: it is stopped for the move and started again.
    pub restart: bool,
}

meson_jobs::steps! {
    pub enum MigrateStep {
        /// Picks the new host: of the VM's provider, with room for it.
        Place = "place",
        /// Stops a running VM.
        Stop = "stop",
        /// Copies its volumes to the new host.
        Copy = "copy",
        /// Registers it on the new host.
        Register = "register",
        /// Records it (and its volumes) on the new host.
        Switch = "switch",
        /// Starts it there (if it was running).
        Start = "start",
        /// Takes it and its volumes off the old host.
        Clean = "clean",
    }
}

/// Where the VM moves from and to.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Route {
    pub from: Placement,
    pub to: Placement,
}

/// A volume's AtomOS ids on the old host and the new one.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Moved {
    pub volume: VolumeId,
    pub from: String,
    pub to: String,
}

pub struct VmMigrate(pub Arc<Env>);

/// Enqueues the migration in the caller's transaction, under the VM's key.
pub async fn enqueue(
    tx: &mut meson_db::Tx<'_>,
    params: &Params,
    action: ActionId,
    tenant: &TenantId,
) -> Result<Enqueued, meson_core::Error> {
    crate::enqueue_keyed::<VmMigrate>(tx, params, crate::keys::vm(params.vm_id), action, tenant)
        .await
}

/// The VM's volumes in the order it was registered with them: its own
/// (boot, cloud-init, data), then the standalone ones attached to it.
async fn volumes_of(env: &Env, vm: VmId) -> StepResult<Vec<Volume>> {
    let mut all = meson_db::volumes::list_for_vms(&env.pool, &[vm]).await?;
    all.extend(meson_db::volumes::attached_to_vms(&env.pool, &[vm]).await?);
    Ok(all)
}

/// The VM's copy on a host, if it has one.
async fn vm_on(
    env: &Env,
    target: TargetId,
    c: &AtomosClient,
    name: &str,
) -> StepResult<Option<atomos_driver::Vm>> {
    env.atomos
        .vm_by_name(target, c, name)
        .await
        .map_err(step_error)
}

/// Picks the new host: the asked one, or the cheapest other enabled host of
/// the VM's provider whose quote says the VM fits.
async fn place(env: &Env, vm: &Vm, host: Option<&str>) -> StepResult<Route> {
    let from = vm
        .placement
        .clone()
        .ok_or_else(|| StepError::fatal(Code::Conflict, "the VM is not placed on a host"))?;
    let spec = crate::placement::driver_spec(&vm.spec);
    let mut best: Option<(f64, Placement)> = None;
    let mut why = Vec::new();
    for (t, c) in env.atomos.enabled().await? {
        if t.id == from.target_id
            || t.provider != from.provider
            || host.is_some_and(|h| h != t.name)
        {
            continue;
        }
        match c.can_allocate(&spec).await {
            Ok(quotes) => {
                let Some(q) = quotes
                    .into_iter()
                    .min_by(|a, b| a.price_hour.total_cmp(&b.price_hour))
                else {
                    why.push(format!("{}: no quote", t.name));
                    continue;
                };
                if best.as_ref().is_none_or(|(p, _)| q.price_hour < *p) {
                    let to = Placement {
                        target_id: t.id,
                        host: t.name.clone(),
                        provider: t.provider.clone(),
                        region: t.region.clone(),
                        price_hourly: q.price_hour,
                        price_monthly: q.price_month,
                        currency: q.currency,
                    };
                    best = Some((q.price_hour, to));
                }
            }
            Err(e) if e.is_capacity() => why.push(format!("{}: {}", t.name, e.message)),
            Err(e) => return Err(step_error(e)),
        }
    }
    let (_, to) = best.ok_or_else(|| {
        StepError::fatal(
            Code::ResourceUnavailable,
            format!(
                "no other host of provider {} has room for the VM{}",
                from.provider,
                if why.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", why.join("; "))
                }
            ),
        )
    })?;
    tracing::info!(vm = %vm.id, from = %from.host, to = %to.host, "migration placed");
    Ok(Route { from, to })
}

/// Copies each volume to the new host (found there by name after a crash).
async fn copy(env: &Env, vm: &Vm, route: &Route) -> StepResult<Vec<Moved>> {
    let from = env.atomos.client(route.from.target_id).await?;
    let to = env.atomos.client(route.to.target_id).await?;
    let origin = to.target().storage_origin();
    let mut out = Vec::new();
    for v in volumes_of(env, vm.id).await? {
        let src = v
            .atomos_id
            .clone()
            .ok_or_else(|| StepError::internal(format!("volume {} is not on AtomOS", v.name)))?;
        let dst = match env
            .atomos
            .volume_by_name(route.to.target_id, &to, &v.atomos_name)
            .await?
        {
            Some(found) => found.id,
            None => from
                .volume_transfer(&src, &origin)
                .await
                .map_err(step_error)?,
        };
        out.push(Moved {
            volume: v.id,
            from: src,
            to: dst,
        });
    }
    Ok(out)
}

/// Whether the migration is past its commit point: the old host no longer
/// has the VM (`Clean` takes it off first).
async fn committed(env: &Env, vm: &Vm, route: &Route) -> StepResult<bool> {
    let c = env.atomos.client(route.from.target_id).await?;
    Ok(vm_on(env, route.from.target_id, &c, &vm.atomos_name)
        .await?
        .is_none())
}

/// Records the VM and its volumes on `at` (the new host, or the old one
/// when undoing), with the volumes' ids there.
async fn record(
    env: &Env,
    vm: &Vm,
    at: &Placement,
    ids: impl Iterator<Item = (VolumeId, String)>,
) -> StepResult<()> {
    let c = env.atomos.client(at.target_id).await?;
    let found = vm_on(env, at.target_id, &c, &vm.atomos_name)
        .await?
        .ok_or_else(|| StepError::internal("the VM is missing from its host"))?;
    let standalone = VolumePlacement {
        target_id: at.target_id,
        host: at.host.clone(),
        provider: at.provider.clone(),
        region: at.region.clone(),
    };
    let mut tx = meson_db::begin(&env.pool).await?;
    meson_db::vms::set_placement(&mut *tx, vm.id, Some(at)).await?;
    for (volume, id) in ids {
        let v = meson_db::volumes::get_including_deleted(&mut *tx, volume).await?;
        let placed = v.standalone().then_some(&standalone);
        meson_db::volumes::moved(&mut *tx, volume, &id, placed).await?;
    }
    meson_db::commit(tx).await?;
    meson_db::vms::set_runtime(&env.pool, vm.id, vm.status, Some(&found.id), found.ipv4).await?;
    Ok(())
}

/// Power operation `O` on the VM as it is recorded now (on the host the
/// last step left it).
async fn power<O: vm_power::PowerOp>(env: &Env, vm_id: VmId) -> StepResult<()> {
    let vm = meson_db::vms::get_any(&env.pool, vm_id).await?;
    vm_power::power::<O>(env, &vm).await
}

impl Workflow for VmMigrate {
    const KIND: &'static str = "vm_migrate";
    type Params = Params;
    type Step = MigrateStep;

    async fn run(&self, cx: &StepCtx<'_, Params, MigrateStep>, step: MigrateStep) -> StepResult {
        let env = &self.0;
        let p = cx.params;
        let vm = meson_db::vms::get_any(&env.pool, p.vm_id).await?;
        if step == MigrateStep::Place {
            return to_output(place(env, &vm, p.host.as_deref()).await?);
        }
        let route: Route = cx.output(MigrateStep::Place)?;
        match step {
            MigrateStep::Place => unreachable!("answered above"),
            MigrateStep::Stop if p.restart => power::<PowerOff>(env, vm.id).await?,
            MigrateStep::Copy => return to_output(copy(env, &vm, &route).await?),
            MigrateStep::Register => {
                let moved: Vec<Moved> = cx.output(MigrateStep::Copy)?;
                let c = env.atomos.client(route.to.target_id).await?;
                if vm_on(env, route.to.target_id, &c, &vm.atomos_name)
                    .await?
                    .is_none()
                {
                    // Its private networks, made on the new host if need be,
                    // its NICs keeping their MACs (and so their addresses).
                    let nics = meson_db::networks::attachments_of(&env.pool, &[vm.id]).await?;
                    let req = Register {
                        vm_name: vm.atomos_name.clone(),
                        spec: crate::placement::driver_spec(&vm.spec),
                        volume_ids: moved.iter().map(|m| m.to.clone()).collect(),
                        network_ids: crate::provision::ensure_networks_on(
                            env,
                            vm.id,
                            route.to.target_id,
                            &c,
                        )
                        .await?,
                        nic_macs: nics.into_iter().map(|n| n.mac).collect(),
                    };
                    match c.register(&req).await {
                        Ok(()) => {}
                        Err(e) if e.is_already_exists() => {}
                        Err(e) => return Err(step_error(e)),
                    }
                    // A registered VM runs at once: it stays off until `Start`.
                    let found = vm_on(env, route.to.target_id, &c, &vm.atomos_name)
                        .await?
                        .ok_or_else(|| {
                            StepError::temporary("the new host does not list the VM yet")
                        })?;
                    c.stop(&found.id).await.map_err(step_error)?;
                }
            }
            MigrateStep::Switch => {
                let moved: Vec<Moved> = cx.output(MigrateStep::Copy)?;
                record(
                    env,
                    &vm,
                    &route.to,
                    moved.into_iter().map(|m| (m.volume, m.to)),
                )
                .await?
            }
            MigrateStep::Start if p.restart => power::<PowerOn>(env, vm.id).await?,
            MigrateStep::Clean => {
                let moved: Vec<Moved> = cx.output(MigrateStep::Copy)?;
                let c = env.atomos.client(route.from.target_id).await?;
                if let Some(old) = vm_on(env, route.from.target_id, &c, &vm.atomos_name).await? {
                    c.unregister(&old.id).await.map_err(step_error)?;
                }
                for m in &moved {
                    destroy_volume(&c, &m.from).await?;
                }
            }
            MigrateStep::Stop | MigrateStep::Start => {}
        }
        to_output(())
    }

    /// Puts the VM back on its old host, step by step; past the commit
    /// point nothing is undone.
    async fn undo(
        &self,
        cx: &StepCtx<'_, Params, MigrateStep>,
        step: MigrateStep,
    ) -> StepResult<()> {
        let env = &self.0;
        let p = cx.params;
        if step == MigrateStep::Place {
            return Ok(());
        }
        let vm = meson_db::vms::get_any(&env.pool, p.vm_id).await?;
        let route: Route = cx.output(MigrateStep::Place)?;
        if committed(env, &vm, &route).await? {
            return Ok(());
        }
        match step {
            MigrateStep::Start if p.restart => power::<PowerOff>(env, vm.id).await,
            MigrateStep::Switch => {
                let moved: Vec<Moved> = cx.output(MigrateStep::Copy)?;
                record(
                    env,
                    &vm,
                    &route.from,
                    moved.into_iter().map(|m| (m.volume, m.from)),
                )
                .await
            }
            MigrateStep::Register => {
                let c = env.atomos.client(route.to.target_id).await?;
                if let Some(new) = vm_on(env, route.to.target_id, &c, &vm.atomos_name).await? {
                    c.unregister(&new.id).await.map_err(step_error)?;
                }
                Ok(())
            }
            MigrateStep::Copy => {
                let c = env.atomos.client(route.to.target_id).await?;
                for v in volumes_of(env, vm.id).await? {
                    if let Some(found) = env
                        .atomos
                        .volume_by_name(route.to.target_id, &c, &v.atomos_name)
                        .await?
                    {
                        destroy_volume(&c, &found.id).await?;
                    }
                }
                Ok(())
            }
            MigrateStep::Stop if p.restart => power::<PowerOn>(env, vm.id).await,
            _ => Ok(()),
        }
    }

    /// The VM's status is what its host shows.
    async fn on_failed(&self, params: &Params, _: &ActionFailure) -> StepResult<()> {
        let env = &self.0;
        let vm = meson_db::vms::get_any(&env.pool, params.vm_id).await?;
        vm_power::settle(env, &vm).await?;
        Ok(())
    }
}
