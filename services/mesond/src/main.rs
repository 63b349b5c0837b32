//! `mesond`: meson's daemon. `dev` runs everything on one machine; `serve`,
//! `api`, `worker` and `migrate` are for real deployments.

use anyhow::Context;
use clap::{Parser, Subcommand};
use meson_api::Auth;
use mesond::config::Config;
use mesond::dev::{Dev, DevOptions};
use mesond::server::{
    ApiServer, ApiSettings, api_database, database, register_targets, serve_metrics,
    shutdown_signal, start_worker, targets_from_file,
};

/// Every request allocates (its body, its JSON, its rows): under the API
/// load glibc's malloc and free were about a fifth of mesond's time, and
/// mimalloc's per-thread free lists cost less (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "mesond",
    version,
    about = "meson: Elemento's control plane for VMs and managed Kubernetes"
)]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// Everything on one machine: private PostgreSQL (unless DATABASE_URL is
    /// set), AtomOS simulator, REST API, workers and a dev token.
    Dev,
    /// API and workers in one process against DATABASE_URL.
    Serve,
    /// The REST API only.
    Api,
    /// The workers only.
    Worker,
    /// Apply database migrations and exit.
    Migrate,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mesond: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mesond: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let cfg = Config::from_env()?;
    let mode = match cli.mode {
        Mode::Dev => "dev",
        Mode::Serve => "serve",
        Mode::Api => "api",
        Mode::Worker => "worker",
        Mode::Migrate => "migrate",
    };
    // Flushed (the last spans sent) when `run` returns.
    let _telemetry = mesond::telemetry::init(!matches!(cli.mode, Mode::Dev), mode);
    match cli.mode {
        Mode::Dev => dev(cfg).await,
        Mode::Migrate => {
            database(cfg.require_database_url()?, 2, true).await?;
            tracing::info!("migrations applied");
            Ok(())
        }
        Mode::Serve => deployed(cfg, true, true).await,
        Mode::Api => deployed(cfg, true, false).await,
        Mode::Worker => deployed(cfg, false, true).await,
    }
}

#[allow(clippy::print_stdout)] // the dev banner is for the person at the terminal
async fn dev(cfg: Config) -> anyhow::Result<()> {
    let mut opts = DevOptions::from_config(&cfg);
    opts.elemento = mesond::dev::elemento_from_env()?;
    let grace = opts.worker.shutdown_grace;
    let wanted = (
        opts.http_addr,
        opts.grpc_addr,
        opts.autoscaler.as_ref().map(|a| a.listen),
    );
    let dev = Dev::start(opts).await?;
    // A default address that was taken, loudly.
    let moved = |wanted: std::net::SocketAddr, got: std::net::SocketAddr, var: &str| {
        if wanted.port() != 0 && wanted != got {
            format!(" ({wanted} was taken; set {var} to choose)")
        } else {
            String::new()
        }
    };
    let rest_moved = moved(wanted.0, dev.http_addr, "MESON_HTTP_ADDR");
    let grpc_moved = moved(wanted.1, dev.grpc_addr, "MESON_GRPC_ADDR");
    let autoscaler = match (wanted.2, dev.autoscaler_addr) {
        (Some(w), Some(a)) => format!("{a} (mutual TLS){}", moved(w, a, "MESON_AUTOSCALER_ADDR")),
        _ => "not served".to_owned(),
    };
    let database = match &dev.postgres_dir {
        Some(dir) => format!("{} (cluster in {})", dev.database_url, dir.display()),
        None => dev.database_url.clone(),
    };
    let data_dir = dev.token_file.parent().unwrap_or(&cfg.data_dir);
    println!(
        "\nmeson dev is running (pid {pid}, data dir {data})\n  REST API     http://{addr}{rest_moved}\n  gRPC API     {grpc} (reflection on){grpc_moved}\n  autoscaler   {autoscaler}\n  database     {database}\n  AtomOS       {n} simulated hosts (faults and inventory: {control})\n  token        {path} (tenant 'dev', role admin)\n  addresses    {data}/{server} (mesonctl reads it)\n\n  export MESON_TOKEN=$(cat {path})\n  curl -H \"Authorization: Bearer $MESON_TOKEN\" http://{addr}/v1/vms\n",
        pid = std::process::id(),
        data = data_dir.display(),
        addr = dev.http_addr,
        grpc = dev.grpc_addr,
        n = dev.simulator.targets().len(),
        control = dev.simulator.control_url(),
        path = dev.token_file.display(),
        server = meson_types::dev::SERVER_FILE,
    );
    if let Some(gw) = &dev.elemento {
        println!(
            "  Elemento daemons (Electros, elemento-cli; logged in as the dev token; MESON_ELEMENTO=false: off)"
        );
        for line in gw.describe() {
            println!("    {line}");
        }
        let moved: Vec<_> = gw.moved().collect();
        if !moved.is_empty() {
            println!(
                "\n  !!! {} Elemento daemon(s) MOVED to another port: elemento-cli only finds them on their usual ports !!!\n",
                moved.len()
            );
        }
    }
    shutdown_signal().await;
    // Running jobs finish while the API and the simulator still serve them;
    // a second Ctrl-C releases them to the queue at once.
    dev.worker().stop_claiming();
    let mut running = dev.worker().running();
    let again = shutdown_signal();
    tokio::pin!(again);
    loop {
        let jobs = running.borrow_and_update().clone();
        if jobs.is_empty() {
            break;
        }
        let mut kinds: Vec<&str> = jobs.iter().map(|j| j.kind.as_str()).collect();
        kinds.sort_unstable();
        kinds.dedup();
        println!(
            "waiting for {n} running job{s} ({kinds}) to finish, at most {grace} s — press Ctrl-C again to stop now (they resume on the next start)",
            n = jobs.len(),
            s = if jobs.len() == 1 { "" } else { "s" },
            kinds = kinds.join(", "),
            grace = grace.as_secs(),
        );
        tokio::select! {
            changed = running.changed() => if changed.is_err() { break },
            () = &mut again => {
                println!(
                    "stopping now: {} running job{} released to the queue, resumed on the next start",
                    jobs.len(),
                    if jobs.len() == 1 { "" } else { "s" },
                );
                dev.worker().release_now();
                break;
            }
        }
    }
    dev.shutdown().await?;
    println!("meson dev stopped");
    Ok(())
}

async fn deployed(cfg: Config, api: bool, worker: bool) -> anyhow::Result<()> {
    // Listening for SIGTERM from the start: one that comes while the API and
    // the worker still start stops them cleanly, instead of killing mesond.
    let shutdown = tokio::spawn(shutdown_signal());
    let url = cfg.require_database_url()?;
    // Only the migrate job (or serve) changes the schema; api/worker replicas just use it.
    // An api-only replica uses this pool at start only (targets).
    let size = if worker { cfg.db_pool } else { 2 };
    let pool = database(url, size, api && worker).await?;
    if let Some(path) = &cfg.targets_file {
        register_targets(&pool, &targets_from_file(path).await?).await?;
    }
    let api = if api {
        let auth = Auth::new(cfg.auth()?)
            .await
            .context("configuring bearer-token verification")?;
        let settings = ApiSettings {
            secrets_key: Some(cfg.require_secrets_key()?),
            api: cfg.api(),
            quotas: cfg.default_quotas,
            audit_retention_days: cfg.audit_retention_days,
            grpc_addr: cfg.grpc_addr,
            autoscaler: cfg.autoscaler(None),
            connections: cfg.connections,
            db_hold: cfg.db_hold,
            ..ApiSettings::new(auth)
        };
        let api_pool = api_database(url, cfg.db_pool, cfg.db_acquire_timeout).await?;
        Some(ApiServer::start(cfg.http_addr, api_pool, settings).await?)
    } else {
        None
    };
    let (metrics_stop, metrics_rx) = tokio::sync::watch::channel(false);
    let metrics = match (worker && api.is_none(), cfg.metrics_addr) {
        (true, Some(addr)) => {
            Some(serve_metrics(addr, pool.clone(), cfg.connections, metrics_rx).await?)
        }
        _ => None,
    };
    let worker = match worker {
        true => Some(start_worker(
            pool.clone(),
            cfg.worker(),
            cfg.workflows()?,
            cfg.atomos(),
            cfg.reconcile_interval,
        )),
        false => None,
    };
    let _ = shutdown.await;
    // Both at once: the API drains its connections (for at most
    // MESON_HTTP_DRAIN_S) while running jobs finish (for at most
    // MESON_SHUTDOWN_GRACE_S); neither waits for the other.
    let api = async {
        if let Some(api) = api {
            api.shutdown().await;
        }
    };
    let worker = async {
        if let Some(w) = worker {
            w.shutdown().await;
        }
    };
    tokio::join!(api, worker);
    let _ = metrics_stop.send(true);
    if let Some((_, join)) = metrics {
        let _ = join.await;
    }
    pool.close().await;
    Ok(())
}
