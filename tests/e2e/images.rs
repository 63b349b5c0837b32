//! Images over REST: a snapshot of a VM's boot volume, an import from a URL
//! served by the test (checksum verified, a bad one leaving nothing
//! behind), read, list, rename, delete; bad input, the `images_gb` quota,
//! locks and another tenant's ids. The simulator's content hashes prove
//! the bytes moved, not only the rows.

use crate::harness::{Meson, seed_vm};
use crate::quotas::usage_matches_recount;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Serves `files` (path → bytes) on a loopback port; others are 404.
async fn file_server(files: Vec<(&'static str, Vec<u8>)>) -> String {
    use axum::extract::Path;
    use axum::http::StatusCode;
    let files = std::sync::Arc::new(files);
    let app = axum::Router::new().route(
        "/{name}",
        axum::routing::get(move |Path(name): Path<String>| {
            let files = files.clone();
            async move {
                match files.iter().find(|(n, _)| *n == name) {
                    Some((_, bytes)) => Ok(bytes.clone()),
                    None => Err(StatusCode::NOT_FOUND),
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// The simulator's volume named `name`, with its host.
fn on_atomos(m: &Meson, name: &str) -> Option<(String, atomos_sim::SimVolume)> {
    m.sim().hosts().iter().find_map(|h| {
        h.inventory()
            .volumes
            .into_iter()
            .find(|v| v.name == name)
            .map(|v| (h.name().to_owned(), v))
    })
}

fn image_volume(id: &str) -> String {
    format!("img-{}", id.replace('-', ""))
}

async fn image(m: &Meson, id: &str) -> Value {
    let r = m.get(&format!("/v1/images/{id}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.body["image"].clone()
}

/// Starts an image create (`path`: an import or a VM's create-image) and
/// waits for its action; returns the image's id and the finished action.
async fn create(m: &Meson, path: &str, body: Value) -> (String, Value) {
    let r = m.post(path, &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["image"]["status"], "creating");
    assert_eq!(r.body["action"]["command"], "create_image");
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    (r.body["image"]["id"].as_str().unwrap().to_owned(), done)
}

/// A running VM of the seed payload; its id.
async fn running_vm(m: &Meson) -> String {
    let r = m.post("/v1/vms", &seed_vm()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    r.body["vm"]["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn an_image_of_a_vm_holds_its_boot_volume_and_goes_when_deleted() {
    let m = Meson::start().await;
    let vm = running_vm(&m).await;
    let got = m.get(&format!("/v1/vms/{vm}")).await.body["vm"].clone();
    let boot = got["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["kind"] == "boot")
        .unwrap()
        .clone();
    let boot_name = format!("vm-{}-boot", vm.replace('-', ""));
    let (_, boot_on_host) = m
        .sim()
        .hosts()
        .iter()
        .flat_map(|h| h.inventory().volumes)
        .find(|v| v.name.starts_with(&format!("vm-{}", vm.replace('-', ""))) && v.bootable)
        .map(|v| (boot_name.clone(), v))
        .expect("the VM's boot volume is on its host");

    let (id, done) = create(
        &m,
        &format!("/v1/vms/{vm}/actions/create-image"),
        json!({"name": "web-golden", "labels": {"os": "ubuntu"}, "extra": 1}),
    )
    .await;
    assert_eq!(done["status"], "success", "{done}");
    let resources: Vec<&str> = done["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    assert_eq!(resources, ["image", "vm"]);
    let i = image(&m, &id).await;
    assert_eq!(i["status"], "available", "{i}");
    assert_eq!(i["source"], json!({"type": "snapshot", "vm": vm}));
    assert_eq!(i["size"], boot["size"]);
    assert_eq!(i["host"], got["host"]);
    assert_eq!(i["labels"], json!({"os": "ubuntu"}));
    assert_eq!(i["sha256"], Value::Null);
    // The world changed: a copy of the boot volume's bytes on the VM's host.
    let (host, copy) = on_atomos(&m, &image_volume(&id)).expect("the image is on AtomOS");
    assert_eq!(Some(host.as_str()), got["host"].as_str());
    assert_eq!(copy.content, boot_on_host.content);
    assert!(!copy.content.is_empty());
    // The VM kept running.
    let after = m.get(&format!("/v1/vms/{vm}")).await.body["vm"].clone();
    assert_eq!(after["status"], "running");
    let usage = usage_matches_recount(&m).await;
    assert_eq!(usage.images_gb, i["size"].as_i64().unwrap());

    // Listed, filtered by labels and name; renamed; its actions listed.
    let l = m.get("/v1/images?label_selector=os%3Dubuntu").await;
    assert_eq!(l.status, StatusCode::OK, "{}", l.body);
    assert_eq!(l.body["images"][0]["id"], id.as_str());
    assert_eq!(l.body["meta"]["pagination"]["total_entries"], 1);
    let none = m.get("/v1/images?label_selector=os%3Ddebian").await;
    assert_eq!(none.body["images"], json!([]));
    let r = m
        .patch(&format!("/v1/images/{id}"), &json!({"name": "web-gold"}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["image"]["name"], "web-gold");
    let named = m.get("/v1/images?name=web-gold").await;
    assert_eq!(named.body["images"][0]["id"], id.as_str());
    let acts = m.get(&format!("/v1/images/{id}/actions")).await;
    assert_eq!(acts.status, StatusCode::OK, "{}", acts.body);
    assert_eq!(acts.body["actions"][0]["command"], "create_image");

    // A second image of the same name is refused, naming the field.
    let dup = m
        .post(
            &format!("/v1/vms/{vm}/actions/create-image"),
            &json!({"name": "web-gold"}),
        )
        .await;
    assert_eq!(dup.status, StatusCode::CONFLICT, "{}", dup.body);
    assert_eq!(dup.body["error"]["code"], "uniqueness_error");

    // Deleting the VM leaves the image; deleting the image removes it.
    let del = m.delete(&format!("/v1/vms/{vm}")).await;
    let done = m
        .wait_action(del.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    assert!(on_atomos(&m, &image_volume(&id)).is_some());
    let del = m.delete(&format!("/v1/images/{id}")).await;
    assert_eq!(del.status, StatusCode::OK, "{}", del.body);
    assert_eq!(del.body["action"]["command"], "delete_image");
    let done = m
        .wait_action(del.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    assert!(on_atomos(&m, &image_volume(&id)).is_none());
    let gone = m.get(&format!("/v1/images/{id}")).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_eq!(usage_matches_recount(&m).await.images_gb, 0);
}

#[tokio::test]
async fn an_import_downloads_the_url_and_a_bad_checksum_leaves_nothing() {
    let m = Meson::start().await;
    let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let base = file_server(vec![("disk.qcow2", bytes.clone())]).await;
    let sum = sha256_hex(&bytes);

    let (id, done) = create(
        &m,
        "/v1/images",
        json!({"name": "imported", "url": format!("{base}/disk.qcow2"),
               "checksum": format!("sha256:{}", sum.to_uppercase()), "size": 2,
               "provider": "ionos"}),
    )
    .await;
    assert_eq!(done["status"], "success", "{done}");
    let i = image(&m, &id).await;
    assert_eq!(i["status"], "available", "{i}");
    assert_eq!(i["size"], 2);
    assert_eq!(i["provider"], "ionos");
    assert_eq!(i["source"]["type"], "url");
    assert_eq!(i["source"]["checksum"], sum.as_str());
    assert_eq!(i["sha256"], sum.as_str());
    let (_, on_host) = on_atomos(&m, &image_volume(&id)).expect("downloaded on a host");
    assert_eq!(on_host.content, sum, "the host holds the served bytes");
    assert_eq!(usage_matches_recount(&m).await.images_gb, 2);

    // A checksum the file does not have: the action fails, naming both;
    // the image is `error` with why, and nothing stays on any host.
    let (bad, done) = create(
        &m,
        "/v1/images",
        json!({"name": "tampered", "url": format!("{base}/disk.qcow2"),
               "checksum": "0".repeat(64)}),
    )
    .await;
    assert_eq!(done["status"], "error", "{done}");
    let message = done["error"]["message"].as_str().unwrap();
    assert!(message.contains(&"0".repeat(64)), "{message}");
    let i = image(&m, &bad).await;
    assert_eq!(i["status"], "error", "{i}");
    assert!(i["error"].as_str().is_some_and(|e| !e.is_empty()), "{i}");
    assert!(on_atomos(&m, &image_volume(&bad)).is_none());

    // A URL the server does not have: the action fails, saying so.
    let (missing, done) = create(
        &m,
        "/v1/images",
        json!({"name": "missing", "url": format!("{base}/nope.img")}),
    )
    .await;
    assert_eq!(done["status"], "error", "{done}");
    assert!(on_atomos(&m, &image_volume(&missing)).is_none());

    // Failed images are deleted like any other, and stop counting.
    for id in [bad, missing, id] {
        let del = m.delete(&format!("/v1/images/{id}")).await;
        assert_eq!(del.status, StatusCode::OK, "{}", del.body);
        let done = m
            .wait_action(del.body["action"]["id"].as_str().unwrap())
            .await;
        assert_eq!(done["status"], "success", "{done}");
    }
    assert_eq!(usage_matches_recount(&m).await.images_gb, 0);
}

#[tokio::test]
async fn bad_image_requests_name_their_fields_and_locks_and_quotas_hold() {
    let m = Meson::start_with(|o| o.quotas.images_gb = 100).await;
    let r = m
        .post(
            "/v1/images",
            &json!({"name": "a b", "url": "ftp://x/y", "checksum": "abc", "size": 0}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let mut fields = r.rejected_fields();
    fields.sort_unstable();
    assert_eq!(fields, ["checksum", "name", "size", "url"]);
    let r = m.post("/v1/images", &json!({})).await;
    assert_eq!(r.rejected_fields(), ["name", "url"]);

    // Over the images_gb quota: refused, naming it; nothing written.
    let r = m
        .post(
            "/v1/images",
            &json!({"name": "big", "url": "http://127.0.0.1:9/x", "size": 101}),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "resource_limit_exceeded");
    assert_eq!(r.body["error"]["details"]["limits"][0]["name"], "images_gb");
    assert_eq!(m.get("/v1/images").await.body["images"], json!([]));
    assert_eq!(usage_matches_recount(&m).await.images_gb, 0);

    // A VM that is not running or off cannot be imaged; one whose action
    // runs is locked; an image being made cannot be deleted (its create is
    // named).
    let r = m.post("/v1/vms", &seed_vm()).await;
    let vm = r.body["vm"]["id"].as_str().unwrap().to_owned();
    let create_vm = r.body["action"]["id"].as_str().unwrap().to_owned();
    let early = m
        .post(
            &format!("/v1/vms/{vm}/actions/create-image"),
            &json!({"name": "early"}),
        )
        .await;
    assert!(
        matches!(early.status, StatusCode::CONFLICT | StatusCode::LOCKED),
        "{}",
        early.body
    );
    m.wait_action(&create_vm).await;
    // The copy keeps failing (transiently) until the faults are cleared:
    // meanwhile the VM and the image are locked by the create, named.
    let host = m.get(&format!("/v1/vms/{vm}")).await.body["vm"]["host"]
        .as_str()
        .unwrap()
        .to_owned();
    let sim_host = m
        .sim()
        .hosts()
        .into_iter()
        .find(|h| h.name() == host)
        .unwrap();
    sim_host.faults().fail_next("volume/clone", 503, 1_000_000);
    let r = m
        .post(
            &format!("/v1/vms/{vm}/actions/create-image"),
            &json!({"name": "slow"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let image_id = r.body["image"]["id"].as_str().unwrap().to_owned();
    let action = r.body["action"]["id"].as_str().unwrap().to_owned();
    let busy = m
        .post(&format!("/v1/vms/{vm}/actions/reboot"), &json!({}))
        .await;
    assert_eq!(busy.status, StatusCode::LOCKED, "{}", busy.body);
    assert_eq!(busy.body["error"]["details"]["action_id"], action.as_str());
    let del = m.delete(&format!("/v1/images/{image_id}")).await;
    assert_eq!(del.status, StatusCode::LOCKED, "{}", del.body);
    assert_eq!(del.body["error"]["details"]["action_id"], action.as_str());
    let gone = m.delete(&format!("/v1/vms/{vm}")).await;
    assert_eq!(gone.status, StatusCode::LOCKED, "{}", gone.body);
    sim_host.faults().clear();
    let done = m
        .wait_action_for(&action, std::time::Duration::from_secs(90))
        .await;
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(image(&m, &image_id).await["status"], "available");
    // However many transient faults the copy met, one copy exists.
    let copies = m
        .sim()
        .hosts()
        .iter()
        .flat_map(|h| h.inventory().volumes)
        .filter(|v| v.name == image_volume(&image_id))
        .count();
    assert_eq!(copies, 1);

    // Another tenant sees none of it.
    let other = m.token("other", "eve", meson_api::Role::Editor);
    let r = m
        .call(
            reqwest::Method::GET,
            &format!("/v1/images/{image_id}"),
            &other,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let r = m
        .call(
            reqwest::Method::POST,
            &format!("/v1/vms/{vm}/actions/create-image"),
            &other,
            Some(&json!({"name": "theirs"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    usage_matches_recount(&m).await;
}

/// The content hash of the boot volume of `vm` on AtomOS, and its size.
fn boot_on_atomos(m: &Meson, vm: &str) -> (String, f64) {
    let prefix = format!("vm-{}", vm.replace('-', ""));
    m.sim()
        .hosts()
        .iter()
        .flat_map(|h| h.inventory().volumes)
        .find(|v| v.name.starts_with(&prefix) && v.bootable && !v.cloudinit)
        .map(|v| (v.content, v.size_gb))
        .expect("the VM's boot volume is on AtomOS")
}

#[tokio::test]
async fn a_vm_boots_from_a_copy_of_an_image() {
    let m = Meson::start().await;
    // A golden image of a running VM, and one imported from a URL.
    let source = running_vm(&m).await;
    let (golden, done) = create(
        &m,
        &format!("/v1/vms/{source}/actions/create-image"),
        json!({"name": "golden"}),
    )
    .await;
    assert_eq!(done["status"], "success", "{done}");
    let (golden_bytes, _) = boot_on_atomos(&m, &source);
    let bytes = b"a small raw disk".repeat(64);
    let base = file_server(vec![("disk.img", bytes.clone())]).await;
    let (imported, done) = create(
        &m,
        "/v1/images",
        json!({"name": "tiny", "url": format!("{base}/disk.img"), "size": 1}),
    )
    .await;
    assert_eq!(done["status"], "success", "{done}");
    let imported_host = image(&m, &imported).await["host"].clone();

    // A VM from the snapshot: its boot volume holds the image's bytes, on
    // the image's host; the image records where it came from.
    // A slow boot keeps the create running while the image is deleted.
    m.set_boot_time(std::time::Duration::from_secs(2));
    let mut body = seed_vm();
    body["specs"]["vm_name"] = "from-golden".into();
    body["image"] = golden.clone().into();
    let r = m.post("/v1/vms", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let vm = r.body["vm"]["id"].as_str().unwrap().to_owned();
    let action = r.body["action"]["id"].as_str().unwrap().to_owned();
    // Deleting the image while the create runs: 423 naming the create.
    let busy = m.delete(&format!("/v1/images/{golden}")).await;
    assert_eq!(busy.status, StatusCode::LOCKED, "{}", busy.body);
    assert_eq!(busy.body["error"]["details"]["action_id"], action.as_str());
    assert_eq!(image(&m, &golden).await["status"], "available");
    let done = m.wait_action(&action).await;
    m.set_boot_time(std::time::Duration::from_millis(100));
    assert_eq!(done["status"], "success", "{done}");
    let got = m.get(&format!("/v1/vms/{vm}")).await.body["vm"].clone();
    assert_eq!(got["specs"]["image"], golden.as_str(), "{got}");
    assert_eq!(got["host"], image(&m, &golden).await["host"]);
    assert_eq!(boot_on_atomos(&m, &vm).0, golden_bytes, "the image's bytes");
    let resources: Vec<&str> = done["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    assert!(resources.contains(&"image"), "{resources:?}");

    // From the 1 GB import: on its host, grown to the flavour's boot size.
    let mut body = seed_vm();
    body["specs"]["vm_name"] = "from-tiny".into();
    body["image"] = imported.clone().into();
    body.as_object_mut().unwrap().remove("provider");
    let r = m.post("/v1/vms", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let tiny_vm = r.body["vm"]["id"].as_str().unwrap().to_owned();
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    let got = m.get(&format!("/v1/vms/{tiny_vm}")).await.body["vm"].clone();
    assert_eq!(got["host"], imported_host);
    let boot_size = got["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["kind"] == "boot")
        .unwrap()["size"]
        .as_f64()
        .unwrap();
    let (content, size) = boot_on_atomos(&m, &tiny_vm);
    assert_eq!(content, sha256_hex(&bytes), "the downloaded bytes");
    assert_eq!(size, boot_size);
    assert!(size > 1.0, "grown past the image's 1 GB");
    usage_matches_recount(&m).await;

    // The image can go once no create copies it; the VMs keep their disks.
    let del = m.delete(&format!("/v1/images/{golden}")).await;
    assert_eq!(del.status, StatusCode::OK, "{}", del.body);
    let done = m
        .wait_action(del.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(boot_on_atomos(&m, &vm).0, golden_bytes);
    m.stop().await;
}

#[tokio::test]
async fn a_vm_from_an_image_is_refused_naming_the_image() {
    let m = Meson::start().await;
    let mut body = seed_vm();
    for (bad, why) in [
        (json!("nope"), "UUID"),
        (json!(7), "string"),
        (json!(uuid::Uuid::new_v4()), "no such image"),
    ] {
        body["image"] = bad.clone();
        let r = m.post("/v1/vms", &body).await;
        assert_eq!(r.rejected_fields(), ["image"], "{bad}: {}", r.body);
        assert!(r.body.to_string().contains(why), "{bad}: {}", r.body);
    }
    // Another tenant's image is not found either.
    let source = running_vm(&m).await;
    let (golden, _) = create(
        &m,
        &format!("/v1/vms/{source}/actions/create-image"),
        json!({"name": "golden"}),
    )
    .await;
    let other = m.token("other", "eve", meson_api::Role::Editor);
    body["image"] = golden.clone().into();
    let r = m
        .call(reqwest::Method::POST, "/v1/vms", &other, Some(&body))
        .await;
    assert_eq!(r.rejected_fields(), ["image"], "{}", r.body);
    // A provider the image's host is not: named, nothing written.
    let host_provider = image(&m, &golden).await["provider"]
        .as_str()
        .unwrap()
        .to_owned();
    body["provider"] = if host_provider == "ovh" {
        "ionos"
    } else {
        "ovh"
    }
    .into();
    body["specs"]["vm_name"] = "elsewhere".into();
    let r = m.post("/v1/vms", &body).await;
    assert_eq!(r.rejected_fields(), ["image"], "{}", r.body);
    assert!(r.body.to_string().contains("exclude"), "{}", r.body);
    let vms = m.get("/v1/vms").await.body["vms"].as_array().unwrap().len();
    assert_eq!(vms, 1, "only the source VM");
    m.stop().await;
}

#[tokio::test]
async fn a_vm_is_rebuilt_from_an_image_keeping_its_address_and_data() {
    let m = Meson::start().await;
    let source = running_vm(&m).await;
    let (golden, _) = create(
        &m,
        &format!("/v1/vms/{source}/actions/create-image"),
        json!({"name": "golden"}),
    )
    .await;
    let (golden_bytes, _) = boot_on_atomos(&m, &source);
    // A second VM on the image's host, from the OS's cloud image.
    let mut body = seed_vm();
    body["specs"]["vm_name"] = "target".into();
    body["specs"]["req"]["misc"]["osDistribution"] = "Ubuntu".into();
    let r = m.post("/v1/vms", &body).await;
    let vm = r.body["vm"]["id"].as_str().unwrap().to_owned();
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    let before = m.get(&format!("/v1/vms/{vm}")).await.body["vm"].clone();
    let (old_bytes, _) = boot_on_atomos(&m, &vm);
    assert_ne!(old_bytes, golden_bytes);
    let data_of = |v: &Value| -> Vec<Value> {
        v["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| x["kind"] != "boot")
            .map(|x| x["id"].clone())
            .collect()
    };
    // The cheapest host for both seed VMs: the image's.
    assert_eq!(before["host"], image(&m, &golden).await["host"]);

    let r = m
        .post(
            &format!("/v1/vms/{vm}/actions/rebuild"),
            &json!({"image": golden}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["action"]["command"], "rebuild_vm");
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    let after = m.get(&format!("/v1/vms/{vm}")).await.body["vm"].clone();
    assert_eq!(after["status"], "running", "{after}");
    assert_eq!(after["id"], before["id"]);
    assert_eq!(after["ipv4"], before["ipv4"], "the address is kept");
    assert_eq!(after["specs"]["image"], golden.as_str());
    assert_eq!(
        data_of(&after),
        data_of(&before),
        "cloud-init and data volumes kept"
    );
    // The world changed: the VM boots the image's bytes, the old disk is gone.
    assert_eq!(boot_on_atomos(&m, &vm).0, golden_bytes);
    let prefix = format!("vm-{}", vm.replace('-', ""));
    let boots = m
        .sim()
        .hosts()
        .iter()
        .flat_map(|h| h.inventory().volumes)
        .filter(|v| v.name.starts_with(&prefix) && v.bootable && !v.cloudinit)
        .count();
    assert_eq!(boots, 1, "the old boot volume is destroyed");

    // From a distribution again; bad bodies name the field.
    let r = m
        .post(
            &format!("/v1/vms/{vm}/actions/rebuild"),
            &json!({"os": "Debian"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    let after = m.get(&format!("/v1/vms/{vm}")).await.body["vm"].clone();
    assert_eq!(after["specs"]["image"], Value::Null);
    assert_eq!(after["specs"]["os_distribution"], "debian");
    for bad in [
        json!({}),
        json!({"image": golden, "os": "Debian"}),
        json!({"image": "nope"}),
        json!({"image": uuid::Uuid::new_v4()}),
    ] {
        let r = m.post(&format!("/v1/vms/{vm}/actions/rebuild"), &bad).await;
        assert_eq!(r.rejected_fields(), ["image"], "{bad}: {}", r.body);
    }
    let r = m
        .post(
            &format!("/v1/vms/{vm}/actions/rebuild"),
            &json!({"os": "Plan9"}),
        )
        .await;
    assert_eq!(r.rejected_fields(), ["os"], "{}", r.body);
    m.stop().await;
}
