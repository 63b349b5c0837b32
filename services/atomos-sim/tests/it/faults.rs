//! Injected faults as the driver sees them: retries, timeouts, lost VMs, latency.

use crate::common::{client, client_with, opts, sim, spec};
use atomos_driver::{ClientOptions, ErrorKind, Register};
use std::time::{Duration, Instant};

fn register(name: &str) -> Register {
    Register {
        vm_name: name.into(),
        spec: spec(1, 512),
        volume_ids: vec![],
        network_ids: vec![],
    }
}

#[tokio::test]
async fn failed_reads_are_retried() {
    let sim = sim(Duration::from_millis(50)).await;
    let host = sim.host("small").unwrap();
    let faults = host.faults();
    let no_retry = client_with(
        &sim,
        "small",
        ClientOptions {
            retries: 0,
            ..opts()
        },
    );
    faults.fail_next("vm/status", 503, 1);
    let err = no_retry.vms().await.unwrap_err();
    assert_eq!((err.kind, err.status), (ErrorKind::Transient, Some(503)));
    assert_eq!(err.route, "vm/status");

    // Two failures, three retries: the third attempt answers.
    faults.fail_next("vm/status", 503, 2);
    assert!(client(&sim, "small").vms().await.unwrap().is_empty());
    faults.fail_next("volume/info", 500, 1);
    faults.fail_next("volume/accessible", 502, 1);
    assert!(client(&sim, "small").volumes().await.unwrap().is_empty());
    // More failures than attempts: the last error comes back.
    faults.fail_next("network/list", 503, 10);
    assert!(
        client(&sim, "small")
            .networks()
            .await
            .unwrap_err()
            .is_transient()
    );
}

#[tokio::test]
async fn mutations_are_not_retried() {
    let sim = sim(Duration::from_millis(50)).await;
    let host = sim.host("small").unwrap();
    let c = client(&sim, "small");
    host.faults().fail_next("vm/register", 503, 1);
    let err = c.register(&register("once")).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(
        host.inventory().vms.is_empty(),
        "the failed register was not repeated"
    );
    c.register(&register("once")).await.unwrap();
    assert_eq!(host.inventory().vms.len(), 1);
    // A capacity status injected on a create maps to Capacity.
    host.faults().fail_next("volume/create", 507, 1);
    let err = c
        .volume_create(&atomos_driver::VolumeCreate {
            name: "v".into(),
            size_gb: 1,
            bootable: false,
            readonly: false,
            shareable: false,
            private: false,
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
}

#[tokio::test]
async fn hung_requests_time_out_as_transient() {
    let sim = sim(Duration::from_millis(50)).await;
    let host = sim.host("small").unwrap();
    let faults = host.faults();
    let quick = ClientOptions {
        timeout: Duration::from_millis(200),
        retries: 0,
        concurrency: 2,
    };
    let c = client_with(&sim, "small", quick.clone());
    faults.hang("vm/status", 1);
    let started = Instant::now();
    let err = c.vms().await.unwrap_err();
    assert_eq!((err.kind, err.status), (ErrorKind::Transient, None));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    c.vms().await.unwrap();
    // With retries, a single hang costs one timeout and then succeeds.
    faults.hang("vm/status", 1);
    client_with(
        &sim,
        "small",
        ClientOptions {
            retries: 1,
            ..quick
        },
    )
    .vms()
    .await
    .unwrap();
}

#[tokio::test]
async fn lost_vms_vanish_and_latency_slows_calls() {
    let sim = sim(Duration::from_millis(50)).await;
    let host = sim.host("small").unwrap();
    let c = client(&sim, "small");
    c.register(&register("ghost")).await.unwrap();
    assert!(host.faults().lose_vm("ghost"));
    assert!(c.vm_by_name("ghost").await.unwrap().is_none());
    assert!(!host.faults().lose_vm("ghost"));

    host.faults().set_latency(Duration::from_millis(100));
    let started = Instant::now();
    c.vms().await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(100));
    host.faults().clear();
}
