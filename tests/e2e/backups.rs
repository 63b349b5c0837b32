//! Backups over the REST API: a backup holds the bytes its VM's volumes had
//! when it was taken (the simulator's content hashes), a restore brings
//! them back into the same VM or a new one, the backup outlives its VM and
//! counts against `images_gb`; policies, bad requests and the quota.

use crate::harness::Meson;
use crate::harness::seed_vm;
use crate::quotas::usage_matches_recount;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A running VM of the seed payload, as read after its create.
pub(crate) async fn running_vm(m: &Meson) -> Value {
    let r = m.post("/v1/vms", &seed_vm()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    vm(m, r.body["vm"]["id"].as_str().unwrap()).await
}

async fn vm(m: &Meson, id: &str) -> Value {
    let r = m.get(&format!("/v1/vms/{id}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.body["vm"].clone()
}

/// The VM's boot volume on its host: (host, AtomOS id, content hash).
fn boot(m: &Meson, vm: &Value) -> (atomos_sim::SimHost, String, String) {
    let (host, prefix) = m.vm_host(vm);
    let v = host
        .inventory()
        .volumes
        .into_iter()
        .find(|v| v.name.starts_with(&prefix) && v.bootable && !v.cloudinit)
        .expect("the VM's boot volume");
    (host, v.id, v.content)
}

/// Writes `data` over the VM's boot disk on its host; the content hash.
fn write_boot(m: &Meson, vm: &Value, data: &[u8]) -> String {
    let (host, id, _) = boot(m, vm);
    host.write_volume(&id, data).unwrap()
}

/// Takes a backup of `vm` and waits for it; the backup as read after.
async fn backup(m: &Meson, vm: &str, body: Value) -> Value {
    let r = m.post(&format!("/v1/vms/{vm}/actions/backup"), &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["backup"]["status"], "creating");
    assert_eq!(r.body["action"]["command"], "create_backup");
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    let id = r.body["backup"]["id"].as_str().unwrap();
    let b = m.get(&format!("/v1/backups/{id}")).await;
    assert_eq!(b.status, StatusCode::OK, "{}", b.body);
    b.body["backup"].clone()
}

/// Starts a restore and waits for it; the VM restored into, as read after.
async fn restore(m: &Meson, vm: &str, body: Value) -> Value {
    let r = m
        .post(&format!("/v1/vms/{vm}/actions/restore"), &body)
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["action"]["command"], "restore_vm");
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    self::vm(m, r.body["vm"]["id"].as_str().unwrap()).await
}

/// Whether the backup's host has it.
fn on_host(m: &Meson, b: &Value) -> bool {
    m.sim()
        .hosts()
        .iter()
        .find(|h| h.name() == b["host"].as_str().unwrap())
        .unwrap()
        .inventory()
        .backups
        .iter()
        .any(|x| x.id == b["id"].as_str().unwrap())
}

#[tokio::test]
async fn a_restore_brings_back_the_backups_bytes_into_the_same_vm_or_a_new_one() {
    let m = Meson::start().await;
    let v = running_vm(&m).await;
    let id = v["id"].as_str().unwrap().to_owned();
    let good = write_boot(&m, &v, b"the disk as it was");

    let b = backup(
        &m,
        &id,
        json!({"name": "before-upgrade", "labels": {"why": "upgrade"}}),
    )
    .await;
    assert_eq!(b["status"], "available", "{b}");
    assert_eq!(b["kind"], "manual");
    assert_eq!(b["name"], "before-upgrade");
    assert_eq!(b["vm"], v["id"]);
    assert_eq!(b["vm_name"], v["name"]);
    assert_eq!(b["host"], v["host"]);
    assert_eq!(b["expires"], Value::Null);
    let kinds: Vec<&str> = b["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["boot", "data"],
        "the boot and data volumes, not cloud-init: {b}"
    );
    assert!(on_host(&m, &b));
    let size = b["size"].as_i64().unwrap();
    assert!(size >= 1);
    assert_eq!(usage_matches_recount(&m).await.images_gb, size);
    let bid = b["id"].as_str().unwrap().to_owned();

    // The disk changes after the backup: a restore brings the backup's
    // bytes back, and the VM runs again.
    let bad = write_boot(&m, &v, b"a bad upgrade");
    assert_ne!(good, bad);
    let same = restore(&m, &id, json!({"backup": bid})).await;
    assert_eq!(same["id"], v["id"]);
    assert_eq!(same["status"], "running", "{same}");
    assert_eq!(boot(&m, &same).2, good, "the backup's bytes, not today's");

    // Into a new VM: on the backup's host, named, made like the backed-up
    // one, its disk the backup's.
    write_boot(&m, &v, b"bad again");
    let new = restore(
        &m,
        &id,
        json!({"backup": bid, "into": "new", "name": "restored-web"}),
    )
    .await;
    assert_ne!(new["id"], v["id"]);
    assert_eq!(new["name"], "restored-web");
    assert_eq!(new["status"], "running", "{new}");
    assert_eq!(new["host"], b["host"]);
    assert_eq!(new["specs"]["backup"], b["id"]);
    assert_eq!(new["specs"]["cores"], v["specs"]["cores"]);
    assert_eq!(boot(&m, &new).2, good);

    // Listed by VM, filtered, renamed.
    let listed = m.get(&format!("/v1/backups?vm={id}")).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    assert_eq!(listed.body["backups"].as_array().unwrap().len(), 1);
    let none = m
        .get(&format!("/v1/backups?vm={}", new["id"].as_str().unwrap()))
        .await;
    assert_eq!(none.body["backups"].as_array().unwrap().len(), 0);
    let by_label = m.get("/v1/backups?label_selector=why%3Dupgrade").await;
    assert_eq!(by_label.body["backups"].as_array().unwrap().len(), 1);
    let actions = m.get(&format!("/v1/backups/{bid}/actions")).await;
    assert_eq!(actions.status, StatusCode::OK, "{}", actions.body);
    let commands: Vec<&str> = actions.body["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["command"].as_str().unwrap())
        .collect();
    assert_eq!(commands, ["restore_vm", "restore_vm", "create_backup"]);
    let r = m
        .patch(&format!("/v1/backups/{bid}"), &json!({"name": "golden"}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["backup"]["name"], "golden");

    // The backup outlives its VM, and still restores into a new one.
    let del = m.delete(&format!("/v1/vms/{id}")).await;
    assert_eq!(del.status, StatusCode::OK, "{}", del.body);
    m.wait_action(del.body["action"]["id"].as_str().unwrap())
        .await;
    let kept = m.get(&format!("/v1/backups/{bid}")).await;
    assert_eq!(kept.status, StatusCode::OK, "{}", kept.body);
    assert_eq!(
        kept.body["backup"]["expires"],
        Value::Null,
        "a manual one stays"
    );
    assert!(on_host(&m, &kept.body["backup"]));
    let again = restore(&m, &id, json!({"backup": bid, "into": "new"})).await;
    assert_eq!(boot(&m, &again).2, good);
    assert!(
        again["name"].as_str().unwrap().contains("-restored-"),
        "{again}"
    );
    // Into the deleted VM itself: there is none.
    let r = m
        .post(
            &format!("/v1/vms/{id}/actions/restore"),
            &json!({"backup": bid}),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

    // Deleted: gone from its host, and from the quota.
    let del = m.delete(&format!("/v1/backups/{bid}")).await;
    assert_eq!(del.status, StatusCode::OK, "{}", del.body);
    let done = m
        .wait_action(del.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    assert!(!on_host(&m, &kept.body["backup"]));
    assert_eq!(
        m.get(&format!("/v1/backups/{bid}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(usage_matches_recount(&m).await.images_gb, 0);
}

#[tokio::test]
async fn policies_bad_requests_and_the_quota_are_answered_by_name() {
    let m = Meson::start_with(|o| o.quotas.images_gb = 3).await;
    let v = running_vm(&m).await;
    let id = v["id"].as_str().unwrap().to_owned();
    assert_eq!(v["backups"], Value::Null);

    // A policy: set, shown on the VM, changed, cleared.
    let r = m
        .post(
            &format!("/v1/vms/{id}/actions/enable-backups"),
            &json!({"window": "22-02", "keep": 3}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        r.body["vm"]["backups"],
        json!({"window": "22-02", "keep": 3})
    );
    assert_eq!(vm(&m, &id).await["backups"]["window"], "22-02");
    let r = m
        .post(&format!("/v1/vms/{id}/actions/enable-backups"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["vm"]["backups"]["keep"], 7, "the default");
    let window = r.body["vm"]["backups"]["window"].as_str().unwrap();
    assert_eq!(window.len(), 5, "{window}");
    for (body, field) in [
        (json!({"window": "24-02"}), "window"),
        (json!({"window": "03-03"}), "window"),
        (json!({"keep": 0}), "keep"),
        (json!({"keep": 32}), "keep"),
    ] {
        let r = m
            .post(&format!("/v1/vms/{id}/actions/enable-backups"), &body)
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.body);
        assert_eq!(r.rejected_fields(), [field], "{}", r.body);
    }
    let r = m
        .post(&format!("/v1/vms/{id}/actions/disable-backups"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["vm"]["backups"], Value::Null);

    // Bad requests name their fields; missing things are named too.
    let r = m
        .post(
            &format!("/v1/vms/{id}/actions/backup"),
            &json!({"name": "a b"}),
        )
        .await;
    assert_eq!(r.rejected_fields(), ["name"], "{}", r.body);
    let r = m
        .post(
            &format!("/v1/vms/{id}/actions/restore"),
            &json!({"backup": "nope", "into": "elsewhere"}),
        )
        .await;
    assert_eq!(r.rejected_fields(), ["backup", "into"], "{}", r.body);
    let r = m
        .post(
            &format!("/v1/vms/{id}/actions/restore"),
            &json!({"backup": uuid::Uuid::new_v4()}),
        )
        .await;
    assert_eq!(r.rejected_fields(), ["backup"], "{}", r.body);
    let r = m
        .post(
            &format!("/v1/vms/{}/actions/backup", uuid::Uuid::new_v4()),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let r = m.get("/v1/backups?vm=nope").await;
    assert_eq!(r.rejected_fields(), ["vm"], "{}", r.body);
    let r = m.get("/v1/backups?status=lost").await;
    assert_eq!(r.rejected_fields(), ["status"], "{}", r.body);

    // The VM's disks are more than the 3 GB images_gb quota: refused,
    // nothing written.
    let r = m
        .post(&format!("/v1/vms/{id}/actions/backup"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert_eq!(
        r.body["error"]["code"], "resource_limit_exceeded",
        "{}",
        r.body
    );
    let listed = m.get("/v1/backups").await;
    assert_eq!(listed.body["backups"].as_array().unwrap().len(), 0);
    assert_eq!(usage_matches_recount(&m).await.images_gb, 0);
}
