//! Plumbing shared by every daemon: base URLs, per-call timeout, retries, error mapping, spans.

use crate::error::{DriverError, ErrorKind, classify, error_message};
use rand::Rng;
use reqwest::Method;
use reqwest::multipart::Form;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tracing::Instrument;

/// The four daemon ports of one target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ports {
    pub compute: u16,
    pub storage: u16,
    pub network: u16,
    pub auth: u16,
}

impl Default for Ports {
    /// The ports of Elemento's client daemons (docs/atomos.md).
    fn default() -> Self {
        Ports {
            compute: 17777,
            storage: 27777,
            network: 37777,
            auth: 47777,
        }
    }
}

/// One set of AtomOS daemons and where it sits.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Target {
    pub name: String,
    /// IP or hostname; the daemons speak plain HTTP.
    pub host: String,
    pub ports: Ports,
    pub provider: String,
    pub region: String,
    pub continent: String,
}

impl Target {
    /// Where its storage daemon listens, `http://host:port`: what another
    /// host's `/update/transfer` sends a volume to.
    pub fn storage_origin(&self) -> String {
        format!("http://{}:{}", self.host, self.ports.storage)
    }
}

#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Per HTTP attempt, connect to last body byte.
    pub timeout: Duration,
    /// Extra attempts for calls that are safe to repeat.
    pub retries: u32,
    /// Requests in flight to this target at once.
    pub concurrency: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            timeout: Duration::from_secs(10),
            retries: 3,
            concurrency: 16,
        }
    }
}

/// Client of one target's daemons. Cheap to clone; clones share the
/// connection pool and the concurrency limit.
#[derive(Clone)]
pub struct AtomosClient {
    inner: Arc<Inner>,
}

struct Inner {
    target: Target,
    opts: ClientOptions,
    http: reqwest::Client,
    /// Base URL per daemon, indexed by `Daemon as usize`.
    bases: [String; 4],
    permits: Semaphore,
}

impl std::fmt::Debug for AtomosClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AtomosClient")
            .field("target", &self.inner.target)
            .field("opts", &self.inner.opts)
            .finish_non_exhaustive()
    }
}

/// Which daemon a call goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Daemon {
    Compute = 0,
    Storage = 1,
    Network = 2,
    Auth = 3,
}

impl Daemon {
    const ALL: [Daemon; 4] = [
        Daemon::Compute,
        Daemon::Storage,
        Daemon::Network,
        Daemon::Auth,
    ];

    /// Prefix of route labels: `vm/register`, `volume/create`, ...
    fn label(self) -> &'static str {
        match self {
            Daemon::Compute => "vm",
            Daemon::Storage => "volume",
            Daemon::Network => "network",
            Daemon::Auth => "authenticate",
        }
    }

    fn base_path(self) -> &'static str {
        match self {
            Daemon::Compute => "/api/v1.0/client/vm",
            Daemon::Storage => "/api/v1.0/client/volume",
            Daemon::Network => "/api/v1.0/client/network",
            // The auth daemon alone is on v1, not v1.0 (docs/atomos.md).
            Daemon::Auth => "/api/v1/authenticate",
        }
    }

    fn port(self, ports: &Ports) -> u16 {
        match self {
            Daemon::Compute => ports.compute,
            Daemon::Storage => ports.storage,
            Daemon::Network => ports.network,
            Daemon::Auth => ports.auth,
        }
    }
}

/// One request to make: where, how, and whether it may be repeated.
pub(crate) struct Call {
    daemon: Daemon,
    method: Method,
    /// Below the daemon's base path, starting with `/`.
    path: String,
    /// Stable label for spans and errors; no ids or payloads in it.
    pub(crate) route: String,
    /// Repeating it cannot create or destroy anything twice.
    safe: bool,
}

impl Call {
    fn new(daemon: Daemon, method: Method, path: &str) -> Self {
        Call {
            daemon,
            method,
            path: path.to_owned(),
            route: format!("{}{}", daemon.label(), path),
            safe: false,
        }
    }

    /// GETs are reads, so retryable.
    pub(crate) fn get(daemon: Daemon, path: &str) -> Self {
        Call::new(daemon, Method::GET, path).safe()
    }

    pub(crate) fn post(daemon: Daemon, path: &str) -> Self {
        Call::new(daemon, Method::POST, path)
    }

    pub(crate) fn delete(daemon: Daemon, path: &str) -> Self {
        Call::new(daemon, Method::DELETE, path)
    }

    /// Marks a POST that only reads (info, canallocate, ...) as retryable.
    pub(crate) fn safe(mut self) -> Self {
        self.safe = true;
        self
    }

    /// Replaces the derived label, for paths that carry data.
    pub(crate) fn with_route(mut self, route: &str) -> Self {
        self.route = route.to_owned();
        self
    }
}

/// A 2xx answer.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    pub(crate) fn json<T: DeserializeOwned>(&self, route: &str) -> Result<T, DriverError> {
        serde_json::from_slice(&self.body)
            .map_err(|e| DriverError::undecodable(route, self.status, e))
    }
}

impl AtomosClient {
    pub fn new(target: Target, opts: ClientOptions) -> Result<Self, DriverError> {
        let invalid = |msg: String| DriverError::new(ErrorKind::Invalid, "client/new", None, msg);
        if target.host.trim().is_empty() {
            return Err(invalid("target host is empty".into()));
        }
        if opts.timeout.is_zero() {
            return Err(invalid("timeout must be positive".into()));
        }
        if opts.concurrency == 0 {
            // A zero-permit semaphore would block every call forever.
            return Err(invalid("concurrency must be at least 1".into()));
        }
        // Bare IPv6 literals need brackets inside a URL.
        let host = if target.host.contains(':') && !target.host.starts_with('[') {
            format!("[{}]", target.host)
        } else {
            target.host.clone()
        };
        let mut bases: [String; 4] = Default::default();
        for daemon in Daemon::ALL {
            let base = format!(
                "http://{host}:{}{}",
                daemon.port(&target.ports),
                daemon.base_path()
            );
            reqwest::Url::parse(&base)
                .map_err(|e| invalid(format!("bad target address {base}: {e}")))?;
            bases[daemon as usize] = base;
        }
        let http = reqwest::Client::builder()
            // The daemons sit on the local machine or LAN; an environment proxy
            // would only add a hop that cannot reach them.
            .no_proxy()
            .connect_timeout(opts.timeout)
            .pool_max_idle_per_host(opts.concurrency)
            .user_agent(concat!("meson-atomos-driver/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| invalid(format!("building HTTP client: {e}")))?;
        Ok(AtomosClient {
            inner: Arc::new(Inner {
                permits: Semaphore::new(opts.concurrency),
                target,
                opts,
                http,
                bases,
            }),
        })
    }

    pub fn target(&self) -> &Target {
        &self.inner.target
    }

    pub fn options(&self) -> &ClientOptions {
        &self.inner.opts
    }

    /// GET returning JSON.
    pub(crate) async fn get_json<T: DeserializeOwned>(
        &self,
        daemon: Daemon,
        path: &str,
    ) -> Result<T, DriverError> {
        let call = Call::get(daemon, path);
        self.send(&call, None).await?.json(&call.route)
    }

    /// GET returning JSON, for a call whose path carries data (a query)
    /// and so has its own label.
    pub(crate) async fn get_call_json<T: DeserializeOwned>(
        &self,
        call: &Call,
    ) -> Result<T, DriverError> {
        self.send(call, None).await?.json(&call.route)
    }

    /// Sends `body` as JSON; the answer is checked for 2xx and returned raw.
    pub(crate) async fn send_json<B: Serialize + ?Sized>(
        &self,
        call: &Call,
        body: &B,
    ) -> Result<Reply, DriverError> {
        let bytes = serde_json::to_vec(body).map_err(|e| {
            DriverError::new(
                ErrorKind::Invalid,
                &call.route,
                None,
                format!("encoding body: {e}"),
            )
        })?;
        self.send(call, Some(bytes)).await
    }

    /// Sends a multipart form once: uploads are never repeated automatically.
    pub(crate) async fn send_multipart(
        &self,
        call: &Call,
        form: Form,
    ) -> Result<Reply, DriverError> {
        let span = self.span(call);
        self.attempt(call, |req| req.multipart(form))
            .instrument(span)
            .await
    }

    /// Sends a request, repeating safe calls on transient failures.
    async fn send(&self, call: &Call, body: Option<Vec<u8>>) -> Result<Reply, DriverError> {
        let span = self.span(call);
        let attempts = if call.safe {
            self.inner.opts.retries.saturating_add(1)
        } else {
            1
        };
        async {
            let mut attempt = 0;
            loop {
                let body = body.clone();
                let result = self
                    .attempt(call, |req| match body {
                        Some(b) => req
                            .header(reqwest::header::CONTENT_TYPE, "application/json")
                            .body(b),
                        None => req,
                    })
                    .await;
                match result {
                    Err(e) if e.is_transient() && attempt + 1 < attempts => {
                        let delay = backoff(attempt);
                        tracing::warn!(
                            attempt,
                            delay_ms = delay.as_millis() as u64,
                            error = %e,
                            "transient failure, retrying"
                        );
                        tokio::time::sleep(delay).await;
                        attempt += 1;
                    }
                    other => return other,
                }
            }
        }
        .instrument(span)
        .await
    }

    fn span(&self, call: &Call) -> tracing::Span {
        tracing::info_span!("atomos", route = %call.route, target = %self.inner.target.name)
    }

    /// One HTTP exchange, counted and timed by route and outcome
    /// (`meson_atomos_requests_total`, `meson_atomos_request_duration_seconds`).
    async fn attempt(
        &self,
        call: &Call,
        with_body: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Result<Reply, DriverError> {
        let started = Instant::now();
        let result = self.exchange(call, with_body).await;
        let outcome = match &result {
            Ok(_) => "ok",
            Err(e) => e.kind.as_str(),
        };
        metrics::counter!("meson_atomos_requests_total",
            "route" => call.route.clone(), "outcome" => outcome)
        .increment(1);
        metrics::histogram!("meson_atomos_request_duration_seconds", "route" => call.route.clone())
            .record(started.elapsed().as_secs_f64());
        result
    }

    /// One HTTP exchange under the target's concurrency limit.
    async fn exchange(
        &self,
        call: &Call,
        with_body: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Result<Reply, DriverError> {
        // The semaphore lives as long as `inner` and is never closed.
        let _permit = self.inner.permits.acquire().await.map_err(|_| {
            DriverError::new(
                ErrorKind::Transient,
                &call.route,
                None,
                "client is shutting down",
            )
        })?;
        let url = format!("{}{}", self.inner.bases[call.daemon as usize], call.path);
        let mut request = self
            .inner
            .http
            .request(call.method.clone(), url)
            .header(reqwest::header::ACCEPT, "application/json")
            .timeout(self.inner.opts.timeout);
        // The daemons join the caller's trace, if it is exported.
        for (name, value) in trace_headers() {
            request = request.header(name, value);
        }
        let started = Instant::now();
        let response = with_body(request)
            .send()
            .await
            .map_err(|e| self.transport_error(call, &e))?;
        let status = response.status().as_u16();
        let body = response
            .bytes()
            .await
            .map_err(|e| self.transport_error(call, &e))?;
        tracing::debug!(
            status,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "answered"
        );
        if (200..300).contains(&status) {
            return Ok(Reply {
                status,
                body: body.to_vec(),
            });
        }
        let message = error_message(status, &body);
        Err(DriverError::new(
            classify(status, &message),
            &call.route,
            Some(status),
            message,
        ))
    }

    fn transport_error(&self, call: &Call, err: &reqwest::Error) -> DriverError {
        if err.is_builder() {
            return DriverError::new(ErrorKind::Invalid, &call.route, None, error_chain(err));
        }
        let message = if err.is_timeout() {
            format!("{} {:?}", crate::error::NO_ANSWER, self.inner.opts.timeout)
        } else {
            error_chain(err)
        };
        DriverError::new(ErrorKind::Transient, &call.route, None, message)
    }
}

/// reqwest's Display omits the cause ("error sending request"); the cause is
/// what tells a refused connection from a reset one.
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// Exponential backoff (100 ms · 2^n, capped at 2 s) with jitter in the upper
/// half, so clients that failed together do not retry together.
fn backoff(attempt: u32) -> Duration {
    const BASE_MS: u64 = 100;
    const CAP_MS: u64 = 2_000;
    let full = BASE_MS.saturating_mul(1u64 << attempt.min(16)).min(CAP_MS);
    Duration::from_millis(rand::thread_rng().gen_range(full / 2..=full))
}

/// The current span's W3C trace context as headers (none unless traces are
/// exported).
fn trace_headers() -> Vec<(String, String)> {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    struct Headers(Vec<(String, String)>);
    impl opentelemetry::propagation::Injector for Headers {
        fn set(&mut self, key: &str, value: String) {
            self.0.push((key.to_owned(), value));
        }
    }
    let cx = tracing::Span::current().context();
    let mut h = Headers(Vec::new());
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut h));
    h.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(host: &str) -> Target {
        Target {
            name: "t".into(),
            host: host.into(),
            ports: Ports::default(),
            provider: "atomos".into(),
            region: "r".into(),
            continent: "europe".into(),
        }
    }

    #[test]
    fn base_urls_follow_reference_ports_and_paths() {
        let c = AtomosClient::new(target("10.0.0.1"), ClientOptions::default()).unwrap();
        assert_eq!(c.inner.bases[0], "http://10.0.0.1:17777/api/v1.0/client/vm");
        assert_eq!(
            c.inner.bases[1],
            "http://10.0.0.1:27777/api/v1.0/client/volume"
        );
        assert_eq!(
            c.inner.bases[2],
            "http://10.0.0.1:37777/api/v1.0/client/network"
        );
        assert_eq!(
            c.inner.bases[3],
            "http://10.0.0.1:47777/api/v1/authenticate"
        );
        let v6 = AtomosClient::new(target("::1"), ClientOptions::default()).unwrap();
        assert_eq!(v6.inner.bases[0], "http://[::1]:17777/api/v1.0/client/vm");
    }

    #[test]
    fn bad_options_are_rejected() {
        let e = AtomosClient::new(target(""), ClientOptions::default()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Invalid);
        let opts = ClientOptions {
            concurrency: 0,
            ..ClientOptions::default()
        };
        assert!(AtomosClient::new(target("h"), opts).is_err());
        assert!(AtomosClient::new(target("bad host/x"), ClientOptions::default()).is_err());
    }

    #[test]
    fn backoff_grows_jittered_and_capped() {
        for attempt in 0..20 {
            let d = backoff(attempt).as_millis() as u64;
            let full = (100u64 << attempt.min(16)).min(2_000);
            assert!(d >= full / 2 && d <= full, "attempt {attempt}: {d}ms");
        }
    }

    #[test]
    fn routes_are_labelled_by_daemon() {
        assert_eq!(
            Call::post(Daemon::Compute, "/register").route,
            "vm/register"
        );
        assert_eq!(
            Call::get(Daemon::Auth, "/status").route,
            "authenticate/status"
        );
        assert!(Call::get(Daemon::Storage, "/accessible").safe);
        assert!(!Call::post(Daemon::Storage, "/create").safe);
    }
}
