//! What every HTTP listener of meson checks before routing, against the
//! browsers of the people who run it. A listener on 127.0.0.1 is reachable
//! from every web page its user opens: a page can send it "simple"
//! requests (no CORS preflight), and a page whose DNS name is rebound to
//! 127.0.0.1 can even read its answers. So, in this order:
//!
//! 1. **Host**: only the names the listener owns ([`Hosts`]); anything else
//!    is `421 Misdirected Request`, which ends DNS rebinding.
//! 2. **CORS preflight**: answered here, for the listener's own origin and
//!    the allowed ones only; any other origin's is refused.
//! 3. **Origin and Fetch Metadata**: a request from a page of another
//!    origin (`Origin`), or from another site with no `Origin`
//!    (`Sec-Fetch-Site: cross-site`: an `<img>`, a link), is refused
//!    (`403`): every request ([`Scope::EveryRequest`], the Elemento gateway,
//!    whose loopback session is ambient), or those that change state
//!    ([`Scope::StateChanges`], meson's API, which needs a bearer token
//!    anyway). Programs send neither header and pass. The verdict is left
//!    in the request's extensions ([`Provenance`]) for the handlers that
//!    hand out credentials on a GET.
//! 4. **Body size**: a declared `Content-Length` over the limit is `413`
//!    at once, before any byte of it is awaited.
//!
//! Each server renders a [`Refusal`] in its own error shape.

pub mod host;
pub mod origin;

pub use host::{Authority, Hosts};
pub use origin::{Origin, Provenance};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// Which requests must come from a first party ([`Provenance::is_first_party`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every request: a listener with an ambient credential.
    EveryRequest,
    /// Requests that may change state (any method but GET, HEAD, OPTIONS).
    StateChanges,
}

/// Why a request was refused before routing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `Host` names a server this listener is not (DNS rebinding).
    UnknownHost { host: String, accepted: String },
    /// `Host` is not a host.
    BadHost { host: String },
    /// A page of another origin sent it.
    ForeignOrigin { origin: String },
    /// A page of another site sent it, without `Origin`.
    CrossSite,
    /// The declared body is larger than the limit.
    BodyTooLarge { declared: u64, limit: u64 },
}

impl Refusal {
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::UnknownHost { .. } => StatusCode::MISDIRECTED_REQUEST,
            Refusal::BadHost { .. } => StatusCode::BAD_REQUEST,
            Refusal::ForeignOrigin { .. } | Refusal::CrossSite => StatusCode::FORBIDDEN,
            Refusal::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::UnknownHost { host, accepted } => write!(
                f,
                "this server does not answer to the name {host:?} (Host header); it answers to \
                 {accepted}, and to the names configured for it"
            ),
            Refusal::BadHost { host } => write!(f, "the Host header {host:?} is not a host"),
            Refusal::ForeignOrigin { origin } => write!(
                f,
                "requests from pages of the origin {origin:?} are refused: only this server's \
                 own pages and the origins configured as allowed may call it from a browser"
            ),
            Refusal::CrossSite => f.write_str(
                "requests from pages of another site (Sec-Fetch-Site: cross-site) are refused",
            ),
            Refusal::BodyTooLarge { declared, limit } => write!(
                f,
                "the body declares {declared} bytes (Content-Length), more than the {limit} \
                 accepted"
            ),
        }
    }
}

/// One listener's policy.
#[derive(Clone, Debug)]
pub struct Edge {
    pub hosts: Hosts,
    /// Origins besides the listener's own whose pages may call it.
    pub origins: Vec<Origin>,
    pub scope: Scope,
    /// Served over TLS (its own origin is `https://`).
    pub tls: bool,
    /// Allowed origins may send cookies (`Access-Control-Allow-Credentials`).
    pub credentials: bool,
    /// Largest body, by its declared length (`None`: not checked here).
    pub max_body: Option<u64>,
    /// Request headers allowed origins may send.
    pub allow_headers: Vec<HeaderName>,
    /// Response headers allowed origins may read.
    pub expose_headers: Vec<HeaderName>,
    /// Renders a refusal in the server's error shape.
    pub render: fn(&Refusal) -> Response,
}

impl Edge {
    /// A policy with `hosts` and `origins`, no CORS headers beyond the
    /// standard ones, and refusals as plain text.
    pub fn new(hosts: Hosts, origins: Vec<Origin>, scope: Scope) -> Edge {
        Edge {
            hosts,
            origins,
            scope,
            tls: false,
            credentials: false,
            max_body: None,
            allow_headers: vec![header::CONTENT_TYPE],
            expose_headers: Vec::new(),
            render: |r| (r.status(), r.to_string()).into_response(),
        }
    }

    /// Parses configured origins, naming a bad one.
    pub fn parse_origins(list: &[String]) -> Result<Vec<Origin>, String> {
        list.iter()
            .map(|o| {
                Origin::parse(o).ok_or_else(|| {
                    format!("{o:?} is not an origin (scheme://host[:port], or null)")
                })
            })
            .collect()
    }

    /// The checks of the module's summary; `Ok` with the request's
    /// provenance, or the answer to give instead (a preflight's, or a
    /// refusal's).
    pub fn admit(&self, method: &Method, uri: &axum::http::Uri, headers: &HeaderMap) -> Admitted {
        let mut given = headers.get_all(header::HOST).iter();
        let host_raw = match (given.next(), given.next(), uri.authority()) {
            (Some(_), Some(_), _) => {
                return Admitted::Refused(Refusal::BadHost {
                    host: "(several Host headers)".to_owned(),
                });
            }
            (Some(v), None, authority) => {
                let v = v.to_str().unwrap_or("(not text)").to_owned();
                // An absolute request-target names the server too: both
                // must name the same one.
                if let Some(a) = authority
                    && !a.as_str().eq_ignore_ascii_case(&v)
                {
                    return Admitted::Refused(Refusal::BadHost {
                        host: format!("{v} (the request names {a})"),
                    });
                }
                Some(v)
            }
            (None, _, authority) => authority.map(|a| a.as_str().to_owned()),
        };
        // No Host at all: not a browser (browsers always send one).
        let host = match host_raw {
            None => None,
            Some(raw) => match Authority::parse(&raw) {
                None => return Admitted::Refused(Refusal::BadHost { host: raw }),
                Some(a) if !self.hosts.allows(&a) => {
                    return Admitted::Refused(Refusal::UnknownHost {
                        host: raw,
                        accepted: self.hosts.describe(),
                    });
                }
                Some(a) => Some(a),
            },
        };
        // Behind a proxy that ends TLS, the pages' scheme is the proxy's. A
        // page cannot set this header without a preflight, which only the
        // allowed origins pass: trusting it lets no foreign page in.
        let scheme = headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(',').next())
            .map(str::trim)
            .filter(|s| matches!(s.to_ascii_lowercase().as_str(), "http" | "https"))
            .unwrap_or(if self.tls { "https" } else { "http" });
        let own = host.as_ref().map(|h| Origin::of_listener(scheme, h));
        let provenance = Provenance::of(headers, own.as_ref(), &self.origins);
        let preflight = method == Method::OPTIONS
            && headers.contains_key(header::ORIGIN)
            && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
        if preflight {
            return match &provenance {
                Provenance::SameOrigin | Provenance::Allowed(_) => {
                    Admitted::Answer(self.preflight(headers))
                }
                _ => Admitted::Refused(refusal(&provenance)),
            };
        }
        let guarded = match self.scope {
            Scope::EveryRequest => true,
            Scope::StateChanges => !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS),
        };
        if guarded && !provenance.is_first_party() {
            return Admitted::Refused(refusal(&provenance));
        }
        if let Some(limit) = self.max_body
            && let Some(declared) = headers
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
            && declared > limit
        {
            return Admitted::Refused(Refusal::BodyTooLarge { declared, limit });
        }
        Admitted::Pass(provenance)
    }

    fn preflight(&self, req: &HeaderMap) -> Response {
        let mut res = StatusCode::NO_CONTENT.into_response();
        let h = res.headers_mut();
        if let Some(o) = req.get(header::ORIGIN) {
            self.allow_origin(o, h);
        }
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, PUT, PATCH, DELETE"),
        );
        if let Some(v) = join(&self.allow_headers) {
            h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, v);
        }
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
        // Chrome's Private Network Access: a public page's request to a
        // loopback address asks this in its preflight.
        if req
            .get("access-control-request-private-network")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"))
        {
            h.insert(
                "access-control-allow-private-network",
                HeaderValue::from_static("true"),
            );
        }
        h.append(
            header::VARY,
            HeaderValue::from_static(
                "origin, access-control-request-method, access-control-request-headers",
            ),
        );
        res
    }

    fn allow_origin(&self, origin: &HeaderValue, res: &mut HeaderMap) {
        res.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        if self.credentials {
            res.insert(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
    }

    /// The CORS headers of an answer to a request that passed.
    fn decorate(&self, provenance: &Provenance, origin: &HeaderValue, res: &mut HeaderMap) {
        res.append(header::VARY, HeaderValue::from_static("origin"));
        if matches!(provenance, Provenance::Allowed(_)) {
            self.allow_origin(origin, res);
            if let Some(v) = join(&self.expose_headers) {
                res.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, v);
            }
        }
    }
}

fn refusal(p: &Provenance) -> Refusal {
    match p {
        Provenance::Foreign(origin) => Refusal::ForeignOrigin {
            origin: origin.clone(),
        },
        _ => Refusal::CrossSite,
    }
}

fn join(names: &[HeaderName]) -> Option<HeaderValue> {
    if names.is_empty() {
        return None;
    }
    let s: Vec<&str> = names.iter().map(HeaderName::as_str).collect();
    HeaderValue::from_str(&s.join(", ")).ok()
}

/// [`Edge::admit`]'s verdict.
#[derive(Debug)]
pub enum Admitted {
    Pass(Provenance),
    Answer(Response),
    Refused(Refusal),
}

/// The middleware: `axum::middleware::from_fn_with_state(Arc<Edge>, edge::guard)`,
/// outermost but for the correlation id.
pub async fn guard(State(edge): State<Arc<Edge>>, mut req: Request, next: Next) -> Response {
    match edge.admit(req.method(), req.uri(), req.headers()) {
        Admitted::Pass(provenance) => {
            let origin = req.headers().get(header::ORIGIN).cloned();
            req.extensions_mut().insert(provenance.clone());
            let mut res = next.run(req).await;
            if let Some(o) = origin {
                edge.decorate(&provenance, &o, res.headers_mut());
            }
            res
        }
        Admitted::Answer(res) => res,
        Admitted::Refused(r) => {
            tracing::info!(
                reason = %r,
                method = %req.method(),
                path = %req.uri().path(),
                "request refused at the edge"
            );
            (edge.render)(&r)
        }
    }
}

/// `application/json`, or a `+json` type, with any parameters: the only
/// content types a JSON body may come with (a `text/plain` body is what a
/// page of another site can send without a preflight).
pub fn is_json(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::routing::{get, post};
    use tower::ServiceExt;

    fn edge(scope: Scope) -> Arc<Edge> {
        let mut e = Edge::new(
            Hosts::loopback(),
            Edge::parse_origins(&["http://localhost:3000".into()]).unwrap(),
            scope,
        );
        e.max_body = Some(100);
        e.credentials = scope == Scope::EveryRequest;
        Arc::new(e)
    }

    fn app(scope: Scope) -> Router {
        Router::new()
            .route(
                "/x",
                get(|| async { "read" })
                    .post(|| async { "changed" })
                    .options(|| async { "options" }),
            )
            .route("/p", post(|| async { "changed" }))
            .layer(axum::middleware::from_fn_with_state(edge(scope), guard))
    }

    async fn call(app: &Router, method: &str, path: &str, h: &[(&str, &str)]) -> Response {
        let mut b = Request::builder().method(method).uri(path);
        for (k, v) in h {
            b = b.header(*k, *v);
        }
        app.clone()
            .oneshot(b.body(Body::empty()).unwrap())
            .await
            .unwrap()
    }

    const LOCAL: (&str, &str) = ("host", "127.0.0.1:27777");

    #[tokio::test]
    async fn a_rebound_name_is_misdirected_before_anything_runs() {
        let app = app(Scope::StateChanges);
        let r = call(&app, "GET", "/x", &[("host", "evil.example:27777")]).await;
        assert_eq!(r.status(), StatusCode::MISDIRECTED_REQUEST);
        let r = call(&app, "GET", "/x", &[("host", "a b")]).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        for ok in ["localhost:27777", "127.0.0.1", "[::1]:27777"] {
            let r = call(&app, "GET", "/x", &[("host", ok)]).await;
            assert_eq!(r.status(), StatusCode::OK, "{ok}");
        }
        // A program with no Host (HTTP/1.0) is no browser.
        assert_eq!(call(&app, "GET", "/x", &[]).await.status(), StatusCode::OK);
        // Two names, or a request-target naming another server: refused.
        let two = Request::builder()
            .uri("/x")
            .header("host", "127.0.0.1")
            .header("host", "evil.example")
            .body(Body::empty())
            .unwrap();
        let r = app.clone().oneshot(two).await.unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let r = call(&app, "GET", "http://evil.example/x", &[LOCAL]).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let r = call(&app, "GET", "http://evil.example/x", &[]).await;
        assert_eq!(r.status(), StatusCode::MISDIRECTED_REQUEST);
        let r = call(&app, "GET", "http://127.0.0.1:27777/x", &[LOCAL]).await;
        assert_eq!(r.status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn state_changes_need_a_first_party() {
        let app = app(Scope::StateChanges);
        let foreign = ("origin", "http://evil.example");
        let r = call(&app, "POST", "/p", &[LOCAL, foreign]).await;
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        let r = call(
            &app,
            "POST",
            "/p",
            &[LOCAL, ("sec-fetch-site", "cross-site")],
        )
        .await;
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        // A read from anywhere passes, but gets no CORS grant.
        let r = call(&app, "GET", "/x", &[LOCAL, foreign]).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert!(!r.headers().contains_key("access-control-allow-origin"));
        assert_eq!(r.headers()["vary"], "origin");
        // Behind a proxy that ends TLS.
        let r = call(
            &app,
            "POST",
            "/p",
            &[
                ("host", "meson.localhost"),
                ("origin", "https://meson.localhost"),
            ],
        )
        .await;
        assert_eq!(r.status(), StatusCode::MISDIRECTED_REQUEST);
        for ok in [
            vec![LOCAL],
            vec![
                ("host", "localhost"),
                ("origin", "https://localhost"),
                ("x-forwarded-proto", "https"),
            ],
            vec![LOCAL, ("origin", "http://127.0.0.1:27777")],
            vec![LOCAL, ("origin", "http://localhost:3000")],
            vec![LOCAL, ("sec-fetch-site", "same-origin")],
        ] {
            let r = call(&app, "POST", "/p", &ok).await;
            assert_eq!(r.status(), StatusCode::OK, "{ok:?}");
        }
        let r = call(
            &app,
            "POST",
            "/p",
            &[LOCAL, ("origin", "http://localhost:3000")],
        )
        .await;
        assert_eq!(
            r.headers()["access-control-allow-origin"],
            "http://localhost:3000"
        );
        assert!(!r.headers().contains_key("access-control-allow-credentials"));
    }

    #[tokio::test]
    async fn every_request_needs_a_first_party_where_a_session_is_ambient() {
        let app = app(Scope::EveryRequest);
        let r = call(
            &app,
            "GET",
            "/x",
            &[LOCAL, ("origin", "http://evil.example")],
        )
        .await;
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        let r = call(
            &app,
            "GET",
            "/x",
            &[LOCAL, ("sec-fetch-site", "cross-site")],
        )
        .await;
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        let r = call(
            &app,
            "GET",
            "/x",
            &[LOCAL, ("origin", "http://localhost:3000")],
        )
        .await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()["access-control-allow-credentials"], "true");
    }

    #[tokio::test]
    async fn preflights_only_for_allowed_origins() {
        let app = app(Scope::StateChanges);
        let ask = |origin: &'static str| {
            vec![
                LOCAL,
                ("origin", origin),
                ("access-control-request-method", "POST"),
                ("access-control-request-headers", "content-type"),
                ("access-control-request-private-network", "true"),
            ]
        };
        let r = call(&app, "OPTIONS", "/p", &ask("http://localhost:3000")).await;
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        let h = r.headers();
        assert_eq!(h["access-control-allow-origin"], "http://localhost:3000");
        assert!(
            h["access-control-allow-methods"]
                .to_str()
                .unwrap()
                .contains("POST")
        );
        assert_eq!(h["access-control-allow-headers"], "content-type");
        assert_eq!(h["access-control-allow-private-network"], "true");
        let r = call(&app, "OPTIONS", "/p", &ask("http://evil.example")).await;
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        assert!(!r.headers().contains_key("access-control-allow-origin"));
        // Not a preflight: routed as any OPTIONS.
        let r = call(&app, "OPTIONS", "/x", &[LOCAL]).await;
        assert_eq!(r.status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn a_declared_oversized_body_is_refused_at_once() {
        let app = app(Scope::StateChanges);
        // The body is never sent: the answer must not wait for it.
        let r = call(&app, "POST", "/p", &[LOCAL, ("content-length", "101")]).await;
        assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let r = call(&app, "POST", "/p", &[LOCAL, ("content-length", "100")]).await;
        assert_eq!(r.status(), StatusCode::OK);
    }

    #[test]
    fn json_content_types() {
        for ok in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/merge-patch+json",
        ] {
            assert!(is_json(ok), "{ok}");
        }
        for no in [
            "text/plain",
            "text/plain;charset=UTF-8",
            "application/x-www-form-urlencoded",
            "multipart/form-data",
            "text/json",
            "",
        ] {
            assert!(!is_json(no), "{no}");
        }
    }
}
