//! VMs: create, read, list, update, delete and power.

use super::*;

impl Client {
    /// `POST /v1/vms`: a VM (`VmCreateRequest::new(..)`; its
    /// `attach_volumes` attaches standalone volumes, which pin the VM to
    /// their host).
    pub async fn vm_create(&self, req: &VmCreateRequest) -> Result<wire::VmCreateResponse> {
        self.call(Method::POST, "/v1/vms", Some(req)).await
    }

    /// `POST /v1/vms` with a payload as written (a file, in the client's
    /// shape): sent as is, so meson alone checks it, naming every bad field,
    /// and reports the fields it does not know as warnings.
    pub async fn vm_create_as_written(
        &self,
        payload: &serde_json::Value,
    ) -> Result<wire::VmCreateResponse> {
        self.call(Method::POST, "/v1/vms", Some(payload)).await
    }

    /// A page of the tenant's VMs: by number, or after a `next_cursor`
    /// ([`Page::after`]).
    pub async fn vm_list(&self, page: Page) -> Result<wire::VmList> {
        self.get(&list_path("/v1/vms", &page, &[])).await
    }

    pub async fn vm_get(&self, id: Uuid) -> Result<wire::Vm> {
        let r: wire::VmResponse = self.get(&format!("/v1/vms/{id}")).await?;
        Ok(r.vm)
    }

    pub async fn vm_delete(&self, id: Uuid) -> Result<wire::Action> {
        let r: wire::ActionResponse = self
            .call(Method::DELETE, &format!("/v1/vms/{id}"), None::<&()>)
            .await?;
        Ok(r.action)
    }

    /// `PATCH /v1/vms/{id}`: renames and/or relabels a VM.
    pub async fn vm_update(&self, id: Uuid, req: &NameLabelsUpdate) -> Result<wire::Vm> {
        let r: wire::vm::VmUpdateResponse = self
            .call(Method::PATCH, &format!("/v1/vms/{id}"), Some(req))
            .await?;
        Ok(r.vm)
    }

    /// Powers a VM on or off, or reboots it.
    pub async fn vm_power(&self, id: Uuid, command: PowerCommand) -> Result<wire::Action> {
        let r: wire::ActionResponse = self
            .call(
                Method::POST,
                &format!("/v1/vms/{id}/actions/{command}"),
                None::<&()>,
            )
            .await?;
        Ok(r.action)
    }

    /// Starts resizing a VM (`stop` to have meson stop a running one for
    /// the change and start it again).
    pub async fn vm_resize(
        &self,
        id: Uuid,
        req: &wire::vm::VmResizeRequest,
    ) -> Result<wire::Action> {
        let r: wire::ActionResponse = self
            .call(
                Method::POST,
                &format!("/v1/vms/{id}/actions/resize"),
                Some(req),
            )
            .await?;
        Ok(r.action)
    }

    /// Starts rebuilding a VM from an image or a distribution.
    pub async fn vm_rebuild(
        &self,
        id: Uuid,
        req: &wire::vm::VmRebuildRequest,
    ) -> Result<wire::Action> {
        let r: wire::ActionResponse = self
            .call(
                Method::POST,
                &format!("/v1/vms/{id}/actions/rebuild"),
                Some(req),
            )
            .await?;
        Ok(r.action)
    }

    /// Starts migrating a VM to `host` (of its provider), or to the
    /// cheapest other host with room.
    pub async fn vm_migrate(&self, id: Uuid, host: Option<String>) -> Result<wire::Action> {
        let req = wire::vm::VmMigrateRequest { host };
        let r: wire::ActionResponse = self
            .call(
                Method::POST,
                &format!("/v1/vms/{id}/actions/migrate"),
                Some(&req),
            )
            .await?;
        Ok(r.action)
    }

    /// Starts attaching a VM to one of the tenant's private networks.
    pub async fn vm_attach_network(&self, id: Uuid, network: Uuid) -> Result<wire::Action> {
        self.vm_network(id, "attach-network", network).await
    }

    /// Starts detaching a VM from one of its private networks.
    pub async fn vm_detach_network(&self, id: Uuid, network: Uuid) -> Result<wire::Action> {
        self.vm_network(id, "detach-network", network).await
    }

    async fn vm_network(&self, id: Uuid, action: &str, network: Uuid) -> Result<wire::Action> {
        let req = wire::vm::VmNetworkRequest { network };
        let r: wire::ActionResponse = self
            .call(
                Method::POST,
                &format!("/v1/vms/{id}/actions/{action}"),
                Some(&req),
            )
            .await?;
        Ok(r.action)
    }

    /// Every VM of the caller's tenant, page after page.
    pub async fn vm_list_all(&self) -> Result<Vec<wire::Vm>> {
        self.vm_list_matching(&ListFilter::default()).await
    }

    /// Every VM of the caller's tenant that `filter` keeps, in its order,
    /// page after page.
    pub async fn vm_list_matching(&self, filter: &ListFilter) -> Result<Vec<wire::Vm>> {
        self.list_all("/v1/vms", &filter.query(), |l: wire::VmList| {
            (l.vms, l.meta)
        })
        .await
    }
}
