//! Port forwards: a public port of a network's VM's host relayed to the
//! VM, under its network (`/v1/networks/{id}/port-forwards` over REST,
//! `meson.v1.PortForwardService` over gRPC), both through the app calls
//! here. Its create and delete are actions (`create_port_forward`,
//! `delete_port_forward`); a forward goes with its VM.

use crate::app::new_action;
use crate::authz::{self, Rule};
use crate::grpc::convert::json::Obj;
use crate::grpc::convert::meta::timestamp;
use crate::grpc::{Svc, action_call, answer, convert, id, note_action, note_resource, principal};
use crate::http::JsonBody;
use crate::http::resource::prelude::*;
use crate::http::responses::{BadId, BadIds, CannotModify, NoSuchForward, NoSuchNetwork, VmBusy};
use axum::Json;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use meson_core::action::{Command, ResourceType};
use meson_core::port_forward::{
    MAX_PER_NETWORK, PortForward, PortForwardCreate, PortForwardStatus,
};
use meson_core::{Error, NetworkId, PortForwardId};
use meson_db::port_forwards::Of;
use meson_proto::meson::v1 as pb;
use meson_types::port_forward::{
    self as wire, PortForwardCreateRequest, PortForwardCreateResponse, PortForwardList,
    PortForwardResponse,
};
use meson_workflows::port_forward;
use tonic::{Request, Status};

/// How its operations read a request body.
pub(super) const BODIES: &[super::Body] = &[super::Body {
    method: "post",
    path: "/v1/networks/{id}/port-forwards",
    canonical: super::canonical::<PortForwardCreateRequest>,
    read: |v| super::shown(PortForwardCreate::parse(v)),
}];

/// Viewers read a network's forwards; editors make and delete them.
pub(super) const RULES: &[Rule] = &[
    authz::read("port_forward_list"),
    authz::read("port_forward_get"),
    authz::write("port_forward_create"),
    authz::write("port_forward_delete"),
];

pub(super) fn grpc(
    svc: &Svc,
    max: usize,
) -> pb::port_forward_service_server::PortForwardServiceServer<Svc> {
    pb::port_forward_service_server::PortForwardServiceServer::new(svc.clone())
        .max_decoding_message_size(max)
}

// The app layer.

pub struct PortForwardCreated {
    pub port_forward: PortForward,
    pub action: Action,
    pub warnings: Vec<Warning>,
}

impl App {
    /// A network's live forwards, oldest first (the network must be the
    /// tenant's).
    pub async fn port_forward_list(
        &self,
        p: &Principal,
        network: NetworkId,
    ) -> Result<Vec<PortForward>> {
        meson_db::networks::get(&self.pool, &p.tenant, network).await?;
        meson_db::port_forwards::list(&self.pool, Of::Network(network)).await
    }

    pub async fn port_forward_get(
        &self,
        p: &Principal,
        network: NetworkId,
        id: PortForwardId,
    ) -> Result<PortForward> {
        meson_db::port_forwards::get(&self.pool, &p.tenant, network, id).await
    }

    /// Forwards a public port of the VM's host to one of the VM's ports:
    /// the VM must be on the network, placed, and running or off; the port
    /// free on that host (among every tenant's forwards, and none of the
    /// host's AtomOS daemons'). In one transaction, under the VM's key: the
    /// forward (`creating`, holding its port), the action and its job.
    pub async fn port_forward_create(
        &self,
        p: &Principal,
        network: NetworkId,
        body: &serde_json::Value,
    ) -> Result<PortForwardCreated> {
        let req = PortForwardCreate::parse(body)?;
        let mut tx = meson_db::begin(&self.pool).await?;
        meson_db::networks::get(&mut *tx, &p.tenant, network).await?;
        let vm = match meson_db::vms::get(&mut *tx, &p.tenant, req.vm).await {
            Err(Error::NotFound { .. }) => return Err(Error::invalid("vm", "no such VM")),
            other => other?,
        };
        let id = PortForwardId::new();
        let action = new_action(
            p,
            Command::CreatePortForward,
            vec![
                (ResourceType::PortForward, id.0),
                (ResourceType::Vm, vm.id.0),
                (ResourceType::Network, network.0),
            ],
        );
        meson_db::actions::insert(&mut tx, &action).await?;
        let params = port_forward::Params {
            forward_id: id,
            vm_id: vm.id,
        };
        port_forward::enqueue(&mut tx, &params, true, action.id, &p.tenant)
            .await?
            .or_locked("vm", vm.id)?;
        // Checked with the VM's key held: nothing else changes it now.
        crate::app::live_on_host(&vm, "forwarded to")?;
        let nics = meson_db::networks::attachments_of(&mut *tx, &[vm.id]).await?;
        if !nics.iter().any(|n| n.network_id == network) {
            return Err(Error::invalid(
                "vm",
                format!("the VM is not on network {network}: attach it first"),
            ));
        }
        let at = vm
            .placement
            .as_ref()
            .ok_or_else(|| Error::internal("a live VM has no placement"))?;
        let target = meson_db::targets::get(&self.own, at.target_id).await?;
        let daemons = [
            ("compute", target.compute_port),
            ("storage", target.storage_port),
            ("network", target.network_port),
            ("authentication", target.auth_port),
        ];
        if let Some((daemon, _)) = daemons.iter().find(|(_, port)| *port == req.public_port) {
            return Err(Error::invalid(
                "public_port",
                format!(
                    "port {} is host {}'s AtomOS {daemon} daemon's",
                    req.public_port, target.name
                ),
            ));
        }
        let on_network = meson_db::port_forwards::list(&mut *tx, Of::Network(network)).await?;
        if on_network.len() >= MAX_PER_NETWORK {
            return Err(Error::Conflict {
                message: format!(
                    "network {network} has {} port forwards, the most it carries",
                    on_network.len()
                ),
            });
        }
        let forward = PortForward {
            id,
            tenant: p.tenant.clone(),
            network_id: network,
            vm_id: vm.id,
            protocol: req.protocol,
            public_port: req.public_port,
            private_port: req.private_port,
            status: PortForwardStatus::Creating,
            target_id: target.id,
            host: target.name.clone(),
            public_ip: target.host.clone(),
            error_message: None,
            created: chrono::Utc::now(),
        };
        meson_db::port_forwards::insert(&mut tx, &forward).await?;
        meson_db::commit(tx).await?;
        tracing::info!(forward = %id, vm = %vm.id, network = %network, host = %target.name,
            port = req.public_port, action = %action.id, "port forward accepted");
        Ok(PortForwardCreated {
            port_forward: forward,
            action,
            warnings: req.warnings,
        })
    }

    /// Starts removing a forward; `locked` while another action runs on its
    /// VM (its own create included).
    pub async fn port_forward_delete(
        &self,
        p: &Principal,
        network: NetworkId,
        id: PortForwardId,
    ) -> Result<Action> {
        let mut tx = meson_db::begin(&self.pool).await?;
        let forward = meson_db::port_forwards::get(&mut *tx, &p.tenant, network, id).await?;
        let action = new_action(
            p,
            Command::DeletePortForward,
            vec![
                (ResourceType::PortForward, id.0),
                (ResourceType::Vm, forward.vm_id.0),
                (ResourceType::Network, network.0),
            ],
        );
        meson_db::actions::insert(&mut tx, &action).await?;
        let params = port_forward::Params {
            forward_id: id,
            vm_id: forward.vm_id,
        };
        port_forward::enqueue(&mut tx, &params, false, action.id, &p.tenant)
            .await?
            .or_locked("vm", forward.vm_id)?;
        meson_db::port_forwards::set_status(
            &mut *tx,
            id,
            &[PortForwardStatus::Active, PortForwardStatus::Error],
            PortForwardStatus::Deleting,
            None,
        )
        .await?;
        meson_db::commit(tx).await?;
        tracing::info!(forward = %id, action = %action.id, "port forward delete accepted");
        Ok(action)
    }
}

// REST.

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(read, delete))
}

/// Lists a network's port forwards.
#[utoipa::path(
    get,
    path = "/v1/networks/{id}/port-forwards",
    tag = "networks",
    operation_id = "port_forward_list",
    summary = "List a network's port forwards",
    params(("id" = uuid::Uuid, Path, description = "The network's id.")),
    responses(
        (status = 200, description = "Its forwards, oldest first (at most 64).",
            body = PortForwardList),
        BadId,
        NoSuchNetwork,
    ),
)]
async fn list(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<PortForwardList>> {
    let forwards = s.app.port_forward_list(&p, parse_id(&id)?).await?;
    Ok(Json(PortForwardList {
        port_forwards: forwards.iter().map(view).collect(),
    }))
}

/// Forwards a public port to a VM of the network.
#[utoipa::path(
    post,
    path = "/v1/networks/{id}/port-forwards",
    tag = "networks",
    operation_id = "port_forward_create",
    summary = "Forward a public port to a VM",
    description = "Stores a forward (`creating`) of `public_port` on the AtomOS host of `vm` \
        (a VM on this network, placed and `running` or `off`) to the VM's `private_port`, \
        and starts its `create_port_forward` action, which sets it up on the host; it is \
        then `active`, reached at `public_ip:public_port`. The public port is held from the \
        request on: no other forward on that host, of any tenant, can take it. A port the \
        host turns out to use already fails the action, and the forward is `error`. A VM \
        with forwards cannot migrate or leave this network until they are deleted; \
        deleting the VM deletes them.",
    params(("id" = uuid::Uuid, Path, description = "The network's id.")),
    request_body(content = PortForwardCreateRequest, content_type = "application/json",
        example = json!({"public_port": 2222, "vm": "0192d0b2-6a4b-7c61-8b0e-5f1d2c3b4a59",
            "private_port": 22})),
    responses(
        (status = 201, description = "Accepted: the forward (`creating`) and its action.",
            body = PortForwardCreateResponse, links(
                ("GetPortForward" = (operation_id = "port_forward_get",
                    parameters(("id" = "$request.path.id"),
                        ("forward_id" = "$response.body#/port_forward/id")))),
                ("GetAction" = (operation_id = "action_get",
                    parameters(("id" = "$response.body#/action/id")))),
            )),
        (status = 400, description = "A bad field (`invalid_input`, every rejected field \
            named in `details.fields`: `vm` when it is no VM of the tenant's or not on the \
            network, `public_port` when it is one of the host's AtomOS daemons'), malformed \
            JSON (`json_error`), the id is not a UUID, or a bad `Idempotency-Key`.",
            body = ErrorResponse),
        CannotModify,
        NoSuchNetwork,
        (status = 409, description = "The public port is taken on the VM's host, the VM is \
            neither `running` nor `off`, the network has 64 forwards (`conflict`), or the \
            Idempotency-Key was used with another body (`conflict`).", body = ErrorResponse),
        VmBusy,
    ),
)]
async fn create(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let c = s.app.port_forward_create(&p, parse_id(&id)?, &body).await?;
    let res = PortForwardCreateResponse {
        port_forward: view(&c.port_forward),
        action: views::action(&c.action),
        warnings: c.warnings.iter().map(views::warning).collect(),
    };
    Ok((StatusCode::CREATED, Json(res)).into_response())
}

/// Reads a port forward.
#[utoipa::path(
    get,
    path = "/v1/networks/{id}/port-forwards/{forward_id}",
    tag = "networks",
    operation_id = "port_forward_get",
    summary = "Get a port forward",
    params(
        ("id" = uuid::Uuid, Path, description = "The network's id."),
        ("forward_id" = uuid::Uuid, Path, description = "The forward's id."),
    ),
    responses(
        (status = 200, description = "The forward.", body = PortForwardResponse),
        BadIds,
        NoSuchForward,
    ),
)]
async fn read(
    State(s): State<AppState>,
    p: Principal,
    Path((id, forward_id)): Path<(String, String)>,
) -> ApiResult<Json<PortForwardResponse>> {
    let f = s
        .app
        .port_forward_get(&p, parse_id(&id)?, parse_id(&forward_id)?)
        .await?;
    Ok(Json(PortForwardResponse {
        port_forward: view(&f),
    }))
}

/// Deletes a port forward.
#[utoipa::path(
    delete,
    path = "/v1/networks/{id}/port-forwards/{forward_id}",
    tag = "networks",
    operation_id = "port_forward_delete",
    summary = "Delete a port forward",
    description = "Starts its `delete_port_forward` action: the host stops forwarding, then \
        the forward is gone and its public port free. A forward in `error` is deleted the \
        same way.",
    params(
        ("id" = uuid::Uuid, Path, description = "The network's id."),
        ("forward_id" = uuid::Uuid, Path, description = "The forward's id."),
    ),
    responses(
        (status = 200, description = "Accepted: the delete action.",
            body = meson_types::ActionResponse),
        BadIds,
        CannotModify,
        NoSuchForward,
        VmBusy,
    ),
)]
async fn delete(
    State(s): State<AppState>,
    p: Principal,
    Path((id, forward_id)): Path<(String, String)>,
) -> ApiResult<Json<meson_types::ActionResponse>> {
    let action = s
        .app
        .port_forward_delete(&p, parse_id(&id)?, parse_id(&forward_id)?)
        .await?;
    Ok(crate::http::action_answer(&action))
}

/// A port forward as its answers show it.
fn view(f: &PortForward) -> wire::PortForward {
    wire::PortForward {
        id: f.id.0,
        network: f.network_id.0,
        vm: f.vm_id.0,
        protocol: f.protocol.as_str().to_owned(),
        public_ip: f.public_ip.clone(),
        public_port: f.public_port,
        private_port: f.private_port,
        status: f.status.as_str().to_owned(),
        host: f.host.clone(),
        error: f.error_message.clone(),
        created: f.created,
    }
}

// gRPC.

#[tonic::async_trait]
impl pb::port_forward_service_server::PortForwardService for Svc {
    async fn create_port_forward(
        &self,
        req: Request<pb::CreatePortForwardRequest>,
    ) -> Result<tonic::Response<pb::CreatePortForwardResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let network = id("network", &req.get_ref().network)?;
            let body = create_body(req.get_ref());
            let c = self.0.app.port_forward_create(&p, network, &body).await?;
            note_resource(&req, "port_forward", c.port_forward.id);
            note_action(&req, &c.action);
            Ok(pb::CreatePortForwardResponse {
                port_forward: Some(grpc_forward(view(&c.port_forward))),
                action: Some(convert::action(views::action(&c.action))),
                warnings: convert::warnings(&c.warnings),
            })
        };
        answer(r.await)
    }

    async fn get_port_forward(
        &self,
        req: Request<pb::GetPortForwardRequest>,
    ) -> Result<tonic::Response<pb::PortForward>, Status> {
        let p = principal(&req)?;
        let r = async {
            let r = req.get_ref();
            let f = self
                .0
                .app
                .port_forward_get(&p, id("network", &r.network)?, id("id", &r.id)?)
                .await?;
            Ok(grpc_forward(view(&f)))
        };
        answer(r.await)
    }

    async fn list_port_forwards(
        &self,
        req: Request<pb::ListPortForwardsRequest>,
    ) -> Result<tonic::Response<pb::ListPortForwardsResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let network = id("network", &req.get_ref().network)?;
            let forwards = self.0.app.port_forward_list(&p, network).await?;
            Ok(pb::ListPortForwardsResponse {
                port_forwards: forwards
                    .iter()
                    .map(|f| grpc_forward(view(f)))
                    .collect(),
            })
        };
        answer(r.await)
    }

    async fn delete_port_forward(
        &self,
        req: Request<pb::GetPortForwardRequest>,
    ) -> Result<tonic::Response<pb::Action>, Status> {
        action_call(&req, |p, req| async move {
            let r = req.get_ref();
            let network = id("network", &r.network)?;
            let forward: meson_core::PortForwardId = id("id", &r.id)?;
            note_resource(req, "port_forward", forward);
            self.0.app.port_forward_delete(&p, network, forward).await
        })
        .await
    }
}

fn grpc_forward(f: wire::PortForward) -> pb::PortForward {
    pb::PortForward {
        id: f.id.to_string(),
        network: f.network.to_string(),
        vm: f.vm.to_string(),
        protocol: f.protocol,
        public_ip: f.public_ip,
        public_port: u32::from(f.public_port),
        private_port: u32::from(f.private_port),
        status: f.status,
        host: f.host,
        error: f.error,
        created: Some(timestamp(f.created)),
    }
}

/// A `CreatePortForwardRequest` as the REST body of
/// `POST /v1/networks/{id}/port-forwards`: empty fields and zero ports are
/// absent (and named as missing).
fn create_body(r: &pb::CreatePortForwardRequest) -> serde_json::Value {
    Obj::new()
        .str("protocol", &r.protocol)
        .num("public_port", r.public_port)
        .str("vm", &r.vm)
        .num("private_port", r.private_port)
        .value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::convert::shapes::{filled, unread};

    /// Every key the gRPC conversion writes is one the REST reader reads.
    #[test]
    fn the_grpc_request_is_read_as_the_rest_body() {
        let m: pb::CreatePortForwardRequest = filled("meson.v1.CreatePortForwardRequest");
        let unread = unread(&create_body(&m), |v| drop(PortForwardCreate::parse(v)));
        assert!(unread.is_empty(), "written, never read: {unread:?}");
    }
}
