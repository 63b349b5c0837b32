//! The catalogue: flavours, providers, Kubernetes versions, quotes.

use super::*;

impl Client {
    pub async fn flavors(&self) -> Result<Vec<wire::catalog::Flavor>> {
        let r: wire::catalog::FlavorList = self.get("/v1/flavors").await?;
        Ok(r.flavors)
    }

    pub async fn providers(&self) -> Result<Vec<wire::catalog::Provider>> {
        let r: wire::catalog::ProviderList = self.get("/v1/providers").await?;
        Ok(r.providers)
    }

    /// The supported Kubernetes releases, oldest first.
    pub async fn kubernetes_versions(&self) -> Result<Vec<wire::catalog::KubernetesVersion>> {
        let r: wire::catalog::KubernetesVersionList = self.get("/v1/kubernetes-versions").await?;
        Ok(r.kubernetes_versions)
    }

    /// `POST /v1/quotes`: a VM's or a cluster's price per placement
    /// (`&QuoteRequest::from(vm_request)`).
    pub async fn quote(&self, req: &QuoteRequest) -> Result<wire::quote::QuoteAnswer> {
        self.call(Method::POST, "/v1/quotes", Some(req)).await
    }

    /// `POST /v1/quotes` with a VM or KaaS payload as written (see
    /// [`Client::vm_create_as_written`]).
    pub async fn quote_as_written(
        &self,
        payload: &serde_json::Value,
    ) -> Result<wire::quote::QuoteAnswer> {
        self.call(Method::POST, "/v1/quotes", Some(payload)).await
    }
}
