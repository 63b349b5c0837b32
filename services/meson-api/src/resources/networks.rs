//! Private networks: `/v1/networks` over REST, `meson.v1.NetworkService`
//! over gRPC, both through the app calls here. A network is stored at
//! once and made on an AtomOS host when the first VM placed there joins it;
//! its delete is an action (`delete_network`) that removes it from every
//! host, refused while VMs are attached.

use crate::app::list::{ListQuery, Paged};
use crate::app::new_action;
use crate::authz::{self, Rule};
use crate::grpc::convert::json::Obj;
use crate::grpc::convert::meta::{map, timestamp};
use crate::grpc::convert::{self, range};
use crate::grpc::{Svc, action_on, answer, id, note_resource, principal};
use crate::http::resource::prelude::*;
use crate::http::responses::{
    BadBody, BadBodyField, BadId, CannotDelete, CannotModify, NameTakenOrKeyReused, NoSuchNetwork,
};
use meson_core::action::{Command, ResourceType};
use meson_core::network::{MAX_NETWORK_NAME_LEN, Network, NetworkCreate, NetworkStatus};
use meson_core::{Error, NetworkId, VmId};
use meson_proto::meson::v1 as pb;
use meson_types as wire;
use meson_types::network::{NetworkCreateRequest, NetworkListQuery};
use meson_types::requests::NameLabelsUpdate;
use meson_workflows::network_delete;
use tonic::{Request, Status};

/// How its operations read a request body.
pub(super) const BODIES: &[super::Body] = &[
    super::Body {
        method: "post",
        path: "/v1/networks",
        canonical: super::canonical::<NetworkCreateRequest>,
        read: |v| super::shown(NetworkCreate::parse(v)),
    },
    super::Body {
        method: "patch",
        path: "/v1/networks/{id}",
        canonical: super::canonical::<NameLabelsUpdate>,
        read: |v| super::shown(meson_core::patch::NameLabels::parse(v, MAX_NETWORK_NAME_LEN)),
    },
];

/// Viewers read networks; editors make, change and delete them. (Its
/// actions are listed with every resource's, in `actions`.)
pub(super) const RULES: &[Rule] = &[
    authz::read("network_list"),
    authz::read("network_get"),
    authz::write("network_create"),
    authz::write("network_update"),
    authz::write("network_delete"),
];

pub(super) fn grpc(
    svc: &Svc,
    max: usize,
) -> pb::network_service_server::NetworkServiceServer<Svc> {
    pb::network_service_server::NetworkServiceServer::new(svc.clone())
        .max_decoding_message_size(max)
}

// The app layer.

impl App {
    /// Validates and stores a network. Nothing is made on AtomOS yet: a
    /// network exists on a host from the first VM placed there with it.
    pub async fn network_create(
        &self,
        p: &Principal,
        body: &serde_json::Value,
    ) -> Result<(Network, Vec<Warning>)> {
        let req = NetworkCreate::parse(body)?;
        let network = Network {
            id: NetworkId::new(),
            tenant: p.tenant.clone(),
            name: req.name,
            status: NetworkStatus::Available,
            labels: req.labels,
            subnet: req.subnet,
            created: chrono::Utc::now(),
        };
        let mut tx = meson_db::begin(&self.pool).await?;
        meson_db::networks::insert(&mut tx, &network).await?;
        meson_db::commit(tx).await?;
        tracing::info!(network = %network.id, tenant = %p.tenant, "network created");
        Ok((network, req.warnings))
    }

    /// A network and the VMs attached to it.
    pub async fn network_get(&self, p: &Principal, id: NetworkId) -> Result<(Network, Vec<VmId>)> {
        let network = meson_db::networks::get(&self.pool, &p.tenant, id).await?;
        let vms = meson_db::networks::vms_on(&self.pool, id).await?;
        Ok((network, vms))
    }

    /// A page of networks, each with its VMs, and the total.
    pub async fn network_list(
        &self,
        p: &Principal,
        q: &ListQuery,
    ) -> Result<Paged<(Network, Vec<VmId>)>> {
        self.page(
            &p.tenant,
            &q.page,
            q.bound("networks", &p.tenant)?,
            &q.filter(),
        )
        .await
    }

    /// Renames a network and/or replaces its labels.
    pub async fn network_update(
        &self,
        p: &Principal,
        id: NetworkId,
        body: &serde_json::Value,
    ) -> Result<((Network, Vec<VmId>), Vec<Warning>)> {
        let renamed = meson_db::networks::RENAMED;
        let warnings = self
            .rename::<(Network, Vec<VmId>)>(&p.tenant, id.0, body, MAX_NETWORK_NAME_LEN, renamed)
            .await?;
        Ok((self.network_get(p, id).await?, warnings))
    }

    /// Starts removing an unused network from every host it was made on.
    /// `conflict` while VMs are attached; `locked` while it is being deleted.
    pub async fn network_delete(&self, p: &Principal, id: NetworkId) -> Result<Action> {
        let mut tx = meson_db::begin(&self.pool).await?;
        // Locked: a VM create attaching to it waits, or sees it deleting.
        meson_db::networks::lock(&mut tx, &p.tenant, id, false).await?;
        let vms = meson_db::networks::vms_on(&mut *tx, id).await?;
        if !vms.is_empty() {
            let ids: Vec<String> = vms.iter().map(ToString::to_string).collect();
            return Err(Error::Conflict {
                message: format!(
                    "the network is in use by {} VM(s): {}; delete them or their attachment first",
                    vms.len(),
                    ids.join(", ")
                ),
            });
        }
        let action = new_action(
            p,
            Command::DeleteNetwork,
            vec![(ResourceType::Network, id.0)],
        );
        meson_db::actions::insert(&mut tx, &action).await?;
        network_delete::enqueue(&mut tx, id, action.id, &p.tenant)
            .await?
            .or_locked("network", id)?;
        meson_db::networks::set_status(&mut *tx, id, NetworkStatus::Deleting).await?;
        meson_db::commit(tx).await?;
        tracing::info!(network = %id, action = %action.id, "network delete accepted");
        Ok(action)
    }
}

// REST.

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(read, delete, update))
}

resource::create_operation! {
    Networks;
    /// Creates a private network.
    #[utoipa::path(
        post,
        path = "/v1/networks",
        tag = "networks",
        operation_id = "network_create",
        summary = "Create a network",
        description = "A private IPv4 network. It is made on an AtomOS host when the first VM \
            placed there joins it (`networks` in `POST /v1/vms`). With `dhcp` false, meson hands \
            each VM the lowest free address of the range and configures it in the guest.",
        request_body(content = NetworkCreateRequest, content_type = "application/json"),
        params(("Idempotency-Key" = Option<String>, Header,
            description = "Makes a retried POST safe: the first response is replayed.")),
        responses(
            (status = 201, description = "The network.", body = wire::network::NetworkResponse),
            BadBodyField,
            (status = 403, description = "The token's role cannot create (`forbidden`).",
                body = ErrorResponse),
            NameTakenOrKeyReused,
        ),
    )]
}

impl Creatable for Networks {
    type Created = wire::network::NetworkResponse;

    async fn create(app: &App, p: &Principal, body: &serde_json::Value) -> Result<Self::Created> {
        let (network, warnings) = app.network_create(p, body).await?;
        Ok(wire::network::NetworkResponse {
            network: views::network(&network, &[]),
            warnings: warnings.iter().map(views::warning).collect(),
        })
    }
}

resource::get_operation! {
    Networks => wire::network::NetworkResponse,
    doc: "Reads a network.",
    path: "/v1/networks/{id}",
    tag: "networks",
    operation_id: "network_get",
    summary: "Get a network",
    id: "The network's id.",
    found: "The network.",
    missing: NoSuchNetwork,
}

resource::list_operation! {
    Networks => wire::network::NetworkList,
    doc: "Lists networks.",
    path: "/v1/networks",
    tag: "networks",
    operation_id: "network_list",
    summary: "List networks",
    query: NetworkListQuery,
    found: "A page of networks.",
}

resource::update_operation! {
    Networks => wire::network::NetworkResponse;
    /// Renames and/or relabels a network.
    #[utoipa::path(
        patch,
        path = "/v1/networks/{id}",
        tag = "networks",
        operation_id = "network_update",
        summary = "Update a network",
        description = "Changes the name and/or replaces the labels; the subnet cannot change.",
        params(("id" = uuid::Uuid, Path, description = "The network's id.")),
        request_body(content = NameLabelsUpdate, content_type = "application/json"),
        responses(
            (status = 200, description = "The network as it is now.",
                body = wire::network::NetworkResponse),
            BadBody,
            CannotModify,
            NoSuchNetwork,
            (status = 409, description = "The name is taken (`uniqueness_error`).",
                body = ErrorResponse),
        ),
    )]
}

resource::delete_operation! {
    Networks;
    /// Deletes an unused network.
    #[utoipa::path(
        delete,
        path = "/v1/networks/{id}",
        tag = "networks",
        operation_id = "network_delete",
        summary = "Delete a network",
        description = "Starts its `delete_network` action, which removes the network from every \
            AtomOS host it was made on. Refused while VMs are attached.",
        params(("id" = uuid::Uuid, Path, description = "The network's id.")),
        responses(
            (status = 200, description = "Accepted: the delete action.", body = wire::ActionResponse),
            BadId,
            CannotDelete,
            NoSuchNetwork,
            (status = 409, description = "VMs are attached to it (`conflict`).",
                body = ErrorResponse),
            (status = 423, description = "It is already being deleted (`locked`; the action id \
                in `details.action_id`).", body = ErrorResponse),
        ),
    )]
}

/// Networks through the shared handlers.
pub struct Networks;

impl Resource for Networks {
    type Id = NetworkId;
    type Item = (Network, Vec<VmId>);
    type Got = wire::network::NetworkResponse;
    type Updated = wire::network::NetworkResponse;
    type Listed = Paged<(Network, Vec<VmId>)>;
    type Page = wire::network::NetworkList;
    const PATH: &'static str = "/v1/networks";

    async fn get(app: &App, p: &Principal, id: NetworkId) -> Result<Self::Item> {
        app.network_get(p, id).await
    }

    async fn update(
        app: &App,
        p: &Principal,
        id: NetworkId,
        body: &serde_json::Value,
    ) -> Result<(Self::Item, Vec<Warning>)> {
        app.network_update(p, id, body).await
    }

    async fn list(app: &App, p: &Principal, query: &[(String, String)]) -> Result<Self::Listed> {
        let q = ListQuery::parse(query, |v| NetworkStatus::parse(v).is_some())?;
        app.network_list(p, &q).await
    }

    fn got(item: &Self::Item) -> Self::Got {
        Self::updated(item, vec![])
    }

    fn updated((n, vms): &Self::Item, warnings: Vec<wire::Warning>) -> Self::Updated {
        wire::network::NetworkResponse {
            network: views::network(n, vms),
            warnings,
        }
    }

    fn page(listed: &Self::Listed, meta: wire::Meta) -> Self::Page {
        wire::network::NetworkList {
            networks: listed
                .items
                .iter()
                .map(|(n, vms)| views::network(n, vms))
                .collect(),
            meta,
        }
    }
}

impl Deletable for Networks {
    async fn delete(app: &App, p: &Principal, id: NetworkId) -> Result<Action> {
        app.network_delete(p, id).await
    }
}

// gRPC.

#[tonic::async_trait]
impl pb::network_service_server::NetworkService for Svc {
    async fn create_network(
        &self,
        req: Request<pb::CreateNetworkRequest>,
    ) -> Result<tonic::Response<pb::NetworkResponse>, Status> {
        let p = principal(&req)?;
        let body = create_body(req.get_ref());
        answer(
            self.0
                .app
                .network_create(&p, &body)
                .await
                .map(|(network, warnings)| {
                    note_resource(&req, "network", network.id);
                    pb::NetworkResponse {
                        network: Some(grpc_network(views::network(&network, &[]))),
                        warnings: convert::warnings(&warnings),
                    }
                }),
        )
    }

    async fn get_network(
        &self,
        req: Request<pb::GetNetworkRequest>,
    ) -> Result<tonic::Response<pb::Network>, Status> {
        let p = principal(&req)?;
        let r = async {
            let (network, vms) = self
                .0
                .app
                .network_get(&p, id("id", &req.get_ref().id)?)
                .await?;
            Ok(grpc_network(views::network(&network, &vms)))
        };
        answer(r.await)
    }

    async fn list_networks(
        &self,
        req: Request<pb::ListNetworksRequest>,
    ) -> Result<tonic::Response<pb::ListNetworksResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let pairs = convert::list_query(req.get_ref().options.as_ref());
            let q = ListQuery::parse(&pairs, |v| NetworkStatus::parse(v).is_some())?;
            let networks = self.0.app.network_list(&p, &q).await?;
            Ok(pb::ListNetworksResponse {
                networks: networks
                    .items
                    .iter()
                    .map(|(n, vms)| grpc_network(views::network(n, vms)))
                    .collect(),
                pagination: Some(convert::pagination(networks.pagination())),
            })
        };
        answer(r.await)
    }

    async fn update_network(
        &self,
        req: Request<pb::UpdateNetworkRequest>,
    ) -> Result<tonic::Response<pb::NetworkResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let network_id = id("id", &req.get_ref().id)?;
            note_resource(&req, "network", network_id);
            let body = convert::name_labels(&req.get_ref().name, &req.get_ref().labels);
            let ((network, vms), warnings) =
                self.0.app.network_update(&p, network_id, &body).await?;
            Ok(pb::NetworkResponse {
                network: Some(grpc_network(views::network(&network, &vms))),
                warnings: convert::warnings(&warnings),
            })
        };
        answer(r.await)
    }

    async fn delete_network(
        &self,
        req: Request<pb::DeleteNetworkRequest>,
    ) -> Result<tonic::Response<pb::Action>, Status> {
        action_on(&req, "network", &req.get_ref().id, |p, id| async move {
            self.0.app.network_delete(&p, id).await
        })
        .await
    }

    async fn list_network_actions(
        &self,
        req: Request<pb::ResourceActionsRequest>,
    ) -> Result<tonic::Response<pb::ResourceActionsResponse>, Status> {
        self.resource_actions(&req, meson_core::action::ResourceType::Network)
            .await
    }
}

fn grpc_network(n: wire::network::Network) -> pb::Network {
    pb::Network {
        id: n.id.to_string(),
        name: n.name,
        status: n.status,
        labels: map(&n.labels),
        created: Some(timestamp(n.created)),
        cidr: n.cidr,
        gateway: n.gateway,
        dhcp: n.dhcp,
        range: Some(range(n.range)),
        vms: n.vms.iter().map(ToString::to_string).collect(),
    }
}

/// `CreateNetworkRequest` as the REST network request.
fn create_body(r: &pb::CreateNetworkRequest) -> serde_json::Value {
    let dhcp_range = r
        .dhcp_range
        .as_ref()
        .map(|d| Obj::new().str("start", &d.start).str("last", &d.last));
    Obj::new()
        .str("name", &r.name)
        .str("cidr", &r.cidr)
        .opt("dhcp", r.dhcp)
        .str("gateway", &r.gateway)
        .obj("dhcp_range", dhcp_range)
        .labels("labels", &r.labels)
        .value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::convert::shapes::{filled, unread};

    /// Every key the gRPC conversion writes is one the REST reader reads.
    #[test]
    fn the_grpc_request_is_read_as_the_rest_body() {
        let m: pb::CreateNetworkRequest = filled("meson.v1.CreateNetworkRequest");
        let unread = unread(&create_body(&m), |v| drop(NetworkCreate::parse(v)));
        assert!(unread.is_empty(), "written, never read: {unread:?}");
    }
    use serde_json::json;

    #[test]
    fn a_typed_network_request_is_the_rest_one() {
        let n = pb::CreateNetworkRequest {
            name: "db".into(),
            cidr: "192.168.10.0/24".into(),
            dhcp: Some(false),
            dhcp_range: Some(pb::AddressRange {
                start: "192.168.10.10".into(),
                last: "192.168.10.20".into(),
            }),
            ..Default::default()
        };
        assert_eq!(
            create_body(&n),
            json!({"name": "db", "cidr": "192.168.10.0/24", "dhcp": false,
                "dhcp_range": {"start": "192.168.10.10", "last": "192.168.10.20"}})
        );
    }
}
