//! The control endpoint over HTTP: inventory, every fault kind set and cleared at runtime, the seed, bad requests.

use crate::common::{client, client_with, control, opts, register, sim, wait_running};
use atomos_driver::{ClientOptions, ErrorKind, NetworkCreate, VmState};
use reqwest::Method;
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test]
async fn inventory_lists_every_host_with_its_vms_volumes_and_networks() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = client(&sim, "small");
    let net = c
        .network_create(&NetworkCreate {
            name: "lan".into(),
            cidr: "192.168.7.1/24".into(),
            dhcp_start: Some("192.168.7.10".into()),
            dhcp_end: Some("192.168.7.20".into()),
        })
        .await
        .unwrap();
    let ci = c
        .cloudinit_create("vm-1-cloudinit", "#cloud-config\n", "instance-id: i\n")
        .await
        .unwrap();
    c.register(&atomos_driver::Register {
        volume_ids: vec![ci.clone()],
        network_ids: vec![net.id.clone()],
        nic_macs: vec![],
        ..register("vm-1", 1, 512)
    })
    .await
    .unwrap();
    wait_running(&c, "vm-1").await;

    let (status, body) = control(&sim, Method::GET, "/inventory", None).await;
    assert_eq!(status, 200, "{body}");
    let hosts = body["hosts"].as_array().unwrap();
    let names: Vec<&str> = hosts.iter().map(|h| h["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["small", "gpu"]);
    let small = &hosts[0];
    assert_eq!(small["provider"], "ionos");
    assert_eq!(small["continent"], "europe");
    assert_eq!(small["down"], false);
    assert_eq!(
        small["target"]["ports"]["compute"],
        sim.host("small").unwrap().target().ports.compute
    );
    assert_eq!(small["vms"][0]["name"], "vm-1");
    assert_eq!(small["vms"][0]["state"], "running");
    assert_eq!(small["vms"][0]["ipv4"], "192.168.7.10");
    assert_eq!(small["vms"][0]["network_ids"][0], net.id.as_str());
    assert_eq!(small["volumes"][0]["id"], ci.as_str());
    assert_eq!(small["volumes"][0]["files"][0]["name"], "user-data");
    assert_eq!(small["networks"][0]["name"], "lan");
    assert_eq!(hosts[1]["vms"], json!([]));
    // The typed view parses the same answer.
    let typed: Vec<atomos_sim::HostInventory> =
        serde_json::from_value(body["hosts"].clone()).unwrap();
    assert_eq!(typed, sim.inventory());

    let (status, one) = control(&sim, Method::GET, "/inventory/gpu", None).await;
    assert_eq!((status, one["name"].as_str()), (200, Some("gpu")));
    let (status, missing) = control(&sim, Method::GET, "/inventory/nope", None).await;
    assert_eq!(status, 404);
    assert!(missing["detail"].as_str().unwrap().contains("nope"));
}

#[tokio::test]
async fn faults_are_set_and_cleared_over_http() {
    let sim = sim(Duration::from_millis(20)).await;
    let quick = ClientOptions {
        timeout: Duration::from_millis(300),
        retries: 0,
        concurrency: 4,
    };
    let c = client_with(&sim, "small", quick);
    c.register(&register("victim", 1, 512)).await.unwrap();
    wait_running(&c, "victim").await;

    let (status, body) = control(
        &sim,
        Method::POST,
        "/faults/small",
        Some(json!({
            "fail_next": [{"route": "vm/register", "status": 502, "count": 2}],
            "hang": [{"route": "network/list"}],
            "error_rates": [{"route": "volume/accessible", "rate": 1.0, "status": 500}],
            "latency_ms": 50,
            "full": true,
            "crash_vm": "victim"
        })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["host"], "small");
    let f = &body["faults"];
    assert_eq!(
        f["fail_next"][0],
        json!({"route": "vm/register", "status": 502, "count": 2})
    );
    assert_eq!(f["hang"][0], json!({"route": "network/list", "count": 1}));
    assert_eq!(f["error_rates"][0]["rate"], 1.0);
    assert_eq!(
        (f["latency_ms"].as_u64(), f["full"].as_bool()),
        (Some(50), Some(true))
    );

    let started = Instant::now();
    let err = c.register(&register("x", 1, 512)).await.unwrap_err();
    assert!(
        started.elapsed() >= Duration::from_millis(50),
        "latency applies"
    );
    assert_eq!((err.kind, err.status), (ErrorKind::Transient, Some(502)));
    assert!(c.networks().await.unwrap_err().is_transient(), "hung");
    assert_eq!(c.volumes().await.unwrap_err().status, Some(500));
    assert!(
        c.can_allocate(&crate::common::spec(1, 1))
            .await
            .unwrap_err()
            .is_capacity()
    );
    assert_eq!(
        c.vm_by_name("victim").await.unwrap().unwrap().state,
        VmState::Off
    );
    // Other hosts are untouched.
    client(&sim, "gpu").volumes().await.unwrap();

    let (status, got) = control(&sim, Method::GET, "/faults/small", None).await;
    assert_eq!(status, 200);
    assert_eq!(got["faults"]["fail_next"][0]["count"], 1, "one consumed");

    let (status, cleared) = control(&sim, Method::DELETE, "/faults/small", None).await;
    assert_eq!(status, 200, "{cleared}");
    assert_eq!(cleared["faults"]["fail_next"], json!(null));
    assert_eq!(cleared["faults"]["full"], false);
    c.volumes().await.unwrap();
    c.networks().await.unwrap();
    c.can_allocate(&crate::common::spec(1, 1)).await.unwrap();
    assert_eq!(
        c.vm_by_name("victim").await.unwrap().unwrap().state,
        VmState::Off,
        "a crashed VM stays off until started"
    );

    // lose_vm by id.
    let victim = c.vm_by_name("victim").await.unwrap().unwrap();
    let (status, _) = control(
        &sim,
        Method::POST,
        "/faults/small",
        Some(json!({"lose_vm": [victim.id]})),
    )
    .await;
    assert_eq!(status, 200);
    assert!(c.vm_by_name("victim").await.unwrap().is_none());
}

#[tokio::test]
async fn a_host_goes_down_and_up_over_http() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = client_with(
        &sim,
        "small",
        ClientOptions {
            retries: 0,
            ..opts()
        },
    );
    c.vms().await.unwrap();
    let (status, body) = control(
        &sim,
        Method::POST,
        "/faults/small",
        Some(json!({"down": true})),
    )
    .await;
    assert_eq!(
        (status, body["faults"]["down"].as_bool()),
        (200, Some(true))
    );
    let err = c.vms().await.unwrap_err();
    assert_eq!((err.kind, err.status), (ErrorKind::Transient, None));
    let (_, inv) = control(&sim, Method::GET, "/inventory/small", None).await;
    assert_eq!(inv["down"], true);

    let (status, body) = control(
        &sim,
        Method::POST,
        "/faults/small",
        Some(json!({"up": true})),
    )
    .await;
    assert_eq!(
        (status, body["faults"]["down"].as_bool()),
        (200, Some(false))
    );
    c.vms().await.unwrap();

    // DELETE brings a down host up too.
    control(
        &sim,
        Method::POST,
        "/faults/small",
        Some(json!({"down": true})),
    )
    .await;
    assert!(c.vms().await.is_err());
    let (status, _) = control(&sim, Method::DELETE, "/faults/small", None).await;
    assert_eq!(status, 200);
    c.vms().await.unwrap();
}

#[tokio::test]
async fn the_seed_is_set_over_http() {
    let sim = sim(Duration::from_millis(20)).await;
    let (status, body) = control(&sim, Method::POST, "/seed", Some(json!({"seed": 1234}))).await;
    assert_eq!((status, body), (200, json!({"seed": 1234})));
    assert_eq!(sim.seed(), 1234);
    for h in sim.hosts() {
        assert_eq!(h.faults().seed(), 1234);
    }
    let (_, body) = control(&sim, Method::GET, "/seed", None).await;
    assert_eq!(body["seed"], 1234);
    let (_, inv) = control(&sim, Method::GET, "/inventory", None).await;
    assert_eq!(inv["seed"], 1234);
    // A host's own seed.
    let (_, f) = control(&sim, Method::POST, "/faults/gpu", Some(json!({"seed": 5}))).await;
    assert_eq!(f["faults"]["seed"], 5);
}

#[tokio::test]
async fn bad_control_requests_get_a_detail() {
    let sim = sim(Duration::from_millis(20)).await;
    let http = reqwest::Client::new();
    for (method, path, body, want) in [
        (Method::POST, "/faults/small", "", 400),
        (Method::POST, "/faults/small", "{", 400),
        (Method::POST, "/faults/small", "[]", 400),
        (Method::POST, "/faults/small", r#"{"latncy_ms": 5}"#, 400),
        (
            Method::POST,
            "/faults/small",
            r#"{"error_rates": [{"route": "x", "rate": 2}]}"#,
            400,
        ),
        (
            Method::POST,
            "/faults/small",
            r#"{"error_rates": [{"route": "x"}]}"#,
            400,
        ),
        (
            Method::POST,
            "/faults/small",
            r#"{"fail_next": [{"route": "x", "status": 99}]}"#,
            400,
        ),
        (Method::POST, "/faults/small", r#"{"latency_ms": -1}"#, 400),
        (
            Method::POST,
            "/faults/small",
            r#"{"down": true, "up": true}"#,
            400,
        ),
        (
            Method::POST,
            "/faults/small",
            r#"{"crash_vm": "ghost"}"#,
            404,
        ),
        (Method::POST, "/faults/nope", "{}", 404),
        (Method::DELETE, "/faults/nope", "", 404),
        (Method::POST, "/seed", r#"{"seed": "x"}"#, 400),
        (Method::POST, "/seed", r#"{"seed": -1}"#, 400),
        (Method::GET, "/nowhere", "", 404),
        (Method::PUT, "/faults/small", "{}", 405),
    ] {
        let resp = http
            .request(method.clone(), format!("{}{path}", sim.control_url()))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), want, "{method} {path} {body}");
        let detail: serde_json::Value = resp.json().await.unwrap();
        assert!(
            detail["detail"].is_string(),
            "{method} {path} {body}: {detail}"
        );
    }
    // Nothing was applied by the refused bodies.
    let (_, f) = control(&sim, Method::GET, "/faults/small", None).await;
    assert_eq!(
        f["faults"],
        json!({"latency_ms": 0, "down": false, "full": false, "seed": 0})
    );
    let (status, index) = control(&sim, Method::GET, "/", None).await;
    assert_eq!(status, 200);
    assert!(index["routes"].as_array().unwrap().len() >= 5);
}

#[tokio::test]
async fn no_web_page_reaches_the_fleet() {
    // On loopback, as in dev mode: a page of any site could otherwise read
    // the inventory (cloud-init with cluster keys) through a rebound name,
    // or make disks and faults with "simple" requests.
    let sim = sim(Duration::from_millis(20)).await;
    let http = reqwest::Client::new();
    let base = sim.control_url();
    let port = base.rsplit(':').next().unwrap().to_owned();
    let r = http
        .get(format!("{base}/inventory"))
        .header("host", format!("evil.test:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 421);
    let r = http
        .post(format!("{base}/faults/small"))
        .header("origin", "http://evil.test")
        .header("content-type", "text/plain")
        .body(r#"{"down":true}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let t = sim
        .targets()
        .into_iter()
        .find(|t| t.name == "small")
        .unwrap();
    let storage = format!("http://{}:{}", t.host, t.ports.storage);
    let r = http
        .post(format!("{storage}/api/v1.0/client/volume/create"))
        .header("sec-fetch-site", "cross-site")
        .header("content-type", "text/plain")
        .body(r#"{"name":"pwned","size":1}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = http
        .get(format!("{storage}/"))
        .header("host", format!("evil.test:{}", t.ports.storage))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 421);
    // Nothing changed; the driver (no Origin, its own Host) still works.
    let (status, body) = control(&sim, Method::GET, "/inventory", None).await;
    assert_eq!(status, 200, "{body}");
    for h in body["hosts"].as_array().unwrap() {
        assert_eq!(h["volumes"], json!([]), "{h}");
        assert_eq!(h["down"], json!(false), "{h}");
    }
    client(&sim, "small").auth_status().await.unwrap();
}

#[tokio::test]
async fn guest_ports_are_served_over_http() {
    use crate::forwards::{
        closed_at_once, echo_through, forward, free_tcp_port, running_vm, tcp_echo,
    };
    let sim = sim(Duration::from_millis(20)).await;
    let c = client(&sim, "small");
    let vm = running_vm(&c, "web").await;
    let port = free_tcp_port();
    c.port_forward_create(&forward("ssh", "tcp", port, (&vm, "web"), 22))
        .await
        .unwrap();
    closed_at_once(port, "nothing served yet").await;

    let echo = tcp_echo().await.to_string();
    let (status, body) = control(
        &sim,
        Method::POST,
        "/inventory/small/vms/web/ports",
        Some(json!({"port": 22, "upstream": echo})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"host": "small", "vm": "web", "port": 22, "upstream": echo})
    );
    assert_eq!(echo_through(port, b"hello").await, b"hello");
    let (_, inv) = control(&sim, Method::GET, "/inventory/small", None).await;
    assert_eq!(inv["port_forwards"][0]["id"], "ssh");
    assert_eq!(inv["port_forwards"][0]["port"], port);
    assert_eq!(inv["port_forwards"][0]["vm_id"], vm.as_str());

    // By the VM's id too.
    let path = format!("/inventory/small/vms/{vm}/ports/22");
    let (status, body) = control(&sim, Method::DELETE, &path, None).await;
    assert_eq!(status, 200, "{body}");
    closed_at_once(port, "no longer served").await;

    let upstream = json!({"port": 22, "upstream": "127.0.0.1:9"});
    for (method, path, body, want) in [
        (Method::DELETE, path.as_str(), None, 404),
        (
            Method::POST,
            "/inventory/small/vms/ghost/ports",
            Some(upstream.clone()),
            404,
        ),
        (
            Method::POST,
            "/inventory/nope/vms/web/ports",
            Some(upstream.clone()),
            404,
        ),
        (
            Method::POST,
            "/inventory/small/vms/web/ports",
            Some(json!({"port": 0, "upstream": "127.0.0.1:9"})),
            400,
        ),
        (
            Method::POST,
            "/inventory/small/vms/web/ports",
            Some(json!({"port": 22, "upstream": "nowhere"})),
            400,
        ),
        (
            Method::POST,
            "/inventory/small/vms/web/ports",
            Some(json!({"port": 22, "upstream": "127.0.0.1:9", "extra": 1})),
            400,
        ),
        (
            Method::DELETE,
            "/inventory/small/vms/web/ports/x",
            None,
            400,
        ),
    ] {
        let (status, answer) = control(&sim, method.clone(), path, body.clone()).await;
        assert_eq!(status, want, "{method} {path} {body:?}: {answer}");
        assert!(answer["detail"].is_string(), "{method} {path}: {answer}");
    }
}
