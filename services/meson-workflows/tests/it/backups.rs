//! Backups through the harness: a backup's create and delete, a restore
//! into the same VM and into a new one (every step twice, a fault around
//! each, every undo twice, a worker killed before each), each proven on the
//! simulator by content hashes: a restore brings back the bytes the backup
//! holds, not the volume's later ones. And the schedule: nine simulated
//! days of passes leave exactly `keep` backups per VM, never more than the
//! host's share in progress at once.

use crate::world::{HasWorld, World, harness};
use chrono::{DateTime, Duration, TimeZone, Utc};
use meson_core::action::ResourceType;
use meson_core::backup::{Backup, BackupKind, BackupStatus};
use meson_core::volume::VolumeKind;
use meson_core::{ActionId, BackupId, VmId};
use meson_jobs::testing::Scenario;
use meson_workflows::backup::{BackupCreate, BackupDelete};
use meson_workflows::vm_create::VmCreate;
use meson_workflows::vm_delete::VmDelete;
use meson_workflows::vm_restore::VmRestore;

async fn backup_of(w: &World, action: ActionId) -> Backup {
    let a = meson_db::actions::get(&w.db.pool, None, action)
        .await
        .unwrap();
    let id = a
        .resources
        .iter()
        .find(|(t, _)| *t == ResourceType::Backup)
        .map(|(_, id)| BackupId(*id))
        .expect("the action names its backup");
    meson_db::backups::get_including_deleted(&w.db.pool, id)
        .await
        .unwrap()
}

fn host(w: &World, name: &str) -> atomos_sim::SimHost {
    w.sim
        .hosts()
        .into_iter()
        .find(|h| h.name() == name)
        .expect("its host")
}

/// Whether the backup's host has it.
fn on_host(w: &World, b: &Backup) -> bool {
    host(w, &b.host)
        .inventory()
        .backups
        .iter()
        .any(|x| x.id == b.id.to_string())
}

/// The VM's boot volume's AtomOS id and host.
async fn boot_of(w: &World, vm: VmId) -> (String, String) {
    let v = w.vm(vm).await;
    let boot = meson_db::volumes::list_for_vms(&w.db.pool, &[vm])
        .await
        .unwrap()
        .into_iter()
        .find(|v| v.kind == VolumeKind::Boot)
        .expect("a boot volume");
    (
        boot.atomos_id.expect("on its host"),
        v.placement.expect("placed").host,
    )
}

/// Writes `data` over the VM's boot volume on its host; the content hash.
async fn write_boot(w: &World, vm: VmId, data: &[u8]) -> String {
    let (boot, at) = boot_of(w, vm).await;
    host(w, &at).write_volume(&boot, data).expect("written")
}

/// The content hash the VM's boot volume has on its host.
async fn boot_content(w: &World, vm: VmId) -> String {
    let (boot, at) = boot_of(w, vm).await;
    host(w, &at)
        .inventory()
        .volumes
        .iter()
        .find(|v| v.id == boot)
        .expect("the boot volume on its host")
        .content
        .clone()
}

/// A running VM.
async fn running_vm(w: &World) -> VmId {
    let (vm, create) = w.create_request().await;
    assert_eq!(
        w.run_plain(VmCreate(w.env.clone()), create).await.error,
        None
    );
    vm
}

/// A running VM whose boot volume held `before` when a backup of it was
/// taken, and holds `after` now; the backup.
async fn backed_up(w: &World) -> (VmId, Backup, String, String) {
    let vm = running_vm(w).await;
    let before = write_boot(w, vm, b"yesterday's disk").await;
    let c = w
        .app
        .vm_backup(&w.who, vm, &serde_json::json!({"name": "nightly"}))
        .await
        .expect("backup accepted");
    assert_eq!(
        w.run_plain(BackupCreate(w.env.clone()), c.action.id)
            .await
            .error,
        None
    );
    let after = write_boot(w, vm, b"a bad upgrade").await;
    assert_ne!(before, after);
    (vm, backup_of(w, c.action.id).await, before, after)
}

struct CreateScenario(World);

impl HasWorld for CreateScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl Scenario for CreateScenario {
    type W = BackupCreate;

    fn workflow(&self) -> Self::W {
        BackupCreate(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let vm = running_vm(w).await;
        let c = w
            .app
            .vm_backup(&w.who, vm, &serde_json::json!({}))
            .await
            .expect("backup accepted");
        assert_eq!(c.backup.status, BackupStatus::Creating);
        assert_eq!(c.backup.kind, BackupKind::Manual);
        c.action.id
    }

    /// Available, on its host, its copies recorded: the boot volume's among
    /// them, with the host's content hash of the copy the boot volume's.
    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        let b = backup_of(w, action).await;
        assert_eq!(b.status, BackupStatus::Available, "{b:?}");
        assert!(on_host(w, &b));
        let boot = b
            .volumes
            .iter()
            .find(|v| v.kind == VolumeKind::Boot)
            .expect("the boot volume's copy");
        let copy = host(w, &b.host)
            .inventory()
            .backups
            .into_iter()
            .find(|x| x.id == b.id.to_string())
            .unwrap()
            .volumes
            .into_iter()
            .find(|v| v.volume_id == boot.source)
            .unwrap();
        assert_eq!(copy.content, boot_content(w, b.vm_id).await);
        w.assert_running(b.vm_id).await;
    }

    /// Not on its host; `error`, saying why.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let b = backup_of(w, action).await;
        assert!(!on_host(w, &b), "undone on the host");
        assert_eq!(b.status, BackupStatus::Error);
        assert!(b.error_message.is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_create_passes_the_workflow_harness() {
    harness(CreateScenario(World::new().await)).await;
}

struct DeleteScenario(World);

impl HasWorld for DeleteScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl Scenario for DeleteScenario {
    type W = BackupDelete;

    fn workflow(&self) -> Self::W {
        BackupDelete(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let (_, b, _, _) = backed_up(w).await;
        w.app
            .backup_delete(&w.who, b.id)
            .await
            .expect("delete accepted")
            .id
    }

    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        let b = backup_of(w, action).await;
        assert!(!on_host(w, &b), "gone from its host");
        assert!(
            meson_db::backups::get(&w.db.pool, &w.who.tenant, b.id)
                .await
                .is_err(),
            "forgotten"
        );
    }

    /// Forward-only: still recorded in `error`, or gone from both.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let b = backup_of(w, action).await;
        match meson_db::backups::get(&w.db.pool, &w.who.tenant, b.id).await {
            Ok(b) => assert_eq!(b.status, BackupStatus::Error, "{b:?}"),
            Err(_) => assert!(!on_host(w, &b)),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_delete_passes_the_workflow_harness() {
    harness(DeleteScenario(World::new().await)).await;
}

struct RestoreSameScenario(World, std::sync::Mutex<Vec<(ActionId, String, String)>>);

impl HasWorld for RestoreSameScenario {
    fn world(&self) -> &World {
        &self.0
    }
}

impl RestoreSameScenario {
    fn hashes(&self, action: ActionId) -> (String, String) {
        let seen = self.1.lock().unwrap();
        let (_, before, after) = seen.iter().find(|(a, _, _)| *a == action).unwrap();
        (before.clone(), after.clone())
    }
}

impl Scenario for RestoreSameScenario {
    type W = VmRestore;

    fn workflow(&self) -> Self::W {
        VmRestore(self.0.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.0;
        let (vm, b, before, after) = backed_up(w).await;
        let r = w
            .app
            .vm_restore(&w.who, vm, &serde_json::json!({"backup": b.id.to_string()}))
            .await
            .expect("restore accepted");
        assert!(!r.new);
        self.1.lock().unwrap().push((r.action.id, before, after));
        r.action.id
    }

    /// The VM runs the backup's bytes, not the later ones.
    async fn assert_done(&self, action: ActionId) {
        let w = &self.0;
        let vm = w.vm_of(action).await;
        let (before, _) = self.hashes(action);
        assert_eq!(boot_content(w, vm).await, before);
        w.assert_running(vm).await;
    }

    /// Running again; its disk is the later bytes, or (the write being the
    /// commit point) the backup's.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.0;
        let vm = w.vm_of(action).await;
        let (before, after) = self.hashes(action);
        let now = boot_content(w, vm).await;
        assert!(now == after || now == before, "{now}");
        w.assert_running(vm).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_into_the_same_vm_passes_the_workflow_harness() {
    harness(RestoreSameScenario(World::new().await, Default::default())).await;
}

/// One backup, taken before the harness runs (its VM's create would meet
/// the harness's faults), restored into a new VM by every run.
struct RestoreNewScenario {
    w: World,
    vm: VmId,
    backup: Backup,
    /// The content hash the backup holds of the boot volume.
    before: String,
}

impl RestoreNewScenario {
    async fn new() -> Self {
        let w = World::new().await;
        let (vm, backup, before, _) = backed_up(&w).await;
        RestoreNewScenario {
            w,
            vm,
            backup,
            before,
        }
    }
}

impl HasWorld for RestoreNewScenario {
    fn world(&self) -> &World {
        &self.w
    }
}

impl Scenario for RestoreNewScenario {
    type W = VmCreate;

    fn workflow(&self) -> Self::W {
        VmCreate(self.w.env.clone())
    }

    async fn start(&self) -> ActionId {
        let w = &self.w;
        let r = w
            .app
            .vm_restore(
                &w.who,
                self.vm,
                &serde_json::json!({"backup": self.backup.id.to_string(), "into": "new"}),
            )
            .await
            .expect("restore accepted");
        assert!(r.new);
        assert_ne!(r.vm.id, self.vm);
        assert_eq!(r.vm.spec.backup, Some(self.backup.id));
        r.action.id
    }

    /// A new VM, on the backup's host, running the backup's bytes.
    async fn assert_done(&self, action: ActionId) {
        let w = &self.w;
        let vm = w.vm_of(action).await;
        assert_eq!(boot_content(w, vm).await, self.before);
        // Running, once, with its three volumes (and no networks: a
        // restored VM is attached to none).
        let v = w.vm(vm).await;
        assert_eq!(v.status, meson_core::vm::VmStatus::Running, "{v:?}");
        assert!(v.ipv4.is_some() && v.atomos_id.is_some());
        assert_eq!(v.placement.unwrap().target_id, self.backup.target_id);
        assert_eq!(w.on_atomos(vm), (1, 3), "one VM and its three volumes");
    }

    /// Nothing of the new VM is left on AtomOS; the backup stays.
    async fn assert_clean(&self, action: ActionId) {
        let w = &self.w;
        let vm = w.vm_of(action).await;
        w.assert_gone_from_atomos(vm).await;
        assert!(on_host(w, &self.backup));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_into_a_new_vm_passes_the_workflow_harness() {
    harness(RestoreNewScenario::new().await).await;
}

fn day(d: i64, h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, h, m, 0).unwrap() + Duration::days(d)
}

/// Nine simulated days of the schedule, a pass every half hour in the
/// window: each of three VMs on one host gets one automatic backup a day,
/// at most two in progress on the host at once (the third waits for the
/// next pass), and the oldest go once seven are kept. A VM deleted since
/// keeps its backups until they expire, `keep` days on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nine_days_of_the_schedule_keep_seven_backups_per_vm() {
    let mut w = World::new().await;
    // Twenty-one backups: no quota in the way (the app's are lifted too).
    let mut config = w.env.config.clone();
    config.quotas = w.app.quotas;
    w.env = std::sync::Arc::new(meson_workflows::Env {
        pool: w.db.pool.clone(),
        atomos: meson_workflows::Atomos::new(w.db.pool.clone(), Default::default()),
        config,
    });
    let mut vms = Vec::new();
    for _ in 0..3 {
        let vm = running_vm(&w).await;
        let out = w
            .app
            .vm_enable_backups(&w.who, vm, &serde_json::json!({"window": "01-03"}))
            .await
            .expect("enabled");
        assert_eq!(
            out.0.backup_policy.map(|p| (p.window(), p.keep)),
            Some(("01-03".to_owned(), 7))
        );
        vms.push(vm);
    }
    let hosts: std::collections::BTreeSet<String> = {
        let mut h = std::collections::BTreeSet::new();
        for vm in &vms {
            h.insert(w.vm(*vm).await.placement.unwrap().host);
        }
        h
    };
    assert_eq!(hosts.len(), 1, "the three VMs share the cheapest host");
    let per_host = w.env.config.backups_per_host as usize;
    assert_eq!(per_host, 2);
    let mut most_at_once = 0;
    for d in 0..9 {
        // Outside the window: nothing is taken.
        let pass = meson_workflows::backup::tick(&w.env, day(d, 12, 0))
            .await
            .unwrap();
        assert!(pass.taken.is_empty(), "{pass:?}");
        for m in [0, 30, 60, 90] {
            let at = day(d, 1, 0) + Duration::minutes(m);
            let pass = meson_workflows::backup::tick(&w.env, at).await.unwrap();
            let creating: usize = meson_db::backups::creating_per_host(&w.db.pool)
                .await
                .unwrap()
                .iter()
                .map(|(_, n)| *n as usize)
                .max()
                .unwrap_or(0);
            assert!(creating <= per_host, "{creating} at once on a host");
            most_at_once = most_at_once.max(creating);
            for (_, _, action) in &pass.taken {
                let a = w.run_plain(BackupCreate(w.env.clone()), *action).await;
                assert_eq!(a.error, None);
            }
            for (_, action) in &pass.deleted {
                let a = w.run_plain(BackupDelete(w.env.clone()), *action).await;
                assert_eq!(a.error, None);
            }
        }
    }
    assert_eq!(most_at_once, per_host, "the host took its most at once");
    // The last pass's rotation ran after the ninth day's backups were taken.
    let pass = meson_workflows::backup::tick(&w.env, day(8, 2, 30))
        .await
        .unwrap();
    for (_, action) in &pass.deleted {
        w.run_plain(BackupDelete(w.env.clone()), *action).await;
    }
    for vm in &vms {
        let kept = meson_db::backups::of_vm(&w.db.pool, *vm).await.unwrap();
        assert_eq!(kept.len(), 7, "{vm}: {kept:?}");
        assert!(
            kept.iter()
                .all(|b| b.status == BackupStatus::Available && b.kind == BackupKind::Automatic)
        );
        // The newest seven days' (the third to the ninth).
        let days: Vec<i64> = kept
            .iter()
            .map(|b| (b.created - day(0, 0, 0)).num_days())
            .collect();
        assert_eq!(days, (2..9).collect::<Vec<_>>());
        let b = &kept[0];
        let on_atomos = host(&w, &b.host)
            .inventory()
            .backups
            .iter()
            .filter(|x| kept.iter().any(|k| k.id.to_string() == x.id))
            .count();
        assert_eq!(on_atomos, 7, "the host has exactly the kept ones");
    }
    let host_backups = host(
        &w,
        &meson_db::backups::of_vm(&w.db.pool, vms[0]).await.unwrap()[0].host,
    )
    .inventory()
    .backups
    .len();
    assert_eq!(host_backups, 21, "the rotated ones are gone from the host");

    // A deleted VM's automatic backups expire `keep` days after it goes.
    let delete = w.app.vm_delete(&w.who, vms[0]).await.unwrap();
    assert_eq!(
        w.run_plain(VmDelete(w.env.clone()), delete.id).await.error,
        None
    );
    let kept = meson_db::backups::of_vm(&w.db.pool, vms[0]).await.unwrap();
    assert_eq!(kept.len(), 7, "they outlive their VM");
    let expires = kept[0].expires.expect("an expiry");
    let in_days = (expires - Utc::now()).num_hours();
    assert!((7 * 24 - 1..=7 * 24).contains(&in_days), "{in_days} hours");
    let pass = meson_workflows::backup::tick(&w.env, expires + Duration::minutes(1))
        .await
        .unwrap();
    assert_eq!(pass.deleted.len(), 7, "{pass:?}");
    assert!(pass.taken.is_empty(), "outside every window: {pass:?}");
    for (_, action) in &pass.deleted {
        assert_eq!(
            w.run_plain(BackupDelete(w.env.clone()), *action)
                .await
                .error,
            None
        );
    }
    assert!(
        meson_db::backups::of_vm(&w.db.pool, vms[0])
            .await
            .unwrap()
            .is_empty()
    );
}

/// A backup its host lost is `error` after a drift pass, saying so (a
/// restore from it is refused), and deleting it still finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_its_host_lost_is_found_missing() {
    let w = World::new().await;
    let (vm, b, _, _) = backed_up(&w).await;
    let c = w.env.atomos.client(b.target_id).await.unwrap();
    meson_workflows::drift::tick(&w.env).await.unwrap();
    let same = meson_db::backups::get(&w.db.pool, &w.who.tenant, b.id)
        .await
        .unwrap();
    assert_eq!(same.status, BackupStatus::Available, "nothing drifted");

    c.backup_delete(&b.id.to_string()).await.unwrap();
    meson_workflows::drift::tick(&w.env).await.unwrap();
    let lost = meson_db::backups::get(&w.db.pool, &w.who.tenant, b.id)
        .await
        .unwrap();
    assert_eq!(lost.status, BackupStatus::Error);
    assert!(
        lost.error_message
            .as_deref()
            .unwrap()
            .contains("missing from its host"),
        "{lost:?}"
    );
    let refused = w
        .app
        .vm_restore(&w.who, vm, &serde_json::json!({"backup": b.id.to_string()}))
        .await;
    assert!(
        matches!(refused, Err(meson_core::Error::Conflict { .. })),
        "a restore from it is refused"
    );
    // Deleting it finishes the job, though its host has nothing left.
    let delete = w.app.backup_delete(&w.who, b.id).await.unwrap();
    assert_eq!(
        w.run_plain(BackupDelete(w.env.clone()), delete.id)
            .await
            .error,
        None
    );
}
