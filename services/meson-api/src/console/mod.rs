//! The console relay: a client's WebSocket on meson joined to the console
//! WebSocket of the VM's host (AtomOS `porttunnel/vncWebSocket`).
//!
//! This is the one place the API process talks to a host: it carries a
//! session's bytes, and opens (and, after the VM's last session, closes)
//! the VM's console tunnel there; nothing else of the host's changes.
//!
//! A session: the client answers VNC authentication with the console's
//! password ([`rfb::authenticate`]); meson opens the VM's tunnel, connects
//! to it and passes its security handshake ([`rfb::attach`]); then the two
//! legs are relayed until either closes, the user deletes the console, or
//! the client sends no input (keys, pointer, clipboard) for the idle
//! limit. Each session is recorded in the audit log when it begins (or is
//! refused) and when it ends, and counted in `meson_console_sessions`.

pub mod rfb;

use crate::app::consoles::Claimed;
use crate::gate::Audit;
use crate::state::AppState;
use atomos_driver::{AtomosClient, ClientOptions};
use futures::{SinkExt, StreamExt};
use meson_core::ConsoleId;
use meson_core::audit::AuditEntry;
use meson_core::console::{ConsoleStatus, HEARTBEAT};
use rfb::{Leg, RfbError};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// How consoles behave.
#[derive(Clone, Debug)]
pub struct ConsoleConfig {
    /// A session whose client sends no input this long is closed.
    pub idle: Duration,
    /// How meson calls the hosts' consoles.
    pub atomos: ClientOptions,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        ConsoleConfig {
            idle: Duration::from_secs(900),
            atomos: ClientOptions {
                timeout: Duration::from_secs(10),
                retries: 1,
                ..ClientOptions::default()
            },
        }
    }
}

/// How often the client's leg is pinged: its connection is never idle long
/// enough for the server's idle timeout, and a client gone is noticed.
const PING_EVERY: Duration = Duration::from_secs(20);
/// The longest a host's console may take to answer its WebSocket.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a session ended, and how much it carried.
struct Ended {
    reason: String,
    bytes_in: i64,
    bytes_out: i64,
}

/// Serves a claimed console on the client's WebSocket `ws` to its end.
pub async fn serve<S>(
    state: AppState,
    claimed: Claimed,
    ws: tokio_tungstenite::WebSocketStream<S>,
    correlation_id: String,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let id = claimed.console.id;
    let audit = |operation: &'static str, status: u16| {
        let state = state.clone();
        let entry = entry(&claimed, operation, &correlation_id);
        async move { Audit { entry }.record(&state, status).await }
    };
    let mut client = Leg::new(ws);
    let minor = match rfb::authenticate(&mut client, &claimed.password).await {
        Ok(minor) => minor,
        Err(e) => {
            let status = match e {
                RfbError::WrongPassword => 401,
                _ => 400,
            };
            counted("refused");
            let reason = e.to_string();
            tracing::info!(console = %id, %reason, "console session refused");
            close_row(&state, id, &reason, 0, 0).await;
            audit("console_connect", status).await;
            close_leg(&mut client, &reason).await;
            return;
        }
    };
    let mut host = match attach(&state, &claimed).await {
        Ok(host) => host,
        Err(why) => {
            counted("unreachable");
            let reason = format!("the VM's console could not be reached: {why}");
            tracing::warn!(console = %id, %reason, "console session failed");
            rfb::refuse(&mut client, minor, &reason).await;
            close_row(&state, id, &reason, 0, 0).await;
            audit("console_connect", 502).await;
            close_leg(&mut client, &reason).await;
            return;
        }
    };
    if rfb::accept(&mut client).await.is_err() {
        close_row(&state, id, "the client closed it", 0, 0).await;
        close_leg(&mut host, "the client closed it").await;
        return;
    }
    counted("opened");
    audit("console_connect", 101).await;
    tracing::info!(console = %id, vm = %claimed.vm.id, "console session open");
    metrics::gauge!("meson_console_sessions").increment(1.0);
    let ended = relay(&state, id, &mut client, &mut host).await;
    metrics::gauge!("meson_console_sessions").decrement(1.0);
    tracing::info!(console = %id, reason = %ended.reason, bytes_in = ended.bytes_in,
        bytes_out = ended.bytes_out, "console session ended");
    close_leg(&mut client, &ended.reason).await;
    close_leg(&mut host, "the session ended").await;
    close_row(&state, id, &ended.reason, ended.bytes_in, ended.bytes_out).await;
    audit("console_disconnect", 200).await;
    release_tunnel(&state, &claimed).await;
}

fn counted(result: &'static str) {
    metrics::counter!("meson_console_sessions_total", "result" => result).increment(1);
}

fn entry(claimed: &Claimed, operation: &str, correlation_id: &str) -> AuditEntry {
    let c = &claimed.console;
    AuditEntry {
        id: 0,
        at: chrono::Utc::now(),
        tenant: c.tenant.to_string(),
        subject: c.subject.clone(),
        role: c.role.clone(),
        operation: operation.to_owned(),
        method: "GET".to_owned(),
        path: format!("/v1/consoles/{}/websocket", c.id),
        resource_type: Some("console".to_owned()),
        resource_id: Some(c.id.to_string()),
        action_id: None,
        status: 0,
        correlation_id: correlation_id.to_owned(),
    }
}

/// Records the session's end (a deleted console keeps its reason).
async fn close_row(state: &AppState, id: ConsoleId, reason: &str, bytes_in: i64, bytes_out: i64) {
    let closed = meson_db::scope::system(meson_db::consoles::close(
        &state.app.pool,
        id,
        reason,
        bytes_in,
        bytes_out,
    ))
    .await;
    if let Err(e) = closed {
        // Shown closed all the same once its heartbeats stop.
        tracing::warn!(console = %id, error = %e, "recording a console session's end");
    }
}

/// Best effort: the other side may be gone.
async fn close_leg<S: AsyncRead + AsyncWrite + Unpin>(leg: &mut Leg<S>, reason: &str) {
    // A close frame's reason has room for 123 bytes.
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let frame = CloseFrame {
        code: CloseCode::Normal,
        reason: reason[..end].to_owned().into(),
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), leg.ws.close(Some(frame))).await;
}

type HostStream = tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>;

/// The client of the VM's host, with the console settings.
fn host_client(state: &AppState, claimed: &Claimed) -> Result<AtomosClient, String> {
    AtomosClient::new(
        meson_placement::driver_target(&claimed.target),
        state.config.console.atomos.clone(),
    )
    .map_err(|e| e.to_string())
}

/// The host's leg: the VM's tunnel opened (or found open), connected to,
/// through its handshake. A tunnel closed between the open and the connect
/// (the VM's last other session ending) is opened once more.
async fn attach(state: &AppState, claimed: &Claimed) -> Result<Leg<HostStream>, String> {
    let client = host_client(state, claimed)?;
    let vm_id = claimed
        .vm
        .atomos_id
        .clone()
        .ok_or_else(|| "the VM is not registered on its host".to_owned())?;
    let mut last = String::new();
    for _ in 0..2 {
        let console = client
            .console_open(&vm_id)
            .await
            .map_err(|e| e.describe())?;
        let connected = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio_tungstenite::connect_async(&console.ws_url),
        )
        .await;
        match connected {
            Ok(Ok((ws, _))) => {
                let mut leg = Leg::new(ws);
                return match tokio::time::timeout(CONNECT_TIMEOUT, rfb::attach(&mut leg)).await {
                    Ok(Ok(())) => Ok(leg),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err("its handshake timed out".to_owned()),
                };
            }
            Ok(Err(e)) => last = e.to_string(),
            Err(_) => last = "connecting timed out".to_owned(),
        }
    }
    Err(last)
}

/// Closes the VM's tunnel on its host once no session of meson's uses it
/// (any replica's: the database says). Best effort: a tunnel left open
/// ends with its VM.
async fn release_tunnel(state: &AppState, claimed: &Claimed) {
    let others = meson_db::scope::system(meson_db::consoles::others_open(
        &state.app.pool,
        claimed.vm.id,
        claimed.console.id,
    ))
    .await;
    if !matches!(others, Ok(false)) {
        return;
    }
    let Ok(client) = host_client(state, claimed) else {
        return;
    };
    let Some(vm_id) = claimed.vm.atomos_id.as_deref() else {
        return;
    };
    let tunnels = match client.consoles().await {
        Ok(t) => t,
        Err(e) => {
            tracing::debug!(error = %e, "listing the host's consoles");
            return;
        }
    };
    for t in tunnels.iter().filter(|t| t.vm_id == vm_id) {
        if let Err(e) = client.console_close(&t.instance_id).await {
            tracing::debug!(error = %e, tunnel = %t.instance_id, "closing a console tunnel");
        }
    }
}

/// Relays the two legs until one ends, the console is deleted, or the
/// client is idle too long.
async fn relay<C, H>(
    state: &AppState,
    id: ConsoleId,
    client: &mut Leg<C>,
    host: &mut Leg<H>,
) -> Ended
where
    C: AsyncRead + AsyncWrite + Unpin,
    H: AsyncRead + AsyncWrite + Unpin,
{
    let idle = state.config.console.idle;
    let mut ended = Ended {
        reason: String::new(),
        bytes_in: 0,
        bytes_out: 0,
    };
    let mut input = InputMeter::default();
    let mut last_input = Instant::now();
    // Bytes read past the handshakes go first.
    let early_in = std::mem::take(&mut client.pending);
    let early_out = std::mem::take(&mut host.pending);
    if !early_in.is_empty() {
        ended.bytes_in += early_in.len() as i64;
        if input.feed(&early_in) {
            last_input = Instant::now();
        }
        if host.write(early_in).await.is_err() {
            ended.reason = HOST_CLOSED.to_owned();
            return ended;
        }
    }
    if !early_out.is_empty() {
        ended.bytes_out += early_out.len() as i64;
        if client.write(early_out).await.is_err() {
            ended.reason = CLIENT_CLOSED.to_owned();
            return ended;
        }
    }
    let mut beat = tokio::time::interval(HEARTBEAT);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            m = client.ws.next() => match m {
                Some(Ok(Message::Binary(b))) => {
                    ended.bytes_in += b.len() as i64;
                    if input.feed(&b) {
                        last_input = Instant::now();
                    }
                    if host.ws.send(Message::Binary(b)).await.is_err() {
                        ended.reason = HOST_CLOSED.to_owned();
                        break;
                    }
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                Some(Ok(Message::Text(_))) => {
                    ended.reason = "the client sent text: RFB travels in binary messages".into();
                    break;
                }
                Some(Ok(Message::Close(_))) | None => {
                    ended.reason = CLIENT_CLOSED.to_owned();
                    break;
                }
                Some(Err(e)) => {
                    ended.reason = format!("the client's connection failed: {e}");
                    break;
                }
            },
            m = host.ws.next() => match m {
                Some(Ok(Message::Binary(b))) => {
                    ended.bytes_out += b.len() as i64;
                    if client.ws.send(Message::Binary(b)).await.is_err() {
                        ended.reason = CLIENT_CLOSED.to_owned();
                        break;
                    }
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                Some(Ok(Message::Text(_) | Message::Close(_))) | None | Some(Err(_)) => {
                    ended.reason = HOST_CLOSED.to_owned();
                    break;
                }
            },
            _ = tokio::time::sleep_until(last_input + idle) => {
                ended.reason = format!("no input for {} s", idle.as_secs());
                break;
            }
            _ = ping.tick() => {
                if client.ws.send(Message::Ping(Vec::new().into())).await.is_err() {
                    ended.reason = CLIENT_CLOSED.to_owned();
                    break;
                }
            }
            _ = beat.tick() => {
                let status = meson_db::scope::system(meson_db::consoles::heartbeat(
                    &state.app.pool, id, ended.bytes_in, ended.bytes_out)).await;
                match status {
                    Ok(ConsoleStatus::Open) => {}
                    Ok(_) => {
                        ended.reason = "deleted".to_owned();
                        break;
                    }
                    // The database away: the session goes on, recorded
                    // again at the next beat.
                    Err(e) => tracing::warn!(console = %id, error = %e,
                        "recording a console session"),
                }
            }
        }
    }
    ended
}

const CLIENT_CLOSED: &str = "the client closed it";
const HOST_CLOSED: &str = "the VM's console closed (the VM stopped, or its host ended it)";

/// Tells input (keys, pointer, clipboard) from the rest of what a client
/// sends (its ClientInit, then messages of RFC 6143 §7.5): the idle limit
/// counts from the last input, not from the updates a viewer requests on
/// its own.
#[derive(Default)]
struct InputMeter {
    /// The ClientInit byte is behind.
    init_done: bool,
    /// Bytes of the message being read, until its length is known.
    head: Vec<u8>,
    /// Bytes of the current message still to skip.
    skip: usize,
    /// A message type it does not know: it cannot follow any longer, and
    /// counts everything as input.
    lost: bool,
}

impl InputMeter {
    /// Reads `bytes`; true when they hold input.
    fn feed(&mut self, mut bytes: &[u8]) -> bool {
        let mut input = false;
        while !bytes.is_empty() {
            if self.lost {
                return true;
            }
            if !self.init_done {
                self.init_done = true;
                bytes = &bytes[1..];
                continue;
            }
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
                continue;
            }
            self.head.push(bytes[0]);
            bytes = &bytes[1..];
            let h = &self.head;
            // (total length once known, whether it is input)
            let known: Option<(usize, bool)> = match h[0] {
                0 => Some((20, false)),
                2 if h.len() >= 4 => {
                    Some((4 + 4 * usize::from(u16::from_be_bytes([h[2], h[3]])), false))
                }
                3 => Some((10, false)),
                4 => Some((8, true)),
                5 => Some((6, true)),
                6 if h.len() >= 8 => Some((
                    8 + u32::from_be_bytes([h[4], h[5], h[6], h[7]]) as usize,
                    true,
                )),
                2 | 6 => None,
                _ => {
                    self.lost = true;
                    return true;
                }
            };
            if let Some((len, is_input)) = known {
                input |= is_input;
                self.skip = len - self.head.len();
                self.head.clear();
            }
        }
        input
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_is_keys_pointer_and_clipboard_not_update_requests() {
        let mut m = InputMeter::default();
        // ClientInit, SetEncodings with two, an update request.
        let mut bytes = vec![1u8, 2, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 7];
        bytes.extend([3, 1, 0, 0, 0, 0, 2, 128, 0, 200]);
        assert!(!m.feed(&bytes));
        // Split anywhere: a pointer event in two parts.
        assert!(m.feed(&[5, 0]));
        assert!(!m.feed(&[0, 10, 0, 10]));
        assert!(!m.feed(&[3, 1, 0, 0, 0, 0, 2, 128, 0, 200]));
        // A key event, a clipboard of three bytes.
        assert!(m.feed(&[4, 1, 0, 0, 0, 0, 0, 97]));
        assert!(m.feed(&[6, 0, 0, 0, 0, 0, 0, 3, b'a', b'b', b'c']));
        // A pixel format (20 bytes) is no input.
        assert!(!m.feed(&[0; 20]));
        // An unknown type: everything counts from then on.
        assert!(m.feed(&[250]));
        assert!(m.feed(&[3]));
    }
}
