//! `meson.v1.VolumeService`.

use super::{Svc, action_on, answer, convert, id, note_action, note_resource, principal};
use crate::app::VolumeQuery;
use crate::views;
use meson_proto::meson::v1 as pb;
use tonic::{Request, Response, Status};

#[tonic::async_trait]
impl pb::volume_service_server::VolumeService for Svc {
    async fn create_volume(
        &self,
        req: Request<pb::CreateVolumeRequest>,
    ) -> Result<Response<pb::CreateVolumeResponse>, Status> {
        let p = principal(&req)?;
        let body = convert::volume_create(req.get_ref());
        answer(self.0.app.volume_create(&p, &body).await.map(|c| {
            note_resource(&req, "volume", c.volume.id);
            note_action(&req, &c.action);
            pb::CreateVolumeResponse {
                volume: Some(convert::volume(views::volume(&c.volume))),
                action: Some(convert::action(views::action(&c.action))),
                warnings: convert::warnings(&c.warnings),
            }
        }))
    }

    async fn update_volume(
        &self,
        req: Request<pb::UpdateVolumeRequest>,
    ) -> Result<Response<pb::VolumeResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let volume_id = id("id", &req.get_ref().id)?;
            note_resource(&req, "volume", volume_id);
            let body = convert::name_labels(&req.get_ref().name, &req.get_ref().labels);
            let (v, warnings) = self.0.app.volume_update(&p, volume_id, &body).await?;
            Ok(pb::VolumeResponse {
                volume: Some(convert::volume(views::volume(&v))),
                warnings: convert::warnings(&warnings),
            })
        };
        answer(r.await)
    }

    async fn delete_volume(
        &self,
        req: Request<pb::DeleteVolumeRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        action_on(&req, "volume", &req.get_ref().id, |p, id| async move {
            self.0.app.volume_delete(&p, id).await
        })
        .await
    }

    async fn get_volume(
        &self,
        req: Request<pb::GetVolumeRequest>,
    ) -> Result<Response<pb::Volume>, Status> {
        let p = principal(&req)?;
        let r = async {
            let v = self
                .0
                .app
                .volume_get(&p, id("id", &req.get_ref().id)?)
                .await?;
            Ok(convert::volume(crate::views::volume(&v)))
        };
        answer(r.await)
    }

    /// Like `GET /v1/volumes?vm=&kind=&standalone=`: an empty field filters nothing.
    async fn list_volumes(
        &self,
        req: Request<pb::ListVolumesRequest>,
    ) -> Result<Response<pb::ListVolumesResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let m = req.get_ref();
            let q = VolumeQuery::parse(&convert::volume_list_query(m))?;
            let volumes = self.0.app.volume_list(&p, &q).await?;
            Ok(pb::ListVolumesResponse {
                volumes: volumes
                    .items
                    .iter()
                    .map(|v| convert::volume(crate::views::volume(v)))
                    .collect(),
                pagination: Some(convert::pagination(volumes.pagination())),
            })
        };
        answer(r.await)
    }

    async fn attach_volume(
        &self,
        req: Request<pb::AttachVolumeRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        let body = convert::volume_attach(req.get_ref());
        action_on(&req, "volume", &req.get_ref().id, |p, id| async move {
            Ok(self.0.app.volume_attach(&p, id, &body).await?.0)
        })
        .await
    }

    async fn detach_volume(
        &self,
        req: Request<pb::DetachVolumeRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        action_on(&req, "volume", &req.get_ref().id, |p, id| async move {
            self.0.app.volume_detach(&p, id).await
        })
        .await
    }

    async fn resize_volume(
        &self,
        req: Request<pb::ResizeVolumeRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        let body = convert::volume_resize(req.get_ref());
        action_on(&req, "volume", &req.get_ref().id, |p, id| async move {
            Ok(self.0.app.volume_resize(&p, id, &body).await?.0)
        })
        .await
    }

    async fn move_volume(
        &self,
        req: Request<pb::MoveVolumeRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        let body = convert::volume_move(req.get_ref());
        action_on(&req, "volume", &req.get_ref().id, |p, id| async move {
            Ok(self.0.app.volume_move(&p, id, &body).await?.0)
        })
        .await
    }

    async fn list_volume_actions(
        &self,
        req: Request<pb::ResourceActionsRequest>,
    ) -> Result<Response<pb::ResourceActionsResponse>, Status> {
        self.resource_actions(&req, meson_core::action::ResourceType::Volume)
            .await
    }
}
