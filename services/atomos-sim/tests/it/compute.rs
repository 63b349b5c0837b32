//! canallocate quotes and refusals, register validation, power, templates.

use crate::common::{client, p4000, sim, spec};
use atomos_driver::{ErrorKind, Register, VmState};
use std::time::Duration;

#[tokio::test]
async fn canallocate_quotes_when_the_spec_fits() {
    let sim = sim(Duration::from_millis(50)).await;
    let quotes = client(&sim, "small")
        .can_allocate(&spec(2, 2048))
        .await
        .unwrap();
    assert_eq!(quotes.len(), 1);
    let q = &quotes[0];
    assert_eq!(
        (q.provider.as_str(), q.region.as_str(), q.currency.as_str()),
        ("ionos", "de-fra", "EUR")
    );
    assert!(q.price_hour > 0.0);
    assert!((q.price_month - q.price_hour * 730.0).abs() < 0.01);

    let mut gpu_spec = spec(4, 4096);
    gpu_spec.pci = vec![p4000(2)];
    gpu_spec.require_ecc = true;
    let gpu_quote = &client(&sim, "gpu").can_allocate(&gpu_spec).await.unwrap()[0];
    assert!(
        gpu_quote.price_hour > 1.0,
        "two GPUs are priced: {gpu_quote:?}"
    );
}

#[tokio::test]
async fn canallocate_refuses_what_does_not_fit() {
    let sim = sim(Duration::from_millis(50)).await;
    let small = client(&sim, "small");
    let cases = {
        let mut too_much_ram = spec(1, 8193);
        too_much_ram.flags.clear();
        let mut too_many_cores = spec(5, 512);
        too_many_cores.overprovision = 1;
        let mut gpu = spec(1, 512);
        gpu.pci = vec![p4000(1)];
        let mut ecc = spec(1, 512);
        ecc.require_ecc = true;
        let mut arm = spec(1, 512);
        arm.archs = vec!["ARM_8".into()];
        let mut avx512 = spec(1, 512);
        avx512.flags = vec!["avx512f".into()];
        [too_much_ram, too_many_cores, gpu, ecc, arm, avx512]
    };
    for case in &cases {
        let err = small.can_allocate(case).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Capacity, "{case:?}: {err}");
        assert_eq!(err.route, "vm/canallocate");
    }
    // Overprovisioned, five vCPUs fit on four cores.
    let mut shared = spec(5, 512);
    shared.overprovision = 2;
    small.can_allocate(&shared).await.unwrap();

    sim.host("small").unwrap().faults().fill_host(true);
    let err = small.can_allocate(&spec(1, 512)).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
    sim.host("small").unwrap().faults().clear();
    small.can_allocate(&spec(1, 512)).await.unwrap();
}

#[tokio::test]
async fn registered_vms_consume_capacity() {
    let sim = sim(Duration::from_millis(50)).await;
    let small = client(&sim, "small");
    let register = |name: &str| Register {
        vm_name: name.into(),
        spec: spec(2, 4096),
        volume_ids: vec![],
        network_ids: vec![],
        nic_macs: vec![],
    };
    small.register(&register("a")).await.unwrap();
    small.register(&register("b")).await.unwrap();
    // 4 of 4 cores and 8 of 8 GiB are taken.
    let err = small.can_allocate(&spec(1, 512)).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
    let err = small.register(&register("c")).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
    let a = small.vm_by_name("a").await.unwrap().unwrap();
    small.unregister(&a.id).await.unwrap();
    small.can_allocate(&spec(1, 512)).await.unwrap();
}

#[tokio::test]
async fn register_validates_name_and_references() {
    let sim = sim(Duration::from_millis(50)).await;
    let small = client(&sim, "small");
    let mut req = Register {
        vm_name: "bad_name".into(),
        spec: spec(1, 512),
        volume_ids: vec![],
        network_ids: vec![],
        nic_macs: vec![],
    };
    assert_eq!(
        small.register(&req).await.unwrap_err().kind,
        ErrorKind::Invalid
    );
    req.vm_name = "ok-name".into();
    req.volume_ids = vec!["0123456789abcdef0123456789abcdef".into()];
    assert_eq!(
        small.register(&req).await.unwrap_err().kind,
        ErrorKind::NotFound
    );
    req.volume_ids.clear();
    req.network_ids = vec!["missing".into()];
    assert_eq!(
        small.register(&req).await.unwrap_err().kind,
        ErrorKind::NotFound
    );
    assert!(sim.host("small").unwrap().inventory().is_empty());
}

#[tokio::test]
async fn power_actions_change_state() {
    let sim = sim(Duration::from_millis(20)).await;
    let small = client(&sim, "small");
    let req = Register {
        vm_name: "p".into(),
        spec: spec(1, 512),
        volume_ids: vec![],
        network_ids: vec![],
        nic_macs: vec![],
    };
    small.register(&req).await.unwrap();
    let vm = crate::common::wait_running(&small, "p").await;

    small.stop(&vm.id).await.unwrap();
    let off = small.vm_by_name("p").await.unwrap().unwrap();
    assert_eq!((off.state, off.ipv4), (VmState::Off, None));
    // Rebooting a stopped VM is refused; starting it boots it again.
    assert_eq!(
        small.reboot(&vm.id).await.unwrap_err().kind,
        ErrorKind::Invalid
    );
    small.start(&vm.id).await.unwrap();
    let again = crate::common::wait_running(&small, "p").await;
    assert_eq!(again.ipv4, vm.ipv4, "the address survives a power cycle");
    small.reboot(&vm.id).await.unwrap();
    crate::common::wait_running(&small, "p").await;

    let unknown = "00000000-0000-0000-0000-000000000000";
    assert!(small.start(unknown).await.unwrap_err().is_not_found());
}

#[tokio::test]
async fn templates_are_the_official_flavours() {
    let sim = sim(Duration::from_millis(50)).await;
    let templates = client(&sim, "small").templates().await.unwrap();
    let names: Vec<&str> = templates.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["Helium", "Neon", "Argon", "Argon 2", "Kripton"]);
    let argon = &templates[2];
    assert_eq!((argon.slots, argon.ram_mib), (4, 4096));
    assert_eq!(argon.pci, vec![p4000(1)]);
}

/// `/update` resizes a shut-off VM within the host's room (its own share
/// freed first), and refuses a running VM or more than the host has.
#[tokio::test]
async fn update_resizes_a_stopped_vm_within_the_host() {
    let sim = sim(Duration::from_millis(50)).await;
    let c = client(&sim, "small");
    c.register(&crate::common::register("grow", 2, 2048))
        .await
        .unwrap();
    let vm = c.vm_by_name("grow").await.unwrap().unwrap();
    let running = c.vm_update(&vm.id, 4, 4096).await.unwrap_err();
    assert_eq!(running.kind, ErrorKind::Invalid, "{running}");
    assert!(running.message.contains("VmNotStopped"), "{running}");
    c.stop(&vm.id).await.unwrap();
    // 4 cores and 8 GiB on the host: all of it, the VM's own 2 freed first.
    c.vm_update(&vm.id, 4, 8192).await.unwrap();
    let got = c.vm_by_name("grow").await.unwrap().unwrap();
    assert_eq!((got.slots, got.ram_mib), (4, 8192));
    let full = c.vm_update(&vm.id, 5, 8192).await.unwrap_err();
    assert_eq!(full.kind, ErrorKind::Capacity, "{full}");
    assert!(
        c.vm_update("no-such-vm", 1, 512)
            .await
            .unwrap_err()
            .is_not_found()
    );
    c.vm_update(&vm.id, 1, 1024).await.unwrap();
    c.start(&vm.id).await.unwrap();
    let got = crate::common::wait_running(&c, "grow").await;
    assert_eq!((got.slots, got.ram_mib), (1, 1024));
}
