//! `meson.v1.NetworkService`.

use super::{Svc, action_on, answer, convert, id, note_resource, principal};
use crate::app::ListQuery;
use crate::views;
use meson_core::network::NetworkStatus;
use meson_proto::meson::v1 as pb;
use tonic::{Request, Response, Status};

#[tonic::async_trait]
impl pb::network_service_server::NetworkService for Svc {
    async fn create_network(
        &self,
        req: Request<pb::CreateNetworkRequest>,
    ) -> Result<Response<pb::NetworkResponse>, Status> {
        let p = principal(&req)?;
        let body = convert::network_create(req.get_ref());
        answer(
            self.0
                .app
                .network_create(&p, &body)
                .await
                .map(|(network, warnings)| {
                    note_resource(&req, "network", network.id);
                    pb::NetworkResponse {
                        network: Some(convert::network(views::network(&network, &[]))),
                        warnings: convert::warnings(&warnings),
                    }
                }),
        )
    }

    async fn get_network(
        &self,
        req: Request<pb::GetNetworkRequest>,
    ) -> Result<Response<pb::Network>, Status> {
        let p = principal(&req)?;
        let r = async {
            let (network, vms) = self
                .0
                .app
                .network_get(&p, id("id", &req.get_ref().id)?)
                .await?;
            Ok(convert::network(views::network(&network, &vms)))
        };
        answer(r.await)
    }

    async fn list_networks(
        &self,
        req: Request<pb::ListNetworksRequest>,
    ) -> Result<Response<pb::ListNetworksResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let pairs = convert::list_query(req.get_ref().options.as_ref());
            let q = ListQuery::parse(&pairs, |v| NetworkStatus::parse(v).is_some())?;
            let networks = self.0.app.network_list(&p, &q).await?;
            Ok(pb::ListNetworksResponse {
                networks: networks
                    .items
                    .iter()
                    .map(|(n, vms)| convert::network(views::network(n, vms)))
                    .collect(),
                pagination: Some(convert::pagination(networks.pagination())),
            })
        };
        answer(r.await)
    }

    async fn update_network(
        &self,
        req: Request<pb::UpdateNetworkRequest>,
    ) -> Result<Response<pb::NetworkResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let network_id = id("id", &req.get_ref().id)?;
            note_resource(&req, "network", network_id);
            let body = convert::name_labels(&req.get_ref().name, &req.get_ref().labels);
            let ((network, vms), warnings) =
                self.0.app.network_update(&p, network_id, &body).await?;
            Ok(pb::NetworkResponse {
                network: Some(convert::network(views::network(&network, &vms))),
                warnings: convert::warnings(&warnings),
            })
        };
        answer(r.await)
    }

    async fn delete_network(
        &self,
        req: Request<pb::DeleteNetworkRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        action_on(&req, "network", &req.get_ref().id, |p, id| async move {
            self.0.app.network_delete(&p, id).await
        })
        .await
    }

    async fn list_network_actions(
        &self,
        req: Request<pb::ResourceActionsRequest>,
    ) -> Result<Response<pb::ResourceActionsResponse>, Status> {
        self.resource_actions(&req, meson_core::action::ResourceType::Network)
            .await
    }
}
