//! One PostgreSQL that archives its WAL, backed up with `pg_basebackup`
//! and restored to the backup's point in time: what a restore from backup
//! does to meson's database, with PostgreSQL's own tools.
//!
//! Every part is a child process of the test on a loopback port, in a
//! scratch directory removed at the end; as root, PostgreSQL runs as the
//! `postgres` system user.

use super::ha::{as_postgres, give_to_postgres, postgres_bin};
use super::{Process, free_port};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// What the test needs; `None` when all of it is installed.
pub fn missing() -> Option<String> {
    let bin = postgres_bin()?;
    ["initdb", "postgres", "pg_basebackup"]
        .iter()
        .all(|t| bin.join(t).is_file())
        .then_some(())
        .map_or_else(
            || Some("missing PostgreSQL's initdb, postgres or pg_basebackup".to_owned()),
            |()| None,
        )
}

pub struct Pitr {
    pub dir: PathBuf,
    pub port: u16,
    bin: PathBuf,
    server: Option<Process>,
}

impl Pitr {
    /// A fresh instance archiving every WAL segment to `archive/`.
    pub async fn start() -> Pitr {
        let bin = postgres_bin().expect("PostgreSQL's server binaries");
        let dir =
            std::env::temp_dir().join(format!("meson-pitr-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(dir.join("archive")).unwrap();
        give_to_postgres(&dir);
        let mut init = as_postgres(&bin.join("initdb"));
        init.arg("-D")
            .arg(dir.join("data"))
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        assert!(init.status().unwrap().success(), "initdb");
        let mut pg = Pitr {
            dir,
            port: free_port(),
            bin,
            server: None,
        };
        pg.run("data", &[]).await;
        pg
    }

    /// A database URL on the instance.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    async fn run(&mut self, data: &str, extra: &[String]) {
        let archive = self.dir.join("archive");
        let mut c = as_postgres(&self.bin.join("postgres"));
        c.arg("-D").arg(self.dir.join(data));
        let mut settings = vec![
            "listen_addresses=127.0.0.1".to_owned(),
            format!("port={}", self.port),
            format!("unix_socket_directories={}", self.dir.display()),
            "fsync=off".to_owned(),
            "wal_level=replica".to_owned(),
            "archive_mode=on".to_owned(),
            format!(
                "archive_command=test ! -f {0}/%f && cp %p {0}/%f",
                archive.display()
            ),
            "max_connections=100".to_owned(),
        ];
        settings.extend_from_slice(extra);
        for s in settings {
            c.arg("-c").arg(s);
        }
        c.current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        if std::env::var_os("MESON_TEST_HA_LOG").is_none() {
            c.stderr(Stdio::null());
        }
        self.server = Some(Process::spawn(c, &format!("postgres ({data})")));
        self.wait_ready(Duration::from_secs(60)).await;
    }

    async fn wait_ready(&self, limit: Duration) {
        use sqlx::Connection;
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(mut c) = sqlx::PgConnection::connect(&self.url("postgres")).await {
                // A restore answers once it is promoted (read-write).
                let rw = sqlx::raw_sql(
                    "do $$ begin if pg_is_in_recovery() then raise 'recovering'; end if; end $$",
                )
                .execute(&mut c)
                .await;
                let _ = c.close().await;
                if rw.is_ok() {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "PostgreSQL ready within {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn create_database(&self, database: &str) {
        use sqlx::Connection;
        let mut c = sqlx::PgConnection::connect(&self.url("postgres"))
            .await
            .expect("connecting");
        sqlx::raw_sql(&format!("create database \"{database}\""))
            .execute(&mut c)
            .await
            .expect("create database");
        c.close().await.unwrap();
    }

    /// Takes a base backup (the WAL to make it consistent streamed into
    /// it) while the instance keeps working.
    pub fn base_backup(&self) {
        let mut c = as_postgres(&self.bin.join("pg_basebackup"));
        c.args([
            "-h",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-U",
            "postgres",
        ])
        .arg("-D")
        .arg(self.dir.join("backup"))
        .args(["-X", "stream", "-c", "fast", "--no-sync"])
        .stdin(Stdio::null())
        .stdout(Stdio::null());
        assert!(c.status().unwrap().success(), "pg_basebackup");
    }

    /// Stops the instance and starts a new one on the same port from the
    /// base backup, recovered to the backup's point in time (the first
    /// consistent one, `recovery_target = 'immediate'`) from the WAL
    /// archive, then promoted: the database as it was when the backup
    /// was taken, everything written since lost.
    pub async fn restore_backup(&mut self) {
        if let Some(mut server) = self.server.take() {
            server.sigterm(); // smart shutdown: meson is stopped already
            server.wait_exit(Duration::from_secs(30)).await;
        }
        let copy = std::process::Command::new("cp")
            .arg("-a")
            .arg(self.dir.join("backup"))
            .arg(self.dir.join("restored"))
            .status()
            .unwrap();
        assert!(copy.success(), "copying the backup");
        std::fs::write(self.dir.join("restored/recovery.signal"), "").unwrap();
        give_to_postgres(&self.dir);
        let archive = self.dir.join("archive");
        self.run(
            "restored",
            &[
                format!("restore_command=cp {}/%f %p", archive.display()),
                "recovery_target=immediate".to_owned(),
                "recovery_target_action=promote".to_owned(),
            ],
        )
        .await;
    }
}

impl Drop for Pitr {
    fn drop(&mut self) {
        self.server.take();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
