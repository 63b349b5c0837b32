//! Capacity: CPU frequency, overprovisioned cores, and a host that fills up between canallocate and register.

use crate::common::{client, register, sim, spec};
use atomos_driver::{ErrorKind, Register};
use std::time::Duration;

#[tokio::test]
async fn min_frequency_is_held_against_the_host_clock() {
    let sim = sim(Duration::from_millis(50)).await;
    // `small` is an ionos host (3.4 GHz), `gpu` an ovh one (3.7 GHz).
    let small = client(&sim, "small");
    let gpu = client(&sim, "gpu");
    let mut fast = spec(1, 512);
    fast.min_frequency_ghz = Some(3.5);
    let err = small.can_allocate(&fast).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity, "{err}");
    assert!(err.message.contains("GHz"), "{err}");
    gpu.can_allocate(&fast).await.unwrap();
    let req = Register {
        vm_name: "fast".into(),
        spec: fast.clone(),
        volume_ids: vec![],
        network_ids: vec![],
        nic_macs: vec![],
    };
    assert_eq!(
        small.register(&req).await.unwrap_err().kind,
        ErrorKind::Capacity
    );
    gpu.register(&req).await.unwrap();
    fast.min_frequency_ghz = Some(3.4);
    small.can_allocate(&fast).await.unwrap();
    // A nonsensical frequency is a bad request, not a capacity refusal.
    fast.min_frequency_ghz = Some(-1.0);
    assert_eq!(
        small.can_allocate(&fast).await.unwrap_err().kind,
        ErrorKind::Invalid
    );
}

#[tokio::test]
async fn overprovisioned_vms_take_a_share_of_a_core() {
    let sim = sim(Duration::from_millis(50)).await;
    let small = client(&sim, "small");
    // 4 cores: eight 2-vCPU VMs at overprovision 4 take half a core each.
    for i in 0..8 {
        let mut req = register(&format!("shared-{i}"), 2, 512);
        req.spec.overprovision = 4;
        req.spec.flags.clear();
        small.register(&req).await.unwrap();
    }
    let mut one_more = spec(1, 512);
    one_more.overprovision = 4;
    let err = small.can_allocate(&one_more).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
    assert!(err.message.contains("cores"), "{err}");
    let inv = sim.host("small").unwrap().inventory();
    let used: f64 = inv
        .vms
        .iter()
        .map(|vm| f64::from(vm.slots) / f64::from(vm.overprovision))
        .sum();
    assert_eq!(used, 4.0);
    // Freeing one VM frees half a core: one vCPU at overprovision 2 fits.
    let victim = small.vm_by_name("shared-0").await.unwrap().unwrap();
    small.unregister(&victim.id).await.unwrap();
    let mut half = spec(1, 512);
    half.overprovision = 2;
    small.can_allocate(&half).await.unwrap();
    half.overprovision = 1;
    assert_eq!(
        small.can_allocate(&half).await.unwrap_err().kind,
        ErrorKind::Capacity
    );
}

#[tokio::test]
async fn register_refuses_when_the_host_filled_up_after_canallocate() {
    let sim = sim(Duration::from_millis(50)).await;
    let small = client(&sim, "small");
    let other = client(&sim, "small");
    // Both callers get a quote for 3 of the 4 cores...
    small.can_allocate(&spec(3, 1024)).await.unwrap();
    other.can_allocate(&spec(3, 1024)).await.unwrap();
    // ...the first to register wins, the second is refused as capacity.
    small.register(&register("first", 3, 1024)).await.unwrap();
    let err = other
        .register(&register("second", 3, 1024))
        .await
        .unwrap_err();
    assert_eq!((err.kind, err.status), (ErrorKind::Capacity, Some(507)));
    assert!(err.message.contains("VmNotAllocable"), "{err}");

    // The same when capacity runs out by a fault in between.
    small.can_allocate(&spec(1, 512)).await.unwrap();
    sim.host("small").unwrap().faults().fill_host(true);
    let err = small.register(&register("late", 1, 512)).await.unwrap_err();
    assert_eq!((err.kind, err.status), (ErrorKind::Capacity, Some(507)));
    let names: Vec<String> = small
        .vms()
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(names, ["first"], "refused registers leave nothing behind");
}

#[tokio::test]
async fn concurrent_registers_never_overcommit() {
    let sim = sim(Duration::from_millis(50)).await;
    let small = client(&sim, "small");
    // Ten callers race for four cores, one core each.
    let tasks: Vec<_> = (0..10)
        .map(|i| {
            let c = small.clone();
            tokio::spawn(async move { c.register(&register(&format!("race-{i}"), 1, 512)).await })
        })
        .collect();
    let mut won = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(()) => won += 1,
            Err(e) => assert_eq!(e.kind, ErrorKind::Capacity, "{e}"),
        }
    }
    assert_eq!(won, 4);
    assert_eq!(sim.host("small").unwrap().inventory().vms.len(), 4);
}
