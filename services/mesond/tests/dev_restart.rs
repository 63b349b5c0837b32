//! `mesond dev` killed with `kill -9` while VMs are being created, then
//! started again on the same data dir: the simulated AtomOS hosts kept their
//! VMs (write-through state in `<data dir>/atomos/`), so every create
//! finishes and the VMs work, on the hosts' new ports.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `mesond dev` process, killed when dropped (a failed test leaves none).
struct Mesond {
    child: Child,
}

impl Mesond {
    fn spawn(data_dir: &Path, port: u16) -> Mesond {
        let child = Command::new(env!("CARGO_BIN_EXE_mesond"))
            .arg("dev")
            .env_remove("DATABASE_URL")
            .env("MESON_DATA_DIR", data_dir)
            .env("MESON_HTTP_ADDR", format!("127.0.0.1:{port}"))
            .env("MESON_GRPC_ADDR", "127.0.0.1:0")
            .env("MESON_AUTOSCALER_ADDR", "127.0.0.1:0")
            // Boots long enough to kill mesond in the middle of them.
            .env("MESON_SIM_BOOT_MS", "2500")
            .env("MESON_VM_POLL_MS", "200")
            // The killed worker's jobs are taken over soon after the restart.
            .env("MESON_JOB_LEASE_MS", "3000")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("mesond starts");
        Mesond { child }
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    fn kill_9(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().unwrap();
    }

    async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "mesond did not stop on SIGTERM");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Mesond {
    fn drop(&mut self) {
        if self.running() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Stops the private PostgreSQL of a data dir when dropped, if it runs: a
/// killed `mesond dev` leaves it running. Stopped the way dev mode stops it.
struct DataDir(PathBuf);

impl Drop for DataDir {
    fn drop(&mut self) {
        let pg = self.0.join("pg");
        if pg.join("postmaster.pid").exists() {
            let stopped = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                rt.block_on(async {
                    let running = mesond::pg::PrivatePostgres::start(&pg).await?;
                    running.stop().await
                })
            })
            .join();
            if !matches!(stopped, Ok(Ok(()))) {
                eprintln!("could not stop the PostgreSQL of {}", self.0.display());
            }
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Api {
    async fn ready(data_dir: &Path, port: u16, m: &mut Mesond) -> Api {
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            assert!(m.running(), "mesond exited early");
            if let Ok(r) = http.get(format!("{base}/readyz")).send().await
                && r.status().is_success()
            {
                break;
            }
            assert!(Instant::now() < deadline, "mesond not ready in 90 s");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let token = std::fs::read_to_string(data_dir.join("dev-token")).expect("dev token");
        Api {
            http,
            base,
            token: token.trim().to_owned(),
        }
    }

    async fn get(&self, path: &str) -> Value {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "GET {path}");
        r.json().await.unwrap()
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap();
        assert_eq!(status, 201, "POST {path}: {body}");
        body
    }

    /// Waits (bounded) until the action has finished; returns it.
    async fn finished(&self, id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let action = self.get(&format!("/v1/actions/{id}")).await["action"].clone();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vm_creates_in_flight_survive_a_kill_9_of_mesond_dev() {
    // Under /tmp, 0755: under root, dev mode's PostgreSQL runs as `postgres`.
    let dir = DataDir(
        std::env::temp_dir().join(format!("mesond-restart-{}", uuid::Uuid::new_v4().simple())),
    );
    std::fs::create_dir_all(&dir.0).unwrap();
    let port = free_port();

    let mut m = Mesond::spawn(&dir.0, port);
    let api = Api::ready(&dir.0, port, &mut m).await;
    let mut vms = Vec::new();
    for i in 0..8 {
        let body = api
            .post(
                "/v1/vms",
                json!({"specs": {"vm_name": format!("inflight-{i}"), "req": {
                    "cpu": {"numberOfCores": 1}, "mem": {"capacity": 512}}}}),
            )
            .await;
        vms.push((
            body["vm"]["id"].as_str().unwrap().to_owned(),
            body["action"]["id"].as_str().unwrap().to_owned(),
        ));
    }
    // Killed once a VM boots on its simulated host, the other creates
    // wherever they are.
    let deadline = Instant::now() + Duration::from_secs(60);
    let in_flight = loop {
        let (mut booting, mut in_flight) = (0, 0);
        for (vm, action) in &vms {
            if api.get(&format!("/v1/vms/{vm}")).await["vm"]["status"] == "starting" {
                booting += 1;
            }
            if api.get(&format!("/v1/actions/{action}")).await["action"]["status"] == "running" {
                in_flight += 1;
            }
        }
        if booting > 0 {
            break in_flight;
        }
        assert!(Instant::now() < deadline, "no VM started booting in 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    m.kill_9();
    assert!(
        in_flight > 0,
        "the creates were still in flight at the kill"
    );

    // The same data dir (and API address, where guests phone home).
    let mut m = Mesond::spawn(&dir.0, port);
    let api = Api::ready(&dir.0, port, &mut m).await;
    for (vm, action) in &vms {
        let done = api.finished(action).await;
        assert_eq!(done["status"], "success", "create of {vm}: {done}");
        let got = api.get(&format!("/v1/vms/{vm}")).await["vm"].clone();
        assert_eq!(got["status"], "running", "{got}");
        let ip = got["ipv4"].as_str().unwrap_or_default();
        assert!(
            ip.parse::<std::net::Ipv4Addr>().is_ok(),
            "VM {vm} has an IPv4: {got}"
        );
    }
    // The workers reach the VMs' hosts on their new ports.
    let (vm, _) = &vms[0];
    let reboot = api
        .post(&format!("/v1/vms/{vm}/actions/reboot"), json!({}))
        .await;
    let done = api.finished(reboot["action"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "success", "reboot: {done}");

    let status = m.terminate().await;
    assert!(status.success(), "clean exit on SIGTERM: {status}");
    assert!(
        !dir.0.join("pg/postmaster.pid").exists(),
        "the private PostgreSQL was stopped"
    );
}
