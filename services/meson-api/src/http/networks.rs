//! `/v1/networks`.

use super::resource::prelude::*;
use super::responses::{
    BadBody, BadBodyField, BadId, CannotDelete, CannotModify, NameTakenOrKeyReused, NoSuchNetwork,
};
use crate::app::{ListQuery, Paged};
use meson_core::network::{Network, NetworkStatus};
use meson_core::{NetworkId, VmId};
use meson_types as wire;
use meson_types::network::{NetworkCreateRequest, NetworkListQuery};
use meson_types::requests::NameLabelsUpdate;

pub fn routes() -> OpenApiRouter<AppState> {
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
