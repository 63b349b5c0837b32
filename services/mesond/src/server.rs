//! The pieces every mode assembles: the REST server, the worker, targets.

use anyhow::Context;
use meson_api::http::{ActionFeed, AppState};
use meson_api::{App, Auth};
use meson_core::TargetId;
use meson_core::target::Target;
use meson_db::PgPool;
use meson_jobs::{Worker, WorkerConfig, WorkerHandle};
use meson_workflows::{Atomos, Env, WorkflowConfig};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// A running REST server.
pub struct ApiServer {
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
    join: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl ApiServer {
    pub async fn start(
        addr: SocketAddr,
        pool: PgPool,
        auth: Auth,
        secrets_key: Option<meson_kaas::SecretKey>,
    ) -> anyhow::Result<ApiServer> {
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding the REST API to {addr}"))?;
        let addr = listener.local_addr()?;
        let (stop, mut rx) = watch::channel(false);
        let mut app = App::new(pool);
        app.secrets_key = secrets_key;
        // One action listener per process feeds every action stream.
        let actions = ActionFeed::start(&app, rx.clone());
        let router = meson_api::router(AppState { app, auth, actions });
        let join = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = rx.wait_for(|s| *s).await;
                })
                .await
        });
        tracing::info!(%addr, "REST API listening");
        Ok(ApiServer { addr, stop, join })
    }

    /// Stops accepting, lets in-flight requests finish.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.join.await;
    }
}

/// Starts a worker running every workflow, and its reconciler (every
/// `reconcile_every`, jittered) until the worker stops.
pub fn start_worker(
    pool: PgPool,
    cfg: WorkerConfig,
    wf: WorkflowConfig,
    atomos: atomos_driver::ClientOptions,
    reconcile_every: std::time::Duration,
) -> WorkerHandle {
    let env = Arc::new(Env {
        atomos: Atomos::new(pool.clone(), atomos),
        pool: pool.clone(),
        config: wf,
    });
    let worker = meson_workflows::register_all(Worker::new(pool, cfg), env.clone()).start();
    // It only enqueues, under the clusters' locks: one per worker is fine.
    meson_workflows::reconcile::spawn(env, reconcile_every, worker.stop_signal());
    worker
}

/// Registers (or updates, by name) AtomOS targets.
pub async fn register_targets(
    pool: &PgPool,
    targets: &[atomos_driver::Target],
) -> anyhow::Result<()> {
    for t in targets {
        let target = Target {
            id: TargetId::new(),
            name: t.name.clone(),
            host: t.host.clone(),
            compute_port: t.ports.compute,
            storage_port: t.ports.storage,
            network_port: t.ports.network,
            auth_port: t.ports.auth,
            provider: t.provider.clone(),
            region: t.region.clone(),
            continent: t.continent.clone(),
            enabled: true,
        };
        meson_db::targets::upsert(pool, &target)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(())
}

/// Reads targets from a JSON file (an array of driver targets).
pub async fn targets_from_file(
    path: &std::path::Path,
) -> anyhow::Result<Vec<atomos_driver::Target>> {
    let text = tokio::fs::read_to_string(path)
        .await
        .with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("parsing {} as a JSON array of targets", path.display()))
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutdown requested");
}

/// Connects and, unless told otherwise, migrates.
pub async fn database(url: &str, pool_size: u32, migrate: bool) -> anyhow::Result<PgPool> {
    let pool = meson_db::connect(url, pool_size).await.map_err(|e| {
        anyhow::anyhow!(
            "{e}: {:?}",
            std::error::Error::source(&e).map(|s| s.to_string())
        )
    })?;
    if migrate {
        meson_db::migrate(&pool).await.map_err(|e| {
            anyhow::anyhow!(
                "{e}: {:?}",
                std::error::Error::source(&e).map(|s| s.to_string())
            )
        })?;
    }
    Ok(pool)
}
