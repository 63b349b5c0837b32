//! Port forwards over the REST API: a public port of a VM's host carries a
//! real TCP round trip to the VM's port (the simulator relays on loopback
//! to a test server standing in for it), the port is held against every
//! other forward, bad requests are named, and a forward goes with its VM.

use crate::harness::Meson;
use crate::networks::{create_network, create_vm, delete_and_wait, vm_action, vm_on};
use crate::reconciler::workflow_env;
use meson_workflows::auto_repair::RepairConfig;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server answering each line it reads with `tag` and the line: the
/// VM's service, standing in for its port.
async fn echo(tag: &'static str) -> std::net::SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    let mut out = tag.as_bytes().to_vec();
                    out.extend_from_slice(&buf[..n]);
                    if s.write_all(&out).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    at
}

/// Sends `line` to `127.0.0.1:port` and reads the answer; `None` when the
/// connection is refused or closed without one.
async fn round_trip(port: u16, line: &str) -> Option<String> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    s.write_all(line.as_bytes()).await.ok()?;
    let mut buf = vec![0u8; 1024];
    let n = tokio::time::timeout(std::time::Duration::from_secs(10), s.read(&mut buf))
        .await
        .expect("an answer or a close, not silence")
        .ok()?;
    (n > 0).then(|| String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Makes the test server at `upstream` stand in for port `port` of VM `vm`.
fn serve(m: &Meson, vm: &Value, port: u16, upstream: std::net::SocketAddr) {
    let host = vm["host"].as_str().unwrap();
    let id = vm["id"].as_str().unwrap();
    m.sim()
        .hosts()
        .iter()
        .find(|h| h.name() == host)
        .expect("the VM's host")
        .serve_guest_port(&crate::harness::vm_atomos_name(id), port, upstream)
        .unwrap();
}

/// The AtomOS target (host) of this name.
async fn target_named(m: &Meson, name: &str) -> meson_core::target::Target {
    meson_db::targets::list(m.database())
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.name == name)
        .expect("a target of this name")
}

/// Creates a forward and waits for its action; answers the forward as read
/// after, and the action.
async fn forward(m: &Meson, net: &str, body: Value) -> (Value, Value) {
    let r = m
        .post(&format!("/v1/networks/{net}/port-forwards"), &body)
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["port_forward"]["status"], "creating");
    assert_eq!(r.body["action"]["command"], "create_port_forward");
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    let id = r.body["port_forward"]["id"].as_str().unwrap();
    let f = m
        .get(&format!("/v1/networks/{net}/port-forwards/{id}"))
        .await;
    assert_eq!(f.status, StatusCode::OK, "{}", f.body);
    (f.body["port_forward"].clone(), done)
}

#[tokio::test]
async fn a_forward_carries_tcp_to_the_vm_and_goes_with_it() {
    let m = Meson::start().await;
    let net = create_network(&m, json!({"name": "dmz", "cidr": "192.168.40.0/24"})).await;
    let vm = create_vm(&m, &vm_on("web", &[&net])).await;
    let vm_id = vm["id"].as_str().unwrap().to_owned();
    serve(&m, &vm, 22, echo("vm:").await);

    let public = free_port();
    let (f, done) = forward(
        &m,
        &net,
        json!({"public_port": public, "vm": vm_id, "private_port": 22}),
    )
    .await;
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(f["status"], "active", "{f}");
    assert_eq!(f["protocol"], "tcp");
    assert_eq!(
        (f["public_port"].as_u64(), f["private_port"].as_u64()),
        (Some(public.into()), Some(22))
    );
    assert_eq!(f["public_ip"], "127.0.0.1");
    assert_eq!(f["host"], vm["host"]);
    assert_eq!(f["vm"], vm["id"]);
    assert_eq!(f["network"], net.as_str());
    let fid = f["id"].as_str().unwrap().to_owned();

    // A real round trip: the bytes reach the VM's port and come back.
    assert_eq!(round_trip(public, "ping").await.as_deref(), Some("vm:ping"));
    let listed = m.get(&format!("/v1/networks/{net}/port-forwards")).await;
    assert_eq!(
        listed.body["port_forwards"].as_array().unwrap().len(),
        1,
        "{}",
        listed.body
    );

    // The port is the forward's on that host, for every other forward.
    let other = create_vm(&m, &vm_on("other", &[&net])).await;
    let taken = m
        .post(
            &format!("/v1/networks/{net}/port-forwards"),
            &json!({"public_port": public, "vm": other["id"], "private_port": 80}),
        )
        .await;
    if taken.status == StatusCode::CONFLICT {
        let message = taken.body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("public_port {public}/tcp is taken")),
            "{message}"
        );
    } else {
        // Placed on another host, where the port is free in meson's books:
        // the simulated hosts share one loopback address, so that host
        // finds it in use and the action fails, naming it.
        assert_ne!(other["host"], vm["host"], "{}", taken.body);
        assert_eq!(taken.status, StatusCode::CREATED, "{}", taken.body);
        let done = m
            .wait_action(taken.body["action"]["id"].as_str().unwrap())
            .await;
        assert_eq!(done["status"], "error", "{done}");
        assert!(
            done["error"]["message"]
                .as_str()
                .unwrap()
                .contains("in use"),
            "{done}"
        );
    }
    // UDP on the same number is another port.
    let (u, done) = forward(
        &m,
        &net,
        json!({"protocol": "udp", "public_port": public, "vm": vm_id, "private_port": 53}),
    )
    .await;
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(u["protocol"], "udp");

    // It pins the VM: no migration, no leaving the network.
    let r = m
        .post(&format!("/v1/vms/{vm_id}/actions/migrate"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("port forward"),
        "{}",
        r.body
    );
    let r = m
        .post(
            &format!("/v1/vms/{vm_id}/actions/detach-network"),
            &json!({"network": net}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(
        r.body["error"]["message"].as_str().unwrap().contains(&fid),
        "{}",
        r.body
    );

    // A stopped VM answers nothing through it.
    vm_action(&m, &vm_id, "poweroff", json!({})).await;
    assert_eq!(round_trip(public, "ping").await, None);
    vm_action(&m, &vm_id, "poweron", json!({})).await;
    assert_eq!(
        round_trip(public, "again").await.as_deref(),
        Some("vm:again")
    );

    // Deleting the VM deletes its forwards: gone from meson, port closed.
    delete_and_wait(&m, &format!("/v1/vms/{vm_id}")).await;
    let r = m
        .get(&format!("/v1/networks/{net}/port-forwards/{fid}"))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", public))
            .await
            .is_err(),
        "the public port is closed"
    );
    let left = m.get(&format!("/v1/networks/{net}/port-forwards")).await;
    assert!(
        left.body["port_forwards"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["vm"] != vm_id.as_str()),
        "{}",
        left.body
    );
    m.stop().await;
}

#[tokio::test]
async fn bad_forwards_are_named_and_a_port_in_use_fails_cleanly() {
    let m = Meson::start().await;
    let net = create_network(&m, json!({"name": "lan", "cidr": "192.168.41.0/24"})).await;
    let elsewhere = create_network(&m, json!({"name": "far", "cidr": "192.168.42.0/24"})).await;
    let vm = create_vm(&m, &vm_on("app", &[&net])).await;
    let vm_id = vm["id"].as_str().unwrap();
    let path = format!("/v1/networks/{net}/port-forwards");

    let r = m
        .post(
            &path,
            &json!({"protocol": "sctp", "public_port": 0, "vm": "x", "private_port": 70000}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(
        r.rejected_fields(),
        ["private_port", "protocol", "public_port", "vm"]
    );
    // A VM of the tenant's that is not on the network, and no VM at all.
    let r = m
        .post(
            &format!("/v1/networks/{elsewhere}/port-forwards"),
            &json!({"public_port": free_port(), "vm": vm_id, "private_port": 22}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.rejected_fields(), ["vm"]);
    let r = m
        .post(
            &path,
            &json!({"public_port": free_port(), "vm": uuid::Uuid::new_v4(), "private_port": 22}),
        )
        .await;
    assert_eq!(r.rejected_fields(), ["vm"], "{}", r.body);
    // The host's own daemons' ports are not for forwarding.
    let compute_port = target_named(&m, vm["host"].as_str().unwrap())
        .await
        .compute_port;
    let r = m
        .post(
            &path,
            &json!({"public_port": compute_port, "vm": vm_id, "private_port": 22}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.rejected_fields(), ["public_port"]);
    // No such network.
    let r = m
        .post(
            &format!("/v1/networks/{}/port-forwards", uuid::Uuid::new_v4()),
            &json!({"public_port": free_port(), "vm": vm_id, "private_port": 22}),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    assert!(
        m.get(&path).await.body["port_forwards"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // Something else listens on the port: the host refuses, the action
    // fails saying so, and the forward is `error`, holding nothing.
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = squatter.local_addr().unwrap().port();
    let (f, done) = forward(
        &m,
        &net,
        json!({"public_port": port, "vm": vm_id, "private_port": 22}),
    )
    .await;
    assert_eq!(done["status"], "error", "{done}");
    assert!(
        done["error"]["message"]
            .as_str()
            .unwrap()
            .contains("in use"),
        "{done}"
    );
    assert_eq!(f["status"], "error", "{f}");
    assert!(f["error"].as_str().unwrap().contains("in use"), "{f}");
    drop(squatter);
    // Freed, the same port forwards; the failed one is deleted.
    let (g, done) = forward(
        &m,
        &net,
        json!({"public_port": port, "vm": vm_id, "private_port": 22}),
    )
    .await;
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(g["status"], "active");
    delete_and_wait(&m, &format!("{path}/{}", f["id"].as_str().unwrap())).await;
    delete_and_wait(&m, &format!("{path}/{}", g["id"].as_str().unwrap())).await;
    assert!(
        m.get(&path).await.body["port_forwards"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
    );
    m.stop().await;
}

/// The reconciler shows a forward its host lost as `error`, and `active`
/// again once the host lists it again.
#[tokio::test]
async fn drift_shows_a_forward_its_host_lost() {
    let m = Meson::start().await;
    let env = workflow_env(&m, RepairConfig::default());
    let net = create_network(&m, json!({"name": "edge", "cidr": "192.168.43.0/24"})).await;
    let vm = create_vm(&m, &vm_on("edge", &[&net])).await;
    let public = free_port();
    let (f, _) = forward(
        &m,
        &net,
        json!({"public_port": public, "vm": vm["id"], "private_port": 22}),
    )
    .await;
    let fid = f["id"].as_str().unwrap();
    let path = format!("/v1/networks/{net}/port-forwards/{fid}");
    meson_workflows::drift::tick(&env).await.unwrap();
    assert_eq!(m.get(&path).await.body["port_forward"]["status"], "active");

    let (host, _) = m.vm_host(&vm);
    let c = env
        .atomos
        .client(target_named(&m, host.name()).await.id)
        .await
        .unwrap();
    c.port_forward_delete(fid).await.unwrap();
    meson_workflows::drift::tick(&env).await.unwrap();
    let lost = m.get(&path).await.body["port_forward"].clone();
    assert_eq!(lost["status"], "error", "{lost}");
    assert!(
        lost["error"]
            .as_str()
            .unwrap()
            .contains("missing from its host"),
        "{lost}"
    );

    let back = c.port_forwards().await.unwrap();
    assert!(back.is_empty());
    c.port_forward_create(&atomos_driver::PortForwardCreate {
        id: fid.to_owned(),
        protocol: "tcp".into(),
        port: public,
        vm_id: host.inventory().vms[0].id.clone(),
        vm_name: host.inventory().vms[0].name.clone(),
        target_port: 22,
    })
    .await
    .unwrap();
    meson_workflows::drift::tick(&env).await.unwrap();
    let found = m.get(&path).await.body["port_forward"].clone();
    assert_eq!(found["status"], "active", "{found}");
    assert_eq!(found["error"], Value::Null);
    m.stop().await;
}
