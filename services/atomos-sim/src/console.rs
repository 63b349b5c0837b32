//! VM consoles: the compute daemon's `porttunnel/vncWebSocket` tunnels.
//!
//! A tunnel is opened for a VM that is powered on (booting or running). It
//! listens on `127.0.0.1:<fresh port>` and accepts WebSocket connections
//! on one path, `/vnc/<instance_id>` (the tunnel's id: the path is the
//! capability, as pages on the same machine can open WebSockets to
//! loopback). Each connection is a session: binary frames carrying the RFB
//! protocol of a real VNC server for the VM's screen ([`crate::rfb`]). A
//! VM has one tunnel at a time, with any number of sessions.
//!
//! A tunnel ends when it is stopped, when its VM stops, crashes or goes
//! away, when the host goes down, and when the simulator stops. Its
//! listener closes and its sessions get a WebSocket Close frame (code 1001,
//! the reason in words). Tunnels are not kept in the state file.

use crate::host::{SimHost, WeakHost};
use crate::rfb::{self, Screen};
use crate::state::{Power, SimConsole, lock};
use atomos_driver::VmState;
use futures::{SinkExt, StreamExt};
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{
    Callback, ErrorResponse, Request, Response,
};
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// Where tunnels listen: loopback only, like port forwards.
const CONSOLE_IP: Ipv4Addr = Ipv4Addr::LOCALHOST;
/// How long a client may take over the WebSocket handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a closing tunnel waits for its sessions to say goodbye.
const GOODBYE: Duration = Duration::from_secs(2);
/// Bytes carried between the WebSocket and the RFB server at a time.
const CHUNK: usize = 64 * 1024;
/// Largest WebSocket message accepted from a client.
const MAX_MESSAGE: usize = 1 << 20;

/// Why a tunnel ended, as its sessions' Close frames say it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    Stopped,
    VmStopped,
    HostDown,
}

impl Ended {
    fn reason(&self) -> &'static str {
        match self {
            Ended::Stopped => "the console tunnel was stopped",
            Ended::VmStopped => "the VM is no longer running",
            Ended::HostDown => "the host went down",
        }
    }
}

/// One open tunnel.
struct Tunnel {
    console: SimConsole,
    sessions: Arc<AtomicU32>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Tunnel {
    fn snapshot(&self) -> SimConsole {
        SimConsole {
            sessions: self.sessions.load(Ordering::SeqCst),
            ..self.console.clone()
        }
    }
}

/// One host's tunnels.
pub(crate) struct Consoles {
    /// By instance id; `None` once closed for good.
    tunnels: Mutex<Option<HashMap<String, Tunnel>>>,
}

impl Drop for Consoles {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

impl Consoles {
    pub(crate) fn new() -> Self {
        Consoles {
            tunnels: Mutex::new(Some(HashMap::new())),
        }
    }

    /// Every open tunnel, with its sessions counted now.
    pub(crate) fn list(&self) -> Vec<SimConsole> {
        let mut list: Vec<SimConsole> = lock(&self.tunnels)
            .iter()
            .flat_map(HashMap::values)
            .filter(|t| !t.task.is_finished())
            .map(Tunnel::snapshot)
            .collect();
        list.sort_by(|a, b| a.created.cmp(&b.created).then(a.id.cmp(&b.id)));
        list
    }

    pub(crate) fn get(&self, id: &str) -> Option<SimConsole> {
        lock(&self.tunnels)
            .as_ref()?
            .get(id)
            .filter(|t| !t.task.is_finished())
            .map(Tunnel::snapshot)
    }

    /// The open tunnel of VM `vm_id`, else a new one: `Ok(None)` once the
    /// consoles are closed for good.
    pub(crate) fn open(
        &self,
        host: &SimHost,
        vm_id: &str,
        vm_name: &str,
    ) -> std::io::Result<Option<SimConsole>> {
        let mut tunnels = lock(&self.tunnels);
        let Some(tunnels) = tunnels.as_mut() else {
            return Ok(None);
        };
        tunnels.retain(|_, t| !t.task.is_finished());
        if let Some(open) = tunnels.values().find(|t| t.console.vm_id == vm_id) {
            return Ok(Some(open.snapshot()));
        }
        let listener = std::net::TcpListener::bind(SocketAddr::from((CONSOLE_IP, 0)))?;
        listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(listener)?;
        let port = listener.local_addr()?.port();
        let id = uuid::Uuid::new_v4().to_string();
        let console = SimConsole {
            ws_url: format!("ws://{CONSOLE_IP}:{port}/vnc/{id}"),
            id: id.clone(),
            vm_id: vm_id.to_owned(),
            vm_name: vm_name.to_owned(),
            port,
            created: host.wall_clock(),
            sessions: 0,
        };
        let sessions = Arc::new(AtomicU32::new(0));
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(run(
            host.downgrade(),
            console.clone(),
            listener,
            sessions.clone(),
            stopped,
        ));
        tracing::info!(host = host.name(), console = %id, vm = %vm_name, port, "console tunnel open");
        tunnels.insert(
            id,
            Tunnel {
                console: console.clone(),
                sessions,
                stop,
                task,
            },
        );
        Ok(Some(console))
    }

    /// Stops tunnel `id`: its task, done once its port is closed and its
    /// sessions are over; `None` for an unknown (or ended) tunnel.
    pub(crate) fn stop(&self, id: &str) -> Option<JoinHandle<()>> {
        let tunnel = lock(&self.tunnels).as_mut()?.remove(id)?;
        if tunnel.task.is_finished() {
            return None;
        }
        tunnel.stop.send_replace(true);
        Some(tunnel.task)
    }

    /// Forgets tunnel `id` after it ended by itself.
    fn forget(&self, id: &str) {
        if let Some(tunnels) = lock(&self.tunnels).as_mut() {
            tunnels.remove(id);
        }
    }

    /// Stops every tunnel for good; their tasks, aborted.
    pub(crate) fn close(&self) -> Vec<JoinHandle<()>> {
        let tunnels = lock(&self.tunnels).take().unwrap_or_default();
        tunnels
            .into_values()
            .map(|t| {
                t.task.abort();
                t.task
            })
            .collect()
    }
}

/// Whether VM `vm_id` of `host` is powered on (booting or running).
fn powered_on(host: &SimHost, vm_id: &str) -> bool {
    host.state()
        .vms
        .iter()
        .any(|vm| vm.id == vm_id && vm.power != Power::Off)
}

/// What VM `vm_id`'s screen shows now; `None` once it or its host is gone.
fn screen(host: &WeakHost, vm_id: &str) -> Option<Screen> {
    let host = host.upgrade()?;
    let (now, boot) = (host.now(), host.boot_time());
    let state = host.state();
    let vm = state.vms.iter().find(|vm| vm.id == vm_id)?;
    let word = match vm.observe(now, boot).0 {
        VmState::Starting => "starting",
        VmState::Running => "running",
        VmState::Stopping => "stopping",
        VmState::Off => "off",
        VmState::Paused => "paused",
        VmState::Unknown(_) => "unknown",
    };
    Some(Screen {
        name: vm.name.clone(),
        state: word.to_owned(),
    })
}

/// Serves one tunnel until it is stopped, its VM stops or goes away, or
/// the host goes down; then closes its port and ends its sessions.
async fn run(
    host: WeakHost,
    console: SimConsole,
    listener: TcpListener,
    sessions: Arc<AtomicU32>,
    mut stopped: watch::Receiver<bool>,
) {
    let (ending, ended) = watch::channel(None::<Ended>);
    let (mut changes, mut down) = match host.upgrade() {
        Some(h) => (h.forwards().changes(), h.faults().down_watch()),
        None => return,
    };
    let path = format!("/vnc/{}", console.id);
    let why = loop {
        // Checked first, and again on every change: a VM that stopped while
        // the tunnel opened ends it too.
        match host.upgrade() {
            Some(h) if h.faults().is_down() => break Ended::HostDown,
            Some(h) if !powered_on(&h, &console.vm_id) => break Ended::VmStopped,
            Some(_) => {}
            None => break Ended::HostDown,
        }
        tokio::select! {
            accepted = listener.accept() => match accepted {
                // Sessions outlive this task by the time they take to say
                // goodbye: they end when `ending` says so or is dropped.
                Ok((stream, _)) => drop(tokio::spawn(session(
                    stream,
                    path.clone(),
                    host.clone(),
                    console.clone(),
                    sessions.clone(),
                    ended.clone(),
                ))),
                Err(e) => {
                    tracing::warn!(console = %console.id, error = %e, "console accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            changed = stopped.changed() => if changed.is_err() || *stopped.borrow() {
                break Ended::Stopped;
            },
            changed = changes.changed() => if changed.is_err() {
                break Ended::HostDown;
            },
            changed = down.changed() => if changed.is_err() {
                break Ended::HostDown;
            },
        }
    };
    drop(listener);
    if let Some(h) = host.upgrade() {
        h.consoles().forget(&console.id);
    }
    tracing::info!(console = %console.id, vm = %console.vm_name, reason = why.reason(), "console tunnel closed");
    ending.send_replace(Some(why));
    // Done once every session has sent its Close frame (or in a while).
    let said_goodbye = async {
        while sessions.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let _ = tokio::time::timeout(GOODBYE, said_goodbye).await;
}

/// Counts a session while it lives.
struct Counted(Arc<AtomicU32>);

impl Counted {
    fn new(sessions: Arc<AtomicU32>) -> Self {
        sessions.fetch_add(1, Ordering::SeqCst);
        Counted(sessions)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Accepts the WebSocket upgrade on its path only, answering the `binary`
/// subprotocol when the client offers it (websockify's and older noVNC's).
struct Upgrade<'a> {
    path: &'a str,
}

impl Callback for Upgrade<'_> {
    fn on_request(
        self,
        request: &Request,
        mut response: Response,
    ) -> Result<Response, ErrorResponse> {
        let path = self.path;
        if request.uri().path() != path {
            let mut refused = ErrorResponse::new(Some("no such console tunnel".to_owned()));
            *refused.status_mut() = StatusCode::NOT_FOUND;
            return Err(refused);
        }
        let offers_binary = request
            .headers()
            .get_all("sec-websocket-protocol")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|p| p.trim() == "binary");
        if offers_binary {
            response
                .headers_mut()
                .insert("sec-websocket-protocol", HeaderValue::from_static("binary"));
        }
        Ok(response)
    }
}

/// One client: the WebSocket handshake, then RFB in binary frames until
/// either side ends it or the tunnel does.
async fn session(
    stream: TcpStream,
    path: String,
    host: WeakHost,
    console: SimConsole,
    sessions: Arc<AtomicU32>,
    mut ended: watch::Receiver<Option<Ended>>,
) {
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE));
    let accepted = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        tokio_tungstenite::accept_hdr_async_with_config(
            stream,
            Upgrade { path: &path },
            Some(config),
        ),
    )
    .await;
    let ws = match accepted {
        Ok(Ok(ws)) => ws,
        Ok(Err(e)) => {
            tracing::debug!(console = %console.id, error = %e, "console handshake refused");
            return;
        }
        Err(_) => return,
    };
    let counted = Counted::new(sessions);
    tracing::debug!(console = %console.id, "console session open");
    let (rfb_side, ws_side) = tokio::io::duplex(CHUNK);
    let vm_id = console.vm_id.clone();
    let served = rfb::serve(rfb_side, &console.vm_name, || screen(&host, &vm_id));
    let (mut sink, mut stream) = ws.split();
    let close = tokio::select! {
        outcome = pump(&mut sink, &mut stream, ws_side, served) => match outcome {
            Outcome::ClientDone | Outcome::Served(Ok(())) => None,
            Outcome::NotRfb => Some((CloseCode::Unsupported, "binary frames only".to_owned())),
            Outcome::Served(Err(rfb::RfbError::VmGone)) => {
                Some((CloseCode::Away, Ended::VmStopped.reason().to_owned()))
            }
            Outcome::Served(Err(e)) => {
                tracing::debug!(console = %console.id, error = %e, "console session failed");
                Some((CloseCode::Protocol, e.to_string()))
            }
        },
        why = ended.wait_for(Option::is_some) => {
            let reason = why.ok().and_then(|w| w.as_ref().map(Ended::reason)).unwrap_or("closing");
            Some((CloseCode::Away, reason.to_owned()))
        }
    };
    let Some((code, reason)) = close else {
        // Completes the client's closing handshake, if it started one.
        let _ = tokio::time::timeout(GOODBYE, sink.close()).await;
        tracing::debug!(console = %console.id, "console session over");
        return;
    };
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = tokio::time::timeout(GOODBYE, sink.send(Message::Close(Some(frame)))).await;
    // Said: the session no longer counts, while it waits a little for
    // the client's own Close (or its hanging up).
    drop(counted);
    let _ = tokio::time::timeout(GOODBYE, async {
        while let Some(Ok(message)) = stream.next().await {
            if message.is_close() {
                break;
            }
        }
    })
    .await;
    tracing::debug!(console = %console.id, "console session over");
}

/// How [`pump`] ended.
enum Outcome {
    /// The client closed or hung up.
    ClientDone,
    /// The client sent a text frame: not RFB.
    NotRfb,
    /// The RFB server ended, and all it wrote was sent.
    Served(Result<(), rfb::RfbError>),
}

type Sink = futures::stream::SplitSink<WebSocketStream<TcpStream>, Message>;
type Stream = futures::stream::SplitStream<WebSocketStream<TcpStream>>;

/// Runs the RFB server `served` on the other end of `rfb`, carrying bytes
/// between the client's binary frames and it, both ways at once, until
/// either side is done.
async fn pump(
    sink: &mut Sink,
    stream: &mut Stream,
    rfb: DuplexStream,
    served: impl Future<Output = Result<(), rfb::RfbError>>,
) -> Outcome {
    let (mut from_rfb, mut to_rfb) = tokio::io::split(rfb);
    let inbound = async {
        loop {
            match stream.next().await {
                Some(Ok(Message::Binary(bytes))) => {
                    // A server that is over drops what comes after.
                    let _ = to_rfb.write_all(&bytes).await;
                }
                Some(Ok(Message::Text(_))) => return Outcome::NotRfb,
                // Pings are answered by the WebSocket layer itself.
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                Some(Ok(Message::Close(_)) | Err(_)) | None => return Outcome::ClientDone,
            }
        }
    };
    // Once the server is over, what it wrote last is still sent, up to its end.
    let outbound = async {
        let mut buf = vec![0u8; CHUNK];
        loop {
            match from_rfb.read(&mut buf).await {
                Ok(0) | Err(_) => return true,
                Ok(n) => {
                    if sink.send(Message::binary(buf[..n].to_vec())).await.is_err() {
                        return false;
                    }
                }
            }
        }
    };
    tokio::select! {
        outcome = inbound => outcome,
        (result, sent) = async { tokio::join!(served, outbound) } => {
            if sent { Outcome::Served(result) } else { Outcome::ClientDone }
        }
    }
}
