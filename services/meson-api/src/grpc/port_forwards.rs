//! `meson.v1.PortForwardService`.

use super::{Svc, action_call, answer, convert, id, note_action, note_resource, principal};
use crate::views;
use meson_proto::meson::v1 as pb;
use tonic::{Request, Response, Status};

#[tonic::async_trait]
impl pb::port_forward_service_server::PortForwardService for Svc {
    async fn create_port_forward(
        &self,
        req: Request<pb::CreatePortForwardRequest>,
    ) -> Result<Response<pb::CreatePortForwardResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let network = id("network", &req.get_ref().network)?;
            let body = convert::port_forward_create(req.get_ref());
            let c = self.0.app.port_forward_create(&p, network, &body).await?;
            note_resource(&req, "port_forward", c.port_forward.id);
            note_action(&req, &c.action);
            Ok(pb::CreatePortForwardResponse {
                port_forward: Some(convert::port_forward(views::port_forward(&c.port_forward))),
                action: Some(convert::action(views::action(&c.action))),
                warnings: convert::warnings(&c.warnings),
            })
        };
        answer(r.await)
    }

    async fn get_port_forward(
        &self,
        req: Request<pb::GetPortForwardRequest>,
    ) -> Result<Response<pb::PortForward>, Status> {
        let p = principal(&req)?;
        let r = async {
            let r = req.get_ref();
            let f = self
                .0
                .app
                .port_forward_get(&p, id("network", &r.network)?, id("id", &r.id)?)
                .await?;
            Ok(convert::port_forward(views::port_forward(&f)))
        };
        answer(r.await)
    }

    async fn list_port_forwards(
        &self,
        req: Request<pb::ListPortForwardsRequest>,
    ) -> Result<Response<pb::ListPortForwardsResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let network = id("network", &req.get_ref().network)?;
            let forwards = self.0.app.port_forward_list(&p, network).await?;
            Ok(pb::ListPortForwardsResponse {
                port_forwards: forwards
                    .iter()
                    .map(|f| convert::port_forward(views::port_forward(f)))
                    .collect(),
            })
        };
        answer(r.await)
    }

    async fn delete_port_forward(
        &self,
        req: Request<pb::GetPortForwardRequest>,
    ) -> Result<Response<pb::Action>, Status> {
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
