//! Port forwards for real, on loopback: each forward of a host listens on
//! `127.0.0.1:<port>` while the host is up, and relays to the real address
//! that stands in for its VM's guest port ([`SimHost::serve_guest_port`])
//! while the VM runs.
//!
//! A TCP forward relays every accepted connection both ways; a UDP forward
//! relays datagrams, through one upstream socket per client address, and
//! sends the replies back. A connection to a VM that is not running, is gone
//! or serves nothing on the port is closed at once (a datagram is dropped),
//! and one open is closed as soon as that becomes true, as a NAT to a dead
//! port would. Listeners and relays are tasks held by the host's
//! [`Forwards`]: deleting a forward, taking the host down, dropping the
//! simulator stops them.

use crate::host::{SimHost, WeakHost};
use crate::state::{SimPortForward, lock};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle, JoinSet};

/// Where forwards listen, whatever address the daemons bind: loopback only.
pub(crate) const FORWARD_IP: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// Pause after an accept or bind failure, doubled up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(20);
const MAX_PAUSE: Duration = Duration::from_secs(1);
/// How long a connection to a guest's stand-in may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A UDP client whose guest stays silent this long loses its upstream
/// socket (conntrack's UDP timeout); its next datagram opens another.
const UDP_IDLE: Duration = Duration::from_secs(30);
/// UDP clients relayed at once by one forward; datagrams of more are dropped.
const MAX_UDP_CLIENTS: usize = 256;
/// The largest UDP payload.
const DATAGRAM: usize = 65_535;

/// Whether a forward's listener is open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Listening {
    Open,
    /// Closed while the host is down.
    Closed,
    /// The port could not be bound again; retried.
    Failed(String),
}

/// A bound forward port.
pub(crate) enum Socket {
    Tcp(TcpListener),
    Udp(UdpSocket),
}

/// Binds `127.0.0.1:<port>` for `protocol` (`tcp` or `udp`). TCP ports are
/// bound so that they can be bound again right after being closed, which
/// still fails while anything else listens there.
pub(crate) fn bind(protocol: &str, port: u16) -> io::Result<Socket> {
    let addr = SocketAddr::from((FORWARD_IP, port));
    match protocol {
        "tcp" => crate::listener::bind(addr).map(Socket::Tcp),
        "udp" => {
            // No SO_REUSEADDR: on UDP it would let two sockets share the port.
            let socket = std::net::UdpSocket::bind(addr)?;
            socket.set_nonblocking(true)?;
            UdpSocket::from_std(socket).map(Socket::Udp)
        }
        other => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("protocol {other:?} is neither tcp nor udp"),
        )),
    }
}

/// One host's forwards at work, and what stands in for its guests' ports.
pub(crate) struct Forwards {
    /// Forwards running, by id; `None` once closed for good.
    running: Mutex<Option<HashMap<String, Running>>>,
    /// (VM id, guest port) → the real address standing in for it.
    guest_ports: Mutex<HashMap<(String, u16), SocketAddr>>,
    /// Bumped whenever a guest may have stopped being reachable where it
    /// was (a VM stopped, crashed, rebooted or gone, a guest port served
    /// elsewhere or no more): open relays check theirs again.
    changed: watch::Sender<()>,
}

struct Running {
    task: JoinHandle<()>,
    listening: watch::Receiver<Listening>,
    /// `20000/tcp`.
    label: String,
}

impl Drop for Forwards {
    fn drop(&mut self) {
        // Aborted; nobody is left to wait for them.
        let _ = self.close();
    }
}

impl Forwards {
    /// `changed` is also bumped by the host's faults (crashed, lost VMs).
    pub(crate) fn new(changed: watch::Sender<()>) -> Self {
        Forwards {
            running: Mutex::new(Some(HashMap::new())),
            guest_ports: Mutex::new(HashMap::new()),
            changed,
        }
    }

    /// Tells open relays to check their guest again.
    pub(crate) fn notify(&self) {
        self.changed.send_replace(());
    }

    /// Bumped when a guest may have stopped (console tunnels watch it too).
    pub(crate) fn changes(&self) -> watch::Receiver<()> {
        self.changed.subscribe()
    }

    pub(crate) fn serve_guest(&self, vm_id: String, port: u16, upstream: SocketAddr) {
        lock(&self.guest_ports).insert((vm_id, port), upstream);
        self.notify();
    }

    /// Whether something stood in for that port.
    pub(crate) fn stop_guest(&self, vm_id: &str, port: u16) -> bool {
        let removed = lock(&self.guest_ports)
            .remove(&(vm_id.to_owned(), port))
            .is_some();
        self.notify();
        removed
    }

    pub(crate) fn guest(&self, vm_id: &str, port: u16) -> Option<SocketAddr> {
        lock(&self.guest_ports)
            .get(&(vm_id.to_owned(), port))
            .copied()
    }

    /// Forgets the guest ports of VMs for which `keep` is false.
    pub(crate) fn retain_guests(&self, keep: impl Fn(&str) -> bool) {
        lock(&self.guest_ports).retain(|(vm_id, _), _| keep(vm_id));
    }

    /// Starts serving `forward` of `host`, on `socket` when already bound;
    /// false once the forwards are closed for good.
    pub(crate) fn start(
        &self,
        host: &SimHost,
        forward: SimPortForward,
        socket: Option<Socket>,
    ) -> bool {
        let mut running = lock(&self.running);
        let Some(running) = running.as_mut() else {
            return false;
        };
        let listening = watch::channel(if socket.is_some() {
            Listening::Open
        } else {
            Listening::Closed
        })
        .0;
        let receiver = listening.subscribe();
        let label = forward.label();
        let id = forward.id.clone();
        let task = tokio::spawn(run(
            host.downgrade(),
            Arc::new(forward),
            socket,
            host.faults().down_watch(),
            listening,
        ));
        let replaced = running.insert(
            id,
            Running {
                task,
                listening: receiver,
                label,
            },
        );
        if let Some(old) = replaced {
            old.task.abort();
        }
        true
    }

    /// Stops forward `id`: its task, to await until the port is closed.
    pub(crate) fn stop(&self, id: &str) -> Option<JoinHandle<()>> {
        let stopped = lock(&self.running).as_mut()?.remove(id)?;
        stopped.task.abort();
        Some(stopped.task)
    }

    /// Stops every forward for good; their tasks, to await until the ports
    /// are closed.
    pub(crate) fn close(&self) -> Vec<JoinHandle<()>> {
        let running = lock(&self.running).take().unwrap_or_default();
        running
            .into_values()
            .map(|r| {
                r.task.abort();
                r.task
            })
            .collect()
    }

    /// Every forward's label and listener state.
    pub(crate) fn listening(&self) -> Vec<(String, watch::Receiver<Listening>)> {
        lock(&self.running)
            .iter()
            .flat_map(HashMap::values)
            .map(|r| (r.label.clone(), r.listening.clone()))
            .collect()
    }
}

/// Serves one forward while the host is up, closing its port (and every
/// relay) while it is down and binding it again when it comes back.
async fn run(
    host: WeakHost,
    forward: Arc<SimPortForward>,
    mut socket: Option<Socket>,
    mut down: watch::Receiver<bool>,
    listening: watch::Sender<Listening>,
) {
    let mut pause = FIRST_PAUSE;
    loop {
        if *down.borrow_and_update() {
            if socket.take().is_some() || *listening.borrow() == Listening::Open {
                tracing::info!(forward = %forward.id, port = %forward.label(), "port forward closed: host down");
            }
            listening.send_replace(Listening::Closed);
            if down.wait_for(|down| !*down).await.is_err() {
                // The host is gone.
                return;
            }
            continue;
        }
        let open = match socket.take() {
            Some(open) => open,
            None => match bind(&forward.protocol, forward.port) {
                Ok(open) => {
                    tracing::info!(forward = %forward.id, port = %forward.label(), "port forward listening");
                    pause = FIRST_PAUSE;
                    open
                }
                Err(e) => {
                    tracing::warn!(forward = %forward.id, port = %forward.label(), error = %e,
                        "port forward cannot listen, retrying");
                    listening.send_replace(Listening::Failed(e.to_string()));
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        changed = down.changed() => if changed.is_err() { return },
                    }
                    pause = (pause * 2).min(MAX_PAUSE);
                    continue;
                }
            },
        };
        listening.send_replace(Listening::Open);
        // Dropping `serve` closes the port and every relay.
        tokio::select! {
            () = serve(&host, &forward, open) => return,
            changed = down.changed() => if changed.is_err() { return },
        }
    }
}

/// Relays through `socket` until the host is gone.
async fn serve(host: &WeakHost, forward: &Arc<SimPortForward>, socket: Socket) {
    match socket {
        Socket::Tcp(listener) => serve_tcp(host, forward, listener).await,
        Socket::Udp(socket) => serve_udp(host, forward, socket).await,
    }
}

async fn serve_tcp(host: &WeakHost, forward: &Arc<SimPortForward>, listener: TcpListener) {
    let mut relays = JoinSet::new();
    let mut pause = FIRST_PAUSE;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    pause = FIRST_PAUSE;
                    relays.spawn(relay_tcp(host.clone(), forward.clone(), client));
                }
                Err(e) if transient(&e) => {}
                Err(e) => {
                    // E.g. out of file descriptors: wait for some to close.
                    tracing::error!(forward = %forward.id, error = %e, "port forward accept failed");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
            },
            Some(_) = relays.join_next() => {}
        }
        if host.upgrade().is_none() {
            return;
        }
    }
}

fn transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Where the forward's guest port is served now, with a receiver of later
/// changes subscribed first, so that none is missed.
fn reachable(
    host: &WeakHost,
    forward: &SimPortForward,
) -> Option<(SocketAddr, watch::Receiver<()>)> {
    let host = host.upgrade()?;
    let changes = host.forwards().changes();
    let upstream = host.guest_upstream(&forward.vm_id, forward.target_port)?;
    Some((upstream, changes))
}

/// Returns once the forward's guest port no longer leads to `upstream`, or
/// the host is gone.
async fn unreachable(
    host: &WeakHost,
    forward: &SimPortForward,
    upstream: SocketAddr,
    changes: &mut watch::Receiver<()>,
) {
    loop {
        if changes.changed().await.is_err() {
            return;
        }
        let Some(host) = host.upgrade() else {
            return;
        };
        if host.guest_upstream(&forward.vm_id, forward.target_port) != Some(upstream) {
            return;
        }
    }
}

/// Relays one connection both ways; dropping `client` unrelayed closes it.
async fn relay_tcp(host: WeakHost, forward: Arc<SimPortForward>, mut client: TcpStream) {
    let Some((upstream, mut changes)) = reachable(&host, &forward) else {
        tracing::debug!(forward = %forward.id, "connection closed: the guest is not reachable");
        return;
    };
    let mut guest = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(upstream)).await
    {
        Ok(Ok(guest)) => guest,
        Ok(Err(e)) => {
            tracing::debug!(forward = %forward.id, %upstream, error = %e, "connection closed: the guest refused it");
            return;
        }
        Err(_) => {
            tracing::debug!(forward = %forward.id, %upstream, "connection closed: the guest did not answer");
            return;
        }
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut guest) => {}
        () = unreachable(&host, &forward, upstream, &mut changes) => {
            tracing::debug!(forward = %forward.id, "connection closed: the guest went away");
        }
    }
}

/// One UDP client's upstream socket and the task sending its replies back.
struct UdpClient {
    upstream: SocketAddr,
    guest: Arc<UdpSocket>,
    replies: AbortHandle,
}

async fn serve_udp(host: &WeakHost, forward: &Arc<SimPortForward>, socket: UdpSocket) {
    let socket = Arc::new(socket);
    let mut clients: HashMap<SocketAddr, UdpClient> = HashMap::new();
    let mut replies = JoinSet::new();
    let mut buf = vec![0u8; DATAGRAM];
    let mut pause = FIRST_PAUSE;
    loop {
        let (len, from) = tokio::select! {
            received = socket.recv_from(&mut buf) => match received {
                Ok(received) => received,
                Err(e) if transient(&e) => continue,
                Err(e) => {
                    tracing::error!(forward = %forward.id, error = %e, "port forward receive failed");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                    continue;
                }
            },
            Some(_) = replies.join_next() => continue,
        };
        pause = FIRST_PAUSE;
        if host.upgrade().is_none() {
            return;
        }
        let Some((upstream, changes)) = reachable(host, forward) else {
            // A datagram to a dead port is lost.
            if let Some(gone) = clients.remove(&from) {
                gone.replies.abort();
            }
            continue;
        };
        let current = clients
            .get(&from)
            .filter(|c| c.upstream == upstream && !c.replies.is_finished())
            .map(|c| c.guest.clone());
        let guest = match current {
            Some(guest) => guest,
            None => {
                clients.retain(|_, c| !c.replies.is_finished());
                if clients.len() >= MAX_UDP_CLIENTS && !clients.contains_key(&from) {
                    tracing::warn!(forward = %forward.id, "too many UDP clients; datagram dropped");
                    continue;
                }
                let guest = match connect_udp(upstream).await {
                    Ok(guest) => Arc::new(guest),
                    Err(e) => {
                        tracing::debug!(forward = %forward.id, %upstream, error = %e, "datagram dropped");
                        continue;
                    }
                };
                let task = relay_replies(
                    host.clone(),
                    forward.clone(),
                    guest.clone(),
                    Arc::downgrade(&socket),
                    from,
                    upstream,
                    changes,
                );
                let client = UdpClient {
                    upstream,
                    guest: guest.clone(),
                    replies: replies.spawn(task),
                };
                if let Some(old) = clients.insert(from, client) {
                    old.replies.abort();
                }
                guest
            }
        };
        if let Err(e) = guest.send(&buf[..len]).await {
            tracing::debug!(forward = %forward.id, %upstream, error = %e, "datagram not relayed");
        }
    }
}

/// A socket connected to `upstream`, on loopback when `upstream` is.
async fn connect_udp(upstream: SocketAddr) -> io::Result<UdpSocket> {
    let local: IpAddr = match upstream.ip() {
        IpAddr::V4(ip) if ip.is_loopback() => Ipv4Addr::LOCALHOST.into(),
        IpAddr::V6(ip) if ip.is_loopback() => Ipv6Addr::LOCALHOST.into(),
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let socket = UdpSocket::bind((local, 0)).await?;
    socket.connect(upstream).await?;
    Ok(socket)
}

/// Sends what the guest answers back to `client` through the forward's
/// socket, until the guest is silent for [`UDP_IDLE`], refuses (nothing
/// listens there) or goes away. The forward's socket is not kept open by
/// this task: it closes with the forward.
async fn relay_replies(
    host: WeakHost,
    forward: Arc<SimPortForward>,
    guest: Arc<UdpSocket>,
    socket: Weak<UdpSocket>,
    client: SocketAddr,
    upstream: SocketAddr,
    mut changes: watch::Receiver<()>,
) {
    let mut buf = vec![0u8; DATAGRAM];
    let replies = async {
        while let Ok(Ok(len)) = tokio::time::timeout(UDP_IDLE, guest.recv(&mut buf)).await {
            let Some(socket) = socket.upgrade() else {
                return;
            };
            if let Err(e) = socket.send_to(&buf[..len], client).await {
                tracing::debug!(forward = %forward.id, %client, error = %e, "reply not relayed");
            }
        }
    };
    tokio::select! {
        () = replies => {}
        () = unreachable(&host, &forward, upstream, &mut changes) => {}
    }
}
