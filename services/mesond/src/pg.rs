//! A private PostgreSQL cluster for dev mode, in `<data dir>/pg`.
//!
//! Created with `initdb` on first start, reused afterwards, stopped on exit.
//! PostgreSQL refuses to run as root, so as root the server runs as the
//! `postgres` system user (through `runuser`), from `/` (a directory it can
//! enter). When `postgres` cannot reach the data dir (a clone under root's
//! private home), the cluster lives in
//! `/var/lib/meson-dev/<hash of the data dir>/pg` instead.

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::process::Command;

const INSTALL_HINT: &str = "PostgreSQL's server binaries (initdb, pg_ctl) were not found on PATH \
or under /usr/lib/postgresql/*/bin.\n  Install them:  Debian/Ubuntu: sudo apt-get install postgresql  \
| Fedora: sudo dnf install postgresql-server  | macOS: brew install postgresql@16\n  \
or point meson at an existing database:  DATABASE_URL=postgres://user@host:5432/db mesond dev";

/// Where `initdb` and `pg_ctl` live.
#[derive(Clone, Debug)]
pub struct Binaries {
    pub initdb: PathBuf,
    pub pg_ctl: PathBuf,
}

impl Binaries {
    /// Looks on PATH, then under Debian's `/usr/lib/postgresql/*/bin`.
    pub fn find() -> anyhow::Result<Binaries> {
        Binaries::find_in(std::env::var_os("PATH"), Path::new("/usr/lib/postgresql"))
    }

    pub fn find_in(
        path: Option<std::ffi::OsString>,
        versions_root: &Path,
    ) -> anyhow::Result<Binaries> {
        let in_dir = |dir: &Path| {
            let initdb = dir.join("initdb");
            let pg_ctl = dir.join("pg_ctl");
            (initdb.is_file() && pg_ctl.is_file()).then_some(Binaries { initdb, pg_ctl })
        };
        if let Some(path) = path
            && let Some(b) = std::env::split_paths(&path).find_map(|d| in_dir(&d))
        {
            return Ok(b);
        }
        // Debian keeps the server binaries off PATH; take the newest version.
        let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(versions_root)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
            .collect();
        versions.sort();
        versions
            .into_iter()
            .rev()
            .find_map(|(_, d)| in_dir(&d))
            .context(INSTALL_HINT)
    }
}

/// The role meson connects as, and its database (the cluster's first
/// versions used the superuser and a `meson` database, left as they were).
const APP_ROLE: &str = "meson_app";
const APP_DATABASE: &str = "meson_app";

/// A running private cluster.
pub struct PrivatePostgres {
    bins: Binaries,
    dir: PathBuf,
    run_as: Option<String>,
    pub port: u16,
    pub url: String,
}

fn is_root() -> bool {
    // `id -u` avoids unsafe libc calls; it is on every Unix.
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .is_some_and(|s| s.trim() == "0")
}

fn user_exists(name: &str) -> bool {
    std::process::Command::new("id")
        .arg(name)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(l.local_addr()?.port())
}

/// Where clusters live whose data dir `postgres` cannot reach.
pub const SHARED_ROOT: &str = "/var/lib/meson-dev";

/// `SHARED_ROOT/<hash of the canonical data dir>`: one per data dir.
pub fn shared_home(data_dir: &Path) -> PathBuf {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(data_dir.as_os_str().as_encoded_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    Path::new(SHARED_ROOT).join(hex)
}

/// Whether `user` can enter `dir` (every parent included).
async fn can_enter(user: &str, dir: &Path) -> bool {
    Command::new("runuser")
        .args(["-u", user, "--", "test", "-x"])
        .arg(dir)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success())
}

/// The cluster's directory for the (canonical) `data_dir`: `<data dir>/pg`,
/// unless the server runs as `user` and that user cannot reach it.
async fn cluster_dir(data_dir: &Path, user: Option<&str>) -> anyhow::Result<PathBuf> {
    let local = data_dir.join("pg");
    let Some(user) = user else {
        return Ok(local);
    };
    let shared = shared_home(data_dir);
    // Kept where an earlier start put it.
    if shared.join("pg/PG_VERSION").exists() {
        return Ok(shared.join("pg"));
    }
    if can_enter(user, data_dir).await {
        return Ok(local);
    }
    if local.join("PG_VERSION").exists() {
        bail!(
            "the private PostgreSQL cluster in {} cannot be reached by the '{user}' user it runs \
             as: let it through every parent directory (chmod o+x), or set MESON_DATA_DIR to a \
             directory outside private homes",
            local.display()
        );
    }
    std::fs::create_dir_all(&shared).with_context(|| {
        format!(
            "'{user}' cannot reach {} and {} cannot be created either: set MESON_DATA_DIR to a \
             directory '{user}' can reach (outside private homes)",
            data_dir.display(),
            shared.display()
        )
    })?;
    // Which data dir this cluster belongs to, for whoever looks.
    std::fs::write(shared.join("data-dir"), format!("{}\n", data_dir.display()))
        .with_context(|| format!("writing {}", shared.join("data-dir").display()))?;
    tracing::warn!(
        data_dir = %data_dir.display(),
        cluster = %shared.join("pg").display(),
        "PostgreSQL runs as '{user}', which cannot enter the data dir (a private home?): \
         its cluster is kept outside it"
    );
    Ok(shared.join("pg"))
}

impl PrivatePostgres {
    /// Starts (creating if needed) the cluster of `data_dir` and meson's
    /// database. A server already running on the cluster is adopted: the
    /// caller holds the data dir's lock, so it was left behind by a
    /// `mesond dev` that was killed.
    pub async fn start(data_dir: &Path) -> anyhow::Result<PrivatePostgres> {
        let bins = Binaries::find()?;
        let run_as = if is_root() {
            if !user_exists("postgres") {
                bail!(
                    "PostgreSQL refuses to run as root and there is no 'postgres' user to run it as; \
                     run mesond dev as a normal user or set DATABASE_URL"
                );
            }
            Some("postgres".to_owned())
        } else {
            None
        };
        let data_dir = data_dir
            .canonicalize()
            .with_context(|| format!("reading {}", data_dir.display()))?;
        let dir = cluster_dir(&data_dir, run_as.as_deref()).await?;
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let dir = dir.canonicalize()?;
        let mut pg = PrivatePostgres {
            bins,
            dir,
            run_as,
            port: 0,
            url: String::new(),
        };
        if let Some(user) = &pg.run_as {
            pg.run(
                Command::new("chown")
                    .args(["-R", &format!("{user}:{user}")])
                    .arg(&pg.dir),
                "chown",
            )
            .await?;
            pg.run(Command::new("chmod").arg("0700").arg(&pg.dir), "chmod")
                .await?;
        }
        if !pg.dir.join("PG_VERSION").exists() {
            tracing::info!(dir = %pg.dir.display(), "creating a private PostgreSQL cluster");
            let mut cmd = pg.command(&pg.bins.initdb);
            cmd.arg("-D").arg(&pg.dir).args([
                "-U",
                "meson",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-instructions",
            ]);
            pg.run(&mut cmd, "initdb").await?;
            let conf = "\n# meson dev: loopback TCP only, no socket files outside the data dir\n\
                        listen_addresses = '127.0.0.1'\nunix_socket_directories = ''\n\
                        max_connections = 200\n";
            let path = pg.dir.join("postgresql.conf");
            let mut text = tokio::fs::read_to_string(&path).await?;
            text.push_str(conf);
            tokio::fs::write(&path, text).await?;
        }
        pg.port = match pg.running_port().await {
            Some(port) => {
                // Nobody else uses it (this process holds the data dir's
                // lock): it was left by a `mesond dev` killed before it could
                // stop it. This process adopts it and stops it on exit like
                // one it started, so an orphan does not outlive the next run.
                tracing::warn!(
                    port,
                    dir = %pg.dir.display(),
                    "adopting the private PostgreSQL an earlier mesond dev left running \
                     (it was killed before it could stop it); it is stopped on exit"
                );
                port
            }
            None => pg.start_server().await?,
        };
        pg.url = format!(
            "postgres://{APP_ROLE}:{APP_ROLE}@127.0.0.1:{}/{APP_DATABASE}",
            pg.port
        );
        pg.ensure_database().await?;
        Ok(pg)
    }

    /// Starts the server on a free port. A port taken between choosing it
    /// and the server binding it (another process got it first) is retried
    /// on another; any other failure carries the end of the server's log.
    async fn start_server(&self) -> anyhow::Result<u16> {
        const TRIES: usize = 3;
        let log = self.dir.join("server.log");
        for attempt in 1..=TRIES {
            let port = free_port()?;
            let mut cmd = self.command(&self.bins.pg_ctl);
            cmd.arg("start")
                .arg("-D")
                .arg(&self.dir)
                .arg("-w")
                .args(["-t", "60"]);
            cmd.arg("-l").arg(&log).arg("-o").arg(format!("-p {port}"));
            let before = tokio::fs::metadata(&log).await.map_or(0, |m| m.len());
            match self.run(&mut cmd, "pg_ctl start").await {
                Ok(()) => {
                    tracing::info!(port, "started the private PostgreSQL");
                    return Ok(port);
                }
                Err(e) => {
                    let text = tokio::fs::read(&log).await.unwrap_or_default();
                    let start = usize::try_from(before).unwrap_or(0).min(text.len());
                    let tail = String::from_utf8_lossy(&text[start..]);
                    if attempt < TRIES && tail.contains("could not bind") {
                        tracing::info!(
                            port,
                            "port taken meanwhile; starting PostgreSQL on another"
                        );
                        continue;
                    }
                    let tail: Vec<&str> = tail.lines().rev().take(8).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    return Err(e.context(format!(
                        "PostgreSQL did not start; the end of {}:\n{}",
                        log.display(),
                        tail.join("\n")
                    )));
                }
            }
        }
        unreachable!("the last try returns")
    }

    /// The cluster's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `program` as the cluster's user, from `/`: the user may not be
    /// allowed into this process's working directory.
    fn command(&self, program: &Path) -> Command {
        let mut c = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(program);
                c
            }
            None => Command::new(program),
        };
        c.current_dir("/");
        c
    }

    async fn run(&self, cmd: &mut Command, what: &str) -> anyhow::Result<()> {
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .await
            .with_context(|| format!("running {what}"))?;
        if !out.status.success() {
            bail!(
                "{what} failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    /// The port of a server already running on this data directory, if any.
    async fn running_port(&self) -> Option<u16> {
        let mut status = self.command(&self.bins.pg_ctl);
        status
            .arg("status")
            .arg("-D")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if !status.status().await.ok()?.success() {
            return None;
        }
        // postmaster.pid: line 4 is the port.
        let pid = tokio::fs::read_to_string(self.dir.join("postmaster.pid"))
            .await
            .ok()?;
        pid.lines().nth(3)?.trim().parse().ok()
    }

    /// meson's role and database. The cluster's superuser (`meson`) creates
    /// them; meson itself connects as an ordinary role owning its tables,
    /// so row-level security binds dev mode as it binds a deployment.
    async fn ensure_database(&self) -> anyhow::Result<()> {
        let admin = format!("postgres://meson@127.0.0.1:{}/postgres", self.port);
        let pool = meson_db::connect(&admin, 1)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let created = async {
            let mut conn = pool.acquire().await.map_err(|e| {
                meson_core::Error::internal_from("connecting to the private PostgreSQL", e)
            })?;
            meson_db::testing::create_app_role_if_missing(&mut conn, APP_ROLE, APP_ROLE).await?;
            // The pool's one connection goes back for the next statement.
            drop(conn);
            meson_db::testing::create_database_if_missing(&pool, APP_DATABASE, APP_ROLE).await
        }
        .await;
        pool.close().await;
        created.map_err(|e| anyhow::anyhow!("creating meson's role and database: {e}"))
    }

    /// Crashes the server and starts it again on the same port (immediate
    /// shutdown, as a power cut: no checkpoint, WAL recovery on start). A
    /// fault for the tests that prove nothing committed is lost.
    pub async fn crash_restart(&self) -> anyhow::Result<()> {
        let mut cmd = self.command(&self.bins.pg_ctl);
        cmd.arg("restart")
            .arg("-D")
            .arg(&self.dir)
            .args(["-m", "immediate", "-w", "-t", "60"])
            .arg("-l")
            .arg(self.dir.join("server.log"));
        self.run(&mut cmd, "pg_ctl restart").await
    }

    /// Stops the server (fast shutdown: open sessions are cut).
    pub async fn stop(&self) -> anyhow::Result<()> {
        let mut cmd = self.command(&self.bins.pg_ctl);
        cmd.arg("stop")
            .arg("-D")
            .arg(&self.dir)
            .args(["-m", "fast", "-w"]);
        self.run(&mut cmd, "pg_ctl stop").await?;
        tracing::info!("stopped the private PostgreSQL");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_binaries_say_how_to_install_them() {
        let empty = std::env::temp_dir().join(format!("no-pg-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&empty).unwrap();
        let err = Binaries::find_in(Some(empty.clone().into_os_string()), &empty).unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("apt-get install postgresql"), "{msg}");
        assert!(msg.contains("DATABASE_URL"), "{msg}");
        std::fs::remove_dir_all(&empty).unwrap();
    }

    #[test]
    fn the_newest_debian_version_wins() {
        let root =
            std::env::temp_dir().join(format!("pg-versions-{}", uuid::Uuid::new_v4().simple()));
        for v in ["13", "16", "9"] {
            let bin = root.join(v).join("bin");
            std::fs::create_dir_all(&bin).unwrap();
            std::fs::write(bin.join("initdb"), "").unwrap();
            std::fs::write(bin.join("pg_ctl"), "").unwrap();
        }
        let b = Binaries::find_in(None, &root).unwrap();
        assert!(b.initdb.starts_with(root.join("16")), "{b:?}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
