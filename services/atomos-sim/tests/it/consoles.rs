//! VM consoles: `porttunnel/vncWebSocket` tunnels spoken to as a VNC client behind a WebSocket would (RFB 3.8, 3.7 and 3.3; 32, 16 and 8 bits per pixel, either byte order, a colour map), what the screen shows, refusals, one tunnel per VM, and what ends a tunnel (stop, the VM stopping or crashing, the host going down).

use crate::common::{client, eventually, register, sim, wait_running};
use atomos_driver::{AtomosClient, Console, ErrorKind};
use atomos_sim::console_screen::{BACKGROUND, HEIGHT, TEXT, WIDTH};
use atomos_sim::{FaultSpec, Simulator};
use font8x8::{BASIC_FONTS, UnicodeFonts};
use futures::{SinkExt, StreamExt};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// How long a test waits for bytes, or for a session to end.
const PATIENCE: Duration = Duration::from_secs(5);

/// A client's pixel format, as SetPixelFormat sends it.
#[derive(Clone, Copy, Debug)]
struct Format {
    bpp: u8,
    depth: u8,
    big_endian: bool,
    true_colour: bool,
    max: [u16; 3],
    shift: [u8; 3],
}

impl Format {
    /// 32 bits, little-endian, red in the first byte: `[r, g, b, 0]`.
    const RGBX: Format = Format {
        bpp: 32,
        depth: 24,
        big_endian: false,
        true_colour: true,
        max: [255, 255, 255],
        shift: [0, 8, 16],
    };

    fn bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0] = self.bpp;
        b[1] = self.depth;
        b[2] = u8::from(self.big_endian);
        b[3] = u8::from(self.true_colour);
        for i in 0..3 {
            b[4 + 2 * i..6 + 2 * i].copy_from_slice(&self.max[i].to_be_bytes());
            b[10 + i] = self.shift[i];
        }
        b
    }

    /// The bytes a pixel of `rgb` (or of colour-map entry `index`) takes.
    fn pixel(&self, rgb: [u8; 3], index: u8) -> Vec<u8> {
        let v = if self.true_colour {
            (0..3)
                .map(|i| {
                    ((u32::from(rgb[i]) * u32::from(self.max[i]) + 127) / 255) << self.shift[i]
                })
                .fold(0, |a, b| a | b)
        } else {
            u32::from(index)
        };
        match (self.bpp, self.big_endian) {
            (8, _) => vec![v as u8],
            (16, false) => (v as u16).to_le_bytes().to_vec(),
            (16, true) => (v as u16).to_be_bytes().to_vec(),
            (_, false) => v.to_le_bytes().to_vec(),
            (_, true) => v.to_be_bytes().to_vec(),
        }
    }
}

/// What ServerInit says.
#[derive(Debug)]
struct Init {
    width: u16,
    height: u16,
    format: [u8; 16],
    name: String,
}

/// One Raw rectangle of a FramebufferUpdate.
#[derive(Debug)]
struct Frame {
    x: u16,
    y: u16,
    w: u16,
    h: u16,
    /// Row by row, `bpp / 8` bytes a pixel.
    pixels: Vec<u8>,
}

/// An RFB client over a WebSocket's binary frames.
struct Vnc {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    buffered: Vec<u8>,
}

impl Vnc {
    async fn connect(url: &str) -> Vnc {
        let (ws, _) = tokio::time::timeout(PATIENCE, tokio_tungstenite::connect_async(url))
            .await
            .expect("the tunnel answers in time")
            .expect("the WebSocket handshake succeeds");
        Vnc {
            ws,
            buffered: Vec::new(),
        }
    }

    async fn read(&mut self, n: usize) -> Vec<u8> {
        while self.buffered.len() < n {
            let message = tokio::time::timeout(PATIENCE, self.ws.next())
                .await
                .expect("bytes in time")
                .expect("the session is open")
                .expect("a readable frame");
            match message {
                Message::Binary(bytes) => self.buffered.extend_from_slice(&bytes),
                Message::Ping(_) | Message::Pong(_) => {}
                other => panic!("expected binary frames, got {other:?}"),
            }
        }
        self.buffered.drain(..n).collect()
    }

    async fn u8(&mut self) -> u8 {
        self.read(1).await[0]
    }

    async fn u16(&mut self) -> u16 {
        let b = self.read(2).await;
        u16::from_be_bytes([b[0], b[1]])
    }

    async fn u32(&mut self) -> u32 {
        let b = self.read(4).await;
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.ws
            .send(Message::binary(bytes.to_vec()))
            .await
            .expect("the session takes bytes");
    }

    /// The handshake as a client of `version` (`3.3`, `3.7` or `3.8`),
    /// security None, a shared ClientInit.
    async fn handshake(&mut self, version: &str) -> Init {
        assert_eq!(self.read(12).await, b"RFB 003.008\n");
        let minor = version.strip_prefix("3.").expect("a 3.x version");
        self.send(format!("RFB 003.00{minor}\n").as_bytes()).await;
        if version == "3.3" {
            assert_eq!(self.u32().await, 1, "the server decides: None");
        } else {
            let count = self.u8().await;
            let types = self.read(usize::from(count)).await;
            assert_eq!(types, vec![1], "None only");
            self.send(&[1]).await;
            if version == "3.8" {
                assert_eq!(self.u32().await, 0, "SecurityResult OK");
            }
        }
        self.send(&[1]).await;
        let width = self.u16().await;
        let height = self.u16().await;
        let format: [u8; 16] = self.read(16).await.try_into().unwrap();
        let len = self.u32().await;
        let name = String::from_utf8(self.read(len as usize).await).expect("a UTF-8 name");
        Init {
            width,
            height,
            format,
            name,
        }
    }

    async fn set_pixel_format(&mut self, format: &Format) {
        let mut message = vec![0, 0, 0, 0];
        message.extend_from_slice(&format.bytes());
        self.send(&message).await;
    }

    /// SetEncodings: Raw, and a few that the server may ignore.
    async fn set_encodings(&mut self) {
        let mut message = vec![2, 0, 0, 4];
        for encoding in [0i32, 1, 16, -223] {
            message.extend_from_slice(&encoding.to_be_bytes());
        }
        self.send(&message).await;
    }

    async fn request(&mut self, incremental: bool, x: u16, y: u16, w: u16, h: u16) {
        let mut message = vec![3, u8::from(incremental)];
        for v in [x, y, w, h] {
            message.extend_from_slice(&v.to_be_bytes());
        }
        self.send(&message).await;
    }

    /// Key, pointer and clipboard events, which the server reads and ignores.
    async fn type_and_click(&mut self) {
        self.send(&[4, 1, 0, 0, 0, 0, 0xff, 0x0d]).await;
        self.send(&[4, 0, 0, 0, 0, 0, 0xff, 0x0d]).await;
        self.send(&[5, 1, 0, 20, 0, 30]).await;
        self.send(&[6, 0, 0, 0, 0, 0, 0, 5, b'h', b'e', b'l', b'l', b'o'])
            .await;
    }

    /// A FramebufferUpdate of one Raw rectangle, `bpp` bits a pixel.
    async fn frame(&mut self, bpp: u8) -> Frame {
        assert_eq!(self.u8().await, 0, "FramebufferUpdate");
        self.u8().await;
        assert_eq!(self.u16().await, 1, "one rectangle");
        let (x, y, w, h) = (
            self.u16().await,
            self.u16().await,
            self.u16().await,
            self.u16().await,
        );
        assert_eq!(self.u32().await, 0, "Raw");
        let len = usize::from(w) * usize::from(h) * usize::from(bpp / 8);
        let pixels = self.read(len).await;
        Frame { x, y, w, h, pixels }
    }

    /// Waits until the server ends the session: its Close frame, if any.
    async fn closed(&mut self) -> Option<CloseFrame> {
        loop {
            match tokio::time::timeout(PATIENCE, self.ws.next())
                .await
                .expect("the session ends in time")
            {
                Some(Ok(Message::Close(frame))) => return frame,
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return None,
            }
        }
    }

    /// Whether anything arrives within `wait`.
    async fn silent_for(&mut self, wait: Duration) -> bool {
        self.buffered.is_empty() && tokio::time::timeout(wait, self.ws.next()).await.is_err()
    }
}

/// Where `text` has its pixels when the screen draws it at row `top`,
/// `scale` times the font's size, from the left margin (16 pixels).
fn glyph_pixels(text: &str, top: usize, scale: usize) -> Vec<(usize, usize)> {
    let mut at = Vec::new();
    for (i, c) in text.chars().enumerate() {
        let glyph = BASIC_FONTS.get(c).expect("a glyph");
        for (row, bits) in glyph.iter().enumerate() {
            for col in 0..8 {
                if bits & (1 << col) != 0 {
                    for dy in 0..scale {
                        for dx in 0..scale {
                            at.push((16 + (i * 8 + col) * scale + dx, top + row * scale + dy));
                        }
                    }
                }
            }
        }
    }
    at
}

/// The whole screen in `format`: which pixels are text, checking that
/// every one is the text or the background colour.
fn text_mask(frame: &Frame, format: &Format) -> Vec<bool> {
    let size = usize::from(format.bpp / 8);
    let (text, background) = (format.pixel(TEXT, 1), format.pixel(BACKGROUND, 0));
    frame
        .pixels
        .chunks(size)
        .map(|p| {
            if p == text.as_slice() {
                true
            } else {
                assert_eq!(p, background.as_slice(), "a pixel of neither colour");
                false
            }
        })
        .collect()
}

/// Whether the full-screen `mask` shows `text` drawn at `top`.
fn shows(mask: &[bool], text: &str, top: usize, scale: usize) -> bool {
    glyph_pixels(text, top, scale)
        .into_iter()
        .all(|(x, y)| mask[y * usize::from(WIDTH) + x])
}

/// The full screen, in `format`.
async fn screen(vnc: &mut Vnc, format: &Format) -> Vec<bool> {
    vnc.request(false, 0, 0, WIDTH, HEIGHT).await;
    let frame = vnc.frame(format.bpp).await;
    assert_eq!((frame.x, frame.y, frame.w, frame.h), (0, 0, WIDTH, HEIGHT));
    text_mask(&frame, format)
}

async fn running_vm(c: &AtomosClient, name: &str) -> String {
    c.register(&register(name, 1, 512)).await.unwrap();
    wait_running(c, name).await.id
}

/// Sessions of VM `vm_id` on host `host`, as the inventory counts them.
fn sessions(sim: &Simulator, host: &str, vm_id: &str) -> u32 {
    let inventory = sim.host(host).unwrap().inventory();
    inventory
        .vms
        .iter()
        .find(|vm| vm.id == vm_id)
        .map_or(0, |vm| vm.console_sessions)
}

async fn gone(c: &AtomosClient, console: &Console) -> bool {
    matches!(c.console_status(&console.instance_id).await, Err(e) if e.kind == ErrorKind::NotFound)
}

#[tokio::test]
async fn a_running_vms_console_shows_its_name_and_power_state() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = client(&sim, "small");
    let id = running_vm(&c, "vm-console").await;
    let console = c.console_open(&id).await.unwrap();
    let port = console.port.expect("a port");
    assert_eq!(
        console.ws_url,
        format!("ws://127.0.0.1:{port}/vnc/{}", console.instance_id)
    );
    assert_eq!(
        (console.vm_id.as_str(), console.vm_name.as_str()),
        (id.as_str(), "vm-console")
    );
    assert_eq!((console.open, console.sessions), (true, Some(0)));

    let mut vnc = Vnc::connect(&console.ws_url).await;
    let init = vnc.handshake("3.8").await;
    assert_eq!((init.width, init.height), (640, 200));
    assert_eq!(init.name, "vm-console");
    // The server's own format: 32 bits, depth 24, little-endian, true colour.
    assert_eq!(&init.format[..4], &[32, 24, 0, 1]);
    assert_eq!(sessions(&sim, "small", &id), 1);
    let status = c.console_status(&console.instance_id).await.unwrap();
    assert_eq!(status.sessions, Some(1));

    vnc.set_encodings().await;
    vnc.set_pixel_format(&Format::RGBX).await;
    vnc.type_and_click().await;
    let mask = screen(&mut vnc, &Format::RGBX).await;
    let text = mask.iter().filter(|t| **t).count();
    assert!(text > 500, "{text} text pixels");
    assert!(
        text * 10 < mask.len(),
        "mostly background: {text} text pixels"
    );
    assert!(shows(&mask, "vm-console", 72, 2), "the VM's name");
    assert!(shows(&mask, "power: running", 128, 2), "its power state");
    assert!(!shows(&mask, "power: starting", 128, 2));

    // A part of the screen: the first letter of the name, byte for byte.
    vnc.request(false, 16, 72, 16, 16).await;
    let part = vnc.frame(32).await;
    assert_eq!((part.x, part.y, part.w, part.h), (16, 72, 16, 16));
    let v: Vec<(usize, usize)> = glyph_pixels("v", 72, 2);
    for y in 0..16 {
        for x in 0..16 {
            let want = if v.contains(&(16 + x, 72 + y)) {
                TEXT
            } else {
                BACKGROUND
            };
            let at = (y * 16 + x) * 4;
            assert_eq!(&part.pixels[at..at + 3], &want, "({x}, {y})");
        }
    }
    // Nothing changed: an incremental request waits.
    vnc.request(true, 0, 0, WIDTH, HEIGHT).await;
    assert!(vnc.silent_for(Duration::from_millis(600)).await);

    drop(vnc);
    eventually("the session to be uncounted", || async {
        sessions(&sim, "small", &id) == 0
    })
    .await;
    // The tunnel stays open for the next client.
    let inventory = sim.host("small").unwrap().inventory();
    assert_eq!(inventory.consoles.len(), 1);
    assert_eq!(inventory.consoles[0].id, console.instance_id);
    let mut again = Vnc::connect(&console.ws_url).await;
    again.handshake("3.8").await;
    sim.shutdown().await;
}

#[tokio::test]
async fn older_clients_and_their_pixel_formats_are_served() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = client(&sim, "small");
    let id = running_vm(&c, "vm-formats").await;
    let console = c.console_open(&id).await.unwrap();

    // RFB 3.3, RGB565 big-endian.
    let rgb565 = Format {
        bpp: 16,
        depth: 16,
        big_endian: true,
        true_colour: true,
        max: [31, 63, 31],
        shift: [11, 5, 0],
    };
    let mut vnc = Vnc::connect(&console.ws_url).await;
    assert_eq!(vnc.handshake("3.3").await.name, "vm-formats");
    vnc.set_pixel_format(&rgb565).await;
    let mask = screen(&mut vnc, &rgb565).await;
    assert!(shows(&mask, "vm-formats", 72, 2));

    // RFB 3.7, BGR233 in a byte, then 32 bits big-endian.
    let bgr233 = Format {
        bpp: 8,
        depth: 8,
        big_endian: false,
        true_colour: true,
        max: [7, 7, 3],
        shift: [0, 3, 6],
    };
    let mut vnc = Vnc::connect(&console.ws_url).await;
    vnc.handshake("3.7").await;
    vnc.set_pixel_format(&bgr233).await;
    assert!(shows(
        &screen(&mut vnc, &bgr233).await,
        "power: running",
        128,
        2
    ));
    let xrgb_be = Format {
        big_endian: true,
        shift: [16, 8, 0],
        ..Format::RGBX
    };
    vnc.set_pixel_format(&xrgb_be).await;
    assert!(shows(
        &screen(&mut vnc, &xrgb_be).await,
        "vm-formats",
        72,
        2
    ));

    // A colour map: the server sends its two entries, then indices.
    let indexed = Format {
        true_colour: false,
        ..bgr233
    };
    vnc.set_pixel_format(&indexed).await;
    assert_eq!(vnc.u8().await, 1, "SetColourMapEntries");
    vnc.u8().await;
    assert_eq!((vnc.u16().await, vnc.u16().await), (0, 2));
    let entries = vnc.read(12).await;
    let channel = |i: usize| u16::from_be_bytes([entries[2 * i], entries[2 * i + 1]]);
    assert_eq!(channel(0), u16::from(BACKGROUND[0]) * 257);
    assert_eq!(channel(3), u16::from(TEXT[0]) * 257);
    assert!(shows(
        &screen(&mut vnc, &indexed).await,
        "vm-formats",
        72,
        2
    ));

    // A format the protocol does not allow ends the session.
    let mut vnc = Vnc::connect(&console.ws_url).await;
    vnc.handshake("3.8").await;
    vnc.set_pixel_format(&Format {
        bpp: 24,
        ..Format::RGBX
    })
    .await;
    let frame = vnc.closed().await.expect("a Close frame");
    assert_eq!(frame.code, CloseCode::Protocol);
    assert!(frame.reason.contains("bits per pixel"), "{}", frame.reason);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_booting_vm_has_a_console_that_shows_the_boot_end() {
    let sim = sim(Duration::from_secs(3600)).await;
    let c = client(&sim, "small");
    c.register(&register("vm-boot", 1, 512)).await.unwrap();
    let id = c.vm_by_name("vm-boot").await.unwrap().unwrap().id;
    let console = c.console_open(&id).await.unwrap();
    let mut vnc = Vnc::connect(&console.ws_url).await;
    vnc.handshake("3.8").await;
    vnc.set_pixel_format(&Format::RGBX).await;
    let before = screen(&mut vnc, &Format::RGBX).await;
    assert!(shows(&before, "power: starting", 128, 2));
    vnc.request(true, 0, 0, WIDTH, HEIGHT).await;
    assert!(vnc.silent_for(Duration::from_millis(500)).await);
    sim.host("small")
        .unwrap()
        .advance_clock(Duration::from_secs(3600));
    // The incremental request is answered once the screen changed.
    let after = text_mask(&vnc.frame(32).await, &Format::RGBX);
    assert!(shows(&after, "power: running", 128, 2));
    assert!(shows(&after, "vm-boot", 72, 2));
    sim.shutdown().await;
}

#[tokio::test]
async fn a_console_is_refused_for_a_vm_off_or_missing() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = client(&sim, "small");
    let id = running_vm(&c, "vm-off").await;
    c.stop(&id).await.unwrap();
    let err = c.console_open(&id).await.unwrap_err();
    assert_eq!((err.kind, err.status), (ErrorKind::Invalid, Some(409)));
    assert!(err.message.contains("[VmNotRunning]"), "{}", err.message);
    assert_eq!(err.route, "vm/porttunnel/vncWebSocket");
    let err = c
        .console_open("6f1c1b1e-8a4e-4a57-9a53-0d7b8f0f3c11")
        .await
        .unwrap_err();
    assert_eq!((err.kind, err.status), (ErrorKind::NotFound, Some(404)));
    assert!(err.message.contains("[VmNotFound]"), "{}", err.message);
    let err = c.console_status("no-such-tunnel").await.unwrap_err();
    assert_eq!((err.kind, err.status), (ErrorKind::NotFound, Some(404)));
    assert_eq!(err.route, "vm/porttunnel/vncWebSocket/{instance_id}");
    assert!(err.message.contains("[TunnelNotFound]"), "{}", err.message);
    let err = c.console_close("no-such-tunnel").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);
    // Bodies the routes cannot read.
    let base = format!(
        "http://127.0.0.1:{}/api/v1.0/client/vm/porttunnel/vncWebSocket",
        c.target().ports.compute
    );
    let http = reqwest::Client::new();
    for (method, url, body) in [
        (reqwest::Method::POST, base.clone(), "{}"),
        (
            reqwest::Method::POST,
            base.clone(),
            r#"{"local_index": " "}"#,
        ),
        (reqwest::Method::POST, base.clone(), "[1]"),
        (reqwest::Method::DELETE, format!("{base}/stop"), "{}"),
        (
            reqwest::Method::DELETE,
            format!("{base}/stop"),
            r#"{"instance_id": ""}"#,
        ),
    ] {
        let status = http
            .request(method.clone(), &url)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 400, "{method} {url} {body}");
    }
    assert!(sim.host("small").unwrap().inventory().consoles.is_empty());
    sim.shutdown().await;
}

#[tokio::test]
async fn a_vm_has_one_tunnel_and_other_paths_and_text_are_refused() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = client(&sim, "small");
    let id = running_vm(&c, "vm-one").await;
    let other = running_vm(&c, "vm-two").await;
    let first = c.console_open(&id).await.unwrap();
    let again = c.console_open(&id).await.unwrap();
    assert_eq!(again.instance_id, first.instance_id);
    assert_eq!(again.ws_url, first.ws_url);
    let second = c.console_open(&other).await.unwrap();
    assert_ne!(second.port, first.port);
    let listed = c.consoles().await.unwrap();
    let mut ids: Vec<&str> = listed.iter().map(|c| c.instance_id.as_str()).collect();
    ids.sort_unstable();
    let mut want = vec![first.instance_id.as_str(), second.instance_id.as_str()];
    want.sort_unstable();
    assert_eq!(ids, want);

    // Only the tunnel's own path upgrades: the port alone is no key.
    let port = first.port.unwrap();
    for path in ["/", "/vnc/", &format!("/vnc/{}", second.instance_id)] {
        let refused =
            tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{port}{path}")).await;
        match refused {
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                assert_eq!(response.status(), 404, "{path}");
            }
            other => panic!("{path}: {other:?}"),
        }
    }
    assert_eq!(sessions(&sim, "small", &id), 0);

    // Text frames are not RFB.
    let mut vnc = Vnc::connect(&first.ws_url).await;
    vnc.handshake("3.8").await;
    vnc.ws.send(Message::text("RFB")).await.unwrap();
    let frame = vnc.closed().await.expect("a Close frame");
    assert_eq!(frame.code, CloseCode::Unsupported);

    // websockify's subprotocol is answered when offered.
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = first.ws_url.as_str().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("sec-websocket-protocol", "binary".parse().unwrap());
    let (ws, response) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(
        response.headers().get("sec-websocket-protocol").unwrap(),
        "binary"
    );
    let mut vnc = Vnc {
        ws,
        buffered: Vec::new(),
    };
    vnc.handshake("3.8").await;
    sim.shutdown().await;
}

#[tokio::test]
async fn stopping_a_tunnel_closes_its_sessions_and_its_port() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = client(&sim, "small");
    let id = running_vm(&c, "vm-stop").await;
    let console = c.console_open(&id).await.unwrap();
    let mut one = Vnc::connect(&console.ws_url).await;
    one.handshake("3.8").await;
    let mut two = Vnc::connect(&console.ws_url).await;
    two.handshake("3.7").await;
    assert_eq!(sessions(&sim, "small", &id), 2);
    assert_eq!(
        c.console_status(&console.instance_id)
            .await
            .unwrap()
            .sessions,
        Some(2)
    );

    c.console_close(&console.instance_id).await.unwrap();
    // Answered once the sessions are over.
    assert_eq!(sessions(&sim, "small", &id), 0);
    for vnc in [&mut one, &mut two] {
        let frame = vnc.closed().await.expect("a Close frame");
        assert_eq!(frame.code, CloseCode::Away);
        assert_eq!(frame.reason, "the console tunnel was stopped");
    }
    assert!(gone(&c, &console).await);
    assert_eq!(
        c.console_close(&console.instance_id)
            .await
            .unwrap_err()
            .kind,
        ErrorKind::NotFound,
        "already closed"
    );
    assert!(
        TcpStream::connect(("127.0.0.1", console.port.unwrap()))
            .await
            .is_err(),
        "the port is closed"
    );
    assert!(sim.host("small").unwrap().inventory().consoles.is_empty());
    // A new tunnel for the same VM is another one.
    let next = c.console_open(&id).await.unwrap();
    assert_ne!(next.instance_id, console.instance_id);
    sim.shutdown().await;
}

#[tokio::test]
async fn the_vm_stopping_crashing_or_its_host_going_down_ends_the_tunnel() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = client(&sim, "small");
    let id = running_vm(&c, "vm-ends").await;
    let host = sim.host("small").unwrap();

    // Stopped.
    let console = c.console_open(&id).await.unwrap();
    let mut vnc = Vnc::connect(&console.ws_url).await;
    vnc.handshake("3.8").await;
    c.stop(&id).await.unwrap();
    let frame = vnc.closed().await.expect("a Close frame");
    assert_eq!(
        (frame.code, frame.reason.as_str()),
        (CloseCode::Away, "the VM is no longer running")
    );
    eventually("the tunnel to end", || gone(&c, &console)).await;
    assert_eq!(sessions(&sim, "small", &id), 0);

    // Crashed.
    c.start(&id).await.unwrap();
    let console = c.console_open(&id).await.unwrap();
    let mut vnc = Vnc::connect(&console.ws_url).await;
    vnc.handshake("3.8").await;
    host.faults()
        .apply(&FaultSpec {
            crash_vm: vec!["vm-ends".into()],
            ..FaultSpec::default()
        })
        .unwrap();
    assert!(vnc.closed().await.is_some());
    eventually("the tunnel to end", || gone(&c, &console)).await;

    // The host down: its daemons and its tunnels with it.
    c.start(&id).await.unwrap();
    let console = c.console_open(&id).await.unwrap();
    let mut vnc = Vnc::connect(&console.ws_url).await;
    vnc.handshake("3.8").await;
    host.take_down().await;
    let frame = vnc.closed().await.expect("a Close frame");
    assert_eq!(frame.reason, "the host went down");
    host.bring_up().await.unwrap();
    assert!(gone(&c, &console).await);

    // Deleted.
    let console = c.console_open(&id).await.unwrap();
    let mut vnc = Vnc::connect(&console.ws_url).await;
    vnc.handshake("3.8").await;
    c.unregister(&id).await.unwrap();
    assert!(vnc.closed().await.is_some());
    eventually("the tunnel to end", || gone(&c, &console)).await;
    assert!(host.inventory().consoles.is_empty());
    sim.shutdown().await;
}

#[tokio::test]
async fn faults_hit_the_console_routes_and_dropping_the_simulator_closes_tunnels() {
    let sim = sim(Duration::from_millis(20)).await;
    let c = client(&sim, "small");
    let id = running_vm(&c, "vm-faults").await;
    let host = sim.host("small").unwrap();
    host.faults()
        .apply(&FaultSpec {
            fail_next: vec![
                atomos_sim::FailNext {
                    route: "vm/porttunnel/vncWebSocket".into(),
                    status: 503,
                    count: 1,
                },
                atomos_sim::FailNext {
                    route: "vm/porttunnel/vncWebSocket/{instance_id}".into(),
                    status: 500,
                    count: 1,
                },
            ],
            ..FaultSpec::default()
        })
        .unwrap();
    let err = c.console_open(&id).await.unwrap_err();
    assert_eq!((err.kind, err.status), (ErrorKind::Transient, Some(503)));
    let console = c.console_open(&id).await.unwrap();
    // The status is a read: retried past the injected failure.
    assert!(c.console_status(&console.instance_id).await.unwrap().open);

    let mut vnc = Vnc::connect(&console.ws_url).await;
    vnc.handshake("3.8").await;
    drop(host);
    drop(sim);
    // Aborted: the connection ends, with or without a Close frame.
    let _ = vnc.closed().await;
    eventually("the port to close", || async {
        TcpStream::connect(("127.0.0.1", console.port.unwrap()))
            .await
            .is_err()
    })
    .await;
}
