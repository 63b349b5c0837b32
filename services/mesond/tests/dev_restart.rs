//! `mesond dev` killed with `kill -9` while VMs are being created, then
//! started again on the same data dir: the simulated AtomOS hosts kept their
//! VMs (write-through state in `<data dir>/atomos/`), so every create
//! finishes and the VMs work, on the hosts' new ports.

mod support;

use serde_json::json;
use std::time::{Duration, Instant};
use support::{Mesond, Scratch};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vm_creates_in_flight_survive_a_kill_9_of_mesond_dev() {
    // Under /tmp, 0755: under root, dev mode's PostgreSQL runs as `postgres`.
    let scratch = Scratch::new(0o755);
    let http = reqwest::Client::new();
    // The same API address after the restart: it is where guests phone home.
    let addr = format!("127.0.0.1:{}", free_port());
    let env = [
        ("MESON_HTTP_ADDR", addr.as_str()),
        // Boots long enough to kill mesond in the middle of them.
        ("MESON_SIM_BOOT_MS", "2500"),
        ("MESON_VM_POLL_MS", "200"),
        // The killed worker's jobs are taken over soon after the restart.
        ("MESON_JOB_LEASE_MS", "3000"),
    ];

    let mut m = Mesond::spawn(&scratch.dir, &env);
    m.wait_ready(&http).await;
    let mut vms = Vec::new();
    for i in 0..8 {
        let vm = json!({"specs": {"vm_name": format!("inflight-{i}"), "req": {
            "cpu": {"numberOfCores": 1}, "mem": {"capacity": 512}}}});
        let (status, body) = m.post(&http, "/v1/vms", vm).await;
        assert_eq!(status, 201, "{body}");
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
            if m.get(&http, &format!("/v1/vms/{vm}")).await.1["vm"]["status"] == "starting" {
                booting += 1;
            }
            if m.get(&http, &format!("/v1/actions/{action}")).await.1["action"]["status"]
                == "running"
            {
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

    let mut m = Mesond::spawn(&scratch.dir, &env);
    m.wait_ready(&http).await;
    for (vm, action) in &vms {
        let done = m.finished(&http, action).await;
        assert_eq!(done["status"], "success", "create of {vm}: {done}");
        let got = m.get(&http, &format!("/v1/vms/{vm}")).await.1["vm"].clone();
        assert_eq!(got["status"], "running", "{got}");
        let ip = got["ipv4"].as_str().unwrap_or_default();
        assert!(
            ip.parse::<std::net::Ipv4Addr>().is_ok(),
            "VM {vm} has an IPv4: {got}"
        );
    }
    // The workers reach the VMs' hosts on their new ports.
    let (vm, _) = &vms[0];
    let (status, reboot) = m
        .post(&http, &format!("/v1/vms/{vm}/actions/reboot"), json!({}))
        .await;
    assert_eq!(status, 201, "{reboot}");
    let done = m
        .finished(&http, reboot["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "reboot: {done}");

    let status = m.terminate().await;
    assert!(status.success(), "clean exit on SIGTERM: {status}");
    for pg in scratch.clusters() {
        assert!(
            !support::postmaster_running(&pg),
            "the private PostgreSQL was stopped"
        );
    }
}
