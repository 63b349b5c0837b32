//! `mesond dev` as a person runs it, as a process: no DATABASE_URL, so a
//! private PostgreSQL is created in the data dir, reused on the next start,
//! and stopped on SIGTERM; one process per data dir; taken default ports
//! move; Ctrl-C lets work finish, a second Ctrl-C releases it.

mod support;

use meson_types::dev::DevServer;
use std::process::Command;
use std::time::{Duration, Instant};
use support::{Mesond, Scratch, is_root, mesond, postmaster_running};

fn vm(name: &str) -> serde_json::Value {
    serde_json::json!({"specs": {"vm_name": name, "req": {
        "cpu": {"numberOfCores": 1}, "mem": {"capacity": 512}}}})
}

/// Run from a private (0700) directory, as root from a clone in root's
/// home: PostgreSQL runs as `postgres`, which cannot enter it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_mode_runs_a_private_postgres_and_stops_it() {
    let scratch = Scratch::new(0o700);
    let http = reqwest::Client::new();

    let mut m = Mesond::spawn(&scratch.dir, &[]);
    m.wait_ready(&http).await;
    let pg = m.postgres_dir();
    assert!(
        pg.join("PG_VERSION").exists(),
        "a private cluster was created: {pg:?}"
    );
    assert!(postmaster_running(&pg));
    if is_root() {
        // postgres cannot reach the data dir: the cluster is kept where it can.
        assert_eq!(pg, mesond::pg::shared_home(&scratch.data_dir()).join("pg"));
        let owner = Command::new("stat")
            .args(["-c", "%U %a"])
            .arg(&pg)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&owner.stdout).trim(),
            "postgres 700"
        );
    } else {
        assert_eq!(pg, scratch.data_dir().join("pg"));
    }
    let token = m.token();
    let banner = m.stdout();
    assert!(
        !banner.contains(&token),
        "the banner never shows the token: {banner}"
    );
    // Its log goes to a pipe here, not a terminal: plain text, no colours.
    let all = m.output();
    assert!(all.contains("INFO"), "{all}");
    assert!(
        !all.contains('\u{1b}'),
        "ANSI escapes in a piped log: {all}"
    );
    let token_file = scratch.data_dir().join("dev-token");
    for line in [
        format!("export MESON_TOKEN=$(cat {})", token_file.display()),
        m.base.clone(),
        m.server().grpc.clone(),
        pg.display().to_string(),
    ] {
        assert!(banner.contains(&line), "{line:?} in the banner: {banner}");
    }

    let r = http
        .post(format!("{}/v1/vms", m.base))
        .bearer_auth(&token)
        .json(&vm("persisted"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let r = http.get(format!("{}/v1/vms", m.base)).send().await.unwrap();
    assert_eq!(r.status(), 401, "the API wants the token");

    let status = m.terminate().await;
    assert!(status.success(), "clean exit on SIGTERM: {status}");
    assert!(
        !postmaster_running(&pg),
        "the private PostgreSQL was stopped"
    );
    assert!(
        DevServer::read(&scratch.data_dir()).is_none(),
        "dev.json is removed on exit"
    );

    // The next start reuses the cluster: the VM is still there.
    let mut m = Mesond::spawn(&scratch.dir, &[]);
    m.wait_ready(&http).await;
    assert_eq!(m.postgres_dir(), pg);
    let (status, body) = m.get(&http, "/v1/vms").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["vms"][0]["name"], "persisted", "{body}");
    assert!(m.terminate().await.success());
    assert!(!postmaster_running(&pg));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_dev_on_a_data_dir_is_refused_and_an_orphaned_postgres_is_adopted() {
    let scratch = Scratch::new(0o755);
    let http = reqwest::Client::new();
    let mut first = Mesond::spawn(&scratch.dir, &[]);
    first.wait_ready(&http).await;
    let pg = first.postgres_dir();

    // From a subdirectory, on other ports: the same data dir, refused.
    let sub = scratch.dir.join("src/deeper");
    std::fs::create_dir_all(&sub).unwrap();
    let mut second = Mesond::spawn(&sub, &[]);
    let status = second.wait_exit(Duration::from_secs(60)).await;
    assert!(!status.success(), "{}", second.output());
    let err = second.output();
    assert!(
        err.contains(&format!("pid {}", first.pid())) && err.contains(&first.base),
        "the refusal names the running one: {err}"
    );
    assert!(
        !sub.join(".meson").exists(),
        "the data dir was found up the tree"
    );

    // The first is untouched: its database still answers.
    assert!(postmaster_running(&pg));
    let (status, body) = first.get(&http, "/v1/vms").await;
    assert_eq!(status, 200, "{body}");
    let r = http
        .get(format!("{}/readyz", first.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // Killed, it leaves its PostgreSQL running: the next start adopts it,
    // says so, and stops it on exit.
    first.signal("-KILL");
    first.wait_exit(Duration::from_secs(30)).await;
    assert!(postmaster_running(&pg), "kill -9 leaves PostgreSQL running");
    let mut third = Mesond::spawn(&scratch.dir, &[]);
    third.wait_ready(&http).await;
    assert!(
        third.output().contains("adopting the private PostgreSQL"),
        "{}",
        third.output()
    );
    let (status, body) = third.get(&http, "/v1/vms").await;
    assert_eq!(status, 200, "{body}");
    assert!(third.terminate().await.success(), "{}", third.output());
    assert!(
        !postmaster_running(&pg),
        "the adopted PostgreSQL was stopped"
    );
}

/// Holds `addr` for the test unless someone else already does.
fn occupy(addr: &str) -> Option<std::net::TcpListener> {
    match std::net::TcpListener::bind(addr) {
        Ok(l) => Some(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => None,
        Err(e) => panic!("binding {addr}: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taken_default_ports_move_and_set_ones_fail_naming_their_variable() {
    let scratch = Scratch::new(0o755);
    let http = reqwest::Client::new();
    // Every default address taken by this test. One another process holds
    // may be free again by the time mesond starts: only those this test
    // holds are sure to be taken.
    let defaults_taken = [
        ("MESON_HTTP_ADDR", "127.0.0.1:8080"),
        ("MESON_GRPC_ADDR", "127.0.0.1:50051"),
        ("MESON_AUTOSCALER_ADDR", "127.0.0.1:50052"),
    ];
    let held: Vec<_> = defaults_taken
        .iter()
        .filter_map(|(var, addr)| occupy(addr).map(|l| (*var, *addr, l)))
        .collect();

    let defaults = [
        ("MESON_HTTP_ADDR", ""),
        ("MESON_GRPC_ADDR", ""),
        ("MESON_AUTOSCALER_ADDR", ""),
    ];
    let mut m = Mesond::spawn(&scratch.dir, &defaults);
    m.wait_ready(&http).await;
    let s = m.server().clone();
    assert!(s.url.starts_with("http://127.0.0.1:"), "{s:?}");
    let autoscaler = s.autoscaler.clone().expect("dev serves the autoscalers");
    let out = m.output();
    for (var, taken, _) in &held {
        let now = match *var {
            "MESON_HTTP_ADDR" => s.url.trim_start_matches("http://"),
            "MESON_GRPC_ADDR" => s.grpc.as_str(),
            _ => autoscaler.as_str(),
        };
        assert_ne!(now, *taken, "{var} moved off the taken default: {s:?}");
        assert!(
            out.contains(&format!("{taken} was taken; set {var} to choose")),
            "the banner says {var} moved: {out}"
        );
    }
    for addr in [&s.grpc, &autoscaler] {
        assert!(m.stdout().contains(addr.as_str()), "{addr} in the banner");
    }
    let (status, body) = m.get(&http, "/v1/vms").await;
    assert_eq!(status, 200, "{body}");
    assert!(m.terminate().await.success());

    // Set explicitly, a taken address is an error naming its variable.
    for var in [
        "MESON_HTTP_ADDR",
        "MESON_GRPC_ADDR",
        "MESON_AUTOSCALER_ADDR",
    ] {
        // An address this test holds.
        let hold = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = hold.local_addr().unwrap().to_string();
        let taken = taken.as_str();
        let mut m = Mesond::spawn(&scratch.dir, &[(var, taken)]);
        let status = m.wait_exit(Duration::from_secs(90)).await;
        assert!(!status.success(), "{}", m.output());
        let err = m.output();
        assert!(
            err.contains(&format!("({var})")) && err.contains(taken),
            "{var}: {err}"
        );
    }
    assert!(!postmaster_running(&scratch.data_dir().join("pg")));

    // Deployed modes name theirs too.
    let db = std::env::var("MESON_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let key = "A".repeat(43) + "=";
    for (mode, var, extra) in [
        (
            "api",
            "MESON_HTTP_ADDR",
            ("MESON_JWT_SECRET", "s".repeat(40)),
        ),
        (
            "worker",
            "MESON_METRICS_ADDR",
            ("MESON_JOB_LISTEN", "false".into()),
        ),
    ] {
        let hold = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = hold.local_addr().unwrap().to_string();
        let out = mesond(mode, &scratch.dir, &[])
            .env("DATABASE_URL", &db)
            .env("MESON_SECRETS_KEY", &key)
            .env(var, &taken)
            .env(extra.0, extra.1)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "mesond {mode}: {err}");
        assert!(
            err.contains(&format!("({var})")) && err.contains(&taken),
            "mesond {mode}: {err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_ctrl_c_releases_running_jobs_and_stops_at_once() {
    let scratch = Scratch::new(0o755);
    let http = reqwest::Client::new();
    // VMs boot for ten minutes; running jobs would get an hour to finish.
    let slow = [
        ("MESON_SIM_BOOT_MS", "600000"),
        ("MESON_SHUTDOWN_GRACE_S", "3600"),
    ];
    let mut m = Mesond::spawn(&scratch.dir, &slow);
    m.wait_ready(&http).await;
    let pg = m.postgres_dir();
    let r = http
        .post(format!("{}/v1/vms", m.base))
        .bearer_auth(m.token())
        .json(&vm("interrupted"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let created: serde_json::Value = r.json().await.unwrap();
    let action = format!("/v1/actions/{}", created["action"]["id"].as_str().unwrap());
    // A worker runs it (a first step recorded).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, body) = m.get(&http, &action).await;
        if body["action"]["progress"].as_u64().unwrap_or(0) > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "not started: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    m.signal("-INT");
    m.wait_stdout("waiting for 1 running job (vm_create)").await;
    assert!(m.stdout().contains("press Ctrl-C again to stop now"));
    // While it waits, the API still answers (guests can phone home).
    let (status, body) = m.get(&http, &action).await;
    assert_eq!(
        (status, body["action"]["status"].as_str()),
        (200, Some("running"))
    );

    m.signal("-INT");
    // Well within the hour the job was given.
    let status = m.wait_exit(Duration::from_secs(60)).await;
    assert!(status.success(), "{status}\n{}", m.output());
    assert!(
        m.stdout().contains("released to the queue"),
        "{}",
        m.output()
    );
    assert!(!postmaster_running(&pg), "PostgreSQL stopped");

    // The next start resumes it, and it ends well.
    let mut m = Mesond::spawn(&scratch.dir, &[]);
    m.wait_ready(&http).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let body = loop {
        let (_, body) = m.get(&http, &action).await;
        if body["action"]["status"] != "running" {
            break body;
        }
        assert!(Instant::now() < deadline, "still running: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(body["action"]["status"], "success", "{body}");
    assert!(m.terminate().await.success());
    assert!(!postmaster_running(&pg));
}
