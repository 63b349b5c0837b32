//! A fleet with a state directory: stopped (or killed) and started again on
//! it, it carries on where it was, and its files are always whole documents.

use crate::common::{client, control, eventually, register, start, wait_running};
use crate::phonehome::{create_vm, network, next_call, phone_home_server, quiet, seed};
use atomos_driver::{Register, VmState, VolumeCreate};
use atomos_sim::Inventory;
use reqwest::Method;
use serde_json::json;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn state_dir() -> PathBuf {
    std::env::temp_dir().join(format!(
        "atomos-sim-state-{}",
        uuid::Uuid::new_v4().simple()
    ))
}

fn inventories(sim: &atomos_sim::Simulator) -> Vec<Inventory> {
    sim.inventory().into_iter().map(|h| h.inventory).collect()
}

fn data_volume(name: &str) -> VolumeCreate {
    VolumeCreate {
        name: name.into(),
        size_gb: 1,
        bootable: false,
        readonly: false,
        shareable: false,
        private: false,
    }
}

#[tokio::test]
async fn a_restarted_fleet_keeps_its_vms_volumes_networks_and_pending_phone_homes() {
    let dir = state_dir();
    let (base, mut calls) = phone_home_server(0).await;
    let boot = Duration::from_secs(1);
    let sim = start(boot, Some(dir.clone())).await.unwrap();

    // On `gpu`: VMs running (one on a DHCP network), stopped, crashed and
    // lost, and a data volume.
    let gpu = client(&sim, "gpu");
    let net = network(&gpu).await;
    gpu.register(&Register {
        network_ids: vec![net.clone()],
        ..register("run", 1, 512)
    })
    .await
    .unwrap();
    for name in ["off", "crash", "lost"] {
        gpu.register(&register(name, 1, 512)).await.unwrap();
    }
    gpu.volume_create(&data_volume("data")).await.unwrap();
    let mut ips = Vec::new();
    for name in ["run", "off", "crash", "lost"] {
        ips.push(wait_running(&gpu, name).await.ipv4.unwrap());
    }
    assert_eq!(ips[0], Ipv4Addr::new(192, 170, 5, 100), "a DHCP lease");
    let off = gpu.vm_by_name("off").await.unwrap().unwrap();
    gpu.stop(&off.id).await.unwrap();
    let (status, body) = control(
        &sim,
        Method::POST,
        "/faults/gpu",
        Some(json!({"crash_vm": ["crash"], "lose_vm": ["lost"]})),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // On `small`: a guest still booting (boots take an hour there now),
    // which has not phoned home yet.
    sim.host("small")
        .unwrap()
        .set_boot_time(Duration::from_secs(3600));
    let small = client(&sim, "small");
    let small_net = network(&small).await;
    let (user_data, meta_data) = seed(
        "late",
        "i-late",
        &format!("{base}/v1/vms/late/phone-home"),
        3,
    );
    create_vm(&small, "late", &user_data, &meta_data, &small_net).await;

    let before = inventories(&sim);
    assert_eq!(before[0].vms.len(), 1);
    assert_eq!(before[0].vms[0].state, VmState::Starting);
    assert_eq!(before[0].volumes.len(), 2, "boot and cloud-init volumes");
    let states: Vec<(&str, VmState, bool)> = before[1]
        .vms
        .iter()
        .map(|v| (v.name.as_str(), v.state.clone(), v.crashed))
        .collect();
    assert_eq!(
        states,
        [
            ("run", VmState::Running, false),
            ("off", VmState::Off, false),
            ("crash", VmState::Off, true)
        ]
    );
    sim.shutdown().await;
    quiet(&mut calls, Duration::ZERO).await;

    // Started again (on new ports, booting at the configured pace again).
    let sim = start(boot, Some(dir.clone())).await.unwrap();
    let after = inventories(&sim);
    assert_eq!(
        after[1], before[1],
        "gpu: the same VMs in the same states (running ones did not reboot), volumes, networks"
    );
    assert_eq!(after[0].volumes, before[0].volumes, "cloud-init files kept");
    assert_eq!(after[0].networks, before[0].networks);
    assert_eq!(after[0].vms[0].id, before[0].vms[0].id);
    // The guest boots on and phones home, once.
    let small = client(&sim, "small");
    let late = wait_running(&small, "late").await;
    assert_eq!(late.ipv4, Some(Ipv4Addr::new(192, 170, 5, 100)));
    let call = next_call(&mut calls).await;
    assert_eq!(call.form["instance_id"], "i-late");
    let host = sim.host("small").unwrap();
    eventually("the phone home to be recorded", || async {
        host.inventory().vms[0].phoned_home
    })
    .await;
    quiet(&mut calls, Duration::ZERO).await;
    // Addresses are never handed out twice, even the lost VM's.
    let gpu = client(&sim, "gpu");
    gpu.register(&register("new", 1, 512)).await.unwrap();
    let new = wait_running(&gpu, "new").await.ipv4.unwrap();
    assert!(!ips.contains(&new), "{new} was handed out before: {ips:?}");
    let crashed = gpu.vm_by_name("crash").await.unwrap().unwrap();
    gpu.start(&crashed.id).await.unwrap();
    wait_running(&gpu, "crash").await;
    let last = inventories(&sim);
    sim.shutdown().await;

    // The call is over on disk too: a third start does not make it again.
    let sim = start(boot, Some(dir.clone())).await.unwrap();
    let again = inventories(&sim);
    assert_eq!(again, last);
    assert!(again[0].vms[0].phoned_home);
    quiet(&mut calls, Duration::from_millis(300)).await;
    sim.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

fn state_file(sim: &atomos_sim::Simulator, host: &str) -> PathBuf {
    sim.host(host)
        .unwrap()
        .state_file()
        .expect("a state file")
        .to_owned()
}

async fn start_error(dir: &Path) -> String {
    start(Duration::from_millis(20), Some(dir.to_owned()))
        .await
        .expect_err("the simulator refuses the state")
        .to_string()
}

#[tokio::test]
async fn an_unreadable_state_file_is_an_error_naming_it_and_is_kept() {
    let dir = state_dir();
    let sim = start(Duration::from_millis(20), Some(dir.clone()))
        .await
        .unwrap();
    client(&sim, "small")
        .register(&register("a", 1, 512))
        .await
        .unwrap();
    let file = state_file(&sim, "small");
    assert_eq!(file, dir.join("small.json"));
    sim.shutdown().await;
    let whole = std::fs::read(&file).unwrap();
    let whole_text = String::from_utf8(whole.clone()).unwrap();

    let bad: [(&str, Vec<u8>); 4] = [
        ("truncated", whole[..whole.len() / 2].to_vec()),
        ("garbage", b"\x00\x17 not json".to_vec()),
        ("empty", Vec::new()),
        (
            "another format",
            whole_text
                .replacen("\"format\":1", "\"format\":99", 1)
                .into_bytes(),
        ),
    ];
    for (what, bytes) in bad {
        std::fs::write(&file, &bytes).unwrap();
        let e = start_error(&dir).await;
        assert!(
            e.contains(&file.display().to_string()) && e.contains("unreadable"),
            "{what}: {e}"
        );
        assert_eq!(std::fs::read(&file).unwrap(), bytes, "{what}: never wiped");
    }

    // Whole again, with a leftover of an interrupted write and a file of a
    // host no longer configured: both are ignored, the host is back.
    std::fs::write(&file, &whole).unwrap();
    std::fs::write(dir.join("small.json.tmp"), &whole[..10]).unwrap();
    let ghost = dir.join("ghost.json");
    std::fs::write(
        &ghost,
        whole_text.replacen("\"host\":\"small\"", "\"host\":\"ghost\"", 1),
    )
    .unwrap();
    let sim = start(Duration::from_millis(20), Some(dir.clone()))
        .await
        .unwrap();
    let vms = &sim.host("small").unwrap().inventory().vms;
    assert_eq!(vms.len(), 1);
    assert_eq!(vms[0].name, "a");
    assert!(ghost.exists(), "another host's file is left alone");
    assert!(!dir.join("small.json.tmp").exists());
    sim.shutdown().await;

    // A file under another host's name holds the wrong host.
    std::fs::rename(&ghost, dir.join("gpu.json")).unwrap();
    let e = start_error(&dir).await;
    assert!(e.contains("gpu.json") && e.contains("ghost"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_state_directory_that_cannot_be_made_fails_the_start() {
    let file = state_dir();
    std::fs::write(&file, b"a file, not a directory").unwrap();
    let e = start_error(&file).await;
    assert!(e.contains(&file.display().to_string()), "{e}");
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_file_is_always_a_whole_document_under_concurrent_changes() {
    let dir = state_dir();
    let sim = start(Duration::from_millis(20), Some(dir.clone()))
        .await
        .unwrap();
    let file = state_file(&sim, "small");
    let done = Arc::new(AtomicBool::new(false));
    // Reads and parses the file as fast as it can while it is replaced.
    let reader = {
        let (file, done) = (file.clone(), done.clone());
        tokio::task::spawn_blocking(move || {
            let mut reads = 0u32;
            while !done.load(Ordering::SeqCst) {
                let bytes = std::fs::read(&file).expect("the state file always exists");
                let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                    panic!("read {reads}: not a whole document ({e}): {bytes:?}")
                });
                assert_eq!(doc["host"], "small");
                reads += 1;
            }
            reads
        })
    };
    let c = client(&sim, "small");
    let mut writers = Vec::new();
    for w in 0..8 {
        let c = c.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..12 {
                let id = c
                    .volume_create(&data_volume(&format!("v-{w}-{i}")))
                    .await
                    .unwrap();
                if i % 3 == 0 {
                    c.volume_destroy(&id).await.unwrap();
                }
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    done.store(true, Ordering::SeqCst);
    let reads = reader.await.unwrap();
    assert!(reads > 0);

    // Every acknowledged change is in the file: no older snapshot
    // overwrote a newer one.
    let last = inventories(&sim);
    assert_eq!(last[0].volumes.len(), 8 * 8);
    sim.shutdown().await;
    let sim = start(Duration::from_millis(20), Some(dir.clone()))
        .await
        .unwrap();
    assert_eq!(inventories(&sim), last);
    sim.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_restarted_fleet_listens_on_its_port_forwards_again() {
    use crate::forwards::{
        closed_at_once, echo_through, forward, free_tcp_port, refused, running_vm, tcp_echo,
    };
    let dir = state_dir();
    let boot = Duration::from_millis(20);
    let sim = start(boot, Some(dir.clone())).await.unwrap();
    let c = client(&sim, "small");
    let vm = running_vm(&c, "web").await;
    let port = free_tcp_port();
    c.port_forward_create(&forward("ssh", "tcp", port, (&vm, "web"), 22))
        .await
        .unwrap();
    let before = inventories(&sim);
    assert_eq!(before[0].port_forwards.len(), 1);
    sim.shutdown().await;
    assert!(refused(port).await, "closed with the simulator");

    let sim = start(boot, Some(dir.clone())).await.unwrap();
    assert_eq!(inventories(&sim), before);
    // Guest ports are not kept: the test serves the guest's again.
    closed_at_once(port, "a guest port not served again").await;
    let host = sim.host("small").unwrap();
    host.serve_guest_port("web", 22, tcp_echo().await).unwrap();
    assert_eq!(echo_through(port, b"restarted").await, b"restarted");
    let file = state_file(&sim, "small");
    sim.shutdown().await;

    // A file written before port forwards existed has none.
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert!(
        doc.as_object_mut()
            .unwrap()
            .remove("port_forwards")
            .is_some()
    );
    std::fs::write(&file, serde_json::to_vec(&doc).unwrap()).unwrap();
    let sim = start(boot, Some(dir.clone())).await.unwrap();
    let after = inventories(&sim);
    assert!(after[0].port_forwards.is_empty());
    assert_eq!(after[0].vms, before[0].vms);
    assert!(refused(port).await);
    sim.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
