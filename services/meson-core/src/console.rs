//! Consoles: a VM's screen over VNC, relayed by meson.
//!
//! A request (`request-console`) hands out a WebSocket URL on meson that
//! carries a one-time token, and a VNC password; both are good for
//! [`REQUEST_TTL`]. The first connection with the token uses the console
//! up, whether or not its password is right: it is the console's only
//! session. meson checks the password with VNC authentication itself and
//! relays the session to the console the VM's host serves (AtomOS's
//! `porttunnel/vncWebSocket`), which asks for none.

use crate::id::{ConsoleId, TenantId, VmId};
use chrono::{DateTime, Utc};
use rand::Rng;
use rand::distributions::Alphanumeric;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How long a requested console may wait for its connection.
pub const REQUEST_TTL: Duration = Duration::from_secs(60);
/// How often the process relaying a session records it alive (and reads
/// whether it was ended meanwhile).
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// An open session not recorded alive for 30 s (six heartbeats) lost its
/// relay: the process relaying it stopped. The database's `consoles_now`
/// shows it closed from then on, a request past its expiry expired.
/// Characters of a VNC password: VNC authentication reads eight.
pub const PASSWORD_LEN: usize = 8;
/// Characters of the URL's token.
pub const TOKEN_LEN: usize = 43;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConsoleStatus {
    /// Handed out, not connected to yet.
    Requested,
    /// Its session is relayed now.
    Open,
    /// Its session ended (`close_reason` says how).
    Closed,
    /// Not connected to in time.
    Expired,
    /// Deleted before it was used.
    Revoked,
}

impl ConsoleStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConsoleStatus::Requested => "requested",
            ConsoleStatus::Open => "open",
            ConsoleStatus::Closed => "closed",
            ConsoleStatus::Expired => "expired",
            ConsoleStatus::Revoked => "revoked",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "requested" => ConsoleStatus::Requested,
            "open" => ConsoleStatus::Open,
            "closed" => ConsoleStatus::Closed,
            "expired" => ConsoleStatus::Expired,
            "revoked" => ConsoleStatus::Revoked,
            _ => return None,
        })
    }

    /// Still usable or in use.
    pub fn is_live(self) -> bool {
        matches!(self, ConsoleStatus::Requested | ConsoleStatus::Open)
    }
}

/// A console as it is now (never with its secrets): its status and close
/// reason as `consoles_now` reads them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Console {
    pub id: ConsoleId,
    pub tenant: TenantId,
    pub vm_id: VmId,
    /// Who asked for it, and with which role.
    pub subject: String,
    pub role: String,
    pub status: ConsoleStatus,
    pub created: DateTime<Utc>,
    pub expires: DateTime<Utc>,
    pub opened: Option<DateTime<Utc>>,
    pub seen: Option<DateTime<Utc>>,
    pub closed: Option<DateTime<Utc>>,
    pub close_reason: Option<String>,
    pub bytes_in: i64,
    pub bytes_out: i64,
}

/// A console's secrets, made when it is requested: the token the URL
/// carries (stored as its SHA-256) and the VNC password.
#[derive(Clone, PartialEq, Eq)]
pub struct Secrets {
    pub token: String,
    pub password: String,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets(..)")
    }
}

impl Secrets {
    /// Fresh random secrets: a token of 43 letters and digits (256 bits
    /// and more) and a password of eight (VNC reads no more).
    pub fn generate() -> Secrets {
        let mut rng = rand::thread_rng();
        let mut draw = |n: usize| -> String {
            (&mut rng)
                .sample_iter(&Alphanumeric)
                .take(n)
                .map(char::from)
                .collect()
        };
        Secrets {
            token: draw(TOKEN_LEN),
            password: draw(PASSWORD_LEN),
        }
    }
}

/// The WebSocket URL of a console on an API whose base URL is `base`
/// (`https://` gives `wss://`, `http://` gives `ws://`), with its token.
pub fn websocket_url(base: &str, id: ConsoleId, token: &str) -> String {
    let base = base.trim_end_matches('/');
    let ws = if let Some(rest) = base.strip_prefix("https://") {
        format!("wss://{rest}")
    } else if let Some(rest) = base.strip_prefix("http://") {
        format!("ws://{rest}")
    } else {
        base.to_owned()
    };
    format!("{ws}/v1/consoles/{id}/websocket?token={token}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_back() {
        for s in ["requested", "open", "closed", "expired", "revoked"] {
            assert_eq!(ConsoleStatus::parse(s).unwrap().as_str(), s);
        }
        assert_eq!(ConsoleStatus::parse("Open"), None);
    }

    #[test]
    fn secrets_are_random_letters_and_digits() {
        let (a, b) = (Secrets::generate(), Secrets::generate());
        assert_ne!(a.token, b.token);
        assert_eq!((a.token.len(), a.password.len()), (TOKEN_LEN, PASSWORD_LEN));
        assert!(
            a.token
                .chars()
                .chain(a.password.chars())
                .all(|c| c.is_ascii_alphanumeric())
        );
        assert_eq!(format!("{a:?}"), "Secrets(..)");
    }

    #[test]
    fn urls_follow_the_apis_scheme() {
        let id = ConsoleId(uuid::Uuid::nil());
        assert_eq!(
            websocket_url("https://api.example.com/", id, "tok"),
            format!("wss://api.example.com/v1/consoles/{id}/websocket?token=tok")
        );
        assert_eq!(
            websocket_url("http://127.0.0.1:8080", id, "t"),
            format!("ws://127.0.0.1:8080/v1/consoles/{id}/websocket?token=t")
        );
    }
}
