//! A simulator of Elemento's AtomOS daemons speaking their HTTP protocol.
//!
//! [`start`] serves a fleet of simulated hosts, each with its own four
//! daemons (compute, storage, network, auth) on ephemeral ports, so tests and
//! dev setups drive it through the real [`atomos_driver::AtomosClient`].
//! Hosts keep VMs, volumes, networks, port forwards and VM backups in
//! memory, account capacity (backups take disk like volumes), boot VMs
//! after a configurable delay, hand out addresses from their networks' DHCP
//! ranges, phone home for guests whose cloud-init asks to, and accept
//! injected [`Faults`]. A control endpoint ([`Simulator::control_addr`])
//! lists the inventory, sets faults, serves guest ports and writes to
//! volumes ([`SimHost::write_volume`]) over HTTP.
//!
//! Each running VM has a console for real, on loopback: the compute
//! daemon's `porttunnel/vncWebSocket` opens a tunnel, a WebSocket on
//! `127.0.0.1:<fresh port>` whose binary frames carry the RFB (VNC)
//! protocol of a screen showing the VM's name and power state
//! ([`console_screen`]); stopping the tunnel or the VM closes its sessions,
//! which the inventory counts.
//!
//! Port forwards forward for real, on loopback: each listens on
//! `127.0.0.1:<port>` (whatever address the daemons bind; hosts of one
//! simulator share it, so two hosts cannot forward the same port) and
//! relays, while the VM runs, to the real address a test stands in for the
//! guest's port ([`SimHost::serve_guest_port`]): simulated guests have no
//! network stack of their own.
//!
//! With [`SimConfig::state`], a directory, each host also keeps its state in
//! `<dir>/<host>.json`, written through (to a temporary file, synced, renamed
//! over the old one) before any change is acknowledged: every daemon request
//! but a GET, a VM crashed or lost by a fault, a guest that phoned home. A
//! simulator started on the same directory, even after `kill -9`, has the
//! same VMs (booting ones keep booting: boots are timed by the wall clock),
//! volumes with their cloud-init files, networks, port forwards (listening
//! again on their ports), backups and pending phone-home calls, with the
//! daemons on new ports. Faults, guest ports and console tunnels are not
//! kept.

mod cloudinit;
mod config;
mod console;
mod control;
mod faults;
mod forward;
mod host;
mod http;
mod listener;
mod multipart;
mod phonehome;
mod rfb;
mod state;
mod store;
mod templates;

pub use config::{HostConfig, SimConfig, dev_hosts};
pub use faults::{ANY_ROUTE, ErrorRate, FailNext, FaultError, FaultSpec, Faults, HangNext};
pub use host::SimHost;
pub use state::{
    Inventory, SimBackup, SimBackupVolume, SimConsole, SimFile, SimNetwork, SimPortForward, SimVm,
    SimVolume, content_hash,
};

/// The VM consoles' screen: its size in pixels, and its two colours (RGB).
pub mod console_screen {
    pub use crate::rfb::{BACKGROUND, HEIGHT, TEXT, WIDTH};
}

use atomos_driver::{Ports, Target};
use axum::response::IntoResponse;
use http::Daemon;
use serde::{Deserialize, Serialize};
use state::lock;
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;

/// A running fleet. Cheap to clone; the servers stop on [`Simulator::shutdown`]
/// or when the last clone is dropped.
#[derive(Clone)]
pub struct Simulator {
    inner: Arc<SimInner>,
}

struct SimInner {
    hosts: Vec<SimHost>,
    servers: Mutex<Servers>,
    control: SocketAddr,
    /// The last seed given to [`Simulator::set_seed`].
    seed: AtomicU64,
}

impl Drop for SimInner {
    /// Port forwards and console tunnels stop with the fleet, even when a
    /// test keeps a host.
    fn drop(&mut self) {
        for host in &self.hosts {
            // Aborted; done soon after, without anyone waiting.
            let _ = host.close_forwards();
            let _ = host.close_consoles();
        }
    }
}

/// One host in [`Simulator::inventory`] and the control endpoint's `GET /inventory`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostInventory {
    pub name: String,
    pub provider: String,
    pub region: String,
    pub continent: String,
    pub target: Target,
    /// Taken down by a fault: its daemons refuse connections.
    pub down: bool,
    /// Refusing every allocation by a fault.
    pub full: bool,
    pub boot_ms: u64,
    #[serde(flatten)]
    pub inventory: Inventory,
}

/// Server tasks, aborted on drop so that neither an early error in [`start`]
/// nor a forgotten simulator leaks listeners.
#[derive(Default)]
struct Servers(Vec<JoinHandle<()>>);

impl Drop for Servers {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

impl std::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("hosts", &self.inner.hosts)
            .finish_non_exhaustive()
    }
}

fn invalid_input(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, message)
}

/// Checks what a hosts file can get wrong before anything listens.
fn check_hosts(hosts: &[HostConfig]) -> std::io::Result<()> {
    let mut names = HashSet::new();
    for h in hosts {
        if h.name.is_empty() || !names.insert(h.name.as_str()) {
            return Err(invalid_input(format!(
                "host names must be unique and non-empty: {:?}",
                h.name
            )));
        }
        if !(h.max_frequency_ghz.is_finite() && h.max_frequency_ghz > 0.0) {
            return Err(invalid_input(format!(
                "host {}: max_frequency_ghz must be a positive number",
                h.name
            )));
        }
        h.faults
            .validate()
            .map_err(|e| invalid_input(format!("host {}: faults: {e}", h.name)))?;
        if !(h.faults.crash_vm.is_empty() && h.faults.lose_vm.is_empty()) {
            return Err(invalid_input(format!(
                "host {}: crash_vm and lose_vm need running VMs; use the control endpoint",
                h.name
            )));
        }
    }
    Ok(())
}

/// The control endpoint's address: loopback of the daemons' address family.
/// What web pages get from the simulated daemons and the control endpoint:
/// nothing (see meson-edge). They listen on loopback in dev mode and tests,
/// where any page the developer opens could otherwise reach them: read the
/// fleet's inventory (cloud-init user-data with cluster keys and tokens)
/// through a rebound DNS name, create or destroy disks behind meson's back,
/// inject faults. On loopback they answer to loopback names only; bound
/// beyond it (a container of the compose stack, dialed by its service
/// name), to any. The protocol's own content types stay as the daemons take
/// them.
fn edge(bind: IpAddr) -> std::io::Result<Arc<meson_edge::Edge>> {
    let names = if bind.is_loopback() {
        Vec::new()
    } else {
        vec!["*".to_owned()]
    };
    let hosts = meson_edge::Hosts::new(bind, &names)
        .map_err(|e| invalid_input(format!("the simulator's names: {e}")))?;
    let mut edge = meson_edge::Edge::new(hosts, Vec::new(), meson_edge::Scope::EveryRequest);
    edge.render = |r| {
        (
            r.status(),
            axum::Json(serde_json::json!({"detail": r.to_string()})),
        )
            .into_response()
    };
    Ok(Arc::new(edge))
}

fn control_bind(bind: IpAddr) -> SocketAddr {
    let ip = match bind {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
    };
    SocketAddr::new(ip, 0)
}

/// Starts every host of `config`, each on four fresh ports of `config.bind`,
/// and the control endpoint on a fresh loopback port. Faults from the hosts'
/// configurations are in force when this returns.
pub async fn start(config: SimConfig) -> std::io::Result<Simulator> {
    check_hosts(&config.hosts)?;
    let mut saved = match config.state.clone() {
        Some(dir) => {
            let names: Vec<String> = config.hosts.iter().map(|h| h.name.clone()).collect();
            tokio::task::spawn_blocking(move || {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                store::load(&dir, &names)
            })
            .await
            .map_err(std::io::Error::other)??
        }
        None => std::collections::HashMap::new(),
    };
    // Clients cannot connect to the unspecified address; hand out loopback.
    let advertised = match config.bind {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    let mut servers = Servers::default();
    let mut hosts = Vec::with_capacity(config.hosts.len());
    for (index, host_config) in config.hosts.into_iter().enumerate() {
        let mut listeners = Vec::with_capacity(Daemon::ALL.len());
        for _ in Daemon::ALL {
            listeners.push(listener::bind(SocketAddr::new(config.bind, 0))?);
        }
        let port = |i: usize| listeners[i].local_addr().map(|a| a.port());
        let ports = Ports {
            compute: port(0)?,
            storage: port(1)?,
            network: port(2)?,
            auth: port(3)?,
        };
        let target = Target {
            name: host_config.name.clone(),
            host: advertised.to_string(),
            ports,
            provider: host_config.provider.clone(),
            region: host_config.region.clone(),
            continent: host_config.continent.clone(),
        };
        let faults = host_config.faults.clone();
        let state = saved.remove(&host_config.name).unwrap_or_default();
        let host = SimHost::new(
            host_config,
            target,
            index,
            config.boot_time,
            state,
            config.state.as_deref(),
        );
        host.faults()
            .apply(&faults)
            .map_err(|e| invalid_input(format!("host {}: faults: {e}", host.name())))?;
        // Forwards from the state file listen again on their ports.
        host.start_forwards();
        let edge = edge(config.bind)?;
        for (bit, (daemon, listener)) in (0u8..).zip(Daemon::ALL.into_iter().zip(listeners)) {
            let app = http::router(daemon, host.clone()).layer(
                axum::middleware::from_fn_with_state(edge.clone(), meson_edge::guard),
            );
            let listener = listener::HostListener::new(host.clone(), bit, listener)?;
            let name = host.name().to_owned();
            servers.0.push(tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::error!(host = %name, ?daemon, error = %e, "simulated daemon stopped");
                }
            }));
        }
        tracing::info!(host = host.name(), ?ports, "simulated host up");
        hosts.push(host);
    }
    let control = tokio::net::TcpListener::bind(control_bind(config.bind)).await?;
    let control_addr = control.local_addr()?;
    let inner = Arc::new(SimInner {
        hosts,
        servers: Mutex::new(servers),
        control: control_addr,
        seed: AtomicU64::new(0),
    });
    let app = control::router(Arc::downgrade(&inner)).layer(axum::middleware::from_fn_with_state(
        edge(control_addr.ip())?,
        meson_edge::guard,
    ));
    lock(&inner.servers).0.push(tokio::spawn(async move {
        if let Err(e) = axum::serve(control, app).await {
            tracing::error!(error = %e, "simulator control endpoint stopped");
        }
    }));
    tracing::info!(addr = %control_addr, "simulator control endpoint up");
    for host in &inner.hosts {
        // Fails early on a state directory that cannot be written.
        host.save().await?;
        // Guests that had not phoned home yet still do once booted.
        let pending: Vec<String> = host
            .state()
            .vms
            .iter()
            .filter(|vm| vm.phone_home.is_some())
            .map(|vm| vm.id.clone())
            .collect();
        for id in pending {
            phonehome::watch(host, id);
        }
        if host.faults().is_down() {
            host.take_down().await;
        }
    }
    Ok(Simulator { inner })
}

impl Simulator {
    /// One target per host, in configuration order.
    pub fn targets(&self) -> Vec<Target> {
        self.inner
            .hosts
            .iter()
            .map(|h| h.target().clone())
            .collect()
    }

    pub fn host(&self, name: &str) -> Option<SimHost> {
        self.inner.hosts.iter().find(|h| h.name() == name).cloned()
    }

    pub fn hosts(&self) -> Vec<SimHost> {
        self.inner.hosts.clone()
    }

    /// Where the control endpoint listens (`GET /inventory`, `/faults/{host}`).
    pub fn control_addr(&self) -> SocketAddr {
        self.inner.control
    }

    /// `http://<control_addr>`.
    pub fn control_url(&self) -> String {
        format!("http://{}", self.inner.control)
    }

    /// Seeds every host's random faults ([`Faults::set_seed`]); each host
    /// mixes in its name, so hosts draw differently from one seed.
    pub fn set_seed(&self, seed: u64) {
        self.inner.seed.store(seed, Ordering::SeqCst);
        for host in &self.inner.hosts {
            host.faults().set_seed(seed);
        }
    }

    /// The last seed given to [`Simulator::set_seed`] (0 by default).
    pub fn seed(&self) -> u64 {
        self.inner.seed.load(Ordering::SeqCst)
    }

    /// Every host's VMs, volumes, networks, port forwards, backups and
    /// console tunnels, in configuration order.
    pub fn inventory(&self) -> Vec<HostInventory> {
        self.inner.hosts.iter().map(host_inventory).collect()
    }

    /// Stops every server, the control endpoint, port forwards and console
    /// tunnels included (for all clones), and waits until they are gone.
    pub async fn shutdown(self) {
        let mut forwards = Vec::new();
        for host in &self.inner.hosts {
            host.halt();
            forwards.extend(host.close_forwards());
            forwards.extend(host.close_consoles());
        }
        for task in forwards {
            let _ = task.await;
        }
        let tasks = std::mem::take(&mut lock(&self.inner.servers).0);
        for task in &tasks {
            task.abort();
        }
        for task in tasks {
            // A cancelled task reports JoinError::Cancelled, which is the point.
            let _ = task.await;
        }
    }
}

pub(crate) fn host_inventory(host: &SimHost) -> HostInventory {
    let cfg = host.config();
    HostInventory {
        name: cfg.name.clone(),
        provider: cfg.provider.clone(),
        region: cfg.region.clone(),
        continent: cfg.continent.clone(),
        target: host.target().clone(),
        down: host.faults().is_down(),
        full: host.faults().is_full(),
        boot_ms: u64::try_from(host.boot_time().as_millis()).unwrap_or(u64::MAX),
        inventory: host.inventory(),
    }
}
