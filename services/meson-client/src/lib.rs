//! The Rust SDK of meson's REST API.
//!
//! - Typed calls: requests and answers are meson's own wire types
//!   (`meson-types`, re-exported as [`types`]), built with their
//!   constructors (`VmCreateRequest::new("web", 2, 4096).os("Ubuntu")`) or
//!   as plain structs with `..Default::default()`.
//! - Retries on the retryable errors only: `conflict` on a create (its
//!   idempotent first attempt still running elsewhere), `rate_limit_exceeded`
//!   and `unavailable` (meson cannot reach its database: nothing was done;
//!   both after `Retry-After`),
//!   `timeout`, 502/504 and connection failures; never `locked`,
//!   `invalid_input` and the like. Jittered exponential backoff, capped.
//! - Every create carries an `Idempotency-Key`, the same on each retry, so
//!   a retried create is done once.
//! - [`Client::wait_for`] / [`Client::wait_for_with`] wait on actions as
//!   hcloud-go's `WaitForFunc` does: batches of at most 25 ids, polls every
//!   500 ms backing off to a cap, the Server-Sent Events stream when meson
//!   offers it, cancellation that names the actions still running, and an
//!   error that names the action that failed.

pub mod config;
mod wait;

pub use wait::{OnUpdate, WaitOpts};

pub use meson_types as types;

use meson_types as wire;
use meson_types::cluster::ClusterUpdateRequest;
use meson_types::kaas::KaasCreateRequest;
use meson_types::kaas::NodePoolRequest;
use meson_types::network::NetworkCreateRequest;
use meson_types::pool::NodePoolUpdateRequest;
use meson_types::quote::QuoteRequest;
use meson_types::requests::{VmCreateRequest, VmUpdateRequest};
use meson_types::upgrade::ClusterUpgradeRequest;
use meson_types::vm::PowerCommand;
use meson_types::volume::{VolumeCreateRequest, VolumeUpdateRequest};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::time::Duration;
use uuid::Uuid;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// meson answered with its error envelope.
    #[error("{message} ({code})")]
    Api {
        status: u16,
        /// `invalid_input`, `not_found`, `locked`, ...
        code: String,
        message: String,
        /// `fields`, `limits`, `action_id`, ... as the code has them.
        details: Box<wire::ErrorDetails>,
        correlation_id: Option<String>,
    },
    /// An awaited action ended in `error`.
    #[error("{} ({}, {})", .action.error.as_ref().map_or("unknown error", |e| e.message.as_str()),
        .action.error.as_ref().map_or("unknown", |e| e.code.as_str()), .action.id)]
    ActionFailed { action: Box<wire::Action> },
    /// Awaited actions that do not exist (any more).
    #[error("actions not found: {0:?}")]
    ActionsNotFound(Vec<Uuid>),
    /// The wait was cancelled while these actions still ran.
    #[error("cancelled while actions were running: {running:?}")]
    Cancelled { running: Vec<Uuid> },
    /// meson could not be reached, or the connection broke.
    #[error("cannot reach meson: {0}")]
    Transport(#[source] reqwest::Error),
    /// An answer that is not what meson sends.
    #[error("unexpected answer: {0}")]
    Decode(String),
    /// A base URL or token that cannot be used.
    #[error("bad client configuration: {0}")]
    Config(String),
}

impl Error {
    /// The API error code, if meson answered one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Api { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// How requests are retried.
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    pub base: Duration,
    pub cap: Duration,
}

impl Default for RetryPolicy {
    /// hcloud-go's: 5 retries from 1 s, doubling, capped at a minute.
    fn default() -> Self {
        RetryPolicy {
            max_retries: 5,
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// "Full" jitter: a delay drawn between the base and the doubled one.
    fn delay(&self, retry: u32) -> Duration {
        let top = self
            .base
            .saturating_mul(2u32.saturating_pow(retry))
            .min(self.cap);
        let low = self.base.min(top);
        let spread = top.saturating_sub(low).as_millis() as u64;
        low + Duration::from_millis(rand::random::<u64>() % (spread + 1))
    }
}

/// A client of one meson, with one token.
#[derive(Clone, Debug)]
pub struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
    retry: RetryPolicy,
}

/// The page size of the `*_list_all` calls (meson's largest).
const LIST_ALL_PAGE: u32 = 50;

/// Which page of a list (meson's default: the first 25 entries).
pub use meson_types::Page;

impl Client {
    /// A client of the meson at `base_url` (`http://127.0.0.1:8080`).
    pub fn new(base_url: &str, token: &str) -> Result<Client> {
        let base = base_url.trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Error::Config(format!(
                "the URL must start with http:// or https://, got {base_url:?}"
            )));
        }
        if token.trim().is_empty() {
            return Err(Error::Config("no token".into()));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("meson-client/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(Error::Transport)?;
        Ok(Client {
            base,
            token: token.trim().to_owned(),
            http,
            retry: RetryPolicy::default(),
        })
    }

    /// This client with another retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Client {
        self.retry = retry;
        self
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The same meson with another token, sharing this client's connection
    /// pool (a gateway serving many sessions makes one per request).
    pub fn with_token(&self, token: &str) -> Result<Client> {
        if token.trim().is_empty() {
            return Err(Error::Config("no token".into()));
        }
        Ok(Client {
            token: token.trim().to_owned(),
            ..self.clone()
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends a request, retrying what may be retried; the raw answer.
    async fn send<B: Serialize + ?Sized>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
        idempotent_create: bool,
    ) -> Result<reqwest::Response> {
        let key = idempotent_create.then(|| Uuid::new_v4().to_string());
        let mut retry = 0;
        loop {
            let mut req = self
                .http
                .request(method.clone(), self.url(path))
                .bearer_auth(&self.token)
                .timeout(Duration::from_secs(60));
            if let Some(k) = &key {
                req = req.header("idempotency-key", k);
            }
            if let Some(b) = body {
                req = req.json(b);
            }
            let (err, wait) = match req.send().await {
                Ok(res) if res.status().is_success() => return Ok(res),
                Ok(res) => {
                    let retry_after = res
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<u64>().ok())
                        .map(Duration::from_secs);
                    let err = api_error(res).await;
                    let retryable = match &err {
                        Error::Api { code, status, .. } => {
                            // `conflict` on a create is its key still in use
                            // by the first attempt; elsewhere (a delete of a
                            // volume still attached) it is final.
                            (code == "conflict" && key.is_some())
                                || matches!(
                                    code.as_str(),
                                    "rate_limit_exceeded" | "unavailable" | "timeout"
                                )
                                || *status == 502
                                || *status == 504
                        }
                        _ => false,
                    };
                    if !retryable {
                        return Err(err);
                    }
                    (err, retry_after)
                }
                Err(e) if e.is_timeout() || e.is_connect() => (Error::Transport(e), None),
                Err(e) => return Err(Error::Transport(e)),
            };
            if retry >= self.retry.max_retries {
                return Err(err);
            }
            let delay = wait.unwrap_or_else(|| self.retry.delay(retry));
            tracing::debug!(%path, retry, ?delay, error = %err, "retrying");
            tokio::time::sleep(delay).await;
            retry += 1;
        }
    }

    async fn call<T: DeserializeOwned, B: Serialize + ?Sized>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T> {
        let create = method == Method::POST;
        let res = self.send(method, path, body, create).await?;
        decode(res).await
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.call(Method::GET, path, None::<&()>).await
    }

    // --- VMs

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
    pub async fn vm_update(&self, id: Uuid, req: &VmUpdateRequest) -> Result<wire::Vm> {
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

    /// Every entry of the list at `path` (with the filters `filter`),
    /// following each page's `next_cursor`: rows created or deleted
    /// meanwhile neither repeat nor push others out.
    async fn list_all<L: DeserializeOwned, T>(
        &self,
        path: &str,
        filter: &[(&str, String)],
        items: impl Fn(L) -> (Vec<T>, wire::Meta),
    ) -> Result<Vec<T>> {
        let mut all = Vec::new();
        let mut page = Page {
            per_page: LIST_ALL_PAGE,
            ..Page::default()
        };
        loop {
            let (batch, meta) = items(self.get(&list_path(path, &page, filter)).await?);
            all.extend(batch);
            match meta.pagination.next_cursor {
                Some(cursor) => page = Page::after(cursor, LIST_ALL_PAGE),
                None => return Ok(all),
            }
        }
    }

    // --- Volumes

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
        req: &VolumeUpdateRequest,
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

    // --- Clusters

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

    // --- Networks

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
        req: &VmUpdateRequest,
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

    // --- Quotas

    // --- Operators' routes (the admin role)

    /// A tenant's quotas and usage.
    pub async fn tenant_quota(&self, tenant: &str) -> Result<wire::admin::Quota> {
        let r: wire::admin::QuotaResponse = self.get(&tenant_quota_path(tenant)).await?;
        Ok(r.quota)
    }

    /// Sets (or, with `Some(None)`, returns to the default) a tenant's quotas.
    pub async fn tenant_quota_update(
        &self,
        tenant: &str,
        req: &wire::admin::QuotaUpdateRequest,
    ) -> Result<wire::admin::Quota> {
        let r: wire::admin::QuotaResponse = self
            .call(Method::PATCH, &tenant_quota_path(tenant), Some(req))
            .await?;
        Ok(r.quota)
    }

    /// The AtomOS targets meson places on.
    pub async fn target_list(&self) -> Result<Vec<wire::admin::Target>> {
        let r: wire::admin::TargetList = self.get("/v1/targets").await?;
        Ok(r.targets)
    }

    pub async fn target_get(&self, id: Uuid) -> Result<wire::admin::Target> {
        let r: wire::admin::TargetResponse = self.get(&format!("/v1/targets/{id}")).await?;
        Ok(r.target)
    }

    /// Registers an AtomOS target.
    pub async fn target_create(
        &self,
        req: &wire::admin::TargetCreateRequest,
    ) -> Result<wire::admin::TargetResponse> {
        self.call(Method::POST, "/v1/targets", Some(req)).await
    }

    /// Moves a target (host, ports) or turns it on or off.
    pub async fn target_update(
        &self,
        id: Uuid,
        req: &wire::admin::TargetUpdateRequest,
    ) -> Result<wire::admin::TargetResponse> {
        self.call(Method::PATCH, &format!("/v1/targets/{id}"), Some(req))
            .await
    }

    /// A page of the audit log (a tenant's own for an owner, anyone's for an
    /// operator), newest first.
    pub async fn audit_list(
        &self,
        page: Page,
        filter: &wire::admin::AuditListQuery,
    ) -> Result<wire::admin::AuditList> {
        let mut q: Vec<(&str, String)> = Vec::new();
        for (key, v) in [
            ("tenant", &filter.tenant),
            ("subject", &filter.subject),
            ("operation", &filter.operation),
            ("resource_id", &filter.resource_id),
        ] {
            if let Some(v) = v {
                q.push((key, v.clone()));
            }
        }
        for (key, v) in [("since", &filter.since), ("until", &filter.until)] {
            if let Some(v) = v {
                q.push((key, v.to_rfc3339()));
            }
        }
        self.get(&list_path("/v1/audit", &page, &q)).await
    }

    // --- Operations

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

    // --- Actions

    pub async fn action_get(&self, id: Uuid) -> Result<wire::Action> {
        let r: wire::ActionResponse = self.get(&format!("/v1/actions/{id}")).await?;
        Ok(r.action)
    }

    /// Actions by id (at most 25); unknown ids are left out.
    pub async fn actions_get(&self, ids: &[Uuid]) -> Result<Vec<wire::Action>> {
        let query: Vec<String> = ids.iter().map(|id| format!("id={id}")).collect();
        let r: wire::ActionList = self
            .get(&format!("/v1/actions?{}&sort=id", query.join("&")))
            .await?;
        Ok(r.actions)
    }

    /// The caller's actions whose ids start or end with `abbrev` (8 or more
    /// hex digits), in id order: one when the abbreviation is unique.
    pub async fn actions_get_abbreviated(&self, abbrev: &str) -> Result<Vec<wire::Action>> {
        let q = serde_urlencoded::to_string([("id", abbrev), ("sort", "id")]).unwrap_or_default();
        let r: wire::ActionList = self.get(&format!("/v1/actions?{q}")).await?;
        Ok(r.actions)
    }

    /// A resource's actions, newest first: `kind` is the collection
    /// (`vms`, `volumes`, `networks`, `clusters`).
    pub async fn resource_actions(&self, kind: &str, id: Uuid) -> Result<Vec<wire::Action>> {
        let r: wire::action::ActionPage = self
            .get(&format!("/v1/{kind}/{id}/actions?per_page=50"))
            .await?;
        Ok(r.actions)
    }

    // --- Catalogue

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

    /// `GET /v1/actions/stream` for `ids`, as a response to read events from.
    async fn stream(&self, ids: &[Uuid]) -> Result<reqwest::Response> {
        let query: Vec<String> = ids.iter().map(|id| format!("id={id}")).collect();
        let res = self
            .http
            .get(self.url(&format!("/v1/actions/stream?{}", query.join("&"))))
            .bearer_auth(&self.token)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(Error::Transport)?;
        if res.status().is_success() {
            Ok(res)
        } else {
            Err(api_error(res).await)
        }
    }
}

/// Which VMs or clusters a list keeps, and in which order (the lists'
/// `name=`, `status=`, `label_selector=` and `sort=`).
#[derive(Clone, Debug, Default)]
pub struct ListFilter {
    pub name: Option<String>,
    /// Any of these statuses.
    pub status: Vec<String>,
    /// Kubernetes' label selector grammar: `env=prod,tier!=db`.
    pub label_selector: Option<String>,
    /// `field[:asc|:desc]`, first key first.
    pub sort: Vec<String>,
}

impl ListFilter {
    fn query(&self) -> Vec<(&'static str, String)> {
        let mut q = Vec::new();
        for (key, v) in [
            ("name", &self.name),
            ("label_selector", &self.label_selector),
        ] {
            if let Some(v) = v {
                q.push((key, v.clone()));
            }
        }
        q.extend(self.status.iter().map(|s| ("status", s.clone())));
        q.extend(self.sort.iter().map(|s| ("sort", s.clone())));
        q
    }
}

/// Which volumes [`Client::volume_list`] returns.
#[derive(Clone, Debug, Default)]
pub struct VolumeFilter {
    /// Owned by or attached to this VM.
    pub vm: Option<Uuid>,
    /// Only standalone volumes (`true`) or only VMs' own (`false`).
    pub standalone: Option<bool>,
}

impl VolumeFilter {
    fn query(&self) -> Vec<(&'static str, String)> {
        let mut q = Vec::new();
        if let Some(vm) = self.vm {
            q.push(("vm", vm.to_string()));
        }
        if let Some(standalone) = self.standalone {
            q.push(("standalone", standalone.to_string()));
        }
        q
    }
}

/// `/v1/tenants/{tenant}/quotas`, the tenant's id escaped.
fn tenant_quota_path(tenant: &str) -> String {
    let escaped: String = serde_urlencoded::to_string([("", tenant)])
        .unwrap_or_default()
        .trim_start_matches('=')
        .replace('+', "%20");
    format!("/v1/tenants/{escaped}/quotas")
}

/// `path` with the query of `page` and `filter`.
fn list_path(path: &str, page: &Page, filter: &[(&str, String)]) -> String {
    let mut q: Vec<(&str, String)> = filter.to_vec();
    q.extend(page.query());
    format!(
        "{path}?{}",
        serde_urlencoded::to_string(&q).unwrap_or_default()
    )
}

/// The error envelope of a failed answer.
async fn api_error(res: reqwest::Response) -> Error {
    let status = res.status();
    let correlation_id = res
        .headers()
        .get("x-correlation-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    /// The envelope, each member optional: a proxy's answer has none.
    #[derive(Default, serde::Deserialize)]
    struct Envelope {
        #[serde(default)]
        error: Body,
    }
    #[derive(Default, serde::Deserialize)]
    struct Body {
        code: Option<String>,
        message: Option<String>,
        #[serde(default)]
        details: serde_json::Value,
    }
    let bytes = res.bytes().await.unwrap_or_default();
    let e = serde_json::from_slice::<Envelope>(&bytes)
        .unwrap_or_default()
        .error;
    Error::Api {
        status: status.as_u16(),
        code: e.code.unwrap_or_else(|| {
            match status {
                StatusCode::BAD_GATEWAY => "bad_gateway",
                StatusCode::GATEWAY_TIMEOUT => "timeout",
                _ => "service_error",
            }
            .to_owned()
        }),
        message: e.message.unwrap_or_else(|| status.to_string()),
        details: Box::new(serde_json::from_value(e.details).unwrap_or_default()),
        correlation_id,
    }
}

async fn decode<T: DeserializeOwned>(res: reqwest::Response) -> Result<T> {
    let bytes = res.bytes().await.map_err(Error::Transport)?;
    serde_json::from_slice(&bytes).map_err(|e| Error::Decode(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_jittered_and_capped() {
        let p = RetryPolicy {
            max_retries: 5,
            base: Duration::from_millis(100),
            cap: Duration::from_millis(500),
        };
        for retry in 0..8 {
            let d = p.delay(retry);
            assert!(
                d >= Duration::from_millis(100) && d <= Duration::from_millis(500),
                "{d:?}"
            );
        }
        assert!(Client::new("ftp://x", "t").is_err());
        assert!(Client::new("http://x", " ").is_err());
    }
}
