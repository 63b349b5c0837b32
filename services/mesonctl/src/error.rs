//! What can end a command other than success, its exit code and what it
//! prints on stderr.

use meson_types::ErrorDetails;
use meson_types::action::Action;
use uuid::Uuid;

/// Exit codes.
pub mod exit {
    pub const SUCCESS: u8 = 0;
    /// meson refused the request (its error envelope).
    pub const API: u8 = 1;
    /// Bad command line (clap's own code).
    pub const USAGE: u8 = 2;
    /// An awaited action ended in `error`.
    pub const ACTION_FAILED: u8 = 3;
    /// Ctrl-C while waiting.
    pub const CANCELLED: u8 = 4;
    /// meson cannot be reached, does not work (a 5xx answer after the
    /// SDK's retries), or the configuration is bad.
    pub const UNREACHABLE: u8 = 5;
}

/// A 5xx answer that says meson is not working, as opposed to one of its
/// refusals: every 5xx but `resource_unavailable` (503: no host has room,
/// meson's answer to that request).
fn not_working(status: u16, code: &str) -> bool {
    status >= 500 && code != "resource_unavailable"
}

#[derive(Debug)]
pub enum Failure {
    /// An error of meson's client; `url` is where meson was looked for,
    /// `token_from` where the token was, `organization` the one the
    /// command acted in and where it was given (`acme (from the
    /// environment)`; empty: the token's own; all empty when unknown).
    Client {
        error: Box<meson_client::Error>,
        url: String,
        token_from: String,
        organization: String,
    },
    /// Awaited actions that ended in `error`.
    ActionsFailed(Vec<Action>),
    /// A bad argument or input file (exit 2).
    Usage(String),
    /// No usable URL or token (exit 5).
    Config(String),
    /// No resource of that name (exit 1).
    NotFound(String),
    /// Writing the output failed (exit 1).
    Output(String),
    /// Something on this machine failed: a port to listen on, a VNC
    /// viewer's connection, a console's WebSocket (exit 1).
    Local(String),
}

fn action_failed_line(a: &Action) -> String {
    let (code, message) = a
        .error
        .as_ref()
        .map_or(("unknown", "no reason given"), |e| {
            (e.code.as_str(), e.message.as_str())
        });
    format!(
        "error: action {} ({}) failed: {message} ({code})",
        a.id, a.command
    )
}

fn ids(ids: &[Uuid]) -> String {
    ids.iter()
        .map(Uuid::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The lines of `details` worth showing: rejected fields, exceeded quotas,
/// the blocking action.
fn detail_lines(details: &ErrorDetails) -> Vec<String> {
    let mut out = Vec::new();
    for f in details.fields.iter().flatten() {
        if f.messages.is_empty() {
            out.push(format!("  {}", f.name));
        } else {
            out.push(format!("  {}: {}", f.name, f.messages.join("; ")));
        }
    }
    for l in details.limits.iter().flatten() {
        out.push(format!(
            "  {}: quota {}, in use {}",
            l.name, l.quota, l.current
        ));
    }
    if let Some(a) = details.action_id {
        out.push(format!(
            "  blocked by action {a} (mesonctl action watch {a})"
        ));
    }
    if let Some(s) = details.retry_after {
        out.push(format!("  retry after {s} s"));
    }
    out
}

impl Failure {
    pub fn exit_code(&self) -> u8 {
        use meson_client::Error as E;
        match self {
            Failure::Client { error, .. } => match error.as_ref() {
                E::Api { status, code, .. } if not_working(*status, code) => exit::UNREACHABLE,
                E::Api { .. } | E::ActionsNotFound(_) | E::Decode(_) => exit::API,
                E::ActionFailed { .. } => exit::ACTION_FAILED,
                E::Cancelled { .. } => exit::CANCELLED,
                E::Transport(_) | E::Config(_) => exit::UNREACHABLE,
            },
            Failure::ActionsFailed(_) => exit::ACTION_FAILED,
            Failure::Usage(_) => exit::USAGE,
            Failure::Config(_) => exit::UNREACHABLE,
            Failure::NotFound(_) | Failure::Output(_) | Failure::Local(_) => exit::API,
        }
    }

    /// What to print on stderr, one line each.
    pub fn lines(&self) -> Vec<String> {
        use meson_client::Error as E;
        match self {
            Failure::Client {
                error,
                url,
                token_from,
                organization,
            } => match error.as_ref() {
                E::Api {
                    status,
                    code,
                    message,
                    details,
                    correlation_id,
                } => {
                    let mut out = if not_working(*status, code) {
                        vec![format!(
                            "error: meson at {url} is not working: {message} ({code}, HTTP {status})"
                        )]
                    } else {
                        vec![format!("error: {message} ({code})")]
                    };
                    out.extend(detail_lines(details));
                    if *status == 401 {
                        let from = if token_from.is_empty() {
                            String::new()
                        } else {
                            format!(" (from {token_from})")
                        };
                        out.push(format!(
                            "  meson refused the token{from}: it is not one meson knows, or it \
                             has expired or been revoked"
                        ));
                    }
                    if *status == 403 && !organization.is_empty() {
                        out.push(format!(
                            "  acting in organisation {organization}: `mesonctl membership \
                             list` shows where you may act"
                        ));
                    }
                    if *status >= 500
                        && let Some(c) = correlation_id
                    {
                        out.push(format!("  correlation id: {c}"));
                    }
                    out
                }
                E::ActionFailed { action } => vec![action_failed_line(action)],
                E::ActionsNotFound(missing) => {
                    vec![format!(
                        "error: no such actions: {} (not_found)",
                        ids(missing)
                    )]
                }
                E::Cancelled { running } => vec![
                    format!("cancelled; still running: {}", ids(running)),
                    format!("  follow them with: mesonctl action watch {}", ids(running)),
                ],
                E::Transport(e) => {
                    let mut msg = format!("error: cannot reach meson at {url}: {e}");
                    let mut source = std::error::Error::source(e);
                    while let Some(s) = source {
                        msg.push_str(&format!(": {s}"));
                        source = s.source();
                    }
                    vec![msg]
                }
                E::Decode(m) => vec![format!(
                    "error: unexpected answer from {url} (is it meson?): {m}"
                )],
                E::Config(m) => vec![format!("error: {m}")],
            },
            Failure::ActionsFailed(actions) => actions.iter().map(action_failed_line).collect(),
            Failure::Usage(m) | Failure::Config(m) | Failure::Output(m) | Failure::Local(m) => {
                vec![format!("error: {m}")]
            }
            Failure::NotFound(m) => vec![format!("error: {m} (not_found)")],
        }
    }
}
