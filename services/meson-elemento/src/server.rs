//! Listeners: each daemon on its port, the single-origin listener, TLS,
//! and the rule that a gateway beyond loopback keeps no process session.

use crate::catalog::Daemon;
use crate::routes::{AppState, Shared, app};
use crate::session::{self, Session, Sessions};
use anyhow::{Context, bail};
use axum::response::IntoResponse;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The single-origin listener's default port (every daemon by path).
pub const DEFAULT_SINGLE_ORIGIN_PORT: u16 = 7780;

/// A certificate chain and its key, PEM.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Clone, Debug)]
pub struct Config {
    /// meson's REST URL.
    pub meson_url: String,
    pub bind: IpAddr,
    /// The daemons served on their own port (0: any free port).
    pub ports: Vec<(Daemon, u16)>,
    /// Every daemon by path on one listener (Electros' web build).
    pub single_origin_port: Option<u16>,
    pub tls: Option<TlsFiles>,
    /// Serve plain HTTP beyond loopback anyway.
    pub insecure_http: bool,
    /// A port in use moves the daemon to a free port (said loudly) instead
    /// of failing: `mesond dev`.
    pub fallback_ports: bool,
    /// Loopback only: the process session to start with (mesonctl's or the
    /// dev token); a `POST /login` replaces it.
    pub login_token: Option<String>,
    /// Names the listeners answer to in `Host`, besides localhost and the
    /// loopback addresses (and, bound beyond loopback, any IP address).
    pub allowed_hosts: Vec<String>,
    /// Browser origins whose pages may call the daemons, besides the
    /// listener's own: by default Electros' ([`ELECTROS_ORIGINS`]).
    pub allowed_origins: Vec<String>,
    /// The ports have flags besides their environment variables
    /// (`mesonctl elemento serve`): messages name both.
    pub port_flags: bool,
}

/// The origins allowed by default: Electros' desktop app, whose packaged
/// build loads its pages from files (Electron's `file://` origin, which no
/// web page can claim). Not by default: Electros' development build (Vite,
/// `http://localhost:5173`: any project a developer serves there would be
/// allowed too), its web build (its public `https://` origin, known only
/// where it is deployed), and `null` (any page can make a sandboxed frame
/// whose origin is `null`). Each is one `--allowed-origin` away.
pub const ELECTROS_ORIGINS: &[&str] = &["file://"];

/// The largest request body the daemons take (their largest is a VM
/// specfile, a few KiB).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

impl Config {
    /// Every daemon on its usual port on 127.0.0.1, and the single-origin
    /// listener.
    pub fn new(meson_url: &str) -> Config {
        Config {
            meson_url: meson_url.to_owned(),
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            ports: Daemon::ALL.iter().map(|d| (*d, d.default_port())).collect(),
            single_origin_port: Some(DEFAULT_SINGLE_ORIGIN_PORT),
            tls: None,
            insecure_http: false,
            fallback_ports: false,
            login_token: None,
            allowed_hosts: Vec::new(),
            allowed_origins: ELECTROS_ORIGINS.iter().map(|o| (*o).to_owned()).collect(),
            port_flags: false,
        }
    }

    /// The allowed origins as configured: none given keeps Electros', the
    /// one word `none` leaves only the listeners' own pages, anything else
    /// replaces Electros' with `list`.
    pub fn set_allowed_origins(&mut self, list: &[String]) {
        match list {
            [] => {}
            [one] if one.trim() == "none" => self.allowed_origins.clear(),
            _ => self.allowed_origins = list.to_vec(),
        }
    }

    /// Every listener on a free port (tests).
    pub fn any_ports(mut self) -> Config {
        for p in &mut self.ports {
            p.1 = 0;
        }
        self.single_origin_port = self.single_origin_port.map(|_| 0);
        self
    }
}

/// The daemons' edge: the names they answer to, Electros' origins, and
/// nothing at all for other pages, whatever the method (the loopback
/// session is ambient: any request that reaches a handler acts as it).
fn edge(cfg: &Config, tls: bool) -> anyhow::Result<meson_edge::Edge> {
    use axum::http::{HeaderName, header};
    let hosts = meson_edge::Hosts::new(cfg.bind, &cfg.allowed_hosts)
        .map_err(|e| anyhow::anyhow!("allowed hosts: {e}"))?;
    let origins = meson_edge::Edge::parse_origins(&cfg.allowed_origins)
        .map_err(|e| anyhow::anyhow!("allowed origins: {e}"))?;
    let mut edge = meson_edge::Edge::new(hosts, origins, meson_edge::Scope::EveryRequest);
    edge.tls = tls;
    // The web build's session is a cookie.
    edge.credentials = true;
    edge.max_body = Some(MAX_BODY_BYTES as u64);
    edge.allow_headers = vec![
        header::CONTENT_TYPE,
        header::AUTHORIZATION,
        HeaderName::from_static("x-requested-with"),
    ];
    edge.render = |r| crate::error::Detail::new(r.status(), r.to_string()).into_response();
    Ok(edge)
}

/// The setting that moves a listener: its environment variable, and its
/// flag where the ports have flags (`mesonctl elemento serve`).
pub fn setting(daemon: Option<Daemon>, flags: bool) -> String {
    let (flag, var) = match daemon {
        Some(d) => (
            format!("--{}-port", d.name()),
            format!("MESON_ELEMENTO_{}_PORT", d.name().to_uppercase()),
        ),
        None => ("--port".to_owned(), "MESON_ELEMENTO_PORT".to_owned()),
    };
    if flags {
        format!("{flag} or {var}")
    } else {
        var
    }
}

/// One listener.
#[derive(Clone, Debug)]
pub struct Listening {
    /// `None`: the single-origin listener.
    pub daemon: Option<Daemon>,
    pub addr: SocketAddr,
    /// The port asked for, when another was taken instead.
    pub moved_from: Option<u16>,
}

impl Listening {
    pub fn name(&self) -> &'static str {
        self.daemon.map_or("all daemons", Daemon::name)
    }
}

/// A running gateway.
pub struct Gateway {
    pub listening: Vec<Listening>,
    pub tls: bool,
    /// See [`Config::port_flags`].
    port_flags: bool,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

async fn bind(
    ip: IpAddr,
    port: u16,
    daemon: Option<Daemon>,
    fallback: bool,
    flags: bool,
) -> anyhow::Result<(TcpListener, Option<u16>)> {
    match TcpListener::bind((ip, port)).await {
        Ok(l) => Ok((l, None)),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && fallback => {
            let l = TcpListener::bind((ip, 0))
                .await
                .with_context(|| format!("binding a free port on {ip}"))?;
            Ok((l, Some(port)))
        }
        Err(e) => Err(anyhow::anyhow!(
            "cannot listen on {ip}:{port} for {}: {e} (set {})",
            daemon.map_or("the single-origin listener", Daemon::name),
            setting(daemon, flags)
        )),
    }
}

fn tls_config(files: &TlsFiles) -> anyhow::Result<Arc<tokio_rustls::rustls::ServerConfig>> {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .with_context(|| format!("reading {}", files.cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("reading {}", files.cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .with_context(|| format!("reading {}", files.key.display()))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut cfg = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the TLS certificate and key do not match")?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// A TCP listener whose connections are TLS: a failed handshake is logged
/// and skipped, and a slow one cannot hold up the next accept for long.
struct TlsListener {
    tcp: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, addr) = match self.tcp.accept().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let handshake = self.acceptor.accept(stream);
            match tokio::time::timeout(Duration::from_secs(5), handshake).await {
                Ok(Ok(tls)) => return (tls, addr),
                Ok(Err(e)) => tracing::debug!(%addr, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%addr, "TLS handshake timed out"),
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

impl Gateway {
    pub async fn start(cfg: Config) -> anyhow::Result<Gateway> {
        let loopback = cfg.bind.is_loopback();
        if !loopback && cfg.tls.is_none() && !cfg.insecure_http {
            bail!(
                "refusing to serve {} without TLS: give --tls-cert and --tls-key, or \
                 --insecure-http to serve plain HTTP anyway (beyond loopback every request \
                 still needs the session cookie of /login or a bearer token)",
                cfg.bind
            );
        }
        let tls = cfg.tls.as_ref().map(tls_config).transpose()?;
        let edge = Arc::new(edge(&cfg, tls.is_some())?);
        let initial = match (&cfg.login_token, loopback) {
            (Some(t), true) => session::claims(t).map(|c| Session {
                token: t.clone(),
                username: c
                    .get("sub")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            }),
            _ => None,
        };
        // A client per session comes from this one (`with_token`); its own
        // token is never sent.
        let meson = meson_client::Client::new(&cfg.meson_url, "no-session")
            .map_err(|e| anyhow::anyhow!("the meson URL: {e}"))?
            .with_retry(meson_client::RetryPolicy {
                max_retries: 2,
                base: Duration::from_millis(200),
                cap: Duration::from_secs(2),
            });
        let state = AppState(Arc::new(Shared {
            meson,
            sessions: Sessions::new(loopback, initial),
            secure_cookie: tls.is_some(),
        }));

        let mut wanted: Vec<(Option<Daemon>, u16)> =
            cfg.ports.iter().map(|(d, p)| (Some(*d), *p)).collect();
        if let Some(p) = cfg.single_origin_port {
            wanted.push((None, p));
        }
        // Bind everything first: a failure leaves nothing listening.
        let mut bound = Vec::new();
        for (daemon, port) in wanted {
            let (l, moved) =
                bind(cfg.bind, port, daemon, cfg.fallback_ports, cfg.port_flags).await?;
            bound.push((daemon, l, moved));
        }
        let (stop, stopped) = watch::channel(false);
        let mut listening = Vec::new();
        let mut tasks = Vec::new();
        for (daemon, listener, moved_from) in bound {
            let addr = listener.local_addr()?;
            let router = match daemon {
                Some(d) => app(state.clone(), &[d], false),
                None => app(state.clone(), &Daemon::ALL, true),
            }
            .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
            .layer(axum::middleware::from_fn_with_state(
                edge.clone(),
                meson_edge::guard,
            ));
            let mut rx = stopped.clone();
            let shutdown = async move {
                let _ = rx.wait_for(|s| *s).await;
            };
            let task = match &tls {
                Some(cfg) => {
                    let l = TlsListener {
                        tcp: listener,
                        acceptor: tokio_rustls::TlsAcceptor::from(cfg.clone()),
                    };
                    tokio::spawn(async move {
                        let _ = axum::serve(l, router)
                            .with_graceful_shutdown(shutdown)
                            .await;
                    })
                }
                None => tokio::spawn(async move {
                    let _ = axum::serve(listener, router)
                        .with_graceful_shutdown(shutdown)
                        .await;
                }),
            };
            tasks.push(task);
            listening.push(Listening {
                daemon,
                addr,
                moved_from,
            });
        }
        Ok(Gateway {
            listening,
            tls: tls.is_some(),
            port_flags: cfg.port_flags,
            stop,
            tasks,
        })
    }

    /// Where `daemon` listens on its own port.
    pub fn addr(&self, daemon: Daemon) -> Option<SocketAddr> {
        self.listening
            .iter()
            .find(|l| l.daemon == Some(daemon))
            .map(|l| l.addr)
    }

    /// Where the single-origin listener is.
    pub fn single_origin_addr(&self) -> Option<SocketAddr> {
        self.listening
            .iter()
            .find(|l| l.daemon.is_none())
            .map(|l| l.addr)
    }

    /// The listeners that could not have their port.
    pub fn moved(&self) -> impl Iterator<Item = &Listening> {
        self.listening.iter().filter(|l| l.moved_from.is_some())
    }

    /// Lines saying where each daemon listens, moved ones flagged.
    pub fn describe(&self) -> Vec<String> {
        let scheme = if self.tls { "https" } else { "http" };
        self.listening
            .iter()
            .map(|l| {
                let base = l.daemon.map_or("", Daemon::base);
                let mut line = format!("{:<12} {scheme}://{}{base}", l.name(), l.addr);
                if let Some(p) = l.moved_from {
                    line.push_str(&format!(
                        "   <-- MOVED: port {p} is in use (elemento-cli needs {p}; set {})",
                        setting(l.daemon, self.port_flags)
                    ));
                }
                line
            })
            .collect()
    }

    /// Stops every listener, letting requests in flight finish.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}
