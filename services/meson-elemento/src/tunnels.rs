//! The compute daemon's port tunnels' lists (`GET /porttunnel/services`,
//! `GET /porttunnel/status`) over meson's consoles and port forwards.
//!
//! AtomOS tunnels a VM's ports (its screen over VNC, a service's port) to
//! the client. meson relays a VM's screen through a console
//! (`/v1/consoles`, see `consoles.rs`) and a VM's port through a port
//! forward on its host's public address (`/v1/networks/{id}/port-forwards`,
//! see `port_forwards.rs`). So the tenant's services tunnelled are its port
//! forwards, and its live tunnels are its live consoles and its forwards.
//! Opening and closing them goes through the console and port-forward
//! routes; `porttunnel/start` and `stop` stay `501`.

use crate::catalog::Daemon;
use crate::error::{DResult, Detail};
use crate::routes::{AppState, Authed};
use crate::wire;
use axum::{Json, Router};
use meson_types::Vm;
use serde_json::{Value, json};
use std::collections::HashMap;
use uuid::Uuid;

/// The routes served, `(method, path)`.
pub fn served() -> Vec<(&'static str, String)> {
    let b = Daemon::Compute.base();
    ["/porttunnel/services", "/porttunnel/status"]
        .into_iter()
        .map(|p| ("GET", format!("{b}{p}")))
        .collect()
}

pub fn routes() -> Router<AppState> {
    use axum::routing::get;
    let b = Daemon::Compute.base();
    Router::new()
        .route(&format!("{b}/porttunnel/services"), get(services))
        .route(&format!("{b}/porttunnel/status"), get(status))
}

/// The tenant's port forwards as tunnelled services: the network daemon's
/// forward object, plus `id` (its `forward_uid`), `service` (its
/// protocol), `local_index` (its VM) and `active` (meson made it).
async fn forwarded(a: &Authed) -> DResult<Vec<Value>> {
    let forwards = crate::port_forwards::all_forwards(a).await?;
    let vms = if forwards.is_empty() {
        Vec::new()
    } else {
        a.meson.vm_list_all().await.map_err(Detail::meson)?
    };
    let by_id: HashMap<Uuid, &Vm> = vms.iter().map(|v| (v.id, v)).collect();
    Ok(forwards
        .iter()
        .map(|f| {
            let mut o = wire::port_forward_object(f, by_id.get(&f.vm).copied());
            o["id"] = json!(f.id);
            o["service"] = json!(f.protocol);
            o["local_index"] = json!(f.vm);
            o["active"] = json!(f.status == "active");
            o
        })
        .collect())
}

/// `GET /porttunnel/services`: a bare list of the tenant's forwarded
/// services.
async fn services(a: Authed) -> DResult<Json<Value>> {
    Ok(Json(Value::Array(forwarded(&a).await?)))
}

/// `GET /porttunnel/status`: `{status}`, the tenant's live tunnels: its
/// live consoles (`service` `VNC`, as `porttunnel/vncWebSocket` lists
/// them) and its port forwards (as `porttunnel/services`).
async fn status(a: Authed) -> DResult<Json<Value>> {
    let (consoles, forwards) = tokio::try_join!(crate::consoles::live_tunnels(&a), forwarded(&a))?;
    let mut tunnels: Vec<Value> = consoles
        .into_iter()
        .map(|mut t| {
            t["id"] = t["instance_id"].clone();
            t["service"] = json!("VNC");
            t["active"] = json!(true);
            t
        })
        .collect();
    tunnels.extend(forwards);
    Ok(Json(json!({"status": tunnels})))
}
