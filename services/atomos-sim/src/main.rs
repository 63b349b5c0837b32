//! `atomos-sim`: serve simulated AtomOS hosts and print their targets as JSON lines.

use anyhow::Context;
use atomos_sim::{HostConfig, SimConfig, dev_hosts};
use clap::Parser;
use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Simulated Elemento AtomOS daemons for development and tests"
)]
struct Args {
    /// JSON array of host configurations; the built-in dev fleet if absent.
    #[arg(long)]
    hosts_file: Option<PathBuf>,
    /// Milliseconds from register until a VM runs with an IPv4.
    #[arg(long, default_value_t = 1500)]
    boot_ms: u64,
    /// Address the daemons listen on (each on an ephemeral port).
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
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
    let hosts: Vec<HostConfig> = match &args.hosts_file {
        Some(path) => {
            let raw = tokio::fs::read(path)
                .await
                .with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_slice(&raw).with_context(|| format!("parsing {}", path.display()))?
        }
        None => dev_hosts(),
    };
    let sim = atomos_sim::start(SimConfig {
        hosts,
        boot_time: Duration::from_millis(args.boot_ms),
        bind: args.bind,
    })
    .await
    .context("starting the simulator")?;
    {
        let mut out = std::io::stdout().lock();
        for target in sim.targets() {
            serde_json::to_writer(&mut out, &target)?;
            writeln!(out)?;
        }
        out.flush()?;
    }
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    tracing::info!("shutting down");
    sim.shutdown().await;
    Ok(())
}
