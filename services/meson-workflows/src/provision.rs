//! Making one VM real on AtomOS, and taking it away again: the pieces the
//! VM create and delete workflows are made of, shared with the cluster
//! workflows (a node is a VM).
//!
//! Every function is idempotent and keeps its progress in the database (the
//! VM's placement, its volumes' AtomOS ids, its network's host rows), so a
//! retry after a crash picks up where the last attempt stopped: what exists
//! is found by name, what is recorded is trusted.

use crate::Env;
use crate::atomos::{destroy_volume, destroy_volumes, step_error, unregister_by_name};
use atomos_driver::{
    AtomosClient, ImageVolumeCreate, NetworkCreate, Register, VmState, VolumeCreate,
};
use meson_core::Code;
use meson_core::cloudinit::{StaticNic, VmCloudInit};
use meson_core::naming;
use meson_core::vm::{Placement, Vm, VmStatus};
use meson_core::volume::{Volume, VolumeKind, VolumeStatus};
use meson_core::{NetworkId, TargetId, VmId};
use meson_jobs::{StepError, StepResult};

/// The client of the host the VM is placed on.
pub async fn client(env: &Env, vm: &Vm) -> StepResult<AtomosClient> {
    let placement = placed(vm)?;
    env.atomos.client(placement.target_id).await
}

fn placed(vm: &Vm) -> StepResult<&Placement> {
    vm.placement
        .as_ref()
        .ok_or_else(|| StepError::internal("the VM has no placement yet"))
}

/// The VM's volumes of one kind, in order.
pub async fn volumes_of(env: &Env, vm: VmId, kind: VolumeKind) -> StepResult<Vec<Volume>> {
    Ok(meson_db::volumes::list_for_vms(&env.pool, &[vm])
        .await?
        .into_iter()
        .filter(|v| v.kind == kind)
        .collect())
}

/// Makes sure each of the VM's private networks exists on its host and
/// returns their AtomOS ids, in NIC order. A network made on a host stays
/// there for the next VM and goes with the network.
pub async fn ensure_networks(env: &Env, vm: &Vm) -> StepResult<Vec<String>> {
    let target = placed(vm)?.target_id;
    let c = client(env, vm).await?;
    ensure_networks_on(env, vm.id, target, &c).await
}

/// The AtomOS ids of the VM's networks on `target` (the new host of a
/// migration too), each made there first if need be, in NIC order.
pub async fn ensure_networks_on(
    env: &Env,
    vm: VmId,
    target: TargetId,
    c: &AtomosClient,
) -> StepResult<Vec<String>> {
    let nics = meson_db::networks::attachments_of(&env.pool, &[vm]).await?;
    let mut ids = Vec::with_capacity(nics.len());
    for nic in &nics {
        ids.push(ensure_host_network(env, c, target, nic.network_id).await?);
    }
    Ok(ids)
}

/// The network's AtomOS id on a target, made there first if need be. The
/// host row is claimed before the create, so a crash in between is found by
/// name (here on retry, or by the network's delete).
pub async fn ensure_host_network(
    env: &Env,
    c: &AtomosClient,
    target: TargetId,
    id: NetworkId,
) -> StepResult<String> {
    let claimed = meson_db::networks::claim_host_network(&env.pool, id, target).await?;
    if let Some(known) = claimed.atomos_id {
        return Ok(known);
    }
    let name = naming::network_atomos_name(id);
    let by_name = |list: Vec<atomos_driver::Network>| list.into_iter().find(|n| n.name == name);
    let found = match by_name(c.networks().await.map_err(step_error)?) {
        Some(n) => n,
        None => {
            let network = meson_db::networks::get_any(&env.pool, id).await?;
            let s = &network.subnet;
            let req = NetworkCreate {
                name: name.clone(),
                // AtomOS takes the gateway's address with the prefix.
                cidr: format!("{}/{}", s.gateway, s.cidr.prefix_len()),
                dhcp_start: s.dhcp.then(|| s.range.start.to_string()),
                dhcp_end: s.dhcp.then(|| s.range.last.to_string()),
            };
            match c.network_create(&req).await {
                Ok(n) => n,
                // Another VM's workflow made it just now.
                Err(e) if e.is_already_exists() => {
                    by_name(c.networks().await.map_err(step_error)?).ok_or_else(|| step_error(e))?
                }
                Err(e) => return Err(step_error(e)),
            }
        }
    };
    meson_db::networks::set_host_network(&env.pool, id, target, &found.id).await?;
    Ok(found.id)
}

/// Removes a network from every host it was made on (found by name where
/// a crash left it unrecorded) and forgets the host rows.
pub async fn remove_network_from_hosts(env: &Env, id: NetworkId) -> StepResult<()> {
    let name = naming::network_atomos_name(id);
    for host in meson_db::networks::host_networks(&env.pool, id).await? {
        let c = env.atomos.client(host.target).await?;
        let atomos_id = match host.atomos_id {
            Some(known) => Some(known),
            None => c
                .networks()
                .await
                .map_err(step_error)?
                .into_iter()
                .find(|n| n.name == name)
                .map(|n| n.id),
        };
        if let Some(atomos_id) = atomos_id {
            match c.network_delete(&atomos_id).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(step_error(e)),
            }
        }
        meson_db::networks::forget_host_network(&env.pool, id, host.target).await?;
    }
    Ok(())
}

/// The NICs meson's IPAM addressed, for the guest's network-config.
pub async fn static_nics(env: &Env, vm: &Vm) -> StepResult<Vec<StaticNic>> {
    let pool = &env.pool;
    let mut out = Vec::new();
    for nic in meson_db::networks::attachments_of(pool, &[vm.id]).await? {
        if let Some(address) = nic.address {
            let network = meson_db::networks::get_any(pool, nic.network_id).await?;
            out.push(StaticNic {
                mac: nic.mac,
                address,
                prefix: network.subnet.cidr.prefix_len(),
            });
        }
    }
    Ok(out)
}

/// Makes sure each volume of `kind` exists on AtomOS: found by name (or,
/// with `replace`, destroyed and made again), else made by `create`; then
/// records its AtomOS id. Returns the ids in order.
async fn ensure_volumes<F, Fut>(
    env: &Env,
    c: &AtomosClient,
    vm: &Vm,
    kind: VolumeKind,
    replace: bool,
    create: F,
) -> StepResult<Vec<String>>
where
    F: Fn(Volume) -> Fut,
    Fut: std::future::Future<Output = Result<String, atomos_driver::DriverError>>,
{
    let target = placed(vm)?.target_id;
    let mut ids = Vec::new();
    for v in volumes_of(env, vm.id, kind).await? {
        let mut found = env.atomos.volume_by_name(target, c, &v.atomos_name).await?;
        // A volume of a VM AtomOS has registered is whole (registering
        // comes after the volumes): kept, never made again. So it is when
        // this workflow runs again on a database restored to before it had
        // recorded its steps.
        let kept = match &found {
            Some(_) if replace => env
                .atomos
                .vm_by_name(target, c, &vm.atomos_name)
                .await
                .map_err(step_error)?
                .is_some(),
            Some(_) => true,
            None => false,
        };
        let id = match found.take() {
            Some(found) if kept => found.id,
            found => {
                if let Some(stale) = found {
                    destroy_volume(c, &stale.id).await?;
                }
                create(v.clone()).await.map_err(step_error)?
            }
        };
        meson_db::volumes::set_atomos(&env.pool, v.id, Some(&id), VolumeStatus::Creating).await?;
        ids.push(id);
    }
    Ok(ids)
}

/// The boot disk: cloned from the OS's cloud image, or a copy of the
/// tenant's image (on its host, where the VM is placed), grown to the
/// boot volume's size when the image is smaller.
pub async fn ensure_boot_volume(env: &Env, vm: &Vm) -> StepResult<Vec<String>> {
    let c = client(env, vm).await?;
    if let Some(image) = vm.spec.image {
        let image = meson_db::images::get_including_deleted(&env.pool, image).await?;
        let (Some(source), Some(at)) = (image.atomos_id.clone(), &image.placement) else {
            return Err(StepError::fatal(
                Code::Conflict,
                format!("image {} is not on AtomOS", image.name),
            ));
        };
        if at.target_id != placed(vm)?.target_id {
            return Err(StepError::fatal(
                Code::Conflict,
                format!("image {} is on host {}, not the VM's", image.name, at.host),
            ));
        }
        let ids = ensure_volumes(env, &c, vm, VolumeKind::Boot, false, |v| {
            let (c, source) = (c.clone(), source.clone());
            async move { c.volume_clone(&source, &v.atomos_name).await }
        })
        .await?;
        for (id, v) in ids
            .iter()
            .zip(volumes_of(env, vm.id, VolumeKind::Boot).await?)
        {
            let has = c.volume_info(id).await.map_err(step_error)?.size_gb;
            if has + 1e-9 < f64::from(v.size_gb) {
                c.volume_resize(id, v.size_gb).await.map_err(step_error)?;
            }
        }
        return Ok(ids);
    }
    let url = &vm.spec.os.image_url;
    ensure_volumes(env, &c, vm, VolumeKind::Boot, false, |v| {
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

/// The cloud-init ISO with `files` (name, content). An ISO left by a crash
/// may be half uploaded: it is replaced rather than trusted.
pub async fn ensure_cloudinit_volume(
    env: &Env,
    vm: &Vm,
    files: Vec<(&'static str, String)>,
) -> StepResult<Vec<String>> {
    let c = client(env, vm).await?;
    ensure_volumes(env, &c, vm, VolumeKind::Cloudinit, true, |v| {
        let (c, files) = (c.clone(), files.clone());
        async move {
            let files: Vec<(&str, &str)> = files.iter().map(|(n, f)| (*n, f.as_str())).collect();
            c.cloudinit_create_files(&v.atomos_name, &files).await
        }
    })
    .await
}

/// The cloud-init files of a plain VM: its hostname, SSH keys and static NICs.
pub async fn vm_cloudinit_files(env: &Env, vm: &Vm) -> StepResult<Vec<(&'static str, String)>> {
    let static_nics = static_nics(env, vm).await?;
    let ci = VmCloudInit {
        vm_id: vm.id,
        hostname: &vm.spec.name,
        ssh_keys: &vm.spec.ssh_keys,
        phone_home_url: None,
        static_nics: &static_nics,
    };
    Ok(ci.files())
}

/// The data disks the request asked for.
pub async fn ensure_data_volumes(env: &Env, vm: &Vm) -> StepResult<Vec<String>> {
    let c = client(env, vm).await?;
    ensure_volumes(env, &c, vm, VolumeKind::Data, false, |v| {
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

/// Registers the VM with its volumes (boot, cloud-init, data: as recorded;
/// then the standalone volumes attached to it) and networks, unless AtomOS has it already; the VM is then `starting`.
pub async fn ensure_registered(env: &Env, vm: &Vm) -> StepResult<()> {
    let volumes = meson_db::volumes::list_for_vms(&env.pool, &[vm.id]).await?;
    try_register(env, vm, &volumes).await?.map_err(step_error)
}

/// [`ensure_registered`], a host's refusal for lack of room (full since
/// its quote) kept apart: `Ok(Err(refusal))`. `volumes` are the VM's own
/// ([`meson_db::volumes::list_for_vms`]: boot, cloud-init, data).
async fn try_register(
    env: &Env,
    vm: &Vm,
    volumes: &[Volume],
) -> StepResult<Result<(), atomos_driver::DriverError>> {
    let c = client(env, vm).await?;
    let target = placed(vm)?.target_id;
    if env
        .atomos
        .vm_by_name(target, &c, &vm.atomos_name)
        .await
        .map_err(step_error)?
        .is_none()
    {
        let mut volume_ids = Vec::new();
        for v in volumes {
            volume_ids.push(
                v.atomos_id.clone().ok_or_else(|| {
                    StepError::internal(format!("volume {} was never made", v.name))
                })?,
            );
        }
        // Then the standalone volumes it attaches (on this host: they pinned it).
        for v in meson_db::volumes::attached_to_vms(&env.pool, &[vm.id]).await? {
            volume_ids.push(v.atomos_id.ok_or_else(|| {
                StepError::internal(format!("volume {} is not on AtomOS", v.name))
            })?);
        }
        let nics = meson_db::networks::attachments_of(&env.pool, &[vm.id]).await?;
        let req = Register {
            vm_name: vm.atomos_name.clone(),
            spec: crate::placement::driver_spec(&vm.spec),
            volume_ids,
            network_ids: ensure_networks(env, vm).await?,
            nic_macs: nics.into_iter().map(|n| n.mac).collect(),
        };
        match c.register(&req).await {
            Ok(()) => {}
            // A retry after a crash between register and recording: it is ours.
            Err(e) if e.is_already_exists() => {}
            Err(e) if e.is_capacity() => return Ok(Err(e)),
            Err(e) => return Err(step_error(e)),
        }
    }
    // AtomOS counts the VM now: its reservation has done its job.
    let mut tx = meson_db::begin(&env.pool).await?;
    meson_db::vms::set_status(&mut *tx, vm.id, VmStatus::Starting).await?;
    meson_db::reservations::release(&mut *tx, vm.id).await?;
    meson_db::commit(tx).await?;
    Ok(Ok(()))
}

/// How many hosts may refuse a VM at `register` (full since their quote)
/// before its create gives up.
pub const MAX_REFUSALS: usize = 3;

/// What the caller of [`register_placed`] supplies about the VM it
/// registers: how to place it again after a refusal, and its cloud-init.
/// A plain VM is [`PlainVm`]; a cluster's node is `nodes::NodeVm`.
pub trait Owner: Sync {
    /// Places the (unplaced) VM on a host, none of `exclude`.
    fn place(
        &self,
        env: &Env,
        vm: &Vm,
        exclude: &[TargetId],
    ) -> impl std::future::Future<Output = StepResult<()>> + Send;

    /// The files of the VM's cloud-init volume.
    fn cloudinit_files(
        &self,
        env: &Env,
        vm: &Vm,
    ) -> impl std::future::Future<Output = StepResult<Vec<(&'static str, String)>>> + Send;
}

/// A VM of its own (`vm_create`): placed as any VM, with its own cloud-init.
pub struct PlainVm;

impl Owner for PlainVm {
    async fn place(&self, env: &Env, vm: &Vm, exclude: &[TargetId]) -> StepResult<()> {
        crate::placement::place_vm(env, vm, exclude)
            .await
            .map(|_| ())
    }

    async fn cloudinit_files(&self, env: &Env, vm: &Vm) -> StepResult<Vec<(&'static str, String)>> {
        vm_cloudinit_files(env, vm).await
    }
}

/// What registering a VM took, recorded as the step's output.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Registered {
    /// The host that took it.
    pub host: String,
    /// The hosts that refused it first (full since their quote), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_by: Vec<String>,
}

/// Registers a placed VM (see [`ensure_registered`]). A host that refuses
/// it for lack of room is a reason to place it again, not to fail: what
/// was made there is taken away, the VM is placed on the next host that
/// fits (that host excluded), made there and registered, up to
/// [`MAX_REFUSALS`] times. Only when no other host fits does it end
/// `resource_unavailable`.
pub async fn register_placed(env: &Env, vm_id: VmId, owner: &impl Owner) -> StepResult<Registered> {
    let mut refused: Vec<Placement> = Vec::new();
    loop {
        let vm = meson_db::vms::get_any(&env.pool, vm_id).await?;
        let Some(placement) = vm.placement.clone() else {
            // A crash between taking the placement away and placing again.
            place_again(env, &vm, owner, &refused).await?;
            continue;
        };
        let mut volumes = meson_db::volumes::list_for_vms(&env.pool, &[vm.id]).await?;
        // One without an AtomOS id was taken away after a refusal: the
        // VM's disks are made (again) on its host.
        if volumes.iter().any(|v| v.atomos_id.is_none()) {
            rebuild(env, &vm, owner).await?;
            volumes = meson_db::volumes::list_for_vms(&env.pool, &[vm.id]).await?;
        }
        let refusal = match try_register(env, &vm, &volumes).await? {
            Ok(()) => {
                return Ok(Registered {
                    host: placement.host,
                    refused_by: refused.into_iter().map(|p| p.host).collect(),
                });
            }
            Err(refusal) => refusal,
        };
        metrics::counter!("meson_placement_refusals_total").increment(1);
        tracing::warn!(vm = %vm.id, host = %placement.host, error = %refusal,
            "the host refused the vm at register (full since its quote); placing it again");
        refused.push(placement);
        if refused.len() > MAX_REFUSALS {
            return Err(StepError::fatal(
                Code::ResourceUnavailable,
                format!(
                    "{} hosts refused the VM for lack of room ({}); giving up",
                    refused.len(),
                    hosts(&refused)
                ),
            ));
        }
        // Take away what was made on the refusing host; the VM is made
        // again wherever it goes next.
        teardown(env, &vm).await?;
        for v in meson_db::volumes::list_for_vms(&env.pool, &[vm.id]).await? {
            meson_db::volumes::set_atomos(&env.pool, v.id, None, VolumeStatus::Creating).await?;
        }
        unplace(env, vm.id).await?;
        let vm = meson_db::vms::get_any(&env.pool, vm_id).await?;
        place_again(env, &vm, owner, &refused).await?;
    }
}

fn hosts(refused: &[Placement]) -> String {
    refused
        .iter()
        .map(|p| p.host.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Places an unplaced VM again, none of the `refused` hosts.
async fn place_again(
    env: &Env,
    vm: &Vm,
    owner: &impl Owner,
    refused: &[Placement],
) -> StepResult<()> {
    let exclude: Vec<TargetId> = refused.iter().map(|p| p.target_id).collect();
    let placed = owner.place(env, vm, &exclude).await;
    match placed {
        Err(e) if !refused.is_empty() && e.code() == Code::ResourceUnavailable.as_str() => {
            Err(StepError::fatal(
                Code::ResourceUnavailable,
                format!(
                    "{} refused the VM for lack of room and no other host fits it: {}",
                    hosts(refused),
                    e.message()
                ),
            ))
        }
        other => other,
    }
}

/// Makes the VM's networks and disks on the host it is placed on.
async fn rebuild(env: &Env, vm: &Vm, owner: &impl Owner) -> StepResult<()> {
    ensure_networks(env, vm).await?;
    ensure_boot_volume(env, vm).await?;
    let files = owner.cloudinit_files(env, vm).await?;
    ensure_cloudinit_volume(env, vm, files).await?;
    ensure_data_volumes(env, vm).await?;
    Ok(())
}

/// Forgets where the VM was placed and releases its reservation.
pub async fn unplace(env: &Env, vm: VmId) -> StepResult<()> {
    let mut tx = meson_db::begin(&env.pool).await?;
    meson_db::vms::set_placement(&mut *tx, vm, None).await?;
    meson_db::reservations::release(&mut *tx, vm).await?;
    meson_db::commit(tx).await?;
    Ok(())
}

/// Waits (bounded by the boot timeout) until AtomOS reports the VM running
/// with an IPv4; records its id and address. Returns AtomOS's id.
/// Polls on the ticks every waiter shares (see
/// [`crate::atomos::Atomos::next_tick`]), so the VMs booting on one host
/// at once are seen in one listing of it per tick.
pub async fn wait_running(env: &Env, vm: &Vm) -> StepResult<String> {
    let c = client(env, vm).await?;
    let target = placed(vm)?.target_id;
    let deadline = tokio::time::Instant::now() + env.config.vm_boot_timeout;
    let mut since = tokio::time::Instant::now();
    loop {
        let listed = env.atomos.vms_since(target, &c, since).await;
        match listed.map(|vms| vms.iter().find(|v| v.name == vm.atomos_name).cloned()) {
            Ok(None) => {
                return Err(StepError::internal(
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
                return Ok(found.id);
            }
            Ok(Some(_)) => {}
            Err(e) if e.is_transient() => {
                tracing::debug!(error = %e, "status poll failed; polling again")
            }
            Err(e) => return Err(step_error(e)),
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(StepError::fatal(
                Code::Timeout,
                format!(
                    "the VM did not come up within {} s",
                    env.config.vm_boot_timeout.as_secs()
                ),
            ));
        }
        since = env.atomos.next_tick(env.config.poll_interval);
        tokio::time::sleep_until(since).await;
    }
}

/// Takes the VM off AtomOS: unregisters it and destroys every volume it
/// owns (by name prefix and by recorded id). Rows are left as they are.
pub async fn teardown(env: &Env, vm: &Vm) -> StepResult<()> {
    let Some(placement) = &vm.placement else {
        // Never placed: nothing exists on AtomOS.
        return Ok(());
    };
    let c = env.atomos.client(placement.target_id).await?;
    unregister_by_name(&c, &vm.atomos_name).await?;
    let known: Vec<String> = meson_db::volumes::list_for_vms(&env.pool, &[vm.id])
        .await?
        .into_iter()
        .filter_map(|v| v.atomos_id)
        .collect();
    destroy_volumes(&c, &naming::vm_volume_prefix(vm.id), &known).await
}

/// Undoes one kind of volume step: destroys what it made (found by name
/// too: it may have made one and crashed before recording) and clears the rows.
pub async fn undo_volumes(env: &Env, vm: &Vm, kind: VolumeKind) -> StepResult<()> {
    let c = client(env, vm).await?;
    let target = placed(vm)?.target_id;
    for v in volumes_of(env, vm.id, kind).await? {
        if let Some(found) = env
            .atomos
            .volume_by_name(target, &c, &v.atomos_name)
            .await?
        {
            destroy_volume(&c, &found.id).await?;
        }
        if let Some(id) = &v.atomos_id {
            destroy_volume(&c, id).await?;
        }
        meson_db::volumes::set_atomos(&env.pool, v.id, None, VolumeStatus::Error).await?;
    }
    Ok(())
}
