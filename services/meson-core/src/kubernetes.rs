//! The Kubernetes versions meson installs, and the rule for upgrading between them.
//!
//! Policy, in one place:
//! - The catalogue is a short, curated list of patch releases per minor (not
//!   every upstream patch): the ones meson's node images are built and tested
//!   for. `1.29.2` is there because the seed KaaS payload asks for it.
//! - A version is written `1.29.2`; a leading `v` (`v1.29.2`, as `kubectl`
//!   prints it) is accepted. A bare minor (`1.29`) resolves to the latest
//!   patch of that minor in the catalogue, and the caller is told which.
//!   Pre-releases and build metadata are never supported.
//! - Minors past upstream end of life are `deprecated`: still accepted (an
//!   existing client must keep working) but with a warning.
//! - Upgrades go forward only, one minor at a time, as kubeadm requires: to a
//!   later patch of the same minor, or to any patch of the next minor.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A Kubernetes release `major.minor.patch`. Ordered by version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl KubeVersion {
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        KubeVersion {
            major,
            minor,
            patch,
        }
    }

    /// `1.29`: the minor line this release belongs to.
    pub fn minor_line(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }

    /// Whether `to` is an allowed upgrade from `self`: a later patch of the
    /// same minor, or any patch of the next minor. Says nothing about
    /// whether `to` is in the catalogue (see [`check_upgrade`]).
    pub fn can_upgrade_to(&self, to: &KubeVersion) -> bool {
        self.major == to.major
            && ((to.minor == self.minor && to.patch > self.patch) || to.minor == self.minor + 1)
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Exactly `major.minor.patch` (a leading `v` allowed).
impl std::str::FromStr for KubeVersion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match parse(s)? {
            VersionRequest::Exact(v) => Ok(v),
            VersionRequest::Minor { .. } => Err(SYNTAX.to_owned()),
        }
    }
}

// Stored and sent as the string "1.29.2".
impl Serialize for KubeVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for KubeVersion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match parse(&s) {
            Ok(VersionRequest::Exact(v)) => Ok(v),
            _ => Err(serde::de::Error::custom(format!(
                "'{s}' is not a Kubernetes version major.minor.patch"
            ))),
        }
    }
}

/// What a caller asked for: one release, or the latest patch of a minor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionRequest {
    Exact(KubeVersion),
    /// `major.minor`: the latest patch of that minor in the catalogue.
    Minor {
        major: u32,
        minor: u32,
    },
}

const SYNTAX: &str =
    "must be a Kubernetes version such as 1.31.10 (or v1.31.10, or 1.31 for its latest patch)";

fn number(s: &str) -> Option<u32> {
    // No signs, no leading zeros (other than "0" itself), no empty parts.
    if s.is_empty() || s.len() > 4 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if s.len() > 1 && s.starts_with('0') {
        return None;
    }
    s.parse().ok()
}

/// Parses `1.29.2`, `v1.29.2` or `1.29` (surrounding spaces ignored).
pub fn parse(s: &str) -> Result<VersionRequest, String> {
    let s = s.trim();
    let s = s
        .strip_prefix('v')
        .or_else(|| s.strip_prefix('V'))
        .unwrap_or(s);
    let parts: Vec<&str> = s.split('.').collect();
    let nums: Option<Vec<u32>> = parts.iter().map(|p| number(p)).collect();
    match nums.as_deref() {
        Some([major, minor, patch]) => Ok(VersionRequest::Exact(KubeVersion::new(
            *major, *minor, *patch,
        ))),
        Some([major, minor]) => Ok(VersionRequest::Minor {
            major: *major,
            minor: *minor,
        }),
        _ => Err(SYNTAX.to_owned()),
    }
}

/// One supported release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release {
    pub version: KubeVersion,
    /// Its minor is past upstream end of life: accepted with a warning.
    pub deprecated: bool,
    /// Upstream end of life of its minor (`YYYY-MM-DD`).
    pub end_of_life: &'static str,
}

impl Release {
    /// The catalogue's default (see [`default_release`]).
    pub fn is_default(&self) -> bool {
        self.version == DEFAULT
    }
}

/// The release a cluster gets when its request names none.
pub const DEFAULT: KubeVersion = KubeVersion::new(1, 31, 10);

const fn release(minor: u32, patch: u32, deprecated: bool, end_of_life: &'static str) -> Release {
    Release {
        version: KubeVersion::new(1, minor, patch),
        deprecated,
        end_of_life,
    }
}

/// Every supported release, oldest first.
pub const CATALOGUE: &[Release] = &[
    release(28, 9, true, "2024-10-28"),
    release(28, 15, true, "2024-10-28"),
    release(29, 2, true, "2025-02-28"),
    release(29, 8, true, "2025-02-28"),
    release(29, 15, true, "2025-02-28"),
    release(30, 4, false, "2025-06-28"),
    release(30, 10, false, "2025-06-28"),
    release(30, 14, false, "2025-06-28"),
    release(31, 2, false, "2025-10-28"),
    release(31, 6, false, "2025-10-28"),
    release(31, 10, false, "2025-10-28"),
    release(32, 2, false, "2026-02-28"),
    release(32, 6, false, "2026-02-28"),
];

/// The release for clusters that name none.
pub fn default_release() -> &'static Release {
    CATALOGUE
        .iter()
        .find(|r| r.is_default())
        .unwrap_or(&CATALOGUE[CATALOGUE.len() - 1])
}

/// The catalogue entry of exactly `v`.
pub fn lookup(v: &KubeVersion) -> Option<&'static Release> {
    CATALOGUE.iter().find(|r| &r.version == v)
}

/// The supported versions as a human list, for error messages.
pub fn supported_list() -> String {
    CATALOGUE
        .iter()
        .map(|r| r.version.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A requested version resolved against the catalogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolved {
    pub release: &'static Release,
    /// True when a bare minor was resolved to its latest patch.
    pub from_minor: bool,
}

/// Parses a version string and finds it in the catalogue; the error says why
/// and lists what is supported.
pub fn resolve(s: &str) -> Result<Resolved, String> {
    let found = match parse(s)? {
        VersionRequest::Exact(v) => lookup(&v).map(|release| Resolved {
            release,
            from_minor: false,
        }),
        VersionRequest::Minor { major, minor } => CATALOGUE
            .iter()
            .rev()
            .find(|r| r.version.major == major && r.version.minor == minor)
            .map(|release| Resolved {
                release,
                from_minor: true,
            }),
    };
    found.ok_or_else(|| {
        format!(
            "Kubernetes {} is not supported; supported: {}",
            s.trim(),
            supported_list()
        )
    })
}

/// Catalogue releases a cluster at `from` may upgrade to, oldest first.
pub fn upgradable_to(from: &KubeVersion) -> Vec<&'static Release> {
    CATALOGUE
        .iter()
        .filter(|r| from.can_upgrade_to(&r.version))
        .collect()
}

/// Checks an upgrade request: `to` must be in the catalogue and allowed by
/// the upgrade rule. The error is a message for the `kubernetes_version` field.
pub fn check_upgrade(from: &KubeVersion, to: &KubeVersion) -> Result<&'static Release, String> {
    let Some(release) = lookup(to) else {
        return Err(format!(
            "Kubernetes {to} is not supported; supported: {}",
            supported_list()
        ));
    };
    if to == from {
        return Err(format!("the cluster already runs Kubernetes {from}"));
    }
    if from.can_upgrade_to(to) {
        return Ok(release);
    }
    let allowed: Vec<String> = upgradable_to(from)
        .iter()
        .map(|r| r.version.to_string())
        .collect();
    let why = if to < from {
        "downgrades are not possible"
    } else {
        "upgrades go to a later patch of the same minor or to the next minor only"
    };
    Err(if allowed.is_empty() {
        format!("cannot upgrade from {from} to {to}: {why}; {from} has no upgrade available")
    } else {
        format!(
            "cannot upgrade from {from} to {to}: {why}; allowed: {}",
            allowed.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> KubeVersion {
        match parse(s).unwrap() {
            VersionRequest::Exact(v) => v,
            other => panic!("{s} parsed as {other:?}"),
        }
    }

    #[test]
    fn the_catalogue_is_sorted_has_one_default_and_the_seed_version() {
        assert!(CATALOGUE.windows(2).all(|w| w[0].version < w[1].version));
        assert_eq!(CATALOGUE.iter().filter(|r| r.is_default()).count(), 1);
        assert!(!default_release().deprecated);
        assert!(lookup(&KubeVersion::new(1, 29, 2)).is_some());
        // Deprecation is per minor.
        for w in CATALOGUE.windows(2) {
            if w[0].version.minor == w[1].version.minor {
                assert_eq!(w[0].deprecated, w[1].deprecated);
                assert_eq!(w[0].end_of_life, w[1].end_of_life);
            }
        }
    }

    #[test]
    fn parses_with_or_without_v_and_rejects_junk() {
        assert_eq!(v("1.29.2"), KubeVersion::new(1, 29, 2));
        assert_eq!(v(" v1.29.2 "), KubeVersion::new(1, 29, 2));
        assert_eq!(v("V1.30.0"), KubeVersion::new(1, 30, 0));
        assert_eq!(
            parse("1.29").unwrap(),
            VersionRequest::Minor {
                major: 1,
                minor: 29
            }
        );
        for bad in [
            "",
            "1",
            "1.29.2.1",
            "1.29.x",
            "1.29.2-rc.1",
            "01.29.2",
            "1.029.2",
            "1..2",
            "latest",
            "vv1.29.2",
            "-1.29.2",
            "1.29.2+k3s1",
            "99999.1.1",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn resolution_against_the_catalogue() {
        let r = resolve("1.29.2").unwrap();
        assert_eq!(r.release.version, KubeVersion::new(1, 29, 2));
        assert!(r.release.deprecated && !r.from_minor);
        let r = resolve("v1.30").unwrap();
        assert_eq!(r.release.version, KubeVersion::new(1, 30, 14));
        assert!(r.from_minor);
        let e = resolve("1.29.3").unwrap_err();
        assert!(e.contains("not supported") && e.contains("1.31.10"), "{e}");
        assert!(resolve("1.27").is_err());
        assert!(resolve("2.0.0").is_err());
        assert!(resolve("one").unwrap_err().starts_with("must be"));
    }

    #[test]
    fn upgrade_rule_patch_or_next_minor_only() {
        let from = v("1.29.8");
        assert!(from.can_upgrade_to(&v("1.29.15")));
        assert!(from.can_upgrade_to(&v("1.30.4")));
        assert!(from.can_upgrade_to(&v("1.30.0")));
        assert!(!from.can_upgrade_to(&v("1.29.8")), "same version");
        assert!(!from.can_upgrade_to(&v("1.29.2")), "older patch");
        assert!(!from.can_upgrade_to(&v("1.31.2")), "skips a minor");
        assert!(!from.can_upgrade_to(&v("1.28.15")), "older minor");
        assert!(!from.can_upgrade_to(&v("2.0.0")), "another major");

        let to: Vec<String> = upgradable_to(&from)
            .iter()
            .map(|r| r.version.to_string())
            .collect();
        assert_eq!(to, ["1.29.15", "1.30.4", "1.30.10", "1.30.14"]);
        assert!(upgradable_to(&v("1.32.6")).is_empty());

        assert!(check_upgrade(&from, &v("1.30.10")).is_ok());
        let e = check_upgrade(&from, &v("1.31.2")).unwrap_err();
        assert!(e.contains("allowed: 1.29.15, 1.30.4"), "{e}");
        let e = check_upgrade(&from, &v("1.29.2")).unwrap_err();
        assert!(e.contains("downgrades"), "{e}");
        assert!(
            check_upgrade(&from, &v("1.30.5"))
                .unwrap_err()
                .contains("not supported")
        );
        assert!(check_upgrade(&from, &from).unwrap_err().contains("already"));
        assert!(
            check_upgrade(&v("1.32.6"), &v("1.32.2"))
                .unwrap_err()
                .contains("no upgrade available")
        );
    }

    #[test]
    fn serde_as_a_string() {
        let x = KubeVersion::new(1, 29, 2);
        assert_eq!(
            serde_json::to_value(x).unwrap(),
            serde_json::json!("1.29.2")
        );
        let back: KubeVersion = serde_json::from_value(serde_json::json!("1.29.2")).unwrap();
        assert_eq!(back, x);
        assert!(serde_json::from_value::<KubeVersion>(serde_json::json!("1.29")).is_err());
    }
}
