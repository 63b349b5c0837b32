//! Compute (matcher) daemon: VM consoles, the `porttunnel/vncWebSocket`
//! tunnels (open, status, list, close).
//!
//! Elemento's compute daemon names `GET|POST /porttunnel/vncWebSocket`,
//! `GET /porttunnel/vncWebSocket/{instance_id}` and `DELETE
//! /porttunnel/vncWebSocket/stop`; their bodies are undocumented. The
//! shapes here are meson's design (docs/atomos.md): a tunnel is a
//! WebSocket on the host's side whose binary frames carry the RFB (VNC)
//! protocol of the VM's screen, for a VNC client (noVNC in a browser, or
//! any client through a WebSocket bridge) to connect to.

use crate::backup::query_value;
use crate::client::{AtomosClient, Call, Daemon};
use crate::error::{DriverError, ErrorKind};
use crate::schema::compute::{ConsoleIdBody, ConsoleList, ConsoleObject, LocalIndex};
use serde::{Deserialize, Serialize};

/// A VM's console tunnel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Console {
    /// The tunnel's id, chosen by the host: the handle of
    /// [`AtomosClient::console_status`] and [`AtomosClient::console_close`].
    pub instance_id: String,
    /// The VM's `uniqueID` (empty when the host does not say).
    pub vm_id: String,
    pub vm_name: String,
    /// Where a VNC client connects over WebSocket, binary frames:
    /// `ws://127.0.0.1:<port>/vnc/<instance_id>` on the simulator. The
    /// address is on the host's side (its loopback, on the simulator and,
    /// by Electros' proxy configuration, on AtomOS too): whatever relays a
    /// client to it runs there.
    pub ws_url: String,
    /// The tunnel's port, when the host tells it.
    pub port: Option<u16>,
    /// Whether it is open: a host that gives no status is taken as open.
    pub open: bool,
    /// WebSocket clients connected now, when the host tells it.
    pub sessions: Option<u32>,
}

/// Route label of the status: its path carries the tunnel's id.
const STATUS_ROUTE: &str = "vm/porttunnel/vncWebSocket/{instance_id}";

impl AtomosClient {
    /// `POST /porttunnel/vncWebSocket {"local_index"}`: VM `vm_id`'s
    /// console tunnel, opened for it or, when it has one already, that one
    /// (a VM has one tunnel, which any number of clients may join; a
    /// repeated call finds the first one's). Never retried automatically.
    ///
    /// Refusals: [`ErrorKind::NotFound`] (404, `[VmNotFound]`) for a VM not
    /// on the host; [`ErrorKind::Invalid`] (409, `[VmNotRunning]`) for a VM
    /// that is shut off: starting it is the way out, nothing exists to be
    /// taken as done.
    ///
    /// An answer without `ws_url` but with `port` is given
    /// `ws://<target host>:<port>/`; one with neither, or without
    /// `instance_id`, is [`ErrorKind::Invalid`].
    pub async fn console_open(&self, vm_id: &str) -> Result<Console, DriverError> {
        let call = Call::post(Daemon::Compute, "/porttunnel/vncWebSocket");
        let body = LocalIndex {
            local_index: vm_id.to_owned(),
        };
        let answer: ConsoleObject = self.send_json(&call, &body).await?.json(&call.route)?;
        let mut console = self.console_from_wire(answer, &call.route)?;
        if console.vm_id.is_empty() {
            console.vm_id = vm_id.to_owned();
        }
        Ok(console)
    }

    /// `GET /porttunnel/vncWebSocket/{instance_id}`: the tunnel as it is
    /// now, with its sessions. One stopped, or ended because its VM stopped
    /// or its host went down, is [`ErrorKind::NotFound`] (404,
    /// `[TunnelNotFound]`).
    pub async fn console_status(&self, instance_id: &str) -> Result<Console, DriverError> {
        let path = format!("/porttunnel/vncWebSocket/{}", query_value(instance_id));
        let call = Call::get(Daemon::Compute, &path).with_route(STATUS_ROUTE);
        let answer: ConsoleObject = self.get_call_json(&call).await?;
        self.console_from_wire(answer, &call.route)
    }

    /// `GET /porttunnel/vncWebSocket`: every open tunnel of the host.
    pub async fn consoles(&self) -> Result<Vec<Console>, DriverError> {
        let call = Call::get(Daemon::Compute, "/porttunnel/vncWebSocket");
        let list: ConsoleList = self.get_call_json(&call).await?;
        list.into_vec()
            .into_iter()
            .map(|c| self.console_from_wire(c, &call.route))
            .collect()
    }

    /// `DELETE /porttunnel/vncWebSocket/stop` with a JSON body
    /// `{"instance_id"}`: closes the tunnel's port and ends its sessions
    /// (each gets a WebSocket Close frame). An unknown or ended tunnel is
    /// [`ErrorKind::NotFound`] (404, `[TunnelNotFound]`): already closed.
    pub async fn console_close(&self, instance_id: &str) -> Result<(), DriverError> {
        let call = Call::delete(Daemon::Compute, "/porttunnel/vncWebSocket/stop");
        self.send_json(
            &call,
            &ConsoleIdBody {
                instance_id: instance_id.to_owned(),
            },
        )
        .await?;
        Ok(())
    }

    fn console_from_wire(&self, c: ConsoleObject, route: &str) -> Result<Console, DriverError> {
        let invalid = |why: &str| DriverError::new(ErrorKind::Invalid, route, None, why);
        if c.instance_id.trim().is_empty() {
            return Err(invalid("the console tunnel has no instance_id"));
        }
        let ws_url = match (c.ws_url.trim(), c.port) {
            ("", Some(port)) => format!("ws://{}:{port}/", url_host(&self.target().host)),
            ("", None) => {
                return Err(invalid("the console tunnel has neither ws_url nor port"));
            }
            (url, _) => url.to_owned(),
        };
        let open = c.status.as_deref().is_none_or(|s| {
            !matches!(
                s.trim().to_ascii_lowercase().as_str(),
                "closed" | "stopped" | "inactive" | "dead"
            )
        });
        Ok(Console {
            instance_id: c.instance_id,
            vm_id: c.local_index,
            vm_name: c.vm_name,
            ws_url,
            port: c.port,
            open,
            sessions: c.sessions,
        })
    }
}

/// A host as it goes in a URL: IPv6 literals in brackets.
fn url_host(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClientOptions, Ports, Target};
    use serde_json::json;

    fn client(host: &str) -> AtomosClient {
        let target = Target {
            name: "t".into(),
            host: host.into(),
            ports: Ports::default(),
            provider: String::new(),
            region: String::new(),
            continent: String::new(),
        };
        AtomosClient::new(target, ClientOptions::default()).unwrap()
    }

    fn wire(value: serde_json::Value) -> ConsoleObject {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn consoles_normalize() {
        let c = client("10.0.0.5");
        let full = c
            .console_from_wire(
                wire(json!({
                    "instance_id": "t-1", "local_index": "v-1", "vm_name": "web",
                    "ws_url": "ws://127.0.0.1:40000/vnc/t-1", "port": 40000,
                    "status": "open", "sessions": 1
                })),
                "r",
            )
            .unwrap();
        assert_eq!(
            full,
            Console {
                instance_id: "t-1".into(),
                vm_id: "v-1".into(),
                vm_name: "web".into(),
                ws_url: "ws://127.0.0.1:40000/vnc/t-1".into(),
                port: Some(40000),
                open: true,
                sessions: Some(1),
            }
        );
        // A port alone: the target's host; no status: open.
        let lean = c
            .console_from_wire(wire(json!({"instance_id": "t-2", "port": "59441"})), "r")
            .unwrap();
        assert_eq!(
            (lean.ws_url.as_str(), lean.open, lean.sessions),
            ("ws://10.0.0.5:59441/", true, None)
        );
        let v6 = client("fd00::5")
            .console_from_wire(wire(json!({"instance_id": "t", "port": 1})), "r")
            .unwrap();
        assert_eq!(v6.ws_url, "ws://[fd00::5]:1/");
        let closed = c
            .console_from_wire(
                wire(json!({"instance_id": "t", "ws_url": "ws://h/", "status": "Closed"})),
                "r",
            )
            .unwrap();
        assert!(!closed.open);
        for bad in [
            json!({"instance_id": "t"}),
            json!({"instance_id": " ", "port": 1}),
        ] {
            let err = c.console_from_wire(wire(bad), "r").unwrap_err();
            assert_eq!(err.kind, ErrorKind::Invalid);
        }
    }
}
