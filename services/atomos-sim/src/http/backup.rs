//! Compute (matcher) routes for VM backups: `POST /backup`,
//! `POST /backup/restore`, `POST /backup/schedule`, `GET|DELETE /backups`,
//! `GET /backups/search`. Only the create's answer `{"backup_id"}` is
//! public; the rest is meson's design (docs/atomos.md).

use super::{ApiError, ApiResult, ok, parse};
use crate::host::SimHost;
use crate::state::{HostState, Power, SimBackup, SimBackupVolume};
use atomos_driver::schema::compute::{
    BackupCreateBody, BackupIdBody, BackupObject, BackupRestoreBody, BackupRestoreResponse,
    BackupRestoredVolume, BackupVolumeObject,
};
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::routing::{get, post};
use chrono::SubsecRound;
use serde::Deserialize;
use std::collections::HashSet;

pub(super) fn routes() -> Router<SimHost> {
    Router::new()
        .route("/backup", post(create))
        .route("/backup/restore", post(restore))
        .route("/backup/schedule", post(schedule))
        .route("/backups", get(list).delete(remove))
        .route("/backups/search", get(search))
}

fn backup_to_wire(b: &SimBackup) -> BackupObject {
    BackupObject {
        backup_id: b.id.clone(),
        local_index: b.vm_id.clone(),
        vm_name: b.vm_name.clone(),
        name: b.name.clone(),
        creation_date: Some(
            b.created
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        ),
        size: b.size_gb(),
        volumes: b
            .volumes
            .iter()
            .map(|v| BackupVolumeObject {
                volume_id: v.volume_id.clone(),
                name: v.name.clone(),
                size: v.size_gb,
                content_hash: Some(v.content.clone()),
            })
            .collect(),
    }
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("[BackupNotFound] backup {id} does not exist"))
}

fn backup_at(state: &HostState, id: &str) -> Result<usize, ApiError> {
    state
        .backups
        .iter()
        .position(|b| b.id == id)
        .ok_or_else(|| not_found(id))
}

/// `POST /backup {"local_index", "backup_id"?, "name"?}`: a crash-consistent
/// copy of every volume the VM has attached but its cloud-init ISO (made
/// again from the VM's cloud-init files, and read-only), running or off,
/// kept on this host and counted against its disk. The same `backup_id`
/// for the same VM answers the backup made before (a retried create, even
/// after the VM is gone); for another VM, 409.
async fn create(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let BackupCreateBody {
        local_index,
        backup_id,
        name,
    } = parse(&body)?;
    if local_index.trim().is_empty() {
        return Err(ApiError::bad_request("local_index is required"));
    }
    if backup_id.as_deref().is_some_and(|id| id.trim().is_empty()) {
        return Err(ApiError::bad_request(
            "backup_id must not be empty (leave it out for the host to choose)",
        ));
    }
    let id = backup_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    // Milliseconds, as the answer writes it: the state and the answer agree.
    let created = host.wall_clock().trunc_subsecs(3);
    let mut state = host.state();
    if let Some(have) = state.backups.iter().find(|b| b.id == id) {
        if have.vm_id == local_index {
            return ok(backup_to_wire(have));
        }
        return Err(ApiError::conflict(format!(
            "[BackupExists] backup {id} is VM {}'s ({})",
            have.vm_id, have.vm_name
        )));
    }
    let vm = state
        .vms
        .iter()
        .find(|vm| vm.id == local_index)
        .ok_or_else(|| {
            ApiError::not_found(format!("[VmNotFound] VM {local_index} does not exist"))
        })?;
    let volumes: Vec<SimBackupVolume> = vm
        .volume_ids
        .iter()
        .filter_map(|id| state.volume(id))
        .filter(|v| !v.cloudinit)
        .map(|v| SimBackupVolume {
            volume_id: v.id.clone(),
            name: v.name.clone(),
            size_gb: v.size_gb,
            content: v.content.clone(),
        })
        .collect();
    let name = name
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| format!("{}-{}", vm.name, created.format("%Y%m%d%H%M%S")));
    let backup = SimBackup {
        id,
        vm_id: vm.id.clone(),
        vm_name: vm.name.clone(),
        name,
        created,
        volumes,
    };
    host.fit_disk(&state, backup.size_gb())
        .map_err(|why| ApiError::no_capacity(format!("[BackupNotAllocable] {why}")))?;
    tracing::info!(host = host.name(), backup = %backup.id, vm = %backup.vm_name,
        volumes = backup.volumes.len(), size_gb = backup.size_gb(), "backup taken");
    let answer = backup_to_wire(&backup);
    state.backups.push(backup);
    ok(answer)
}

async fn list(State(host): State<SimHost>) -> ApiResult {
    let rows: Vec<BackupObject> = host.state().backups.iter().map(backup_to_wire).collect();
    ok(rows)
}

/// The search's query: the VM by `local_index` (or `vm_uid`).
#[derive(Deserialize)]
struct SearchQuery {
    local_index: Option<String>,
    vm_uid: Option<String>,
}

/// `GET /backups/search?local_index=<uid>`: the VM's backups; the VM may be
/// gone (an unknown one has none).
async fn search(
    State(host): State<SimHost>,
    query: Result<Query<SearchQuery>, QueryRejection>,
) -> ApiResult {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let vm = query
        .local_index
        .or(query.vm_uid)
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| ApiError::bad_request("local_index is required"))?;
    let rows: Vec<BackupObject> = host
        .state()
        .backups
        .iter()
        .filter(|b| b.vm_id == vm)
        .map(backup_to_wire)
        .collect();
    ok(rows)
}

/// `DELETE /backups {"backup_id"}`: the copies go, their room is free.
async fn remove(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let BackupIdBody { backup_id } = parse(&body)?;
    if backup_id.trim().is_empty() {
        return Err(ApiError::bad_request("backup_id is required"));
    }
    let mut state = host.state();
    let at = backup_at(&state, &backup_id)?;
    let backup = state.backups.remove(at);
    tracing::info!(host = host.name(), backup = %backup.id, vm = %backup.vm_name, "backup deleted");
    ok(serde_json::json!({ "backup_id": backup_id }))
}

/// `POST /backup/restore {"backup_id", "volumes": [{"from", "into"}]}`:
/// writes the copy of each `from` into volume `into` of this host, which
/// then holds its bytes and grows to its size if smaller. All checked
/// before anything is written: every target must exist, not be a
/// cloud-init ISO, not be named twice, and be attached to no VM that is not
/// off (409 `[VmRunning]`); the growth must fit the disk.
async fn restore(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let BackupRestoreBody { backup_id, volumes } = parse(&body)?;
    if backup_id.trim().is_empty() {
        return Err(ApiError::bad_request("backup_id is required"));
    }
    if volumes.is_empty() {
        return Err(ApiError::bad_request(
            "volumes must name at least one {\"from\", \"into\"} pair",
        ));
    }
    let mut state = host.state();
    let backup = &state.backups[backup_at(&state, &backup_id)?];
    let mut targets = HashSet::new();
    let mut plan = Vec::with_capacity(volumes.len());
    let mut growth = 0.0;
    for pair in &volumes {
        let copy = backup
            .volumes
            .iter()
            .find(|v| v.volume_id == pair.from)
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "[BackupVolumeNotFound] volume {} is not in backup {backup_id} (it has {})",
                    pair.from,
                    backup
                        .volumes
                        .iter()
                        .map(|v| v.volume_id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        let at = state
            .volumes
            .iter()
            .position(|v| v.id == pair.into)
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "[VolumeNotFound] volume {} does not exist",
                    pair.into
                ))
            })?;
        let target = &state.volumes[at];
        if !targets.insert(target.id.as_str()) {
            return Err(ApiError::bad_request(format!(
                "volume {} is listed twice as into",
                target.id
            )));
        }
        if target.cloudinit {
            return Err(ApiError::bad_request(format!(
                "[VolumeCannotBeRestored] volume {} is a cloud-init ISO",
                target.id
            )));
        }
        if let Some(vm) = state
            .vms
            .iter()
            .find(|vm| vm.power != Power::Off && vm.volume_ids.contains(&target.id))
        {
            return Err(ApiError::conflict(format!(
                "[VmRunning] volume {} is attached to VM {}, which is not off; stop it first",
                target.id, vm.name
            )));
        }
        growth += (copy.size_gb - target.size_gb).max(0.0);
        plan.push((at, copy.clone(), pair.from.clone()));
    }
    host.fit_disk(&state, growth)
        .map_err(|why| ApiError::no_capacity(format!("[VolumeNotAllocable] {why}")))?;
    let mut restored = Vec::with_capacity(plan.len());
    for (at, copy, from) in plan {
        let target = &mut state.volumes[at];
        target.content = copy.content;
        target.size_gb = target.size_gb.max(copy.size_gb);
        tracing::info!(host = host.name(), backup = %backup_id, %from, into = %target.id,
            "volume restored");
        restored.push(BackupRestoredVolume {
            from,
            into: target.id.clone(),
            size: target.size_gb,
            content_hash: Some(target.content.clone()),
        });
    }
    ok(BackupRestoreResponse {
        backup_id,
        volumes: restored,
    })
}

/// `POST /backup/schedule`: answered, never kept: meson schedules backups
/// itself and calls `/backup` when one is due. The body (any JSON object)
/// comes back with `"scheduled": false`.
async fn schedule(body: Bytes) -> ApiResult {
    let mut body: serde_json::Map<String, serde_json::Value> = parse(&body)?;
    body.insert("scheduled".to_owned(), serde_json::Value::Bool(false));
    ok(body)
}
