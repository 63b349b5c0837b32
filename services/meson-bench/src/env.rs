//! What every section runs on: one PostgreSQL server (private and tuned, or
//! `DATABASE_URL`'s), a fresh database per measurement, pgbench, and mesond
//! as a child process whose peak memory is read from `/proc`.

use anyhow::{Context, bail, ensure};
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, Executor, PgConnection, PgPool};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// The ordinary role meson connects as (row-level security binds it).
pub const APP_ROLE: &str = "meson_bench_app";

pub struct Env {
    /// The server as its superuser reaches it (any database), as a libpq
    /// URL (pgbench and node read it too).
    admin: reqwest::Url,
    private: Option<mesond::pg::PrivatePostgres>,
    /// Scratch space: `target/bench`.
    pub work: PathBuf,
    /// The mesond binary (release build, next to this one).
    pub mesond: PathBuf,
    /// The benchmark crate's own directory (pgbench scripts, graphile).
    pub root: PathBuf,
    /// Memory of each mesond this run started, by what it ran: resident
    /// once it answered, and at its peak.
    pub rss: std::sync::Mutex<BTreeMap<String, Rss>>,
    /// The server's settings that matter to the figures.
    pub pg_settings: Vec<(String, String)>,
}

/// A mesond's resident memory, bytes.
#[derive(Clone, Copy, Debug)]
pub struct Rss {
    pub started: u64,
    pub peak: u64,
}

/// A fresh database with meson's schema (or empty).
#[derive(Clone)]
pub struct Db {
    pub name: String,
    /// As the superuser.
    pub admin_url: String,
    /// As [`APP_ROLE`].
    pub app_url: String,
}

impl Env {
    pub async fn start(work: PathBuf, mesond: PathBuf) -> anyhow::Result<Env> {
        std::fs::create_dir_all(&work)?;
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        ensure!(
            mesond.exists(),
            "no mesond binary at {} (build it: cargo build --release -p mesond)",
            mesond.display()
        );
        let (admin, private) = match std::env::var("DATABASE_URL") {
            Ok(url) if !url.trim().is_empty() => {
                let url = reqwest::Url::parse(&url).context("DATABASE_URL")?;
                (url, None)
            }
            _ => {
                let pg = private_postgres(&work.join("pg")).await?;
                let url = reqwest::Url::parse(&format!(
                    "postgres://meson@127.0.0.1:{}/postgres",
                    pg.port
                ))?;
                (url, Some(pg))
            }
        };
        let mut env = Env {
            admin,
            private,
            work,
            mesond,
            root,
            rss: Default::default(),
            pg_settings: Vec::new(),
        };
        let mut c = env.admin_conn("postgres").await?;
        let superuser: bool =
            sqlx::query_scalar("select rolsuper from pg_roles where rolname = current_user")
                .fetch_one(&mut c)
                .await?;
        ensure!(
            superuser,
            "the benchmark needs a superuser connection (it creates databases and roles)"
        );
        meson_db::testing::create_app_role_if_missing(&mut c, APP_ROLE, APP_ROLE)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        for name in [
            "server_version",
            "shared_buffers",
            "max_wal_size",
            "synchronous_commit",
            "fsync",
            "wal_sync_method",
            "max_connections",
        ] {
            let v: String = sqlx::query_scalar("select current_setting($1)")
                .bind(name)
                .fetch_one(&mut c)
                .await?;
            env.pg_settings.push((name.to_owned(), v));
        }
        ensure!(
            env.pg_settings
                .iter()
                .any(|(k, v)| k == "synchronous_commit" && v != "off")
                && env
                    .pg_settings
                    .iter()
                    .any(|(k, v)| k == "fsync" && v == "on"),
            "the server does not commit durably (fsync or synchronous_commit is off): figures would be meaningless"
        );
        c.close().await.ok();
        Ok(env)
    }

    /// The server's URL for database `db`, as `role` (the superuser when none).
    fn url(&self, db: &str, role: Option<&str>) -> String {
        let mut u = self.admin.clone();
        u.set_path(&format!("/{db}"));
        if let Some(r) = role {
            let _ = u.set_username(r);
            let _ = u.set_password(Some(r));
        }
        u.to_string()
    }

    async fn admin_conn(&self, db: &str) -> anyhow::Result<PgConnection> {
        let url = self.url(db, None);
        PgConnection::connect(&url)
            .await
            .with_context(|| format!("connecting to PostgreSQL ({url})"))
    }

    /// Drops and creates database `name`, owned by [`APP_ROLE`]; with
    /// `meson`, runs meson's migrations on it.
    pub async fn fresh_db(&self, name: &str, meson: bool) -> anyhow::Result<Db> {
        let name = format!("meson_bench_{name}");
        let mut c = self.admin_conn("postgres").await?;
        c.execute(format!("drop database if exists {name} with (force)").as_str())
            .await?;
        c.execute(format!("create database {name} owner {APP_ROLE}").as_str())
            .await?;
        c.close().await.ok();
        let admin_url = self.url(&name, None);
        let app_url = self.url(&name, Some(APP_ROLE));
        let db = Db {
            name,
            admin_url,
            app_url,
        };
        if meson {
            let pool = db.pool(2).await?;
            meson_db::migrate(&pool)
                .await
                .map_err(|e| anyhow::anyhow!("migrating {}: {e}", db.name))?;
            pool.close().await;
        }
        Ok(db)
    }

    /// Runs pgbench: `clients` connections, `transactions` each, the scripts
    /// given (each with its weight). Returns transactions a second and the
    /// wall time. Any failed transaction fails the run.
    pub async fn pgbench(
        &self,
        db: &Db,
        scripts: &[&str],
        clients: u32,
        transactions: u64,
        vars: &[(&str, String)],
    ) -> anyhow::Result<(f64, Duration)> {
        let mut cmd = Command::new(pgbench()?);
        cmd.args(["-n", "-r", "-M", "prepared"])
            .args(["-c", &clients.to_string(), "-j", "2"])
            .args(["-t", &transactions.to_string()]);
        for s in scripts {
            cmd.arg("-f").arg(self.root.join("pgbench").join(s));
        }
        for (k, v) in vars {
            cmd.arg("-D").arg(format!("{k}={v}"));
        }
        cmd.arg(&db.admin_url);
        let started = Instant::now();
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .await
            .context("running pgbench")?;
        let took = started.elapsed();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            bail!("pgbench failed ({}): {stdout}{stderr}", out.status);
        }
        let failed = stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix("number of failed transactions: "))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        ensure!(
            failed == 0,
            "pgbench: {failed} transactions failed:\n{stdout}{stderr}"
        );
        let tps = stdout
            .lines()
            .find_map(|l| l.strip_prefix("tps = "))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .with_context(|| format!("no tps in pgbench's output:\n{stdout}"))?;
        Ok((tps, took))
    }

    /// Starts `mesond <mode>` on `db` with `env` on top of the defaults;
    /// returns once its HTTP endpoint answers (or, for a worker, at once).
    pub async fn mesond(
        &self,
        label: &str,
        mode: &str,
        db: &Db,
        http: Option<SocketAddr>,
        vars: &[(&str, String)],
    ) -> anyhow::Result<Mesond> {
        let log = self.work.join(format!("mesond-{label}.log"));
        // Warnings only, unless MESON_BENCH_LOG asks for more (a timeline
        // costs the run some time: keep it out of a run of record).
        let log_level = std::env::var("MESON_BENCH_LOG").unwrap_or_else(|_| "warn".to_owned());
        let file = std::fs::File::create(&log)?;
        let mut cmd = Command::new(&self.mesond);
        cmd.arg(mode)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("DATABASE_URL", &db.app_url)
            .env("MESON_LOG", &log_level)
            .env("RUST_LOG", &log_level)
            .env("MESON_DATA_DIR", self.work.join(format!("data-{label}")));
        if let Some(addr) = http {
            cmd.env("MESON_HTTP_ADDR", addr.to_string());
        }
        cmd.env("MESON_GRPC_ADDR", format!("127.0.0.1:{}", free_port()?));
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", self.mesond.display()))?;
        let mut m = Mesond {
            label: label.to_owned(),
            child,
            log,
            started_rss: 0,
        };
        if let Some(addr) = http {
            let url = format!("http://{addr}/healthz");
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                if let Ok(r) = reqwest::get(&url).await
                    && r.status().is_success()
                {
                    break;
                }
                if let Ok(Some(status)) = m.child.try_wait() {
                    bail!("mesond {mode} exited ({status}): see {}", m.log.display());
                }
                ensure!(
                    Instant::now() < deadline,
                    "mesond {mode} did not answer on {addr} in 60 s: see {}",
                    m.log.display()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        m.started_rss = m.status("VmRSS:")?;
        Ok(m)
    }

    /// Stops `m` (SIGTERM, then a kill), recording its peak memory.
    pub async fn stop(&self, mut m: Mesond) -> anyhow::Result<u64> {
        let peak = m.peak_rss()?;
        self.rss
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .insert(
                m.label.clone(),
                Rss {
                    started: m.started_rss,
                    peak,
                },
            );
        if let Some(pid) = m.child.id() {
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await;
        }
        match tokio::time::timeout(Duration::from_secs(30), m.child.wait()).await {
            Ok(_) => {}
            Err(_) => {
                m.child.kill().await.ok();
            }
        }
        Ok(peak)
    }

    pub async fn shutdown(self) -> anyhow::Result<()> {
        if let Some(pg) = self.private {
            pg.stop().await?;
        }
        Ok(())
    }
}

impl Db {
    pub async fn pool(&self, size: u32) -> anyhow::Result<PgPool> {
        PgPoolOptions::new()
            .max_connections(size)
            .connect(&self.app_url)
            .await
            .with_context(|| format!("connecting to {}", self.name))
    }

    pub async fn admin_pool(&self, size: u32) -> anyhow::Result<PgPool> {
        PgPoolOptions::new()
            .max_connections(size)
            .connect(&self.admin_url)
            .await
            .with_context(|| format!("connecting to {}", self.name))
    }
}

/// A running mesond.
pub struct Mesond {
    label: String,
    child: Child,
    pub log: PathBuf,
    started_rss: u64,
}

impl Mesond {
    /// Its peak resident set so far (`VmHWM`), in bytes.
    pub fn peak_rss(&self) -> anyhow::Result<u64> {
        self.status("VmHWM:")
    }

    /// A size in `/proc/<pid>/status`, in bytes.
    fn status(&self, field: &str) -> anyhow::Result<u64> {
        let pid = self.child.id().context("mesond has exited")?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("no {field} in /proc/{pid}/status"))?;
        Ok(kb * 1024)
    }

    /// Fails if it died.
    pub fn alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "mesond exited ({status}) mid-run: see {}",
                self.log.display()
            );
        }
        Ok(())
    }
}

pub fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(l.local_addr()?.port())
}

pub fn free_addr() -> anyhow::Result<SocketAddr> {
    Ok(SocketAddr::from(([127, 0, 0, 1], free_port()?)))
}

fn pgbench() -> anyhow::Result<PathBuf> {
    let bins = mesond::pg::Binaries::find()?;
    let beside = bins.initdb.with_file_name("pgbench");
    if beside.exists() {
        return Ok(beside);
    }
    which("pgbench")
        .context("pgbench not found (Debian: apt-get install postgresql-contrib or postgresql)")
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}

/// A private server tuned as BENCHMARKS.md records (shared_buffers 1 GB,
/// max_wal_size 4 GB, durable commits), so the raw figures compare.
async fn private_postgres(dir: &Path) -> anyhow::Result<mesond::pg::PrivatePostgres> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let pg = mesond::pg::PrivatePostgres::start(dir).await?;
    let admin = format!("postgres://meson@127.0.0.1:{}/postgres", pg.port);
    let mut c = PgConnection::connect(&admin).await?;
    let shared: String = sqlx::query_scalar("select current_setting('shared_buffers')")
        .fetch_one(&mut c)
        .await?;
    if shared == "1GB" {
        return Ok(pg);
    }
    for sql in [
        "alter system set shared_buffers = '1GB'",
        "alter system set max_wal_size = '4GB'",
        "alter system set max_connections = 300",
    ] {
        c.execute(sql).await?;
    }
    c.close().await.ok();
    pg.stop().await?;
    mesond::pg::PrivatePostgres::start(dir).await
}
