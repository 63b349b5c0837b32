//! Which page sent a request. Browsers say it in `Origin` (every request
//! but a plain GET or HEAD, and every cross-origin `fetch`) and in
//! `Sec-Fetch-Site` (every request to a secure or loopback URL); programs
//! (curl, elemento-cli, the SDK) send neither.

use crate::host::Authority;
use axum::http::HeaderMap;

/// A web origin: scheme, host and port (the scheme's default when absent),
/// or the opaque `null` (sandboxed frames, `data:` and `file:` pages).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    Tuple {
        scheme: String,
        host: String,
        port: Option<u16>,
    },
    Null,
}

impl Origin {
    /// Parses an `Origin` header value, or a configured origin.
    pub fn parse(s: &str) -> Option<Origin> {
        let s = s.trim();
        if s == "null" {
            return Some(Origin::Null);
        }
        // Electron's pages loaded from files (Electros' desktop app) say
        // `file://`: no host, and no web page can say it.
        if s.eq_ignore_ascii_case("file://") {
            return Some(Origin::Tuple {
                scheme: "file".to_owned(),
                host: String::new(),
                port: None,
            });
        }
        let s = s.trim_end_matches('/');
        let (scheme, rest) = s.split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme.is_empty()
            || !scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
            || rest.contains(['/', '?', '#', '@'])
        {
            return None;
        }
        let a = Authority::parse(rest)?;
        let port = match (a.port, default_port(&scheme)) {
            (Some(p), Some(d)) if p == d => None,
            (p, _) => p,
        };
        Some(Origin::Tuple {
            scheme,
            host: a.host,
            port,
        })
    }

    /// The origin of a page served by this listener: `scheme://` + `Host`.
    pub fn of_listener(scheme: &str, host: &Authority) -> Origin {
        let scheme = scheme.to_ascii_lowercase();
        let port = match (host.port, default_port(&scheme)) {
            (Some(p), Some(d)) if p == d => None,
            (p, _) => p,
        };
        Origin::Tuple {
            scheme,
            host: host.host.clone(),
            port,
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Null => f.write_str("null"),
            Origin::Tuple { scheme, host, port } => {
                let host = if host.contains(':') {
                    format!("[{host}]")
                } else {
                    host.clone()
                };
                match port {
                    Some(p) => write!(f, "{scheme}://{host}:{p}"),
                    None => write!(f, "{scheme}://{host}"),
                }
            }
        }
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        _ => None,
    }
}

/// Where a request comes from, as far as a browser would say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Provenance {
    /// No sign of a page of another site: a program, a typed URL, a
    /// same-site subresource.
    Direct,
    /// A page this listener served.
    SameOrigin,
    /// A page of an origin configured as allowed (Electros).
    Allowed(Origin),
    /// A page of another origin.
    Foreign(String),
    /// `Sec-Fetch-Site: cross-site` with no `Origin`: an `<img>`, a form
    /// navigation, a link from another site.
    CrossSite,
}

impl Provenance {
    /// Of meson or of an allowed client: may change state and receive
    /// credentials.
    pub fn is_first_party(&self) -> bool {
        matches!(
            self,
            Provenance::Direct | Provenance::SameOrigin | Provenance::Allowed(_)
        )
    }

    /// Reads `Origin` and `Sec-Fetch-Site` against the listener's own
    /// origin (`own`, unknown without a `Host`) and the allowed ones.
    pub fn of(headers: &HeaderMap, own: Option<&Origin>, allowed: &[Origin]) -> Provenance {
        let origin = headers
            .get(axum::http::header::ORIGIN)
            .map(|v| v.to_str().unwrap_or("(not text)").trim().to_owned());
        if let Some(raw) = origin {
            return match Origin::parse(&raw) {
                Some(o) if own == Some(&o) => Provenance::SameOrigin,
                Some(o) if allowed.contains(&o) => Provenance::Allowed(o),
                _ => Provenance::Foreign(raw),
            };
        }
        let cross_site = headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("cross-site"));
        if cross_site {
            Provenance::CrossSite
        } else {
            Provenance::Direct
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn o(s: &str) -> Origin {
        Origin::parse(s).unwrap_or_else(|| panic!("{s} does not parse"))
    }

    #[test]
    fn origins_normalise_default_ports_and_case() {
        assert_eq!(o("HTTP://LocalHost:80"), o("http://localhost"));
        assert_eq!(o("https://x.example:443/"), o("https://x.example"));
        assert_ne!(o("http://localhost:3000"), o("http://localhost"));
        assert_eq!(o("null"), Origin::Null);
        assert_eq!(o("http://[::1]:8080").to_string(), "http://[::1]:8080");
        assert_eq!(o("app://electros").to_string(), "app://electros");
        assert_eq!(o("file://").to_string(), "file://");
        assert_ne!(o("file://"), Origin::Null);
        for bad in [
            "localhost",
            "http://",
            "http://a/b",
            "http://u@a",
            "://a",
            "file:///etc",
        ] {
            assert!(Origin::parse(bad).is_none(), "{bad:?} parsed");
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn provenance() {
        let own = Origin::of_listener("http", &Authority::parse("127.0.0.1:27777").unwrap());
        let allowed = [o("http://localhost:3000")];
        let of =
            |pairs: &[(&'static str, &str)]| Provenance::of(&headers(pairs), Some(&own), &allowed);
        assert_eq!(of(&[]), Provenance::Direct);
        assert_eq!(of(&[("sec-fetch-site", "none")]), Provenance::Direct);
        assert_eq!(of(&[("sec-fetch-site", "same-site")]), Provenance::Direct);
        assert_eq!(
            of(&[("sec-fetch-site", "cross-site")]),
            Provenance::CrossSite
        );
        assert_eq!(
            of(&[("origin", "http://127.0.0.1:27777")]),
            Provenance::SameOrigin
        );
        assert!(matches!(
            of(&[
                ("origin", "http://localhost:3000"),
                ("sec-fetch-site", "cross-site")
            ]),
            Provenance::Allowed(_)
        ));
        for foreign in [
            "http://evil.example",
            "http://127.0.0.1:9999",
            "https://127.0.0.1:27777",
            "null",
            "garbage",
        ] {
            assert_eq!(
                of(&[("origin", foreign)]),
                Provenance::Foreign(foreign.into()),
                "{foreign}"
            );
        }
        assert!(!Provenance::CrossSite.is_first_party());
        assert!(Provenance::Direct.is_first_party());
    }
}
