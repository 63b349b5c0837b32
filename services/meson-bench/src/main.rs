//! `meson-bench`: meson measured side by side with the physical limit and
//! real peers, in one run on one machine, reported as ratios.
//!
//! ```sh
//! scripts/bench            # builds in release mode, then runs every section
//! ```
//!
//! Every figure comes with the baseline it is compared to, measured in the
//! same run; absolute numbers drift on shared machines, ratios much less.
//! A run that saw an error, an unfinished job or a wrong answer fails with
//! a non-zero exit instead of reporting a figure.

// The bench's SQL runs against server settings and the raw and
// graphile-worker schemas as much as meson's, on databases it makes: it is
// measurement glue, checked by every run, not meson's data layer (which
// keeps its compile-checked queries in meson-db).
#![allow(clippy::disallowed_methods)]

mod api;
mod baseline;
mod env;
mod graphile;
mod load;
mod provision;
mod queue;
mod scale;
mod stats;

use anyhow::Context;
use clap::Parser;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(name = "meson-bench", about = "meson's benchmarks (see BENCHMARKS.md)")]
struct Cli {
    #[command(subcommand)]
    inner: Option<Inner>,
    /// Sections to run, comma-separated: queue, pickup, api, provision,
    /// scale (all by default).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "queue,pickup,api,provision,scale"
    )]
    sections: Vec<String>,
    /// No-op jobs per queue run.
    #[arg(long, default_value_t = 50_000)]
    jobs: u64,
    /// Pickup-latency samples (the polling fallback takes at most 40).
    #[arg(long, default_value_t = 300)]
    pickup_samples: usize,
    /// Scratch directory (the private PostgreSQL, graphile-worker, logs).
    #[arg(long, default_value = "target/bench")]
    work: PathBuf,
    /// The mesond binary to measure.
    #[arg(long, default_value = "target/release/mesond")]
    mesond: PathBuf,
    /// Where to write the report (Markdown), besides standard output.
    #[arg(long, default_value = "target/bench/report.md")]
    out: PathBuf,
    /// Concurrent HTTP clients of the API section.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Seconds each API load lasts (after 2 s of warm-up).
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// The simulated VM boot time of the provisioning section, ms.
    #[arg(long, default_value_t = 5000)]
    boot_ms: u64,
    /// Clusters of the provisioning section: `N` nodes (the control
    /// plane's and N − 1 workers in one pool, 2 ≤ N ≤ 101), or `PxW` (the
    /// control plane's node and P pools of W workers).
    #[arg(long, value_delimiter = ',', default_value = "3,10,50,100,3x100")]
    cluster_sizes: Vec<provision::Shape>,
    /// VMs in the database of the scale section.
    #[arg(long, default_value_t = 100_000)]
    scale_vms: usize,
    /// Clusters in the database of the scale section.
    #[arg(long, default_value_t = 10_000)]
    scale_clusters: usize,
    /// Concurrent SSE watchers of the scale section.
    #[arg(long, default_value_t = 1_000)]
    watchers: usize,
}

/// The processes the benchmark starts of itself.
#[derive(clap::Subcommand, Debug)]
enum Inner {
    /// The API baseline: a bare axum + sqlx app.
    #[command(hide = true)]
    BaselineServer {
        #[arg(long)]
        addr: std::net::SocketAddr,
        #[arg(long)]
        database_url: String,
        #[arg(long, default_value_t = 20)]
        pool: u32,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MESON_BENCH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("meson-bench: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    if let Some(Inner::BaselineServer {
        addr,
        database_url,
        pool,
    }) = &cli.inner
    {
        return match rt.block_on(baseline::serve(*addr, database_url, *pool)) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("baseline-server: {e:#}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    match rt.block_on(run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("\nmeson-bench: INVALID RUN, no figures reported: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[allow(clippy::print_stdout)] // the report is the program's output
async fn run(cli: Cli) -> anyhow::Result<()> {
    let started = Instant::now();
    let cpu_at_start = stats::CpuTimes::now();
    let env = env::Env::start(cli.work.clone(), cli.mesond.clone()).await?;
    let mut report = header(&env).await;
    let wants = |s: &str| cli.sections.iter().any(|x| x == s);
    for s in &cli.sections {
        anyhow::ensure!(
            ["queue", "pickup", "api", "provision", "scale"].contains(&s.as_str()),
            "unknown section {s:?}"
        );
    }
    let result = async {
        if wants("queue") {
            let cpu = stats::CpuTimes::now();
            let q = queue::throughput(&env, cli.jobs).await?;
            report.push_str(&q.table.render());
            report.push('\n');
            report.push_str(&stats::stolen_since(cpu, "this section"));
            report.push('\n');
        }
        if wants("pickup") {
            let cpu = stats::CpuTimes::now();
            report.push_str(&queue::pickup(&env, cli.pickup_samples).await?.render());
            report.push('\n');
            report.push_str(&stats::stolen_since(cpu, "this section"));
            report.push('\n');
        }
        if wants("api") {
            let cpu = stats::CpuTimes::now();
            let window = std::time::Duration::from_secs(cli.seconds);
            report.push_str(&api::api(&env, cli.clients, window).await?.render());
            report.push('\n');
            report.push_str(&stats::stolen_since(cpu, "this section"));
            report.push('\n');
        }
        if wants("provision") {
            let cpu = stats::CpuTimes::now();
            let boot = std::time::Duration::from_millis(cli.boot_ms);
            let t = provision::provision(&env, boot, &cli.cluster_sizes).await?;
            report.push_str(&t.render());
            report.push('\n');
            report.push_str(&stats::stolen_since(cpu, "this section"));
            report.push('\n');
        }
        if wants("scale") {
            let cpu = stats::CpuTimes::now();
            let window = std::time::Duration::from_secs(cli.seconds.div_ceil(3));
            let tables = scale::scale(
                &env,
                cli.scale_vms,
                cli.scale_clusters,
                cli.watchers,
                window,
            )
            .await?;
            for t in tables {
                report.push_str(&t.render());
                report.push('\n');
            }
            report.push_str(&stats::stolen_since(cpu, "this section"));
            report.push('\n');
        }
        if let Some(t) = memory(&env)? {
            report.push_str(&t.render());
            report.push('\n');
        }
        Ok::<_, anyhow::Error>(())
    }
    .await;
    env.shutdown().await?;
    result?;
    report.push_str(&format!(
        "\nThe run took {:.0} s.\n{}",
        started.elapsed().as_secs_f64(),
        stats::stolen_since(cpu_at_start, "the run")
    ));
    println!("{report}");
    if let Some(dir) = cli.out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&cli.out, &report).with_context(|| format!("writing {}", cli.out.display()))?;
    eprintln!("meson-bench: report written to {}", cli.out.display());
    Ok(())
}

/// Each mesond's resident memory once it answered and at its peak.
fn memory(env: &env::Env) -> anyhow::Result<Option<stats::Table>> {
    let rss = env.rss.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    if rss.is_empty() {
        return Ok(None);
    }
    let mib = |b: u64| format!("{:.0}", b as f64 / 1048576.0);
    let mut t = stats::Table::new(
        "Memory: mesond's resident set",
        &["run", "once started MiB", "peak MiB", "peak / started"],
    );
    for (label, r) in rss.iter() {
        t.row(vec![
            label.clone(),
            mib(r.started),
            mib(r.peak),
            stats::ratio(r.peak as f64, r.started as f64),
        ]);
    }
    t.note(
        "`VmRSS` once the process answered its health check (the baseline), and `VmHWM` \
         (the high-water mark) just before it was stopped.",
    );
    Ok(Some(t))
}

/// The machine and server the figures come from.
async fn header(env: &env::Env) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or("?".into(), |kb| format!("{:.0} GiB", kb as f64 / 1048576.0));
    let settings: Vec<String> = env
        .pg_settings
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!(
        "## meson-bench run of {}\n\nMachine: {cores} cores ({cpu}), {mem} RAM; meson, its \
         peers, PostgreSQL and the load generators all share it.\nPostgreSQL: {}.\n\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        settings.join(", ")
    )
}
