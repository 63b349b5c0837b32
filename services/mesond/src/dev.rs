//! `mesond dev`: the whole system on one machine, nothing to set up.

use crate::config::Config;
use crate::pg::PrivatePostgres;
use crate::server::{
    ApiServer, ApiSettings, PortFallback, api_database, database, register_targets, start_worker,
};
use anyhow::Context;
use meson_api::{Auth, Role};
use meson_jobs::{WorkerConfig, WorkerHandle};
use meson_types::dev::{DevServer, SERVER_FILE, TOKEN_FILE};
use meson_workflows::WorkflowConfig;
use rand::Rng;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The dev tenant every dev token belongs to.
pub const DEV_TENANT: &str = "dev";

#[derive(Clone, Debug)]
pub struct DevOptions {
    pub database_url: Option<String>,
    pub http_addr: SocketAddr,
    pub grpc_addr: SocketAddr,
    /// The autoscalers' endpoint (none: not served).
    pub autoscaler: Option<crate::server::AutoscalerSettings>,
    pub data_dir: PathBuf,
    pub jwt_secret: Option<String>,
    pub jwt_issuer: String,
    pub sim_boot: Duration,
    pub vm_poll: Duration,
    pub worker: WorkerConfig,
    /// Sealing cluster secrets; read from (or made in) the data dir when unset.
    pub secrets_key: Option<String>,
    /// How long a Kubernetes node may take to phone home.
    pub node_ready_timeout: Duration,
    /// How often the reconciler looks at every cluster.
    pub reconcile_interval: Duration,
    /// Node auto-repair's thresholds.
    pub repair: meson_workflows::auto_repair::RepairConfig,
    /// The most automatic backups in progress on one host at once.
    pub backups_per_host: u32,
    /// Rate limits, request limits and CORS.
    pub api: meson_api::http::ApiConfig,
    /// Every tenant's quotas unless set for it.
    pub quotas: meson_core::quota::Resources,
    /// Listeners that move to a free port when their (default) address is taken.
    pub fallback: PortFallback,
    /// The clients' connections: how many, how slow, how idle.
    pub connections: crate::conn::ConnLimits,
    /// Elemento's client daemons over this meson ([`elemento_from_env`];
    /// none: not served). Its meson URL and login are the dev API's.
    pub elemento: Option<meson_elemento::Config>,
}

impl DevOptions {
    pub fn from_config(c: &Config) -> DevOptions {
        DevOptions {
            database_url: c.database_url.clone(),
            http_addr: c.http_addr,
            grpc_addr: c.grpc_addr,
            autoscaler: c.autoscaler(Some(SocketAddr::from(([127, 0, 0, 1], 50052)))),
            data_dir: c.data_dir.clone(),
            jwt_secret: c.jwt_secret.clone(),
            jwt_issuer: c.jwt_issuer.clone(),
            sim_boot: c.sim_boot,
            vm_poll: c.vm_poll,
            worker: c.worker(),
            secrets_key: c.secrets_key.clone(),
            node_ready_timeout: c.node_ready_timeout,
            reconcile_interval: c.reconcile_interval,
            repair: c.repair(),
            backups_per_host: c.backups_per_host,
            api: c.api(),
            quotas: c.default_quotas,
            fallback: c.dev_fallback(),
            connections: c.connections,
            elemento: None,
        }
    }
}

/// The data dir's lock (`<data dir>/lock`, holding the holder's pid): one
/// `mesond dev` at a time uses a data dir. Held until dropped; the operating
/// system releases it when the process dies, however it dies.
#[derive(Debug)]
pub struct DataDirLock {
    _file: std::fs::File,
}

impl DataDirLock {
    /// Takes the lock, or says which `mesond dev` holds it.
    pub fn acquire(dir: &Path) -> anyhow::Result<DataDirLock> {
        use std::io::Write;
        let path = dir.join("lock");
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let pid = std::fs::read_to_string(&path).unwrap_or_default();
                let pid = pid.trim();
                let pid = if pid.is_empty() { "?" } else { pid };
                let url = match DevServer::read(dir) {
                    Some(s) if s.pid.to_string() == pid => format!("its REST API is {}", s.url),
                    _ => "it is still starting".to_owned(),
                };
                anyhow::bail!(
                    "another mesond dev (pid {pid}) is running on the data dir {}: {url}. Use \
                     that one, stop it (Ctrl-C in its terminal, or kill {pid}), or give this one \
                     another data dir with MESON_DATA_DIR",
                    dir.display()
                );
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", path.display()));
            }
        }
        file.set_len(0)
            .and_then(|()| writeln!(file, "{}", std::process::id()))
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(DataDirLock { _file: file })
    }
}

/// `mesond dev`'s Elemento gateway: on unless `MESON_ELEMENTO=false`, each
/// daemon on its usual port (`MESON_ELEMENTO_<DAEMON>_PORT`, `0`: any free
/// one) and all of them on `MESON_ELEMENTO_PORT`, on 127.0.0.1. A port in
/// use moves its daemon to a free port, and the banner says so. Browser
/// pages may call it from Electros' origins, or those of
/// `MESON_ELEMENTO_ALLOWED_ORIGINS` (comma-separated; `none`: its own
/// pages only); it answers to localhost, the loopback addresses and
/// `MESON_ELEMENTO_ALLOWED_HOSTS`.
pub fn elemento_from_env() -> anyhow::Result<Option<meson_elemento::Config>> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    match var("MESON_ELEMENTO").as_deref().map(str::trim) {
        None | Some("true" | "1" | "on") => {}
        Some("false" | "0" | "off") => return Ok(None),
        Some(other) => anyhow::bail!("MESON_ELEMENTO must be true or false, not {other:?}"),
    }
    let port = |name: String, default: u16| -> anyhow::Result<u16> {
        match var(&name) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| anyhow::anyhow!("{name} must be a port number, not {v:?}")),
        }
    };
    let mut cfg = meson_elemento::Config::new("http://127.0.0.1");
    for (d, p) in &mut cfg.ports {
        *p = port(
            format!("MESON_ELEMENTO_{}_PORT", d.name().to_uppercase()),
            *p,
        )?;
    }
    cfg.single_origin_port = Some(port(
        "MESON_ELEMENTO_PORT".into(),
        meson_elemento::server::DEFAULT_SINGLE_ORIGIN_PORT,
    )?);
    cfg.fallback_ports = true;
    cfg.set_allowed_origins(&crate::config::list("MESON_ELEMENTO_ALLOWED_ORIGINS"));
    cfg.allowed_hosts = crate::config::list("MESON_ELEMENTO_ALLOWED_HOSTS");
    Ok(Some(cfg))
}

/// Starts the Elemento gateway against the dev API, logged in as the dev
/// token.
async fn start_elemento(
    cfg: &Option<meson_elemento::Config>,
    api: SocketAddr,
    token: &str,
) -> anyhow::Result<Option<meson_elemento::Gateway>> {
    let Some(cfg) = cfg else { return Ok(None) };
    let cfg = meson_elemento::Config {
        meson_url: format!("http://{api}"),
        login_token: Some(token.to_owned()),
        ..cfg.clone()
    };
    let gw = meson_elemento::Gateway::start(cfg)
        .await
        .context("starting the Elemento daemons' gateway")?;
    for l in gw.moved() {
        tracing::warn!(
            daemon = l.name(),
            wanted = l.moved_from,
            now = %l.addr,
            "port in use: the Elemento daemon moved"
        );
    }
    Ok(Some(gw))
}

/// A running dev system.
pub struct Dev {
    pub http_addr: SocketAddr,
    pub grpc_addr: SocketAddr,
    /// Where the autoscalers' endpoint answers, if served.
    pub autoscaler_addr: Option<SocketAddr>,
    pub token: String,
    /// The file holding `token`.
    pub token_file: PathBuf,
    pub database_url: String,
    /// The private PostgreSQL cluster's directory, if one runs.
    pub postgres_dir: Option<PathBuf>,
    pub simulator: atomos_sim::Simulator,
    /// The workers' pool (the system scope: every tenant's rows).
    pub pool: meson_db::PgPool,
    /// Elemento's client daemons, if served.
    pub elemento: Option<meson_elemento::Gateway>,
    api: ApiServer,
    worker: WorkerHandle,
    pg: Option<PrivatePostgres>,
    data_dir: PathBuf,
    /// Released last, once everything else stopped.
    _lock: DataDirLock,
}

/// Reads the JWT secret from the data dir, creating it on first start.
async fn dev_secret(dir: &Path) -> anyhow::Result<String> {
    let path = dir.join("jwt-secret");
    if let Ok(s) = tokio::fs::read_to_string(&path).await
        && s.trim().len() >= 32
    {
        return Ok(s.trim().to_owned());
    }
    let secret: String = rand::thread_rng()
        .sample_iter(&rand::distributions::Alphanumeric)
        .take(48)
        .map(char::from)
        .collect();
    write_private(&path, &secret).await?;
    Ok(secret)
}

/// The dev key sealing cluster secrets, kept in the data dir so clusters
/// made in an earlier run stay readable.
async fn dev_secrets_key(dir: &Path) -> anyhow::Result<meson_kaas::SecretKey> {
    let path = dir.join("secrets-key");
    if let Ok(s) = tokio::fs::read_to_string(&path).await
        && let Ok(key) = meson_kaas::SecretKey::from_base64(s.trim())
    {
        return Ok(key);
    }
    let key = meson_kaas::SecretKey::generate();
    write_private(&path, &key.to_base64()).await?;
    Ok(key)
}

async fn write_private(path: &Path, content: &str) -> anyhow::Result<()> {
    tokio::fs::write(path, content)
        .await
        .with_context(|| format!("writing {}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tokio::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).await?;
    }
    Ok(())
}

impl Dev {
    /// Starts everything, holding the data dir's lock. Every listener
    /// binds, then `<data dir>/dev.json` tells clients where they are.
    pub async fn start(opts: DevOptions) -> anyhow::Result<Dev> {
        tokio::fs::create_dir_all(&opts.data_dir)
            .await
            .with_context(|| format!("creating {}", opts.data_dir.display()))?;
        let data_dir = opts
            .data_dir
            .canonicalize()
            .with_context(|| format!("reading {}", opts.data_dir.display()))?;
        let lock = DataDirLock::acquire(&data_dir)?;
        let pg = match &opts.database_url {
            Some(_) => None,
            None => Some(PrivatePostgres::start(&data_dir).await?),
        };
        let opts = DevOptions {
            data_dir: data_dir.clone(),
            ..opts
        };
        match Dev::start_with(&opts, pg.as_ref().map(|p| p.url.clone()), lock).await {
            Ok(mut dev) => {
                dev.postgres_dir = pg.as_ref().map(|p| p.dir().to_owned());
                dev.pg = pg;
                if let Err(e) = dev.write_server_file().await {
                    let _ = dev.shutdown().await;
                    return Err(e);
                }
                Ok(dev)
            }
            Err(e) => {
                // Leave nothing running behind a failed start.
                if let Some(pg) = pg {
                    let _ = pg.stop().await;
                }
                Err(e)
            }
        }
    }

    /// `<data dir>/dev.json`: where this process serves, for clients.
    async fn write_server_file(&self) -> anyhow::Result<()> {
        let server = DevServer {
            pid: std::process::id(),
            url: format!("http://{}", self.http_addr),
            grpc: self.grpc_addr.to_string(),
            autoscaler: self.autoscaler_addr.map(|a| a.to_string()),
            token_file: self.token_file.clone(),
            postgres_dir: self.postgres_dir.clone(),
        };
        let json = serde_json::to_string_pretty(&server)?;
        write_private(&self.data_dir.join(SERVER_FILE), &json).await
    }

    /// The workers: [`WorkerHandle::stop_claiming`] and
    /// [`WorkerHandle::release_now`] before [`Dev::shutdown`] choose how
    /// running jobs end.
    pub fn worker(&self) -> &WorkerHandle {
        &self.worker
    }

    async fn start_with(
        opts: &DevOptions,
        private_url: Option<String>,
        lock: DataDirLock,
    ) -> anyhow::Result<Dev> {
        let url = opts
            .database_url
            .clone()
            .or(private_url)
            .context("no database")?;
        let pool = database(&url, 20, true).await?;

        let simulator = atomos_sim::start(atomos_sim::SimConfig {
            hosts: atomos_sim::dev_hosts(),
            boot_time: opts.sim_boot,
            bind: [127, 0, 0, 1].into(),
            // Its VMs outlive a restart, like the database's rows.
            state: Some(opts.data_dir.join("atomos")),
        })
        .await
        .context("starting the AtomOS simulator")?;
        register_targets(&pool, &simulator.targets()).await?;

        let secret = match &opts.jwt_secret {
            Some(s) => s.clone(),
            None => dev_secret(&opts.data_dir).await?,
        };
        let auth = Auth::hs256(secret.as_bytes(), &opts.jwt_issuer);
        let token = auth.issue(DEV_TENANT, "dev", Role::Admin, chrono::Duration::days(30));
        let token_file = opts.data_dir.join(TOKEN_FILE);
        write_private(&token_file, &token).await?;

        let secrets_key = match &opts.secrets_key {
            Some(k) => meson_kaas::SecretKey::from_base64(k)
                .map_err(|e| anyhow::anyhow!("MESON_SECRETS_KEY: {e}"))?,
            None => dev_secrets_key(&opts.data_dir).await?,
        };
        // The API first: its address is where the guests phone home.
        let settings = ApiSettings {
            secrets_key: Some(secrets_key.clone()),
            api: opts.api.clone(),
            quotas: opts.quotas,
            grpc_addr: opts.grpc_addr,
            autoscaler: opts.autoscaler.clone(),
            fallback: opts.fallback,
            connections: opts.connections,
            ..ApiSettings::new(auth)
        };
        let api = ApiServer::start(
            opts.http_addr,
            api_database(&url, 20, meson_db::scope::ACQUIRE_TIMEOUT).await?,
            settings,
        )
        .await?;
        let worker = start_worker(
            pool.clone(),
            opts.worker.clone(),
            WorkflowConfig {
                poll_interval: opts.vm_poll,
                node_ready_timeout: opts.node_ready_timeout,
                public_url: format!("http://{}", api.addr),
                secrets_key,
                repair: opts.repair.clone(),
                backups_per_host: opts.backups_per_host,
                quotas: opts.quotas,
                ..WorkflowConfig::default()
            },
            atomos_driver::ClientOptions::default(),
            opts.reconcile_interval,
        );
        let elemento = match start_elemento(&opts.elemento, api.addr, &token).await {
            Ok(g) => g,
            Err(e) => {
                api.shutdown().await;
                worker.shutdown().await;
                simulator.shutdown().await;
                return Err(e);
            }
        };
        Ok(Dev {
            elemento,
            http_addr: api.addr,
            grpc_addr: api.grpc_addr,
            autoscaler_addr: api.autoscaler_addr,
            token,
            token_file,
            database_url: url,
            postgres_dir: None,
            simulator,
            pool,
            api,
            worker,
            pg: None,
            data_dir: opts.data_dir.clone(),
            _lock: lock,
        })
    }

    /// Stops the workers first, while the API and the simulator still serve
    /// their jobs (guests phone home, VMs boot): running jobs finish within
    /// the grace period, or are released at once after
    /// [`WorkerHandle::release_now`]. Then the API, the simulator and the
    /// private PostgreSQL; the data dir's lock goes last.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.worker.shutdown().await;
        if let Some(gw) = self.elemento {
            gw.shutdown().await;
        }
        self.api.shutdown().await;
        let _ = tokio::fs::remove_file(self.data_dir.join(SERVER_FILE)).await;
        self.simulator.shutdown().await;
        self.pool.close().await;
        if let Some(pg) = self.pg {
            pg.stop().await?;
        }
        Ok(())
    }
}
