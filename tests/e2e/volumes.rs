//! Standalone volumes over REST: create, attach to a VM at its create (the
//! volume pins the VM's host), detach by deleting the VM, delete; bad
//! input, the storage quota, another tenant's ids, conflicts and locks.

use crate::harness::{Meson, seed_vm};
use crate::quotas::usage_matches_recount;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// Creates a standalone volume and waits for its create; returns it as read after.
async fn create_volume(m: &Meson, body: Value) -> Value {
    let r = m.post("/v1/volumes", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["volume"]["status"], "creating");
    assert_eq!(r.body["action"]["command"], "create_volume");
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    volume(m, r.body["volume"]["id"].as_str().unwrap()).await
}

async fn volume(m: &Meson, id: &str) -> Value {
    let r = m.get(&format!("/v1/volumes/{id}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.body["volume"].clone()
}

/// The simulator's copy of a standalone volume (by its AtomOS name), with its host.
fn on_atomos(m: &Meson, id: &str) -> Option<(String, atomos_sim::SimVolume)> {
    let name = format!("vol-{}", id.replace('-', ""));
    m.sim().hosts().iter().find_map(|h| {
        h.inventory()
            .volumes
            .into_iter()
            .find(|v| v.name == name)
            .map(|v| (h.name().to_owned(), v))
    })
}

/// The simulator's id of a VM.
fn sim_vm_id(m: &Meson, vm: &str) -> String {
    let name = crate::harness::vm_atomos_name(vm);
    m.sim()
        .hosts()
        .iter()
        .flat_map(|h| h.inventory().vms)
        .find(|v| v.name == name)
        .map(|v| v.id)
        .expect("the VM is on AtomOS")
}

async fn wait_ok(m: &Meson, r: &crate::harness::Reply) -> Value {
    assert!(r.status.is_success(), "{}", r.body);
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    done
}

#[tokio::test]
async fn a_standalone_volume_outlives_the_vm_it_was_attached_to() {
    let m = Meson::start().await;
    let v = create_volume(
        &m,
        json!({"name": "data-1", "size": 50, "provider": "ionos", "bootable": "False",
               "readonly": "false", "shareable": "False", "private": "True",
               "labels": {"env": "prod"}}),
    )
    .await;
    let id = v["id"].as_str().unwrap().to_owned();
    assert_eq!(v["status"], "available", "{v}");
    assert_eq!(
        (v["kind"].as_str(), v["size"].as_u64()),
        (Some("data"), Some(50))
    );
    assert_eq!(v["standalone"], true);
    assert_eq!(v["vm"], Value::Null);
    assert_eq!(v["attached_to"], Value::Null);
    assert_eq!(v["provider"], "ionos");
    assert_eq!(v["labels"], json!({"env": "prod"}));
    let host = v["host"].as_str().unwrap().to_owned();
    let (sim_host, sim) = on_atomos(&m, &id).expect("made on AtomOS");
    assert_eq!(sim_host, host);
    assert_eq!(sim.size_gb, 50.0);
    assert!(!sim.shareable && sim.private && !sim.bootable);
    assert!(sim.attached_to.is_empty());

    // Renamed and relabelled; the name is unique per tenant.
    let r = m
        .patch(&format!("/v1/volumes/{id}"), &json!({"name": "data-one"}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["volume"]["name"], "data-one");
    assert_eq!(r.body["volume"]["labels"], json!({"env": "prod"}));
    let dup = m
        .post("/v1/volumes", &json!({"name": "data-one", "size": 1}))
        .await;
    assert_eq!(dup.status, StatusCode::CONFLICT, "{}", dup.body);
    assert_eq!(dup.body["error"]["code"], "uniqueness_error");

    // A VM attaching it: attached at once, placed on the volume's host.
    let mut body = seed_vm();
    body["volumes"] = json!([id]);
    let r = m.post("/v1/vms", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let vm = r.body["vm"]["id"].as_str().unwrap().to_owned();
    let attached = &r.body["vm"]["volumes"][3];
    assert_eq!(
        (attached["id"].as_str(), attached["standalone"].as_bool()),
        (Some(id.as_str()), Some(true))
    );
    let v = volume(&m, &id).await;
    assert_eq!(
        (v["status"].as_str(), v["attached_to"].as_str()),
        (Some("attached"), Some(vm.as_str()))
    );
    wait_ok(&m, &r).await;
    let got = m.get(&format!("/v1/vms/{vm}")).await.body["vm"].clone();
    assert_eq!(got["status"], "running", "{got}");
    assert_eq!(got["host"], host.as_str());
    let kinds: Vec<(&str, bool)> = got["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["kind"].as_str().unwrap(),
                v["standalone"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("boot", false),
            ("cloudinit", false),
            ("data", false),
            ("data", true)
        ]
    );
    let (_, sim) = on_atomos(&m, &id).unwrap();
    assert_eq!(sim.attached_to, [sim_vm_id(&m, &vm)], "attached on AtomOS");

    // Listed with the VM's own volumes; filters.
    let all = m.get("/v1/volumes").await.body;
    assert_eq!(all["meta"]["pagination"]["total_entries"], 4, "{all}");
    let mine = m.get(&format!("/v1/volumes?vm={vm}")).await.body;
    assert_eq!(mine["volumes"].as_array().unwrap().len(), 4, "{mine}");
    let standalone = m.get("/v1/volumes?standalone=true").await.body;
    assert_eq!(standalone["volumes"].as_array().unwrap().len(), 1);
    assert_eq!(standalone["volumes"][0]["id"], id.as_str());
    let owned = m.get("/v1/volumes?standalone=false").await.body;
    assert_eq!(owned["volumes"].as_array().unwrap().len(), 3);
    let bad = m.get("/v1/volumes?standalone=maybe").await;
    assert_eq!(bad.rejected_fields(), ["standalone"]);

    // Attached: neither deletable nor attachable to a second VM.
    let r = m.delete(&format!("/v1/volumes/{id}")).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "conflict");
    let mut second = seed_vm();
    second["specs"]["vm_name"] = "second".into();
    second["volumes"] = json!([id]);
    let r = m.post("/v1/vms", &second).await;
    assert_eq!(r.rejected_fields(), ["volumes[0]"], "{}", r.body);
    // A VM's own volume goes with its VM only.
    let boot = got["volumes"][0]["id"].as_str().unwrap();
    let r = m.delete(&format!("/v1/volumes/{boot}")).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    let r = m
        .patch(&format!("/v1/volumes/{boot}"), &json!({"name": "mine"}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    let r = m
        .patch(&format!("/v1/volumes/{boot}"), &json!({"name": 7}))
        .await;
    assert_eq!(r.rejected_fields(), ["name"], "{}", r.body);
    let missing = uuid::Uuid::new_v4();
    let r = m
        .patch(&format!("/v1/volumes/{missing}"), &json!({"name": "mine"}))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

    // Deleting the VM detaches the volume and keeps it.
    wait_ok(&m, &m.delete(&format!("/v1/vms/{vm}")).await).await;
    let v = volume(&m, &id).await;
    assert_eq!(
        (v["status"].as_str(), &v["attached_to"]),
        (Some("available"), &Value::Null)
    );
    let (sim_host, sim) = on_atomos(&m, &id).expect("still on AtomOS");
    assert_eq!(sim_host, host);
    assert!(sim.attached_to.is_empty());
    assert_eq!(
        m.get("/v1/volumes").await.body["volumes"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // Deleting the volume takes it off AtomOS.
    let r = m.delete(&format!("/v1/volumes/{id}")).await;
    assert_eq!(r.body["action"]["command"], "delete_volume", "{}", r.body);
    wait_ok(&m, &r).await;
    assert_eq!(
        m.get(&format!("/v1/volumes/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert!(on_atomos(&m, &id).is_none(), "gone from AtomOS");
    assert_eq!(m.inventory_counts(), (0, 0), "nothing left on AtomOS");
    m.stop().await;
}

#[tokio::test]
async fn bad_volume_requests_name_the_field() {
    let m = Meson::start().await;
    let r = m
        .post(
            "/v1/volumes",
            &json!({"name": "bad_name!", "size": 0, "shareable": true, "private": "False",
                    "readonly": "perhaps", "provider": "nowhere", "labels": {"-x": "y"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(
        r.rejected_fields(),
        [
            "labels.-x",
            "name",
            "private",
            "provider",
            "readonly",
            "shareable",
            "size"
        ]
    );
    let r = m.post("/v1/volumes", &json!({"size": 20_000})).await;
    assert_eq!(r.rejected_fields(), ["name", "size"]);
    let r = m.post("/v1/volumes", &json!([1])).await;
    assert_eq!(r.rejected_fields(), ["(body)"]);
    let r = m
        .patch(
            &format!("/v1/volumes/{}", uuid::Uuid::new_v4()),
            &json!({"name": "x"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = m.delete("/v1/volumes/not-an-id").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);

    // Attaching: ids, repeats, unknown volumes, one not yet available.
    let mut body = seed_vm();
    body["volumes"] = json!(["nope", 3]);
    assert_eq!(
        m.post("/v1/vms", &body).await.rejected_fields(),
        ["volumes[0]", "volumes[1]"]
    );
    let ghost = uuid::Uuid::new_v4().to_string();
    body["volumes"] = json!([ghost, ghost]);
    assert_eq!(
        m.post("/v1/vms", &body).await.rejected_fields(),
        ["volumes[1]"]
    );
    body["volumes"] = json!([ghost]);
    let r = m.post("/v1/vms", &body).await;
    assert_eq!(r.rejected_fields(), ["volumes[0]"]);
    assert!(
        r.body.to_string().contains("no such standalone volume"),
        "{}",
        r.body
    );
    m.stop().await;
}

#[tokio::test]
async fn volumes_count_against_the_storage_quota() {
    let m = Meson::start_with(|o| o.quotas.storage_gb = 100).await;
    let v = create_volume(&m, json!({"name": "big", "size": 60})).await;
    let r = m
        .post("/v1/volumes", &json!({"name": "more", "size": 60}))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "resource_limit_exceeded");
    assert!(r.body.to_string().contains("storage_gb"), "{}", r.body);
    // A VM's disks (20 GB boot + 30 GB data) share the same counter.
    let r = m.post("/v1/vms", &seed_vm()).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    let q = m.get("/v1/quotas").await.body;
    let storage = q["quota"]["limits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "storage_gb")
        .cloned()
        .unwrap();
    assert_eq!(storage["current"], 60, "{q}");
    assert_eq!(usage_matches_recount(&m).await.storage_gb, 60);
    // Deleted, it no longer counts.
    let id = v["id"].as_str().unwrap();
    wait_ok(&m, &m.delete(&format!("/v1/volumes/{id}")).await).await;
    assert_eq!(usage_matches_recount(&m).await.storage_gb, 0);
    let v = create_volume(&m, json!({"name": "more", "size": 60})).await;
    // Attached, it counts once: the VM's own disks (50 GB) beside it.
    let mut body = seed_vm();
    body["volumes"] = json!([v["id"]]);
    body.as_object_mut().unwrap().remove("provider");
    body["specs"]["volumes"] = json!([]);
    body["specs"]["vm_name"] = "small".into();
    let r = m.post("/v1/vms", &body).await;
    wait_ok(&m, &r).await;
    assert_eq!(usage_matches_recount(&m).await.storage_gb, 80);
    m.stop().await;
}

#[tokio::test]
async fn another_tenants_volume_is_not_found_and_cannot_be_attached() {
    let m = Meson::start().await;
    let v = create_volume(
        &m,
        json!({"name": "secret", "size": 5, "provider": "ionos"}),
    )
    .await;
    let id = v["id"].as_str().unwrap();
    let other = m.token("other", "eve", meson_api::Role::Editor);
    for (method, body) in [
        (Method::GET, None),
        (Method::PATCH, Some(json!({"name": "mine"}))),
        (Method::DELETE, None),
    ] {
        let r = m
            .call(
                method.clone(),
                &format!("/v1/volumes/{id}"),
                &other,
                body.as_ref(),
            )
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{method}: {}", r.body);
    }
    let list = m.call(Method::GET, "/v1/volumes", &other, None).await;
    assert_eq!(list.body["volumes"], json!([]));
    let mut body = seed_vm();
    body["volumes"] = json!([id]);
    let r = m.call(Method::POST, "/v1/vms", &other, Some(&body)).await;
    assert_eq!(r.rejected_fields(), ["volumes[0]"], "{}", r.body);
    assert_eq!(volume(&m, id).await["status"], "available");
    m.stop().await;
}

#[tokio::test]
async fn a_volume_pins_the_vm_to_its_host() {
    let m = Meson::start().await;
    // The first ovh host by name, ovh-bhs-1, has no GPU.
    let v = create_volume(&m, json!({"name": "pinned", "size": 5, "provider": "ovh"})).await;
    let id = v["id"].as_str().unwrap();
    assert_eq!(v["host"], "ovh-bhs-1", "{v}");

    // A VM that asks for another provider cannot have it.
    let mut body = seed_vm();
    body["volumes"] = json!([id]);
    // A quote says it does not check the pin.
    let q = m.post("/v1/quotes", &body).await;
    assert_eq!(q.status, StatusCode::OK, "{}", q.body);
    assert!(
        q.body["warnings"]
            .as_array()
            .is_some_and(|w| w.iter().any(|w| w["field"] == "volumes")),
        "{}",
        q.body
    );
    let r = m.post("/v1/vms", &body).await;
    assert_eq!(r.rejected_fields(), ["volumes[0]"], "{}", r.body);

    // One that does not fit on that host fails, saying why, and lets it go.
    body["provider"] = "ovh".into();
    body["specs"]["req"]["pci"]["devices"] = json!({"10de:1bb1": 1});
    let r = m.post("/v1/vms", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "error", "{done}");
    assert_eq!(done["error"]["code"], "resource_unavailable", "{done}");
    let msg = done["error"]["message"].as_str().unwrap();
    assert!(msg.contains("pinned") && msg.contains("ovh-bhs-1"), "{msg}");
    let v = volume(&m, id).await;
    assert_eq!(
        (v["status"].as_str(), &v["attached_to"]),
        (Some("available"), &Value::Null)
    );

    // Without the GPU it fits there, and runs there.
    body["specs"]["req"]["pci"]["devices"] = json!({});
    body["specs"]["vm_name"] = "fits".into();
    let r = m.post("/v1/vms", &body).await;
    wait_ok(&m, &r).await;
    let vm = r.body["vm"]["id"].as_str().unwrap();
    assert_eq!(
        m.get(&format!("/v1/vms/{vm}")).await.body["vm"]["host"],
        "ovh-bhs-1"
    );
    m.stop().await;
}

#[tokio::test]
async fn a_volume_is_locked_while_its_create_runs() {
    let m = Meson::start().await;
    // Its only candidate host is down: the create retries, holding the volume.
    m.fault("gigas-mad-1", &json!({"down": true})).await;
    let r = m
        .post(
            "/v1/volumes",
            &json!({"name": "slow", "size": 5, "provider": "gigas"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let id = r.body["volume"]["id"].as_str().unwrap().to_owned();
    let d = m.delete(&format!("/v1/volumes/{id}")).await;
    assert_eq!(d.status, StatusCode::LOCKED, "{}", d.body);
    assert_eq!(
        d.body["error"]["details"]["action_id"],
        r.body["action"]["id"]
    );
    // Not available yet: no VM can attach it.
    let mut body = seed_vm();
    body["provider"] = "gigas".into();
    body["volumes"] = json!([id]);
    assert_eq!(
        m.post("/v1/vms", &body).await.rejected_fields(),
        ["volumes[0]"]
    );
    m.fault("gigas-mad-1", &json!({"down": false})).await;
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(volume(&m, &id).await["host"], "gigas-mad-1");
    m.stop().await;
}

/// Starts a volume action (`attach`, `detach`, `resize`) and waits for it.
async fn volume_action(m: &Meson, id: &str, action: &str, body: Value) -> Value {
    let r = m
        .post(&format!("/v1/volumes/{id}/actions/{action}"), &body)
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{action}: {}", r.body);
    assert_eq!(r.body["action"]["command"], format!("{action}_volume"));
    wait_ok(m, &r).await
}

/// A running VM on the first ionos host (where ionos volumes go): it is
/// created attaching a volume of that host, which is returned too.
async fn vm_on_the_volumes_host(m: &Meson) -> (String, String) {
    let anchor = create_volume(m, json!({"name": "anchor", "size": 1, "provider": "ionos"})).await;
    let anchor = anchor["id"].as_str().unwrap().to_owned();
    let mut body = seed_vm();
    body["volumes"] = json!([anchor]);
    body["specs"]["vm_name"] = "living".into();
    let r = m.post("/v1/vms", &body).await;
    wait_ok(m, &r).await;
    (r.body["vm"]["id"].as_str().unwrap().to_owned(), anchor)
}

#[tokio::test]
async fn a_volume_attaches_to_a_running_vm_grows_and_detaches() {
    let m = Meson::start().await;
    let (vm, _) = vm_on_the_volumes_host(&m).await;
    let sim_vm = sim_vm_id(&m, &vm);
    let v = create_volume(&m, json!({"name": "hot", "size": 10, "provider": "ionos"})).await;
    let id = v["id"].as_str().unwrap().to_owned();

    // Attached while the VM runs: the host lists it on the VM, which still runs.
    volume_action(&m, &id, "attach", json!({"vm": vm})).await;
    let v = volume(&m, &id).await;
    assert_eq!(
        (v["status"].as_str(), v["attached_to"].as_str()),
        (Some("attached"), Some(vm.as_str()))
    );
    let (_, sim) = on_atomos(&m, &id).unwrap();
    assert_eq!(sim.attached_to, std::slice::from_ref(&sim_vm));
    let got = m.get(&format!("/v1/vms/{vm}")).await.body["vm"].clone();
    assert_eq!(got["status"], "running");
    assert!(
        got["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["id"] == id.as_str()),
        "{got}"
    );
    // Twice is a conflict naming the VM; deleting it while attached too.
    let again = m
        .post(
            &format!("/v1/volumes/{id}/actions/attach"),
            &json!({"vm": vm}),
        )
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.body);
    assert!(
        again.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&vm)
    );
    assert_eq!(
        m.delete(&format!("/v1/volumes/{id}")).await.status,
        StatusCode::CONFLICT
    );

    // Grown while attached and running: the host's copy has the new size
    // and the same bytes; the quota counts it.
    let before = sim.content.clone();
    volume_action(&m, &id, "resize", json!({"size": 25})).await;
    assert_eq!(volume(&m, &id).await["size"], 25);
    let (_, sim) = on_atomos(&m, &id).unwrap();
    assert_eq!((sim.size_gb, sim.content), (25.0, before));
    assert_eq!(usage_matches_recount(&m).await.storage_gb, 50 + 1 + 25);
    let shrink = m
        .post(
            &format!("/v1/volumes/{id}/actions/resize"),
            &json!({"size": 24}),
        )
        .await;
    assert_eq!(shrink.rejected_fields(), ["size"], "{}", shrink.body);

    // Detached: free on the host and in meson, and deletable.
    volume_action(&m, &id, "detach", json!({})).await;
    let v = volume(&m, &id).await;
    assert_eq!(
        (v["status"].as_str(), &v["attached_to"]),
        (Some("available"), &Value::Null)
    );
    assert!(on_atomos(&m, &id).unwrap().1.attached_to.is_empty());
    let not = m
        .post(&format!("/v1/volumes/{id}/actions/detach"), &json!({}))
        .await;
    assert_eq!(not.status, StatusCode::CONFLICT, "{}", not.body);
    // Attached again to the same VM, now off.
    let off = m
        .post(&format!("/v1/vms/{vm}/actions/poweroff"), &json!({}))
        .await;
    wait_ok(&m, &off).await;
    volume_action(&m, &id, "attach", json!({"vm": vm})).await;
    assert_eq!(on_atomos(&m, &id).unwrap().1.attached_to, [sim_vm]);
    let actions = m.get(&format!("/v1/volumes/{id}/actions")).await.body;
    let commands: Vec<&str> = actions["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["command"].as_str())
        .collect();
    for c in ["attach_volume", "resize_volume", "detach_volume"] {
        assert!(commands.contains(&c), "{c} in {commands:?}");
    }
    m.stop().await;
}

#[tokio::test]
async fn attach_refusals_name_the_vm_the_host_and_the_field() {
    let m = Meson::start_with(|o| o.quotas.storage_gb = 200).await;
    let (vm, anchor) = vm_on_the_volumes_host(&m).await;
    // On another host: refused naming both hosts, nothing attached.
    let far = create_volume(&m, json!({"name": "far", "size": 1, "provider": "ovh"})).await;
    let far_id = far["id"].as_str().unwrap();
    let r = m
        .post(
            &format!("/v1/volumes/{far_id}/actions/attach"),
            &json!({"vm": vm}),
        )
        .await;
    assert_eq!(r.rejected_fields(), ["vm"], "{}", r.body);
    let msg = r.body["error"]["details"]["fields"][0]["messages"][0]
        .as_str()
        .unwrap()
        .to_owned();
    let vm_host = m.get(&format!("/v1/vms/{vm}")).await.body["vm"]["host"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(msg.contains("ovh-bhs-1") && msg.contains(&vm_host), "{msg}");
    assert_eq!(volume(&m, far_id).await["status"], "available");
    assert!(!msg.contains("migrate"), "another provider's host: {msg}");
    // On another host of its provider: the VM can go there, and then attach it.
    let las = create_volume(
        &m,
        json!({"name": "las", "size": 1, "provider": "ionos", "region": "us-las"}),
    )
    .await;
    let las_id = las["id"].as_str().unwrap();
    let r = m
        .post(
            &format!("/v1/volumes/{las_id}/actions/attach"),
            &json!({"vm": vm}),
        )
        .await;
    assert_eq!(r.rejected_fields(), ["vm"], "{}", r.body);
    let msg = r.body["error"]["details"]["fields"][0]["messages"][0]
        .as_str()
        .unwrap();
    assert!(
        msg.contains("migrate") && msg.contains("ionos-las-1"),
        "{msg}"
    );
    let r = m
        .post(
            &format!("/v1/vms/{vm}/actions/migrate"),
            &json!({"host": "ionos-las-1"}),
        )
        .await;
    wait_ok(&m, &r).await;
    volume_action(&m, las_id, "attach", json!({"vm": vm})).await;
    volume_action(&m, las_id, "detach", json!({})).await;

    // Already attached (the anchor, at the VM's create): a conflict naming it.
    let r = m
        .post(
            &format!("/v1/volumes/{anchor}/actions/attach"),
            &json!({"vm": vm}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.body["error"]["message"].as_str().unwrap().contains(&vm));

    // Bad bodies and ids name the field.
    let free = create_volume(&m, json!({"name": "free", "size": 2, "provider": "ionos"})).await;
    let free = free["id"].as_str().unwrap().to_owned();
    for bad in [json!({}), json!({"vm": "nope"}), json!({"vm": 7})] {
        let r = m
            .post(&format!("/v1/volumes/{free}/actions/attach"), &bad)
            .await;
        assert_eq!(r.rejected_fields(), ["vm"], "{bad}: {}", r.body);
    }
    for bad in [
        json!({}),
        json!({"size": 0}),
        json!({"size": 1}),
        json!({"size": "x"}),
    ] {
        let r = m
            .post(&format!("/v1/volumes/{free}/actions/resize"), &bad)
            .await;
        assert_eq!(r.rejected_fields(), ["size"], "{bad}: {}", r.body);
    }
    let r = m.post("/v1/volumes/nope/actions/detach", &json!({})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let r = m
        .post(
            &format!("/v1/volumes/{free}/actions/attach"),
            &json!({"vm": uuid::Uuid::new_v4()}),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

    // Another tenant's VM is not found, and its volume neither: nothing leaks.
    let other = m.token("other", "eve", meson_api::Role::Editor);
    let r = m
        .call(
            Method::POST,
            &format!("/v1/volumes/{free}/actions/attach"),
            &other,
            Some(&json!({"vm": vm})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let mine = m
        .call(
            Method::POST,
            "/v1/volumes",
            &other,
            Some(&json!({"name": "eves", "size": 1, "provider": "ionos"})),
        )
        .await;
    assert_eq!(mine.status, StatusCode::CREATED, "{}", mine.body);
    let eves = mine.body["volume"]["id"].as_str().unwrap();
    let r = m
        .call(
            Method::POST,
            &format!("/v1/volumes/{eves}/actions/attach"),
            &other,
            Some(&json!({"vm": vm})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    assert!(!r.body.to_string().contains("living"), "{}", r.body);
    assert_eq!(volume(&m, &free).await["status"], "available");

    // A resize past the storage quota is refused naming it, the size unchanged.
    let r = m
        .post(
            &format!("/v1/volumes/{free}/actions/resize"),
            &json!({"size": 10_240}),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert_eq!(
        r.body["error"]["code"], "resource_limit_exceeded",
        "{}",
        r.body
    );
    assert!(r.body.to_string().contains("storage_gb"), "{}", r.body);
    assert_eq!(volume(&m, &free).await["size"], 2);
    m.stop().await;
}

/// The simulated hosts holding a copy named `name`, with its content.
fn copies(m: &Meson, name: &str) -> Vec<(String, String)> {
    m.sim()
        .hosts()
        .iter()
        .flat_map(|h| {
            h.inventory()
                .volumes
                .into_iter()
                .filter(|v| v.name == name)
                .map(|v| (h.name().to_owned(), v.content))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test]
async fn a_vm_migrates_with_its_volumes_to_another_host_of_its_provider() {
    let m = Meson::start().await;
    let (vm, anchor) = vm_on_the_volumes_host(&m).await;
    let before = m.get(&format!("/v1/vms/{vm}")).await.body["vm"].clone();
    assert_eq!(before["host"], "ionos-fra-1", "{before}");
    let boot = format!("vm-{}-boot", vm.replace('-', ""));
    let data = format!("vol-{}", anchor.replace('-', ""));
    let (boot_bytes, data_bytes) = (
        copies(&m, &boot)[0].1.clone(),
        copies(&m, &data)[0].1.clone(),
    );

    // Refused: no such host, the VM's own, another provider's; nothing moves.
    for (host, why) in [
        ("nowhere", "no host"),
        ("ionos-fra-1", "already"),
        ("ovh-gra-1", "provider"),
    ] {
        let r = m
            .post(
                &format!("/v1/vms/{vm}/actions/migrate"),
                &json!({"host": host}),
            )
            .await;
        assert_eq!(r.rejected_fields(), ["host"], "{host}: {}", r.body);
        assert!(r.body.to_string().contains(why), "{host}: {}", r.body);
    }

    // A slow boot on the new host keeps the migration running a while.
    m.set_boot_time(std::time::Duration::from_secs(1));
    let r = m
        .post(&format!("/v1/vms/{vm}/actions/migrate"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["action"]["command"], "migrate_vm");
    // The attached volume cannot be resized meanwhile: 423 naming the move.
    let busy = m
        .post(
            &format!("/v1/volumes/{anchor}/actions/resize"),
            &json!({"size": 3}),
        )
        .await;
    assert_eq!(busy.status, StatusCode::LOCKED, "{}", busy.body);
    assert_eq!(
        busy.body["error"]["details"]["action_id"],
        r.body["action"]["id"]
    );
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    m.set_boot_time(std::time::Duration::from_millis(100));
    let after = m.get(&format!("/v1/vms/{vm}")).await.body["vm"].clone();
    assert_eq!(after["host"], "ionos-las-1", "{after}");
    assert_eq!(after["status"], "running", "{after}");
    assert_eq!(after["id"], before["id"]);
    // The world changed: one copy of each volume, on the new host, with the
    // same bytes; the VM on the new host only.
    assert_eq!(copies(&m, &boot), [("ionos-las-1".to_owned(), boot_bytes)]);
    assert_eq!(copies(&m, &data), [("ionos-las-1".to_owned(), data_bytes)]);
    let on: Vec<String> = m
        .sim()
        .hosts()
        .iter()
        .filter(|h| {
            h.inventory()
                .vms
                .iter()
                .any(|v| v.name == crate::harness::vm_atomos_name(&vm))
        })
        .map(|h| h.name().to_owned())
        .collect();
    assert_eq!(on, ["ionos-las-1"]);
    assert_eq!(volume(&m, &anchor).await["host"], "ionos-las-1");

    // Another tenant's VM is not found.
    let other = m.token("other", "eve", meson_api::Role::Editor);
    let r = m
        .call(
            Method::POST,
            &format!("/v1/vms/{vm}/actions/migrate"),
            &other,
            Some(&json!({})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    m.stop().await;
}

#[tokio::test]
async fn a_drained_host_empties_and_takes_no_new_vms_until_undrained() {
    let m = Meson::start().await;
    let mut vms = Vec::new();
    for i in 0..3 {
        let mut body = seed_vm();
        body["specs"]["vm_name"] = format!("d{i}").into();
        let r = m.post("/v1/vms", &body).await;
        wait_ok(&m, &r).await;
        vms.push(r.body["vm"]["id"].as_str().unwrap().to_owned());
    }
    let net = m
        .post(
            "/v1/networks",
            &json!({"name": "lan", "cidr": "192.168.60.0/24", "dhcp": false}),
        )
        .await;
    let mut body = seed_vm();
    body["specs"]["vm_name"] = "on-lan".into();
    body["networks"] = json!([net.body["network"]["id"]]);
    let r = m.post("/v1/vms", &body).await;
    wait_ok(&m, &r).await;
    vms.push(r.body["vm"]["id"].as_str().unwrap().to_owned());
    // One still booting: its create holds it, so the drain leaves it.
    let fra1 = m.sim().host("ionos-fra-1").unwrap();
    fra1.set_boot_time(std::time::Duration::from_secs(120));
    let mut body = seed_vm();
    body["specs"]["vm_name"] = "booting".into();
    let r = m.post("/v1/vms", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let stuck = r.body["vm"]["id"].as_str().unwrap().to_owned();
    let creating = r.body["action"]["id"].as_str().unwrap().to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while m.get(&format!("/v1/vms/{stuck}")).await.body["vm"]["host"] != "ionos-fra-1" {
        assert!(std::time::Instant::now() < deadline, "never placed");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let targets = m.get("/v1/targets").await.body["targets"].clone();
    let fra = targets
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "ionos-fra-1")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for vm in vms.iter().chain([&stuck]) {
        let got = m.get(&format!("/v1/vms/{vm}")).await.body["vm"].clone();
        assert_eq!(got["host"], "ionos-fra-1", "{got}");
    }

    // A tenant's editor cannot drain.
    let editor = m.token("dev", "ed", meson_api::Role::Editor);
    let r = m
        .call(
            Method::POST,
            &format!("/v1/targets/{fra}/actions/drain"),
            &editor,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);

    let r = m
        .post(&format!("/v1/targets/{fra}/actions/drain"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["target"]["enabled"], false);
    let actions = r.body["actions"].as_array().unwrap().clone();
    assert_eq!(actions.len(), 4, "{}", r.body);
    let left = r.body["left"].as_array().unwrap();
    assert_eq!(left.len(), 1, "{}", r.body);
    assert_eq!(left[0]["vm"], stuck.as_str());
    assert!(
        left[0]["reason"].as_str().unwrap().contains("locked"),
        "{}",
        r.body
    );
    for a in &actions {
        assert_eq!(a["command"], "migrate_vm");
        let done = m.wait_action(a["id"].as_str().unwrap()).await;
        assert_eq!(done["status"], "success", "{done}");
    }
    for vm in &vms {
        let got = m.get(&format!("/v1/vms/{vm}")).await.body["vm"].clone();
        assert_eq!(
            (got["host"].as_str(), got["status"].as_str()),
            (Some("ionos-las-1"), Some("running"))
        );
    }
    let on_fra = m
        .sim()
        .hosts()
        .iter()
        .find(|h| h.name() == "ionos-fra-1")
        .unwrap()
        .inventory()
        .vms
        .len();
    assert_eq!(on_fra, 1, "only the booting VM is left");
    let lan = m.get(&format!("/v1/vms/{}", vms[3])).await.body["vm"].clone();
    assert_eq!(
        lan["private_net"][0]["ip"], "192.168.60.2",
        "kept its address: {lan}"
    );
    fra1.set_boot_time(std::time::Duration::from_millis(100));
    assert_eq!(m.wait_action(&creating).await["status"], "success");

    // Drained, it takes no new VM, nor a migration to it.
    let mut body = seed_vm();
    body["specs"]["vm_name"] = "new".into();
    let r = m.post("/v1/vms", &body).await;
    wait_ok(&m, &r).await;
    let new = r.body["vm"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        m.get(&format!("/v1/vms/{new}")).await.body["vm"]["host"],
        "ionos-las-1"
    );
    let r = m
        .post(
            &format!("/v1/vms/{new}/actions/migrate"),
            &json!({"host": "ionos-fra-1"}),
        )
        .await;
    assert_eq!(r.rejected_fields(), ["host"], "{}", r.body);

    // Undrained, it does again.
    let r = m
        .post(&format!("/v1/targets/{fra}/actions/undrain"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["target"]["enabled"], true);
    let r = m
        .post(
            &format!("/v1/vms/{new}/actions/migrate"),
            &json!({"host": "ionos-fra-1"}),
        )
        .await;
    wait_ok(&m, &r).await;
    assert_eq!(
        m.get(&format!("/v1/vms/{new}")).await.body["vm"]["host"],
        "ionos-fra-1"
    );
    m.stop().await;
}

#[tokio::test]
async fn a_vms_own_data_volume_grows_while_it_runs() {
    let m = Meson::start_with(|o| o.quotas.storage_gb = 100).await;
    let r = m.post("/v1/vms", &seed_vm()).await;
    wait_ok(&m, &r).await;
    let vm = r.body["vm"]["id"].as_str().unwrap().to_owned();
    let got = m.get(&format!("/v1/vms/{vm}")).await.body["vm"].clone();
    let of_kind = |vm: &Value, kind: &str| -> Value {
        vm["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["kind"] == kind)
            .unwrap()
            .clone()
    };
    let data = of_kind(&got, "data");
    let id = data["id"].as_str().unwrap().to_owned();
    assert_eq!(data["size"], 30);
    let atomos = format!("vm-{}-data0", vm.replace('-', ""));
    let sim = |m: &Meson| {
        m.sim()
            .hosts()
            .iter()
            .flat_map(|h| h.inventory().volumes)
            .find(|v| v.name.starts_with(&atomos))
            .map(|v| (v.size_gb, v.content))
            .expect("the data volume on AtomOS")
    };
    let (_, bytes) = sim(&m);
    let used = usage_matches_recount(&m).await.storage_gb;

    // Grown while the VM runs: the host's copy has the new size and the
    // same bytes, the VM shows it, the quota counts it.
    let done = volume_action(&m, &id, "resize", json!({"size": 40})).await;
    assert!(
        done["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["type"] == "vm" && r["id"] == vm.as_str()),
        "{done}"
    );
    assert_eq!(sim(&m), (40.0, bytes));
    let got = m.get(&format!("/v1/vms/{vm}")).await.body["vm"].clone();
    assert_eq!(of_kind(&got, "data")["size"], 40);
    assert_eq!(got["status"], "running");
    assert_eq!(usage_matches_recount(&m).await.storage_gb, used + 10);

    // Refused: shrinking (naming `size`), past the quota (naming it), the
    // boot volume (a rebuild's), and what only standalone volumes do.
    let resize = |id: String, size: u32| {
        let m = &m;
        async move {
            m.post(
                &format!("/v1/volumes/{id}/actions/resize"),
                &json!({"size": size}),
            )
            .await
        }
    };
    let r = resize(id.clone(), 39).await;
    assert_eq!(r.rejected_fields(), ["size"], "{}", r.body);
    let r = resize(id.clone(), 500).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert!(r.body.to_string().contains("storage_gb"), "{}", r.body);
    let boot = of_kind(&got, "boot")["id"].as_str().unwrap().to_owned();
    let r = resize(boot, 50).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.body.to_string().contains("boot"), "{}", r.body);
    let r = m
        .post(&format!("/v1/volumes/{id}/actions/detach"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(sim(&m).0, 40.0, "nothing changed by the refusals");
    assert_eq!(usage_matches_recount(&m).await.storage_gb, used + 10);
    m.stop().await;
}

#[tokio::test]
async fn a_free_volume_moves_to_another_host_of_its_provider_and_attaches_there() {
    let m = Meson::start().await;
    let v = create_volume(&m, json!({"name": "mover", "size": 3, "provider": "ionos"})).await;
    let id = v["id"].as_str().unwrap().to_owned();
    assert_eq!(v["host"], "ionos-fra-1", "{v}");
    let name = format!("vol-{}", id.replace('-', ""));
    let before = copies(&m, &name);
    assert_eq!(before.len(), 1);

    // Refused, nothing moving: no such host, its own, another provider's,
    // no host at all.
    for (body, why) in [
        (json!({"host": "nowhere"}), "no host"),
        (json!({"host": "ionos-fra-1"}), "already"),
        (json!({"host": "ovh-gra-1"}), "provider"),
        (json!({}), "required"),
    ] {
        let r = m
            .post(&format!("/v1/volumes/{id}/actions/move"), &body)
            .await;
        assert_eq!(r.rejected_fields(), ["host"], "{body}: {}", r.body);
        assert!(r.body.to_string().contains(why), "{body}: {}", r.body);
    }

    // While it moves (the old host slowed down), nothing else starts on it.
    let fra = m.sim().host("ionos-fra-1").unwrap();
    fra.faults()
        .set_latency(std::time::Duration::from_millis(400));
    let r = m
        .post(
            &format!("/v1/volumes/{id}/actions/move"),
            &json!({"host": "ionos-las-1"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["action"]["command"], "move_volume");
    let moving = r.body["action"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        m.delete(&format!("/v1/volumes/{id}")).await.status,
        StatusCode::LOCKED
    );
    let r = m
        .post(
            &format!("/v1/volumes/{id}/actions/resize"),
            &json!({"size": 4}),
        )
        .await;
    assert_eq!(r.status, StatusCode::LOCKED, "{}", r.body);
    assert_eq!(r.body["error"]["details"]["action_id"], moving.as_str());
    fra.faults().set_latency(std::time::Duration::ZERO);
    assert_eq!(m.wait_action(&moving).await["status"], "success");

    // On the new host only, the same bytes, recorded there.
    let after = copies(&m, &name);
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0].0, "ionos-las-1");
    assert_eq!(after[0].1, before[0].1, "the bytes moved");
    let v = volume(&m, &id).await;
    assert_eq!(
        (v["host"].as_str(), v["status"].as_str()),
        (Some("ionos-las-1"), Some("available"))
    );

    // A VM on that host takes it; an attached volume moves only with its VM.
    let mut body = seed_vm();
    body["region"] = "us-las".into();
    let r = m.post("/v1/vms", &body).await;
    let vm = r.body["vm"]["id"].as_str().unwrap().to_owned();
    wait_ok(&m, &r).await;
    volume_action(&m, &id, "attach", json!({"vm": vm})).await;
    let r = m
        .post(
            &format!("/v1/volumes/{id}/actions/move"),
            &json!({"host": "ionos-fra-1"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.body.to_string().contains("migrate"), "{}", r.body);
    m.stop().await;
}
