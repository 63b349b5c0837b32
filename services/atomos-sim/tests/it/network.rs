//! Networks: create/list/info/delete, duplicate names, use by a VM, DHCP leases.

use crate::common::{client, sim, spec, wait_running};
use atomos_driver::{ErrorKind, NetworkCreate, Register};
use std::net::Ipv4Addr;
use std::time::Duration;

#[tokio::test]
async fn network_lifecycle() {
    let sim = sim(Duration::from_millis(50)).await;
    let c = client(&sim, "small");
    let req = NetworkCreate {
        name: "lan".into(),
        cidr: "192.168.101.1/24".into(),
        dhcp_start: Some("192.168.101.2".into()),
        dhcp_end: Some("192.168.101.254".into()),
    };
    let net = c.network_create(&req).await.unwrap();
    assert_eq!(net.name, "lan");
    assert_eq!(net.cidr.as_deref(), Some("192.168.101.1/24"));
    assert_eq!(net.dhcp_end.as_deref(), Some("192.168.101.254"));
    assert_eq!(c.network_info(&net.id).await.unwrap(), net);
    assert_eq!(c.networks().await.unwrap(), vec![net.clone()]);
    assert_eq!(
        c.network_create(&req).await.unwrap_err().kind,
        ErrorKind::AlreadyExists
    );
    let bad = NetworkCreate {
        name: "bad".into(),
        cidr: "not-a-cidr".into(),
        dhcp_start: None,
        dhcp_end: None,
    };
    assert_eq!(
        c.network_create(&bad).await.unwrap_err().kind,
        ErrorKind::Invalid
    );

    let vm = Register {
        vm_name: "on-lan".into(),
        spec: spec(1, 512),
        volume_ids: vec![],
        network_ids: vec![net.id.clone()],
        nic_macs: vec![],
    };
    c.register(&vm).await.unwrap();
    assert_eq!(
        c.network_delete(&net.id).await.unwrap_err().kind,
        ErrorKind::Invalid
    );
    let id = c.vm_by_name("on-lan").await.unwrap().unwrap().id;
    c.unregister(&id).await.unwrap();
    c.network_delete(&net.id).await.unwrap();
    assert!(c.network_info(&net.id).await.unwrap_err().is_not_found());
    assert!(c.network_delete(&net.id).await.unwrap_err().is_not_found());
    assert!(sim.host("small").unwrap().inventory().is_empty());
}

fn lan(name: &str, start: &str, end: &str) -> NetworkCreate {
    NetworkCreate {
        name: name.into(),
        cidr: "192.168.50.1/24".into(),
        dhcp_start: Some(start.into()),
        dhcp_end: Some(end.into()),
    }
}

#[tokio::test]
async fn vms_lease_addresses_from_their_networks_dhcp_range() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = client(&sim, "small");
    // Three addresses, the gateway among them: two leases.
    let net = c
        .network_create(&lan("tiny", "192.168.50.1", "192.168.50.3"))
        .await
        .unwrap();
    let on_net = |name: &str| Register {
        network_ids: vec![net.id.clone()],
        nic_macs: vec![],
        ..crate::common::register(name, 1, 512)
    };
    c.register(&on_net("a")).await.unwrap();
    c.register(&on_net("b")).await.unwrap();
    let a = wait_running(&c, "a").await;
    let b = wait_running(&c, "b").await;
    assert_eq!(
        a.ipv4,
        Some(Ipv4Addr::new(192, 168, 50, 2)),
        "gateway skipped"
    );
    assert_eq!(b.ipv4, Some(Ipv4Addr::new(192, 168, 50, 3)));
    // The range is used up: register is refused as capacity.
    let err = c.register(&on_net("c")).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity, "{err}");
    assert!(err.message.contains("exhausted"), "{err}");
    // A VM without a network keeps the host's own block.
    c.register(&crate::common::register("plain", 1, 512))
        .await
        .unwrap();
    let plain = wait_running(&c, "plain").await;
    assert_eq!(plain.ipv4.unwrap().octets()[0], 10);
    // Unregistering releases the lease; the next VM gets the first free one.
    c.unregister(&a.id).await.unwrap();
    c.register(&on_net("c")).await.unwrap();
    let again = wait_running(&c, "c").await;
    assert_eq!(again.ipv4, Some(Ipv4Addr::new(192, 168, 50, 2)));
    let inv = sim.host("small").unwrap().inventory();
    let vm_c = inv.vms.iter().find(|v| v.name == "c").unwrap();
    assert_eq!(vm_c.network_ids, vec![net.id.clone()]);
    assert_eq!(vm_c.ipv4, Some(Ipv4Addr::new(192, 168, 50, 2)));
}

#[tokio::test]
async fn leases_are_per_network_and_survive_power_cycles() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = client(&sim, "small");
    let one = c
        .network_create(&lan("one", "192.168.50.10", "192.168.50.20"))
        .await
        .unwrap();
    let two = c
        .network_create(&lan("two", "192.168.50.10", "192.168.50.20"))
        .await
        .unwrap();
    let no_dhcp = c
        .network_create(&NetworkCreate {
            name: "static".into(),
            cidr: "172.16.0.1/16".into(),
            dhcp_start: None,
            dhcp_end: None,
        })
        .await
        .unwrap();
    for (name, nets) in [
        ("x", vec![one.id.clone()]),
        ("y", vec![two.id.clone()]),
        // The first network with DHCP gives the address.
        ("z", vec![no_dhcp.id.clone(), one.id.clone()]),
    ] {
        let req = Register {
            network_ids: nets,
            nic_macs: vec![],
            ..crate::common::register(name, 1, 256)
        };
        c.register(&req).await.unwrap();
    }
    let x = wait_running(&c, "x").await;
    let y = wait_running(&c, "y").await;
    let z = wait_running(&c, "z").await;
    assert_eq!(x.ipv4, Some(Ipv4Addr::new(192, 168, 50, 10)));
    assert_eq!(y.ipv4, x.ipv4, "another network, another pool");
    assert_eq!(z.ipv4, Some(Ipv4Addr::new(192, 168, 50, 11)));

    c.stop(&x.id).await.unwrap();
    assert_eq!(c.vm_by_name("x").await.unwrap().unwrap().ipv4, None);
    c.start(&x.id).await.unwrap();
    assert_eq!(wait_running(&c, "x").await.ipv4, x.ipv4, "lease kept");
}

#[tokio::test]
async fn dhcp_ranges_are_validated() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = client(&sim, "small");
    for (start, end) in [
        ("192.168.50.20", "192.168.50.10"),
        ("192.168.49.10", "192.168.50.20"),
        ("192.168.50.10", "10.0.0.1"),
        ("192.168.50.10", "nope"),
    ] {
        let err = c.network_create(&lan("bad", start, end)).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid, "{start}-{end}: {err}");
    }
    assert!(c.networks().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_static_address_from_network_config_is_what_the_vm_reports() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = client(&sim, "small");
    // No DHCP: addresses come from the guest's own configuration.
    let net = c
        .network_create(&NetworkCreate {
            name: "static".into(),
            cidr: "192.168.60.1/24".into(),
            dhcp_start: None,
            dhcp_end: None,
        })
        .await
        .unwrap();
    let config = "version: 2\nethernets:\n  nic0:\n    addresses: [\"192.168.60.77/24\"]\n";
    let ci = c
        .cloudinit_create_files(
            "s-cloudinit",
            &[
                ("user-data", "#cloud-config\n"),
                ("meta-data", "instance-id: s\n"),
                ("network-config", config),
            ],
        )
        .await
        .unwrap();
    let files = &sim.host("small").unwrap().inventory().volumes[0].files;
    assert_eq!(files.len(), 3);
    assert_eq!(files[2].name, "network-config");
    c.register(&Register {
        volume_ids: vec![ci],
        network_ids: vec![net.id.clone()],
        nic_macs: vec![],
        ..crate::common::register("s", 1, 512)
    })
    .await
    .unwrap();
    let s = wait_running(&c, "s").await;
    assert_eq!(s.ipv4, Some(Ipv4Addr::new(192, 168, 60, 77)));

    // An address outside every attached network is not the VM's: the host's
    // block is used instead.
    let ci = c
        .cloudinit_create_files(
            "t-cloudinit",
            &[
                ("user-data", "#cloud-config\n"),
                ("meta-data", "instance-id: t\n"),
                (
                    "network-config",
                    config.replace("192.168.60", "172.16.0").as_str(),
                ),
            ],
        )
        .await
        .unwrap();
    c.register(&Register {
        volume_ids: vec![ci],
        network_ids: vec![net.id.clone()],
        nic_macs: vec![],
        ..crate::common::register("t", 1, 512)
    })
    .await
    .unwrap();
    let t = wait_running(&c, "t").await;
    assert_eq!(t.ipv4.unwrap().octets()[0], 10);
}

#[tokio::test]
async fn a_nic_is_hot_plugged_and_unplugged_on_a_running_vm() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = client(&sim, "small");
    let net = c
        .network_create(&lan("hot", "192.168.50.2", "192.168.50.9"))
        .await
        .unwrap();
    c.register(&crate::common::register("vm", 1, 512))
        .await
        .unwrap();
    let vm = wait_running(&c, "vm").await;
    assert!(vm.network_ids.is_empty());
    let own = vm.ipv4;

    c.network_attach(&vm.id, &net.id, "52:54:00:00:00:01")
        .await
        .unwrap();
    let on = c.vm_by_name("vm").await.unwrap().unwrap();
    assert_eq!(on.network_ids, vec![net.id.clone()], "status lists the NIC");
    assert_eq!(on.ipv4, own, "a new NIC brings no new primary address");
    assert_eq!(on.state, atomos_driver::VmState::Running, "it kept running");
    let again = c
        .network_attach(&vm.id, &net.id, "52:54:00:00:00:02")
        .await
        .unwrap_err();
    assert_eq!(again.kind, ErrorKind::AlreadyExists, "{again}");
    assert!(again.message.contains("NetworkAlreadyAttached"), "{again}");
    // The network is in use: it cannot be deleted.
    assert_eq!(
        c.network_delete(&net.id).await.unwrap_err().kind,
        ErrorKind::Invalid
    );
    let nowhere = c
        .network_attach(&vm.id, "no-such-net", "52:54:00:00:00:03")
        .await
        .unwrap_err();
    assert!(nowhere.is_not_found(), "{nowhere}");
    let no_vm = c
        .network_attach("no-such-vm", &net.id, "52:54:00:00:00:03")
        .await
        .unwrap_err();
    assert!(no_vm.is_not_found(), "{no_vm}");

    c.network_detach(&vm.id, &net.id).await.unwrap();
    let off = c.vm_by_name("vm").await.unwrap().unwrap();
    assert!(off.network_ids.is_empty());
    let twice = c.network_detach(&vm.id, &net.id).await.unwrap_err();
    assert!(
        twice.is_not_found() && twice.message.contains("NetworkNotAttached"),
        "{twice}"
    );
    c.network_delete(&net.id).await.unwrap();
}

#[tokio::test]
async fn unplugging_the_nic_a_lease_came_from_falls_back_to_the_hosts_block() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = client(&sim, "small");
    let net = c
        .network_create(&lan("lease", "192.168.50.2", "192.168.50.9"))
        .await
        .unwrap();
    c.register(&Register {
        network_ids: vec![net.id.clone()],
        nic_macs: vec![],
        ..crate::common::register("leased", 1, 512)
    })
    .await
    .unwrap();
    let vm = wait_running(&c, "leased").await;
    assert_eq!(vm.ipv4, Some(Ipv4Addr::new(192, 168, 50, 2)));
    c.network_detach(&vm.id, &net.id).await.unwrap();
    let after = c.vm_by_name("leased").await.unwrap().unwrap();
    assert_eq!(after.ipv4.unwrap().octets()[0], 10, "{after:?}");
}
