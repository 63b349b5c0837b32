//! Port forwards, for real on loopback: TCP and UDP round trips to what stands in for a guest's port, refusals (taken ports, bad bodies, unknown VMs and forwards), retried creates, faults, what ends a forward's connections, and how long its port stays open (delete, host down and up, the simulator dropped).

use crate::common::{client, client_with, eventually, opts, register, sim, wait_running};
use atomos_driver::{AtomosClient, ClientOptions, ErrorKind, PortForward, PortForwardCreate};
use atomos_sim::{SimPortForward, Simulator};
use std::io::ErrorKind as IoKind;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// How long a test waits for bytes, or for a connection to end.
const PATIENCE: Duration = Duration::from_secs(5);

/// A loopback TCP port nothing listens on: bound to learn it, then let go.
pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free TCP port")
        .port()
}

/// A loopback port free for TCP and UDP alike.
fn free_port_both() -> u16 {
    for _ in 0..50 {
        let port = free_tcp_port();
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no loopback port free for both TCP and UDP");
}

fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a free UDP port")
        .port()
}

/// A TCP echo server on a fresh loopback port: what stands in for a
/// guest's port.
pub async fn tcp_echo() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut from, mut to) = stream.split();
                let _ = tokio::io::copy(&mut from, &mut to).await;
            });
        }
    });
    addr
}

/// A UDP echo server on a fresh loopback port.
async fn udp_echo() -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 2048];
        while let Ok((len, from)) = socket.recv_from(&mut buf).await {
            let _ = socket.send_to(&buf[..len], from).await;
        }
    });
    addr
}

/// Registers VM `name` and waits until it runs; its id.
pub async fn running_vm(c: &AtomosClient, name: &str) -> String {
    c.register(&register(name, 1, 512)).await.unwrap();
    wait_running(c, name).await.id
}

pub fn forward(
    id: &str,
    protocol: &str,
    port: u16,
    (vm_id, vm_name): (&str, &str),
    target_port: u16,
) -> PortForwardCreate {
    PortForwardCreate {
        id: id.into(),
        protocol: protocol.into(),
        port,
        vm_id: vm_id.into(),
        vm_name: vm_name.into(),
        target_port,
    }
}

/// Sends `bytes` through the TCP forward on `port` while reading what comes
/// back, until the far side closes.
pub async fn echo_through(port: u16, bytes: &[u8]) -> Vec<u8> {
    let stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("the forward accepts");
    let (mut from, mut to) = stream.into_split();
    let sent = bytes.to_vec();
    let writer = tokio::spawn(async move {
        to.write_all(&sent).await.unwrap();
        // Half-closed: the echo ends once it has sent everything back.
        to.shutdown().await.unwrap();
    });
    let mut back = Vec::new();
    tokio::time::timeout(PATIENCE, from.read_to_end(&mut back))
        .await
        .expect("the echo ends in time")
        .expect("read");
    writer.await.unwrap();
    back
}

/// A connection through the forward on `port` that has made one round trip
/// and stays open.
async fn open_connection(port: u16) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("the forward accepts");
    stream.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    tokio::time::timeout(PATIENCE, stream.read_exact(&mut buf))
        .await
        .expect("the echo answers in time")
        .unwrap();
    assert_eq!(&buf, b"ping");
    stream
}

/// `stream` ends without another byte: end of stream or a reset.
async fn ends(mut stream: TcpStream, what: &str) {
    let _ = stream.write_all(b"anyone?").await;
    let mut buf = [0u8; 16];
    match tokio::time::timeout(PATIENCE, stream.read(&mut buf)).await {
        Ok(Ok(0)) => {}
        Ok(Err(e)) if matches!(e.kind(), IoKind::ConnectionReset | IoKind::BrokenPipe) => {}
        Ok(other) => panic!("{what}: the connection went on: {other:?}"),
        Err(_) => panic!("{what}: the connection stayed open"),
    }
}

/// A connection through the forward on `port` is accepted and closed at
/// once, without a byte, as through a NAT to a dead port.
pub async fn closed_at_once(port: u16, what: &str) {
    let stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap_or_else(|e| panic!("{what}: the forward accepts: {e}"));
    ends(stream, what).await;
}

pub async fn refused(port: u16) -> bool {
    matches!(
        TcpStream::connect(("127.0.0.1", port)).await,
        Err(e) if e.kind() == IoKind::ConnectionRefused
    )
}

/// Sends `payload` from `socket` through the UDP forward on `port` and
/// returns the answer; a lost datagram is sent again, a few times.
async fn udp_through(socket: &UdpSocket, port: u16, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; 2048];
    for _ in 0..5 {
        socket.send_to(payload, ("127.0.0.1", port)).await.unwrap();
        if let Ok(Ok((len, from))) =
            tokio::time::timeout(Duration::from_secs(1), socket.recv_from(&mut buf)).await
        {
            assert_eq!(from.port(), port, "the answer comes from the forward");
            return buf[..len].to_vec();
        }
    }
    panic!("no answer through the UDP forward on {port}");
}

fn quick(sim: &Simulator) -> AtomosClient {
    client_with(
        sim,
        "small",
        ClientOptions {
            retries: 0,
            ..opts()
        },
    )
}

#[tokio::test]
async fn tcp_bytes_go_both_ways_through_a_forward() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = client(&sim, "small");
    let host = sim.host("small").unwrap();
    let vm = running_vm(&c, "web").await;
    host.serve_guest_port("web", 22, tcp_echo().await).unwrap();
    let port = free_tcp_port();

    let made = c
        .port_forward_create(&forward("fw-ssh", "tcp", port, (&vm, "web"), 22))
        .await
        .unwrap();
    let want = PortForward {
        id: "fw-ssh".into(),
        protocol: "tcp".into(),
        port,
        vm_id: vm.clone(),
        vm_name: "web".into(),
        target_port: 22,
    };
    assert_eq!(made, want);
    assert_eq!(c.port_forwards().await.unwrap(), vec![want]);
    assert_eq!(
        host.inventory().port_forwards,
        vec![SimPortForward {
            id: "fw-ssh".into(),
            protocol: "tcp".into(),
            port,
            vm_id: vm.clone(),
            vm_name: "web".into(),
            target_port: 22,
        }]
    );

    // More than a socket buffer's worth, both ways at once, on several
    // connections at once.
    let payload: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let rounds: Vec<_> = (0..4)
        .map(|_| {
            let payload = payload.clone();
            tokio::spawn(async move { echo_through(port, &payload).await })
        })
        .collect();
    for round in rounds {
        assert!(round.await.unwrap() == payload, "the bytes came back whole");
    }
}

#[tokio::test]
async fn udp_datagrams_go_both_ways_through_a_forward() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = client(&sim, "small");
    let vm = running_vm(&c, "dns").await;
    sim.host("small")
        .unwrap()
        .serve_guest_port(&vm, 53, udp_echo().await)
        .unwrap();
    let port = free_udp_port();
    c.port_forward_create(&forward("fw-dns", "udp", port, (&vm, "dns"), 53))
        .await
        .unwrap();
    // Two clients, each answered on its own address.
    let one = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let two = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    assert_eq!(udp_through(&one, port, b"one").await, b"one");
    assert_eq!(udp_through(&two, port, b"two").await, b"two");
    assert_eq!(udp_through(&one, port, b"again").await, b"again");
}

#[tokio::test]
async fn a_port_taken_by_another_forward_or_listener_is_a_conflict() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = quick(&sim);
    let vm = running_vm(&c, "web").await;
    let target = (vm.as_str(), "web");
    let port = free_port_both();
    c.port_forward_create(&forward("a", "tcp", port, target, 22))
        .await
        .unwrap();
    let taken = c
        .port_forward_create(&forward("b", "tcp", port, target, 80))
        .await
        .unwrap_err();
    assert_eq!(
        (taken.kind, taken.status),
        (ErrorKind::AlreadyExists, Some(409)),
        "{taken}"
    );
    assert!(
        taken
            .message
            .starts_with(&format!("[PortInUse] port {port}/tcp")),
        "{taken}"
    );
    assert!(!taken.is_transient());
    // Another protocol, another port.
    c.port_forward_create(&forward("c", "udp", port, target, 53))
        .await
        .unwrap();

    // Ports something else holds: the OS refuses them, and so does the host.
    let tcp_holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let udp_holder = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for (protocol, held) in [
        ("tcp", tcp_holder.local_addr().unwrap().port()),
        ("udp", udp_holder.local_addr().unwrap().port()),
    ] {
        let err = c
            .port_forward_create(&forward("d", protocol, held, target, 22))
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::AlreadyExists, "{protocol}: {err}");
        assert!(
            err.message
                .starts_with(&format!("[PortInUse] port {held}/{protocol}")),
            "{err}"
        );
    }
    let ids: Vec<String> = c
        .port_forwards()
        .await
        .unwrap()
        .into_iter()
        .map(|f| f.id)
        .collect();
    assert_eq!(ids, ["a", "c"], "refused forwards are not kept");
}

#[tokio::test]
async fn a_retried_create_answers_the_forward_made_before() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = quick(&sim);
    let vm = running_vm(&c, "web").await;
    let req = forward("fw", "tcp", free_tcp_port(), (&vm, "web"), 22);
    let first = c.port_forward_create(&req).await.unwrap();
    let again = c.port_forward_create(&req).await.unwrap();
    assert_eq!(again, first);
    assert_eq!(c.port_forwards().await.unwrap(), vec![first]);
    // The same id for another forward is refused.
    let other = PortForwardCreate {
        target_port: 2222,
        ..req.clone()
    };
    let err = c.port_forward_create(&other).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::AlreadyExists, "{err}");
    assert!(err.message.contains("[PortForwardExists]"), "{err}");
    // A retry answers the forward even once its VM is gone.
    c.unregister(&vm).await.unwrap();
    assert_eq!(c.port_forward_create(&req).await.unwrap().id, "fw");
}

#[tokio::test]
async fn deleting_a_forward_closes_its_port_and_connections() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = quick(&sim);
    let vm = running_vm(&c, "web").await;
    sim.host("small")
        .unwrap()
        .serve_guest_port("web", 22, tcp_echo().await)
        .unwrap();
    let port = free_tcp_port();
    c.port_forward_create(&forward("fw", "tcp", port, (&vm, "web"), 22))
        .await
        .unwrap();
    let open = open_connection(port).await;

    c.port_forward_delete("fw").await.unwrap();
    assert!(
        refused(port).await,
        "the port is closed when the delete answers"
    );
    ends(open, "a connection of a deleted forward").await;
    assert!(c.port_forwards().await.unwrap().is_empty());
    assert!(
        sim.host("small")
            .unwrap()
            .inventory()
            .port_forwards
            .is_empty()
    );

    let twice = c.port_forward_delete("fw").await.unwrap_err();
    assert_eq!(
        (twice.kind, twice.status),
        (ErrorKind::NotFound, Some(404)),
        "{twice}"
    );
    assert!(twice.message.contains("[PortForwardNotFound]"), "{twice}");
    // The port can be forwarded again.
    c.port_forward_create(&forward("fw2", "tcp", port, (&vm, "web"), 22))
        .await
        .unwrap();
    assert_eq!(echo_through(port, b"back").await, b"back");
}

#[tokio::test]
async fn a_forward_to_an_unknown_vm_is_not_found() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = quick(&sim);
    let port = free_tcp_port();
    let err = c
        .port_forward_create(&forward("fw", "tcp", port, ("no-such-vm", "ghost"), 22))
        .await
        .unwrap_err();
    assert_eq!((err.kind, err.status), (ErrorKind::NotFound, Some(404)));
    assert!(err.message.contains("[VmNotFound]"), "{err}");
    assert!(refused(port).await, "nothing was bound");
    // Another host's VM is no VM of this one.
    let gpu_vm = running_vm(&client(&sim, "gpu"), "elsewhere").await;
    let err = c
        .port_forward_create(&forward("fw", "tcp", port, (&gpu_vm, "elsewhere"), 22))
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

#[tokio::test]
async fn bad_bodies_get_400_naming_the_field() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = quick(&sim);
    let vm = running_vm(&c, "web").await;
    let t = sim.host("small").unwrap().target().clone();
    let url = format!(
        "http://{}:{}/api/v1.0/client/network/portforward",
        t.host, t.ports.network
    );
    let good = serde_json::json!({
        "protocol": "tcp", "port": free_tcp_port(), "target": "web",
        "target_vm_uid": vm, "target_port": 22, "forward_uid": "fw"
    });
    let with = |field: &str, value: serde_json::Value| {
        let mut body = good.clone();
        body[field] = value;
        body
    };
    let http = reqwest::Client::new();
    for (field, body) in [
        ("protocol", with("protocol", "icmp".into())),
        ("port", with("port", 0.into())),
        ("port", with("port", 65536.into())),
        ("target_port", with("target_port", 0.into())),
        ("target_port", with("target_port", 70000.into())),
        ("forward_uid", with("forward_uid", "".into())),
        ("target_vm_uid", with("target_vm_uid", "".into())),
    ] {
        let resp = http.post(&url).json(&body).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 400, "{body}");
        let detail: serde_json::Value = resp.json().await.unwrap();
        let detail = detail["detail"].as_str().unwrap().to_owned();
        assert!(detail.contains(field), "{field}: {detail}");
    }
    for body in [r#"{}"#, r#"{"forward_uid": ""}"#, "[]"] {
        let resp = http
            .delete(&url)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 400, "{body}");
    }
    assert!(c.port_forwards().await.unwrap().is_empty());
    // The good body works as is.
    let resp = http.post(&url).json(&good).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let made: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(made["forward_uid"], "fw");
    assert_eq!(made["serverurl"], "https://10.1.0.1");
    assert_eq!(made["tailscale"], false);
    assert_eq!(made["force"], false);
}

#[tokio::test]
async fn faults_hit_the_port_forward_routes() {
    let sim = sim(Duration::from_millis(20)).await;
    let host = sim.host("small").unwrap();
    let c = quick(&sim);
    let vm = running_vm(&c, "web").await;
    let port = free_tcp_port();
    let req = forward("fw", "tcp", port, (&vm, "web"), 22);

    host.faults().fail_next("network/portforward", 503, 1);
    let err = c.port_forward_create(&req).await.unwrap_err();
    assert_eq!((err.kind, err.status), (ErrorKind::Transient, Some(503)));
    assert!(refused(port).await, "the failed create bound nothing");
    c.port_forward_create(&req).await.unwrap();

    // A list is a read: retried past a failure.
    host.faults().fail_next("network/portforwards", 503, 2);
    assert_eq!(
        client(&sim, "small").port_forwards().await.unwrap().len(),
        1
    );
    host.faults().fail_next("network/portforward", 500, 1);
    assert!(
        c.port_forward_delete("fw")
            .await
            .unwrap_err()
            .is_transient()
    );
    assert!(!refused(port).await, "the failed delete closed nothing");
    c.port_forward_delete("fw").await.unwrap();
}

#[tokio::test]
async fn connections_end_when_the_guest_is_not_reachable() {
    let sim = sim(Duration::from_millis(20)).await;
    let host = sim.host("small").unwrap();
    let c = quick(&sim);
    let vm = running_vm(&c, "web").await;
    host.serve_guest_port("web", 22, tcp_echo().await).unwrap();
    // Port 23 has nothing standing in for it; port 24 a dead address.
    host.serve_guest_port(
        "web",
        24,
        SocketAddr::from(([127, 0, 0, 1], free_tcp_port())),
    )
    .unwrap();
    let ports: Vec<u16> = (0..3).map(|_| free_tcp_port()).collect();
    for (i, (port, target)) in ports.iter().zip([22, 23, 24]).enumerate() {
        c.port_forward_create(&forward(
            &format!("fw-{i}"),
            "tcp",
            *port,
            (&vm, "web"),
            target,
        ))
        .await
        .unwrap();
    }
    let ssh = ports[0];
    closed_at_once(ports[1], "nothing served on the guest's port").await;
    closed_at_once(ports[2], "the guest's port refuses").await;

    // Stopped: open connections end, new ones are closed at once.
    let open = open_connection(ssh).await;
    c.stop(&vm).await.unwrap();
    ends(open, "a connection to a VM stopped").await;
    closed_at_once(ssh, "a VM stopped").await;
    // Booting is not running yet.
    host.set_boot_time(Duration::from_secs(3600));
    c.start(&vm).await.unwrap();
    closed_at_once(ssh, "a VM booting").await;
    host.advance_clock(Duration::from_secs(3600));
    wait_running(&c, "web").await;
    assert_eq!(echo_through(ssh, b"up again").await, b"up again");

    // Crashed.
    let open = open_connection(ssh).await;
    assert!(host.faults().crash_vm("web"));
    ends(open, "a connection to a VM crashed").await;
    c.start(&vm).await.unwrap();
    host.advance_clock(Duration::from_secs(3600));
    wait_running(&c, "web").await;

    // Nothing served any more.
    let open = open_connection(ssh).await;
    host.stop_serving_guest_port("web", 22).unwrap();
    ends(open, "a guest port no longer served").await;
    closed_at_once(ssh, "a guest port no longer served").await;
    assert!(host.stop_serving_guest_port("web", 22).is_err());
    host.serve_guest_port(&vm, 22, tcp_echo().await).unwrap();
    assert_eq!(echo_through(ssh, b"served").await, b"served");

    // Unregistered: the forwards stay (meson deletes them), connections end.
    let open = open_connection(ssh).await;
    c.unregister(&vm).await.unwrap();
    ends(open, "a connection to a VM unregistered").await;
    closed_at_once(ssh, "a VM unregistered").await;
    assert_eq!(c.port_forwards().await.unwrap().len(), 3);
    assert!(host.serve_guest_port(&vm, 22, tcp_echo().await).is_err());
}

#[tokio::test]
async fn a_host_down_closes_its_forwards_and_up_binds_them_again() {
    let sim = sim(Duration::from_millis(20)).await;
    let host = sim.host("small").unwrap();
    let c = quick(&sim);
    let vm = running_vm(&c, "web").await;
    host.serve_guest_port("web", 22, tcp_echo().await).unwrap();
    host.serve_guest_port("web", 53, udp_echo().await).unwrap();
    let (tcp, udp) = (free_tcp_port(), free_udp_port());
    c.port_forward_create(&forward("ssh", "tcp", tcp, (&vm, "web"), 22))
        .await
        .unwrap();
    c.port_forward_create(&forward("dns", "udp", udp, (&vm, "web"), 53))
        .await
        .unwrap();
    let open = open_connection(tcp).await;

    host.take_down().await;
    assert!(refused(tcp).await, "the TCP port is closed");
    ends(open, "a connection through a host down").await;
    // The UDP port is free: anything may bind it (and lets it go).
    drop(std::net::UdpSocket::bind(("127.0.0.1", udp)).expect("the UDP port is closed"));

    host.bring_up().await.unwrap();
    assert_eq!(echo_through(tcp, b"back up").await, b"back up");
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    assert_eq!(udp_through(&socket, udp, b"back up").await, b"back up");
}

#[tokio::test]
async fn a_port_taken_while_the_host_was_down_fails_bring_up() {
    let sim = sim(Duration::from_millis(20)).await;
    let host = sim.host("small").unwrap();
    let c = quick(&sim);
    let vm = running_vm(&c, "web").await;
    host.serve_guest_port("web", 22, tcp_echo().await).unwrap();
    let port = free_tcp_port();
    c.port_forward_create(&forward("ssh", "tcp", port, (&vm, "web"), 22))
        .await
        .unwrap();
    host.take_down().await;
    let squatter = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let err = host.bring_up().await.unwrap_err();
    assert!(err.to_string().contains(&format!("{port}/tcp")), "{err}");
    // The forward keeps trying, and listens once the port is free.
    drop(squatter);
    eventually("the forward to listen again", || async {
        !refused(port).await
    })
    .await;
    assert_eq!(echo_through(port, b"mine again").await, b"mine again");
}

#[tokio::test]
async fn dropping_the_simulator_stops_its_forwards() {
    let sim = sim(Duration::from_millis(20)).await;
    let host = sim.host("small").unwrap();
    let c = quick(&sim);
    let vm = running_vm(&c, "web").await;
    host.serve_guest_port("web", 22, tcp_echo().await).unwrap();
    let port = free_tcp_port();
    c.port_forward_create(&forward("ssh", "tcp", port, (&vm, "web"), 22))
        .await
        .unwrap();
    let open = open_connection(port).await;
    // A host kept by the test does not keep its forwards alive.
    drop(sim);
    ends(open, "a connection of a simulator dropped").await;
    eventually("the port to close", || async { refused(port).await }).await;
    assert_eq!(host.inventory().port_forwards.len(), 1);
}

#[tokio::test]
async fn shutdown_closes_every_forward_before_it_returns() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = quick(&sim);
    let vm = running_vm(&c, "web").await;
    let (tcp, udp) = (free_tcp_port(), free_udp_port());
    c.port_forward_create(&forward("ssh", "tcp", tcp, (&vm, "web"), 22))
        .await
        .unwrap();
    c.port_forward_create(&forward("dns", "udp", udp, (&vm, "web"), 53))
        .await
        .unwrap();
    sim.shutdown().await;
    assert!(refused(tcp).await);
    drop(std::net::UdpSocket::bind(("127.0.0.1", udp)).expect("the UDP port is closed"));
}
