//! Chaos: many VM creates and deletes, and standalone volumes made, attached
//! to new VMs and deleted, while `mesond worker` processes are SIGKILLed at
//! random and AtomOS injects errors and hangs. Afterwards every action is
//! final, no job is stuck, every surviving VM is running, every standalone
//! volume is available or attached to a surviving VM, and AtomOS holds
//! exactly what the database says: no leak, no duplicate.

mod support;

use meson_api::{App, Principal, Role};
use meson_core::action::ActionStatus;
use meson_core::vm::VmStatus;
use meson_core::volume::{Volume, VolumeStatus};
use meson_core::{ActionId, TenantId, VmId};
use meson_db::testing::TestDatabase;
use meson_db::volumes::VolumeFilter;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::Process;

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMLavtiPfhiG3t6TAxHosXoVh7Pc/lSD8L9SNPyAzp1d user@host";

fn spawn_worker(db_url: &str) -> Process {
    let mut worker = support::mesond_on(
        "worker",
        db_url,
        &[
            // 32 bytes, base64: workers refuse to start without a secrets key.
            (
                "MESON_SECRETS_KEY",
                "bWVzb24tY2hhb3MtdGVzdC1rZXktMzItYnl0ZXMhISE=",
            ),
            ("MESON_JOB_LEASE_MS", "1500"),
            ("MESON_VM_POLL_MS", "20"),
            ("MESON_ATOMOS_TIMEOUT_MS", "700"),
            ("MESON_WORKER_CONCURRENCY", "8"),
            ("MESON_LOG", "warn"),
        ],
    );
    worker.stderr(Stdio::null());
    Process::spawn(worker, "mesond worker")
}

/// The tenant's live standalone volumes.
async fn standalone_volumes(pool: &meson_db::PgPool, tenant: &TenantId) -> Vec<Volume> {
    let filter = VolumeFilter {
        standalone: Some(true),
        ..Default::default()
    };
    meson_db::page_at::<Volume>(pool, tenant, &filter, 1000, 0)
        .await
        .unwrap()
        .0
}

/// The tenant's live VMs.
async fn live_vms(pool: &meson_db::PgPool, tenant: &TenantId) -> Vec<meson_core::vm::Vm> {
    meson_db::page_at::<meson_core::vm::Vm>(pool, tenant, &Default::default(), 1000, 0)
        .await
        .unwrap()
        .0
}

/// Waits (bounded) until each action is final.
async fn settle(pool: &meson_db::PgPool, ids: &[ActionId]) {
    for id in ids {
        let deadline = Instant::now() + Duration::from_secs(60);
        while meson_db::actions::get(pool, None, *id)
            .await
            .unwrap()
            .status
            == ActionStatus::Running
        {
            assert!(Instant::now() < deadline, "cleanup action {id} stuck");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn vm_body(name: &str) -> serde_json::Value {
    serde_json::json!({"specs": {"vm_name": name,
        "req": {"cpu": {"numberOfCores": 1}, "mem": {"capacity": 1024}, "misc": {"osDistribution": "Debian"}},
        "volumes": [{"name": "data", "size": 5, "private": "True"}],
        "authentication": {"ssh-key": KEY}}})
}

const FAULT_ROUTES: &[&str] = &[
    "vm/canallocate",
    "vm/register",
    "vm/status",
    "vm/unregister",
    "volume/create",
    "volume/cloudinit/create",
    "volume/cloudinit/metadata",
    "volume/accessible",
    "volume/destroy",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_loses_nothing_and_leaks_nothing() {
    let seed: u64 = std::env::var("MESON_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("chaos seed {seed} (set MESON_CHAOS_SEED to replay)");
    let mut rng = StdRng::seed_from_u64(seed);

    let db = TestDatabase::new().await;
    let sim = support::simulator(Duration::from_millis(150)).await;
    mesond::server::register_targets(&db.pool, &sim.targets())
        .await
        .unwrap();
    let mut app = App::new(db.pool.clone());
    // The churn is not about quotas: ~50 rounds of up to four creates may
    // keep more than the default 100 VMs alive at once.
    app.quotas = meson_core::quota::Resources {
        vms: 10_000,
        vcpus: 100_000,
        ram_mib: 1 << 40,
        storage_gb: 1 << 30,
        ..meson_core::quota::Resources::DEFAULT_QUOTAS
    };
    let who = Principal {
        tenant: TenantId("chaos".into()),
        subject: "chaos".into(),
        role: Role::Admin,
    };

    let mut workers: Vec<Process> = (0..2).map(|_| spawn_worker(&db.url)).collect();
    let mut actions: Vec<ActionId> = Vec::new();
    let mut vms: BTreeMap<usize, VmId> = BTreeMap::new();
    let mut doomed: Vec<VmId> = Vec::new();
    let (mut kills, mut faults) = (0, 0);

    let start = Instant::now();
    let mut i = 0;
    while start.elapsed() < Duration::from_secs(12) {
        // New VMs, a few at a time.
        for _ in 0..rng.gen_range(1..=3) {
            let c = app
                .vm_create(&who, &vm_body(&format!("chaos-{i}")))
                .await
                .expect("create accepted");
            actions.push(c.action.id);
            vms.insert(i, c.vm.id);
            i += 1;
        }
        // Delete some earlier VM; a busy one answers `locked`: try again later.
        if rng.gen_bool(0.4) && !vms.is_empty() {
            let k = *vms.keys().nth(rng.gen_range(0..vms.len())).unwrap();
            match app.vm_delete(&who, vms[&k]).await {
                Ok(a) => {
                    actions.push(a.id);
                    doomed.push(vms.remove(&k).unwrap());
                }
                Err(meson_core::Error::Locked { .. }) => {}
                Err(e) => panic!("delete refused: {e}"),
            }
        }
        // Standalone volumes: made, attached to a new VM, deleted (refused
        // while attached or busy).
        if rng.gen_bool(0.5) {
            let body = serde_json::json!({"name": format!("vol-{i}"), "size": 2});
            let c = app
                .volume_create(&who, &body)
                .await
                .expect("volume create accepted");
            actions.push(c.action.id);
            i += 1;
        }
        let standalone = standalone_volumes(&db.pool, &who.tenant).await;
        let free: Vec<&Volume> = standalone
            .iter()
            .filter(|v| v.status == VolumeStatus::Available)
            .collect();
        if rng.gen_bool(0.5) && !free.is_empty() {
            let v = free[rng.gen_range(0..free.len())];
            let mut body = vm_body(&format!("chaos-{i}"));
            body["volumes"] = serde_json::json!([v.id.to_string()]);
            let c = app
                .vm_create(&who, &body)
                .await
                .expect("create attaching accepted");
            actions.push(c.action.id);
            vms.insert(i, c.vm.id);
            i += 1;
        }
        if rng.gen_bool(0.3) && !standalone.is_empty() {
            let v = &standalone[rng.gen_range(0..standalone.len())];
            match app.volume_delete(&who, v.id).await {
                Ok(a) => actions.push(a.id),
                Err(meson_core::Error::Locked { .. } | meson_core::Error::Conflict { .. }) => {}
                Err(e) => panic!("volume delete refused: {e}"),
            }
        }
        // AtomOS misbehaves: errors and hung calls on random hosts and routes.
        let hosts = sim.hosts();
        let h = &hosts[rng.gen_range(0..hosts.len())];
        let route = FAULT_ROUTES[rng.gen_range(0..FAULT_ROUTES.len())];
        if rng.gen_bool(0.8) {
            h.faults().fail_next(
                route,
                [500, 502, 503][rng.gen_range(0..3)],
                rng.gen_range(1..=2),
            );
        } else {
            h.faults().hang(route, 1);
        }
        faults += 1;
        // A worker dies without warning and a new one takes its place.
        if rng.gen_bool(0.5) {
            let victim = rng.gen_range(0..workers.len());
            workers[victim].kill();
            workers[victim] = spawn_worker(&db.url);
            kills += 1;
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(100..400))).await;
    }
    eprintln!(
        "chaos: {} actions, {kills} workers killed, {faults} faults injected",
        actions.len()
    );
    assert!(kills > 3, "the test must actually kill workers");

    // Calm: no new faults; the workers finish everything.
    for h in sim.hosts() {
        h.faults().clear();
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let finals = loop {
        let all = meson_db::actions::get_many(&db.pool, None, &actions)
            .await
            .unwrap();
        if all.iter().all(|a| a.status != ActionStatus::Running) {
            break all;
        }
        assert!(
            Instant::now() < deadline,
            "actions still running: {:?}",
            all.iter()
                .filter(|a| a.status == ActionStatus::Running)
                .map(|a| (a.id, a.progress))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(finals.len(), actions.len(), "every action exists");
    for a in &finals {
        assert!(a.finished.is_some(), "{a:?}");
    }

    // A create that exhausted its retries left its VM in `error` (and
    // unwound): a tenant deletes those, as the chaos deleted others.
    let page = live_vms(&db.pool, &who.tenant).await;
    let mut cleanup = Vec::new();
    for vm in page.iter().filter(|v| v.status == VmStatus::Error) {
        cleanup.push(
            app.vm_delete(&who, vm.id)
                .await
                .expect("delete an errored vm")
                .id,
        );
    }
    settle(&db.pool, &cleanup).await;
    // So do volumes whose create failed (or whose delete failed after
    // taking them off AtomOS).
    let mut cleanup = Vec::new();
    for v in standalone_volumes(&db.pool, &who.tenant).await {
        if v.status == VolumeStatus::Error {
            cleanup.push(app.volume_delete(&who, v.id).await.expect("delete").id);
        }
    }
    settle(&db.pool, &cleanup).await;

    // No job stuck.
    assert_eq!(
        meson_db::jobs::unfinished(&db.pool).await.unwrap(),
        0,
        "jobs still queued or running"
    );

    // Every surviving VM is running; AtomOS holds exactly the database's VMs and volumes.
    let page = live_vms(&db.pool, &who.tenant).await;
    for vm in &page {
        assert_eq!(vm.status, VmStatus::Running, "{} ({})", vm.name, vm.id);
    }
    let ids: Vec<VmId> = page.iter().map(|v| v.id).collect();
    let volumes = meson_db::volumes::list_for_vms(&db.pool, &ids)
        .await
        .unwrap();
    let mut want_vms: Vec<String> = page.iter().map(|v| v.atomos_name.clone()).collect();
    let mut want_vols: Vec<String> = volumes.iter().map(|v| v.atomos_name.clone()).collect();
    // Standalone volumes: available, or attached to a surviving VM.
    let standalone = standalone_volumes(&db.pool, &who.tenant).await;
    for v in &standalone {
        match (v.status, v.attached_to) {
            (VolumeStatus::Available, None) => {}
            (VolumeStatus::Attached, Some(vm)) => {
                assert!(ids.contains(&vm), "{v:?} attached to a gone VM");
            }
            _ => panic!("standalone volume left {v:?} (seed {seed})"),
        }
    }
    want_vols.extend(standalone.iter().map(|v| v.atomos_name.clone()));
    let (have_vms, have_vols) = support::atomos_names(&sim);
    want_vms.sort();
    want_vols.sort();
    assert_eq!(
        have_vms, want_vms,
        "VMs on AtomOS = VMs in the database (seed {seed})"
    );
    assert_eq!(
        have_vols, want_vols,
        "volumes on AtomOS = volumes in the database (seed {seed})"
    );
    eprintln!(
        "chaos: {} VMs survive, {} were deleted; {} standalone volumes survive, {} attached",
        page.len(),
        doomed.len(),
        standalone.len(),
        standalone
            .iter()
            .filter(|v| v.attached_to.is_some())
            .count()
    );

    for mut w in workers {
        let status = w.stop();
        assert!(
            status.success(),
            "a worker shut down cleanly on SIGTERM: {status}"
        );
    }
}
