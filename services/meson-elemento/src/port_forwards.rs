//! The network daemon's port forwards over meson's
//! (`/v1/networks/{id}/port-forwards`): a public port of the AtomOS host of
//! a private network's VM, relayed to a port of that VM.
//!
//! The daemon's forwards were its host's; meson's are a network's. `GET
//! /portforwards` lists every forward of the tenant, over all its networks;
//! `POST /portforward` puts one on the network of its VM (the one private
//! network the VM is on, or the body's `network_uid`); `DELETE
//! /portforward` finds it by `forward_uid` among the tenant's networks.
//! meson checks the ports, the VM's state and the port's being free; its
//! refusals name the daemon's fields (`port`, `target_port`,
//! `target_vm_uid`).

use crate::catalog::Daemon;
use crate::error::{DResult, Detail};
use crate::routes::{AppState, Authed, Body, id_field, warned};
use crate::wire;
use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::Response;
use axum::{Json, Router};
use meson_types::Vm;
use meson_types::port_forward::{PortForward, PortForwardCreateRequest};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// The port-forward routes served, `(method, path)`.
pub fn served() -> Vec<(&'static str, String)> {
    let b = Daemon::Network.base();
    [
        ("GET", "/portforwards"),
        ("POST", "/portforward"),
        ("DELETE", "/portforward"),
    ]
    .into_iter()
    .map(|(m, p)| (m, format!("{b}{p}")))
    .collect()
}

pub fn routes() -> Router<AppState> {
    use axum::routing::{get, post};
    let b = Daemon::Network.base();
    Router::new()
        .route(&format!("{b}/portforwards"), get(list))
        .route(&format!("{b}/portforward"), post(create).delete(delete))
}

/// meson answered `404`.
fn not_found(e: &meson_client::Error) -> bool {
    matches!(e, meson_client::Error::Api { status: 404, .. })
}

/// Every forward of the tenant, network after network.
pub(crate) async fn all_forwards(a: &Authed) -> DResult<Vec<PortForward>> {
    let networks = a.meson.network_list_all().await.map_err(Detail::meson)?;
    let mut out = Vec::new();
    for n in &networks {
        match a.meson.port_forward_list(n.id).await {
            Ok(forwards) => out.extend(forwards),
            // Deleted since it was listed: it has no forwards left.
            Err(e) if not_found(&e) => {}
            Err(e) => return Err(Detail::meson(e)),
        }
    }
    Ok(out)
}

/// `GET /portforwards`: every forward of the tenant, in the daemon's shape
/// (its VM's name and provider from one list of the tenant's VMs).
async fn list(a: Authed) -> DResult<Json<Value>> {
    let forwards = all_forwards(&a).await?;
    let vms = if forwards.is_empty() {
        Vec::new()
    } else {
        a.meson.vm_list_all().await.map_err(Detail::meson)?
    };
    let by_id: HashMap<Uuid, &Vm> = vms.iter().map(|v| (v.id, v)).collect();
    Ok(Json(
        forwards
            .iter()
            .map(|f| wire::port_forward_object(f, by_id.get(&f.vm).copied()))
            .collect(),
    ))
}

/// The VM a create forwards to, by `target_vm_uid` (its id) or else
/// `target` (its name), with the field that named it. One that is not the
/// tenant's is refused naming that field, as meson refuses its `vm`.
async fn target_vm(a: &Authed, b: &Value) -> DResult<(&'static str, Vm)> {
    let given = |key: &str| b.get(key).filter(|v| !v.is_null());
    if given("target_vm_uid").is_some() {
        let id = id_field(b, &["target_vm_uid"])?;
        return match a.meson.vm_get(id).await {
            Ok(vm) => Ok(("target_vm_uid", vm)),
            Err(e) if not_found(&e) => Err(Detail::field("target_vm_uid", format!("no VM {id}"))),
            Err(e) => Err(Detail::meson(e)),
        };
    }
    match given("target") {
        Some(Value::String(name)) => {
            let filter = meson_client::ListFilter {
                name: Some(name.clone()),
                ..meson_client::ListFilter::default()
            };
            let vms = a
                .meson
                .vm_list_matching(&filter)
                .await
                .map_err(Detail::meson)?;
            vms.into_iter()
                .find(|v| v.name == *name)
                .map(|vm| ("target", vm))
                .ok_or_else(|| Detail::field("target", format!("no VM named {name:?}")))
        }
        Some(other) => Err(Detail::field(
            "target",
            format!("must be the VM's name, not {other}"),
        )),
        None => Err(Detail::field(
            "target_vm_uid",
            "is required (the VM's id; or target, its name)",
        )),
    }
}

/// The network a create puts the forward on: the body's `network_uid`,
/// else the one private network the VM is on. `vm_field` names the VM.
fn network_of(b: &Value, vm: &Vm, vm_field: &str) -> DResult<Uuid> {
    if b.get("network_uid").is_some_and(|v| !v.is_null()) {
        return id_field(b, &["network_uid"]);
    }
    let mut networks: Vec<Uuid> = Vec::new();
    for n in &vm.private_net {
        if !networks.contains(&n.network) {
            networks.push(n.network);
        }
    }
    match networks.as_slice() {
        [] => Err(Detail::field(
            vm_field,
            "the VM is on no private network: attach it to one first \
             (compute network/attach), a forward relays a network's port",
        )),
        [one] => Ok(*one),
        many => {
            let ids: Vec<String> = many.iter().map(Uuid::to_string).collect();
            Err(Detail::field(
                "network_uid",
                format!(
                    "is required: the VM is on {} private networks ({}); say which one \
                     the forward is on",
                    many.len(),
                    ids.join(", ")
                ),
            ))
        }
    }
}

/// `POST /portforward` `{protocol?, port, target_vm_uid | target,
/// target_port, network_uid?, serverurl?, tailscale?, force?}`: meson's
/// forward, answered at once (`creating`; `GET /portforwards` shows it go
/// `active`) in the daemon's shape with its `action_id`.
async fn create(a: Authed, Body(b): Body) -> DResult<Response> {
    // The body is checked before meson is asked anything; its VM is set
    // once found.
    let mut req: PortForwardCreateRequest = Detail::typed(
        wire::port_forward_create(&b, Uuid::nil())?,
        &wire::port_forward_field,
    )?;
    let (vm_field, vm) = target_vm(&a, &b).await?;
    let network = network_of(&b, &vm, vm_field)?;
    req.vm = vm.id;
    let rename = |f: &str| {
        if f == "vm" {
            vm_field.to_owned()
        } else {
            wire::port_forward_field(f)
        }
    };
    let created = match a.meson.port_forward_create(network, &req).await {
        Ok(c) => c,
        // The body's network: none of the tenant's.
        Err(e) if not_found(&e) && b.get("network_uid").is_some_and(|v| !v.is_null()) => {
            return Err(Detail::field(
                "network_uid",
                format!("no network {network}"),
            ));
        }
        Err(e) => return Err(Detail::from_meson(e, &rename)),
    };
    let mut row = wire::port_forward_object(&created.port_forward, Some(&vm));
    row["action_id"] = json!(created.action.id);
    Ok(warned(row, &created.warnings))
}

/// `DELETE /portforward` `{forward_uid}` (or `?forward_uid=`): starts
/// removing the forward; its row stays (`deleting`) until it is gone.
async fn delete(
    a: Authed,
    Query(q): Query<BTreeMap<String, String>>,
    Body(b): Body,
) -> DResult<Json<Value>> {
    let b = match q.get("forward_uid") {
        Some(id) => json!({"forward_uid": id}),
        None => b,
    };
    let id = id_field(&b, &["forward_uid"])?;
    let forward = all_forwards(&a)
        .await?
        .into_iter()
        .find(|f| f.id == id)
        .ok_or_else(|| Detail::new(StatusCode::NOT_FOUND, format!("no port forward {id}")))?;
    let action = a
        .meson
        .port_forward_delete(forward.network, id)
        .await
        .map_err(Detail::meson)?;
    Ok(Json(json!({"forward_uid": id, "action_id": action.id})))
}
