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

mod actions;
mod admin;
mod backups;
mod catalog;
mod clusters;
pub mod config;
mod consoles;
pub use consoles::{bridge_stream, console_bridge};
pub use usage::UsageQuery;
mod images;
mod members;
mod networks;
mod ops;
mod organizations;
mod port_forwards;
mod ssh_keys;
mod tokens;
mod usage;
mod vms;
mod volumes;
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
use meson_types::requests::{NameLabelsUpdate, VmCreateRequest};
use meson_types::upgrade::ClusterUpgradeRequest;
use meson_types::vm::PowerCommand;
use meson_types::volume::VolumeCreateRequest;
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
    /// The organisation every request acts in ([`ORGANIZATION_HEADER`]),
    /// when not the token's own.
    organization: Option<String>,
    http: reqwest::Client,
    retry: RetryPolicy,
}

/// The header naming the organisation a request acts in, when not the one
/// its token names: one the caller is a member of.
pub const ORGANIZATION_HEADER: &str = "Meson-Organization";

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
            organization: None,
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

    /// The same meson and token, acting in the organisation `org` (sent
    /// as [`ORGANIZATION_HEADER`] on every request): one the caller is a
    /// member of, at the role it holds there (`memberships` lists them).
    /// meson refuses (`forbidden`) an organisation the caller has no
    /// standing in, and any other than its own to an API token. An empty
    /// `org`: the token's own. Shares this client's connection pool.
    pub fn organization(&self, org: &str) -> Client {
        let org = org.trim();
        Client {
            organization: (!org.is_empty()).then(|| org.to_owned()),
            ..self.clone()
        }
    }

    /// The organisation this client acts in, when not its token's own.
    pub fn acting_in(&self) -> Option<&str> {
        self.organization.as_deref()
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request to `url` with this client's token and organisation.
    fn request(&self, method: Method, url: String) -> Result<reqwest::RequestBuilder> {
        let mut req = self.http.request(method, url).bearer_auth(&self.token);
        if let Some(org) = &self.organization {
            let value = reqwest::header::HeaderValue::from_str(org).map_err(|_| {
                Error::Config(format!(
                    "the organisation {org:?} cannot be sent as {ORGANIZATION_HEADER}"
                ))
            })?;
            req = req.header(ORGANIZATION_HEADER, value);
        }
        Ok(req)
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
                .request(method.clone(), self.url(path))?
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
                        Error::Api {
                            code,
                            status,
                            message,
                            ..
                        } => {
                            // A create's key still in use by its first
                            // attempt; every other `conflict` (a VM not
                            // running, a volume still attached) is final.
                            (code == "conflict"
                                && key.is_some()
                                && message == wire::error::IDEMPOTENCY_KEY_IN_USE)
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

    /// A GET's body as text (CSV exports).
    async fn get_text(&self, path: &str) -> Result<String> {
        let res = self.send(Method::GET, path, None::<&()>, false).await?;
        res.text().await.map_err(Error::Transport)
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

/// `raw` as one path segment: letters, digits and `-` as they are,
/// every other byte escaped, so a name or id can never reach another path.
fn path_segment(raw: &str) -> String {
    raw.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
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
