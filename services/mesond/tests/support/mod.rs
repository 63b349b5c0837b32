//! What the tests that run `mesond` as a process share: a scratch
//! directory that cleans up after itself (its private PostgreSQL included),
//! and a `mesond dev` process with its output collected.
#![allow(dead_code)] // each test file uses its own part of it

use meson_types::dev::DevServer;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A scratch directory, and every private PostgreSQL a test may have left
/// running in it: stopped, and the directory removed, when the test ends.
pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    /// A fresh directory under the temp dir, with `mode`.
    pub fn new(mode: u32) -> Scratch {
        use std::os::unix::fs::PermissionsExt;
        let dir =
            std::env::temp_dir().join(format!("mesond-dev-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
        Scratch {
            dir: dir.canonicalize().unwrap(),
        }
    }

    /// `mesond dev`'s data dir when started in the scratch dir.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join(".meson")
    }

    /// Where the data dir's cluster may be: in it, or (root, a data dir the
    /// `postgres` user cannot reach) under /var/lib/meson-dev.
    pub fn clusters(&self) -> [PathBuf; 2] {
        [
            self.data_dir().join("pg"),
            mesond::pg::shared_home(&self.data_dir()).join("pg"),
        ]
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for pg in self.clusters() {
            if pg.join("postmaster.pid").exists()
                && let Ok(bins) = mesond::pg::Binaries::find()
            {
                let mut c = if is_root() {
                    let mut c = Command::new("runuser");
                    c.args(["-u", "postgres", "--"]).arg(&bins.pg_ctl);
                    c
                } else {
                    Command::new(&bins.pg_ctl)
                };
                let _ = c
                    .current_dir("/")
                    .arg("stop")
                    .arg("-D")
                    .arg(&pg)
                    .args(["-m", "immediate", "-w"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
        let shared = mesond::pg::shared_home(&self.data_dir());
        if shared.exists() {
            let _ = std::fs::remove_dir_all(&shared);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A running `mesond dev`, its output collected.
pub struct Mesond {
    pub child: Child,
    out: Arc<Mutex<String>>,
    err: Arc<Mutex<String>>,
    pub data_dir: PathBuf,
    /// Its REST URL, from `dev.json`, once ready.
    pub base: String,
    server: Option<DevServer>,
}

/// Collects `from` into a string, line by line.
pub fn collect(from: impl std::io::Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let to = text.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            let mut t = to.lock().unwrap();
            t.push_str(&line);
            t.push('\n');
        }
    });
    text
}

/// `mesond <mode>` in `cwd`, with nothing of the caller's meson settings
/// and every listener on a free port unless `env` says otherwise.
pub fn mesond(mode: &str, cwd: &Path, env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mesond"));
    c.arg(mode).current_dir(cwd);
    for (k, _) in std::env::vars() {
        if k.starts_with("MESON_") || k == "DATABASE_URL" {
            c.env_remove(k);
        }
    }
    c.env("MESON_HTTP_ADDR", "127.0.0.1:0")
        .env("MESON_GRPC_ADDR", "127.0.0.1:0")
        .env("MESON_AUTOSCALER_ADDR", "127.0.0.1:0")
        .env("MESON_SIM_BOOT_MS", "50")
        .env("NO_COLOR", "1");
    for (k, v) in env {
        if v.is_empty() {
            c.env_remove(k);
        } else {
            c.env(k, v);
        }
    }
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

impl Mesond {
    /// `mesond dev` started in `cwd` (its data dir found from there).
    pub fn spawn(cwd: &Path, env: &[(&str, &str)]) -> Mesond {
        let mut child = mesond("dev", cwd, env).spawn().expect("mesond starts");
        let out = collect(child.stdout.take().unwrap());
        let err = collect(child.stderr.take().unwrap());
        Mesond {
            child,
            out,
            err,
            data_dir: cwd.join(".meson"),
            base: String::new(),
            server: None,
        }
    }

    pub fn output(&self) -> String {
        format!(
            "--- stdout\n{}--- stderr\n{}",
            self.out.lock().unwrap(),
            self.err.lock().unwrap()
        )
    }

    pub fn stdout(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for its `dev.json` and its `/readyz`.
    pub async fn wait_ready(&mut self, http: &reqwest::Client) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("mesond exited early: {status}\n{}", self.output());
            }
            if let Some(s) = DevServer::read(&self.data_dir)
                && s.pid == self.pid()
                && let Ok(r) = http.get(format!("{}/readyz", s.url)).send().await
                && r.status().is_success()
            {
                self.base = s.url.clone();
                self.server = Some(s);
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("mesond not ready in 90 s\n{}", self.output());
    }

    pub fn server(&self) -> &DevServer {
        self.server.as_ref().expect("ready")
    }

    pub fn postgres_dir(&self) -> PathBuf {
        self.server()
            .postgres_dir
            .clone()
            .expect("a private PostgreSQL")
    }

    pub fn token(&self) -> String {
        std::fs::read_to_string(&self.server().token_file)
            .expect("dev token written")
            .trim()
            .to_owned()
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .expect("kill");
        assert!(ok.success());
    }

    /// Waits for `what` on stdout.
    pub async fn wait_stdout(&mut self, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.stdout().contains(what) {
            assert!(
                Instant::now() < deadline,
                "no {what:?} in 60 s\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits for the process to end (within `limit`).
    pub async fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "mesond still running after {limit:?}\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        self.signal("-TERM");
        self.wait_exit(Duration::from_secs(60)).await
    }

    pub async fn get(&self, http: &reqwest::Client, path: &str) -> (u16, serde_json::Value) {
        let r = http
            .get(format!("{}{path}", self.base))
            .bearer_auth(self.token())
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or_default())
    }
}

impl Drop for Mesond {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn postmaster_running(pg: &Path) -> bool {
    pg.join("postmaster.pid").exists()
}

impl Mesond {
    /// Kills it as a crash would (`kill -9`) and reaps it.
    pub fn kill_9(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().unwrap();
    }

    /// POSTs `body` with the dev token.
    pub async fn post(
        &self,
        http: &reqwest::Client,
        path: &str,
        body: serde_json::Value,
    ) -> (u16, serde_json::Value) {
        let r = http
            .post(format!("{}{path}", self.base))
            .bearer_auth(self.token())
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or_default())
    }

    /// Waits (bounded) until action `id` has finished; returns it.
    pub async fn finished(&self, http: &reqwest::Client, id: &str) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (_, body) = self.get(http, &format!("/v1/actions/{id}")).await;
            let action = body["action"].clone();
            if action["status"] != "running" {
                return action;
            }
            assert!(
                Instant::now() < deadline,
                "action {id} still running after 120 s: {action}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
