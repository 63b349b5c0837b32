//! The compute daemon's backups over meson's (`/v1/backups`, and the VM
//! actions `backup`, `restore`, `enable-backups` and `disable-backups`): a
//! crash-consistent copy of a VM's volumes, kept on its AtomOS host, that
//! outlives the VM.
//!
//! `POST /backup` takes one now; `GET /backups` lists every backup of the
//! tenant, `GET /backups/search` a VM's (deleted VMs' too); `DELETE
//! /backups` starts deleting one. `POST /backup/restore` writes a backup
//! back into its own VM (in place) or into a new VM made like the
//! backed-up one; `POST /backup/schedule` sets or clears the VM's daily
//! backups. meson checks names, the VM's state, quotas and locks; its
//! refusals name the daemon's fields (`local_index`, `backup_id`, ...).

use crate::catalog::Daemon;
use crate::error::{DResult, Detail};
use crate::routes::{AppState, Authed, Body, id_field, warned};
use crate::wire::{self, Schedule};
use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::Response;
use axum::{Json, Router};
use meson_client::ListFilter;
use meson_types::backup::{BackupCreateRequest, BackupPolicyRequest, RestoreRequest};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use uuid::Uuid;

/// The backup routes served, `(method, path)`.
pub fn served() -> Vec<(&'static str, String)> {
    let b = Daemon::Compute.base();
    [
        ("POST", "/backup"),
        ("POST", "/backup/restore"),
        ("POST", "/backup/schedule"),
        ("GET", "/backups"),
        ("DELETE", "/backups"),
        ("GET", "/backups/search"),
    ]
    .into_iter()
    .map(|(m, p)| (m, format!("{b}{p}")))
    .collect()
}

pub fn routes() -> Router<AppState> {
    use axum::routing::{get, post};
    let b = Daemon::Compute.base();
    Router::new()
        .route(&format!("{b}/backup"), post(create))
        .route(&format!("{b}/backup/restore"), post(restore))
        .route(&format!("{b}/backup/schedule"), post(schedule))
        .route(&format!("{b}/backups"), get(list).delete(delete))
        .route(&format!("{b}/backups/search"), get(search))
}

/// meson answered `404`.
fn not_found(e: &meson_client::Error) -> bool {
    matches!(e, meson_client::Error::Api { status: 404, .. })
}

/// A `404` naming the body's field that named what is not there.
fn unknown(field: &str, message: impl Into<String>) -> Detail {
    let mut d = Detail::field(field, message);
    d.status = StatusCode::NOT_FOUND;
    d
}

/// A field of the body, `null` counting as absent.
fn given<'a>(b: &'a Value, key: &str) -> Option<&'a Value> {
    b.get(key).filter(|v| !v.is_null())
}

/// The VM a body names: `local_index` (its `uniqueID`), or `vm_uid`.
fn vm_of(b: &Value) -> DResult<Uuid> {
    id_field(b, &["local_index", "vm_uid"])
}

/// The VM a body names, if it names one.
fn named_vm(b: &Value) -> DResult<Option<Uuid>> {
    if given(b, "local_index").is_some() || given(b, "vm_uid").is_some() {
        vm_of(b).map(Some)
    } else {
        Ok(None)
    }
}

/// `POST /backup` `{local_index, name?, labels?}`: meson's backup of the
/// VM, answered at once (`creating`; the lists show it go `available`) in
/// the daemon's shape, with its `action_id`.
async fn create(a: Authed, Body(b): Body) -> DResult<Response> {
    let req: BackupCreateRequest = Detail::typed(wire::backup_create(&b)?, &str::to_owned)?;
    let vm = vm_of(&b)?;
    let created = match a.meson.vm_backup(vm, &req).await {
        Ok(c) => c,
        Err(e) if not_found(&e) => return Err(unknown("local_index", format!("no VM {vm}"))),
        Err(e) => return Err(Detail::from_meson(e, &str::to_owned)),
    };
    let mut row = wire::backup_object(&created.backup);
    row["action_id"] = json!(created.action.id);
    Ok(warned(row, &created.warnings))
}

/// `GET /backups`: every backup of the tenant, its deleted VMs' too.
async fn list(a: Authed) -> DResult<Json<Value>> {
    let all = a
        .meson
        .backup_list_all(None, &ListFilter::default())
        .await
        .map_err(Detail::meson)?;
    Ok(Json(all.iter().map(wire::backup_object).collect()))
}

/// `GET /backups/search?local_index=` (or `vm_uid`): the VM's backups,
/// kept after it is deleted; a VM meson never had has none.
async fn search(a: Authed, Query(q): Query<BTreeMap<String, String>>) -> DResult<Json<Value>> {
    let q = json!(q);
    let vm = vm_of(&q)?;
    let found = match a
        .meson
        .backup_list_all(Some(vm), &ListFilter::default())
        .await
    {
        Ok(found) => found,
        Err(e) if not_found(&e) => Vec::new(),
        Err(e) => {
            return Err(Detail::from_meson(e, &|f| {
                if f == "vm" {
                    "local_index".to_owned()
                } else {
                    f.to_owned()
                }
            }));
        }
    };
    Ok(Json(found.iter().map(wire::backup_object).collect()))
}

/// `DELETE /backups` `{backup_id}` (or `?backup_id=`): starts deleting the
/// backup; it stays listed (`deleting`) until its host let go of it. One
/// being made, or read by a restore, is `423`.
async fn delete(
    a: Authed,
    Query(q): Query<BTreeMap<String, String>>,
    Body(b): Body,
) -> DResult<Json<Value>> {
    let b = match q.get("backup_id") {
        Some(id) => json!({"backup_id": id}),
        None => b,
    };
    let id = id_field(&b, &["backup_id"])?;
    match a.meson.backup_delete(id).await {
        Ok(action) => Ok(Json(json!({"backup_id": id, "action_id": action.id}))),
        Err(e) if not_found(&e) => Err(unknown("backup_id", format!("no backup {id}"))),
        Err(e) => Err(Detail::meson(e)),
    }
}

/// Whether the tenant still has VM `vm`.
async fn vm_exists(a: &Authed, vm: Uuid) -> DResult<bool> {
    match a.meson.vm_get(vm).await {
        Ok(_) => Ok(true),
        Err(e) if not_found(&e) => Ok(false),
        Err(e) => Err(Detail::meson(e)),
    }
}

/// `POST /backup/restore` `{backup_id, local_index?, into?, vm_name?}`:
/// meson's restore, answered once accepted with the VM written to and the
/// `action_id`.
///
/// Where it writes: `into` (`same` or `new`) when the body says; else in
/// place (`same`) when `local_index` is the backed-up VM, or when the body
/// names no VM and the backed-up VM still exists; else (`local_index`
/// names another of the tenant's VMs, or the backed-up VM is gone) into a
/// new VM made like the backed-up one, on the backup's host, named
/// `vm_name` (or `name`; default: meson's). meson writes a backup into its
/// own VM only: a restore never overwrites another VM. The host-level
/// `volumes` mapping is not read.
async fn restore(a: Authed, Body(b): Body) -> DResult<Response> {
    if !b.is_object() {
        return Err(Detail::field(
            "body",
            "must be a JSON object {backup_id, local_index?}",
        ));
    }
    let id = id_field(&b, &["backup_id"])?;
    let named = named_vm(&b)?;
    let into = match given(&b, "into") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(Detail::field(
                "into",
                format!("must be \"same\" or \"new\", not {other}"),
            ));
        }
    };
    let (name_field, name) = match ["vm_name", "name"]
        .into_iter()
        .find_map(|k| given(&b, k).map(|v| (k, v)))
    {
        None => ("name", None),
        Some((k, Value::String(s))) => (k, Some(s.clone())),
        Some((k, other)) => {
            return Err(Detail::field(
                k,
                format!("must be the new VM's name, not {other}"),
            ));
        }
    };
    let backup = match a.meson.backup_get(id).await {
        Ok(backup) => backup,
        Err(e) if not_found(&e) => return Err(unknown("backup_id", format!("no backup {id}"))),
        Err(e) => return Err(Detail::meson(e)),
    };
    // Another VM the body names: the tenant's, never written to.
    let other = named.filter(|vm| *vm != backup.vm);
    if let Some(vm) = other
        && !vm_exists(&a, vm).await?
    {
        return Err(unknown("local_index", format!("no VM {vm}")));
    }
    let into = match into {
        Some(into) => into,
        None => {
            let same = match named {
                Some(vm) => vm == backup.vm,
                None => vm_exists(&a, backup.vm).await?,
            };
            if same { "same" } else { "new" }.to_owned()
        }
    };
    if into == "same"
        && let Some(vm) = other
    {
        return Err(Detail::field(
            "local_index",
            format!(
                "backup {id} is of VM {} ({}): meson restores a backup in place into its \
                 own VM only, not into VM {vm} (restore it into a new VM instead)",
                backup.vm_name, backup.vm
            ),
        ));
    }
    // meson's restore is an action of the backed-up VM, `new` included
    // (once it is deleted too).
    let req = RestoreRequest {
        backup: id,
        into: Some(into.clone()),
        name: if into == "new" { name } else { None },
    };
    let done = match a.meson.vm_restore(backup.vm, &req).await {
        Ok(done) => done,
        Err(e) if not_found(&e) && into == "same" => {
            return Err(unknown(
                if named.is_some() {
                    "local_index"
                } else {
                    "backup_id"
                },
                format!(
                    "VM {} ({}) is gone: restore the backup into a new VM",
                    backup.vm_name, backup.vm
                ),
            ));
        }
        Err(e) => {
            return Err(Detail::from_meson(e, &|f| {
                wire::restore_field(f, name_field)
            }));
        }
    };
    let row = json!({
        "restored": true,
        "backup_id": id,
        "into": into,
        "uniqueID": done.vm.id,
        "local_index": done.vm.id,
        "vm_name": done.vm.name,
        "action_id": done.action.id,
    });
    Ok(warned(row, &done.warnings))
}

/// `POST /backup/schedule` `{local_index, enabled?, hour? | window? |
/// cron?, keep?, ...}` (see [`wire::backup_schedule`]): the VM's daily
/// backups set (meson's `enable-backups`) or cleared (`disable-backups`).
/// What the body leaves out of an enabled schedule stays as the VM has it.
async fn schedule(a: Authed, Body(b): Body) -> DResult<Json<Value>> {
    let vm = vm_of(&b)?;
    let asked = wire::backup_schedule(&b)?;
    let vm_missing = || unknown("local_index", format!("no VM {vm}"));
    let after = match asked {
        Schedule::Off => match a.meson.vm_disable_backups(vm).await {
            Ok(v) => v,
            Err(e) if not_found(&e) => return Err(vm_missing()),
            Err(e) => return Err(Detail::meson(e)),
        },
        Schedule::On {
            window,
            window_field,
            keep,
            keep_field,
        } => {
            let current = if window.is_none() || keep.is_none() {
                match a.meson.vm_get(vm).await {
                    Ok(v) => v.backups,
                    Err(e) if not_found(&e) => return Err(vm_missing()),
                    Err(e) => return Err(Detail::meson(e)),
                }
            } else {
                None
            };
            let mut body = json!({});
            if let Some(w) = window.or_else(|| current.as_ref().map(|p| p.window.clone())) {
                body["window"] = json!(w);
            }
            if let Some(k) = keep.or_else(|| current.as_ref().map(|p| json!(p.keep))) {
                body["keep"] = k;
            }
            let rename = |f: &str| match f {
                "window" => window_field.to_owned(),
                "keep" => keep_field.to_owned(),
                other => other.to_owned(),
            };
            let req: BackupPolicyRequest = Detail::typed(body, &rename)?;
            match a.meson.vm_enable_backups(vm, &req).await {
                Ok(v) => v,
                Err(e) if not_found(&e) => return Err(vm_missing()),
                Err(e) => return Err(Detail::from_meson(e, &rename)),
            }
        }
    };
    let policy = after.backups.as_ref();
    Ok(Json(json!({
        "scheduled": policy.is_some(),
        "enabled": policy.is_some(),
        "local_index": after.id,
        "uniqueID": after.id,
        "frequency": policy.map(|_| "daily"),
        "window": policy.map(|p| p.window.clone()),
        "keep": policy.map(|p| p.keep),
    })))
}
