//! Compute (matcher) routes for VM consoles: `GET|POST
//! /porttunnel/vncWebSocket`, `GET /porttunnel/vncWebSocket/{instance_id}`,
//! `DELETE /porttunnel/vncWebSocket/stop`. The routes are Elemento's; the
//! bodies are meson's design (docs/atomos.md). The tunnels themselves are
//! [`crate::console`]'s.

use super::{ApiError, ApiResult, ok, parse};
use crate::host::SimHost;
use crate::state::{Power, SimConsole};
use atomos_driver::schema::compute::{ConsoleIdBody, ConsoleObject, LocalIndex};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, get};
use std::time::Duration;

/// How long a stop waits for the tunnel's port to close and its sessions
/// to end before answering anyway.
const STOP_WAIT: Duration = Duration::from_secs(5);

pub(super) fn routes() -> Router<SimHost> {
    Router::new()
        .route("/porttunnel/vncWebSocket", get(list).post(open))
        .route("/porttunnel/vncWebSocket/stop", delete(stop))
        .route("/porttunnel/vncWebSocket/{instance_id}", get(status))
}

fn console_to_wire(c: &SimConsole) -> ConsoleObject {
    ConsoleObject {
        instance_id: c.id.clone(),
        local_index: c.vm_id.clone(),
        vm_name: c.vm_name.clone(),
        ws_url: c.ws_url.clone(),
        port: Some(c.port),
        status: Some("open".to_owned()),
        sessions: Some(c.sessions),
        creation_date: Some(
            c.created
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        ),
    }
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!(
        "[TunnelNotFound] console tunnel {id} does not exist"
    ))
}

/// `POST /porttunnel/vncWebSocket {"local_index"}`: the VM's console
/// tunnel, opened now or already open (one per VM, so a repeated call
/// finds the first one's). The VM must be powered on, booting or running:
/// an unknown VM is a 404 (`[VmNotFound]`), one shut off a 409
/// (`[VmNotRunning]`).
async fn open(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let LocalIndex { local_index } = parse(&body)?;
    if local_index.trim().is_empty() {
        return Err(ApiError::bad_request("local_index is required"));
    }
    let name = {
        let state = host.state();
        let vm = state
            .vms
            .iter()
            .find(|vm| vm.id == local_index)
            .ok_or_else(|| {
                ApiError::not_found(format!("[VmNotFound] VM {local_index} does not exist"))
            })?;
        if vm.power == Power::Off {
            return Err(ApiError::conflict(format!(
                "[VmNotRunning] VM {} is shut off; start it first",
                vm.name
            )));
        }
        vm.name.clone()
    };
    let console = host
        .consoles()
        .open(&host, &local_index, &name)
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("[TunnelCreationFailed] cannot listen for VM {name}'s console: {e}"),
            )
        })?
        .ok_or_else(|| {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the host is shutting down")
        })?;
    ok(console_to_wire(&console))
}

/// `GET /porttunnel/vncWebSocket`: every open tunnel, a bare array.
async fn list(State(host): State<SimHost>) -> ApiResult {
    let rows: Vec<ConsoleObject> = host.consoles().list().iter().map(console_to_wire).collect();
    ok(rows)
}

/// `GET /porttunnel/vncWebSocket/{instance_id}`: one open tunnel, with its
/// sessions; a tunnel stopped or ended (its VM stopped) is a 404.
async fn status(State(host): State<SimHost>, Path(id): Path<String>) -> ApiResult {
    let console = host.consoles().get(&id).ok_or_else(|| not_found(&id))?;
    ok(console_to_wire(&console))
}

/// `DELETE /porttunnel/vncWebSocket/stop {"instance_id"}`: closes the
/// tunnel's port and ends its sessions (a WebSocket Close frame each),
/// answered once they are over.
async fn stop(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let ConsoleIdBody { instance_id } = parse(&body)?;
    if instance_id.trim().is_empty() {
        return Err(ApiError::bad_request("instance_id is required"));
    }
    let task = host
        .consoles()
        .stop(&instance_id)
        .ok_or_else(|| not_found(&instance_id))?;
    if tokio::time::timeout(STOP_WAIT, task).await.is_err() {
        tracing::warn!(host = host.name(), console = %instance_id, "console tunnel slow to close");
    }
    ok(serde_json::json!({ "instance_id": instance_id, "status": "closed" }))
}
