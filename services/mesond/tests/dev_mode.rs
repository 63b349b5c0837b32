//! `mesond dev` as a newcomer runs it: no DATABASE_URL, so a private
//! PostgreSQL is created in the data dir, reused on the next start, and
//! stopped on SIGTERM.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Mesond {
    child: Child,
    base: String,
}

impl Mesond {
    fn spawn(data_dir: &Path) -> Mesond {
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_mesond"))
            .arg("dev")
            .env_remove("DATABASE_URL")
            .env("MESON_DATA_DIR", data_dir)
            .env("MESON_HTTP_ADDR", format!("127.0.0.1:{port}"))
            .env("MESON_GRPC_ADDR", "127.0.0.1:0")
            .env("MESON_AUTOSCALER_ADDR", "127.0.0.1:0")
            .env("MESON_SIM_BOOT_MS", "50")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("mesond starts");
        Mesond {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    async fn wait_ready(&mut self, http: &reqwest::Client) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("mesond exited early: {status}");
            }
            if let Ok(r) = http.get(format!("{}/readyz", self.base)).send().await
                && r.status().is_success()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("mesond not ready in 90 s");
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

fn postmaster_running(pg: &Path) -> bool {
    pg.join("postmaster.pid").exists()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_mode_runs_a_private_postgres_and_stops_it() {
    let dir = std::env::temp_dir().join(format!("mesond-dev-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let http = reqwest::Client::new();

    let mut m = Mesond::spawn(&dir);
    m.wait_ready(&http).await;
    assert!(
        dir.join("pg/PG_VERSION").exists(),
        "a private cluster was created in the data dir"
    );
    assert!(postmaster_running(&dir.join("pg")));
    let token = std::fs::read_to_string(dir.join("dev-token")).expect("dev token written");

    let vm = serde_json::json!({"specs": {"vm_name": "persisted", "req": {
        "cpu": {"numberOfCores": 1}, "mem": {"capacity": 512}}}});
    let r = http
        .post(format!("{}/v1/vms", m.base))
        .bearer_auth(token.trim())
        .json(&vm)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let r = http.get(format!("{}/v1/vms", m.base)).send().await.unwrap();
    assert_eq!(r.status(), 401, "the API wants the token");

    let status = m.terminate().await;
    assert!(status.success(), "clean exit on SIGTERM: {status}");
    assert!(
        !postmaster_running(&dir.join("pg")),
        "the private PostgreSQL was stopped"
    );

    // The next start reuses the cluster: the VM is still there.
    let mut m = Mesond::spawn(&dir);
    m.wait_ready(&http).await;
    let token = std::fs::read_to_string(dir.join("dev-token")).unwrap();
    let r = http
        .get(format!("{}/v1/vms", m.base))
        .bearer_auth(token.trim())
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["vms"][0]["name"], "persisted", "{body}");
    assert!(m.terminate().await.success());
    assert!(!postmaster_running(&dir.join("pg")));
    let _ = std::fs::remove_dir_all(&dir);
}
