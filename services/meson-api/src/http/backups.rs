//! `/v1/backups`, and a VM's backup actions: `enable-backups`,
//! `disable-backups`, `backup` and `restore`.

use super::resource::{self, Deletable, Resource};
use super::responses::{
    BadActionBody, BadBody, BadId, CannotDelete, CannotModify, NoSuchBackup, NoSuchVm, VmBusy,
};
use super::{AppState, JsonBody, parse_id};
use crate::app::list::BackupQuery;
use crate::app::{App, Paged};
use crate::auth::Principal;
use crate::error::ApiResult;
use crate::views;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use meson_core::action::Action;
use meson_core::backup::Backup;
use meson_core::parse::Warning;
use meson_core::{BackupId, Result};
use meson_types::ErrorResponse;
use meson_types::backup::{
    self as wire, BackupCreateRequest, BackupListQuery, BackupPolicyRequest, RestoreRequest,
};
use meson_types::requests::NameLabelsUpdate;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(read, update, delete))
        .routes(routes!(enable))
        .routes(routes!(disable))
        .routes(routes!(take))
        .routes(routes!(restore))
}

/// Turns on a VM's automatic backups.
#[utoipa::path(
    post,
    path = "/v1/vms/{id}/actions/enable-backups",
    tag = "backups",
    operation_id = "vm_enable_backups",
    summary = "Enable a VM's automatic backups",
    description = "Sets the VM's backup policy: meson takes one backup a day, starting within \
        `window` (UTC hours; a host takes a bounded number at once, so a backup may start \
        later in the window), and deletes the oldest automatic backups beyond `keep`. Given \
        again, it changes the policy. Automatic backups count against `images_gb` like \
        manual ones; one refused by the quota is tried again on the next pass. Nothing on \
        AtomOS changes now.",
    params(("id" = uuid::Uuid, Path, description = "The VM's id.")),
    request_body(content = BackupPolicyRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The VM, its `backups` policy set.",
            body = meson_types::vm::VmUpdateResponse),
        BadBody,
        CannotModify,
        NoSuchVm,
    ),
)]
async fn enable(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let (vm, parts, warnings) = s.app.vm_enable_backups(&p, parse_id(&id)?, &body).await?;
    Ok(Json(meson_types::vm::VmUpdateResponse {
        vm: views::vm(&vm, &parts),
        warnings: warnings.iter().map(views::warning).collect(),
    })
    .into_response())
}

/// Turns off a VM's automatic backups.
#[utoipa::path(
    post,
    path = "/v1/vms/{id}/actions/disable-backups",
    tag = "backups",
    operation_id = "vm_disable_backups",
    summary = "Disable a VM's automatic backups",
    description = "Clears the VM's backup policy: no more automatic backups are taken. Those it \
        has stay until their `expires` time, `keep` days from now (enabling backups again \
        keeps them under the policy); manual backups are kept until deleted.",
    params(("id" = uuid::Uuid, Path, description = "The VM's id.")),
    responses(
        (status = 200, description = "The VM, `backups` null.", body = meson_types::VmResponse),
        BadId,
        CannotModify,
        NoSuchVm,
    ),
)]
async fn disable(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let (vm, parts) = s.app.vm_disable_backups(&p, parse_id(&id)?).await?;
    Ok(Json(meson_types::VmResponse {
        vm: views::vm(&vm, &parts),
    })
    .into_response())
}

/// Takes a backup of a VM now.
#[utoipa::path(
    post,
    path = "/v1/vms/{id}/actions/backup",
    tag = "backups",
    operation_id = "vm_backup",
    summary = "Back up a VM now",
    description = "Stores a manual backup (`creating`) and starts its `create_backup` action, \
        which copies every volume attached to the VM (its cloud-init ISO aside) on the VM's \
        AtomOS host; the backup is then `available`. The copy is crash-consistent: the VM \
        keeps running (power it off first for a clean one). The VM must be `running` or \
        `off`, and no other action runs on it until the copy is made. A manual backup is \
        kept until deleted, after its VM too, and counts its size against `images_gb`.",
    params(("id" = uuid::Uuid, Path, description = "The VM's id.")),
    request_body(content = BackupCreateRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "Accepted: the backup (`creating`) and its action.",
            body = wire::BackupCreateResponse, links(
                ("GetBackup" = (operation_id = "backup_get",
                    parameters(("id" = "$response.body#/backup/id")))),
                ("GetAction" = (operation_id = "action_get",
                    parameters(("id" = "$response.body#/action/id")))),
            )),
        BadActionBody,
        (status = 403, description = "The token's role cannot create (`forbidden`), or the \
            backup would take the tenant over its `images_gb` quota \
            (`resource_limit_exceeded`).", body = ErrorResponse),
        NoSuchVm,
        (status = 409, description = "The VM is neither `running` nor `off` (`conflict`), or \
            the Idempotency-Key was used with another body (`conflict`).",
            body = ErrorResponse),
        VmBusy,
    ),
)]
async fn take(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let c = s.app.vm_backup(&p, parse_id(&id)?, &body).await?;
    let res = wire::BackupCreateResponse {
        backup: views::backup(&c.backup),
        action: views::action(&c.action),
        warnings: c.warnings.iter().map(views::warning).collect(),
    };
    Ok((StatusCode::CREATED, Json(res)).into_response())
}

/// Restores a VM's backup into it, or into a new VM.
#[utoipa::path(
    post,
    path = "/v1/vms/{id}/actions/restore",
    tag = "backups",
    operation_id = "vm_restore",
    summary = "Restore a VM from a backup",
    description = "Starts a `restore_vm` action. `into: same` (the default): a running VM is \
        stopped, each of its volumes the backup holds a copy of is overwritten with that copy \
        (what they held since is lost), and the VM is started again; the VM must be `running` \
        or `off`, on the backup's host, with every volume of the backup still attached. \
        `into: new`: a new VM like the backed-up one (its size, distribution, keys and data \
        volumes; no networks or labels) is made on the backup's host, its boot and data \
        volumes written from the backup before it first boots; the backed-up VM may have \
        been deleted since. Either way the backup stays, and cannot be deleted until the \
        restore is done.",
    params(("id" = uuid::Uuid, Path, description = "The backed-up VM's id.")),
    request_body(content = RestoreRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "Accepted: the VM written to (this one, or the new one, \
            `initializing`) and the action.", body = wire::RestoreResponse, links(
                ("GetVm" = (operation_id = "vm_get",
                    parameters(("id" = "$response.body#/vm/id")))),
                ("GetAction" = (operation_id = "action_get",
                    parameters(("id" = "$response.body#/action/id")))),
            )),
        (status = 400, description = "A bad field (`invalid_input`: no such backup, or a \
            backup of another VM), malformed JSON (`json_error`), the id is not a UUID, or a \
            bad `Idempotency-Key`.", body = ErrorResponse),
        (status = 403, description = "The token's role cannot modify VMs (`forbidden`), or a \
            new VM would take the tenant over a quota (`resource_limit_exceeded`).",
            body = ErrorResponse),
        NoSuchVm,
        (status = 409, description = "The backup is not `available`, the VM is neither \
            `running` nor `off`, has moved off the backup's host, or lacks a volume the \
            backup holds (`conflict`).", body = ErrorResponse),
        VmBusy,
    ),
)]
async fn restore(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let r = s.app.vm_restore(&p, parse_id(&id)?, &body).await?;
    let res = wire::RestoreResponse {
        vm: views::vm(&r.vm, &r.parts),
        action: views::action(&r.action),
        warnings: r.warnings.iter().map(views::warning).collect(),
    };
    Ok((StatusCode::CREATED, Json(res)).into_response())
}

resource::get_operation! {
    Backups => wire::BackupResponse,
    doc: "Reads a backup.",
    path: "/v1/backups/{id}",
    tag: "backups",
    operation_id: "backup_get",
    summary: "Get a backup",
    id: "The backup's id.",
    found: "The backup.",
    missing: NoSuchBackup,
}

resource::update_operation! {
    Backups => wire::BackupResponse;
    /// Renames and/or relabels a backup.
    #[utoipa::path(
        patch,
        path = "/v1/backups/{id}",
        tag = "backups",
        operation_id = "backup_update",
        summary = "Update a backup",
        description = "Changes a backup's name and/or replaces its labels (nothing on AtomOS \
            changes).",
        params(("id" = uuid::Uuid, Path, description = "The backup's id.")),
        request_body(content = NameLabelsUpdate, content_type = "application/json"),
        responses(
            (status = 200, description = "The backup as it is now.", body = wire::BackupResponse),
            BadBody,
            CannotModify,
            NoSuchBackup,
        ),
    )]
}

resource::delete_operation! {
    Backups;
    /// Deletes a backup.
    #[utoipa::path(
        delete,
        path = "/v1/backups/{id}",
        tag = "backups",
        operation_id = "backup_delete",
        summary = "Delete a backup",
        description = "Starts its `delete_backup` action, which deletes the backup's copies on \
            its AtomOS host; it stops counting against `images_gb` when done. Refused while it \
            is being taken or a restore reads it.",
        params(("id" = uuid::Uuid, Path, description = "The backup's id.")),
        responses(
            (status = 200, description = "Accepted: the delete action.",
                body = meson_types::ActionResponse),
            BadId,
            CannotDelete,
            NoSuchBackup,
            (status = 423, description = "An action runs on it: its create, a restore reading \
                it, or its delete (`locked`; the action id in `details.action_id`).",
                body = ErrorResponse),
        ),
    )]
}

resource::list_operation! {
    Backups => wire::BackupList,
    doc: "The tenant's backups, filtered by VM, name, status and labels.",
    path: "/v1/backups",
    tag: "backups",
    operation_id: "backup_list",
    summary: "List backups",
    query: BackupListQuery,
    found: "A page of backups.",
}

/// Backups through the shared handlers.
pub struct Backups;

impl Resource for Backups {
    type Id = BackupId;
    type Item = Backup;
    type Got = wire::BackupResponse;
    type Updated = wire::BackupResponse;
    type Listed = Paged<Backup>;
    type Page = wire::BackupList;
    const PATH: &'static str = "/v1/backups";

    async fn get(app: &App, p: &Principal, id: BackupId) -> Result<Backup> {
        app.backup_get(p, id).await
    }

    async fn update(
        app: &App,
        p: &Principal,
        id: BackupId,
        body: &serde_json::Value,
    ) -> Result<(Backup, Vec<Warning>)> {
        app.backup_update(p, id, body).await
    }

    async fn list(app: &App, p: &Principal, query: &[(String, String)]) -> Result<Paged<Backup>> {
        app.backup_list(p, &BackupQuery::parse(query)?).await
    }

    fn got(b: &Backup) -> wire::BackupResponse {
        Self::updated(b, vec![])
    }

    fn updated(b: &Backup, warnings: Vec<meson_types::Warning>) -> wire::BackupResponse {
        wire::BackupResponse {
            backup: views::backup(b),
            warnings,
        }
    }

    fn page(listed: &Paged<Backup>, meta: meson_types::Meta) -> wire::BackupList {
        wire::BackupList {
            backups: listed.items.iter().map(views::backup).collect(),
            meta,
        }
    }
}

impl Deletable for Backups {
    async fn delete(app: &App, p: &Principal, id: BackupId) -> Result<Action> {
        app.backup_delete(p, id).await
    }
}
