//! The driver's error: a kind callers act on, the route, the HTTP status and the daemon's text.

/// What a caller can do about a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The VM, volume or network does not exist (HTTP 404).
    NotFound,
    /// The host cannot fit the request (507, or a body naming capacity).
    Capacity,
    /// The daemon rejected the request, or answered something we cannot read.
    Invalid,
    /// Connect error, timeout or 5xx: worth trying again later.
    Transient,
    /// 401/403: the daemons' session is missing or lacks rights.
    Auth,
    /// 409: the name is taken; for a port forward, its port on the host
    /// (`[PortInUse]`) or its id (with another spec); for a backup, its id
    /// (another VM's, `[BackupExists]`). A 409 `[VmRunning]` (a backup
    /// restored into a running VM's volume) or `[VmNotRunning]` (a console
    /// for a VM shut off) is [`ErrorKind::Invalid`] instead: nothing exists
    /// that a caller could take as done.
    AlreadyExists,
}

impl ErrorKind {
    /// A metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::Capacity => "capacity",
            ErrorKind::Invalid => "invalid",
            ErrorKind::Transient => "transient",
            ErrorKind::Auth => "auth",
            ErrorKind::AlreadyExists => "already_exists",
        }
    }
}

#[derive(Clone, Debug, thiserror::Error)]
#[error("atomos {route}: {message}")]
pub struct DriverError {
    pub kind: ErrorKind,
    /// `vm/register`, `volume/create`, ...
    pub route: String,
    /// `None` when no HTTP answer arrived.
    pub status: Option<u16>,
    /// The daemon's `detail` or free text, or the transport error.
    pub message: String,
}

impl DriverError {
    pub fn new(
        kind: ErrorKind,
        route: impl Into<String>,
        status: Option<u16>,
        message: impl Into<String>,
    ) -> Self {
        DriverError {
            kind,
            route: route.into(),
            status,
            message: message.into(),
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.kind == ErrorKind::NotFound
    }

    pub fn is_transient(&self) -> bool {
        self.kind == ErrorKind::Transient
    }

    pub fn is_capacity(&self) -> bool {
        self.kind == ErrorKind::Capacity
    }

    pub fn is_already_exists(&self) -> bool {
        self.kind == ErrorKind::AlreadyExists
    }

    /// What went wrong, for the user whose action it ended or delays: what
    /// the hypervisor answered, or that it did not answer. No addresses or
    /// transport details (those are in the log).
    pub fn describe(&self) -> String {
        match (self.kind, self.status) {
            (ErrorKind::Auth, Some(status)) => format!(
                "meson could not authenticate to the hypervisor (it answered {})",
                status_text(status)
            ),
            (ErrorKind::Auth, None) => "meson could not authenticate to the hypervisor".to_owned(),
            (_, Some(status)) => format!(
                "the hypervisor answered {} to {}: {}",
                status_text(status),
                self.route,
                self.message
            ),
            (_, None) if self.message.starts_with(NO_ANSWER) => {
                format!("the hypervisor did not answer {} in time", self.route)
            }
            (_, None) => format!("meson could not reach the hypervisor for {}", self.route),
        }
    }

    /// A 2xx answer whose body does not have the expected shape.
    pub(crate) fn undecodable(route: &str, status: u16, err: impl std::fmt::Display) -> Self {
        DriverError::new(
            ErrorKind::Invalid,
            route,
            Some(status),
            format!("unexpected response body: {err}"),
        )
    }
}

/// How a timed-out call's message starts.
pub(crate) const NO_ANSWER: &str = "no answer within";

/// `503 Service Unavailable`, or the number alone for a code without a name.
fn status_text(status: u16) -> String {
    match reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
    {
        Some(reason) => format!("{status} {reason}"),
        None => status.to_string(),
    }
}

/// Substrings by which storage/matcher errors name a capacity problem. The
/// storage server stringifies exceptions as `[ClassName] message` (docs/atomos.md).
const CAPACITY_MARKERS: &[&str] = &[
    "notallocable",
    "not allocable",
    "availablepathnotfound",
    "cannot allocate",
    "can not allocate",
    "insufficient",
    "no space",
    "not enough",
];

/// Maps a non-2xx answer to a kind; `message` is the extracted error text.
pub(crate) fn classify(status: u16, message: &str) -> ErrorKind {
    let lower = message.to_ascii_lowercase();
    match status {
        507 => ErrorKind::Capacity,
        401 | 403 => ErrorKind::Auth,
        404 => ErrorKind::NotFound,
        // A conflict with the VM's state, not with an object that exists:
        // stopping the VM is the way out, not finding what is there.
        409 if lower.contains("[vmrunning]") || lower.contains("[vmnotrunning]") => {
            ErrorKind::Invalid
        }
        409 => ErrorKind::AlreadyExists,
        // Checked before the 5xx rule: an allocation failure raised as a 500
        // stays a 500 no matter how often it is retried.
        _ if CAPACITY_MARKERS.iter().any(|m| lower.contains(m)) => ErrorKind::Capacity,
        _ if lower.contains("already exists") => ErrorKind::AlreadyExists,
        408 | 425 | 429 => ErrorKind::Transient,
        500..=599 => ErrorKind::Transient,
        _ => ErrorKind::Invalid,
    }
}

/// Longest error text kept: enough for a FastAPI detail, not a whole HTML page.
const MAX_MESSAGE: usize = 512;

/// Pulls the text out of an error body: FastAPI's `{"detail": ...}` or free text.
pub(crate) fn error_message(status: u16, body: &[u8]) -> String {
    let text = match serde_json::from_slice::<crate::schema::ErrorBody>(body) {
        Ok(e) => match e.detail {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        },
        Err(_) => String::from_utf8_lossy(body).trim().to_owned(),
    };
    if text.is_empty() {
        return format!("HTTP {status}");
    }
    truncate(text, MAX_MESSAGE)
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_kinds() {
        assert_eq!(classify(404, "Not Found"), ErrorKind::NotFound);
        assert_eq!(classify(401, "Not authenticated"), ErrorKind::Auth);
        assert_eq!(classify(403, ""), ErrorKind::Auth);
        assert_eq!(classify(409, "dup"), ErrorKind::AlreadyExists);
        assert_eq!(classify(400, "bad name"), ErrorKind::Invalid);
        assert_eq!(classify(422, "field required"), ErrorKind::Invalid);
        assert_eq!(classify(500, "boom"), ErrorKind::Transient);
        assert_eq!(classify(502, ""), ErrorKind::Transient);
        assert_eq!(classify(503, ""), ErrorKind::Transient);
        assert_eq!(classify(429, ""), ErrorKind::Transient);
        assert_eq!(classify(507, "full"), ErrorKind::Capacity);
    }

    #[test]
    fn bodies_naming_capacity_win_over_status() {
        assert_eq!(
            classify(500, "[VolumeNotAllocable] no pool can hold 50 GB"),
            ErrorKind::Capacity
        );
        assert_eq!(
            classify(400, "[VolumeAvailablePathNotFound] x"),
            ErrorKind::Capacity
        );
        assert_eq!(
            classify(500, "network lan already exists"),
            ErrorKind::AlreadyExists
        );
        // Status-specific kinds are not overridden by wording.
        assert_eq!(classify(404, "insufficient data"), ErrorKind::NotFound);
    }

    #[test]
    fn port_forward_refusals_are_permanent() {
        // A taken port and an unknown forward are answers, not failures to
        // retry.
        let in_use = classify(409, "[PortInUse] port 20000/tcp is in use on the host");
        assert_eq!(in_use, ErrorKind::AlreadyExists);
        let gone = classify(
            404,
            "[PortForwardNotFound] port forward fw-1 does not exist",
        );
        assert_eq!(gone, ErrorKind::NotFound);
        assert_eq!(
            classify(404, "[VmNotFound] VM v does not exist"),
            ErrorKind::NotFound
        );
    }

    #[test]
    fn backup_refusals_map_to_what_a_caller_does() {
        assert_eq!(
            classify(
                409,
                "[VmRunning] volume a8 is attached to VM web, which is not off"
            ),
            ErrorKind::Invalid
        );
        assert_eq!(
            classify(409, "[BackupExists] backup b-1 is VM v-2's"),
            ErrorKind::AlreadyExists
        );
        assert_eq!(
            classify(404, "[BackupNotFound] backup b-1 does not exist"),
            ErrorKind::NotFound
        );
        assert_eq!(
            classify(507, "[BackupNotAllocable] 11 GB requested, 3.0 GB free"),
            ErrorKind::Capacity
        );
        assert_eq!(
            classify(400, "[BackupVolumeNotFound] volume x is not in backup b-1"),
            ErrorKind::Invalid
        );
    }

    #[test]
    fn console_refusals_map_to_what_a_caller_does() {
        assert_eq!(
            classify(409, "[VmNotRunning] VM web is shut off; start it first"),
            ErrorKind::Invalid
        );
        assert_eq!(
            classify(404, "[TunnelNotFound] console tunnel t-1 does not exist"),
            ErrorKind::NotFound
        );
        assert_eq!(
            classify(404, "[VmNotFound] VM v does not exist"),
            ErrorKind::NotFound
        );
    }

    #[test]
    fn messages_come_from_detail_or_text() {
        assert_eq!(
            error_message(404, br#"{"detail":"Not Found"}"#),
            "Not Found"
        );
        assert_eq!(
            error_message(
                422,
                br#"{"detail":[{"loc":["body","size"],"msg":"field required"}]}"#
            ),
            r#"[{"loc":["body","size"],"msg":"field required"}]"#
        );
        assert_eq!(
            error_message(500, b"  Internal Server Error\n"),
            "Internal Server Error"
        );
        assert_eq!(error_message(502, b""), "HTTP 502");
        let long = "é".repeat(600);
        let m = error_message(500, long.as_bytes());
        assert!(m.len() <= MAX_MESSAGE + '…'.len_utf8());
        assert!(m.ends_with('…'));
    }

    #[test]
    fn display_names_route() {
        let e = DriverError::new(
            ErrorKind::NotFound,
            "vm/unregister",
            Some(404),
            "no such VM",
        );
        assert_eq!(e.to_string(), "atomos vm/unregister: no such VM");
        assert!(e.is_not_found() && !e.is_transient());
    }
}
