//! AtomOS targets as meson knows them: where a set of daemons answers, and what it is.

use crate::error::Result;
use crate::id::TargetId;
use crate::parse::{Obj, Parser, Warning};
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub id: TargetId,
    /// Unique name, shown to users as the VM's `host`.
    pub name: String,
    pub host: String,
    pub compute_port: u16,
    pub storage_port: u16,
    pub network_port: u16,
    pub auth_port: u16,
    pub provider: String,
    pub region: String,
    pub continent: String,
    pub enabled: bool,
}

impl Target {
    /// Whether the target meets `[provider, continent, region]` constraints
    /// (each absent one allows every target).
    pub fn meets(&self, [provider, continent, region]: [&Option<String>; 3]) -> bool {
        provider.as_ref().is_none_or(|p| &self.provider == p)
            && continent.as_ref().is_none_or(|c| &self.continent == c)
            && region.as_ref().is_none_or(|r| &self.region == r)
    }
}

/// AtomOS's default ports: compute, storage, network, auth.
pub const DEFAULT_PORTS: [u16; 4] = [17777, 27777, 37777, 47777];

/// What an operator may change on a registered target (`None`: unchanged).
/// Its name, provider, region and continent stay: VMs placed there refer
/// to them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetPatch {
    pub host: Option<String>,
    pub ports: [Option<u16>; 4],
    pub enabled: Option<bool>,
}

const PORT_FIELDS: [&str; 4] = ["compute_port", "storage_port", "network_port", "auth_port"];

fn check_host(p: &mut Parser, path: String, host: &str) -> Option<String> {
    let ok = (1..=253).contains(&host.len())
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b));
    if ok {
        Some(host.to_owned())
    } else {
        p.errors.add(
            path,
            "must be a host name or an IP address (at most 253 characters)",
        );
        None
    }
}

fn check_slug(p: &mut Parser, path: String, s: &str) -> Option<String> {
    if (1..=63).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        Some(s.to_owned())
    } else {
        p.errors
            .add(path, "must be 1 to 63 lowercase letters, digits or '-'");
        None
    }
}

fn ports(p: &mut Parser, o: &mut Obj<'_>) -> [Option<u16>; 4] {
    PORT_FIELDS.map(|f| {
        p.int(o, f, 1..=65535, false)
            .and_then(|n| u16::try_from(n).ok())
    })
}

impl Target {
    /// Parses `POST /v1/targets`; every bad field is named, unknown ones
    /// become warnings.
    pub fn parse_new(body: &Value) -> Result<(Target, Vec<Warning>)> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let name = p.atomos_name(&mut root, "name", true, 63);
        let host = p
            .string(&mut root, "host", true)
            .and_then(|(path, h)| check_host(&mut p, path, h));
        let [compute, storage, network, auth] = ports(&mut p, &mut root);
        let mut slug = |p: &mut Parser, key| {
            p.string(&mut root, key, true)
                .and_then(|(path, s)| check_slug(p, path, s))
        };
        let provider = slug(&mut p, "provider");
        let region = slug(&mut p, "region");
        let continent = slug(&mut p, "continent");
        let enabled = p.bool(&mut root, "enabled").unwrap_or(true);
        p.done(root);
        let Parser { errors, warnings } = p;
        let [dc, ds, dn, da] = DEFAULT_PORTS;
        errors.finish((
            Target {
                id: TargetId::new(),
                name: name.unwrap_or_default(),
                host: host.unwrap_or_default(),
                compute_port: compute.unwrap_or(dc),
                storage_port: storage.unwrap_or(ds),
                network_port: network.unwrap_or(dn),
                auth_port: auth.unwrap_or(da),
                provider: provider.unwrap_or_default(),
                region: region.unwrap_or_default(),
                continent: continent.unwrap_or_default(),
                enabled,
            },
            warnings,
        ))
    }

    /// Applies a `PATCH /v1/targets/{id}` body.
    pub fn patched(mut self, body: &Value) -> Result<(Target, Vec<Warning>)> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let patch = TargetPatch {
            host: p
                .string(&mut root, "host", false)
                .and_then(|(path, h)| check_host(&mut p, path, h)),
            ports: ports(&mut p, &mut root),
            enabled: p.bool(&mut root, "enabled"),
        };
        p.done(root);
        let Parser { errors, warnings } = p;
        let patch = errors.finish(patch)?;
        if let Some(h) = patch.host {
            self.host = h;
        }
        let [c, s, n, a] = patch.ports;
        self.compute_port = c.unwrap_or(self.compute_port);
        self.storage_port = s.unwrap_or(self.storage_port);
        self.network_port = n.unwrap_or(self.network_port);
        self.auth_port = a.unwrap_or(self.auth_port);
        self.enabled = patch.enabled.unwrap_or(self.enabled);
        Ok((self, warnings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use serde_json::json;

    #[test]
    fn a_target_takes_default_ports_and_every_bad_field_is_named() {
        let (t, w) = Target::parse_new(&json!({"name": "ovh-gra-1", "host": "10.0.0.5",
            "provider": "ovh", "region": "gra", "continent": "europe", "rack": 4}))
        .unwrap();
        assert_eq!(
            (t.compute_port, t.auth_port, t.enabled),
            (17777, 47777, true)
        );
        assert_eq!(w[0].field, "rack");
        let Err(Error::InvalidInput { fields }) = Target::parse_new(&json!({"name": "a b",
            "host": "", "compute_port": 0, "provider": "OVH", "region": "gra",
            "enabled": "maybe"}))
        else {
            panic!("expected invalid_input")
        };
        let mut names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "compute_port",
                "continent",
                "enabled",
                "host",
                "name",
                "provider"
            ]
        );
    }

    #[test]
    fn a_patch_changes_the_endpoint_and_state_only() {
        let (t, _) = Target::parse_new(&json!({"name": "h", "host": "a", "provider": "ovh",
            "region": "gra", "continent": "europe"}))
        .unwrap();
        let (t2, w) = t
            .clone()
            .patched(&json!({"enabled": false, "auth_port": 1, "name": "x"}))
            .unwrap();
        assert_eq!(
            (t2.enabled, t2.auth_port, t2.name.as_str()),
            (false, 1, "h")
        );
        assert_eq!(w[0].field, "name");
        assert!(t.patched(&json!({"host": "bad host"})).is_err());
    }
}
