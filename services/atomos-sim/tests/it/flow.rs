//! The workflows' create and delete sequence end to end (docs/atomos.md).

use crate::common::{client, sim, spec, wait_running};
use atomos_driver::{ErrorKind, ImageVolumeCreate, Register, VmState, VolumeCreate};
use std::net::Ipv4Addr;
use std::time::Duration;

const USER_DATA: &str = "#cloud-config\nhostname: web-1\n";
const META_DATA: &str = "instance-id: web-1\n";

#[tokio::test]
async fn create_run_and_tear_down_a_vm() {
    // Boot is long at first so the "starting" state can be observed
    // reliably, then shortened: boot progress is computed on read.
    let sim = sim(Duration::from_secs(600)).await;
    let host = sim.host("gpu").unwrap();
    let c = client(&sim, "gpu");

    assert!(c.login("alice", "secret").await.unwrap());
    let status = c.auth_status().await.unwrap();
    assert!(status.authenticated);
    assert_eq!(status.username.as_deref(), Some("alice"));

    c.volume_can_create(50).await.unwrap();
    let boot = c
        .volume_create_from_image(&ImageVolumeCreate {
            name: "web-1-boot".into(),
            size_gb: 50,
            url: "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img"
                .into(),
        })
        .await
        .unwrap();
    let cloudinit = c
        .cloudinit_create("web-1-cloudinit", USER_DATA, META_DATA)
        .await
        .unwrap();
    let data = c
        .volume_create(&VolumeCreate {
            name: "web-1-data".into(),
            size_gb: 20,
            bootable: false,
            readonly: false,
            shareable: false,
            private: true,
        })
        .await
        .unwrap();
    for id in [&boot, &cloudinit, &data] {
        assert_eq!(id.len(), 32, "{id}");
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
    }
    let info = c.volume_info(&data).await.unwrap();
    assert_eq!(
        (info.name.as_str(), info.size_gb, info.private),
        ("web-1-data", 20.0, true)
    );
    let ci = c.volume_info(&cloudinit).await.unwrap();
    assert!(ci.cloudinit);
    let inventory = host.inventory();
    let ci_files = &inventory
        .volumes
        .iter()
        .find(|v| v.id == cloudinit)
        .unwrap()
        .files;
    let files: Vec<(&str, &str)> = ci_files
        .iter()
        .map(|f| (f.name.as_str(), f.content.as_str()))
        .collect();
    assert_eq!(files, [("user-data", USER_DATA), ("meta-data", META_DATA)]);

    let quotes = c.can_allocate(&spec(2, 2048)).await.unwrap();
    assert_eq!(quotes[0].provider, "ovh");
    let req = Register {
        vm_name: "web-1".into(),
        spec: spec(2, 2048),
        volume_ids: vec![boot.clone(), cloudinit.clone(), data.clone()],
        network_ids: vec![],
        nic_macs: vec![],
    };
    c.register(&req).await.unwrap();

    let starting = c.vm_by_name("web-1").await.unwrap().unwrap();
    assert_eq!(
        (starting.state.clone(), starting.ipv4),
        (VmState::Starting, None)
    );
    host.set_boot_time(Duration::from_millis(50));
    let vm = wait_running(&c, "web-1").await;
    assert_eq!(vm.id, starting.id);
    assert_eq!(vm.id.len(), 36, "dashed UUID: {}", vm.id);
    assert_eq!(
        (vm.slots, vm.ram_mib),
        (2, 2048),
        "GiB in /status back to MiB"
    );
    assert_eq!(
        vm.volume_ids,
        [boot.clone(), cloudinit.clone(), data.clone()]
    );
    let ip = vm.ipv4.unwrap();
    assert_eq!(ip.octets()[0], 10);
    assert_ne!(ip, Ipv4Addr::UNSPECIFIED);
    assert!(vm.server_url.is_some());

    // A name is taken for as long as the VM exists.
    assert_eq!(
        c.register(&req).await.unwrap_err().kind,
        ErrorKind::AlreadyExists
    );
    // An attached volume cannot be destroyed.
    let err = c.volume_destroy(&data).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid);
    assert!(err.message.contains("VolumeCannotBeDeleted"), "{err}");
    let attached = host
        .inventory()
        .volumes
        .into_iter()
        .find(|v| v.id == data)
        .unwrap();
    assert_eq!(attached.attached_to, vec![vm.id.clone()]);

    c.unregister(&vm.id).await.unwrap();
    assert!(c.vm_by_name("web-1").await.unwrap().is_none());
    assert!(c.unregister(&vm.id).await.unwrap_err().is_not_found());
    for id in [&boot, &cloudinit, &data] {
        c.volume_destroy(id).await.unwrap();
    }
    assert!(c.volume_destroy(&data).await.unwrap_err().is_not_found());
    assert!(c.volume_info(&data).await.unwrap_err().is_not_found());
    assert!(c.volumes().await.unwrap().is_empty());
    assert!(host.inventory().is_empty(), "{:?}", host.inventory());
}
