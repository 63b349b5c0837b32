//! VM consoles through the driver, against the simulator: a tunnel opened for a running VM, joined over WebSocket as a VNC client would (RFB 3.8, security None, 32 bits per pixel little-endian, one Raw update of the whole screen), refused for a VM that is off, closed by a stop.

use atomos_driver::{AtomosClient, ClientOptions, ErrorKind, Register, VmSpec, VmState};
use atomos_sim::console_screen::{BACKGROUND, HEIGHT, TEXT, WIDTH};
use atomos_sim::{SimConfig, Simulator};
use futures::{SinkExt, StreamExt};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const PATIENCE: Duration = Duration::from_secs(5);

async fn simulator() -> (Simulator, AtomosClient) {
    let sim = atomos_sim::start(SimConfig {
        hosts: vec![atomos_sim::dev_hosts()[0].clone()],
        boot_time: Duration::from_millis(20),
        bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
        state: None,
    })
    .await
    .expect("simulator starts");
    let client = AtomosClient::new(
        sim.targets()[0].clone(),
        ClientOptions {
            timeout: Duration::from_secs(5),
            retries: 2,
            concurrency: 4,
        },
    )
    .expect("client");
    (sim, client)
}

/// Registers VM `name` and waits until it runs; its id.
async fn running_vm(c: &AtomosClient, name: &str) -> String {
    c.register(&Register {
        vm_name: name.into(),
        spec: VmSpec {
            slots: 1,
            overprovision: 1,
            allow_smt: false,
            archs: vec!["X86_64".into()],
            flags: vec![],
            min_frequency_ghz: None,
            ram_mib: 512,
            require_ecc: false,
            pci: vec![],
            os_family: "linux".into(),
            os_flavour: "debian".into(),
        },
        volume_ids: vec![],
        network_ids: vec![],
        nic_macs: vec![],
    })
    .await
    .expect("register");
    for _ in 0..300 {
        let vm = c.vm_by_name(name).await.unwrap().expect("listed");
        if vm.state == VmState::Running {
            return vm.id;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{name} did not run");
}

/// RFB bytes over a WebSocket's binary frames.
struct Wire {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    buffered: Vec<u8>,
}

impl Wire {
    async fn read(&mut self, n: usize) -> Vec<u8> {
        while self.buffered.len() < n {
            match tokio::time::timeout(PATIENCE, self.ws.next()).await {
                Ok(Some(Ok(Message::Binary(bytes)))) => self.buffered.extend_from_slice(&bytes),
                Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => {}
                other => panic!("expected RFB bytes, got {other:?}"),
            }
        }
        self.buffered.drain(..n).collect()
    }

    async fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.read(4).await.try_into().unwrap())
    }

    async fn u16(&mut self) -> u16 {
        u16::from_be_bytes(self.read(2).await.try_into().unwrap())
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.ws.send(Message::binary(bytes.to_vec())).await.unwrap();
    }
}

#[tokio::test]
async fn a_running_vms_console_serves_its_screen_over_rfb() {
    let (sim, c) = simulator().await;
    let id = running_vm(&c, "vm-screen").await;
    let console = c.console_open(&id).await.unwrap();
    assert!(console.open);
    assert!(
        console.ws_url.starts_with("ws://127.0.0.1:"),
        "{}",
        console.ws_url
    );
    assert_eq!(c.console_open(&id).await.unwrap(), console, "one per VM");

    let (ws, _) = tokio_tungstenite::connect_async(console.ws_url.as_str())
        .await
        .expect("the tunnel upgrades");
    let mut wire = Wire {
        ws,
        buffered: Vec::new(),
    };
    // ProtocolVersion, Security (None), SecurityResult, ClientInit.
    assert_eq!(wire.read(12).await, b"RFB 003.008\n");
    wire.send(b"RFB 003.008\n").await;
    assert_eq!(wire.read(2).await, vec![1, 1], "one type: None");
    wire.send(&[1]).await;
    assert_eq!(wire.u32().await, 0, "SecurityResult OK");
    wire.send(&[1]).await;
    // ServerInit.
    let (width, height) = (wire.u16().await, wire.u16().await);
    assert_eq!((width, height), (WIDTH, HEIGHT));
    wire.read(16).await;
    let len = wire.u32().await as usize;
    assert_eq!(wire.read(len).await, b"vm-screen");
    assert_eq!(
        c.console_status(&console.instance_id)
            .await
            .unwrap()
            .sessions,
        Some(1)
    );

    // SetPixelFormat: 32 bits, depth 24, little-endian, true colour, 8 bits
    // a channel, red at bit 16: each pixel reads [b, g, r, 0].
    let mut set = vec![
        0, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0,
    ];
    // SetEncodings: Raw.
    set.extend_from_slice(&[2, 0, 0, 1, 0, 0, 0, 0]);
    // FramebufferUpdateRequest: the whole screen, not incremental.
    set.extend_from_slice(&[3, 0, 0, 0, 0, 0]);
    set.extend_from_slice(&WIDTH.to_be_bytes());
    set.extend_from_slice(&HEIGHT.to_be_bytes());
    wire.send(&set).await;
    assert_eq!(wire.read(4).await, vec![0, 0, 0, 1], "one rectangle");
    let mut rect = wire.read(12).await;
    let encoding = rect.split_off(8);
    let mut want = vec![0, 0, 0, 0];
    want.extend_from_slice(&WIDTH.to_be_bytes());
    want.extend_from_slice(&HEIGHT.to_be_bytes());
    assert_eq!(rect, want, "the whole screen");
    assert_eq!(encoding, vec![0, 0, 0, 0], "Raw");
    let pixels = wire
        .read(usize::from(WIDTH) * usize::from(HEIGHT) * 4)
        .await;
    let bgrx = |[r, g, b]: [u8; 3]| [b, g, r, 0];
    let (mut text, mut background) = (0, 0);
    for pixel in pixels.chunks(4) {
        if pixel == bgrx(TEXT) {
            text += 1;
        } else if pixel == bgrx(BACKGROUND) {
            background += 1;
        } else {
            panic!("a pixel of neither colour: {pixel:?}");
        }
    }
    assert!(text > 500, "{text} pixels of text");
    assert!(background > 9 * text, "{background} of background");

    sim.shutdown().await;
}

#[tokio::test]
async fn a_console_is_refused_for_a_vm_that_is_off() {
    let (sim, c) = simulator().await;
    let id = running_vm(&c, "vm-dark").await;
    c.stop(&id).await.unwrap();
    let err = c.console_open(&id).await.unwrap_err();
    assert_eq!(
        (err.kind, err.status, err.route.as_str()),
        (ErrorKind::Invalid, Some(409), "vm/porttunnel/vncWebSocket")
    );
    let err = c.console_open("no-such-vm").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);
    assert!(c.consoles().await.unwrap().is_empty());
    sim.shutdown().await;
}

#[tokio::test]
async fn a_stop_closes_the_tunnel_and_its_sessions() {
    let (sim, c) = simulator().await;
    let id = running_vm(&c, "vm-closing").await;
    let console = c.console_open(&id).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::connect_async(console.ws_url.as_str())
        .await
        .unwrap();
    c.console_close(&console.instance_id).await.unwrap();
    let close = loop {
        match tokio::time::timeout(PATIENCE, ws.next())
            .await
            .expect("closed in time")
        {
            Some(Ok(Message::Close(frame))) => break frame,
            Some(Ok(_)) => {}
            other => panic!("expected a Close frame, got {other:?}"),
        }
    };
    assert_eq!(
        close.expect("a reason").reason,
        "the console tunnel was stopped"
    );
    let err = c.console_status(&console.instance_id).await.unwrap_err();
    assert_eq!(
        (err.kind, err.route.as_str()),
        (
            ErrorKind::NotFound,
            "vm/porttunnel/vncWebSocket/{instance_id}"
        )
    );
    assert_eq!(
        c.console_close(&console.instance_id)
            .await
            .unwrap_err()
            .kind,
        ErrorKind::NotFound
    );
    assert!(c.consoles().await.unwrap().is_empty());
    sim.shutdown().await;
}
