//! Injected faults as the driver sees them: error classes, retries, timeouts, hosts down, seeded error rates.

use crate::common::{client, client_with, opts, sim, spec};
use atomos_driver::{ClientOptions, ErrorKind, Register};
use std::time::{Duration, Instant};

fn register(name: &str) -> Register {
    Register {
        vm_name: name.into(),
        spec: spec(1, 512),
        volume_ids: vec![],
        network_ids: vec![],
        nic_macs: vec![],
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

/// Every fault kind, as the class of error a workflow acts on.
#[tokio::test]
async fn every_fault_kind_has_its_error_class() {
    let sim = sim(Duration::from_millis(20)).await;
    let host = sim.host("small").unwrap();
    let faults = host.faults();
    let c = client_with(
        &sim,
        "small",
        ClientOptions {
            timeout: Duration::from_millis(300),
            retries: 0,
            concurrency: 4,
        },
    );
    // Injected statuses.
    for (status, kind) in [
        (500, ErrorKind::Transient),
        (502, ErrorKind::Transient),
        (503, ErrorKind::Transient),
        (504, ErrorKind::Transient),
        (429, ErrorKind::Transient),
        (507, ErrorKind::Capacity),
        (404, ErrorKind::NotFound),
        (401, ErrorKind::Auth),
        (403, ErrorKind::Auth),
        (409, ErrorKind::AlreadyExists),
        (400, ErrorKind::Invalid),
    ] {
        faults.fail_next("vm/register", status, 1);
        let err = c.register(&register("k")).await.unwrap_err();
        assert_eq!((err.kind, err.status), (kind, Some(status)), "{err}");
        assert!(err.message.contains("injected fault"), "{err}");
    }
    // A hung call and latency beyond the timeout: no answer, transient.
    faults.hang("vm/status", 1);
    let err = c.vms().await.unwrap_err();
    assert_eq!((err.kind, err.status), (ErrorKind::Transient, None));
    faults.set_latency(Duration::from_millis(400));
    assert!(c.vms().await.unwrap_err().is_transient());
    faults.set_latency(Duration::ZERO);
    // An error rate of 1 on every route.
    faults.set_error_rate("*", 1.0);
    let err = c.volumes().await.unwrap_err();
    assert_eq!((err.kind, err.status), (ErrorKind::Transient, Some(503)));
    faults.set_error_rate("*", 0.0);
    // A full host: capacity everywhere something is allocated.
    faults.fill_host(true);
    assert!(
        c.can_allocate(&spec(1, 512))
            .await
            .unwrap_err()
            .is_capacity()
    );
    assert!(c.register(&register("k")).await.unwrap_err().is_capacity());
    assert!(c.volume_can_create(1).await.unwrap_err().is_capacity());
    assert!(
        c.cloudinit_create("ci", "#cloud-config\n", "instance-id: x\n")
            .await
            .unwrap_err()
            .is_capacity()
    );
    faults.fill_host(false);
    // A host that is down: connection refused, transient.
    host.take_down().await;
    let err = c.vms().await.unwrap_err();
    assert_eq!((err.kind, err.status), (ErrorKind::Transient, None));
    host.bring_up().await.unwrap();
    // A VM the host lost, or that crashed and was unregistered: not found.
    c.register(&register("gone")).await.unwrap();
    let gone = c.vm_by_name("gone").await.unwrap().unwrap();
    assert!(faults.lose_vm("gone"));
    assert!(c.start(&gone.id).await.unwrap_err().is_not_found());
    assert!(c.unregister(&gone.id).await.unwrap_err().is_not_found());
    assert!(host.inventory().is_empty());
}

#[tokio::test]
async fn a_host_goes_down_and_comes_back_on_the_same_ports() {
    let sim = sim(Duration::from_millis(20)).await;
    let host = sim.host("small").unwrap();
    let target = host.target().clone();
    let c = client_with(
        &sim,
        "small",
        ClientOptions {
            retries: 0,
            ..opts()
        },
    );
    c.register(&register("survivor")).await.unwrap();
    // The client now holds pooled keep-alive connections.
    c.vms().await.unwrap();
    c.volumes().await.unwrap();

    host.take_down().await;
    assert!(host.faults().is_down() && !host.is_listening());
    for port in [
        target.ports.compute,
        target.ports.storage,
        target.ports.network,
        target.ports.auth,
    ] {
        let refused = tokio::net::TcpStream::connect((target.host.as_str(), port)).await;
        assert_eq!(
            refused.unwrap_err().kind(),
            std::io::ErrorKind::ConnectionRefused,
            "port {port}"
        );
    }
    // Pooled connections died with the host; every daemon fails alike.
    assert!(c.vms().await.unwrap_err().is_transient());
    assert!(c.volumes().await.unwrap_err().is_transient());
    assert!(c.networks().await.unwrap_err().is_transient());
    assert!(c.auth_status().await.unwrap_err().is_transient());
    assert!(
        c.register(&register("nope"))
            .await
            .unwrap_err()
            .is_transient()
    );
    // Another host is unaffected.
    client(&sim, "gpu").vms().await.unwrap();
    // With retries, a read fails only after trying a few times.
    let patient = client(&sim, "small");
    let started = Instant::now();
    assert!(patient.vms().await.unwrap_err().is_transient());
    assert!(started.elapsed() >= Duration::from_millis(150));

    host.bring_up().await.unwrap();
    assert!(host.is_listening());
    assert_eq!(host.target().ports, target.ports);
    // The same client, the same ports: the VM ran on meanwhile.
    let vm = c.vm_by_name("survivor").await.unwrap().unwrap();
    assert_eq!(vm.state, atomos_driver::VmState::Running);
    // Down and up again, through clear().
    host.take_down().await;
    host.faults().clear();
    crate::common::eventually("the host to listen after clear()", || async {
        host.is_listening()
    })
    .await;
    c.vms().await.unwrap();
}

#[tokio::test]
async fn going_down_breaks_calls_in_flight() {
    let sim = sim(Duration::from_millis(20)).await;
    let host = sim.host("small").unwrap();
    let c = client_with(
        &sim,
        "small",
        ClientOptions {
            timeout: Duration::from_secs(10),
            retries: 0,
            concurrency: 2,
        },
    );
    host.faults().hang("vm/status", 1);
    let started = Instant::now();
    let call = tokio::spawn(async move { c.vms().await });
    // Give the request time to reach the hung handler; if it has not, it
    // is refused instead, which this test accepts as well.
    tokio::time::sleep(Duration::from_millis(100)).await;
    host.take_down().await;
    let err = call.await.unwrap().unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the hung call ended with the host, not at its timeout"
    );
    host.bring_up().await.unwrap();
}

/// Outcome (served or not) of `n` sequential `/status` reads.
async fn outcomes(c: &atomos_driver::AtomosClient, n: usize) -> Vec<bool> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(c.vms().await.is_ok());
    }
    out
}

#[tokio::test]
async fn error_rates_are_reproducible_with_a_seed() {
    let no_retry = ClientOptions {
        retries: 0,
        ..opts()
    };
    let mut runs = Vec::new();
    for seed in [42, 42, 7] {
        // A fresh fleet each time, as a rerun of a benchmark would have.
        let sim = sim(Duration::from_millis(20)).await;
        sim.set_seed(seed);
        assert_eq!(sim.seed(), seed);
        sim.host("small")
            .unwrap()
            .faults()
            .set_error_rate("vm/status", 0.5);
        let c = client_with(&sim, "small", no_retry.clone());
        runs.push(outcomes(&c, 40).await);
        // Re-seeding restarts the same sequence on the same fleet.
        sim.set_seed(seed);
        assert_eq!(outcomes(&c, 40).await, runs[runs.len() - 1]);
        sim.shutdown().await;
    }
    assert_eq!(runs[0], runs[1], "same seed, same failures");
    assert_ne!(runs[0], runs[2], "another seed, other failures");
    let served = runs[0].iter().filter(|ok| **ok).count();
    assert!(
        (8..=32).contains(&served),
        "{served} of 40 served at rate 0.5"
    );
}

#[tokio::test]
async fn faults_from_configuration_are_in_force_at_start() {
    use atomos_sim::{ErrorRate, FaultSpec, HostConfig, SimConfig, dev_hosts};
    let hosts = vec![
        HostConfig {
            name: "dead".into(),
            faults: FaultSpec {
                down: Some(true),
                ..FaultSpec::default()
            },
            ..dev_hosts()[0].clone()
        },
        HostConfig {
            name: "flaky".into(),
            faults: FaultSpec {
                error_rates: vec![ErrorRate {
                    route: "*".into(),
                    rate: 1.0,
                    status: 502,
                }],
                full: Some(true),
                ..FaultSpec::default()
            },
            ..dev_hosts()[1].clone()
        },
    ];
    let config = |hosts: Vec<HostConfig>| SimConfig {
        hosts,
        boot_time: Duration::from_millis(20),
        bind: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        state: None,
    };
    let sim = atomos_sim::start(config(hosts.clone())).await.unwrap();
    let no_retry = ClientOptions {
        retries: 0,
        ..opts()
    };
    let dead = client_with(&sim, "dead", no_retry.clone());
    let err = dead.vms().await.unwrap_err();
    assert_eq!((err.kind, err.status), (ErrorKind::Transient, None));
    sim.host("dead").unwrap().bring_up().await.unwrap();
    dead.vms().await.unwrap();
    let flaky = client_with(&sim, "flaky", no_retry);
    assert_eq!(flaky.vms().await.unwrap_err().status, Some(502));
    sim.host("flaky").unwrap().faults().set_error_rate("*", 0.0);
    assert!(
        flaky
            .can_allocate(&spec(1, 1))
            .await
            .unwrap_err()
            .is_capacity()
    );

    // Configurations that cannot work are refused before anything listens.
    for bad in [
        HostConfig {
            faults: FaultSpec {
                crash_vm: vec!["x".into()],
                ..FaultSpec::default()
            },
            ..hosts[0].clone()
        },
        HostConfig {
            faults: FaultSpec {
                latency_ms: Some(u64::MAX),
                ..FaultSpec::default()
            },
            ..hosts[0].clone()
        },
        HostConfig {
            max_frequency_ghz: f64::NAN,
            ..hosts[1].clone()
        },
    ] {
        let err = atomos_sim::start(config(vec![bad])).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
    }
}
