//! Orphans: VMs a host holds that no meson record names. The reconciler
//! adopts back those whose names carry their id and a tenant meson knows,
//! and keeps the rest for an operator, who adopts or deletes them; nothing
//! is deleted without that decision. (The restore from a real backup that
//! makes them is `services/mesond/tests/restore.rs`.)

use crate::harness::{Meson, seed_vm};
use crate::reconciler::workflow_env;
use atomos_driver::{AtomosClient, Register, VmSpec, VolumeCreate};
use meson_core::{ClusterId, TenantId, VmId};
use meson_workflows::auto_repair::RepairConfig;
use meson_workflows::orphans;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Makes a VM on a host as meson would, outside meson: a boot volume
/// (named `<vm>-boot` when `boot` is given) and the VM. Returns the
/// boot volume's AtomOS id.
async fn make_on_host(c: &AtomosClient, name: &str, boot: &str) -> String {
    let volume = c
        .volume_create(&VolumeCreate {
            name: boot.to_owned(),
            size_gb: 12,
            bootable: true,
            readonly: false,
            shareable: false,
            private: true,
        })
        .await
        .expect("a volume");
    c.register(&Register {
        vm_name: name.to_owned(),
        spec: VmSpec {
            slots: 2,
            overprovision: 1,
            allow_smt: false,
            archs: vec!["X86_64".into()],
            flags: Vec::new(),
            min_frequency_ghz: None,
            ram_mib: 2048,
            require_ecc: false,
            pci: Vec::new(),
            os_family: "linux".into(),
            os_flavour: "debian".into(),
        },
        volume_ids: vec![volume.clone()],
        network_ids: Vec::new(),
        nic_macs: Vec::new(),
    })
    .await
    .expect("registered");
    c.start(&c.vm_by_name(name).await.unwrap().expect("listed").id)
        .await
        .expect("started");
    // Running, with an address, before anyone looks.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while c
        .vm_by_name(name)
        .await
        .unwrap()
        .and_then(|v| v.ipv4)
        .is_none()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{name} booted in 20 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    volume
}

fn orphan_named<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["orphans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["atomos_name"] == name)
        .unwrap_or_else(|| panic!("no orphan {name} in {list}"))
}

#[tokio::test]
async fn a_vm_no_row_names_is_adopted_by_its_name_or_kept_for_an_operator() {
    let m = Meson::start().await;
    let env = workflow_env(&m, RepairConfig::default());
    // The dev tenant holds a VM: meson knows it.
    let r = m.post("/v1/vms", &seed_vm()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let known = r.body["vm"]["id"].as_str().unwrap().to_owned();
    m.wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    let targets = m.get("/v1/targets").await.body;
    let target: meson_core::TargetId =
        serde_json::from_value(targets["targets"][0]["id"].clone()).unwrap();
    let host = targets["targets"][0]["name"].as_str().unwrap().to_owned();
    let c = env.atomos.client(target).await.unwrap();

    // Nothing stray: a pass adopts and keeps nothing, and lists the VM
    // meson made as its own.
    let pass = orphans::tick(&env).await.unwrap();
    assert_eq!(pass, orphans::Pass::default());

    let dev = TenantId("dev".into());
    let lost = VmId::new(); // meson named it for dev; its row is gone
    let lost_name = meson_core::naming::vm_atomos_name(lost, &dev);
    make_on_host(
        &c,
        &lost_name,
        &meson_core::naming::vm_boot_volume_name(lost),
    )
    .await;
    let ghost = VmId::new(); // named for a tenant meson never saw
    let ghost_name = meson_core::naming::vm_atomos_name(ghost, &TenantId("ghost".into()));
    make_on_host(
        &c,
        &ghost_name,
        &meson_core::naming::vm_boot_volume_name(ghost),
    )
    .await;
    let node = VmId::new(); // a node of a cluster meson has no row of
    let node_name = meson_core::naming::node_atomos_name(ClusterId::new(), false, node, &dev);
    make_on_host(
        &c,
        &node_name,
        &meson_core::naming::vm_boot_volume_name(node),
    )
    .await;
    let stray_disk = make_on_host(&c, "stray-1", "stray-1-disk").await;

    let pass = orphans::tick(&env).await.unwrap();
    assert_eq!(
        (pass.adopted, pass.held, pass.deleted),
        (1, 3, 0),
        "{pass:?}"
    );

    // Adopted into dev under its own id: running where it runs, its boot
    // volume its own, counted in the tenant's usage.
    let r = m.get(&format!("/v1/vms/{}", lost.0)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let vm = &r.body["vm"];
    assert_eq!(vm["status"], "running", "{vm}");
    assert_eq!(vm["host"], host.as_str(), "{vm}");
    assert!(vm["ipv4"].is_string(), "{vm}");
    // Counted in the tenant's usage, as a recount counts it.
    assert_eq!(crate::quotas::usage_matches_recount(&m).await.vms, 2);

    // The rest wait, each with why.
    let list = m.get("/v1/admin/orphans").await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    assert_eq!(
        list.body["orphans"].as_array().unwrap().len(),
        3,
        "{}",
        list.body
    );
    let g = orphan_named(&list.body, &ghost_name);
    assert!(
        g["reason"].as_str().unwrap().contains("names no tenant"),
        "{g}"
    );
    assert_eq!(g["vm_id"], ghost.0.to_string());
    assert_eq!(g["tenant"], Value::Null);
    let n = orphan_named(&list.body, &node_name);
    assert!(n["reason"].as_str().unwrap().contains("cluster"), "{n}");
    assert_eq!(n["tenant"], "dev", "{n}");
    let s = orphan_named(&list.body, "stray-1");
    assert!(
        s["reason"].as_str().unwrap().contains("outside meson"),
        "{s}"
    );
    assert_eq!(s["volumes"][0]["atomos_id"], stray_disk.as_str(), "{s}");
    assert_eq!(
        (s["vcpus"].as_u64(), s["ram_mib"].as_u64()),
        (Some(2), Some(2048))
    );

    // Only operators see or decide them.
    let editor = m.token("dev", "ed", meson_api::Role::Editor);
    let r = m
        .call(reqwest::Method::GET, "/v1/admin/orphans", &editor, None)
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);

    // A tagged VM goes only to the tenant its tag names.
    let path = |o: &Value, what: &str| {
        format!(
            "/v1/admin/orphans/{}/actions/{what}",
            o["id"].as_str().unwrap()
        )
    };
    let r = m.post(&path(g, "adopt"), &json!({"tenant": "dev"})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.body.to_string().contains("tenant"), "{}", r.body);
    let r = m
        .post(
            &path(g, "adopt"),
            &json!({"tenant": "ghost", "name": "found"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert_eq!(r.body["orphan"]["decision"], "adopt");
    // One decision each.
    let r = m.post(&path(g, "delete"), &json!({})).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    // The node is deleted from its host, and the stray VM too.
    let r = m.post(&path(n, "delete"), &json!({})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let r = m.post(&path(s, "delete"), &json!({})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    // Decided is not done: the hosts still hold them until the next pass.
    assert!(c.vm_by_name("stray-1").await.unwrap().is_some());

    let pass = orphans::tick(&env).await.unwrap();
    assert_eq!(
        (pass.adopted, pass.deleted, pass.held),
        (1, 2, 0),
        "{pass:?}"
    );
    let ghost_token = m.token("ghost", "g", meson_api::Role::Viewer);
    let r = m
        .call(
            reqwest::Method::GET,
            &format!("/v1/vms/{}", ghost.0),
            &ghost_token,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["vm"]["name"], "found", "{}", r.body);
    assert!(c.vm_by_name("stray-1").await.unwrap().is_none());
    assert!(c.vm_by_name(&node_name).await.unwrap().is_none());
    let volumes = c.volumes().await.unwrap();
    assert!(
        volumes.iter().all(|v| v.id != stray_disk),
        "its disk went with it"
    );
    // The other VMs' volumes stayed.
    assert!(
        volumes
            .iter()
            .any(|v| v.name == meson_core::naming::vm_boot_volume_name(lost))
    );
    assert_eq!(m.get("/v1/admin/orphans").await.body["orphans"], json!([]));
    let pass = orphans::tick(&env).await.unwrap();
    assert_eq!(pass, orphans::Pass::default());

    // An adopted VM is a VM like any other: deleted through the API, it
    // leaves its host with its volumes.
    let r = m.delete(&format!("/v1/vms/{}", lost.0)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    assert!(c.vm_by_name(&lost_name).await.unwrap().is_none());
    assert!(c.volumes().await.unwrap().iter().all(|v| {
        !v.name
            .starts_with(&meson_core::naming::vm_volume_prefix(lost))
    }));
    // And the VM meson made all along was never touched.
    let r = m.get(&format!("/v1/vms/{known}")).await;
    assert_eq!(r.body["vm"]["status"], "running", "{}", r.body);
}
