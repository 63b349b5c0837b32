//! Standalone volumes and every VM's volumes.

use super::*;

impl Client {
    /// `POST /v1/volumes`: a standalone volume (`creating`) and its action.
    pub async fn volume_create(
        &self,
        req: &VolumeCreateRequest,
    ) -> Result<wire::volume::VolumeCreateResponse> {
        self.call(Method::POST, "/v1/volumes", Some(req)).await
    }

    /// A page of the tenant's volumes (VMs' own and standalone), filtered.
    pub async fn volume_list(
        &self,
        page: Page,
        filter: &VolumeFilter,
    ) -> Result<wire::volume::VolumeList> {
        self.get(&list_path("/v1/volumes", &page, &filter.query()))
            .await
    }

    /// Every volume of the caller's tenant that `filter` keeps, page after
    /// page.
    pub async fn volume_list_all(
        &self,
        filter: &VolumeFilter,
    ) -> Result<Vec<wire::volume::Volume>> {
        self.list_all(
            "/v1/volumes",
            &filter.query(),
            |l: wire::volume::VolumeList| (l.volumes, l.meta),
        )
        .await
    }

    pub async fn volume_get(&self, id: Uuid) -> Result<wire::volume::Volume> {
        let r: wire::volume::VolumeResponse = self.get(&format!("/v1/volumes/{id}")).await?;
        Ok(r.volume)
    }

    /// Renames and/or relabels a standalone volume.
    pub async fn volume_update(
        &self,
        id: Uuid,
        req: &NameLabelsUpdate,
    ) -> Result<wire::volume::Volume> {
        let r: wire::volume::VolumeResponse = self
            .call(Method::PATCH, &format!("/v1/volumes/{id}"), Some(req))
            .await?;
        Ok(r.volume)
    }

    /// Starts deleting a standalone volume (`conflict` while attached).
    pub async fn volume_delete(&self, id: Uuid) -> Result<wire::Action> {
        let r: wire::ActionResponse = self
            .call(Method::DELETE, &format!("/v1/volumes/{id}"), None::<&()>)
            .await?;
        Ok(r.action)
    }

    /// Starts attaching a standalone volume to a VM of its host.
    pub async fn volume_attach(&self, id: Uuid, vm: Uuid) -> Result<wire::Action> {
        let req = wire::volume::VolumeAttachRequest { vm };
        self.volume_action(id, "attach", Some(&req)).await
    }

    /// Starts detaching a standalone volume from its VM.
    pub async fn volume_detach(&self, id: Uuid) -> Result<wire::Action> {
        self.volume_action(id, "detach", None::<&()>).await
    }

    /// Starts growing a standalone volume to `size` GB.
    pub async fn volume_resize(&self, id: Uuid, size: u32) -> Result<wire::Action> {
        let req = wire::volume::VolumeResizeRequest { size };
        self.volume_action(id, "resize", Some(&req)).await
    }

    /// Starts moving a free standalone volume to `host` (of its provider).
    pub async fn volume_move(&self, id: Uuid, host: String) -> Result<wire::Action> {
        let req = wire::volume::VolumeMoveRequest { host };
        self.volume_action(id, "move", Some(&req)).await
    }

    async fn volume_action(
        &self,
        id: Uuid,
        action: &str,
        body: Option<&impl serde::Serialize>,
    ) -> Result<wire::Action> {
        let r: wire::ActionResponse = self
            .call(
                Method::POST,
                &format!("/v1/volumes/{id}/actions/{action}"),
                body,
            )
            .await?;
        Ok(r.action)
    }
}
