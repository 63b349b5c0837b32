//! Configuration from the environment (12-factor), shared by every mode.

use anyhow::{Context, bail};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Config {
    /// `DATABASE_URL`; dev mode starts a private PostgreSQL when unset.
    pub database_url: Option<String>,
    /// `MESON_HTTP_ADDR`, default 127.0.0.1:8080.
    pub http_addr: SocketAddr,
    /// `MESON_GRPC_ADDR`, default 127.0.0.1:50051.
    pub grpc_addr: SocketAddr,
    /// Whether `MESON_HTTP_ADDR` / `MESON_GRPC_ADDR` were set: dev mode
    /// moves only a default address that is taken.
    pub http_addr_set: bool,
    pub grpc_addr_set: bool,
    /// `MESON_AUTOSCALER_ADDR`: where the clusters' autoscalers' endpoint
    /// (`externalgrpc`, mutual TLS) listens; unset: not served (dev mode:
    /// 127.0.0.1:50052).
    pub autoscaler_addr: Option<SocketAddr>,
    /// `MESON_METRICS_ADDR`: where `mesond worker` serves `/metrics` and
    /// `/healthz` (the API serves them on its own address); unset: not served.
    pub metrics_addr: Option<SocketAddr>,
    /// `MESON_AUTOSCALER_PUBLIC_ADDR`: the `host:port` autoscalers dial,
    /// default the listen address.
    pub autoscaler_public_addr: Option<String>,
    /// `MESON_AUTOSCALER_TLS_NAMES`: comma-separated DNS names and IPs the
    /// endpoint's certificate holds besides the public address's host.
    pub autoscaler_tls_names: Vec<String>,
    /// `MESON_DATA_DIR`: dev mode's state; default the nearest `.meson` in
    /// the working directory or a parent, else `./.meson`.
    pub data_dir: PathBuf,
    /// `MESON_JWT_SECRET`: HS256 secret; dev mode generates one.
    pub jwt_secret: Option<String>,
    /// `MESON_JWT_ISSUER`, default `meson`.
    pub jwt_issuer: String,
    /// `MESON_JWT_ALGORITHM`: the one algorithm tokens may use: HS256
    /// (default, with `MESON_JWT_SECRET`), RS256, ES256 or EdDSA (with
    /// `MESON_JWKS_FILE` or `MESON_JWKS_URL`).
    pub jwt_algorithm: String,
    /// `MESON_JWKS_FILE`: the identity provider's public keys, as a JWK set.
    pub jwks_file: Option<PathBuf>,
    /// `MESON_JWKS_URL`: where to fetch them (http or https).
    pub jwks_url: Option<String>,
    /// `MESON_JWKS_REFRESH_S`: how often the key set is re-read, default 300.
    pub jwks_refresh: Duration,
    /// `MESON_JWT_AUDIENCE`, default `meson`.
    pub jwt_audience: String,
    /// `MESON_JWT_LEEWAY_S`: clock skew allowed on `exp` and `nbf`, default 30.
    pub jwt_leeway: Duration,
    /// `MESON_JWT_TENANT_CLAIM` / `MESON_JWT_ROLES_CLAIM`: the claims naming
    /// the tenant and the roles, default `tenant` and `roles`.
    pub jwt_tenant_claim: String,
    pub jwt_roles_claim: String,
    /// `MESON_DEFAULT_QUOTAS`: every tenant's quotas unless set for it, as
    /// `vms=100,vcpus=512,ram_mib=1048576,storage_gb=20000,clusters=20,nodes=200,images_gb=1000`
    /// (names left out keep these defaults).
    pub default_quotas: meson_core::quota::Resources,
    /// `MESON_RATE_LIMIT_PER_MIN` / `MESON_RATE_LIMIT_POLL_PER_MIN`: requests a
    /// tenant may make a minute, default 600, and action reads, default 3000.
    pub rate_limits: meson_api::ratelimit::RateLimitConfig,
    /// `MESON_MAX_BODY_BYTES` (1 MiB), `MESON_MAX_JSON_DEPTH` (32),
    /// `MESON_MAX_HEADER_BYTES` (16 KiB), `MESON_REQUEST_TIMEOUT_S` (30).
    pub request_limits: meson_api::http::RequestLimits,
    /// `MESON_HTTP_HEADER_TIMEOUT_S` (10), `MESON_HTTP_IDLE_TIMEOUT_S` (60),
    /// `MESON_MAX_CONNECTIONS` (4096), `MESON_HTTP_DRAIN_S` (10): the
    /// clients' connections, REST and gRPC alike.
    pub connections: crate::conn::ConnLimits,
    /// `MESON_CORS_ORIGINS`: comma-separated browser origins allowed to
    /// call the API besides its own pages (the Electros dashboard's),
    /// default none.
    pub cors_origins: Vec<meson_edge::Origin>,
    /// The names the API answers to in `Host`: localhost and the loopback
    /// addresses, `MESON_ALLOWED_HOSTS` (comma-separated names,
    /// `*.example.com` for subdomains, `*` for any), the host of
    /// `MESON_PUBLIC_URL`, and, bound beyond loopback, any IP address.
    pub hosts: meson_edge::Hosts,
    /// `MESON_AUDIT_RETENTION_DAYS`: audit entries are kept this long, default 400.
    pub audit_retention_days: u32,
    /// `MESON_WORKER_CONCURRENCY`, default 32.
    pub worker_concurrency: usize,
    /// `MESON_DB_POOL`, default 20 connections.
    pub db_pool: u32,
    /// `MESON_DB_ACQUIRE_TIMEOUT_MS`: how long an API request waits for a
    /// database connection before the database counts as down (`503
    /// unavailable`, requests refused at once for a moment), default 3000.
    pub db_acquire_timeout: Duration,
    /// `MESON_DB_OUTAGE_HOLD_MS`: how long, in all, an API request that
    /// meets the database unreachable before touching it waits for it (a
    /// failover, a planned switchover) and runs again, before it answers
    /// `503`; 0 answers at once. Default 5000.
    pub db_hold: Duration,
    /// `MESON_TARGETS_FILE`: JSON array of AtomOS targets to register at start.
    pub targets_file: Option<PathBuf>,
    /// `MESON_SIM_BOOT_MS`: the dev simulator's VM boot time, default 2000.
    pub sim_boot: Duration,
    /// `MESON_VM_POLL_MS`: how often workflows poll AtomOS, default 1000.
    pub vm_poll: Duration,
    /// `MESON_JOB_POLL_MS`: the longest a due job waits to be picked up when
    /// no notification arrives, default 1000.
    pub job_poll: Duration,
    /// `MESON_JOB_LISTEN`: wake workers with PostgreSQL notifications,
    /// default true; false behind a pooler in transaction mode (polling only).
    pub job_listen: bool,
    /// `MESON_JOB_LEASE_MS`: a job not heartbeated for this long is reclaimed, default 30000.
    pub job_lease: Duration,
    /// `MESON_JOB_RETRY_BASE_MS` / `MESON_JOB_RETRY_CAP_MS`: retry backoff, default 500 / 60000.
    pub retry_base: Duration,
    pub retry_cap: Duration,
    /// `MESON_JOB_RETENTION_HOURS`: finished jobs are kept this long, default 168.
    pub job_retention: Duration,
    /// `MESON_SHUTDOWN_GRACE_S`: on SIGTERM (or Ctrl-C) running jobs get this
    /// long to finish before they are released to the queue, default 20.
    pub shutdown_grace: Duration,
    /// `MESON_ATOMOS_TIMEOUT_MS`: timeout of one AtomOS call, default 10000.
    pub atomos_timeout: Duration,
    /// `MESON_SECRETS_KEY`: 32 bytes in base64 (`openssl rand -base64 32`)
    /// sealing cluster secrets at rest; dev mode generates one.
    pub secrets_key: Option<String>,
    /// `MESON_PUBLIC_URL`: the API's base URL as guests reach it (their
    /// phone-home calls); default `http://<MESON_HTTP_ADDR>`.
    pub public_url: Option<String>,
    /// `MESON_NODE_READY_TIMEOUT_S`: how long a Kubernetes node may take to
    /// report its kubelet up, default 600.
    pub node_ready_timeout: Duration,
    /// `MESON_RECONCILE_INTERVAL_S`: how often each worker's reconciler
    /// looks at every cluster (automatic upgrades, repairs), default 30.
    pub reconcile_interval: Duration,
    /// `MESON_NODE_STARTUP_TIMEOUT_S`: auto-repair replaces a node that has
    /// not phoned home this long after its VM started running, default 600.
    pub node_startup_timeout: Duration,
    /// `MESON_REPAIR_MAX_UNHEALTHY_PERCENT`: auto-repair leaves a node group
    /// (control plane, or a pool) alone while more than this share of its
    /// nodes is unhealthy, default 40.
    pub repair_max_unhealthy_percent: u8,
    /// `MESON_BACKUPS_PER_HOST`: the most automatic backups the schedule
    /// has in progress on one AtomOS host at once, default 2.
    pub backups_per_host: u32,
    /// `MESON_CONSOLE_IDLE_S`: a console session whose client sends no
    /// input (keys, pointer, clipboard) this long is closed, default 900.
    pub console_idle: Duration,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The comma-separated list in the variable `name`.
pub(crate) fn list(name: &str) -> Vec<String> {
    var(name)
        .map(|v| {
            v.split(',')
                .map(|o| o.trim().to_owned())
                .filter(|o| !o.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// [`Config::hosts`].
fn hosts() -> anyhow::Result<meson_edge::Hosts> {
    let bind: SocketAddr = parse("MESON_HTTP_ADDR", SocketAddr::from(([127, 0, 0, 1], 8080)))?;
    let mut hosts = meson_edge::Hosts::new(bind.ip(), &list("MESON_ALLOWED_HOSTS"))
        .map_err(|e| anyhow::anyhow!("MESON_ALLOWED_HOSTS: {e}"))?;
    if let Some(url) = var("MESON_PUBLIC_URL") {
        hosts
            .add_url_host(&url)
            .map_err(|e| anyhow::anyhow!("MESON_PUBLIC_URL: {e}"))?;
    }
    Ok(hosts)
}

fn parse<T: std::str::FromStr>(name: &str, default: T) -> anyhow::Result<T>
where
    T::Err: std::fmt::Display,
{
    match var(name) {
        None => Ok(default),
        Some(v) => match v.parse() {
            Ok(x) => Ok(x),
            Err(e) => bail!("{name}={v:?} is invalid: {e}"),
        },
    }
}

/// [`parse`], refusing zero.
fn positive<T: std::str::FromStr + Default + PartialEq>(name: &str, default: T) -> anyhow::Result<T>
where
    T::Err: std::fmt::Display,
{
    let v = parse(name, default)?;
    if v == T::default() {
        bail!("{name} must be greater than 0");
    }
    Ok(v)
}

/// `MESON_REQUEST_TIMEOUT_S`, bounded: a request's idempotency key stays
/// claimed while it may run, and its claim is taken over (the request
/// presumed dead with its process) past a lease this must stay well under.
fn request_timeout() -> anyhow::Result<u64> {
    const MAX: u64 = (meson_db::idempotency::IN_FLIGHT_SECS / 3.0) as u64;
    let secs = positive("MESON_REQUEST_TIMEOUT_S", 30)?;
    if secs > MAX {
        bail!(
            "MESON_REQUEST_TIMEOUT_S must be at most {MAX}: an Idempotency-Key still claimed after {} s \
             is taken over, so no request may run that long",
            meson_db::idempotency::IN_FLIGHT_SECS
        );
    }
    Ok(secs)
}

impl Config {
    pub fn from_env() -> anyhow::Result<Config> {
        Ok(Config {
            database_url: var("DATABASE_URL"),
            http_addr: parse("MESON_HTTP_ADDR", SocketAddr::from(([127, 0, 0, 1], 8080)))?,
            grpc_addr: parse("MESON_GRPC_ADDR", SocketAddr::from(([127, 0, 0, 1], 50051)))?,
            http_addr_set: var("MESON_HTTP_ADDR").is_some(),
            grpc_addr_set: var("MESON_GRPC_ADDR").is_some(),
            autoscaler_addr: match var("MESON_AUTOSCALER_ADDR") {
                None => None,
                Some(v) => {
                    Some(v.parse().map_err(|e| {
                        anyhow::anyhow!("MESON_AUTOSCALER_ADDR={v:?} is invalid: {e}")
                    })?)
                }
            },
            autoscaler_public_addr: var("MESON_AUTOSCALER_PUBLIC_ADDR"),
            metrics_addr: match var("MESON_METRICS_ADDR") {
                None => None,
                Some(v) => Some(
                    v.parse()
                        .map_err(|e| anyhow::anyhow!("MESON_METRICS_ADDR={v:?} is invalid: {e}"))?,
                ),
            },
            autoscaler_tls_names: list("MESON_AUTOSCALER_TLS_NAMES"),
            data_dir: meson_types::dev::data_dir(
                var("MESON_DATA_DIR").map(PathBuf::from),
                // Only dev mode uses it: a vanished working directory must not
                // stop the other modes.
                &std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            ),
            jwt_secret: var("MESON_JWT_SECRET"),
            jwt_issuer: var("MESON_JWT_ISSUER").unwrap_or_else(|| "meson".into()),
            jwt_algorithm: var("MESON_JWT_ALGORITHM").unwrap_or_else(|| "HS256".into()),
            jwks_file: var("MESON_JWKS_FILE").map(PathBuf::from),
            jwks_url: var("MESON_JWKS_URL"),
            jwks_refresh: Duration::from_secs(parse("MESON_JWKS_REFRESH_S", 300)?),
            jwt_audience: var("MESON_JWT_AUDIENCE")
                .unwrap_or_else(|| meson_api::auth::AUDIENCE.into()),
            jwt_leeway: Duration::from_secs(parse("MESON_JWT_LEEWAY_S", 30)?),
            jwt_tenant_claim: var("MESON_JWT_TENANT_CLAIM").unwrap_or_else(|| "tenant".into()),
            jwt_roles_claim: var("MESON_JWT_ROLES_CLAIM").unwrap_or_else(|| "roles".into()),
            default_quotas: match var("MESON_DEFAULT_QUOTAS") {
                None => meson_core::quota::Resources::DEFAULT_QUOTAS,
                Some(v) => meson_core::quota::Resources::parse_list(
                    meson_core::quota::Resources::DEFAULT_QUOTAS,
                    &v,
                )
                .map_err(|e| anyhow::anyhow!("MESON_DEFAULT_QUOTAS={v:?} is invalid: {e}"))?,
            },
            rate_limits: meson_api::ratelimit::RateLimitConfig {
                api_per_minute: positive("MESON_RATE_LIMIT_PER_MIN", 600)?,
                polling_per_minute: positive("MESON_RATE_LIMIT_POLL_PER_MIN", 3000)?,
            },
            request_limits: meson_api::http::RequestLimits {
                body_bytes: positive("MESON_MAX_BODY_BYTES", 1024 * 1024)?,
                json_depth: positive("MESON_MAX_JSON_DEPTH", 32)?,
                header_bytes: positive("MESON_MAX_HEADER_BYTES", 16 * 1024)?,
                timeout: Duration::from_secs(request_timeout()?),
            },
            connections: crate::conn::ConnLimits {
                header_timeout: Duration::from_secs(positive("MESON_HTTP_HEADER_TIMEOUT_S", 10)?),
                idle_timeout: Duration::from_secs(positive("MESON_HTTP_IDLE_TIMEOUT_S", 60)?),
                max_connections: positive("MESON_MAX_CONNECTIONS", 4096)?,
                drain: Duration::from_secs(parse("MESON_HTTP_DRAIN_S", 10)?),
            },
            cors_origins: meson_edge::Edge::parse_origins(&list("MESON_CORS_ORIGINS"))
                .map_err(|e| anyhow::anyhow!("MESON_CORS_ORIGINS: {e}"))?,
            hosts: hosts()?,
            audit_retention_days: positive("MESON_AUDIT_RETENTION_DAYS", 400)?,
            worker_concurrency: parse("MESON_WORKER_CONCURRENCY", 32)?,
            db_pool: parse("MESON_DB_POOL", 20)?,
            db_acquire_timeout: Duration::from_millis(positive(
                "MESON_DB_ACQUIRE_TIMEOUT_MS",
                3000,
            )?),
            db_hold: Duration::from_millis(parse(
                "MESON_DB_OUTAGE_HOLD_MS",
                meson_db::outage::DEFAULT_HOLD.as_millis() as u64,
            )?),
            targets_file: var("MESON_TARGETS_FILE").map(PathBuf::from),
            sim_boot: Duration::from_millis(parse("MESON_SIM_BOOT_MS", 2000)?),
            vm_poll: Duration::from_millis(parse("MESON_VM_POLL_MS", 1000)?),
            job_lease: Duration::from_millis(parse("MESON_JOB_LEASE_MS", 30_000)?),
            job_poll: Duration::from_millis(positive("MESON_JOB_POLL_MS", 1000)?),
            job_listen: parse("MESON_JOB_LISTEN", true)?,
            retry_base: Duration::from_millis(parse("MESON_JOB_RETRY_BASE_MS", 500)?),
            retry_cap: Duration::from_millis(parse("MESON_JOB_RETRY_CAP_MS", 60_000)?),
            job_retention: Duration::from_secs(
                3600 * parse::<u64>("MESON_JOB_RETENTION_HOURS", 168)?,
            ),
            shutdown_grace: Duration::from_secs(parse("MESON_SHUTDOWN_GRACE_S", 20)?),
            atomos_timeout: Duration::from_millis(parse("MESON_ATOMOS_TIMEOUT_MS", 10_000)?),
            secrets_key: var("MESON_SECRETS_KEY"),
            public_url: var("MESON_PUBLIC_URL"),
            node_ready_timeout: Duration::from_secs(parse("MESON_NODE_READY_TIMEOUT_S", 600)?),
            reconcile_interval: Duration::from_secs(parse("MESON_RECONCILE_INTERVAL_S", 30)?),
            node_startup_timeout: Duration::from_secs(parse("MESON_NODE_STARTUP_TIMEOUT_S", 600)?),
            repair_max_unhealthy_percent: match parse("MESON_REPAIR_MAX_UNHEALTHY_PERCENT", 40u8)? {
                p @ 0..=100 => p,
                p => bail!("MESON_REPAIR_MAX_UNHEALTHY_PERCENT={p} is not a percentage (0..=100)"),
            },
            backups_per_host: match parse("MESON_BACKUPS_PER_HOST", 2u32)? {
                0 => bail!("MESON_BACKUPS_PER_HOST=0 would take no backup: give at least 1"),
                n => n,
            },
            console_idle: match parse("MESON_CONSOLE_IDLE_S", 900u64)? {
                0 => bail!("MESON_CONSOLE_IDLE_S=0 would close every console at once"),
                s => Duration::from_secs(s),
            },
        })
    }

    pub fn require_database_url(&self) -> anyhow::Result<&str> {
        self.database_url
            .as_deref()
            .context("DATABASE_URL must be set (e.g. postgres://meson@db:5432/meson)")
    }
}

impl Config {
    /// How bearer tokens are verified, from the environment.
    pub fn auth(&self) -> anyhow::Result<meson_api::auth::AuthConfig> {
        use jsonwebtoken::Algorithm;
        use meson_api::auth::{AuthConfig, KeySource};
        let algorithm = match self.jwt_algorithm.to_ascii_uppercase().as_str() {
            "HS256" => Algorithm::HS256,
            "RS256" => Algorithm::RS256,
            "ES256" => Algorithm::ES256,
            "EDDSA" => Algorithm::EdDSA,
            other => bail!("MESON_JWT_ALGORITHM={other:?}: use HS256, RS256, ES256 or EdDSA"),
        };
        let keys = match (algorithm, &self.jwt_secret, &self.jwks_file, &self.jwks_url) {
            (Algorithm::HS256, Some(secret), None, None) => {
                KeySource::Secret(secret.as_bytes().to_vec())
            }
            (Algorithm::HS256, _, _, _) => {
                bail!("HS256 needs MESON_JWT_SECRET (at least 32 characters) and no JWKS")
            }
            (_, None, Some(file), None) => KeySource::JwksFile(file.clone()),
            (_, None, None, Some(url)) => KeySource::JwksUrl(url.clone()),
            _ => bail!(
                "{} needs exactly one of MESON_JWKS_FILE and MESON_JWKS_URL, and no MESON_JWT_SECRET",
                self.jwt_algorithm
            ),
        };
        Ok(AuthConfig {
            audience: self.jwt_audience.clone(),
            leeway: self.jwt_leeway,
            refresh: self.jwks_refresh,
            tenant_claim: self.jwt_tenant_claim.clone(),
            roles_claim: self.jwt_roles_claim.clone(),
            ..AuthConfig::new(algorithm, keys, self.jwt_issuer.clone())
        })
    }

    /// The autoscalers' endpoint, when `listen` (or the configured address)
    /// is set.
    pub fn autoscaler(
        &self,
        listen: Option<SocketAddr>,
    ) -> Option<crate::server::AutoscalerSettings> {
        Some(crate::server::AutoscalerSettings {
            listen: self.autoscaler_addr.or(listen)?,
            public: self.autoscaler_public_addr.clone(),
            tls_names: self.autoscaler_tls_names.clone(),
        })
    }

    /// Dev mode's listeners that may move when their default address is
    /// taken: those whose variable is unset.
    pub fn dev_fallback(&self) -> crate::server::PortFallback {
        crate::server::PortFallback {
            http: !self.http_addr_set,
            grpc: !self.grpc_addr_set,
            autoscaler: self.autoscaler_addr.is_none(),
        }
    }

    /// The REST API's request handling, from the environment.
    pub fn api(&self) -> meson_api::http::ApiConfig {
        meson_api::http::ApiConfig {
            rate_limits: self.rate_limits,
            limits: self.request_limits,
            cors_origins: self.cors_origins.clone(),
            hosts: self.hosts.clone(),
            public_url: self.public_url.clone(),
            console: meson_api::console::ConsoleConfig {
                idle: self.console_idle,
                ..Default::default()
            },
        }
    }

    /// Worker settings from the environment.
    pub fn worker(&self) -> meson_jobs::WorkerConfig {
        meson_jobs::WorkerConfig {
            concurrency: self.worker_concurrency,
            lease: self.job_lease,
            poll_interval: self.job_poll,
            listen: self.job_listen,
            retention: self.job_retention,
            shutdown_grace: self.shutdown_grace,
            retry: meson_jobs::engine::RetryPolicy {
                base: self.retry_base,
                cap: self.retry_cap,
                ..meson_jobs::engine::RetryPolicy::default()
            },
            ..meson_jobs::WorkerConfig::default()
        }
    }

    /// The key sealing cluster secrets; required outside dev mode.
    pub fn require_secrets_key(&self) -> anyhow::Result<meson_kaas::SecretKey> {
        let raw = self.secrets_key.as_deref().context(
            "MESON_SECRETS_KEY must be set: 32 random bytes in base64 (openssl rand -base64 32)",
        )?;
        meson_kaas::SecretKey::from_base64(raw)
            .map_err(|e| anyhow::anyhow!("MESON_SECRETS_KEY: {e}"))
    }

    /// Workflow settings from the environment.
    pub fn workflows(&self) -> anyhow::Result<meson_workflows::WorkflowConfig> {
        Ok(meson_workflows::WorkflowConfig {
            poll_interval: self.vm_poll,
            node_ready_timeout: self.node_ready_timeout,
            public_url: self
                .public_url
                .clone()
                .unwrap_or_else(|| format!("http://{}", self.http_addr)),
            secrets_key: self.require_secrets_key()?,
            repair: self.repair(),
            backups_per_host: self.backups_per_host,
            quotas: self.default_quotas,
            ..meson_workflows::WorkflowConfig::default()
        })
    }

    /// Node auto-repair's settings from the environment.
    pub fn repair(&self) -> meson_workflows::auto_repair::RepairConfig {
        meson_workflows::auto_repair::RepairConfig {
            node_startup_timeout: self.node_startup_timeout,
            max_unhealthy_percent: self.repair_max_unhealthy_percent,
            ..meson_workflows::auto_repair::RepairConfig::default()
        }
    }

    /// AtomOS client settings from the environment.
    pub fn atomos(&self) -> atomos_driver::ClientOptions {
        atomos_driver::ClientOptions {
            timeout: self.atomos_timeout,
            ..atomos_driver::ClientOptions::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::Algorithm;
    use meson_api::auth::KeySource;

    fn config() -> Config {
        let mut c = Config::from_env().expect("the test environment's configuration");
        (c.jwt_secret, c.jwks_file, c.jwks_url) = (None, None, None);
        c
    }

    #[test]
    fn tokens_are_verified_with_one_algorithm_and_one_key_source() {
        let mut c = config();
        c.jwt_secret = Some("s".repeat(40));
        let a = c.auth().unwrap();
        assert_eq!(a.algorithm, Algorithm::HS256);
        assert!(matches!(a.keys, KeySource::Secret(_)));

        let mut c = config();
        c.jwt_algorithm = "rs256".into();
        c.jwks_url = Some("https://idp.example.test/jwks".into());
        c.jwt_audience = "meson-prod".into();
        let a = c.auth().unwrap();
        assert_eq!(
            (a.algorithm, a.audience.as_str()),
            (Algorithm::RS256, "meson-prod")
        );
        assert!(matches!(a.keys, KeySource::JwksUrl(_)));

        // A secret with a public-key algorithm, both JWKS sources, none, or
        // an algorithm meson does not pin: each is refused at start.
        for (alg, secret, file, url) in [
            ("ES256", true, true, false),
            ("EdDSA", false, true, true),
            ("EdDSA", false, false, false),
            ("HS256", true, true, false),
            ("none", true, false, false),
            ("HS512", true, false, false),
        ] {
            let mut c = config();
            c.jwt_algorithm = alg.into();
            c.jwt_secret = secret.then(|| "s".repeat(40));
            c.jwks_file = file.then(|| PathBuf::from("/etc/meson/jwks.json"));
            c.jwks_url = url.then(|| "https://idp.example.test/jwks".to_owned());
            assert!(c.auth().is_err(), "{alg} {secret} {file} {url}");
        }
    }
}
