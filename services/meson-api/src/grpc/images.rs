//! `meson.v1.ImageService`.

use super::{Svc, action_on, answer, convert, id, note_action, note_resource, principal};
use crate::app::{ImageCreated, ListQuery};
use crate::views;
use meson_core::image::ImageStatus;
use meson_proto::meson::v1 as pb;
use tonic::{Request, Response, Status};

fn created<T>(req: &Request<T>, c: &ImageCreated) -> pb::CreateImageResponse {
    note_resource(req, "image", c.image.id);
    note_action(req, &c.action);
    pb::CreateImageResponse {
        image: Some(convert::image(views::image(&c.image))),
        action: Some(convert::action(views::action(&c.action))),
        warnings: convert::warnings(&c.warnings),
    }
}

#[tonic::async_trait]
impl pb::image_service_server::ImageService for Svc {
    async fn import_image(
        &self,
        req: Request<pb::ImportImageRequest>,
    ) -> Result<Response<pb::CreateImageResponse>, Status> {
        let p = principal(&req)?;
        let body = convert::image_import(req.get_ref());
        answer(
            self.0
                .app
                .image_import(&p, &body)
                .await
                .map(|c| created(&req, &c)),
        )
    }

    async fn create_image_from_vm(
        &self,
        req: Request<pb::CreateImageFromVmRequest>,
    ) -> Result<Response<pb::CreateImageResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let vm = id("vm", &req.get_ref().vm)?;
            let body = convert::image_snapshot(req.get_ref());
            let c = self.0.app.vm_create_image(&p, vm, &body).await?;
            Ok(created(&req, &c))
        };
        answer(r.await)
    }

    async fn get_image(
        &self,
        req: Request<pb::GetImageRequest>,
    ) -> Result<Response<pb::Image>, Status> {
        let p = principal(&req)?;
        let r = async {
            let i = self
                .0
                .app
                .image_get(&p, id("id", &req.get_ref().id)?)
                .await?;
            Ok(convert::image(views::image(&i)))
        };
        answer(r.await)
    }

    async fn list_images(
        &self,
        req: Request<pb::ListImagesRequest>,
    ) -> Result<Response<pb::ListImagesResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let pairs = convert::list_query(req.get_ref().options.as_ref());
            let q = ListQuery::parse(&pairs, |v| ImageStatus::parse(v).is_some())?;
            let images = self.0.app.image_list(&p, &q).await?;
            Ok(pb::ListImagesResponse {
                images: images
                    .items
                    .iter()
                    .map(|i| convert::image(views::image(i)))
                    .collect(),
                pagination: Some(convert::pagination(images.pagination())),
            })
        };
        answer(r.await)
    }

    async fn update_image(
        &self,
        req: Request<pb::UpdateImageRequest>,
    ) -> Result<Response<pb::ImageResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let image_id = id("id", &req.get_ref().id)?;
            note_resource(&req, "image", image_id);
            let body = convert::name_labels(&req.get_ref().name, &req.get_ref().labels);
            let (i, warnings) = self.0.app.image_update(&p, image_id, &body).await?;
            Ok(pb::ImageResponse {
                image: Some(convert::image(views::image(&i))),
                warnings: convert::warnings(&warnings),
            })
        };
        answer(r.await)
    }

    async fn delete_image(
        &self,
        req: Request<pb::DeleteImageRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        action_on(&req, "image", &req.get_ref().id, |p, id| async move {
            self.0.app.image_delete(&p, id).await
        })
        .await
    }

    async fn list_image_actions(
        &self,
        req: Request<pb::ResourceActionsRequest>,
    ) -> Result<Response<pb::ResourceActionsResponse>, Status> {
        self.resource_actions(&req, meson_core::action::ResourceType::Image)
            .await
    }
}
