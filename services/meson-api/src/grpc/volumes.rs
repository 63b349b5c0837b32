//! `meson.v1.VolumeService`.

use super::{
    Svc, action_call, answer, convert, convert_more, id, note_action, note_resource, principal,
};
use crate::http::{page_of, pagination};
use crate::views;
use meson_core::Error;
use meson_core::volume::VolumeKind;
use meson_proto::meson::v1 as pb;
use tonic::{Request, Response, Status};

#[tonic::async_trait]
impl pb::volume_service_server::VolumeService for Svc {
    async fn create_volume(
        &self,
        req: Request<pb::CreateVolumeRequest>,
    ) -> Result<Response<pb::CreateVolumeResponse>, Status> {
        let p = principal(&req)?;
        let body = convert_more::volume_create(req.get_ref());
        answer(self.0.app.volume_create(&p, &body).await.map(|c| {
            note_resource(&req, "volume", c.volume.id);
            note_action(&req, &c.action);
            pb::CreateVolumeResponse {
                volume: Some(convert_more::volume(views::volume(&c.volume))),
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
                volume: Some(convert_more::volume(views::volume(&v))),
                warnings: convert::warnings(&warnings),
            })
        };
        answer(r.await)
    }

    async fn delete_volume(
        &self,
        req: Request<pb::DeleteVolumeRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        action_call(&req, |p, req| async move {
            let volume_id = id("id", &req.get_ref().id)?;
            note_resource(req, "volume", volume_id);
            self.0.app.volume_delete(&p, volume_id).await
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
            Ok(convert_more::volume(crate::views::volume(&v)))
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
            let mut pairs = Vec::new();
            convert::page_query(m.page.as_ref(), &mut pairs);
            let page = page_of(&pairs).map_err(|e| e.0)?;
            let vm = (!m.vm.is_empty()).then(|| id("vm", &m.vm)).transpose()?;
            let kind = (!m.kind.is_empty())
                .then(|| {
                    VolumeKind::parse(&m.kind)
                        .ok_or_else(|| Error::invalid("kind", "must be boot, cloudinit or data"))
                })
                .transpose()?;
            let filter = meson_db::volumes::VolumeFilter {
                vm,
                kind,
                standalone: m.standalone,
            };
            let (volumes, total) = self.0.app.volume_list(&p, page, &filter).await?;
            let (meta, _) = pagination("/v1/volumes", page, total);
            Ok(pb::ListVolumesResponse {
                volumes: volumes
                    .iter()
                    .map(|v| convert_more::volume(crate::views::volume(v)))
                    .collect(),
                pagination: Some(convert::pagination(meta)),
            })
        };
        answer(r.await)
    }

    async fn list_volume_actions(
        &self,
        req: Request<pb::ResourceActionsRequest>,
    ) -> Result<Response<pb::ResourceActionsResponse>, Status> {
        self.resource_actions(&req, meson_core::action::ResourceType::Volume)
            .await
    }
}
