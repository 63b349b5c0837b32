//! Operations: status and metrics.

use super::*;

impl Client {
    /// `GET /`: the server's name, version and starting points.
    pub async fn index(&self) -> Result<wire::ops::Index> {
        self.get("/").await
    }

    /// `GET /healthz` and `GET /readyz`: up, and ready (its database answers).
    pub async fn health(&self) -> Result<(wire::ops::Health, wire::ops::Health)> {
        let live = self.get("/healthz").await?;
        let ready = self.get("/readyz").await?;
        Ok((live, ready))
    }

    /// `GET /metrics`, Prometheus's text.
    pub async fn metrics(&self) -> Result<String> {
        let res = self
            .send(Method::GET, "/metrics", None::<&()>, false)
            .await?;
        res.text().await.map_err(Error::Transport)
    }

    /// `GET /v1/quotas`: the caller's tenant, its limits and usage.
    pub async fn quotas(&self) -> Result<wire::admin::Quota> {
        let r: wire::admin::QuotaResponse = self.get("/v1/quotas").await?;
        Ok(r.quota)
    }
}
