//! Kubernetes clusters, their pools, nodes, upgrades and credentials.

use super::*;

impl Client {
    /// `POST /v1/clusters` with the KaaS request.
    pub async fn cluster_create(
        &self,
        req: &KaasCreateRequest,
    ) -> Result<wire::cluster::ClusterCreateResponse> {
        self.call(Method::POST, "/v1/clusters", Some(req)).await
    }

    /// `POST /v1/clusters` with a KaaS payload as written (see
    /// [`Client::vm_create_as_written`]).
    pub async fn cluster_create_as_written(
        &self,
        payload: &serde_json::Value,
    ) -> Result<wire::cluster::ClusterCreateResponse> {
        self.call(Method::POST, "/v1/clusters", Some(payload)).await
    }

    /// A page of the tenant's clusters (see [`Client::vm_list`]).
    pub async fn cluster_list(&self, page: Page) -> Result<wire::cluster::ClusterList> {
        self.get(&list_path("/v1/clusters", &page, &[])).await
    }

    /// Every cluster of the caller's tenant, page after page.
    pub async fn cluster_list_all(&self) -> Result<Vec<wire::cluster::Cluster>> {
        self.cluster_list_matching(&ListFilter::default()).await
    }

    /// Every cluster of the caller's tenant that `filter` keeps, in its
    /// order, page after page.
    pub async fn cluster_list_matching(
        &self,
        filter: &ListFilter,
    ) -> Result<Vec<wire::cluster::Cluster>> {
        self.list_all(
            "/v1/clusters",
            &filter.query(),
            |l: wire::cluster::ClusterList| (l.clusters, l.meta),
        )
        .await
    }

    pub async fn cluster_get(&self, id: Uuid) -> Result<wire::cluster::Cluster> {
        let r: wire::cluster::ClusterResponse = self.get(&format!("/v1/clusters/{id}")).await?;
        Ok(r.cluster)
    }

    pub async fn cluster_delete(&self, id: Uuid) -> Result<wire::Action> {
        let r: wire::ActionResponse = self
            .call(Method::DELETE, &format!("/v1/clusters/{id}"), None::<&()>)
            .await?;
        Ok(r.action)
    }

    /// `PATCH /v1/clusters/{id}`: relabels and/or changes the update policy.
    pub async fn cluster_update(
        &self,
        id: Uuid,
        req: &ClusterUpdateRequest,
    ) -> Result<wire::cluster::Cluster> {
        let r: wire::cluster::ClusterResponse = self
            .call(Method::PATCH, &format!("/v1/clusters/{id}"), Some(req))
            .await?;
        Ok(r.cluster)
    }

    /// `POST /v1/clusters/{cluster}/pools`: another worker pool.
    pub async fn pool_create(
        &self,
        cluster: Uuid,
        req: &NodePoolRequest,
    ) -> Result<wire::pool::PoolCreateResponse> {
        self.call(
            Method::POST,
            &format!("/v1/clusters/{cluster}/pools"),
            Some(req),
        )
        .await
    }

    /// A cluster's node pools, oldest first.
    pub async fn pool_list(&self, cluster: Uuid) -> Result<Vec<wire::cluster::Pool>> {
        let r: wire::pool::PoolList = self.get(&format!("/v1/clusters/{cluster}/pools")).await?;
        Ok(r.pools)
    }

    /// A cluster's nodes: control plane and every pool's.
    pub async fn cluster_nodes(&self, cluster: Uuid) -> Result<Vec<wire::cluster::Node>> {
        let r: wire::cluster::NodeList = self.get(&format!("/v1/clusters/{cluster}/nodes")).await?;
        Ok(r.nodes)
    }

    /// Reboots one node (its VM).
    pub async fn node_reboot(&self, cluster: Uuid, node: Uuid) -> Result<wire::Action> {
        self.cluster_action(&format!(
            "/v1/clusters/{cluster}/nodes/{node}/actions/reboot"
        ))
        .await
    }

    /// Replaces one node with a new one (the old one drained and deleted).
    pub async fn node_replace(&self, cluster: Uuid, node: Uuid) -> Result<wire::Action> {
        self.cluster_action(&format!(
            "/v1/clusters/{cluster}/nodes/{node}/actions/replace"
        ))
        .await
    }

    /// Rotates the cluster's credentials: earlier kubeconfigs stop working.
    pub async fn cluster_rotate_credentials(&self, cluster: Uuid) -> Result<wire::Action> {
        self.cluster_action(&format!(
            "/v1/clusters/{cluster}/actions/rotate-credentials"
        ))
        .await
    }

    /// A client certificate for the cluster's autoscaler (its key shown once).
    pub async fn cluster_autoscaler_credentials(
        &self,
        cluster: Uuid,
    ) -> Result<wire::cluster::AutoscalerCredentials> {
        let r: wire::cluster::AutoscalerCredentialsResponse = self
            .call(
                Method::POST,
                &format!("/v1/clusters/{cluster}/autoscaler-credentials"),
                None::<&()>,
            )
            .await?;
        Ok(r.credentials)
    }

    /// Removes these nodes from a pool (its size shrinks by as many).
    pub async fn pool_delete_nodes(
        &self,
        cluster: Uuid,
        pool: Uuid,
        nodes: &[Uuid],
    ) -> Result<wire::pool::PoolUpdateResponse> {
        let req = wire::pool::PoolDeleteNodesRequest {
            nodes: nodes.to_vec(),
        };
        self.call(
            Method::POST,
            &format!("/v1/clusters/{cluster}/pools/{pool}/actions/delete-nodes"),
            Some(&req),
        )
        .await
    }

    /// A bodiless `POST` that starts an action.
    async fn cluster_action(&self, path: &str) -> Result<wire::Action> {
        let r: wire::ActionResponse = self.call(Method::POST, path, None::<&()>).await?;
        Ok(r.action)
    }

    pub async fn pool_get(&self, cluster: Uuid, pool: Uuid) -> Result<wire::cluster::Pool> {
        let r: wire::pool::PoolResponse = self
            .get(&format!("/v1/clusters/{cluster}/pools/{pool}"))
            .await?;
        Ok(r.pool)
    }

    /// Starts deleting a pool and its nodes.
    pub async fn pool_delete(&self, cluster: Uuid, pool: Uuid) -> Result<wire::Action> {
        let r: wire::ActionResponse = self
            .call(
                Method::DELETE,
                &format!("/v1/clusters/{cluster}/pools/{pool}"),
                None::<&()>,
            )
            .await?;
        Ok(r.action)
    }

    /// `POST /v1/clusters/{id}/actions/upgrade`: the action, and what the
    /// caller should know (a version past its end of life, a minor
    /// resolved to a patch).
    pub async fn cluster_upgrade(
        &self,
        id: Uuid,
        req: &ClusterUpgradeRequest,
    ) -> Result<wire::upgrade::ClusterActionResponse> {
        self.call(
            Method::POST,
            &format!("/v1/clusters/{id}/actions/upgrade"),
            Some(req),
        )
        .await
    }

    /// `PATCH /v1/clusters/{cluster}/pools/{pool}`: the fields given change
    /// (`desired_nodes` scales the pool), the others stay.
    pub async fn pool_update(
        &self,
        cluster: Uuid,
        pool: Uuid,
        req: &NodePoolUpdateRequest,
    ) -> Result<wire::pool::PoolUpdateResponse> {
        self.call(
            Method::PATCH,
            &format!("/v1/clusters/{cluster}/pools/{pool}"),
            Some(req),
        )
        .await
    }

    /// An admin kubeconfig (YAML).
    pub async fn kubeconfig(&self, cluster: Uuid, expiry_seconds: Option<u64>) -> Result<String> {
        let query = expiry_seconds.map_or(String::new(), |s| format!("?expiry_seconds={s}"));
        let res = self
            .send(
                Method::GET,
                &format!("/v1/clusters/{cluster}/kubeconfig{query}"),
                None::<&()>,
                false,
            )
            .await?;
        res.text().await.map_err(Error::Transport)
    }
}
