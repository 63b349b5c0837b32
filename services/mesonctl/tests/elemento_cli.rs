//! Elemento's own CLI (elemento-cli 0.2.1 from PyPI, unmodified) drives
//! meson through a whole flow (login, templates, a volume, a VM attaching
//! it, both destroyed, nothing left on AtomOS): against `mesond dev`'s
//! in-process daemons, and against `mesonctl elemento serve` in front of a
//! separate `mesond serve` process. elemento-cli hard-codes the daemons'
//! usual ports on localhost, so each test runs in a network namespace of its
//! own (`netns`), where those ports are free whatever else runs here.

#[path = "../../../tests/e2e/harness.rs"]
#[allow(dead_code)]
mod harness;
mod netns;

use harness::Meson;
use meson_elemento::Daemon;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn cli_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../meson-elemento/tests/elemento-cli")
}

/// The venv's `elemento.py` (made once by `setup`).
fn elemento() -> PathBuf {
    let out = Command::new(cli_dir().join("setup"))
        .output()
        .expect("running tests/elemento-cli/setup");
    assert!(
        out.status.success(),
        "setup failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// Runs `elemento ARGS` on a terminal through `drive.py`: (exit code, output).
fn run(elemento: &Path, answers: &[(&str, &str, &str)], args: &[&str]) -> (i32, String) {
    let mut cmd = Command::new("python3");
    cmd.arg(cli_dir().join("drive.py")).arg(elemento);
    for (kind, prompt, text) in answers {
        cmd.arg(kind).arg(prompt).arg(text);
    }
    cmd.arg("--").args(args);
    let out = cmd.output().expect("python3 runs drive.py");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap_or(-1), text)
}

/// Forgets elemento-cli's own login (a file in its site-packages).
fn forget_login(elemento: &Path) {
    let lib = elemento.parent().unwrap().parent().unwrap().join("lib");
    for python in std::fs::read_dir(lib).unwrap().flatten() {
        let cookie = python.path().join("site-packages/.elemento_login_cookie");
        let _ = std::fs::remove_file(cookie);
    }
}

async fn until<T, F, Fut>(what: &str, limit: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The meson behind the daemons, as the test checks it: its REST API (with
/// a token of the tenant logged in) and the simulator's control endpoint.
struct Backend {
    base: String,
    /// The login's password; `username` is its subject.
    token: String,
    username: String,
    /// The simulator's control endpoint (`GET /inventory`).
    control: String,
    http: reqwest::Client,
}

impl Backend {
    fn new(base: &str, token: &str, username: &str, control: &str) -> Backend {
        Backend {
            base: base.to_owned(),
            token: token.to_owned(),
            username: username.to_owned(),
            control: control.to_owned(),
            http: reqwest::Client::new(),
        }
    }

    /// `GET path` on meson's REST API: the body of a 200.
    async fn get(&self, path: &str) -> Value {
        let res = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        assert!(res.status().is_success(), "GET {path}: {}", res.status());
        res.json().await.expect("JSON")
    }

    /// Every VM and volume on every simulated host, from the simulator's
    /// control endpoint.
    async fn inventory(&self) -> (usize, usize) {
        let inv: Value = self
            .http
            .get(format!("{}/inventory", self.control))
            .send()
            .await
            .expect("the simulator's control endpoint")
            .json()
            .await
            .expect("JSON");
        let hosts = inv["hosts"].as_array().expect("hosts");
        let count = |key: &str| {
            hosts
                .iter()
                .map(|h| h[key].as_array().expect(key).len())
                .sum()
        };
        (count("vms"), count("volumes"))
    }
}

/// The id after `"vid":"` in `out` (the create's answer, as elemento-cli
/// prints it).
fn vid(out: &str) -> String {
    let start = out
        .find("\"vid\":\"")
        .unwrap_or_else(|| panic!("no vid in {out}"))
        + 7;
    let id = &out[start..start + 36];
    uuid::Uuid::parse_str(id).unwrap_or_else(|_| panic!("{id:?} is not an id: {out}"));
    id.to_owned()
}

/// The flow a person runs, checking outputs and exit codes.
async fn flow(m: &Backend, elemento: &Path) {
    forget_login(elemento);
    let (rc, out) = run(
        elemento,
        &[
            ("--line", "Write username", &m.username),
            ("--secret", "Password: ", &m.token),
        ],
        &["auth", "login"],
    );
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("Login successful"), "{out}");

    let (rc, out) = run(elemento, &[], &["info"]);
    assert_eq!(rc, 0, "{out}");
    assert_eq!(out.matches("online").count(), 4, "{out}");
    assert!(!out.contains("offline"), "{out}");

    let (rc, out) = run(elemento, &[], &["vm", "gettemplates"]);
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains("neon") && out.contains("2 X86_64 cores") && out.contains("2 GB"),
        "{out}"
    );

    let (rc, out) = run(elemento, &[], &["vm", "cancreate", "neon", "Linux"]);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("Availability confirmed by"), "{out}");

    // A standalone volume: 10 GB, made before the command returns.
    let (rc, out) = run(elemento, &[], &["volume", "cancreate", "--size", "10"]);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("Volume can be created on"), "{out}");
    let (rc, out) = run(elemento, &[], &["volume", "create", "--size", "10"]);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("Client replied"), "{out}");
    let volume = vid(&out);
    let v = m.get(&format!("/v1/volumes/{volume}")).await["volume"].clone();
    assert_eq!(v["status"], "available", "{v}");
    assert_eq!(v["size"], 10, "GB: {v}");
    assert_eq!(v["name"], "new-volume", "{v}");
    let (rc, out) = run(elemento, &[], &["volume", "list"]);
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains(&volume) && out.contains("new-volume") && out.contains("10 GB"),
        "{volume} in {out}"
    );
    let host = v["host"].as_str().expect("the volume's host").to_owned();
    assert!(out.contains(&host), "{host} in {out}");

    // A VM attaching it (`--volumes-json`: the new volume's `vid`).
    let volumes =
        std::env::temp_dir().join(format!("elemento-volumes-{}.json", uuid::Uuid::new_v4()));
    std::fs::write(&volumes, format!(r#"[{{"vid": "{volume}"}}]"#)).unwrap();
    let (rc, out) = run(
        elemento,
        &[],
        &[
            "vm",
            "create",
            "--spec-json",
            "neon",
            "--volumes-json",
            volumes.to_str().unwrap(),
        ],
    );
    let _ = std::fs::remove_file(&volumes);
    assert_eq!(rc, 0, "{out}");

    // meson's own view: the VM, running with an address, on the volume's host.
    let (id, ipv4) = until("the VM runs", Duration::from_secs(60), || async {
        let vms = m.get("/v1/vms").await;
        let vm = vms["vms"].as_array()?.first()?.clone();
        (vm["status"] == "running" && vm["ipv4"].is_string()).then(|| {
            assert_eq!(vm["host"], host.as_str(), "the volume pins the VM: {vm}");
            assert!(
                vm["volumes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|v| v["id"] == volume.as_str()),
                "{vm}"
            );
            (
                vm["id"].as_str().unwrap().to_owned(),
                vm["ipv4"].as_str().unwrap().to_owned(),
            )
        })
    })
    .await;
    let (rc, out) = run(elemento, &[], &["vm", "list"]);
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains(&id) && out.contains(&ipv4) && out.contains(&volume),
        "{id} {ipv4} {volume} in {out}"
    );
    assert!(
        out.contains("2 X86_64 cores") && out.contains("2 GB"),
        "{out}"
    );

    // Attached, the volume cannot go.
    let (rc, out) = run(elemento, &[], &["volume", "destroy", &volume]);
    assert_eq!(rc, 75, "EX_TEMPFAIL for an attached volume: {out}");

    let (rc, out) = run(elemento, &[], &["vm", "destroy", &id]);
    assert_eq!(rc, 0, "{out}");
    until("the VM is gone", Duration::from_secs(60), || async {
        let vms = m.get("/v1/vms").await;
        vms["vms"].as_array()?.is_empty().then_some(())
    })
    .await;
    until(
        "the volume outlives its VM, available",
        Duration::from_secs(60),
        || async {
            let v = m.get(&format!("/v1/volumes/{volume}")).await;
            (v["volume"]["status"] == "available").then_some(())
        },
    )
    .await;
    let (rc, out) = run(elemento, &[], &["volume", "destroy", &volume]);
    assert_eq!(rc, 0, "{out}");
    until("the volume is gone", Duration::from_secs(60), || async {
        let list = m.get("/v1/volumes").await;
        list["volumes"].as_array()?.is_empty().then_some(())
    })
    .await;
    let (rc, out) = run(elemento, &[], &["volume", "list"]);
    assert_eq!(rc, 0, "{out}");
    assert!(!out.contains(&volume), "{out}");
    assert_eq!(m.inventory().await, (0, 0), "nothing left on AtomOS");

    let (rc, out) = run(elemento, &[], &["vm", "destroy", &id]);
    assert_eq!(rc, 75, "EX_TEMPFAIL for a VM that is gone: {out}");
    let (rc, out) = run(elemento, &[], &["volume", "destroy", &volume]);
    assert_eq!(rc, 75, "EX_TEMPFAIL for a volume that is gone: {out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elemento_cli_against_mesond_dev() {
    // Made outside the namespace: pip needs the network.
    let elemento = elemento();
    if !netns::isolated("elemento_cli_against_mesond_dev").await {
        return;
    }
    let m = Meson::start_with(|o| {
        o.elemento = Some(meson_elemento::Config {
            fallback_ports: true,
            ..meson_elemento::Config::new("http://set-by-dev")
        });
    })
    .await;
    let gw = m
        .dev()
        .elemento
        .as_ref()
        .expect("mesond dev serves the daemons");
    let moved: Vec<String> = gw.moved().map(|l| l.name().to_owned()).collect();
    assert!(
        moved.is_empty(),
        "daemons moved off their usual ports: {moved:?}"
    );
    let backend = Backend::new(&m.base, &m.token, "dev", &m.sim().control_url());
    flow(&backend, &elemento).await;
    m.stop().await;
}

/// `mesond`, built beside this test's `mesonctl` (`cargo test --workspace`
/// builds every binary; a lone `cargo test -p mesonctl` builds it here).
fn mesond() -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_mesonctl")).with_file_name("mesond");
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "mesond"])
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building mesond");
    }
    path
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

const JWT_SECRET: &str = "meson-elemento-cli-test-secret-0123456789abcdef";
/// 32 bytes, base64.
const SECRETS_KEY: &str = "bWVzb24tZWxlbWVudG8tY2xpLXRlc3Qta2V5LTMyLWI=";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elemento_cli_against_mesonctl_elemento_serve() {
    let elemento = elemento();
    if !netns::isolated("elemento_cli_against_mesonctl_elemento_serve").await {
        return;
    }
    // A separate meson: `mesond serve` on a fresh database, its AtomOS
    // hosts a simulator of their own.
    let db = meson_db::testing::TestDatabase::new().await;
    let sim = atomos_sim::start(atomos_sim::SimConfig {
        hosts: atomos_sim::dev_hosts(),
        boot_time: Duration::from_millis(150),
        bind: [127, 0, 0, 1].into(),
        state: None,
    })
    .await
    .expect("simulator");
    let targets = std::env::temp_dir().join(format!(
        "meson-elemento-cli-targets-{}.json",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::write(&targets, serde_json::to_vec(&sim.targets()).unwrap()).unwrap();
    let port = free_port();
    let mut cmd = tokio::process::Command::new(mesond());
    // Only this configuration: nothing (`MESON_*`) leaks in.
    cmd.env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    let mut mesond = cmd
        .arg("serve")
        .env("DATABASE_URL", &db.url)
        .env("MESON_JWT_SECRET", JWT_SECRET)
        .env("MESON_SECRETS_KEY", SECRETS_KEY)
        .env("MESON_TARGETS_FILE", &targets)
        .env("MESON_HTTP_ADDR", format!("127.0.0.1:{port}"))
        .env("MESON_GRPC_ADDR", "127.0.0.1:0")
        .env("MESON_VM_POLL_MS", "50")
        .env("MESON_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("mesond serve starts");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = mesond.try_wait().unwrap() {
            panic!("mesond serve exited: {s}");
        }
        if let Ok(r) = http.get(format!("{base}/readyz")).send().await
            && r.status().is_success()
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "mesond serve not ready in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let token = meson_api::Auth::hs256(JWT_SECRET.as_bytes(), "meson").issue(
        "acme",
        "alice",
        meson_api::Role::Admin,
        chrono::Duration::minutes(30),
    );

    let mut serve = tokio::process::Command::new(env!("CARGO_BIN_EXE_mesonctl"))
        .args(["elemento", "serve", "--port", "0"])
        .env("MESON_URL", &base)
        .env("MESON_TOKEN", &token)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("mesonctl starts");
    // Serving once it printed every listener.
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(serve.stdout.take().unwrap()));
    let mut printed = String::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        printed.push_str(&line);
        printed.push('\n');
        if line.contains("all daemons") {
            break;
        }
    }
    for d in Daemon::ALL {
        assert!(
            printed.contains(&format!("127.0.0.1:{}", d.default_port())),
            "{printed}"
        );
    }
    let backend = Backend::new(&base, &token, "alice", &sim.control_url());
    flow(&backend, &elemento).await;
    serve.kill().await.unwrap();
    mesond.kill().await.unwrap();
    let _ = std::fs::remove_file(&targets);
}
