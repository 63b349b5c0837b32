//! `/v1/vms`.

use super::resource::prelude::*;
use super::responses::{BadId, BadIdOrBody, NoSuchVm, VmBusy};
use crate::app::{ListQuery, VmPage, VmParts};
use meson_core::VmId;
use meson_core::vm::{Vm, VmStatus};
use meson_types as wire;
use meson_types::requests::{NameLabelsUpdate, VmCreateRequest, VmListQuery};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(read, delete, update))
        .routes(routes!(power))
        .routes(routes!(resize))
        .routes(routes!(rebuild))
        .routes(routes!(migrate))
        .routes(routes!(attach_network))
        .routes(routes!(detach_network))
}

resource::create_operation! {
    Vms;
    /// Creates a VM.
    #[utoipa::path(
        post,
        path = "/v1/vms",
        tag = "vms",
        operation_id = "vm_create",
        summary = "Create a VM",
        description = "Validates the request, stores the VM and starts its `create_vm` action: \
            placement (the cheapest host that fits, within `provider`, `continent` and \
            `region`; the host of the standalone `volumes` it attaches, if any), volumes, \
            cloud-init, boot. Poll the action or stream it.",
        request_body(content = VmCreateRequest, content_type = "application/json",
            example = json!(meson_types::requests::vm_create_example())),
        responses(
            (status = 201, description = "Accepted: the VM (`initializing`) and its action.",
                body = wire::VmCreateResponse, links(
                    ("GetVm" = (operation_id = "vm_get",
                        parameters(("id" = "$response.body#/vm/id")))),
                    ("UpdateVm" = (operation_id = "vm_update",
                        parameters(("id" = "$response.body#/vm/id")))),
                    ("DeleteVm" = (operation_id = "vm_delete",
                        parameters(("id" = "$response.body#/vm/id")))),
                    ("PowerOffVm" = (operation_id = "vm_power",
                        parameters(("id" = "$response.body#/vm/id"), ("command" = "poweroff")))),
                    ("ListVmActions" = (operation_id = "vm_action_list",
                        parameters(("id" = "$response.body#/vm/id")))),
                    ("GetAction" = (operation_id = "action_get",
                        parameters(("id" = "$response.body#/action/id")))),
                    ("StreamAction" = (operation_id = "action_stream",
                        parameters(("id" = "$response.body#/action/id")))),
                )),
            (status = 400, description = "Invalid input (`invalid_input`, every rejected field \
                named in `details.fields`, e.g. a `volumes[i]` that is not one of the tenant's \
                `available` standalone volumes, or not on the others' host), malformed JSON \
                (`json_error`) or a bad `Idempotency-Key`.", body = ErrorResponse),
            (status = 403, description = "The token's role cannot create VMs (`forbidden`), or \
                the VM would take the tenant over a quota (`resource_limit_exceeded`, each one \
                in `details.limits`).", body = ErrorResponse),
            (status = 409, description = "The tenant has a VM with this name \
                (`uniqueness_error`), or the `Idempotency-Key` was used with another request \
                (`conflict`).", body = ErrorResponse),
        ),
    )]
}

impl Creatable for Vms {
    type Created = wire::VmCreateResponse;

    async fn create(app: &App, p: &Principal, body: &serde_json::Value) -> Result<Self::Created> {
        let c = app.vm_create(p, body).await?;
        Ok(wire::VmCreateResponse {
            vm: views::vm(&c.vm, &c.parts),
            action: views::action(&c.action),
            next_actions: vec![],
            warnings: c.warnings.iter().map(views::warning).collect(),
        })
    }
}

resource::get_operation! {
    Vms => wire::VmResponse,
    doc: "Reads a VM.",
    path: "/v1/vms/{id}",
    tag: "vms",
    operation_id: "vm_get",
    summary: "Get a VM",
    id: "The VM's id.",
    found: "The VM.",
    missing: NoSuchVm,
}

resource::list_operation! {
    Vms => wire::VmList,
    doc: "Lists VMs.",
    path: "/v1/vms",
    tag: "vms",
    operation_id: "vm_list",
    summary: "List VMs",
    query: VmListQuery,
    found: "A page of VMs.",
}

resource::update_operation! {
    Vms => wire::vm::VmUpdateResponse;
    /// Renames and/or relabels a VM.
    #[utoipa::path(
        patch,
        path = "/v1/vms/{id}",
        tag = "vms",
        operation_id = "vm_update",
        summary = "Rename or relabel a VM",
        description = "Sets the name and/or replaces the labels; nothing changes on AtomOS.",
        params(("id" = uuid::Uuid, Path, description = "The VM's id.")),
        request_body(content = NameLabelsUpdate, content_type = "application/json",
            example = json!({"name": "web-1", "labels": {"env": "prod"}})),
        responses(
            (status = 200, description = "The VM as it is now; `warnings` lists ignored fields.",
                body = wire::vm::VmUpdateResponse),
            BadIdOrBody,
            (status = 403, description = "The token's role cannot change VMs (`forbidden`).",
                body = ErrorResponse),
            NoSuchVm,
            (status = 409, description = "The tenant has another VM with this name \
                (`uniqueness_error`).", body = ErrorResponse),
        ),
    )]
}

resource::delete_operation! {
    Vms;
    /// Deletes a VM.
    #[utoipa::path(
        delete,
        path = "/v1/vms/{id}",
        tag = "vms",
        operation_id = "vm_delete",
        summary = "Delete a VM",
        description = "Starts its `delete_vm` action, which removes the VM and the volumes it \
            owns from AtomOS; the VM is `deleting` until then, and gone after.",
        params(("id" = uuid::Uuid, Path, description = "The VM's id.")),
        responses(
            (status = 200, description = "Accepted: the delete action.", body = wire::ActionResponse,
                links(("GetAction" = (operation_id = "action_get",
                    parameters(("id" = "$response.body#/action/id")))))),
            BadId,
            (status = 403, description = "The token's role cannot delete VMs (`forbidden`).",
                body = ErrorResponse),
            NoSuchVm,
            VmBusy,
        ),
    )]
}

/// Powers a VM on or off, or reboots it.
#[utoipa::path(
    post,
    path = "/v1/vms/{id}/actions/{command}",
    tag = "vms",
    operation_id = "vm_power",
    summary = "Power a VM on or off, or reboot it",
    description = "Starts a `start_vm`, `stop_vm` or `reboot_vm` action. The VM must be \
        placed and `running` or `off`.",
    params(
        ("id" = uuid::Uuid, Path, description = "The VM's id."),
        ("command" = inline(meson_types::vm::PowerCommand), Path, description = "What to do."),
    ),
    responses(
        (status = 201, description = "Accepted: the action.", body = wire::ActionResponse,
            links(("GetAction" = (operation_id = "action_get",
                parameters(("id" = "$response.body#/action/id")))))),
        (status = 400, description = "The id is not a UUID (`invalid_input`) or a bad \
            `Idempotency-Key`.", body = ErrorResponse),
        (status = 403, description = "The token's role cannot power VMs (`forbidden`).",
            body = ErrorResponse),
        (status = 404, description = "No such VM for this tenant, or no such command \
            (`not_found`).", body = ErrorResponse),
        (status = 409, description = "The VM is neither `running` nor `off`, or the \
            `Idempotency-Key` was used with another request (`conflict`).",
            body = ErrorResponse),
        VmBusy,
    ),
)]
async fn power(
    State(s): State<AppState>,
    p: Principal,
    Path((id, command)): Path<(String, String)>,
) -> ApiResult<Response> {
    let op = meson_types::vm::PowerCommand::parse(&command).ok_or_else(|| {
        crate::error::ApiError(meson_core::Error::NotFound {
            kind: "vm action",
            id: command.clone(),
        })
    })?;
    let action = s.app.vm_power(&p, parse_id(&id)?, op).await?;
    Ok(super::action_created(&action))
}

resource::action_operation! {
    resize => vm_resize;
    /// Resizes a VM.
    #[utoipa::path(
        post,
        path = "/v1/vms/{id}/actions/resize",
        tag = "vms",
        operation_id = "vm_resize",
        summary = "Resize a VM",
        description = "Records the VM's new `cores` and/or `memory_mib` (counted against the \
            `vcpus` and `ram_mib` quotas at once, as a create's) and starts its `resize_vm` action, \
            which changes them on the VM's AtomOS host. AtomOS resizes a VM that is off (as \
            Hetzner's server type change): a running VM is refused unless `stop` is true, when it \
            is stopped, resized and started again. The new size must fit the VM's host (the action \
            fails, saying so, when it does not). A failed resize puts the VM back as it was: its old \
            size, running again if it was stopped for the change.",
        params(("id" = uuid::Uuid, Path, description = "The VM's id.")),
        request_body(content = wire::vm::VmResizeRequest, content_type = "application/json"),
        responses(
            (status = 201, description = "Accepted: the action.", body = wire::ActionResponse,
                links(("GetAction" = (operation_id = "action_get",
                    parameters(("id" = "$response.body#/action/id")))))),
            (status = 400, description = "A bad field (`invalid_input`: `cores` or `memory_mib` \
                out of range, or neither given), malformed JSON (`json_error`), the id is not a \
                UUID, or a bad `Idempotency-Key`.", body = ErrorResponse),
            (status = 403, description = "The token's role cannot modify VMs (`forbidden`), or the \
                new size would take the tenant over a quota (`resource_limit_exceeded`, each in \
                `details.limits`).", body = ErrorResponse),
            NoSuchVm,
            (status = 409, description = "The VM is running and `stop` is not true, or it is \
                neither `running` nor `off` (`conflict`).", body = ErrorResponse),
            VmBusy,
        ),
    )]
}

resource::action_operation! {
    rebuild => vm_rebuild;
    /// Rebuilds a VM from an image or a distribution.
    #[utoipa::path(
        post,
        path = "/v1/vms/{id}/actions/rebuild",
        tag = "vms",
        operation_id = "vm_rebuild",
        summary = "Rebuild a VM",
        description = "Starts a `rebuild_vm` action, which makes a new boot volume on the VM's \
            AtomOS host (a copy of `image`, or `os`'s cloud image), swaps it for the old one and \
            destroys the old one: the boot disk's data is lost. The VM keeps its id, address, \
            cloud-init volume (name, keys, network config) and data volumes; a running VM is \
            stopped for the swap and started again (as Hetzner's rebuild). The VM's spec names the \
            new source at once; a failed rebuild puts the old boot volume and spec back.",
        params(("id" = uuid::Uuid, Path, description = "The VM's id.")),
        request_body(content = wire::vm::VmRebuildRequest, content_type = "application/json"),
        responses(
            (status = 201, description = "Accepted: the action.", body = wire::ActionResponse,
                links(("GetAction" = (operation_id = "action_get",
                    parameters(("id" = "$response.body#/action/id")))))),
            (status = 400, description = "A bad field (`invalid_input`: neither or both of `image` \
                and `os`, an unknown distribution, no such image or one on another host), \
                malformed JSON (`json_error`), the id is not a UUID, or a bad `Idempotency-Key`.",
                body = ErrorResponse),
            (status = 403, description = "The token's role cannot modify VMs (`forbidden`), or a \
                larger boot volume would take the tenant over its `storage_gb` quota \
                (`resource_limit_exceeded`).", body = ErrorResponse),
            NoSuchVm,
            (status = 409, description = "The VM is neither `running` nor `off` (`conflict`).",
                body = ErrorResponse),
            VmBusy,
        ),
    )]
}

resource::action_operation! {
    migrate => vm_migrate;
    /// Migrates a VM to another host of its provider.
    #[utoipa::path(
        post,
        path = "/v1/vms/{id}/actions/migrate",
        tag = "vms",
        operation_id = "vm_migrate",
        summary = "Migrate a VM to another host",
        description = "Starts a `migrate_vm` action, which moves the VM to `host` (an AtomOS host \
            of its provider) or, without one, to the cheapest other host of its provider with room \
            for it. The move is cold: a running VM is stopped, its volumes (its own and the \
            standalone ones attached to it) are copied to the new host, where it is registered and \
            started again, and only then is it taken off the old host. A failure before that last \
            step puts it back, running where it was. Its private networks are made on the new host \
            if it has none of them yet, and its NICs keep their MACs and meson's addresses; its \
            address on its host's own network (and a DHCP lease) is the new host's.",
        params(("id" = uuid::Uuid, Path, description = "The VM's id.")),
        request_body(content = wire::vm::VmMigrateRequest, content_type = "application/json"),
        responses(
            (status = 201, description = "Accepted: the action.", body = wire::ActionResponse,
                links(("GetAction" = (operation_id = "action_get",
                    parameters(("id" = "$response.body#/action/id")))))),
            (status = 400, description = "A bad field (`invalid_input`: `host` names no host, the \
                VM's own, one of another provider or one taking no new VMs), malformed JSON \
                (`json_error`), the id is not a UUID, or a bad `Idempotency-Key`.",
                body = ErrorResponse),
            (status = 403, description = "The token's role cannot modify VMs (`forbidden`).",
                body = ErrorResponse),
            NoSuchVm,
            (status = 409, description = "The VM is neither `running` nor `off` (`conflict`).",
                body = ErrorResponse),
            (status = 423, description = "An action runs on the VM or on a volume attached to it \
                (`locked`; the action id in `details.action_id`).", body = ErrorResponse),
        ),
    )]
}

resource::action_operation! {
    attach_network => vm_attach_network;
    /// Attaches a VM to a private network.
    #[utoipa::path(
        post,
        path = "/v1/vms/{id}/actions/attach-network",
        tag = "vms",
        operation_id = "vm_attach_network",
        summary = "Attach a VM to a private network",
        description = "Records the VM's new NIC on `network` (a MAC, and on a network without DHCP \
            the lowest free address of its range, shown in the VM's `private_net` at once) and \
            starts an `attach_network` action, which makes the network on the VM's AtomOS host if \
            it has none of it yet and hot-plugs the NIC there. The VM may be `running` or `off` and \
            keeps running (as Hetzner's attach to network). On a network without DHCP the guest \
            configures the new address itself (cloud-init configured the NICs it booted with). If \
            the action fails, the NIC and its address are released.",
        params(("id" = uuid::Uuid, Path, description = "The VM's id.")),
        request_body(content = wire::vm::VmNetworkRequest, content_type = "application/json"),
        responses(
            (status = 201, description = "Accepted: the action.", body = wire::ActionResponse,
                links(("GetAction" = (operation_id = "action_get",
                    parameters(("id" = "$response.body#/action/id")))))),
            (status = 400, description = "A bad field (`invalid_input`: `network` is not a UUID or \
                is being deleted), malformed JSON (`json_error`), the id is not a UUID, or a bad \
                `Idempotency-Key`.", body = ErrorResponse),
            (status = 403, description = "The token's role cannot modify VMs (`forbidden`).",
                body = ErrorResponse),
            (status = 404, description = "No such VM, or no such network, for this tenant \
                (`not_found`).", body = ErrorResponse),
            (status = 409, description = "The VM is on the network already, on the most networks it \
                can join (4), or neither `running` nor `off` (`conflict`).", body = ErrorResponse),
            VmBusy,
            (status = 503, description = "The network has no free address left \
                (`resource_unavailable`).", body = ErrorResponse),
        ),
    )]
}

resource::action_operation! {
    detach_network => vm_detach_network;
    /// Detaches a VM from a private network.
    #[utoipa::path(
        post,
        path = "/v1/vms/{id}/actions/detach-network",
        tag = "vms",
        operation_id = "vm_detach_network",
        summary = "Detach a VM from a private network",
        description = "Starts a `detach_network` action, which unplugs the VM's NIC on `network` on \
            its AtomOS host, running or off; the NIC (and its address) stays in the VM's \
            `private_net` until then, and is released when it is done.",
        params(("id" = uuid::Uuid, Path, description = "The VM's id.")),
        request_body(content = wire::vm::VmNetworkRequest, content_type = "application/json"),
        responses(
            (status = 201, description = "Accepted: the action.", body = wire::ActionResponse,
                links(("GetAction" = (operation_id = "action_get",
                    parameters(("id" = "$response.body#/action/id")))))),
            (status = 400, description = "A bad field (`invalid_input`: `network` is not a UUID or \
                not one the VM is on), malformed JSON (`json_error`), the id is not a UUID, or a bad \
                `Idempotency-Key`.", body = ErrorResponse),
            (status = 403, description = "The token's role cannot modify VMs (`forbidden`).",
                body = ErrorResponse),
            NoSuchVm,
            (status = 409, description = "The VM is neither `running` nor `off` (`conflict`).",
                body = ErrorResponse),
            VmBusy,
        ),
    )]
}

/// VMs through the shared handlers.
pub struct Vms;

impl resource::Paginated for VmPage {
    fn pagination(&self) -> wire::Pagination {
        self.vms.pagination()
    }
}

impl Resource for Vms {
    type Id = VmId;
    type Item = (Vm, VmParts);
    type Got = wire::VmResponse;
    type Updated = wire::vm::VmUpdateResponse;
    type Listed = VmPage;
    type Page = wire::VmList;
    const PATH: &'static str = "/v1/vms";

    async fn get(app: &App, p: &Principal, id: VmId) -> Result<Self::Item> {
        app.vm_get(p, id).await
    }

    async fn update(
        app: &App,
        p: &Principal,
        id: VmId,
        body: &serde_json::Value,
    ) -> Result<(Self::Item, Vec<Warning>)> {
        app.vm_update(p, id, body).await
    }

    async fn list(app: &App, p: &Principal, query: &[(String, String)]) -> Result<VmPage> {
        let q = ListQuery::parse(query, |v| VmStatus::parse(v).is_some())?;
        app.vm_list(p, &q).await
    }

    fn got((vm, parts): &Self::Item) -> wire::VmResponse {
        wire::VmResponse {
            vm: views::vm(vm, parts),
        }
    }

    fn updated((vm, parts): &Self::Item, warnings: Vec<wire::Warning>) -> Self::Updated {
        wire::vm::VmUpdateResponse {
            vm: views::vm(vm, parts),
            warnings,
        }
    }

    fn page(listed: &VmPage, meta: wire::Meta) -> wire::VmList {
        wire::VmList {
            vms: listed
                .vms
                .items
                .iter()
                .map(|v| views::vm(v, &listed.parts))
                .collect(),
            meta,
        }
    }
}

impl Deletable for Vms {
    async fn delete(app: &App, p: &Principal, id: VmId) -> Result<Action> {
        app.vm_delete(p, id).await
    }
}
