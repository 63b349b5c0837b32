//! The storage daemon over meson's standalone volumes (`/v1/volumes`), and
//! the volumes a VM register attaches.
//!
//! Sizes go in as GB and come out in bytes (the GUI and elemento-cli both
//! read a volume's `size` as bytes). meson checks names, sizes, flags and
//! quotas; it attaches a volume to one VM at a time, so `shareable: true`
//! is refused, naming the field. meson has one kind of privacy: a volume is
//! its tenant's (every user of the tenant sees it, no other tenant does).
//! The daemons' `private` flag is therefore not passed on, whichever value
//! the client sent (elemento-cli sends `false` unless told), and volumes
//! show `private: true`.
//!
//! Names: the daemons took any name, and one name for many volumes;
//! meson's are `[a-zA-Z0-9-]` and unique per tenant, so other characters
//! become `-` and a name in use gets a short suffix.
//!
//! `GET /last/{volume_uuid}` answers the VM that last had a volume (its
//! current VM, else the one its newest action named), as `/status` shows
//! VMs.

use crate::catalog::Daemon;
use crate::error::{DResult, Detail};
use crate::routes::{AppState, Authed, Body, id_field};
use crate::wire;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::{Json, Router};
use meson_client::VolumeFilter;
use meson_types::volume::VolumeCreateRequest;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::time::Duration;
use uuid::Uuid;

/// How long `create` waits for the volume to be made before answering with
/// it still `creating` (the daemons answered once the volume existed).
const CREATE_WAIT: Duration = Duration::from_secs(60);

/// The storage routes served, `(method, path)`.
pub fn served() -> Vec<(&'static str, String)> {
    let b = Daemon::Storage.base();
    [
        ("GET", "/accessible"),
        ("POST", "/cancreate"),
        ("POST", "/create"),
        ("POST", "/destroy"),
        ("POST", "/info"),
        // elemento-cli POSTs; a GET with `?volume_id=` serves a browser.
        ("GET", "/info"),
        ("POST", "/update/resize"),
        ("GET", "/last/{volume_uuid}"),
    ]
    .into_iter()
    .map(|(m, p)| (m, format!("{b}{p}")))
    .collect()
}

pub fn routes() -> Router<AppState> {
    use axum::routing::{get, post};
    let b = Daemon::Storage.base();
    Router::new()
        .route(&format!("{b}/accessible"), get(accessible))
        .route(&format!("{b}/cancreate"), post(cancreate))
        .route(&format!("{b}/create"), post(create))
        .route(&format!("{b}/destroy"), post(destroy))
        .route(&format!("{b}/info"), post(info).get(info))
        .route(&format!("{b}/update/resize"), post(resize))
        .route(&format!("{b}/last/{{volume_uuid}}"), get(last_vm))
}

/// `GET /accessible`: the tenant's standalone volumes (a VM's own disks go
/// with the VM and show in its row).
async fn accessible(a: Authed) -> DResult<Json<Value>> {
    let filter = VolumeFilter {
        standalone: Some(true),
        ..VolumeFilter::default()
    };
    let volumes = a
        .meson
        .volume_list_all(&filter)
        .await
        .map_err(Detail::meson)?;
    Ok(Json(volumes.iter().map(wire::volume).collect()))
}

/// A size in GB as the clients send it: a number, or a string of one
/// (elemento-cli's `cancreate`). `None` when absent.
fn size_gb(body: &Value) -> DResult<Option<u64>> {
    let bad = |v: &Value| {
        Detail::field(
            "size",
            format!("must be a whole number of GB (meson sizes volumes in GB), not {v}"),
        )
    };
    let Some(v) = body.get("size").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let n = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .ok_or_else(|| bad(v))?;
    if n.fract() != 0.0 || n < 0.0 || n > u32::MAX as f64 {
        return Err(bad(v));
    }
    Ok(Some(n as u64))
}

/// `POST /cancreate` `{size}` (GB; the GUI sends the whole create body):
/// how many hosts could take the volume, a bare integer as elemento-cli
/// reads it: meson's AtomOS hosts, or 0 when the storage quota has no room
/// for it. Where it goes (and whether a host has the room) is decided when
/// it is created.
async fn cancreate(a: Authed, Body(b): Body) -> DResult<Json<Value>> {
    let size = size_gb(&b)?.ok_or_else(|| Detail::field("size", "is required (GB)"))?;
    if size == 0 {
        return Err(Detail::field("size", "must be at least 1 GB"));
    }
    let quota = a.meson.quotas().await.map_err(Detail::meson)?;
    let room = quota
        .limits
        .iter()
        .find(|l| l.name == "storage_gb")
        .map(|l| l.quota - l.current);
    if room.is_some_and(|r| i64::try_from(size).map_or(true, |s| s > r)) {
        return Ok(Json(json!(0)));
    }
    let providers = a.meson.providers().await.map_err(Detail::meson)?;
    let hosts: u64 = providers
        .iter()
        .flat_map(|p| &p.regions)
        .map(|r| u64::from(r.hosts))
        .sum();
    Ok(Json(json!(hosts)))
}

/// A daemon volume name in meson's alphabet; as it was when nothing of it
/// is (meson then names the field).
fn volume_name(name: &str) -> String {
    let mapped: String = name
        .trim()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let trimmed = mapped.trim_matches('-');
    if trimmed.is_empty() {
        name.to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// meson refused the name as one the tenant already has.
fn name_taken(e: &meson_client::Error) -> bool {
    matches!(e, meson_client::Error::Api { code, details, .. }
        if code == "uniqueness_error"
            && details.fields.iter().flatten().any(|f| f.name == "name"))
}

/// The create body as meson's `POST /v1/volumes`: what meson does not know
/// is left out, the rest goes as sent (meson reads booleans leniently).
fn create_body(b: &Value) -> DResult<Value> {
    if !b.is_object() {
        return Err(Detail::field(
            "body",
            "must be a JSON object {name, size, ...}",
        ));
    }
    let mut req = Map::new();
    match b.get("name") {
        Some(Value::String(n)) => {
            req.insert("name".into(), json!(volume_name(n)));
        }
        Some(v) if !v.is_null() => {
            req.insert("name".into(), v.clone());
        }
        _ => {}
    }
    match size_gb(b) {
        Ok(Some(n)) => {
            req.insert("size".into(), json!(n));
        }
        Ok(None) => {}
        Err(e) => return Err(e),
    }
    for key in [
        "bootable",
        "readonly",
        "shareable",
        "provider",
        "region",
        "continent",
    ] {
        if let Some(v) = b.get(key).filter(|v| !v.is_null()) {
            req.insert(key.into(), v.clone());
        }
    }
    Ok(Value::Object(req))
}

/// `POST /create` `{name, size (GB), bootable, readonly, shareable,
/// private}`: a meson standalone volume, answered once it is made (or
/// after a minute, still `creating`) as the volume with its id as `vid`.
async fn create(a: Authed, Body(b): Body) -> DResult<Json<Value>> {
    let mut req: VolumeCreateRequest = Detail::typed(create_body(&b)?, &|f| f.to_owned())?;
    let created = match a.meson.volume_create(&req).await {
        Err(e) if name_taken(&e) => {
            let suffix = &Uuid::new_v4().simple().to_string()[..6];
            req.name = format!("{}-{suffix}", req.name);
            a.meson.volume_create(&req).await
        }
        other => other,
    }
    .map_err(Detail::meson)?;
    let id = created.volume.id;
    let waited = a
        .meson
        .wait_for_with(
            &[created.action.id],
            meson_client::WaitOpts::default(),
            tokio::time::sleep(CREATE_WAIT),
        )
        .await;
    match waited {
        Ok(_) | Err(meson_client::Error::Cancelled { .. }) => {}
        Err(meson_client::Error::ActionFailed { action }) => {
            let why = action.error.map_or_else(
                || "unknown error".to_owned(),
                |e| format!("{} ({})", e.message, e.code),
            );
            return Err(Detail::new(
                StatusCode::BAD_GATEWAY,
                format!("meson could not make volume {id}: {why}; destroy it (volume_id {id})"),
            ));
        }
        Err(e) => return Err(Detail::meson(e)),
    }
    let v = a.meson.volume_get(id).await.map_err(Detail::meson)?;
    let mut out = wire::volume(&v);
    out["vid"] = json!(v.id);
    Ok(Json(out))
}

/// The volume id of `/destroy` and `/info`: `volume_id` (the clients) or
/// `volumeID` (the volume's own field).
fn volume_id(b: &Value) -> DResult<Uuid> {
    id_field(b, &["volume_id", "volumeID"])
}

/// `POST /destroy` `{volume_id}`: starts deleting the volume; meson refuses
/// (409) while a VM has it attached.
async fn destroy(a: Authed, Body(b): Body) -> DResult<Json<Value>> {
    let id = volume_id(&b)?;
    let action = a.meson.volume_delete(id).await.map_err(Detail::meson)?;
    Ok(Json(json!({"volume_id": id, "action_id": action.id})))
}

/// `POST /update/resize` `{volume_id, size}` (GB, as `create`): starts
/// growing the volume; a smaller size is refused naming `size`.
async fn resize(a: Authed, Body(b): Body) -> DResult<Json<Value>> {
    let id = volume_id(&b)?;
    let size = size_gb(&b)?.ok_or_else(|| Detail::field("size", "is required (GB)"))?;
    let size = u32::try_from(size).map_err(|_| Detail::field("size", "is too large"))?;
    let action = a
        .meson
        .volume_resize(id, size)
        .await
        .map_err(Detail::meson)?;
    Ok(Json(
        json!({"volume_id": id, "size": size, "action_id": action.id}),
    ))
}

/// `info` `{volume_id}` in the body (POST) or the query (GET): the volume,
/// at the top level (elemento-cli prints it from there) and as `volume`.
async fn info(
    a: Authed,
    Query(q): Query<BTreeMap<String, String>>,
    Body(b): Body,
) -> DResult<Json<Value>> {
    let b = match q.get("volume_id").or_else(|| q.get("volumeID")) {
        Some(id) => json!({"volume_id": id}),
        None => b,
    };
    let id = volume_id(&b)?;
    let v = a.meson.volume_get(id).await.map_err(Detail::meson)?;
    let mut out = wire::volume(&v);
    out["volume"] = wire::volume(&v);
    Ok(Json(out))
}

/// meson answered `404`.
fn not_found(e: &meson_client::Error) -> bool {
    matches!(e, meson_client::Error::Api { status: 404, .. })
}

/// `GET /last/{volume_uuid}`: the VM that last had the volume, as a row of
/// the compute daemon's `/status`: the one it is attached to (or, for a
/// VM's own disk, belongs to), else the VM of its newest action that named
/// one (its last detach, say); `{}` when no VM ever had it, or that VM is
/// gone. A volume that is not the tenant's is a `404`.
async fn last_vm(a: Authed, Path(given): Path<String>) -> DResult<Json<Value>> {
    let id = Uuid::parse_str(given.trim())
        .map_err(|_| Detail::field("volume_uuid", format!("{given:?} is not a volume id")))?;
    let unknown = || {
        let mut d = Detail::field("volume_uuid", format!("no volume {id}"));
        d.status = StatusCode::NOT_FOUND;
        d
    };
    let v = match a.meson.volume_get(id).await {
        Ok(v) => v,
        Err(e) if not_found(&e) => return Err(unknown()),
        Err(e) => return Err(Detail::meson(e)),
    };
    let vm = match v.attached_to.or(v.vm) {
        Some(vm) => Some(vm),
        // Newest first: the last action that named a VM.
        None => a
            .meson
            .resource_actions("volumes", id)
            .await
            .map_err(Detail::meson)?
            .iter()
            .find_map(|act| act.resources.iter().find(|r| r.kind == "vm").map(|r| r.id)),
    };
    let Some(vm) = vm else {
        return Ok(Json(json!({})));
    };
    match a.meson.vm_get(vm).await {
        Ok(vm) => Ok(Json(wire::vm_row(&vm))),
        Err(e) if not_found(&e) => Ok(Json(json!({}))),
        Err(e) => Err(Detail::meson(e)),
    }
}

/// A register's `volumes[{vid}]` (or `{volumeID}`, or plain ids): the
/// standalone volumes the VM attaches.
pub fn register_volumes(body: &Value) -> DResult<Vec<Uuid>> {
    let Some(list) = body.get("volumes").filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let list = list
        .as_array()
        .ok_or_else(|| Detail::field("volumes", "must be a list of {\"vid\": <volume id>}"))?;
    list.iter()
        .enumerate()
        .map(|(i, v)| {
            let field = format!("volumes[{i}].vid");
            let id = v
                .get("vid")
                .or_else(|| v.get("volumeID"))
                .unwrap_or(v)
                .as_str()
                .ok_or_else(|| Detail::field(&field, "is required (a volume id)"))?;
            Uuid::parse_str(id.trim())
                .map_err(|_| Detail::field(&field, format!("{id:?} is not a volume id")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_bodies_and_names() {
        let v = create_body(&json!({"name": "new_volume", "size": 10, "bootable": false,
            "readonly": false, "shareable": false, "private": false, "colour": "red"}))
        .unwrap();
        assert_eq!(
            v,
            json!({"name": "new-volume", "size": 10, "bootable": false, "readonly": false,
                   "shareable": false})
        );
        assert_eq!(create_body(&json!({"size": "50"})).unwrap()["size"], 50);
        let e = create_body(&json!({"name": "x", "size": 0.5})).unwrap_err();
        assert_eq!(e.fields[0]["name"], "size");
        assert_eq!(volume_name("__"), "__");
        assert_eq!(volume_name("Data disk #2"), "Data-disk--2");
    }

    #[test]
    fn register_volume_ids() {
        let id = Uuid::new_v4();
        let got = register_volumes(&json!({"volumes": [{"vid": id.simple().to_string()},
            {"volumeID": id.to_string()}, id.to_string()]}))
        .unwrap();
        assert_eq!(got, vec![id, id, id]);
        assert!(register_volumes(&json!({})).unwrap().is_empty());
        let e = register_volumes(&json!({"volumes": [{"vid": id.to_string()}, {"vid": "nope"}]}))
            .unwrap_err();
        assert_eq!(e.fields[0]["name"], "volumes[1].vid");
        let e = register_volumes(&json!({"volumes": {"vid": "x"}})).unwrap_err();
        assert_eq!(e.fields[0]["name"], "volumes");
    }
}
