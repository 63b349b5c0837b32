//! VM backups on the compute daemon: copies independent of the volumes they
//! came from, restored in place or into other volumes, refusals (a running
//! VM, unknown backups, volumes and copies, another VM's id, no room),
//! idempotent creates, listing and search (backups outlive their VM),
//! deletes, the host's clock, faults, and a restart from the state file.

use crate::common::{client, client_with, control, opts, register, sim, start};
use atomos_driver::{AtomosClient, Backup, ClientOptions, ErrorKind, Register, VolumeCreate};
use atomos_sim::{SimBackup, SimHost, Simulator, content_hash};
use reqwest::Method;
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

const BOOT: Duration = Duration::from_millis(20);

fn volume(name: &str, size_gb: u32, bootable: bool) -> VolumeCreate {
    VolumeCreate {
        name: name.into(),
        size_gb,
        bootable,
        readonly: false,
        shareable: false,
        private: true,
    }
}

/// A VM's volumes: boot, data and cloud-init ISO ids.
struct Disks {
    vm: String,
    boot: String,
    data: String,
    iso: String,
}

/// Registers VM `name` (powered on) with a 10 GB boot volume, a 5 GB data
/// volume and a cloud-init ISO, the boot volume written with `bytes`.
async fn vm_with_disks(sim: &Simulator, c: &AtomosClient, name: &str, bytes: &[u8]) -> Disks {
    let boot = c
        .volume_create(&volume(&format!("{name}-boot"), 10, true))
        .await
        .unwrap();
    let data = c
        .volume_create(&volume(&format!("{name}-data0"), 5, false))
        .await
        .unwrap();
    let iso = c
        .cloudinit_create(
            &format!("{name}-cloudinit"),
            "#cloud-config\n",
            "instance-id: x\n",
        )
        .await
        .unwrap();
    c.register(&Register {
        volume_ids: vec![boot.clone(), iso.clone(), data.clone()],
        ..register(name, 1, 512)
    })
    .await
    .unwrap();
    let vm = c.vm_by_name(name).await.unwrap().expect("listed").id;
    let host = host_of(sim, c);
    host.write_volume(&boot, bytes).unwrap();
    Disks {
        vm,
        boot,
        data,
        iso,
    }
}

fn host_of(sim: &Simulator, c: &AtomosClient) -> SimHost {
    sim.host(&c.target().name).expect("host")
}

/// Volume `id`'s content hash and size, as the host holds it.
fn disk(host: &SimHost, id: &str) -> (String, f64) {
    let v = host
        .inventory()
        .volumes
        .into_iter()
        .find(|v| v.id == id)
        .unwrap_or_else(|| panic!("volume {id} exists"));
    (v.content, v.size_gb)
}

fn content(host: &SimHost, id: &str) -> String {
    disk(host, id).0
}

fn sim_backups(host: &SimHost) -> Vec<SimBackup> {
    host.inventory().backups
}

/// A compute daemon URL of `host`: `route` below its base path.
fn compute_url(host: &SimHost, route: &str) -> String {
    let t = host.target();
    format!(
        "http://{}:{}/api/v1.0/client/vm{route}",
        t.host, t.ports.compute
    )
}

async fn raw(
    host: &SimHost,
    method: Method,
    route: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let mut req = reqwest::Client::new()
        .request(method, compute_url(host, route))
        .timeout(Duration::from_secs(5));
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.expect("the daemon answers");
    let status = resp.status().as_u16();
    (status, resp.json().await.expect("a JSON answer"))
}

#[tokio::test]
async fn a_restore_in_place_brings_back_the_bytes_of_the_backup() {
    let sim = sim(BOOT).await;
    let c = client(&sim, "small");
    let host = sim.host("small").unwrap();
    let d = vm_with_disks(&sim, &c, "web", b"monday").await;
    let monday = content_hash(b"monday");
    let data_before = content(&host, &d.data);

    // Taken while the VM runs (or boots): a crash-consistent copy.
    let backup = c.backup_create(&d.vm, "bk-1", "before").await.unwrap();
    assert_eq!(
        (
            backup.id.as_str(),
            backup.vm_id.as_str(),
            backup.vm_name.as_str(),
            backup.name.as_str()
        ),
        ("bk-1", d.vm.as_str(), "web", "before")
    );
    // The cloud-init ISO is not copied: boot and data, in the VM's order.
    let copies: Vec<(&str, &str, f64, Option<&str>)> = backup
        .volumes
        .iter()
        .map(|v| {
            (
                v.volume_id.as_str(),
                v.name.as_str(),
                v.size_gb,
                v.content_hash.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        copies,
        vec![
            (d.boot.as_str(), "web-boot", 10.0, Some(monday.as_str())),
            (
                d.data.as_str(),
                "web-data0",
                5.0,
                Some(data_before.as_str())
            ),
        ]
    );
    assert!(!backup.volumes.iter().any(|v| v.volume_id == d.iso));
    assert_eq!(backup.size_gb, 15.0);
    let kept = sim_backups(&host);
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].volumes[0].content, monday);
    assert_eq!(kept[0].size_gb(), 15.0);

    // Later writes change the volume, not the backup. Through the control
    // endpoint this time.
    let (status, answer) = control(
        &sim,
        Method::POST,
        &format!("/inventory/small/volumes/{}/write", d.boot),
        Some(json!({"data": "tuesday"})),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let tuesday = content_hash(b"tuesday");
    assert_eq!(
        answer,
        json!({"host": "small", "volume": d.boot, "content": tuesday})
    );
    assert_eq!(content(&host, &d.boot), tuesday);
    assert_eq!(sim_backups(&host), kept, "the copy stays as it was");
    host.write_volume("web-data0", b"tuesday's data").unwrap();

    // Not into a VM that is not off.
    let in_place = [(&d.boot, &d.boot), (&d.data, &d.data)];
    let err = c.backup_restore("bk-1", &in_place).await.unwrap_err();
    assert_eq!(
        (err.kind, err.status),
        (ErrorKind::Invalid, Some(409)),
        "{err}"
    );
    assert!(err.message.starts_with("[VmRunning]"), "{err}");
    assert!(err.message.contains(&d.boot), "{err}");
    assert_eq!(content(&host, &d.boot), tuesday, "nothing written");

    c.stop(&d.vm).await.unwrap();
    c.backup_restore("bk-1", &in_place).await.unwrap();
    assert_eq!(
        content(&host, &d.boot),
        monday,
        "Monday's bytes, not Tuesday's"
    );
    assert_eq!(content(&host, &d.data), data_before);
    assert_eq!(disk(&host, &d.boot).1, 10.0);
    // Restored, the backup is still there and still the same.
    assert_eq!(sim_backups(&host), kept);
    c.start(&d.vm).await.unwrap();
    let vm = c.vm_by_name("web").await.unwrap().unwrap();
    assert_eq!(vm.volume_ids, vec![d.boot, d.iso, d.data]);
}

#[tokio::test]
async fn a_backup_restores_into_fresh_volumes_of_another_vm() {
    let sim = sim(BOOT).await;
    let c = client(&sim, "small");
    let host = sim.host("small").unwrap();
    let d = vm_with_disks(&sim, &c, "web", b"the original").await;
    let backup = c.backup_create(&d.vm, "bk", "").await.unwrap();
    assert!(
        backup.name.starts_with("web-"),
        "a default name: {backup:?}"
    );

    // The new VM's fresh volumes: a smaller boot volume grows to the copy's
    // size, a larger data volume keeps its own.
    let boot = c
        .volume_create(&volume("copy-boot", 1, true))
        .await
        .unwrap();
    let data = c
        .volume_create(&volume("copy-data0", 8, false))
        .await
        .unwrap();
    c.backup_restore(
        "bk",
        &[
            (d.boot.as_str(), boot.as_str()),
            (d.data.as_str(), data.as_str()),
        ],
    )
    .await
    .unwrap();
    assert_eq!(disk(&host, &boot), (content_hash(b"the original"), 10.0));
    assert_eq!(
        disk(&host, &data),
        (backup.volumes[1].content_hash.clone().unwrap(), 8.0)
    );
    assert_eq!(c.volume_info(&boot).await.unwrap().size_gb, 10.0);
    c.register(&Register {
        volume_ids: vec![boot.clone(), data.clone()],
        ..register("copy", 1, 512)
    })
    .await
    .unwrap();
    // The source VM runs on, untouched.
    assert_eq!(content(&host, &d.boot), content_hash(b"the original"));

    // Refusals, nothing written by any.
    let fresh = c.volume_create(&volume("fresh", 1, false)).await.unwrap();
    let err = c
        .backup_restore("bk", &[("not-a-copy", fresh.as_str())])
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind, err.status),
        (ErrorKind::Invalid, Some(400)),
        "{err}"
    );
    assert!(err.message.starts_with("[BackupVolumeNotFound]"), "{err}");
    assert!(err.message.contains("not-a-copy"), "names it: {err}");
    let err = c
        .backup_restore("nope", &[(d.boot.as_str(), fresh.as_str())])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound, "{err}");
    assert!(err.message.starts_with("[BackupNotFound]"), "{err}");
    let err = c
        .backup_restore("bk", &[(d.boot.as_str(), "0".repeat(32).as_str())])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound, "{err}");
    assert!(err.message.starts_with("[VolumeNotFound]"), "{err}");
    let err = c
        .backup_restore("bk", &[(d.boot.as_str(), d.iso.as_str())])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    // The new VM runs: its volumes are refused, even with a free one first.
    let err = c
        .backup_restore(
            "bk",
            &[
                (d.data.as_str(), fresh.as_str()),
                (d.boot.as_str(), boot.as_str()),
            ],
        )
        .await
        .unwrap_err();
    assert!(err.message.starts_with("[VmRunning]"), "{err}");
    let err = c
        .backup_restore(
            "bk",
            &[
                (d.data.as_str(), fresh.as_str()),
                (d.boot.as_str(), fresh.as_str()),
            ],
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "listed twice: {err}");
    let empty: [(&str, &str); 0] = [];
    let err = c.backup_restore("bk", &empty).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    assert_eq!(disk(&host, &fresh), (content_hash(b"empty:1"), 1.0));
}

#[tokio::test]
async fn creates_are_idempotent_by_id_and_an_id_is_one_vms() {
    let sim = sim(BOOT).await;
    let c = client(&sim, "small");
    let host = sim.host("small").unwrap();
    let web = vm_with_disks(&sim, &c, "web", b"web").await;
    let db = vm_with_disks(&sim, &c, "db", b"db").await;

    let first = c.backup_create(&web.vm, "bk", "one").await.unwrap();
    host.write_volume(&web.boot, b"later").unwrap();
    host.advance_clock(Duration::from_secs(60));
    // A retry (even with another name) finds the first, as it was.
    assert_eq!(c.backup_create(&web.vm, "bk", "two").await.unwrap(), first);
    assert_eq!(sim_backups(&host).len(), 1);
    let err = c.backup_create(&db.vm, "bk", "").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::AlreadyExists, "{err}");
    assert!(err.message.starts_with("[BackupExists]"), "{err}");

    let no_vm = "00000000-0000-4000-8000-000000000000";
    let err = c.backup_create(no_vm, "bk-x", "").await.unwrap_err();
    assert_eq!(
        (err.kind, err.status),
        (ErrorKind::NotFound, Some(404)),
        "{err}"
    );
    assert!(err.message.starts_with("[VmNotFound]"), "{err}");

    // Without an id the host chooses one, each time.
    let a = c.backup_create(&db.vm, "", "").await.unwrap();
    let b = c.backup_create(&db.vm, "", "").await.unwrap();
    assert_ne!(a.id, b.id);
    assert!(uuid::Uuid::parse_str(&a.id).is_ok(), "{a:?}");
    assert_eq!(sim_backups(&host).len(), 3);

    // The daemon's own shapes.
    let (status, answer) = raw(
        &host,
        Method::POST,
        "/backup",
        Some(json!({"vm_uid": web.vm})),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    for field in [
        "backup_id",
        "local_index",
        "vm_name",
        "name",
        "creation_date",
        "size",
        "volumes",
    ] {
        assert!(answer.get(field).is_some(), "{field}: {answer}");
    }
    assert_eq!(
        answer["volumes"][0]["content_hash"],
        content_hash(b"later").as_str()
    );
    for bad in [
        json!({}),
        json!({"local_index": ""}),
        json!({"local_index": web.vm, "backup_id": " "}),
    ] {
        let (status, answer) = raw(&host, Method::POST, "/backup", Some(bad.clone())).await;
        assert_eq!(status, 400, "{bad}: {answer}");
    }
}

#[tokio::test]
async fn backups_are_listed_searched_and_deleted_and_outlive_their_vm() {
    let sim = sim(BOOT).await;
    let c = client(&sim, "small");
    let host = sim.host("small").unwrap();
    let web = vm_with_disks(&sim, &c, "web", b"web").await;
    let db = vm_with_disks(&sim, &c, "db", b"db").await;
    let w1 = c.backup_create(&web.vm, "w1", "").await.unwrap();
    let w2 = c.backup_create(&web.vm, "w2", "").await.unwrap();
    let d1 = c.backup_create(&db.vm, "d1", "").await.unwrap();

    let ids = |list: Vec<Backup>| list.into_iter().map(|b| b.id).collect::<Vec<_>>();
    assert_eq!(ids(c.backups().await.unwrap()), ["w1", "w2", "d1"]);
    assert_eq!(
        c.backups_of(&web.vm).await.unwrap(),
        vec![w1.clone(), w2.clone()]
    );
    assert_eq!(c.backups_of(&db.vm).await.unwrap(), vec![d1.clone()]);
    assert!(c.backups_of("no-such-vm").await.unwrap().is_empty());

    // The VM and its volumes go; its backups stay, and restore elsewhere.
    c.unregister(&web.vm).await.unwrap();
    for v in [&web.boot, &web.data, &web.iso] {
        c.volume_destroy(v).await.unwrap();
    }
    assert_eq!(c.backups_of(&web.vm).await.unwrap(), vec![w1.clone(), w2]);
    let (status, rows) = raw(
        &host,
        Method::GET,
        &format!("/backups/search?vm_uid={}", web.vm),
        None,
    )
    .await;
    assert_eq!(status, 200, "{rows}");
    assert_eq!(rows.as_array().map(Vec::len), Some(2), "{rows}");
    let (status, _) = raw(&host, Method::GET, "/backups/search", None).await;
    assert_eq!(status, 400);
    let target = c.volume_create(&volume("again", 1, true)).await.unwrap();
    c.backup_restore("w1", &[(web.boot.as_str(), target.as_str())])
        .await
        .unwrap();
    assert_eq!(content(&host, &target), content_hash(b"web"));

    c.backup_delete("w1").await.unwrap();
    assert_eq!(ids(c.backups().await.unwrap()), ["w2", "d1"]);
    let err = c.backup_delete("w1").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound, "{err}");
    assert!(err.message.starts_with("[BackupNotFound]"), "{err}");
    let (status, answer) = raw(
        &host,
        Method::DELETE,
        "/backups",
        Some(json!({"backup_id": "d1"})),
    )
    .await;
    assert_eq!((status, answer), (200, json!({"backup_id": "d1"})));
    assert_eq!(ids(c.backups().await.unwrap()), ["w2"]);
}

#[tokio::test]
async fn backups_take_room_on_the_hosts_disk() {
    let sim = sim(BOOT).await;
    let c = client(&sim, "small");
    // `small` has 100 GB: a 40 GB VM and its backup leave 20.
    let disk = c
        .volume_create(&volume("big-boot", 40, true))
        .await
        .unwrap();
    c.register(&Register {
        volume_ids: vec![disk.clone()],
        ..register("big", 1, 512)
    })
    .await
    .unwrap();
    let vm = c.vm_by_name("big").await.unwrap().unwrap().id;
    c.backup_create(&vm, "one", "").await.unwrap();
    c.volume_can_create(20).await.unwrap();
    assert_eq!(
        c.volume_can_create(21).await.unwrap_err().kind,
        ErrorKind::Capacity
    );
    let err = c.backup_create(&vm, "two", "").await.unwrap_err();
    assert_eq!(
        (err.kind, err.status),
        (ErrorKind::Capacity, Some(507)),
        "{err}"
    );
    assert!(err.message.starts_with("[BackupNotAllocable]"), "{err}");
    // A restore that grows a volume needs the room too.
    let small = c.volume_create(&volume("tiny", 1, true)).await.unwrap();
    c.volume_create(&volume("filler", 19, false)).await.unwrap();
    let err = c
        .backup_restore("one", &[(disk.as_str(), small.as_str())])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity, "{err}");
    c.backup_delete("one").await.unwrap();
    c.volume_can_create(40).await.unwrap();
    c.backup_create(&vm, "two", "").await.unwrap();
}

#[tokio::test]
async fn creation_dates_follow_the_hosts_clock() {
    let sim = sim(BOOT).await;
    let c = client(&sim, "small");
    let host = sim.host("small").unwrap();
    let d = vm_with_disks(&sim, &c, "web", b"x").await;
    let before = SystemTime::now() - Duration::from_secs(1);
    let first = c.backup_create(&d.vm, "first", "").await.unwrap();
    let at = first.created.expect("dated");
    assert!(before <= at && at <= SystemTime::now(), "{at:?}");
    host.advance_clock(Duration::from_secs(3 * 3600));
    let later = c.backup_create(&d.vm, "later", "").await.unwrap();
    let gap = later
        .created
        .unwrap()
        .duration_since(at)
        .expect("later is later");
    assert!(
        gap >= Duration::from_secs(3 * 3600) && gap < Duration::from_secs(3 * 3600 + 60),
        "{gap:?}"
    );
    // What the host keeps is what it answered, to the millisecond.
    let kept = sim_backups(&host);
    assert_eq!(SystemTime::from(kept[1].created), later.created.unwrap());
    assert!(kept[1].created <= host.wall_clock());
    assert!(
        SystemTime::from(host.wall_clock())
            > SystemTime::now() + Duration::from_secs(3 * 3600 - 60)
    );
}

#[tokio::test]
async fn faults_hit_the_backup_routes() {
    let sim = sim(BOOT).await;
    let host = sim.host("small").unwrap();
    let c = client(&sim, "small");
    let once = client_with(
        &sim,
        "small",
        ClientOptions {
            retries: 0,
            ..opts()
        },
    );
    let d = vm_with_disks(&sim, &c, "web", b"x").await;
    host.faults().fail_next("vm/backup", 503, 1);
    let err = c.backup_create(&d.vm, "bk", "").await.unwrap_err();
    assert_eq!(
        (err.kind, err.route.as_str()),
        (ErrorKind::Transient, "vm/backup")
    );
    assert!(sim_backups(&host).is_empty(), "not taken, not retried");
    c.backup_create(&d.vm, "bk", "").await.unwrap();

    // Reads are retried; the search has a label of its own.
    host.faults().fail_next("vm/backups", 503, 1);
    assert_eq!(c.backups().await.unwrap().len(), 1);
    host.faults().fail_next("vm/backups/search", 502, 1);
    let err = once.backups_of(&d.vm).await.unwrap_err();
    assert_eq!(
        (err.kind, err.route.as_str()),
        (ErrorKind::Transient, "vm/backups/search")
    );
    assert_eq!(c.backups_of(&d.vm).await.unwrap().len(), 1);

    c.stop(&d.vm).await.unwrap();
    host.write_volume(&d.boot, b"y").unwrap();
    host.faults().fail_next("vm/backup/restore", 500, 1);
    let err = c
        .backup_restore("bk", &[(d.boot.as_str(), d.boot.as_str())])
        .await
        .unwrap_err();
    assert_eq!(err.route, "vm/backup/restore");
    assert_eq!(
        content(&host, &d.boot),
        content_hash(b"y"),
        "nothing written"
    );
    // `vm/backups` covers the delete as well.
    host.faults().fail_next("vm/backups", 503, 1);
    assert!(c.backup_delete("bk").await.unwrap_err().is_transient());
    assert_eq!(sim_backups(&host).len(), 1);
}

#[tokio::test]
async fn a_schedule_is_answered_and_not_kept() {
    let sim = sim(BOOT).await;
    let host = sim.host("small").unwrap();
    let body = json!({"local_index": "v", "cron": "0 3 * * *"});
    let (status, answer) = raw(&host, Method::POST, "/backup/schedule", Some(body)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer,
        json!({"local_index": "v", "cron": "0 3 * * *", "scheduled": false})
    );
    assert!(host.inventory().is_empty());
}

fn state_dir() -> PathBuf {
    std::env::temp_dir().join(format!(
        "atomos-sim-backups-{}",
        uuid::Uuid::new_v4().simple()
    ))
}

#[tokio::test]
async fn backups_survive_a_restart_from_the_state_file() {
    let dir = state_dir();
    let sim = start(BOOT, Some(dir.clone())).await.unwrap();
    let c = client(&sim, "small");
    let d = vm_with_disks(&sim, &c, "web", b"saved").await;
    sim.host("small")
        .unwrap()
        .advance_clock(Duration::from_secs(600));
    let made = c.backup_create(&d.vm, "bk", "kept").await.unwrap();
    // A write through the control endpoint is on disk too.
    let (status, _) = control(
        &sim,
        Method::POST,
        &format!("/inventory/small/volumes/{}/write", d.boot),
        Some(json!({"data": "after"})),
    )
    .await;
    assert_eq!(status, 200);
    let before = sim.host("small").unwrap().inventory();
    let file = sim.host("small").unwrap().state_file().unwrap().to_owned();
    sim.shutdown().await;

    let sim = start(BOOT, Some(dir.clone())).await.unwrap();
    let host = sim.host("small").unwrap();
    assert_eq!(host.inventory().backups, before.backups);
    assert_eq!(content(&host, &d.boot), content_hash(b"after"));
    let c = client(&sim, "small");
    assert_eq!(c.backups_of(&d.vm).await.unwrap(), vec![made]);
    c.stop(&d.vm).await.unwrap();
    c.backup_restore("bk", &[(d.boot.as_str(), d.boot.as_str())])
        .await
        .unwrap();
    assert_eq!(content(&host, &d.boot), content_hash(b"saved"));
    sim.shutdown().await;

    // A file written before backups existed has none, and loads.
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert!(doc.as_object_mut().unwrap().remove("backups").is_some());
    std::fs::write(&file, serde_json::to_vec(&doc).unwrap()).unwrap();
    let sim = start(BOOT, Some(dir.clone())).await.unwrap();
    let after = sim.host("small").unwrap().inventory();
    assert!(after.backups.is_empty());
    assert_eq!(after.vms.len(), 1);
    sim.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn writes_to_volumes_are_refused_for_iso_and_unknown_volumes() {
    let sim = sim(BOOT).await;
    let c = client(&sim, "small");
    let d = vm_with_disks(&sim, &c, "web", b"x").await;
    let host = sim.host("small").unwrap();
    assert!(host.write_volume(&d.iso, b"y").is_err());
    assert!(host.write_volume("nope", b"y").is_err());
    for (path, body, want) in [
        (
            format!("/inventory/small/volumes/{}/write", d.iso),
            json!({"data": "y"}),
            400,
        ),
        (
            "/inventory/small/volumes/nope/write".to_owned(),
            json!({"data": "y"}),
            404,
        ),
        (
            "/inventory/nope/volumes/x/write".to_owned(),
            json!({"data": "y"}),
            404,
        ),
        (
            format!("/inventory/small/volumes/{}/write", d.boot),
            json!({"bytes": "y"}),
            400,
        ),
    ] {
        let (status, answer) = control(&sim, Method::POST, &path, Some(body)).await;
        assert_eq!(status, want, "{path}: {answer}");
        assert!(answer["detail"].is_string(), "{answer}");
    }
    assert_eq!(content(&host, &d.boot), content_hash(b"x"));
}
