//! Consoles on the wire: a VM's screen over VNC, through meson.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// A console: one VNC session on a VM's screen, relayed by meson. Its URL
/// and password are shown once, when it is requested.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Console {
    pub id: Uuid,
    pub vm: Uuid,
    /// `requested` (waiting for its connection until `expires`), `open`
    /// (its session is relayed), `closed` (see `close_reason`), `expired`
    /// or `revoked` (deleted before it was used).
    #[schema(value_type = ConsoleStatus)]
    pub status: String,
    /// The token's subject that requested it.
    pub requested_by: String,
    pub created: DateTime<Utc>,
    /// A connection must begin before this.
    pub expires: DateTime<Utc>,
    #[serde(default)]
    #[schema(required = true)]
    pub opened: Option<DateTime<Utc>>,
    #[serde(default)]
    #[schema(required = true)]
    pub closed: Option<DateTime<Utc>>,
    /// How its session ended (`the client closed it`, `idle for 900 s`,
    /// `wrong password`, `ended by <subject>`, ...); null while it has not.
    #[serde(default)]
    #[schema(required = true)]
    pub close_reason: Option<String>,
    /// Bytes relayed from the client to the VM's screen, and back, as of
    /// the relay's latest heartbeat (every 5 s) or the session's end.
    pub bytes_in: i64,
    pub bytes_out: i64,
}

/// A console's status (documentation: the wire field is a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConsoleStatus {
    Requested,
    Open,
    Closed,
    Expired,
    Revoked,
}

/// A console just requested, with what connects to it (shown this once).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ConsoleRequestResponse {
    pub console: Console,
    /// The WebSocket a VNC client (noVNC, or any client through a
    /// TCP-to-WebSocket bridge such as `mesonctl vm console`) connects to,
    /// binary frames carrying RFB; `wss://` when meson's public URL is
    /// `https://`. Its token is good for one connection.
    #[schema(
        example = "wss://api.example.com/v1/consoles/0192d0b2-6a4b-7c61-8b0e-5f1d2c3b4a59/websocket?token=Xq3..."
    )]
    pub wss_url: String,
    /// The VNC password meson asks that connection for (VNC
    /// authentication; eight characters).
    #[schema(example = "h7Rk2pQz")]
    pub password: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ConsoleResponse {
    pub console: Console,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ConsoleList {
    /// Newest first.
    pub consoles: Vec<Console>,
}
