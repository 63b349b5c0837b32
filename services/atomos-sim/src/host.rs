//! One simulated host: its VMs, volumes, networks, port forwards, backups and console tunnels (the records are [`crate::state`]'s), capacity accounting, DHCP leases, lazy boot, guest ports, writes to volumes, going down and up.

use crate::config::HostConfig;
use crate::console::Consoles;
use crate::faults::Faults;
use crate::forward::{Forwards, Listening, Socket};
use crate::state::{
    Demand, HostState, Inventory, SimNetwork, SimPortForward, SimVm, SimVolume, lock,
};
use crate::store::Store;
use atomos_driver::{PciDevice, Target, VmState};
use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Handle on one simulated host. Cheap to clone.
#[derive(Clone)]
pub struct SimHost {
    shared: Arc<HostShared>,
}

struct HostShared {
    config: HostConfig,
    target: Target,
    /// Position in the fleet; picks the host's made-up address block.
    index: usize,
    state: Arc<Mutex<HostState>>,
    /// Where the state is written through, when the fleet has a state directory.
    store: Option<Arc<Store>>,
    /// Set by [`SimHost::halt`]: the simulator stopped, no guest phones home.
    halted: AtomicBool,
    faults: Faults,
    boot_time: Mutex<Duration>,
    /// How far this host's clock runs ahead of the machine's: moved only by
    /// [`SimHost::advance_clock`], so a test sees a boot finish without
    /// waiting for it.
    ahead: Mutex<Duration>,
    /// Bumped when a VM powers on or the boot time changes, so background
    /// tasks waiting for a boot recompute their deadline.
    wake: watch::Sender<()>,
    /// One bit per daemon whose listener is open.
    listening: watch::Sender<u8>,
    /// Port forwards at work and what stands in for guest ports.
    forwards: Forwards,
    /// Open console tunnels.
    consoles: Consoles,
}

/// A handle that does not keep the host alive (for background tasks).
#[derive(Clone)]
pub(crate) struct WeakHost(Weak<HostShared>);

impl WeakHost {
    pub fn upgrade(&self) -> Option<SimHost> {
        self.0.upgrade().map(|shared| SimHost { shared })
    }
}

/// Why [`SimHost::write_volume`] wrote nothing.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteRefused {
    #[error("no volume named {0:?}")]
    NoVolume(String),
    #[error("volume {0} is a cloud-init ISO, read-only")]
    ReadOnly(String),
}

/// Bits of [`HostShared::listening`] when all four daemons listen.
const ALL_LISTENING: u8 = 0b1111;

/// How long [`SimHost::take_down`] and [`SimHost::bring_up`] wait for the listeners.
const LISTENER_WAIT: Duration = Duration::from_secs(5);

impl std::fmt::Debug for SimHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimHost")
            .field("target", &self.shared.target)
            .finish_non_exhaustive()
    }
}

impl SimHost {
    /// A host holding `state` (a fresh one's, or what its state file held),
    /// writing it through to a file in `state_dir` when given.
    pub(crate) fn new(
        config: HostConfig,
        target: Target,
        index: usize,
        boot: Duration,
        state: HostState,
        state_dir: Option<&std::path::Path>,
    ) -> Self {
        let state = Arc::new(Mutex::new(state));
        let store = state_dir.map(|dir| Arc::new(Store::new(dir, &config.name, state.clone())));
        let guests_changed = watch::channel(()).0;
        SimHost {
            shared: Arc::new(HostShared {
                faults: Faults::new(
                    state.clone(),
                    &config.name,
                    store.clone(),
                    guests_changed.clone(),
                ),
                forwards: Forwards::new(guests_changed),
                consoles: Consoles::new(),
                config,
                target,
                index,
                state,
                store,
                halted: AtomicBool::new(false),
                boot_time: Mutex::new(boot),
                ahead: Mutex::new(Duration::ZERO),
                wake: watch::channel(()).0,
                listening: watch::channel(0).0,
            }),
        }
    }

    pub(crate) fn downgrade(&self) -> WeakHost {
        WeakHost(Arc::downgrade(&self.shared))
    }

    /// Cancels the guests' pending phone-home calls: the simulator stops.
    /// The calls stay in the state, so a simulator started on the same state
    /// directory makes them.
    pub(crate) fn halt(&self) {
        self.shared.halted.store(true, Ordering::SeqCst);
        self.wake();
    }

    pub(crate) fn is_halted(&self) -> bool {
        self.shared.halted.load(Ordering::SeqCst)
    }

    /// Writes the state through to the host's state file (nothing without a
    /// state directory); done when the file is on disk. The write runs to
    /// its end even when the caller is dropped.
    pub(crate) async fn save(&self) -> std::io::Result<()> {
        let Some(store) = self.shared.store.clone() else {
            return Ok(());
        };
        tokio::task::spawn_blocking(move || store.save())
            .await
            .map_err(std::io::Error::other)?
    }

    /// The host's state file, when the fleet has a state directory.
    pub fn state_file(&self) -> Option<&std::path::Path> {
        self.shared.store.as_deref().map(Store::path)
    }

    /// Tells background tasks that boot deadlines may have moved.
    pub(crate) fn wake(&self) {
        self.shared.wake.send_replace(());
    }

    pub(crate) fn wake_watch(&self) -> watch::Receiver<()> {
        self.shared.wake.subscribe()
    }

    /// Records whether the listener of daemon number `bit` is open.
    pub(crate) fn set_listening(&self, bit: u8, open: bool) {
        self.shared.listening.send_modify(|mask| {
            if open {
                *mask |= 1 << bit;
            } else {
                *mask &= !(1 << bit);
            }
        });
    }

    /// Whether all four daemons accept connections now.
    pub fn is_listening(&self) -> bool {
        *self.shared.listening.borrow() == ALL_LISTENING
    }

    async fn wait_listening(&self, want: u8) -> bool {
        let mut rx = self.shared.listening.subscribe();
        tokio::time::timeout(LISTENER_WAIT, rx.wait_for(|mask| *mask == want))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Waits until every port forward's listener is open (`open`) or none
    /// is; the first that is not in time is the error: its label and state.
    async fn wait_forwards(&self, open: bool) -> Result<(), (String, Listening)> {
        let deadline = tokio::time::Instant::now() + LISTENER_WAIT;
        for (label, mut listening) in self.forwards().listening() {
            let in_time = tokio::time::timeout_at(
                deadline,
                listening.wait_for(|l| (*l == Listening::Open) == open),
            )
            .await
            // An error inside: the forward was deleted meanwhile.
            .is_ok();
            if !in_time {
                let state = listening.borrow().clone();
                return Err((label, state));
            }
        }
        Ok(())
    }

    /// Takes the host down ([`Faults::set_down`]) and waits until its four
    /// daemons and its port forwards refuse connections. VMs keep running.
    pub async fn take_down(&self) {
        self.faults().set_down(true);
        if !self.wait_listening(0).await {
            tracing::warn!(host = self.name(), "listeners still open after going down");
        }
        if let Err((label, _)) = self.wait_forwards(false).await {
            tracing::warn!(host = self.name(), forward = %label, "port forward still open after going down");
        }
    }

    /// Brings the host back up on the same ports and waits until its four
    /// daemons and its port forwards accept connections again; fails when a
    /// port stays taken (a forward keeps trying to bind it).
    pub async fn bring_up(&self) -> std::io::Result<()> {
        self.faults().set_down(false);
        let timed_out = |what: String| {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "host {}: {what} not listening again within {LISTENER_WAIT:?}",
                    self.name()
                ),
            )
        };
        if !self.wait_listening(ALL_LISTENING).await {
            return Err(timed_out(format!("daemons on {:?}", self.target().ports)));
        }
        self.wait_forwards(true).await.map_err(|(label, state)| {
            let why = match state {
                Listening::Failed(why) => format!(" ({why})"),
                Listening::Open | Listening::Closed => String::new(),
            };
            timed_out(format!("port forward {label}{why}"))
        })
    }

    pub(crate) fn forwards(&self) -> &Forwards {
        &self.shared.forwards
    }

    pub(crate) fn consoles(&self) -> &Consoles {
        &self.shared.consoles
    }

    /// Stops every console tunnel for good; their tasks, aborted.
    pub(crate) fn close_consoles(&self) -> Vec<tokio::task::JoinHandle<()>> {
        self.consoles().close()
    }

    /// Starts serving `forward`, on `socket` when the port is bound already
    /// (else the forward binds it, and keeps trying).
    pub(crate) fn start_forward(&self, forward: SimPortForward, socket: Option<Socket>) -> bool {
        self.forwards().start(self, forward, socket)
    }

    /// Starts every port forward of the state (one read from a state file):
    /// a port that cannot be bound now is tried again in the background.
    pub(crate) fn start_forwards(&self) {
        let forwards = self.state().port_forwards.clone();
        for forward in forwards {
            let socket = match crate::forward::bind(&forward.protocol, forward.port) {
                Ok(socket) => Some(socket),
                Err(e) => {
                    tracing::warn!(host = self.name(), forward = %forward.id, port = %forward.label(),
                        error = %e, "port forward cannot listen yet");
                    None
                }
            };
            self.start_forward(forward, socket);
        }
    }

    /// Stops every port forward for good; their tasks, done once the ports
    /// are closed.
    pub(crate) fn close_forwards(&self) -> Vec<tokio::task::JoinHandle<()>> {
        self.forwards().close()
    }

    /// The id of the VM named `vm`, or with that id.
    fn vm_id(&self, vm: &str) -> Option<String> {
        self.state()
            .vms
            .iter()
            .find(|v| v.name == vm || v.id == vm)
            .map(|v| v.id.clone())
    }

    /// Stands `upstream`, a real address, in for port `port` of the guest
    /// of VM `vm` (its name or `uniqueID`): the host's port forwards to that
    /// port reach it while the VM runs. Replaces what stood in before (whose
    /// relayed connections are closed). Kept while the VM exists, not in the
    /// state file.
    pub fn serve_guest_port(
        &self,
        vm: &str,
        port: u16,
        upstream: SocketAddr,
    ) -> Result<(), String> {
        if port == 0 {
            return Err("port must be between 1 and 65535".to_owned());
        }
        let id = self
            .vm_id(vm)
            .ok_or_else(|| format!("no VM named {vm:?}"))?;
        tracing::info!(host = self.name(), vm = %id, port, %upstream, "guest port served");
        self.forwards().serve_guest(id, port, upstream);
        Ok(())
    }

    /// Stops what [`SimHost::serve_guest_port`] stood in for port `port` of
    /// VM `vm`: connections through forwards to it are closed, new ones
    /// closed at once.
    pub fn stop_serving_guest_port(&self, vm: &str, port: u16) -> Result<(), String> {
        let id = self
            .vm_id(vm)
            .ok_or_else(|| format!("no VM named {vm:?}"))?;
        if self.forwards().stop_guest(&id, port) {
            Ok(())
        } else {
            Err(format!("nothing serves port {port} of VM {vm:?}"))
        }
    }

    /// Where a forward to port `port` of VM `vm_id` leads now: the address
    /// standing in for it, while the VM runs.
    pub(crate) fn guest_upstream(&self, vm_id: &str, port: u16) -> Option<SocketAddr> {
        let boot = self.boot_time();
        let now = self.now();
        let running = self
            .state()
            .vms
            .iter()
            .find(|vm| vm.id == vm_id)
            .is_some_and(|vm| vm.observe(now, boot).0 == VmState::Running);
        if !running {
            return None;
        }
        self.forwards().guest(vm_id, port)
    }

    /// A VM stopped, rebooted or went away: relays to guests that are no
    /// longer reachable are closed, and the guest ports of VMs gone are
    /// forgotten. Called without the state locked.
    pub(crate) fn guests_changed(&self) {
        let ids: HashSet<String> = self.state().vms.iter().map(|vm| vm.id.clone()).collect();
        self.forwards().retain_guests(|id| ids.contains(id));
        self.forwards().notify();
    }

    pub fn name(&self) -> &str {
        &self.shared.config.name
    }

    pub fn config(&self) -> &HostConfig {
        &self.shared.config
    }

    /// Where this host's daemons listen.
    pub fn target(&self) -> &Target {
        &self.shared.target
    }

    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// Applies to VMs already booting too: boot progress is computed on read.
    pub fn set_boot_time(&self, boot_time: Duration) {
        *lock(&self.shared.boot_time) = boot_time;
        self.wake();
    }

    pub fn boot_time(&self) -> Duration {
        *lock(&self.shared.boot_time)
    }

    /// The host's clock: every boot, reboot and guest's phone-home is timed
    /// by it.
    pub fn now(&self) -> Instant {
        Instant::now() + *lock(&self.shared.ahead)
    }

    /// Moves the host's clock `by` ahead (a test's time machine): a VM
    /// booting finishes as if `by` had passed, and its phone-home is made.
    pub fn advance_clock(&self, by: Duration) {
        *lock(&self.shared.ahead) += by;
        self.wake();
    }

    /// The host's clock as a date: the machine's, moved ahead as much as
    /// [`SimHost::now`] by [`SimHost::advance_clock`]. Backups are dated by
    /// it.
    pub fn wall_clock(&self) -> chrono::DateTime<chrono::Utc> {
        crate::state::to_wall(self.now())
    }

    /// Writes `data` over volume `volume` (its id or name), as a guest (or
    /// anything else with the disk) would: its content becomes
    /// [`crate::content_hash`]`(data)`, which the new content is. A test's
    /// way to change a disk's bytes, so that copies taken before (clones,
    /// backups) can be told apart from it. With a state directory the write
    /// is on disk when this returns (a blocking write).
    pub fn write_volume(&self, volume: &str, data: &[u8]) -> Result<String, String> {
        let content = self
            .write_volume_unsaved(volume, data)
            .map_err(|e| e.to_string())?;
        if let Some(store) = &self.shared.store
            && let Err(e) = store.save()
        {
            tracing::error!(host = self.name(), error = %e, "the host's state could not be saved");
        }
        Ok(content)
    }

    /// [`SimHost::write_volume`] without writing the state file (the caller does).
    pub(crate) fn write_volume_unsaved(
        &self,
        volume: &str,
        data: &[u8],
    ) -> Result<String, WriteRefused> {
        let mut state = self.state();
        let v = state
            .volumes
            .iter_mut()
            .find(|v| v.id == volume || v.name == volume)
            .ok_or_else(|| WriteRefused::NoVolume(volume.to_owned()))?;
        if v.cloudinit {
            return Err(WriteRefused::ReadOnly(v.id.clone()));
        }
        v.content = crate::state::content_hash(data);
        tracing::info!(host = self.name(), volume = %v.id, content = %v.content, "volume written");
        Ok(v.content.clone())
    }

    /// How many times each VM name was registered on this host, VMs since
    /// unregistered included: a side effect made twice shows as a 2.
    pub fn registrations(&self) -> std::collections::BTreeMap<String, u32> {
        self.state().registrations.clone()
    }

    pub fn inventory(&self) -> Inventory {
        let boot = self.boot_time();
        let now = self.now();
        // Before the state's lock: a tunnel's task takes that lock alone.
        let consoles = self.consoles().list();
        let sessions = |vm: &str| {
            consoles
                .iter()
                .filter(|c| c.vm_id == vm)
                .map(|c| c.sessions)
                .sum()
        };
        let state = self.state();
        Inventory {
            vms: state
                .vms
                .iter()
                .map(|vm| {
                    let (state, ipv4) = vm.observe(now, boot);
                    SimVm {
                        id: vm.id.clone(),
                        name: vm.name.clone(),
                        state,
                        ipv4,
                        slots: vm.demand.slots,
                        overprovision: vm.demand.overprovision,
                        ram_mib: vm.demand.ram_mib,
                        pci: vm.demand.pci.clone(),
                        volume_ids: vm.volume_ids.clone(),
                        network_ids: vm.network_ids.clone(),
                        crashed: vm.crashed,
                        phone_home_url: vm.phone_home_url.clone(),
                        phoned_home: vm.phoned_home,
                        console_sessions: sessions(&vm.id),
                    }
                })
                .collect(),
            volumes: state
                .volumes
                .iter()
                .map(|v| SimVolume {
                    attached_to: attached_to(&state, &v.id),
                    ..v.clone()
                })
                .collect(),
            networks: state.networks.clone(),
            port_forwards: state.port_forwards.clone(),
            backups: state.backups.clone(),
            consoles: consoles.clone(),
        }
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, HostState> {
        lock(&self.shared.state)
    }

    /// `https://10.<n>.0.1`: the host's made-up management address.
    pub(crate) fn server_url(&self) -> String {
        format!("https://10.{}.0.1", self.octet())
    }

    fn octet(&self) -> u8 {
        // 10.1.x.x .. 10.250.x.x; fleets larger than that share blocks,
        // which only matters to someone reading the addresses.
        (self.shared.index % 250 + 1) as u8
    }

    /// The next guest address in this host's block, `10.<n>.<hi>.<lo>`.
    pub(crate) fn allocate_ip(&self, state: &mut HostState) -> Ipv4Addr {
        let n = state.next_ip;
        state.next_ip = state.next_ip.wrapping_add(1);
        let n = n % (250 * 250);
        Ipv4Addr::new(10, self.octet(), (n / 250) as u8, (n % 250 + 2) as u8)
    }

    /// A DHCP lease on `network`: the first address of its range that is
    /// neither the gateway nor held by a VM. `Ok(None)` when the network has
    /// no DHCP; an error when the range is used up.
    pub(crate) fn dhcp_lease(
        state: &HostState,
        network: &SimNetwork,
    ) -> Result<Option<Ipv4Addr>, String> {
        let range = network
            .dhcp_start
            .as_deref()
            .zip(network.dhcp_end.as_deref())
            .and_then(|(s, e)| Some((s.parse::<Ipv4Addr>().ok()?, e.parse::<Ipv4Addr>().ok()?)));
        let Some((start, end)) = range else {
            return Ok(None);
        };
        let gateway = network
            .cidr
            .split('/')
            .next()
            .and_then(|a| a.parse::<Ipv4Addr>().ok());
        let held: HashSet<Ipv4Addr> = state
            .vms
            .iter()
            .filter(|vm| vm.ip_network.as_deref() == Some(network.id.as_str()))
            .map(|vm| vm.ipv4)
            .collect();
        // Ends after at most held.len() + 2 steps: every other address is free.
        let (mut n, end) = (u32::from(start), u32::from(end));
        while n <= end {
            let ip = Ipv4Addr::from(n);
            if Some(ip) != gateway && !held.contains(&ip) {
                return Ok(Some(ip));
            }
            match n.checked_add(1) {
                Some(next) => n = next,
                None => break,
            }
        }
        Err(format!(
            "the DHCP range {start}-{end} of network {} is exhausted",
            network.name
        ))
    }

    /// Checks that `demand` fits next to what already runs; returns the arch
    /// chosen for it, or why it does not fit.
    pub(crate) fn fit(&self, state: &HostState, demand: &Demand) -> Result<String, String> {
        let cfg = &self.shared.config;
        if self.faults().is_full() {
            return Err("host is full".into());
        }
        if let Some(min) = demand.min_frequency_ghz
            && min > cfg.max_frequency_ghz + 1e-9
        {
            return Err(format!(
                "needs at least {min} GHz, the CPUs run at most {} GHz",
                cfg.max_frequency_ghz
            ));
        }
        let has = |list: &[String], want: &str| list.iter().any(|x| x.eq_ignore_ascii_case(want));
        let arch = if demand.archs.is_empty() {
            cfg.archs
                .first()
                .cloned()
                .unwrap_or_else(|| "X86_64".to_owned())
        } else {
            demand
                .archs
                .iter()
                .find(|a| has(&cfg.archs, a))
                .cloned()
                .ok_or_else(|| {
                    format!(
                        "none of the archs {:?} is available (host has {:?})",
                        demand.archs, cfg.archs
                    )
                })?
        };
        let missing: Vec<&String> = demand
            .flags
            .iter()
            .filter(|f| !has(&cfg.flags, f))
            .collect();
        if !missing.is_empty() {
            return Err(format!("CPU flags {missing:?} are not available"));
        }
        if demand.ecc && !cfg.ecc {
            return Err("ECC memory is not available".into());
        }
        for want in &demand.pci {
            let total: u32 = cfg
                .gpus
                .iter()
                .filter(|g| same_device(g, want))
                .map(|g| g.quantity)
                .sum();
            let used: u32 = state
                .vms
                .iter()
                .flat_map(|vm| vm.demand.pci.iter())
                .filter(|p| same_device(p, want))
                .map(|p| p.quantity)
                .sum();
            let asked: u32 = demand
                .pci
                .iter()
                .filter(|p| same_device(p, want))
                .map(|p| p.quantity)
                .sum();
            if used.saturating_add(asked) > total {
                return Err(format!(
                    "pci {}:{} x{asked} requested, {} free",
                    want.vendor,
                    want.model,
                    total.saturating_sub(used)
                ));
            }
        }
        let used_cores: f64 = state.vms.iter().map(|vm| vm.demand.cores()).sum();
        let free_cores = f64::from(cfg.cores) - used_cores;
        // Small epsilon: sums of fractions like 1/3 must not refuse an exact fit.
        if demand.cores() > free_cores + 1e-9 {
            return Err(format!(
                "needs {:.2} cores, {:.2} free",
                demand.cores(),
                free_cores
            ));
        }
        let used_ram: u64 = state.vms.iter().map(|vm| vm.demand.ram_mib).sum();
        let free_ram = cfg.ram_mib.saturating_sub(used_ram);
        if demand.ram_mib > free_ram {
            return Err(format!(
                "needs {} MiB of RAM, {free_ram} MiB free",
                demand.ram_mib
            ));
        }
        Ok(arch)
    }

    /// Checks that a new volume of `size_gb` fits on the disk.
    pub(crate) fn fit_disk(&self, state: &HostState, size_gb: f64) -> Result<(), String> {
        if self.faults().is_full() {
            return Err("host is full".into());
        }
        let free = self.shared.config.disk_gb as f64 - state.used_disk_gb();
        if size_gb > free + 1e-9 {
            return Err(format!("{size_gb} GB requested, {free:.1} GB free"));
        }
        Ok(())
    }

    /// Hourly price of `demand` on this host: vCPUs, RAM GiB and GPUs.
    pub(crate) fn price_hour(&self, demand: &Demand) -> f64 {
        let cfg = &self.shared.config;
        let hour = f64::from(demand.slots) * cfg.price_core_hour
            + demand.ram_mib as f64 / 1024.0 * cfg.price_gib_ram_hour
            + f64::from(demand.gpu_count()) * cfg.price_gpu_hour;
        // Quotes are money: keep them to a tenth of a cent-hundredth.
        (hour * 10_000.0).round() / 10_000.0
    }
}

fn same_device(a: &PciDevice, b: &PciDevice) -> bool {
    a.vendor.eq_ignore_ascii_case(&b.vendor) && a.model.eq_ignore_ascii_case(&b.model)
}

fn attached_to(state: &HostState, volume_id: &str) -> Vec<String> {
    state
        .vms
        .iter()
        .filter(|vm| vm.volume_ids.iter().any(|v| v == volume_id))
        .map(|vm| vm.id.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::dev_hosts;
    use crate::state::{Power, VmRec};
    use atomos_driver::Ports;
    use atomos_driver::VmState;
    use atomos_driver::schema::compute::SpecFile;
    use atomos_driver::schema::{PciEntry, PciObject};

    fn host() -> SimHost {
        let cfg = HostConfig {
            cores: 4,
            ram_mib: 8192,
            disk_gb: 100,
            ..dev_hosts()[0].clone()
        };
        let target = Target {
            name: cfg.name.clone(),
            host: "127.0.0.1".into(),
            ports: Ports::default(),
            provider: cfg.provider.clone(),
            region: cfg.region.clone(),
            continent: cfg.continent.clone(),
        };
        SimHost::new(
            cfg,
            target,
            0,
            Duration::from_millis(100),
            HostState::default(),
            None,
        )
    }

    fn demand(slots: u32, overprovision: u32, ram_mib: u64) -> Demand {
        Demand::from_wire(SpecFile {
            slots,
            overprovision,
            ramsize: ram_mib,
            ..Default::default()
        })
        .unwrap()
    }

    fn place(h: &SimHost, name: &str, d: Demand) {
        let mut s = h.state();
        let arch = h.fit(&s, &d).unwrap();
        let ipv4 = h.allocate_ip(&mut s);
        s.vms.push(VmRec {
            id: name.into(),
            name: name.into(),
            demand: d,
            arch,
            volume_ids: vec![],
            network_ids: vec![],
            created: chrono::Utc::now(),
            power: Power::on(h.now()),
            ipv4,
            ip_network: None,
            crashed: false,
            phone_home_url: None,
            phone_home: None,
            phoned_home: false,
        });
    }

    #[test]
    fn overprovision_divides_cores() {
        let h = host();
        place(&h, "a", demand(4, 2, 1024));
        place(&h, "b", demand(4, 2, 1024));
        let err = h.fit(&h.state(), &demand(1, 1, 1024)).unwrap_err();
        assert!(err.contains("cores"), "{err}");
        // Three thirds of a core fit exactly.
        let h = host();
        for n in ["a", "b", "c"] {
            place(&h, n, demand(1, 3, 10));
        }
        assert!(h.fit(&h.state(), &demand(3, 1, 10)).is_ok());
    }

    #[test]
    fn ram_arch_flags_ecc_and_gpus_are_checked() {
        let h = host();
        assert!(
            h.fit(&h.state(), &demand(1, 1, 8193))
                .unwrap_err()
                .contains("RAM")
        );
        let mut d = demand(1, 1, 512);
        d.archs = vec!["ARM_8".into()];
        assert!(h.fit(&h.state(), &d).is_err());
        d.archs = vec!["ARM_8".into(), "x86_64".into()];
        assert_eq!(h.fit(&h.state(), &d).unwrap(), "x86_64");
        d.flags = vec!["avx512f".into()];
        assert!(h.fit(&h.state(), &d).unwrap_err().contains("flags"));
        d.flags = vec!["AVX2".into()];
        d.ecc = true;
        assert!(h.fit(&h.state(), &d).is_ok(), "ovh-gra-1 has ECC");
        let gpus = |q| {
            Demand::from_wire(SpecFile {
                slots: 1,
                ramsize: 512,
                pci: vec![
                    PciEntry::Text("10de:1bb1".into()),
                    PciEntry::Object(PciObject {
                        vendor: "10DE".into(),
                        model: "1BB1".into(),
                        quantity: Some(q),
                    }),
                ],
                ..Default::default()
            })
            .unwrap()
        };
        place(&h, "gpu", gpus(2));
        assert!(
            h.fit(&h.state(), &gpus(1)).unwrap_err().contains("pci"),
            "3 used + 2 > 4"
        );
    }

    #[test]
    fn boot_is_lazy_and_addresses_are_per_host() {
        let h = host();
        place(&h, "a", demand(1, 1, 512));
        let s = h.state();
        let vm = &s.vms[0];
        let since = match vm.power {
            Power::On { since, .. } => since,
            Power::Off => unreachable!(),
        };
        assert_eq!(
            vm.observe(since, Duration::from_millis(100)),
            (VmState::Starting, None)
        );
        let later = since + Duration::from_millis(100);
        assert_eq!(
            vm.observe(later, Duration::from_millis(100)),
            (VmState::Running, Some(Ipv4Addr::new(10, 1, 0, 2)))
        );
        // A reboot takes a quarter of a boot.
        let mut rebooted = vm.clone();
        rebooted.power = Power::On {
            since,
            reboot: true,
        };
        let quarter = since + Duration::from_millis(25);
        assert_eq!(
            rebooted.observe(quarter, Duration::from_millis(100)).0,
            VmState::Running
        );
        assert_eq!(
            rebooted.observe(since, Duration::from_millis(100)).0,
            VmState::Starting
        );
    }

    #[test]
    fn power_is_saved_as_wall_clock_time_and_read_back_to_the_same_instant() {
        let now = Instant::now();
        let mut walls = Vec::new();
        for at in [
            now - Duration::from_millis(1500),
            now,
            now + Duration::from_secs(3),
        ] {
            let power = Power::On {
                since: at,
                reboot: true,
            };
            let json = serde_json::to_value(power).unwrap();
            let wall: chrono::DateTime<chrono::Utc> =
                serde_json::from_value(json["on"]["since"].clone()).unwrap();
            walls.push(wall);
            assert_eq!(serde_json::from_value::<Power>(json).unwrap(), power);
        }
        assert_eq!(walls[1] - walls[0], chrono::TimeDelta::milliseconds(1500));
        assert_eq!(walls[2] - walls[1], chrono::TimeDelta::seconds(3));
        let off = serde_json::to_value(Power::Off).unwrap();
        assert_eq!(off, "off");
        assert_eq!(serde_json::from_value::<Power>(off).unwrap(), Power::Off);
        // Older than the monotonic clock reaches: still long ago.
        let ancient: Power = serde_json::from_value(
            serde_json::json!({"on": {"since": "1990-01-01T00:00:00Z", "reboot": false}}),
        )
        .unwrap();
        assert!(matches!(ancient, Power::On { since, .. } if since <= now));
    }

    #[test]
    fn frequency_is_a_ceiling() {
        let h = host();
        let mut d = demand(1, 1, 512);
        d.min_frequency_ghz = Some(3.7);
        assert!(h.fit(&h.state(), &d).is_ok(), "ovh-gra-1 reaches 3.7 GHz");
        d.min_frequency_ghz = Some(3.8);
        assert!(h.fit(&h.state(), &d).unwrap_err().contains("GHz"));
        for bad in [f64::NAN, -1.0, f64::INFINITY] {
            let spec = SpecFile {
                slots: 1,
                ramsize: 1,
                min_frequency: Some(bad),
                ..Default::default()
            };
            assert!(Demand::from_wire(spec).is_err(), "{bad}");
        }
        let zero = SpecFile {
            slots: 1,
            ramsize: 1,
            min_frequency: Some(0.0),
            ..Default::default()
        };
        assert_eq!(Demand::from_wire(zero).unwrap().min_frequency_ghz, None);
    }

    #[test]
    fn dhcp_leases_are_first_free_and_skip_the_gateway() {
        let h = host();
        let net = SimNetwork {
            id: "n".into(),
            name: "lan".into(),
            cidr: "192.168.5.1/24".into(),
            mode: "nat".into(),
            dhcp_start: Some("192.168.5.1".into()),
            dhcp_end: Some("192.168.5.3".into()),
        };
        let lease = |s: &HostState| SimHost::dhcp_lease(s, &net);
        let mut s = h.state();
        assert_eq!(lease(&s), Ok(Some(Ipv4Addr::new(192, 168, 5, 2))));
        let vm = |ip: [u8; 4], network: &str| VmRec {
            id: format!("{ip:?}"),
            name: format!("{ip:?}"),
            demand: demand(1, 1, 1),
            arch: "X86_64".into(),
            volume_ids: vec![],
            network_ids: vec![network.into()],
            created: chrono::Utc::now(),
            power: Power::Off,
            ipv4: Ipv4Addr::from(ip),
            ip_network: Some(network.into()),
            crashed: false,
            phone_home_url: None,
            phone_home: None,
            phoned_home: false,
        };
        s.vms.push(vm([192, 168, 5, 2], "n"));
        // The same address on another network does not count.
        s.vms.push(vm([192, 168, 5, 3], "other"));
        assert_eq!(lease(&s), Ok(Some(Ipv4Addr::new(192, 168, 5, 3))));
        s.vms.push(vm([192, 168, 5, 3], "n"));
        assert!(lease(&s).unwrap_err().contains("exhausted"));
        s.vms.remove(0);
        assert_eq!(lease(&s), Ok(Some(Ipv4Addr::new(192, 168, 5, 2))));
        let top = SimNetwork {
            dhcp_start: Some("255.255.255.255".into()),
            dhcp_end: Some("255.255.255.255".into()),
            ..net.clone()
        };
        assert!(SimHost::dhcp_lease(&s, &top).unwrap().is_some());
        let no_dhcp = SimNetwork {
            dhcp_start: None,
            ..net.clone()
        };
        assert_eq!(SimHost::dhcp_lease(&s, &no_dhcp), Ok(None));
    }

    #[test]
    fn demands_are_validated_and_priced() {
        assert!(
            Demand::from_wire(SpecFile {
                ramsize: 1,
                ..Default::default()
            })
            .is_err()
        );
        assert!(
            Demand::from_wire(SpecFile {
                slots: 1,
                ..Default::default()
            })
            .is_err()
        );
        let d = demand(2, 0, 2048);
        assert_eq!(d.overprovision, 1);
        let h = host();
        // 2 × 0.011 + 2 × 0.0042 on the ovh prices.
        assert_eq!(h.price_hour(&d), 0.0304);
    }

    #[test]
    fn disk_and_full_host() {
        let h = host();
        assert!(h.fit_disk(&h.state(), 100.0).is_ok());
        assert!(h.fit_disk(&h.state(), 100.5).is_err());
        h.faults().fill_host(true);
        assert!(h.fit_disk(&h.state(), 1.0).is_err());
        assert!(h.fit(&h.state(), &demand(1, 1, 1)).is_err());
        assert!(!h.faults().lose_vm("nope"));
    }
}
