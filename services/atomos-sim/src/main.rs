//! `atomos-sim`: serve simulated AtomOS hosts, print their targets and the control endpoint as JSON lines.

use anyhow::Context;
use atomos_sim::{ErrorRate, FaultSpec, HostConfig, SimConfig, dev_hosts};
use clap::Parser;
use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Simulated Elemento AtomOS daemons for development and tests",
    long_about = "Simulated Elemento AtomOS daemons for development and tests.\n\n\
        Prints one JSON line per host (its target: name, host, ports, provider, region, \
        continent), then {\"control\": \"http://...\"}: the control endpoint \
        (GET /inventory, GET|POST|DELETE /faults/{host}, GET|POST /seed, \
        POST /inventory/{host}/vms/{vm}/ports: the address standing in for a \
        guest's port, which port forwards on 127.0.0.1 reach; \
        POST /inventory/{host}/volumes/{volume}/write: a guest's write to a \
        disk).\n\n\
        A VM powered on has a console: POST \
        /api/v1.0/client/vm/porttunnel/vncWebSocket {\"local_index\": ...} on its \
        host's compute daemon answers a ws://127.0.0.1:PORT/vnc/ID URL whose \
        binary frames carry RFB (VNC, security None) showing the VM's name and \
        power state.\n\n\
        With --state DIR, every host's VMs, volumes, networks, port \
        forwards and backups are written through to DIR/<host>.json before each change \
        is acknowledged, and loaded again on the next start (even after \
        kill -9); the hosts get new ports."
)]
struct Args {
    /// JSON array of host configurations (each may carry `faults`); the
    /// built-in dev fleet if absent.
    #[arg(long)]
    hosts_file: Option<PathBuf>,
    /// Milliseconds from register until a VM runs with an IPv4.
    #[arg(long, default_value_t = 1500)]
    boot_ms: u64,
    /// Address the daemons listen on (each on an ephemeral port); the control
    /// endpoint listens on loopback.
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Seed of every host's random faults (overrides the hosts file's).
    #[arg(long)]
    seed: Option<u64>,
    /// `ROUTE=RATE`: requests to ROUTE (e.g. `vm/status`, or `*`) fail with
    /// 503 with probability RATE, on every host. Repeatable.
    #[arg(long = "error-rate", value_parser = parse_error_rate)]
    error_rates: Vec<ErrorRate>,
    /// Milliseconds added to every request on every host.
    #[arg(long)]
    latency_ms: Option<u64>,
    /// Directory keeping every host's VMs, volumes, networks, port
    /// forwards and backups (one JSON file per host, written through before each change
    /// is acknowledged), loaded on start; created when missing. In memory
    /// only if absent.
    #[arg(long, env = "ATOMOS_SIM_STATE", value_name = "DIR")]
    state: Option<PathBuf>,
}

fn parse_error_rate(raw: &str) -> Result<ErrorRate, String> {
    let (route, rate) = raw
        .split_once('=')
        .ok_or_else(|| format!("expected ROUTE=RATE, got {raw:?}"))?;
    let rate: f64 = rate
        .trim()
        .parse()
        .map_err(|_| format!("{rate:?} is not a number"))?;
    Ok(ErrorRate {
        route: route.trim().to_owned(),
        rate,
        status: 503,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        // stdout carries the targets for scripts; logs go elsewhere.
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let mut hosts: Vec<HostConfig> = match &args.hosts_file {
        Some(path) => {
            let raw = tokio::fs::read(path)
                .await
                .with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_slice(&raw).with_context(|| format!("parsing {}", path.display()))?
        }
        None => dev_hosts(),
    };
    let flags = FaultSpec {
        error_rates: args.error_rates.clone(),
        latency_ms: args.latency_ms,
        ..FaultSpec::default()
    };
    flags
        .validate()
        .map_err(|e| anyhow::anyhow!("fault flags: {e}"))?;
    // Flags add to each host's own faults; a flag's route replaces the
    // file's entry for the same route.
    for h in &mut hosts {
        h.faults.error_rates.retain(|r| {
            !flags
                .error_rates
                .iter()
                .any(|f| f.route.trim_matches('/') == r.route.trim_matches('/'))
        });
        h.faults
            .error_rates
            .extend(flags.error_rates.iter().cloned());
        h.faults.latency_ms = flags.latency_ms.or(h.faults.latency_ms);
    }
    let sim = atomos_sim::start(SimConfig {
        hosts,
        boot_time: Duration::from_millis(args.boot_ms),
        bind: args.bind,
        state: args.state.clone(),
    })
    .await
    .context("starting the simulator")?;
    if let Some(seed) = args.seed {
        sim.set_seed(seed);
    }
    {
        let mut out = std::io::stdout().lock();
        for target in sim.targets() {
            serde_json::to_writer(&mut out, &target)?;
            writeln!(out)?;
        }
        serde_json::to_writer(
            &mut out,
            &serde_json::json!({ "control": sim.control_url() }),
        )?;
        writeln!(out)?;
        out.flush()?;
    }
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    tracing::info!("shutting down");
    sim.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_rate_flags_parse() {
        let r = parse_error_rate("vm/status=0.25").unwrap();
        assert_eq!(
            (r.route.as_str(), r.rate, r.status),
            ("vm/status", 0.25, 503)
        );
        assert!(parse_error_rate("vm/status").is_err());
        assert!(parse_error_rate("vm/status=lots").is_err());
        let args = Args::try_parse_from([
            "atomos-sim",
            "--seed",
            "7",
            "--error-rate",
            "*=0.1",
            "--error-rate",
            "vm/register=1",
        ])
        .unwrap();
        assert_eq!(args.seed, Some(7));
        assert_eq!(args.error_rates.len(), 2);
        assert_eq!(args.state, None);
        let args = Args::try_parse_from(["atomos-sim", "--state", "/var/lib/sim"]).unwrap();
        assert_eq!(args.state, Some(PathBuf::from("/var/lib/sim")));
    }
}
