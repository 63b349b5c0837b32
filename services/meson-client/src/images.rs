//! Images: imports, snapshots of VMs, and their reads and changes.

use super::*;
use meson_types::image::{ImageImportRequest, ImageSnapshotRequest};

impl Client {
    /// `POST /v1/images`: an image imported from a URL (`creating`) and
    /// its action.
    pub async fn image_import(
        &self,
        req: &ImageImportRequest,
    ) -> Result<wire::image::ImageCreateResponse> {
        self.call(Method::POST, "/v1/images", Some(req)).await
    }

    /// `POST /v1/vms/{id}/actions/create-image`: a snapshot of the VM's
    /// boot volume (`creating`) and its action.
    pub async fn vm_create_image(
        &self,
        vm: Uuid,
        req: &ImageSnapshotRequest,
    ) -> Result<wire::image::ImageCreateResponse> {
        self.call(
            Method::POST,
            &format!("/v1/vms/{vm}/actions/create-image"),
            Some(req),
        )
        .await
    }

    /// A page of the tenant's images that `filter` keeps.
    pub async fn image_list(
        &self,
        page: Page,
        filter: &ListFilter,
    ) -> Result<wire::image::ImageList> {
        self.get(&list_path("/v1/images", &page, &filter.query()))
            .await
    }

    /// Every image of the caller's tenant that `filter` keeps, page after page.
    pub async fn image_list_all(&self, filter: &ListFilter) -> Result<Vec<wire::image::Image>> {
        self.list_all(
            "/v1/images",
            &filter.query(),
            |l: wire::image::ImageList| (l.images, l.meta),
        )
        .await
    }

    pub async fn image_get(&self, id: Uuid) -> Result<wire::image::Image> {
        let r: wire::image::ImageResponse = self.get(&format!("/v1/images/{id}")).await?;
        Ok(r.image)
    }

    /// Renames and/or relabels an image.
    pub async fn image_update(
        &self,
        id: Uuid,
        req: &NameLabelsUpdate,
    ) -> Result<wire::image::Image> {
        let r: wire::image::ImageResponse = self
            .call(Method::PATCH, &format!("/v1/images/{id}"), Some(req))
            .await?;
        Ok(r.image)
    }

    /// Starts deleting an image (`locked` while it is being created).
    pub async fn image_delete(&self, id: Uuid) -> Result<wire::Action> {
        let r: wire::ActionResponse = self
            .call(Method::DELETE, &format!("/v1/images/{id}"), None::<&()>)
            .await?;
        Ok(r.action)
    }
}
