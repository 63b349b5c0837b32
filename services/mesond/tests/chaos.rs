//! Chaos: many VM creates and deletes, and standalone volumes made, attached
//! to new VMs and deleted, while `mesond worker` processes are SIGKILLed at
//! random and AtomOS injects errors and hangs. Afterwards every action is
//! final, no job is stuck, every surviving VM is running, every standalone
//! volume is available or attached to a surviving VM, and AtomOS holds
//! exactly what the database says: no leak, no duplicate. And day two:
//! VMs migrated and resized while the worker running them is SIGKILLed
//! again and again, each ending in one consistent state.

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
use std::time::{Duration, Instant};
use support::Process;

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMLavtiPfhiG3t6TAxHosXoVh7Pc/lSD8L9SNPyAzp1d user@host";

fn spawn_worker(db_url: &str) -> Process {
    support::worker(db_url, "1500")
}

fn spawn_worker_leasing(db_url: &str, lease_ms: &str) -> Process {
    support::worker(db_url, lease_ms)
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
        email: None,
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

/// Migrations and resizes (a running VM stopped, resized and started) while
/// the one worker running them is killed with SIGKILL again and again, at
/// random points of their workflows: each is resumed by the next worker and
/// ends in one consistent state. A migrated VM runs on exactly one host, a
/// new one, with its volumes there and nowhere else and its NIC on its
/// private network; a resized VM runs with
/// its new size on its host and in meson; AtomOS holds exactly what the
/// database says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn day_two_actions_survive_their_worker_killed_mid_workflow() {
    let seed: u64 = std::env::var("MESON_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("day-two kill seed {seed} (set MESON_CHAOS_SEED to replay)");
    let mut rng = StdRng::seed_from_u64(seed);
    let db = TestDatabase::new().await;
    let sim = support::simulator(Duration::from_millis(500)).await;
    mesond::server::register_targets(&db.pool, &sim.targets())
        .await
        .unwrap();
    let app = App::new(db.pool.clone());
    let who = Principal {
        tenant: TenantId("dayTwo".into()),
        subject: "ops".into(),
        role: Role::Admin,
        email: None,
    };
    const LEASE_MS: u64 = 600;
    let lease = LEASE_MS.to_string();
    let mut worker = spawn_worker_leasing(&db.url, &lease);

    // Six running VMs of one provider (two hosts), each with a data volume
    // and on a private network.
    let (net, _) = app
        .network_create(
            &who,
            &serde_json::json!({"name": "lan", "cidr": "10.77.0.0/24", "dhcp": false}),
        )
        .await
        .expect("network");
    let mut creates = Vec::new();
    let mut vms = Vec::new();
    for i in 0..6 {
        let mut body = vm_body(&format!("d2-{i}"));
        body["provider"] = "ionos".into();
        body["networks"] = serde_json::json!([net.id.to_string()]);
        let c = app.vm_create(&who, &body).await.expect("create accepted");
        creates.push(c.action.id);
        vms.push(c.vm.id);
    }
    settle(&db.pool, &creates).await;
    let mut from = BTreeMap::new();
    for &id in &vms {
        let vm = meson_db::vms::get_any(&db.pool, id).await.unwrap();
        assert_eq!(vm.status, VmStatus::Running, "{vm:?}");
        from.insert(id, vm.placement.unwrap().host);
    }

    // Every AtomOS call now takes a while, so each workflow spans many
    // lease periods and the kills land all along it.
    for h in sim.hosts() {
        h.faults().set_latency(Duration::from_millis(120));
    }
    // Half migrate, half grow to 2 cores.
    let mut actions = Vec::new();
    for (i, &id) in vms.iter().enumerate() {
        let action = if i % 2 == 0 {
            app.vm_migrate(&who, id, &serde_json::json!({})).await
        } else {
            app.vm_resize(&who, id, &serde_json::json!({"cores": 2, "stop": true}))
                .await
        };
        actions.push(action.expect("accepted").0.id);
    }

    // The worker dies mid-workflow, again and again; each time a new one
    // takes over once the dead one's leases run out.
    let mut kills = Vec::new();
    while kills.len() < 10 {
        // The new worker takes the jobs over once the dead one's leases
        // end, then gets a random slice of progress before it dies too.
        let takeover = if kills.is_empty() { 0 } else { LEASE_MS };
        let wait = takeover + rng.gen_range(50..500);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let now = meson_db::actions::get_many(&db.pool, None, &actions)
            .await
            .unwrap();
        let running: Vec<(String, u8)> = now
            .iter()
            .filter(|a| a.status == ActionStatus::Running)
            .map(|a| (a.command.to_string(), a.progress))
            .collect();
        if running.is_empty() {
            break;
        }
        worker.kill();
        worker = spawn_worker_leasing(&db.url, &lease);
        kills.push(running);
    }
    eprintln!("day-two kills, with the actions each interrupted: {kills:?}");
    assert!(
        kills.len() >= 3,
        "the worker was killed mid-workflow: {kills:?}"
    );

    let deadline = Instant::now() + Duration::from_secs(90);
    let finals = loop {
        let all = meson_db::actions::get_many(&db.pool, None, &actions)
            .await
            .unwrap();
        if all.iter().all(|a| a.status != ActionStatus::Running) {
            break all;
        }
        assert!(Instant::now() < deadline, "day-two actions still running");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for a in &finals {
        assert_eq!(a.status, ActionStatus::Success, "{a:?} (seed {seed})");
    }
    assert_eq!(meson_db::jobs::unfinished(&db.pool).await.unwrap(), 0);

    for (i, &id) in vms.iter().enumerate() {
        let vm = meson_db::vms::get_any(&db.pool, id).await.unwrap();
        assert_eq!(vm.status, VmStatus::Running, "{vm:?}");
        let host = vm.placement.as_ref().unwrap().host.clone();
        let own = meson_db::volumes::list_for_vms(&db.pool, &[id])
            .await
            .unwrap();
        let mut copies = 0;
        for h in sim.hosts() {
            let inv = h.inventory();
            let on: Vec<_> = inv
                .vms
                .iter()
                .filter(|v| v.name == vm.atomos_name)
                .collect();
            let vols = inv
                .volumes
                .iter()
                .filter(|v| own.iter().any(|o| o.atomos_name == v.name))
                .count();
            if h.name() == host {
                assert_eq!(on.len(), 1, "{} on its host {host}", vm.name);
                assert_eq!(vols, own.len(), "{}'s volumes on {host}", vm.name);
                assert_eq!(on[0].state, atomos_driver::VmState::Running);
                assert_eq!(on[0].network_ids.len(), 1, "{} on its network", vm.name);
                let cores = if i % 2 == 0 { 1 } else { 2 };
                assert_eq!(on[0].slots, cores, "{} on AtomOS", vm.name);
                assert_eq!(vm.spec.cpu.cores, cores, "{} in meson", vm.name);
                copies += 1;
            } else {
                assert!(on.is_empty(), "{} also on {}", vm.name, h.name());
                assert_eq!(vols, 0, "{}'s volumes left on {}", vm.name, h.name());
            }
        }
        assert_eq!(copies, 1);
        if i % 2 == 0 {
            assert_ne!(host, from[&id], "{} moved", vm.name);
        } else {
            assert_eq!(host, from[&id], "{} stayed", vm.name);
        }
    }
    let ids: Vec<VmId> = vms.clone();
    let volumes = meson_db::volumes::list_for_vms(&db.pool, &ids)
        .await
        .unwrap();
    let mut want_vms: Vec<String> = Vec::new();
    for &id in &vms {
        want_vms.push(
            meson_db::vms::get_any(&db.pool, id)
                .await
                .unwrap()
                .atomos_name,
        );
    }
    let mut want_vols: Vec<String> = volumes.iter().map(|v| v.atomos_name.clone()).collect();
    want_vms.sort();
    want_vols.sort();
    assert_eq!(
        support::atomos_names(&sim),
        (want_vms, want_vols),
        "seed {seed}"
    );
    assert!(worker.stop().success(), "the last worker stops cleanly");
}

/// The content hash a VM's boot volume has on its host.
fn boot_content(sim: &atomos_sim::Simulator, boot: &str) -> String {
    sim.hosts()
        .iter()
        .flat_map(|h| h.inventory().volumes)
        .find(|v| v.id == boot)
        .expect("the boot volume on a host")
        .content
}

/// The VM's boot volume's AtomOS id and its host.
async fn boot_of(pool: &meson_db::PgPool, vm: VmId) -> (String, String) {
    let v = meson_db::vms::get_any(pool, vm).await.unwrap();
    let boot = meson_db::volumes::list_for_vms(pool, &[vm])
        .await
        .unwrap()
        .into_iter()
        .find(|v| v.kind == meson_core::volume::VolumeKind::Boot)
        .unwrap();
    (boot.atomos_id.unwrap(), v.placement.unwrap().host)
}

/// Restores, into the same VMs and into new ones, while the one worker
/// running them is SIGKILLed again and again: each resumes and ends with
/// a running VM whose boot volume holds the backup's bytes (not those
/// written after it), on the backup's host, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restores_survive_their_worker_killed_mid_workflow() {
    let seed: u64 = std::env::var("MESON_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("restore kill seed {seed} (set MESON_CHAOS_SEED to replay)");
    let mut rng = StdRng::seed_from_u64(seed);
    let db = TestDatabase::new().await;
    let sim = support::simulator(Duration::from_millis(300)).await;
    mesond::server::register_targets(&db.pool, &sim.targets())
        .await
        .unwrap();
    let app = App::new(db.pool.clone());
    let who = Principal {
        tenant: TenantId("restores".into()),
        subject: "ops".into(),
        role: Role::Admin,
        email: None,
    };
    const LEASE_MS: u64 = 600;
    let lease = LEASE_MS.to_string();
    let mut worker = spawn_worker_leasing(&db.url, &lease);

    // Four running VMs, each backed up while its boot disk held "good",
    // then overwritten with "bad".
    let mut creates = Vec::new();
    let mut vms = Vec::new();
    for i in 0..4 {
        let c = app
            .vm_create(&who, &vm_body(&format!("rs-{i}")))
            .await
            .expect("create accepted");
        creates.push(c.action.id);
        vms.push(c.vm.id);
    }
    settle(&db.pool, &creates).await;
    let mut good = BTreeMap::new();
    let mut backups = BTreeMap::new();
    let mut taken = Vec::new();
    for &vm in &vms {
        let (boot, host) = boot_of(&db.pool, vm).await;
        let h = sim.hosts().into_iter().find(|h| h.name() == host).unwrap();
        good.insert(
            vm,
            h.write_volume(&boot, format!("good {vm}").as_bytes())
                .unwrap(),
        );
        let c = app
            .vm_backup(&who, vm, &serde_json::json!({}))
            .await
            .expect("backup accepted");
        taken.push(c.action.id);
        backups.insert(vm, c.backup);
    }
    settle(&db.pool, &taken).await;
    for &vm in &vms {
        let (boot, host) = boot_of(&db.pool, vm).await;
        let h = sim.hosts().into_iter().find(|h| h.name() == host).unwrap();
        h.write_volume(&boot, b"bad").unwrap();
    }

    // Every AtomOS call takes a while, so the kills land all along.
    for h in sim.hosts() {
        h.faults().set_latency(Duration::from_millis(120));
    }
    let mut actions = Vec::new();
    let mut restored = Vec::new();
    for (i, &vm) in vms.iter().enumerate() {
        let into = if i % 2 == 0 { "same" } else { "new" };
        let body = serde_json::json!({"backup": backups[&vm].id.to_string(), "into": into});
        let r = app
            .vm_restore(&who, vm, &body)
            .await
            .expect("restore accepted");
        actions.push(r.action.id);
        restored.push((vm, r.vm.id));
    }
    let mut kills = 0;
    while kills < 8 {
        let takeover = if kills == 0 { 0 } else { LEASE_MS };
        tokio::time::sleep(Duration::from_millis(takeover + rng.gen_range(50..400))).await;
        let now = meson_db::actions::get_many(&db.pool, None, &actions)
            .await
            .unwrap();
        if now.iter().all(|a| a.status != ActionStatus::Running) {
            break;
        }
        worker.kill();
        worker = spawn_worker_leasing(&db.url, &lease);
        kills += 1;
    }
    assert!(
        kills >= 2,
        "the worker was killed mid-restore ({kills} times)"
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let all = meson_db::actions::get_many(&db.pool, None, &actions)
            .await
            .unwrap();
        if all.iter().all(|a| a.status != ActionStatus::Running) {
            for a in &all {
                assert_eq!(a.status, ActionStatus::Success, "{a:?} (seed {seed})");
            }
            break;
        }
        assert!(Instant::now() < deadline, "restores still running");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (from, into) in restored {
        let vm = meson_db::vms::get_any(&db.pool, into).await.unwrap();
        assert_eq!(vm.status, VmStatus::Running, "{vm:?}");
        let (boot, host) = boot_of(&db.pool, into).await;
        assert_eq!(host, backups[&from].host, "on the backup's host");
        assert_eq!(
            boot_content(&sim, &boot),
            good[&from],
            "{} holds the backup's bytes (seed {seed})",
            vm.name
        );
        let copies = sim
            .hosts()
            .iter()
            .flat_map(|h| h.inventory().vms)
            .filter(|v| v.name == vm.atomos_name)
            .count();
        assert_eq!(copies, 1, "{} exists once", vm.name);
    }
    assert_eq!(meson_db::jobs::unfinished(&db.pool).await.unwrap(), 0);
}
