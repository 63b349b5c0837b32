//! The compute daemon's VM consoles (AtomOS's `porttunnel/vncWebSocket`,
//! Electros' console tab) over meson's (`/v1/vms/{id}/actions/
//! request-console`, `/v1/consoles`): a WebSocket whose binary messages
//! carry the VM's screen over RFB (VNC), relayed by meson, which asks VNC
//! authentication with the console's password.
//!
//! `POST /porttunnel/vncWebSocket` `{local_index}` requests one and answers
//! the tunnel with meson's `wss_url` (its token good for one connection,
//! within a minute) and the password, both shown this once; `GET
//! /porttunnel/vncWebSocket` lists the tenant's live ones (requested or
//! open), `GET /porttunnel/vncWebSocket/{instance_id}` shows one, `DELETE
//! /porttunnel/vncWebSocket/stop` `{instance_id}` ends it. Like AtomOS, a
//! tunnel that is not live (or not the tenant's) is a 404 `[TunnelNotFound]`.

use crate::catalog::Daemon;
use crate::error::{DResult, Detail};
use crate::routes::{AppState, Authed, Body, id_field};
use crate::wire;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::{Json, Router};
use meson_types::Vm;
use meson_types::console::Console;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// The console routes served, `(method, path)`.
pub fn served() -> Vec<(&'static str, String)> {
    let b = Daemon::Compute.base();
    [
        ("POST", "/porttunnel/vncWebSocket"),
        ("GET", "/porttunnel/vncWebSocket"),
        ("GET", "/porttunnel/vncWebSocket/{instance_id}"),
        ("DELETE", "/porttunnel/vncWebSocket/stop"),
    ]
    .into_iter()
    .map(|(m, p)| (m, format!("{b}{p}")))
    .collect()
}

pub fn routes() -> Router<AppState> {
    use axum::routing::{delete, get};
    let b = Daemon::Compute.base();
    Router::new()
        .route(
            &format!("{b}/porttunnel/vncWebSocket"),
            get(list).post(request),
        )
        .route(&format!("{b}/porttunnel/vncWebSocket/stop"), delete(stop))
        .route(
            &format!("{b}/porttunnel/vncWebSocket/{{instance_id}}"),
            get(status),
        )
}

/// meson answered `status`.
fn answered(e: &meson_client::Error, status: u16) -> bool {
    matches!(e, meson_client::Error::Api { status: s, .. } if *s == status)
}

/// The statuses of a live console: waiting for its connection, or in use.
fn live() -> Vec<String> {
    vec!["requested".to_owned(), "open".to_owned()]
}

fn is_live(c: &Console) -> bool {
    matches!(c.status.as_str(), "requested" | "open")
}

/// AtomOS's answer for a tunnel it does not have (never had, ended, or
/// another tenant's).
fn tunnel_not_found(id: &str) -> Detail {
    Detail::new(
        StatusCode::NOT_FOUND,
        format!("[TunnelNotFound] console tunnel {id} does not exist"),
    )
}

/// A tunnel's id as meson's console id; anything else is no tunnel.
fn tunnel_id(s: &str) -> DResult<Uuid> {
    Uuid::parse_str(s.trim()).map_err(|_| tunnel_not_found(s))
}

/// The name of VM `vm`, `""` once it is gone.
async fn vm_name(a: &Authed, vm: Uuid) -> DResult<String> {
    match a.meson.vm_get(vm).await {
        Ok(v) => Ok(v.name),
        Err(e) if answered(&e, 404) => Ok(String::new()),
        Err(e) => Err(Detail::meson(e)),
    }
}

/// `POST /porttunnel/vncWebSocket` `{local_index}`: a console on the VM's
/// screen (it must be running, else meson's `409`), answered as the
/// tunnel with its one-time `ws_url`, its `port` and its VNC `password`.
async fn request(a: Authed, Body(b): Body) -> DResult<Json<Value>> {
    let vm = id_field(&b, &["local_index", "vm_uid"])?;
    let unknown = || {
        let mut d = Detail::field("local_index", format!("no VM {vm}"));
        d.status = StatusCode::NOT_FOUND;
        d
    };
    let found = match a.meson.vm_get(vm).await {
        Ok(v) => v,
        Err(e) if answered(&e, 404) => return Err(unknown()),
        Err(e) => return Err(Detail::meson(e)),
    };
    let r = match a.meson.vm_request_console(vm).await {
        Ok(r) => r,
        // Deleted since.
        Err(e) if answered(&e, 404) => return Err(unknown()),
        Err(e) => return Err(Detail::meson(e)),
    };
    let mut tunnel = wire::tunnel_object(&r.console, &found.name, Some(&r.wss_url));
    tunnel["password"] = json!(r.password);
    Ok(Json(tunnel))
}

/// `GET /porttunnel/vncWebSocket`: the tenant's live consoles (the newest
/// 100), a bare list of tunnels without their URL's token nor password.
async fn list(a: Authed) -> DResult<Json<Value>> {
    Ok(Json(Value::Array(live_tunnels(&a).await?)))
}

/// The tenant's live consoles (the newest 100) as tunnels, without their
/// URL's token nor password.
pub(crate) async fn live_tunnels(a: &Authed) -> DResult<Vec<Value>> {
    let consoles = a
        .meson
        .console_list(None, &live(), Some(100))
        .await
        .map_err(Detail::meson)?;
    let vms = if consoles.is_empty() {
        Vec::new()
    } else {
        a.meson.vm_list_all().await.map_err(Detail::meson)?
    };
    let names: HashMap<Uuid, &Vm> = vms.iter().map(|v| (v.id, v)).collect();
    Ok(consoles
        .iter()
        .filter(|c| is_live(c))
        .map(|c| {
            let name = names.get(&c.vm).map_or("", |v| v.name.as_str());
            wire::tunnel_object(c, name, None)
        })
        .collect())
}

/// The tenant's live console `id`, else AtomOS's `[TunnelNotFound]`.
async fn live_console(a: &Authed, id: &str) -> DResult<Console> {
    let console = match a.meson.console_get(tunnel_id(id)?).await {
        Ok(c) => c,
        Err(e) if answered(&e, 404) => return Err(tunnel_not_found(id)),
        Err(e) => return Err(Detail::meson(e)),
    };
    if is_live(&console) {
        Ok(console)
    } else {
        Err(tunnel_not_found(id))
    }
}

/// `GET /porttunnel/vncWebSocket/{instance_id}`: one live console, as in
/// the list; once it ended (closed, expired, revoked) a `404`.
async fn status(a: Authed, Path(id): Path<String>) -> DResult<Json<Value>> {
    let console = live_console(&a, &id).await?;
    let name = vm_name(&a, console.vm).await?;
    Ok(Json(wire::tunnel_object(&console, &name, None)))
}

/// `DELETE /porttunnel/vncWebSocket/stop` `{instance_id}` (or
/// `?instance_id=`): ends the console (one not connected to yet can no
/// longer be; an open session is closed by meson's relay). Unknown or
/// ended already: `404 [TunnelNotFound]`.
async fn stop(
    a: Authed,
    Query(q): Query<BTreeMap<String, String>>,
    Body(b): Body,
) -> DResult<Json<Value>> {
    let b = match q.get("instance_id") {
        Some(id) => json!({"instance_id": id}),
        None => b,
    };
    let given = b
        .get("instance_id")
        .and_then(Value::as_str)
        .ok_or_else(|| Detail::field("instance_id", "is required (the tunnel's id)"))?;
    let id = tunnel_id(given)?;
    match a.meson.console_delete(id).await {
        Ok(_) => Ok(Json(json!({"instance_id": id, "status": "closed"}))),
        Err(e) if answered(&e, 404) || answered(&e, 409) => Err(tunnel_not_found(given)),
        Err(e) => Err(Detail::meson(e)),
    }
}
