//! `/v1/volumes`.

use super::action_created;
use super::resource::prelude::*;
use super::responses::{
    BadBody, BadCreate, BadId, CannotDelete, CannotModify, NoSuchVolume, VmBusy,
};
use crate::app::{Paged, VolumeQuery};
use meson_core::VolumeId;
use meson_core::volume::Volume;
use meson_types::action as wire_action;
use meson_types::requests::NameLabelsUpdate;
use meson_types::requests::VolumeListQuery;
use meson_types::volume::{
    self as wire, VolumeAttachRequest, VolumeCreateRequest, VolumeMoveRequest, VolumeResizeRequest,
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(read, update, delete))
        .routes(routes!(attach))
        .routes(routes!(detach))
        .routes(routes!(resize))
        .routes(routes!(move_to))
}

resource::create_operation! {
    Volumes;
    /// Creates a standalone volume.
    #[utoipa::path(
        post,
        path = "/v1/volumes",
        tag = "volumes",
        operation_id = "volume_create",
        summary = "Create a volume",
        description = "Stores a standalone data volume (`creating`) and starts its \
            `create_volume` action, which places it on an AtomOS host with room for it (within \
            `provider`, `continent` and `region`) and makes it there; it is then `available`. \
            Attach it by naming it in a VM's `volumes` (`POST /v1/vms`): the VM is placed on the \
            volume's host. It counts against the `storage_gb` quota until deleted.",
        request_body(content = VolumeCreateRequest, content_type = "application/json"),
        responses(
            (status = 201, description = "Accepted: the volume (`creating`) and its action.",
                body = wire::VolumeCreateResponse, links(
                    ("GetVolume" = (operation_id = "volume_get",
                        parameters(("id" = "$response.body#/volume/id")))),
                    ("DeleteVolume" = (operation_id = "volume_delete",
                        parameters(("id" = "$response.body#/volume/id")))),
                    ("GetAction" = (operation_id = "action_get",
                        parameters(("id" = "$response.body#/action/id")))),
                )),
            BadCreate,
            (status = 403, description = "The token's role cannot create (`forbidden`), or the \
                volume would take the tenant over its `storage_gb` quota \
                (`resource_limit_exceeded`).", body = ErrorResponse),
            (status = 409, description = "The tenant has a standalone volume with this name \
                (`uniqueness_error`), or the Idempotency-Key was used with another body \
                (`conflict`).", body = ErrorResponse),
        ),
    )]
}

impl Creatable for Volumes {
    type Created = wire::VolumeCreateResponse;

    async fn create(app: &App, p: &Principal, body: &serde_json::Value) -> Result<Self::Created> {
        let c = app.volume_create(p, body).await?;
        Ok(wire::VolumeCreateResponse {
            volume: views::volume(&c.volume),
            action: views::action(&c.action),
            next_actions: vec![],
            warnings: c.warnings.iter().map(views::warning).collect(),
        })
    }
}

resource::get_operation! {
    Volumes => wire::VolumeResponse,
    doc: "Reads a volume.",
    path: "/v1/volumes/{id}",
    tag: "volumes",
    operation_id: "volume_get",
    summary: "Get a volume",
    id: "The volume's id.",
    found: "The volume.",
    missing: NoSuchVolume,
}

resource::update_operation! {
    Volumes => wire::VolumeResponse;
    /// Renames and/or relabels a standalone volume.
    #[utoipa::path(
        patch,
        path = "/v1/volumes/{id}",
        tag = "volumes",
        operation_id = "volume_update",
        summary = "Update a volume",
        description = "Changes a standalone volume's name and/or replaces its labels (at any \
            time: nothing on AtomOS changes). A VM's own volumes are named by the VM.",
        params(("id" = uuid::Uuid, Path, description = "The volume's id.")),
        request_body(content = NameLabelsUpdate, content_type = "application/json"),
        responses(
            (status = 200, description = "The volume as it is now.", body = wire::VolumeResponse),
            BadBody,
            CannotModify,
            NoSuchVolume,
            (status = 409, description = "The name is taken (`uniqueness_error`), or the volume \
                is a VM's own (`conflict`).", body = ErrorResponse),
        ),
    )]
}

resource::delete_operation! {
    Volumes;
    /// Deletes a standalone volume.
    #[utoipa::path(
        delete,
        path = "/v1/volumes/{id}",
        tag = "volumes",
        operation_id = "volume_delete",
        summary = "Delete a volume",
        description = "Starts its `delete_volume` action, which destroys the volume (and its \
            data) on its AtomOS host. Refused while a VM has it attached (delete the VM: the \
            volume stays, `available`) and for a VM's own volumes, which go with the VM.",
        params(("id" = uuid::Uuid, Path, description = "The volume's id.")),
        responses(
            (status = 200, description = "Accepted: the delete action.", body = meson_types::ActionResponse),
            BadId,
            CannotDelete,
            NoSuchVolume,
            (status = 409, description = "A VM has it attached, or it is a VM's own volume \
                (`conflict`).", body = ErrorResponse),
            (status = 423, description = "An action runs on it: its create or delete (`locked`; \
                the action id in `details.action_id`).", body = ErrorResponse),
        ),
    )]
}

resource::list_operation! {
    Volumes => wire::VolumeList,
    doc: "Every volume of the tenant: VMs' own and standalone ones. `vm=<id>`,",
    doc: "`kind=boot|cloudinit|data` and `standalone=true|false` filter the list.",
    path: "/v1/volumes",
    tag: "volumes",
    operation_id: "volume_list",
    summary: "List volumes",
    query: VolumeListQuery,
    found: "A page of volumes.",
}

resource::action_operation! {
    attach => volume_attach;
    /// Attaches a standalone volume to a VM.
    #[utoipa::path(
        post,
        path = "/v1/volumes/{id}/actions/attach",
        tag = "volumes",
        operation_id = "volume_attach",
        summary = "Attach a volume to a VM",
        description = "Records the volume as attached to `vm` (`attached`) and starts its \
            `attach_volume` action, which hot-plugs it on the VM's AtomOS host; the VM may be \
            `running` or `off` and keeps running (as Hetzner's attach). The volume must be \
            `available` and on the VM's host: a volume on another host is refused naming both. \
            The action holds the VM: no other action runs on the VM until it ends. If it fails, \
            the volume is `available` again.",
        params(("id" = uuid::Uuid, Path, description = "The volume's id.")),
        request_body(content = VolumeAttachRequest, content_type = "application/json"),
        responses(
            (status = 201, description = "Accepted: the action.", body = wire_action::ActionResponse,
                links(("GetAction" = (operation_id = "action_get",
                    parameters(("id" = "$response.body#/action/id")))))),
            (status = 400, description = "A bad field (`invalid_input`: `vm` is not a UUID, or \
                the VM is on another host than the volume), malformed JSON (`json_error`), the id \
                is not a UUID, or a bad `Idempotency-Key`.", body = ErrorResponse),
            CannotModify,
            (status = 404, description = "No such volume, or no such VM, for this tenant \
                (`not_found`).", body = ErrorResponse),
            (status = 409, description = "The volume is attached already (to the VM named in the \
                message), not `available`, or a VM's own; the VM is neither `running` nor `off`, or \
                has the most volumes it can (`conflict`).", body = ErrorResponse),
            VmBusy,
        ),
    )]
}

/// Detaches a standalone volume from its VM.
#[utoipa::path(
    post,
    path = "/v1/volumes/{id}/actions/detach",
    tag = "volumes",
    operation_id = "volume_detach",
    summary = "Detach a volume from its VM",
    description = "Starts a `detach_volume` action, which unplugs the volume on its VM's \
        AtomOS host (running or off); the volume stays `attached` until the host has let it \
        go, then is `available`. The action holds the VM. Takes no body.",
    params(("id" = uuid::Uuid, Path, description = "The volume's id.")),
    responses(
        (status = 201, description = "Accepted: the action.", body = wire_action::ActionResponse,
            links(("GetAction" = (operation_id = "action_get",
                parameters(("id" = "$response.body#/action/id")))))),
        BadId,
        CannotModify,
        NoSuchVolume,
        (status = 409, description = "The volume is not attached, or is a VM's own \
            (`conflict`).", body = ErrorResponse),
        VmBusy,
    ),
)]
async fn detach(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    Ok(action_created(
        &s.app.volume_detach(&p, parse_id(&id)?).await?,
    ))
}

resource::action_operation! {
    resize => volume_resize;
    /// Grows a standalone volume.
    #[utoipa::path(
        post,
        path = "/v1/volumes/{id}/actions/resize",
        tag = "volumes",
        operation_id = "volume_resize",
        summary = "Resize a volume",
        description = "Records the volume's new `size` (counted against `storage_gb` at once) and \
            starts its `resize_volume` action, which grows it on its AtomOS host, attached or not, \
            its VM running or off (as Hetzner's resize); the guest's filesystem is not grown. \
            Volumes only grow: a smaller size is refused. If the action fails, the volume keeps \
            the size its host has. A VM's own data volume grows the same way, as one of its VM's \
            actions (the VM running or off, no other action on it); a VM's boot and cloud-init \
            volumes do not.",
        params(("id" = uuid::Uuid, Path, description = "The volume's id.")),
        request_body(content = VolumeResizeRequest, content_type = "application/json"),
        responses(
            (status = 201, description = "Accepted: the action.", body = wire_action::ActionResponse,
                links(("GetAction" = (operation_id = "action_get",
                    parameters(("id" = "$response.body#/action/id")))))),
            (status = 400, description = "A bad field (`invalid_input`: `size` out of range or \
                smaller than the volume), malformed JSON (`json_error`), the id is not a UUID, or a \
                bad `Idempotency-Key`.", body = ErrorResponse),
            (status = 403, description = "The token's role cannot modify (`forbidden`), or the \
                new size would take the tenant over its `storage_gb` quota \
                (`resource_limit_exceeded`).", body = ErrorResponse),
            NoSuchVolume,
            (status = 409, description = "The volume is neither `available` nor `attached`, is a \
                VM's boot or cloud-init volume, or its VM is neither `running` nor `off` \
                (`conflict`).", body = ErrorResponse),
            (status = 423, description = "An action runs on the volume (its create, delete or \
                another resize) or on its VM (`locked`; the action id in `details.action_id`).",
                body = ErrorResponse),
        ),
    )]
}

resource::action_operation! {
    move_to => volume_move;
    /// Moves a free standalone volume to another host of its provider.
    #[utoipa::path(
        post,
        path = "/v1/volumes/{id}/actions/move",
        tag = "volumes",
        operation_id = "volume_move",
        summary = "Move a volume to another host",
        description = "Starts a `move_volume` action, which copies a free standalone volume to \
            `host` (an AtomOS host of its provider), records it there, and only then destroys the \
            old host's copy; a failure before that puts it back where it was. It stays \
            `available`, and no attach, resize or delete of it starts until the move ends (`423`). \
            An attached volume moves with its VM (`POST /v1/vms/{id}/actions/migrate`).",
        params(("id" = uuid::Uuid, Path, description = "The volume's id.")),
        request_body(content = VolumeMoveRequest, content_type = "application/json"),
        responses(
            (status = 201, description = "Accepted: the action.", body = wire_action::ActionResponse,
                links(("GetAction" = (operation_id = "action_get",
                    parameters(("id" = "$response.body#/action/id")))))),
            (status = 400, description = "A bad field (`invalid_input`: `host` names no host, the \
                volume's own, one of another provider or one taking nothing new), malformed JSON \
                (`json_error`), the id is not a UUID, or a bad `Idempotency-Key`.",
                body = ErrorResponse),
            CannotModify,
            NoSuchVolume,
            (status = 409, description = "The volume is attached, not `available`, or a VM's own \
                (`conflict`).", body = ErrorResponse),
            (status = 423, description = "An action runs on the volume (`locked`; the action id in \
                `details.action_id`).", body = ErrorResponse),
        ),
    )]
}

/// Volumes through the shared handlers.
pub struct Volumes;

impl Resource for Volumes {
    type Id = VolumeId;
    type Item = Volume;
    type Got = wire::VolumeResponse;
    type Updated = wire::VolumeResponse;
    type Listed = Paged<Volume>;
    type Page = wire::VolumeList;
    const PATH: &'static str = "/v1/volumes";

    async fn get(app: &App, p: &Principal, id: VolumeId) -> Result<Volume> {
        app.volume_get(p, id).await
    }

    async fn update(
        app: &App,
        p: &Principal,
        id: VolumeId,
        body: &serde_json::Value,
    ) -> Result<(Volume, Vec<Warning>)> {
        app.volume_update(p, id, body).await
    }

    async fn list(app: &App, p: &Principal, query: &[(String, String)]) -> Result<Paged<Volume>> {
        app.volume_list(p, &VolumeQuery::parse(query)?).await
    }

    fn got(v: &Volume) -> wire::VolumeResponse {
        Self::updated(v, vec![])
    }

    fn updated(v: &Volume, warnings: Vec<meson_types::Warning>) -> wire::VolumeResponse {
        wire::VolumeResponse {
            volume: views::volume(v),
            warnings,
        }
    }

    fn page(listed: &Paged<Volume>, meta: meson_types::Meta) -> wire::VolumeList {
        wire::VolumeList {
            volumes: listed.items.iter().map(views::volume).collect(),
            meta,
        }
    }
}

impl Deletable for Volumes {
    async fn delete(app: &App, p: &Principal, id: VolumeId) -> Result<Action> {
        app.volume_delete(p, id).await
    }
}
