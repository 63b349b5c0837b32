//! VM power life: stop is libvirt's "shut off", start boots over the boot time, reboot is a shorter boot, crashes.

use crate::common::{client, register, sim, wait_running};
use atomos_driver::{ErrorKind, VmState};
use std::time::Duration;

/// `status` and `req_json.states` of `name` in the raw `/status` answer.
async fn raw_states(sim: &atomos_sim::Simulator, name: &str) -> (String, String) {
    let t = sim.host("small").unwrap().target().clone();
    let rows: serde_json::Value = reqwest::get(format!(
        "http://{}:{}/api/v1.0/client/vm/status",
        t.host, t.ports.compute
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["req_json"]["vm_name"] == name)
        .unwrap();
    (
        row["status"].as_str().unwrap().to_owned(),
        row["req_json"]["states"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn stop_start_and_a_short_reboot() {
    let sim = sim(Duration::from_millis(20)).await;
    let host = sim.host("small").unwrap();
    let c = client(&sim, "small");
    c.register(&register("vm", 1, 512)).await.unwrap();
    let vm = wait_running(&c, "vm").await;
    assert_eq!(
        raw_states(&sim, "vm").await,
        ("running".into(), "running".into())
    );

    // A full boot now takes 20 s, a reboot a quarter of it. The host's clock
    // is moved rather than waited for; the second of slack on each side
    // covers the real time the requests take.
    host.set_boot_time(Duration::from_secs(20));
    c.reboot(&vm.id).await.unwrap();
    let during = c.vm_by_name("vm").await.unwrap().unwrap();
    assert_eq!((during.state, during.ipv4), (VmState::Starting, None));
    host.advance_clock(Duration::from_secs(4));
    let now = c.vm_by_name("vm").await.unwrap().unwrap();
    assert_eq!(now.state, VmState::Starting, "4 s into a 5 s reboot");
    host.advance_clock(Duration::from_secs(1));
    let now = c.vm_by_name("vm").await.unwrap().unwrap();
    assert_eq!(now.state, VmState::Running, "a reboot is a quarter boot");

    c.stop(&vm.id).await.unwrap();
    let off = c.vm_by_name("vm").await.unwrap().unwrap();
    assert_eq!((off.state, off.ipv4), (VmState::Off, None));
    assert_eq!(
        raw_states(&sim, "vm").await,
        ("off".into(), "shut off".into())
    );
    c.stop(&vm.id).await.unwrap();
    // Start boots over the full boot time: still starting after a reboot's worth.
    c.start(&vm.id).await.unwrap();
    host.advance_clock(Duration::from_secs(6));
    let booting = c.vm_by_name("vm").await.unwrap().unwrap();
    assert_eq!(booting.state, VmState::Starting);
    assert_eq!(
        raw_states(&sim, "vm").await,
        ("starting".into(), "running".into()),
        "libvirt calls a booting domain running"
    );
    host.advance_clock(Duration::from_secs(14));
    let up = c.vm_by_name("vm").await.unwrap().unwrap();
    assert_eq!((up.state, up.ipv4), (VmState::Running, vm.ipv4));
}

#[tokio::test]
async fn crashed_vms_are_off_until_started_and_gone_once_unregistered() {
    let sim = sim(Duration::from_millis(20)).await;
    let host = sim.host("small").unwrap();
    let c = client(&sim, "small");
    c.register(&register("fragile", 2, 1024)).await.unwrap();
    let vm = wait_running(&c, "fragile").await;

    assert!(host.faults().crash_vm("fragile"));
    assert!(!host.faults().crash_vm("no-such-vm"));
    let crashed = c.vm_by_name("fragile").await.unwrap().unwrap();
    assert_eq!((crashed.state, crashed.ipv4), (VmState::Off, None));
    let inv = host.inventory();
    assert!(inv.vms[0].crashed);
    // A crashed VM still holds its resources: 2 of 4 cores.
    let err = c.register(&register("big", 3, 512)).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);

    c.start(&vm.id).await.unwrap();
    assert_eq!(wait_running(&c, "fragile").await.ipv4, vm.ipv4);
    assert!(!host.inventory().vms[0].crashed);

    // Crashed and unregistered: every call about it is NotFound.
    assert!(host.faults().crash_vm(&vm.id), "ids work too");
    c.unregister(&vm.id).await.unwrap();
    for err in [
        c.start(&vm.id).await.unwrap_err(),
        c.stop(&vm.id).await.unwrap_err(),
        c.reboot(&vm.id).await.unwrap_err(),
        c.unregister(&vm.id).await.unwrap_err(),
    ] {
        assert_eq!((err.kind, err.status), (ErrorKind::NotFound, Some(404)));
    }
    assert!(c.vm_by_name("fragile").await.unwrap().is_none());
}
