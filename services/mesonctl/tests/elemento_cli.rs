//! Elemento's own CLI (elemento-cli 0.2.1 from PyPI, unmodified) drives
//! meson: against `mesond dev`'s in-process daemons, and against
//! `mesonctl elemento serve` in front of a separate meson. elemento-cli
//! hard-codes the daemons' usual ports on localhost, so these tests take a
//! machine-wide lock and fail, naming the port, if something else holds one.

#[path = "../../../tests/e2e/harness.rs"]
#[allow(dead_code)]
mod harness;

use harness::Meson;
use meson_elemento::Daemon;
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

/// Holds the usual ports for this test: a file lock shared by every test
/// that needs them, then a check that nothing else listens there.
fn usual_ports() -> std::fs::File {
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::env::temp_dir().join("meson-elemento-usual-ports.lock"))
        .expect("the lock file");
    lock.lock().expect("the usual ports' lock");
    for d in Daemon::ALL {
        let port = d.default_port();
        if let Err(e) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            panic!(
                "port {port} ({} daemon) on 127.0.0.1 is taken by another process ({e}); \
                 elemento-cli only talks to the usual ports: free it and run again",
                d.name()
            );
        }
    }
    lock
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

/// The flow a person runs, checking outputs and exit codes.
async fn flow(m: &Meson, elemento: &Path) {
    forget_login(elemento);
    let (rc, out) = run(
        elemento,
        &[
            ("--line", "Write username", "dev"),
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

    let volumes =
        std::env::temp_dir().join(format!("elemento-volumes-{}.json", uuid::Uuid::new_v4()));
    std::fs::write(&volumes, "[]").unwrap();
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
    assert_eq!(rc, 0, "{out}");
    let _ = std::fs::remove_file(&volumes);

    // meson's own view: the VM, running with an address.
    let (id, ipv4) = until("the VM runs", Duration::from_secs(60), || async {
        let vms = m.get("/v1/vms").await.body;
        let vm = vms["vms"].as_array()?.first()?.clone();
        (vm["status"] == "running" && vm["ipv4"].is_string()).then(|| {
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
        out.contains(&id) && out.contains(&ipv4),
        "{id} {ipv4} in {out}"
    );
    assert!(
        out.contains("2 X86_64 cores") && out.contains("2 GB"),
        "{out}"
    );

    let (rc, out) = run(elemento, &[], &["vm", "destroy", &id]);
    assert_eq!(rc, 0, "{out}");
    until("the VM is gone", Duration::from_secs(60), || async {
        let vms = m.get("/v1/vms").await.body;
        vms["vms"].as_array()?.is_empty().then_some(())
    })
    .await;
    assert_eq!(m.inventory_counts().0, 0, "no VM left on AtomOS");
    let (rc, out) = run(elemento, &[], &["vm", "destroy", &id]);
    assert_eq!(rc, 75, "EX_TEMPFAIL for a VM that is gone: {out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elemento_cli_against_mesond_dev() {
    let elemento = elemento();
    let _ports = usual_ports();
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
    flow(&m, &elemento).await;
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elemento_cli_against_mesonctl_elemento_serve() {
    let elemento = elemento();
    let _ports = usual_ports();
    let m = Meson::start().await;
    let mut serve = tokio::process::Command::new(env!("CARGO_BIN_EXE_mesonctl"))
        .args(["elemento", "serve", "--port", "0"])
        .env("MESON_URL", &m.base)
        .env("MESON_TOKEN", &m.token)
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
    flow(&m, &elemento).await;
    serve.kill().await.unwrap();
    m.stop().await;
}
