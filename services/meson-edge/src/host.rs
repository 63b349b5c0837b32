//! The names a listener answers to. A page whose DNS name an attacker
//! rebinds to 127.0.0.1 reaches a local listener with its own name in
//! `Host:`; refusing names the listener does not own ends the attack,
//! whatever the browser let through.

use std::net::IpAddr;

/// A `Host` (or an HTTP/2 authority) split into its name and port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authority {
    /// Lower-cased; an IPv6 address without its brackets.
    pub host: String,
    pub port: Option<u16>,
}

impl Authority {
    /// Parses `name`, `name:port`, `1.2.3.4:port`, `[::1]:port`. `None`
    /// for anything else (userinfo, a bad port, an empty name).
    pub fn parse(s: &str) -> Option<Authority> {
        let s = s.trim();
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (v6, after) = rest.split_once(']')?;
            v6.parse::<std::net::Ipv6Addr>().ok()?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':')?),
            };
            (v6, port)
        } else {
            match s.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (s, None),
            }
        };
        let port = match port {
            None => None,
            Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
                Some(p.parse().ok()?)
            }
            Some(_) => return None,
        };
        let ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':');
        if host.is_empty() || !host.bytes().all(ok) {
            return None;
        }
        Some(Authority {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// The port, or the scheme's default.
    pub fn port_or(&self, default: u16) -> u16 {
        self.port.unwrap_or(default)
    }

    fn ip(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }
}

/// The names a listener accepts in `Host`: always `localhost` and the
/// loopback addresses (any port: a proxy in front may have its own); the
/// names configured for it; and, bound beyond loopback, any IP address
/// (a rebinding page can only send a name, so an address is never one).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hosts {
    /// Lower-cased names; `*.example.com` takes its subdomains.
    names: Vec<String>,
    any: bool,
    any_ip: bool,
}

impl Hosts {
    /// Loopback names only.
    pub fn loopback() -> Hosts {
        Hosts::default()
    }

    /// For a listener bound to `bind`, with `names` configured (`*`: any
    /// name, which turns the check off; `*.example.com`: its subdomains).
    /// A name with a port or a scheme is refused, naming it.
    pub fn new(bind: IpAddr, names: &[String]) -> Result<Hosts, String> {
        let mut hosts = Hosts {
            any_ip: !bind.is_loopback(),
            ..Hosts::default()
        };
        for n in names {
            hosts.add(n)?;
        }
        Ok(hosts)
    }

    /// Adds a configured name (see [`Hosts::new`]).
    pub fn add(&mut self, name: &str) -> Result<(), String> {
        let n = name.trim().trim_end_matches('.').to_ascii_lowercase();
        if n == "*" {
            self.any = true;
            return Ok(());
        }
        let bare = n.strip_prefix("*.").unwrap_or(&n);
        match Authority::parse(bare) {
            Some(a) if a.port.is_none() && !bare.contains('*') => {
                self.names.push(n);
                Ok(())
            }
            _ => Err(format!(
                "{name:?} is not a host name (give a name or an address, without scheme or port)"
            )),
        }
    }

    /// The host of a URL (`MESON_PUBLIC_URL`), if it has a name.
    pub fn add_url_host(&mut self, url: &str) -> Result<(), String> {
        let uri: axum::http::Uri = url
            .parse()
            .map_err(|e| format!("{url:?} is not a URL: {e}"))?;
        match uri.host() {
            Some(h) => self.add(h.trim_start_matches('[').trim_end_matches(']')),
            None => Err(format!("{url:?} has no host")),
        }
    }

    /// Whether a request that named `host` may be served.
    pub fn allows(&self, host: &Authority) -> bool {
        if self.any || host.host == "localhost" {
            return true;
        }
        if let Some(ip) = host.ip() {
            return ip.is_loopback() || self.any_ip || self.named(&host.host);
        }
        self.named(&host.host)
    }

    fn named(&self, host: &str) -> bool {
        self.names.iter().any(|n| match n.strip_prefix("*.") {
            Some(domain) => host
                .strip_suffix(domain)
                .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
            None => n == host,
        })
    }

    /// What the refusal suggests.
    pub fn describe(&self) -> String {
        let mut out = vec!["localhost".to_owned(), "loopback addresses".to_owned()];
        if self.any_ip {
            out.push("IP addresses".to_owned());
        }
        out.extend(self.names.iter().cloned());
        out.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Authority {
        Authority::parse(s).unwrap_or_else(|| panic!("{s} does not parse"))
    }

    #[test]
    fn parses_names_addresses_and_ports() {
        assert_eq!(
            a("LocalHost:27777"),
            Authority {
                host: "localhost".into(),
                port: Some(27777)
            }
        );
        assert_eq!(a("[::1]:8080").host, "::1");
        assert_eq!(a("[::1]").port, None);
        assert_eq!(a("127.0.0.1").port, None);
        for bad in [
            "",
            ":80",
            "a:b",
            "user@host",
            "[::1",
            "[zz]:1",
            "h:99999",
            "a b",
            "[::1]x",
        ] {
            assert!(Authority::parse(bad).is_none(), "{bad:?} parsed");
        }
    }

    #[test]
    fn loopback_listeners_answer_only_to_loopback_names() {
        let h = Hosts::loopback();
        for ok in [
            "localhost:47777",
            "127.0.0.1:27777",
            "127.1.2.3",
            "[::1]:6777",
        ] {
            assert!(h.allows(&a(ok)), "{ok}");
        }
        for no in [
            "evil.example:27777",
            "localhost.evil.example",
            "10.0.0.5:8080",
            "0.0.0.0:27777",
            "foo.localhost",
        ] {
            assert!(!h.allows(&a(no)), "{no}");
        }
    }

    #[test]
    fn beyond_loopback_addresses_and_configured_names() {
        let names = vec!["meson.example.com".to_owned(), "*.apps.example".to_owned()];
        let h = Hosts::new("0.0.0.0".parse().unwrap(), &names).unwrap();
        assert!(h.allows(&a("10.0.0.5:8080")), "a probe by address");
        assert!(h.allows(&a("MESON.example.com")));
        assert!(h.allows(&a("x.apps.example:443")));
        assert!(!h.allows(&a("apps.example")));
        assert!(!h.allows(&a("xapps.example")));
        assert!(!h.allows(&a("evil.example")));
        let loopback_named = Hosts::new("127.0.0.1".parse().unwrap(), &names).unwrap();
        assert!(loopback_named.allows(&a("meson.example.com")));
        assert!(!loopback_named.allows(&a("10.0.0.5")));
        let any = Hosts::new("127.0.0.1".parse().unwrap(), &["*".to_owned()]).unwrap();
        assert!(any.allows(&a("whatever.example")));
        for bad in ["http://x", "x:80", "*x", "a/b", ""] {
            assert!(Hosts::loopback().add(bad).is_err(), "{bad:?} accepted");
        }
        let mut h = Hosts::loopback();
        h.add_url_host("https://api.meson.example:8443/v1").unwrap();
        assert!(h.allows(&a("api.meson.example:8443")));
    }
}
