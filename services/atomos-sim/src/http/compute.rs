//! Compute (matcher) routes: canallocate, register, unregister, power,
//! update, volume and network attach/detach, status, templates; backups are
//! [`super::backup`]'s, console tunnels [`super::console`]'s.

use super::{ApiError, ApiResult, ok, parse};
use crate::cloudinit::{phone_home, seed_files, static_addresses};
use crate::host::SimHost;
use crate::http::storage::volume_to_wire;
use crate::state::{Demand, HostState, Power, VmRec};
use atomos_driver::VmState;
use atomos_driver::schema::compute::{
    CanAllocateResponse, LocalIndex, MesosQuote, Misc, NetworkAttachBody, NetworkConfig, Price,
    RegisterBody, ReqJson, SpecFile, VmStatus, VmUpdateBody, VolumeAttachBody,
};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::{get, post};
use serde_json::json;
use std::time::{Duration, Instant};

pub(super) fn routes() -> Router<SimHost> {
    Router::new()
        .route("/canallocate", post(canallocate))
        .route("/register", post(register))
        .route("/unregister", post(unregister))
        .route("/start", post(start))
        .route("/stop", post(stop))
        .route("/reboot", post(reboot))
        .route("/update", post(update))
        .route("/volume/attach", post(volume_attach))
        .route("/volume/detach", post(volume_detach))
        .route("/network/attach", post(network_attach))
        .route("/network/detach", post(network_detach))
        .route("/status", get(status))
        .route("/templates", get(templates))
        .merge(super::backup::routes())
        .merge(super::console::routes())
}

/// Hours in an average month, for monthly quotes.
const HOURS_PER_MONTH: f64 = 730.0;

async fn canallocate(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let spec: SpecFile = parse(&body)?;
    let demand = Demand::from_wire(spec).map_err(ApiError::unprocessable)?;
    host.fit(&host.state(), &demand)
        .map_err(|why| ApiError::no_capacity(format!("[VmNotAllocable] {why}")))?;
    let hour = host.price_hour(&demand);
    let cfg = host.config();
    ok(CanAllocateResponse {
        mesos: vec![MesosQuote {
            provider: cfg.provider.clone(),
            region: cfg.region.clone(),
            price: Price {
                hour,
                month: (hour * HOURS_PER_MONTH * 100.0).round() / 100.0,
                unit: "EUR".to_owned(),
            },
        }],
        canallocate: None,
    })
}

/// `^[a-zA-Z0-9-]+$`, the GUI's rule for VM names.
/// Where VM `local_index` is in the host's list; an unknown one is a 404.
fn vm_at(state: &HostState, local_index: &str) -> Result<usize, ApiError> {
    state
        .vms
        .iter()
        .position(|vm| vm.id == local_index)
        .ok_or_else(|| ApiError::not_found(format!("VM {local_index} does not exist")))
}

fn valid_vm_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

async fn register(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let body: RegisterBody = parse(&body)?;
    // 2025+ clients send `info.vm_name`, 2023 ones a top-level `vm_name`.
    let name = body
        .info
        .as_ref()
        .and_then(|i| i.vm_name.clone())
        .or(body.vm_name.clone())
        .ok_or_else(|| ApiError::bad_request("vm_name is required (info.vm_name)"))?;
    if !valid_vm_name(&name) {
        return Err(ApiError::bad_request(format!(
            "vm_name {name:?} must match ^[a-zA-Z0-9-]+$"
        )));
    }
    let demand = Demand::from_wire(body.spec).map_err(ApiError::unprocessable)?;
    let volume_ids: Vec<String> = body.volumes.into_iter().map(|v| v.vid).collect();
    let network_ids: Vec<String> = body.networks.into_iter().map(|n| n.network_uid).collect();

    let boot = host.boot_time();
    let mut state = host.state();
    if state.vms.iter().any(|vm| vm.name == name) {
        return Err(ApiError::conflict(format!(
            "a VM named {name} already exists"
        )));
    }
    check_volumes(&state, &volume_ids)?;
    for id in &network_ids {
        if !state.networks.iter().any(|n| &n.id == id) {
            return Err(ApiError::not_found(format!("network {id} does not exist")));
        }
    }
    // Checked under the same lock as the insert: a host that filled up
    // since canallocate refuses here.
    let arch = host
        .fit(&state, &demand)
        .map_err(|why| ApiError::no_capacity(format!("[VmNotAllocable] {why}")))?;
    // The address is the guest's static one on an attached network (from
    // its cloud-init network-config), else a lease from the first network
    // with DHCP, else one from the host's own block (its default NAT network).
    let statics: Vec<std::net::Ipv4Addr> = volume_ids
        .iter()
        .filter_map(|v| state.volume(v))
        .filter(|v| v.cloudinit)
        .flat_map(|v| static_addresses(&v.files))
        .collect();
    let mut lease = statics.iter().find_map(|ip| {
        network_ids
            .iter()
            .filter_map(|id| state.networks.iter().find(|n| &n.id == id))
            .find(|n| super::network::in_subnet(&n.cidr, *ip))
            .map(|n| (*ip, n.id.clone()))
    });
    for id in network_ids.iter().filter(|_| lease.is_none()) {
        if let Some(network) = state.networks.iter().find(|n| &n.id == id)
            && let Some(ip) = SimHost::dhcp_lease(&state, network)
                .map_err(|why| ApiError::no_capacity(format!("[VmNotAllocable] {why}")))?
        {
            lease = Some((ip, id.clone()));
            break;
        }
    }
    let (ipv4, ip_network) = match lease {
        Some((ip, network)) => (ip, Some(network)),
        None => (host.allocate_ip(&mut state), None),
    };
    let id = uuid::Uuid::new_v4().to_string();
    let call = volume_ids
        .iter()
        .filter_map(|v| state.volume(v))
        .find(|v| v.cloudinit)
        .and_then(|v| {
            let (user, meta) = seed_files(&v.files);
            phone_home(user?, meta, &name, &id)
        });
    let vm = VmRec {
        id,
        name,
        demand,
        arch,
        volume_ids,
        network_ids,
        created: chrono::Utc::now(),
        power: Power::on(host.now()),
        ipv4,
        ip_network,
        crashed: false,
        phone_home_url: call.as_ref().map(|c| c.url.clone()),
        phone_home: call,
        phoned_home: false,
    };
    tracing::info!(host = host.name(), vm = %vm.name, id = %vm.id, %ipv4, "registered");
    let row = vm_to_wire(&host, &state, &vm, host.now(), boot);
    let watch = vm.phone_home.is_some().then(|| vm.id.clone());
    *state.registrations.entry(vm.name.clone()).or_default() += 1;
    state.vms.push(vm);
    drop(state);
    if let Some(id) = watch {
        crate::phonehome::watch(&host, id);
    }
    // The mock answers with the new status element; clients treat it as opaque.
    ok(row)
}

/// Every volume must exist, be fully uploaded, not repeated, and be free
/// unless shareable.
fn check_volumes(state: &HostState, ids: &[String]) -> Result<(), ApiError> {
    for (i, id) in ids.iter().enumerate() {
        let volume = state.volume(id).ok_or_else(|| {
            ApiError::not_found(format!("[VolumeNotFound] volume {id} does not exist"))
        })?;
        if ids[..i].contains(id) {
            return Err(ApiError::bad_request(format!(
                "volume {id} is listed twice"
            )));
        }
        if !volume.is_complete() {
            return Err(ApiError::bad_request(format!(
                "[CloudInitIsoCreationFailed] volume {id} still expects {} of {} files",
                volume.expected_files as usize - volume.files.len(),
                volume.expected_files
            )));
        }
        if !volume.shareable
            && let Some(vm) = state.vm_attached(id)
        {
            return Err(ApiError::bad_request(format!(
                "[VolumeAlredyLocked] volume {id} is attached to VM {}",
                vm.name
            )));
        }
    }
    Ok(())
}

async fn unregister(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let LocalIndex { local_index } = parse(&body)?;
    let mut state = host.state();
    let before = state.vms.len();
    state.vms.retain(|vm| vm.id != local_index);
    if state.vms.len() == before {
        return Err(ApiError::not_found(format!(
            "VM {local_index} does not exist"
        )));
    }
    drop(state);
    // Its port forwards stay (the client deletes them); their connections end.
    host.guests_changed();
    tracing::info!(host = host.name(), id = %local_index, "unregistered");
    // Volumes stay: attachment is derived from the VM list, so they are now free.
    ok(json!({ "local_index": local_index }))
}

/// Applies `action` to the VM named by the body's `local_index`.
fn power(
    host: &SimHost,
    body: &Bytes,
    action: impl FnOnce(&mut VmRec, Instant) -> Result<(), ApiError>,
) -> ApiResult {
    let LocalIndex { local_index } = parse(body)?;
    let mut state = host.state();
    let i = vm_at(&state, &local_index)?;
    let vm = &mut state.vms[i];
    action(vm, host.now())?;
    drop(state);
    // A boot may have started: a pending phone home recomputes its deadline.
    host.wake();
    // Or the guest stopped: connections forwarded to it end.
    host.guests_changed();
    ok(json!({ "local_index": local_index }))
}

async fn start(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    // Starting a running VM is a no-op, like `virsh start` retried by a GUI.
    power(&host, &body, |vm, now| {
        if vm.power == Power::Off {
            vm.power = Power::on(now);
            vm.crashed = false;
        }
        Ok(())
    })
}

async fn stop(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    // Stopping a stopped VM is a no-op too; libvirt's domain is "shut off".
    power(&host, &body, |vm, _| {
        vm.power = Power::Off;
        Ok(())
    })
}

async fn reboot(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    power(&host, &body, |vm, now| match vm.power {
        Power::On { .. } => {
            vm.power = Power::On {
                since: now,
                reboot: true,
            };
            Ok(())
        }
        Power::Off => Err(ApiError::bad_request(format!(
            "[VmNotRunning] VM {} is shut off",
            vm.name
        ))),
    })
}

/// `POST /update {"local_index", "slots"?, "ramsize"?}`: changes a VM's
/// vCPUs and RAM (MiB). The VM must be shut off (Hetzner's rule for a
/// server type change; the daemons' is undocumented), and the new size
/// must fit the host beside its other VMs (`[VmNotAllocable]`, 507).
async fn update(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let VmUpdateBody {
        local_index,
        slots,
        ramsize,
    } = parse(&body)?;
    if slots == Some(0) || ramsize == Some(0) {
        return Err(ApiError::bad_request(
            "slots and ramsize must be at least 1",
        ));
    }
    let mut state = host.state();
    let at = vm_at(&state, &local_index)?;
    if state.vms[at].power != Power::Off {
        return Err(ApiError::bad_request(format!(
            "[VmNotStopped] VM {} is running; stop it first",
            state.vms[at].name
        )));
    }
    let mut demand = state.vms[at].demand.clone();
    demand.slots = slots.unwrap_or(demand.slots);
    demand.ram_mib = ramsize.unwrap_or(demand.ram_mib);
    // The VM's own share does not count against it.
    let vm = state.vms.remove(at);
    let fits = host.fit(&state, &demand);
    state.vms.insert(at, vm);
    fits.map_err(|why| ApiError::no_capacity(format!("[VmNotAllocable] {why}")))?;
    let vm = &mut state.vms[at];
    vm.demand = demand;
    tracing::info!(host = host.name(), vm = %vm.name, slots = vm.demand.slots,
        ram_mib = vm.demand.ram_mib, "updated");
    ok(json!({ "local_index": local_index }))
}

/// `POST /volume/attach {"local_index", "volume_id"}`: hot-plugs a volume
/// of this host into a VM, running or off (Hetzner's rule: the daemons'
/// is undocumented). The volume must be complete and free (unless
/// shareable); attaching it again to the same VM is refused (409) rather
/// than ignored, as libvirt refuses a second device on the same target.
async fn volume_attach(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let VolumeAttachBody {
        local_index,
        volume_id,
    } = parse(&body)?;
    let mut state = host.state();
    let vm = &state.vms[vm_at(&state, &local_index)?];
    if vm.volume_ids.contains(&volume_id) {
        return Err(ApiError::conflict(format!(
            "[VolumeAlreadyAttached] volume {volume_id} is attached to VM {}",
            vm.name
        )));
    }
    check_volumes(&state, std::slice::from_ref(&volume_id))?;
    let vm = state
        .vms
        .iter_mut()
        .find(|vm| vm.id == local_index)
        .expect("found above, under the same lock");
    vm.volume_ids.push(volume_id.clone());
    tracing::info!(host = host.name(), vm = %vm.name, volume = %volume_id, "volume attached");
    ok(json!({ "local_index": local_index, "volume_id": volume_id }))
}

/// `POST /volume/detach {"local_index", "volume_id"}`: unplugs a volume
/// from a VM. A running VM keeps its boot volume (the first bootable one):
/// the guest would lose its root disk.
async fn volume_detach(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let VolumeAttachBody {
        local_index,
        volume_id,
    } = parse(&body)?;
    let mut state = host.state();
    let boot = state
        .vms
        .iter()
        .find(|vm| vm.id == local_index)
        .and_then(|vm| {
            vm.volume_ids
                .iter()
                .find(|id| state.volume(id).is_some_and(|v| v.bootable && !v.cloudinit))
                .cloned()
        });
    let i = vm_at(&state, &local_index)?;
    let vm = &mut state.vms[i];
    let Some(at) = vm.volume_ids.iter().position(|id| *id == volume_id) else {
        return Err(ApiError::not_found(format!(
            "[VolumeNotAttached] volume {volume_id} is not attached to VM {}",
            vm.name
        )));
    };
    if vm.power != Power::Off && boot.as_deref() == Some(volume_id.as_str()) {
        return Err(ApiError::bad_request(format!(
            "[VmNotStopped] volume {volume_id} is VM {}'s boot volume; stop the VM first",
            vm.name
        )));
    }
    vm.volume_ids.remove(at);
    tracing::info!(host = host.name(), vm = %vm.name, volume = %volume_id, "volume detached");
    ok(json!({ "local_index": local_index, "volume_id": volume_id }))
}

/// `POST /network/attach {"local_index", "network_uid", "mac"?}`: plugs a
/// NIC on one of this host's networks into a VM, running or off (as
/// libvirt hot-plugs an interface). A second NIC on the same network is
/// refused (409). The guest's address does not change: a new NIC brings
/// no new primary address.
async fn network_attach(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let NetworkAttachBody {
        local_index,
        network,
    } = parse(&body)?;
    let network_uid = network.network_uid;
    let mut state = host.state();
    if !state.networks.iter().any(|n| n.id == network_uid) {
        return Err(ApiError::not_found(format!(
            "network {network_uid} does not exist"
        )));
    }
    let i = vm_at(&state, &local_index)?;
    let vm = &mut state.vms[i];
    if vm.network_ids.contains(&network_uid) {
        return Err(ApiError::conflict(format!(
            "[NetworkAlreadyAttached] VM {} is on network {network_uid}",
            vm.name
        )));
    }
    vm.network_ids.push(network_uid.clone());
    tracing::info!(host = host.name(), vm = %vm.name, network = %network_uid, "network attached");
    ok(json!({ "local_index": local_index, "network_uid": network_uid }))
}

/// `POST /network/detach {"local_index", "network_uid"}`: unplugs a VM's
/// NIC on a network. A guest whose address came from that network falls
/// back to one of the host's own block (its default NAT network).
async fn network_detach(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let NetworkAttachBody {
        local_index,
        network,
    } = parse(&body)?;
    let network_uid = network.network_uid;
    let mut state = host.state();
    let i = vm_at(&state, &local_index)?;
    let fallback = (state.vms[i].ip_network.as_deref() == Some(network_uid.as_str()))
        .then(|| host.allocate_ip(&mut state));
    let vm = &mut state.vms[i];
    let Some(at) = vm.network_ids.iter().position(|id| *id == network_uid) else {
        return Err(ApiError::not_found(format!(
            "[NetworkNotAttached] VM {} is not on network {network_uid}",
            vm.name
        )));
    };
    vm.network_ids.remove(at);
    if let Some(ip) = fallback {
        vm.ipv4 = ip;
        vm.ip_network = None;
    }
    tracing::info!(host = host.name(), vm = %vm.name, network = %network_uid, "network detached");
    ok(json!({ "local_index": local_index, "network_uid": network_uid }))
}

async fn status(State(host): State<SimHost>) -> ApiResult {
    let now = host.now();
    let boot = host.boot_time();
    let state = host.state();
    let rows: Vec<VmStatus> = state
        .vms
        .iter()
        .map(|vm| vm_to_wire(&host, &state, vm, now, boot))
        .collect();
    ok(rows)
}

async fn templates() -> ApiResult {
    ok(crate::templates::templates())
}

/// A `/status` element carrying both state forms (`status` and libvirt's
/// `req_json.states`) and the GUI's `req_json.network_config`.
fn vm_to_wire(
    host: &SimHost,
    state: &HostState,
    vm: &VmRec,
    now: Instant,
    boot: Duration,
) -> VmStatus {
    let (vm_state, ipv4) = vm.observe(now, boot);
    let status = match vm_state {
        VmState::Starting => "starting",
        VmState::Running => "running",
        VmState::Stopping => "stopping",
        VmState::Off => "off",
        VmState::Paused => "paused",
        VmState::Unknown(_) => "unknown",
    };
    // libvirt calls a booting domain "running" already.
    let states = if vm.power == Power::Off {
        "shut off"
    } else {
        "running"
    };
    let d = &vm.demand;
    VmStatus {
        unique_id: vm.id.clone(),
        serverurl: Some(host.server_url()),
        target_type: Some("atomos_local_ip".to_owned()),
        status: Some(status.to_owned()),
        network_config: None,
        req_json: ReqJson {
            vm_name: Some(vm.name.clone()),
            slots: Some(d.slots),
            overprovision: Some(d.overprovision),
            allow_smt: Some(d.allow_smt),
            arch: Some(vm.arch.clone()),
            flags: d.flags.clone(),
            // GiB here, unlike the MiB of the request (docs/atomos.md).
            ramsize: Some(d.ram_mib as f64 / 1024.0),
            req_ecc: Some(d.ecc),
            volumes: vm
                .volume_ids
                .iter()
                .filter_map(|id| state.volume(id))
                .map(|v| volume_to_wire(host, v))
                .collect(),
            pcidevs: d
                .pci
                .iter()
                .map(|p| json!({"vendor": p.vendor, "model": p.model, "quantity": p.quantity}))
                .collect(),
            netdevs: vm
                .network_ids
                .iter()
                .filter_map(|id| state.networks.iter().find(|n| &n.id == id))
                .map(|n| json!({"network_uid": n.id, "network_name": n.name}))
                .collect(),
            os: Misc {
                os_family: d.os_family.clone(),
                os_flavour: d.os_flavour.clone(),
            },
            // The GUI parses "M/D/YYYY, HH:MM:SS" (UTC).
            creation_date: Some(vm.created.format("%-m/%-d/%Y, %H:%M:%S").to_string()),
            states: Some(states.to_owned()),
            network_config: Some(NetworkConfig {
                ipv4: ipv4.map(|ip| ip.to_string()),
                ..Default::default()
            }),
            mesos: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_names_follow_the_gui_rule() {
        assert!(valid_vm_name("vm-0a1B"));
        assert!(!valid_vm_name(""));
        assert!(!valid_vm_name("my_vm"));
        assert!(!valid_vm_name("a b"));
        assert!(!valid_vm_name("é"));
    }
}
