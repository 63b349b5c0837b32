//! Private networks.

use super::*;

impl Client {
    /// `POST /v1/networks`.
    pub async fn network_create(
        &self,
        req: &NetworkCreateRequest,
    ) -> Result<wire::network::Network> {
        let r: wire::network::NetworkResponse =
            self.call(Method::POST, "/v1/networks", Some(req)).await?;
        Ok(r.network)
    }

    /// A page of the tenant's networks (see [`Client::vm_list`]).
    pub async fn network_list(&self, page: Page) -> Result<wire::network::NetworkList> {
        self.get(&list_path("/v1/networks", &page, &[])).await
    }

    /// Every network of the caller's tenant, page after page.
    pub async fn network_list_all(&self) -> Result<Vec<wire::network::Network>> {
        self.list_all("/v1/networks", &[], |l: wire::network::NetworkList| {
            (l.networks, l.meta)
        })
        .await
    }

    pub async fn network_get(&self, id: Uuid) -> Result<wire::network::Network> {
        let r: wire::network::NetworkResponse = self.get(&format!("/v1/networks/{id}")).await?;
        Ok(r.network)
    }

    /// `PATCH /v1/networks/{id}`: renames and/or relabels a network.
    pub async fn network_update(
        &self,
        id: Uuid,
        req: &NameLabelsUpdate,
    ) -> Result<wire::network::Network> {
        let r: wire::network::NetworkResponse = self
            .call(Method::PATCH, &format!("/v1/networks/{id}"), Some(req))
            .await?;
        Ok(r.network)
    }

    pub async fn network_delete(&self, id: Uuid) -> Result<wire::Action> {
        let r: wire::ActionResponse = self
            .call(Method::DELETE, &format!("/v1/networks/{id}"), None::<&()>)
            .await?;
        Ok(r.action)
    }
}
