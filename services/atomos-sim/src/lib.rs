//! A simulator of Elemento's AtomOS daemons speaking their HTTP protocol.
//!
//! [`start`] serves a fleet of simulated hosts, each with its own four
//! daemons (compute, storage, network, auth) on ephemeral ports, so tests and
//! dev setups drive it through the real [`atomos_driver::AtomosClient`].
//! Hosts keep VMs, volumes and networks in memory, account capacity, boot
//! VMs after a configurable delay, and accept injected [`Faults`].

mod config;
mod faults;
mod host;
mod http;
mod multipart;
mod templates;

pub use config::{HostConfig, SimConfig, dev_hosts};
pub use faults::Faults;
pub use host::{Inventory, SimFile, SimHost, SimNetwork, SimVm, SimVolume};

use atomos_driver::{Ports, Target};
use host::lock;
use http::Daemon;
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
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

/// Starts every host of `config`, each on four fresh ports of `config.bind`.
pub async fn start(config: SimConfig) -> std::io::Result<Simulator> {
    let mut names = HashSet::new();
    for h in &config.hosts {
        if h.name.is_empty() || !names.insert(h.name.as_str()) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("host names must be unique and non-empty: {:?}", h.name),
            ));
        }
    }
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
            listeners.push(tokio::net::TcpListener::bind(SocketAddr::new(config.bind, 0)).await?);
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
        let host = SimHost::new(host_config, target, index, config.boot_time);
        for (daemon, listener) in Daemon::ALL.into_iter().zip(listeners) {
            let app = http::router(daemon, host.clone());
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
    Ok(Simulator {
        inner: Arc::new(SimInner {
            hosts,
            servers: Mutex::new(servers),
        }),
    })
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

    /// Stops every server (for all clones) and waits until they are gone.
    pub async fn shutdown(self) {
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
