//! What the tests that run `mesond` as a process share: a scratch
//! directory that cleans up after itself (its private PostgreSQL included),
//! and a `mesond dev` process with its output collected.
#![allow(dead_code)] // each test file uses its own part of it

pub mod ha;
pub mod pitr;

use meson_types::dev::DevServer;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
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

/// A loopback port nothing listens on now, for a child process to bind;
/// never one this test process handed out before (two tests running at
/// once got the same port, and one's mesond could not bind it). It is
/// taken below the kernel's ephemeral range (`ip_local_port_range`, 32768
/// and up by default), where the port the kernel picks for `:0` lies: there
/// any outgoing connection, of this process or another, may take it before
/// the child binds it (a Patroni node of the failover test could not).
pub fn free_port() -> u16 {
    const FIRST: u16 = 20_000;
    const SPAN: u16 = 12_000;
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    // Where this process starts looking, so that test processes running at
    // once start far apart.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let seed = (std::process::id() ^ nanos) % u32::from(SPAN);
    for step in 0..u32::from(SPAN) {
        let port = FIRST + ((seed + step) % u32::from(SPAN)) as u16;
        if !given.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.push(port);
            return port;
        }
    }
    panic!("no free loopback port from {FIRST} to {}", FIRST + SPAN);
}

/// The AtomOS simulator on loopback with the dev hosts, its VMs booting in
/// `boot_time`.
pub async fn simulator(boot_time: Duration) -> atomos_sim::Simulator {
    atomos_sim::start(atomos_sim::SimConfig {
        hosts: atomos_sim::dev_hosts(),
        boot_time,
        bind: [127, 0, 0, 1].into(),
        state: None,
    })
    .await
    .expect("simulator")
}

/// The simulator's targets in a fresh file (`MESON_TARGETS_FILE`) named
/// after `test`; the test removes it.
pub fn targets_file(sim: &atomos_sim::Simulator, test: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "meson-{test}-targets-{}.json",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::write(&path, serde_json::to_vec(&sim.targets()).unwrap()).unwrap();
    path
}

/// `mesond <mode>` on the database at `db_url`, for the tests that run
/// meson as processes: only this configuration (nothing of the environment
/// the tests run in leaks in, but `RUST_BACKTRACE`), jobs retried after 20
/// to 300 ms, `env` added; stdin and stdout closed, stderr shown.
pub fn mesond_on(mode: &str, db_url: &str, env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mesond"));
    c.env_clear();
    if let Some(bt) = std::env::var_os("RUST_BACKTRACE") {
        c.env("RUST_BACKTRACE", bt);
    }
    c.arg(mode)
        .env("DATABASE_URL", db_url)
        .env("MESON_JOB_RETRY_BASE_MS", "20")
        .env("MESON_JOB_RETRY_CAP_MS", "300")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    c
}

/// `mesond <mode>` of a test that runs meson as its deployments do: its
/// REST API on `http_port`, gRPC on any free port, tokens signed with
/// `jwt_secret`, secrets sealed with `secrets_key`, the hosts of `targets`
/// (a [`targets_file`]), a pool of 10; `env` added.
pub fn deployed(
    mode: &str,
    db_url: &str,
    targets: &str,
    http_port: u16,
    [jwt_secret, secrets_key]: [&str; 2],
    env: &[(&str, &str)],
) -> Process {
    let http_addr = format!("127.0.0.1:{http_port}");
    let mut all = vec![
        ("MESON_JWT_SECRET", jwt_secret),
        ("MESON_SECRETS_KEY", secrets_key),
        ("MESON_TARGETS_FILE", targets),
        ("MESON_HTTP_ADDR", http_addr.as_str()),
        ("MESON_GRPC_ADDR", "127.0.0.1:0"),
        ("MESON_DB_POOL", "10"),
    ];
    all.extend_from_slice(env);
    Process::spawn(mesond_on(mode, db_url, &all), &format!("mesond {mode}"))
}

/// The names of the VMs and of the volumes AtomOS holds on every host,
/// each sorted.
pub fn atomos_names(sim: &atomos_sim::Simulator) -> (Vec<String>, Vec<String>) {
    let (mut vms, mut vols) = (Vec::new(), Vec::new());
    for h in sim.hosts() {
        let inv = h.inventory();
        vms.extend(inv.vms.into_iter().map(|v| v.name));
        vols.extend(inv.volumes.into_iter().map(|v| v.name));
    }
    vms.sort();
    vols.sort();
    (vms, vols)
}

/// A child process, killed (and reaped) if the test ends before stopping it.
pub struct Process {
    /// What it is, and its pid.
    pub what: String,
    child: Option<Child>,
}

impl Process {
    pub fn spawn(mut command: Command, what: &str) -> Process {
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("{what} starts: {e}"));
        Process {
            what: format!("{what} (pid {})", child.id()),
            child: Some(child),
        }
    }

    fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("running")
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn sigterm(&mut self) {
        let sent = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success(), "SIGTERM to {}", self.what);
    }

    /// Kills it as a crash would (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        self.child().kill().expect("SIGKILL");
        let _ = self.child().wait();
        self.child = None;
    }

    /// SIGTERM, then its exit status once it has exited.
    pub fn stop(&mut self) -> ExitStatus {
        self.sigterm();
        let status = self.child().wait().expect("it exits");
        self.child = None;
        status
    }

    /// Its exit status, if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        let status = self.child().try_wait().unwrap();
        if status.is_some() {
            self.child = None;
        }
        status
    }

    /// Waits (bounded) for the process to exit after [`Process::sigterm`].
    pub async fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.exited() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not stop within {limit:?} of SIGTERM",
                self.what
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Resident memory, in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A `mesond worker` on `db_url` whose jobs are reclaimed `lease_ms` after
/// it dies, quick to poll AtomOS, its stderr discarded; `env` added.
pub fn worker_with(db_url: &str, lease_ms: &str, env: &[(&str, &str)]) -> Process {
    let mut base = vec![
        // 32 bytes, base64: workers refuse to start without a secrets key.
        (
            "MESON_SECRETS_KEY",
            "bWVzb24tY2hhb3MtdGVzdC1rZXktMzItYnl0ZXMhISE=",
        ),
        ("MESON_JOB_LEASE_MS", lease_ms),
        ("MESON_VM_POLL_MS", "20"),
        ("MESON_ATOMOS_TIMEOUT_MS", "700"),
        ("MESON_WORKER_CONCURRENCY", "8"),
        ("MESON_LOG", "warn"),
    ];
    base.extend_from_slice(env);
    let mut worker = mesond_on("worker", db_url, &base);
    if std::env::var_os("MESON_TEST_WORKER_LOG").is_none() {
        worker.stderr(Stdio::null());
    }
    Process::spawn(worker, "mesond worker")
}

/// [`worker_with`] and nothing added.
pub fn worker(db_url: &str, lease_ms: &str) -> Process {
    worker_with(db_url, lease_ms, &[])
}
