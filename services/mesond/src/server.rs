//! The pieces every mode assembles: the REST server, the worker, targets.

use anyhow::Context;
use meson_api::http::{ActionFeed, ApiConfig, AppState};
use meson_api::{App, Auth};
use meson_core::TargetId;
use meson_core::quota::Resources;
use meson_core::target::Target;
use meson_db::PgPool;
use meson_jobs::{Worker, WorkerConfig, WorkerHandle};
use meson_workflows::{Atomos, Env, WorkflowConfig};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::conn::{ConnLimits, Connections, Cutter};

/// What the REST server runs with besides its address and database.
#[derive(Clone, Debug)]
pub struct ApiSettings {
    pub auth: Auth,
    /// Opens cluster secrets (kubeconfigs); without it those answer `service_error`.
    pub secrets_key: Option<meson_kaas::SecretKey>,
    pub api: ApiConfig,
    /// Every tenant's quotas unless set for it.
    pub quotas: Resources,
    /// Audit entries older than this are pruned.
    pub audit_retention_days: u32,
    /// Where gRPC listens (`127.0.0.1:0`: any free port).
    pub grpc_addr: SocketAddr,
    /// The clusters' autoscalers' endpoint, if served.
    pub autoscaler: Option<AutoscalerSettings>,
    /// Which listeners move to a free port when their address is taken.
    pub fallback: PortFallback,
    /// Connections: how many, how slow, how idle, how long shutdown waits.
    pub connections: ConnLimits,
    /// How long a request waits for an unreachable database (a failover)
    /// before it answers `503`.
    pub db_hold: std::time::Duration,
}

/// Which listeners may move to a free port on the same IP when their
/// address is taken: dev mode's defaults, never an address the user set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortFallback {
    /// REST (`MESON_HTTP_ADDR`).
    pub http: bool,
    /// gRPC (`MESON_GRPC_ADDR`).
    pub grpc: bool,
    /// The autoscalers' endpoint (`MESON_AUTOSCALER_ADDR`).
    pub autoscaler: bool,
}

/// Binds `what` to `addr`, configured by the environment variable `var`.
/// When the address is taken and `fallback` allows, binds a free port on the
/// same IP instead and says so; otherwise the error names `var`.
pub async fn bind(
    what: &str,
    var: &str,
    addr: SocketAddr,
    fallback: bool,
) -> anyhow::Result<TcpListener> {
    match TcpListener::bind(addr).await {
        Ok(l) => Ok(l),
        Err(e) if fallback && e.kind() == std::io::ErrorKind::AddrInUse => {
            let any = SocketAddr::new(addr.ip(), 0);
            let l = TcpListener::bind(any).await.with_context(|| {
                format!("{addr} ({var}'s default) is taken, and binding {what} to {any} failed")
            })?;
            tracing::warn!(
                "{addr} ({var}'s default) is taken (another mesond dev?): {what} listens on {} \
                 instead; set {var} to choose",
                l.local_addr()?
            );
            Ok(l)
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!(
            "binding {what} to {addr} ({var}): set {var} to a free address"
        ))),
    }
}

/// meson's `externalgrpc` endpoint for cluster autoscalers (mutual TLS).
#[derive(Clone, Debug)]
pub struct AutoscalerSettings {
    /// Where it listens.
    pub listen: SocketAddr,
    /// The `host:port` autoscalers dial (default: the listen address).
    pub public: Option<String>,
    /// The names its server certificate holds (DNS names or IPs), besides
    /// `public`'s host.
    pub tls_names: Vec<String>,
}

impl ApiSettings {
    /// `auth` with the defaults for everything else.
    pub fn new(auth: Auth) -> ApiSettings {
        ApiSettings {
            auth,
            secrets_key: None,
            api: ApiConfig::default(),
            quotas: Resources::DEFAULT_QUOTAS,
            audit_retention_days: 400,
            grpc_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            autoscaler: None,
            fallback: PortFallback::default(),
            connections: ConnLimits::default(),
            db_hold: meson_db::outage::DEFAULT_HOLD,
        }
    }
}

/// How often the API forgets idle rate-limit buckets and prunes the audit log.
const MAINTENANCE_EVERY: std::time::Duration = std::time::Duration::from_secs(600);

/// A running REST server.
pub struct ApiServer {
    /// Where REST answers.
    pub addr: SocketAddr,
    /// Where gRPC answers (`meson.v1`, reflection, health).
    pub grpc_addr: SocketAddr,
    stop: watch::Sender<bool>,
    cutter: Cutter,
    audit_backlog: tokio::task::JoinHandle<()>,
    backlog: Arc<meson_api::app::AuditBacklog>,
    drain: std::time::Duration,
    join: tokio::task::JoinHandle<std::io::Result<()>>,
    grpc: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
    /// Where the autoscalers' endpoint answers, if served.
    pub autoscaler_addr: Option<SocketAddr>,
    autoscaler: Option<tokio::task::JoinHandle<Result<(), tonic::transport::Error>>>,
}

impl ApiServer {
    /// Serves the API on `addr`. `pool` must be a scoped pool
    /// ([`meson_db::scope::connect_scoped`]): every request sees its own
    /// tenant's rows only.
    pub async fn start(
        addr: SocketAddr,
        pool: PgPool,
        settings: ApiSettings,
    ) -> anyhow::Result<ApiServer> {
        let fallback = settings.fallback;
        let (conns, cutter) = Connections::new(settings.connections);
        let listener = bind("the REST API", "MESON_HTTP_ADDR", addr, fallback.http).await?;
        let addr = listener.local_addr()?;
        let mut settings = settings;
        if settings.api.public_url.is_none() {
            settings.api.public_url = Some(format!("http://{addr}"));
        }
        let (stop, rx) = watch::channel(false);
        let mut app = App::new(pool).with_db_hold(settings.db_hold);
        app.secrets_key = settings.secrets_key;
        app.quotas = settings.quotas;
        let autoscaler_listener = match &settings.autoscaler {
            Some(a) => {
                let l = bind(
                    "the autoscaler endpoint",
                    "MESON_AUTOSCALER_ADDR",
                    a.listen,
                    fallback.autoscaler,
                )
                .await?;
                let local = l.local_addr()?;
                let public = a.public.clone().unwrap_or_else(|| local.to_string());
                app.autoscaler = Some(meson_api::app::autoscaler::AutoscalerEndpoint {
                    address: public.clone(),
                });
                let mut names = a.tls_names.clone();
                if let Some((host, _)) = public.rsplit_once(':') {
                    names.push(host.trim_matches(['[', ']']).to_owned());
                }
                names.sort();
                names.dedup();
                Some((l, names))
            }
            None => None,
        };
        // One action listener per process feeds every action stream.
        let actions = ActionFeed::start(&app, rx.clone());
        settings.auth.spawn_refresh(rx.clone());
        let state = AppState::new(app, settings.auth, actions, settings.api);
        tokio::spawn(maintenance(
            state.clone(),
            settings.audit_retention_days,
            rx.clone(),
        ));
        let backlog = state.app.audit_backlog.clone();
        let audit_backlog = tokio::spawn(meson_api::gate::flush_audit_backlog(
            state.clone(),
            rx.clone(),
        ));
        let grpc_listener = bind(
            "the gRPC API",
            "MESON_GRPC_ADDR",
            settings.grpc_addr,
            fallback.grpc,
        )
        .await?;
        let grpc_addr = grpc_listener.local_addr()?;
        let grpc = {
            let routes = meson_api::grpc::routes(&state);
            let server = grpc_server(&conns.limits)
                .timeout(state.config.limits.timeout)
                .layer(meson_api::grpc::GrpcGateLayer::new(state.clone()))
                .add_routes(routes);
            let mut rx = rx.clone();
            let incoming = conns.clone().incoming(grpc_listener);
            tokio::spawn(async move {
                server
                    .serve_with_incoming_shutdown(incoming, async move {
                        let _ = rx.wait_for(|s| *s).await;
                    })
                    .await
            })
        };
        let (autoscaler_addr, autoscaler) = match autoscaler_listener {
            Some((listener, names)) => {
                let addr = listener.local_addr()?;
                let task =
                    serve_autoscalers(&state, listener, &names, conns.clone(), rx.clone()).await?;
                tracing::info!(%addr, ?names, "autoscaler endpoint listening (mutual TLS)");
                (Some(addr), Some(task))
            }
            None => (None, None),
        };
        let router = meson_api::router(state);
        let drain = conns.limits.drain;
        let join = tokio::spawn(crate::conn::serve_http(listener, router, conns, rx));
        tracing::info!(%addr, %grpc_addr, "REST and gRPC APIs listening");
        Ok(ApiServer {
            addr,
            grpc_addr,
            stop,
            cutter,
            audit_backlog,
            backlog,
            drain,
            join,
            grpc,
            autoscaler_addr,
            autoscaler,
        })
    }

    /// Audit entries kept in memory while the database is down.
    pub fn audit_backlog_len(&self) -> usize {
        self.backlog.len()
    }

    /// Stops accepting, lets in-flight requests finish for at most the
    /// drain period (`MESON_HTTP_DRAIN_S`), then cuts the connections left.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let mut tasks = vec![
            tokio::spawn(async move { drop(self.join.await) }),
            tokio::spawn(async move { drop(self.grpc.await) }),
        ];
        if let Some(a) = self.autoscaler {
            tasks.push(tokio::spawn(async move { drop(a.await) }));
        }
        let all = futures::future::join_all(tasks);
        tokio::pin!(all);
        if tokio::time::timeout(self.drain, &mut all).await.is_err() {
            tracing::warn!(
                drain_s = self.drain.as_secs(),
                "connections still open after the drain period: cutting them"
            );
            self.cutter.cut();
            // Cut connections end at their next poll; nothing waits on a client.
            if tokio::time::timeout(std::time::Duration::from_secs(5), &mut all)
                .await
                .is_err()
            {
                tracing::warn!("the API's listeners did not stop after cutting their connections");
            }
        }
        // Its last flush of audit entries kept during an outage (bounded by
        // the pool's acquire timeout).
        let _ = self.audit_backlog.await;
    }
}

/// gRPC's server with the connection limits: HTTP/2 pings at half the idle
/// timeout keep a live client's connection (and its quiet streams) open,
/// and close one whose peer stopped answering.
fn grpc_server(limits: &ConnLimits) -> tonic::transport::Server {
    let ping = (limits.idle_timeout / 2).max(std::time::Duration::from_secs(1));
    tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(ping))
        .http2_keepalive_timeout(Some(ping))
}

/// Serves the autoscalers' `externalgrpc` endpoint on `listener`: TLS with a
/// certificate for `names` signed by meson's autoscaler CA, which client
/// certificates must be signed by too.
async fn serve_autoscalers(
    state: &AppState,
    listener: TcpListener,
    names: &[String],
    conns: Connections,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<tokio::task::JoinHandle<Result<(), tonic::transport::Error>>> {
    use tonic::transport::{Certificate, Identity, ServerTlsConfig};
    let ca = state
        .app
        .autoscaler_ca()
        .await
        .map_err(|e| anyhow::anyhow!("the autoscaler CA: {e}"))?;
    let server_cert = ca
        .server_certificate(names, meson_api::app::autoscaler::CREDENTIAL_VALIDITY)
        .map_err(|e| anyhow::anyhow!("the autoscaler endpoint's certificate: {e}"))?;
    let tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(
            &server_cert.cert_pem,
            &server_cert.key_pem,
        ))
        .client_ca_root(Certificate::from_pem(&ca.ca.cert_pem));
    let server = grpc_server(&conns.limits)
        .tls_config(tls)
        .context("the autoscaler endpoint's TLS")?
        .timeout(state.config.limits.timeout)
        .add_routes(meson_api::grpc::autoscaler::routes(state));
    Ok(tokio::spawn(async move {
        server
            .serve_with_incoming_shutdown(conns.incoming(listener), async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await
    }))
}

/// Now and then: forgets the rate-limit buckets of idle tenants, and prunes
/// audit entries past retention (every tenant's: the system scope).
async fn maintenance(state: AppState, retention_days: u32, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(MAINTENANCE_EVERY) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        state.limits.forget_idle();
        let prune = meson_db::audit::prune(&state.app.pool, i64::from(retention_days), 10_000);
        match meson_db::scope::system(prune).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(pruned = n, "pruned the audit log"),
            Err(e) => tracing::warn!(error = %e, "could not prune the audit log"),
        }
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

/// The API's pool: each connection sees the rows of the request it serves.
/// Warns when the database role passes around row-level security.
/// A request waits at most `acquire_timeout` for a connection: past it the
/// database counts as down (`503 unavailable`).
pub async fn api_database(
    url: &str,
    pool_size: u32,
    acquire_timeout: std::time::Duration,
) -> anyhow::Result<PgPool> {
    let pool = meson_db::scope::connect_scoped_with(url, pool_size, acquire_timeout)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    match meson_db::scope::bypasses_rls(&pool).await {
        Ok(true) => tracing::warn!(
            "the database role is a superuser or has BYPASSRLS: row-level security does not \
             apply to it, and only meson's own queries keep tenants apart; connect as an \
             ordinary role that owns meson's tables"
        ),
        Ok(false) => {}
        Err(e) => tracing::warn!(error = %e, "could not read the database role"),
    }
    Ok(pool)
}

/// Connects (the system scope: workers, migrations) and, unless told
/// otherwise, migrates.
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

/// A worker's own `/metrics` and `/healthz` (a worker process has no API),
/// until `stop`.
pub async fn serve_metrics(
    addr: SocketAddr,
    pool: PgPool,
    limits: ConnLimits,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>)> {
    let listener = bind("the metrics endpoint", "MESON_METRICS_ADDR", addr, false).await?;
    let addr = listener.local_addr()?;
    meson_api::metrics::handle();
    let router = axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let pool = pool.clone();
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8",
                        )],
                        meson_api::metrics::render(&pool).await,
                    )
                }
            }),
        )
        .route("/healthz", axum::routing::get(|| async { "ok" }));
    // The same limits as the API's listeners, and the same bounded drain.
    let (conns, cutter) = Connections::new(limits);
    let join = tokio::spawn(async move {
        let serve = crate::conn::serve_http(listener, router, conns, stop.clone());
        tokio::pin!(serve);
        tokio::select! {
            r = &mut serve => return r,
            _ = stop.wait_for(|s| *s) => {}
        }
        match tokio::time::timeout(limits.drain, &mut serve).await {
            Ok(r) => r,
            Err(_) => {
                cutter.cut();
                serve.await
            }
        }
    });
    tracing::info!(%addr, "metrics endpoint listening");
    Ok((addr, join))
}
