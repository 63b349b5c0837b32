//! The Kubernetes versions meson installs, and the rule for upgrading between them.
//!
//! Policy, in one place:
//! - The catalogue is data, `data/kubernetes-versions.toml`: per minor its
//!   upstream release and end-of-life dates and a short, curated list of
//!   patch releases (not every upstream patch): the ones meson's node images
//!   are built and tested for. `1.29.2` is there because the canonical KaaS
//!   example payload asks for it. Compiled in, parsed once.
//! - A version is written `1.29.2`; a leading `v` (`v1.29.2`, as `kubectl`
//!   prints it) is accepted. A bare minor (`1.29`) resolves to the latest
//!   patch of that minor in the catalogue, and the caller is told which.
//!   Pre-releases and build metadata are never supported.
//! - What depends on the date takes it as `today` ([`today`] in production):
//!   a minor is deprecated from its end-of-life day on (still accepted, so
//!   an existing client keeps working, but with a warning), and the default
//!   is the latest patch of the second-newest minor still supported that day
//!   ([`default_release`]).
//! - Upgrades go forward only, one minor at a time, as kubeadm requires: to a
//!   later patch of the same minor, or to any patch of the next minor.

use chrono::NaiveDate;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::sync::LazyLock;

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
    /// Upstream release date of its minor (its `.0`).
    pub released: NaiveDate,
    /// Upstream end of life of its minor.
    pub end_of_life: NaiveDate,
}

impl Release {
    /// Whether its minor is past upstream end of life on `today` (from the
    /// end-of-life day on): still accepted, with a warning.
    pub fn is_deprecated(&self, today: NaiveDate) -> bool {
        today >= self.end_of_life
    }

    /// Released upstream and not past end of life on `today`.
    pub fn is_supported(&self, today: NaiveDate) -> bool {
        self.released <= today && !self.is_deprecated(today)
    }

    /// Whether it is the default on `today` (see [`default_release`]).
    pub fn is_default(&self, today: NaiveDate) -> bool {
        self.version == default_release(today).version
    }
}

/// Today's date (UTC), for the functions here that take `today`.
pub fn today() -> NaiveDate {
    chrono::Utc::now().date_naive()
}

/// The catalogue as data: `data/kubernetes-versions.toml`.
const DATA: &str = include_str!("../data/kubernetes-versions.toml");

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Data {
    minor: Vec<MinorData>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MinorData {
    version: String,
    released: NaiveDate,
    end_of_life: NaiveDate,
    patches: Vec<u32>,
}

/// Parses and checks the catalogue's data: minors ascending with their
/// dates, each release before its end of life, patches ascending.
fn load(text: &str) -> Result<Vec<Release>, String> {
    let data: Data = toml::from_str(text).map_err(|e| e.to_string())?;
    let mut releases: Vec<Release> = Vec::new();
    let mut last: Option<&MinorData> = None;
    for m in &data.minor {
        let (major, minor) = match parse(&m.version) {
            Ok(VersionRequest::Minor { major, minor }) => (major, minor),
            _ => return Err(format!("{:?}: not a minor such as 1.34", m.version)),
        };
        let at = |msg: &str| Err(format!("{}: {msg}", m.version));
        if m.released >= m.end_of_life {
            return at("released must come before end_of_life");
        }
        if let Some(prev) = last
            && (m.released <= prev.released || m.end_of_life <= prev.end_of_life)
        {
            return at("minors must be in release order, their dates ascending");
        }
        if m.patches.is_empty() || !m.patches.windows(2).all(|w| w[0] < w[1]) {
            return at("patches must be a non-empty ascending list");
        }
        for &patch in &m.patches {
            let version = KubeVersion::new(major, minor, patch);
            if releases.last().is_some_and(|r| r.version >= version) {
                return at("minors must be ascending");
            }
            releases.push(Release {
                version,
                released: m.released,
                end_of_life: m.end_of_life,
            });
        }
        last = Some(m);
    }
    if releases.is_empty() {
        return Err("no minor".to_owned());
    }
    Ok(releases)
}

static CATALOGUE: LazyLock<Vec<Release>> = LazyLock::new(|| match load(DATA) {
    Ok(releases) => releases,
    // The data is compiled in and checked by this module's tests.
    Err(e) => panic!("data/kubernetes-versions.toml: {e}"),
});

/// Every supported release, oldest first.
pub fn releases() -> &'static [Release] {
    &CATALOGUE
}

/// The catalogue's minors, oldest first: each its releases, oldest first.
fn minors() -> impl DoubleEndedIterator<Item = &'static [Release]> {
    releases().chunk_by(|a, b| a.version.minor_line() == b.version.minor_line())
}

/// The latest patch of each minor, oldest first.
fn latest_patches() -> impl DoubleEndedIterator<Item = &'static Release> {
    minors().filter_map(|m| m.last())
}

/// The release a cluster gets when its request names none, on `today`.
///
/// Policy: the latest patch of the second-newest minor supported on `today`
/// (released, and not past end of life), a line with a few months of patches
/// behind it; the newest when only one is supported. So the default is never
/// past end of life while the catalogue has a supported minor. On a date
/// past every minor's end of life (a catalogue nobody updated) it is the
/// newest minor's latest patch, deprecated; before any release, the oldest.
pub fn default_release(today: NaiveDate) -> &'static Release {
    let mut supported = latest_patches().rev().filter(|r| r.is_supported(today));
    let newest = supported.next();
    supported
        .next()
        .or(newest)
        .or_else(|| latest_patches().rev().find(|r| r.released <= today))
        .unwrap_or(&releases()[0])
}

/// The catalogue entry of exactly `v`.
pub fn lookup(v: &KubeVersion) -> Option<&'static Release> {
    releases().iter().find(|r| &r.version == v)
}

/// The supported versions as a human list, for error messages.
pub fn supported_list() -> String {
    releases()
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

impl Resolved {
    /// What the caller should be told about `asked` (as they wrote it) on
    /// `today`: that a minor was resolved to a patch, that it is past end of
    /// life and what to use instead.
    pub fn warnings(&self, asked: &str, today: NaiveDate) -> Vec<String> {
        let r = self.release;
        let mut out = Vec::new();
        if self.from_minor {
            out.push(format!(
                "{} resolved to its latest supported patch, {}",
                asked.trim(),
                r.version
            ));
        }
        if r.is_deprecated(today) {
            out.push(format!(
                "Kubernetes {} reached end of life on {}; consider {}",
                r.version.minor_line(),
                r.end_of_life,
                default_release(today).version
            ));
        }
        out
    }
}

/// Parses a version string and finds it in the catalogue; the error says why
/// and lists what is supported.
pub fn resolve(s: &str) -> Result<Resolved, String> {
    let found = match parse(s)? {
        VersionRequest::Exact(v) => lookup(&v).map(|release| Resolved {
            release,
            from_minor: false,
        }),
        VersionRequest::Minor { major, minor } => latest_patches()
            .find(|r| r.version.major == major && r.version.minor == minor)
            .map(|release| Resolved {
                release,
                from_minor: true,
            }),
    };
    found.ok_or_else(|| {
        format!(
            "Kubernetes {} is not supported; supported: {} (or a minor such as 1.34 for its \
             latest patch)",
            s.trim(),
            supported_list()
        )
    })
}

/// Catalogue releases a cluster at `from` may upgrade to, oldest first.
pub fn upgradable_to(from: &KubeVersion) -> Vec<&'static Release> {
    releases()
        .iter()
        .filter(|r| from.can_upgrade_to(&r.version))
        .collect()
}

/// Where a cluster at `from` may go, for error messages.
fn upgrades_from(from: &KubeVersion) -> String {
    let allowed: Vec<String> = upgradable_to(from)
        .iter()
        .map(|r| r.version.to_string())
        .collect();
    if allowed.is_empty() {
        format!("{from} has no upgrade available")
    } else {
        format!(
            "from {from} the cluster may go to {} (a later patch of its minor, or the next \
             minor)",
            allowed.join(", ")
        )
    }
}

/// Resolves an upgrade's target as asked (`1.36.2`, or `1.36` for that
/// minor's latest patch) for a cluster at `from`, and checks it: the error,
/// a message for the `kubernetes_version` field, names only the versions
/// this cluster may go to.
pub fn resolve_upgrade(from: &KubeVersion, asked: &str) -> Result<Resolved, String> {
    parse(asked)?;
    let resolved = resolve(asked).map_err(|_| {
        format!(
            "Kubernetes {} is not in meson's catalogue; {}",
            asked.trim(),
            upgrades_from(from)
        )
    })?;
    check_upgrade(from, &resolved.release.version)?;
    Ok(resolved)
}

/// Checks an upgrade request: `to` must be in the catalogue and allowed by
/// the upgrade rule. The error is a message for the `kubernetes_version` field.
pub fn check_upgrade(from: &KubeVersion, to: &KubeVersion) -> Result<&'static Release, String> {
    let Some(release) = lookup(to) else {
        return Err(format!(
            "Kubernetes {to} is not in meson's catalogue; {}",
            upgrades_from(from)
        ));
    };
    if to == from {
        return Err(format!("the cluster already runs Kubernetes {from}"));
    }
    if from.can_upgrade_to(to) {
        return Ok(release);
    }
    let why = if to < from {
        "downgrades are not possible"
    } else {
        "upgrades go to a later patch of the same minor or to the next minor only"
    };
    Err(format!(
        "cannot upgrade from {from} to {to}: {why}; {}",
        upgrades_from(from)
    ))
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

    fn day(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    /// A day the tests below were written for.
    const TODAY: &str = "2026-11-25";

    #[test]
    fn the_data_parses_and_is_sane() {
        let loaded = load(DATA).unwrap();
        assert_eq!(loaded, releases());
        let releases = releases();
        assert!(releases.windows(2).all(|w| w[0].version < w[1].version));
        // Dates are per minor.
        for w in releases.windows(2) {
            if w[0].version.minor == w[1].version.minor {
                assert_eq!(w[0].released, w[1].released);
                assert_eq!(w[0].end_of_life, w[1].end_of_life);
            } else {
                assert!(w[0].released < w[1].released && w[0].end_of_life < w[1].end_of_life);
            }
        }
        for r in releases {
            // Upstream supports a minor for about 14 months.
            let months = (r.end_of_life - r.released).num_days() / 30;
            assert!(
                (12..=16).contains(&months),
                "{}: {months} months",
                r.version
            );
        }
        // Existing clients' versions, and the supported lines of today.
        for v in ["1.28.15", "1.29.2", "1.30.14", "1.31.10", "1.32.6"] {
            assert!(resolve(v).is_ok(), "{v}");
        }
        for minor in ["1.33", "1.34", "1.35", "1.36"] {
            assert!(resolve(minor).is_ok(), "{minor}");
        }
    }

    #[test]
    fn bad_data_is_refused_with_the_reason() {
        let minor = |v: &str, released: &str, eol: &str, patches: &str| {
            format!(
                "[[minor]]\nversion = \"{v}\"\nreleased = \"{released}\"\n\
                 end_of_life = \"{eol}\"\npatches = {patches}\n"
            )
        };
        let good = minor("1.30", "2024-04-17", "2025-06-28", "[1, 2]");
        assert_eq!(load(&good).unwrap().len(), 2);
        for (bad, why) in [
            (
                minor("1.30.1", "2024-04-17", "2025-06-28", "[1]"),
                "not a minor",
            ),
            (
                minor("1.30", "2025-06-28", "2024-04-17", "[1]"),
                "before end_of_life",
            ),
            (
                minor("1.30", "2024-04-17", "2025-06-28", "[]"),
                "non-empty ascending",
            ),
            (
                minor("1.30", "2024-04-17", "2025-06-28", "[2, 1]"),
                "non-empty ascending",
            ),
            (
                minor("1.30", "2024-04-17", "2025-13-28", "[1]"),
                "out of range",
            ),
            (
                format!("{good}{}", minor("1.29", "2023-12-13", "2025-02-28", "[1]")),
                "release order",
            ),
            (String::new(), "missing field"),
            (format!("{good}extra = 1\n"), "unknown field"),
        ] {
            let e = load(&bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn deprecation_follows_the_date() {
        let r = lookup(&v("1.34.9")).unwrap();
        assert!(!r.is_deprecated(day("2026-10-26")));
        assert!(
            r.is_deprecated(day("2026-10-27")),
            "from its end-of-life day"
        );
        // One catalogue, two dates, two answers.
        let deprecated = |today: &str| -> Vec<String> {
            releases()
                .iter()
                .filter(|r| r.is_deprecated(day(today)))
                .map(|r| r.version.minor_line())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect()
        };
        assert_eq!(deprecated("2025-09-01"), ["1.28", "1.29", "1.30"]);
        assert_eq!(
            deprecated(TODAY),
            ["1.28", "1.29", "1.30", "1.31", "1.32", "1.33", "1.34"]
        );
        let r = resolve("1.29.2").unwrap();
        let w = r.warnings("1.29.2", day(TODAY));
        assert_eq!(
            w,
            ["Kubernetes 1.29 reached end of life on 2025-02-28; consider 1.36.4"]
        );
        assert!(r.warnings("1.29.2", day("2024-06-01")).is_empty());
    }

    #[test]
    fn the_default_follows_the_date_and_is_never_past_end_of_life() {
        assert_eq!(default_release(day(TODAY)).version, v("1.36.4"));
        assert_eq!(default_release(day("2025-08-01")).version, v("1.32.13"));
        assert_eq!(default_release(day("2025-09-01")).version, v("1.33.10"));
        // 1.37 released: 1.36 becomes the default on that day.
        assert_eq!(default_release(day("2026-08-25")).version, v("1.35.9"));
        assert_eq!(default_release(day("2026-08-26")).version, v("1.36.4"));
        // Every day from the first release to the last end of life.
        let first = releases()[0].released;
        let last = releases().iter().map(|r| r.end_of_life).max().unwrap();
        let mut today = first;
        while today < last {
            let d = default_release(today);
            assert!(d.is_supported(today), "{today}: {}", d.version);
            assert!(d.is_default(today));
            assert_eq!(
                releases().iter().filter(|r| r.is_default(today)).count(),
                1,
                "{today}"
            );
            // The latest patch of its minor.
            assert_eq!(resolve(&d.version.minor_line()).unwrap().release, d);
            today = today.succ_opt().unwrap();
        }
        // Outside the catalogue's range it still answers.
        assert_eq!(
            default_release(last).version,
            releases().last().unwrap().version
        );
        assert_eq!(
            default_release(day("2000-01-01")).version,
            releases()[0].version
        );
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
        assert!(!r.from_minor);
        let r = resolve("v1.30").unwrap();
        assert_eq!(r.release.version, KubeVersion::new(1, 30, 14));
        assert!(r.from_minor);
        let r = resolve("1.34").unwrap();
        assert_eq!(r.release.version, KubeVersion::new(1, 34, 9));
        assert_eq!(
            r.warnings("1.34", day("2026-01-01")),
            ["1.34 resolved to its latest supported patch, 1.34.9"]
        );
        let e = resolve("1.29.3").unwrap_err();
        assert!(
            e.starts_with("Kubernetes 1.29.3 is not supported; supported: 1.28.9, ")
                && e.contains("1.29.2, 1.29.8, 1.29.15, 1.30.4")
                && e.contains("1.36.4"),
            "{e}"
        );
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
        let newest = releases().last().unwrap().version;
        assert!(upgradable_to(&newest).is_empty());

        assert!(check_upgrade(&from, &v("1.30.10")).is_ok());
        let e = check_upgrade(&from, &v("1.31.2")).unwrap_err();
        assert!(
            e.contains("may go to 1.29.15, 1.30.4, 1.30.10, 1.30.14 ("),
            "{e}"
        );
        let e = check_upgrade(&from, &v("1.29.2")).unwrap_err();
        assert!(e.contains("downgrades"), "{e}");
        // A version meson does not know: only where this cluster may go.
        let e = check_upgrade(&from, &v("1.30.5")).unwrap_err();
        assert!(e.contains("not in meson's catalogue"), "{e}");
        assert!(
            e.contains("may go to 1.29.15, 1.30.4, 1.30.10, 1.30.14 ("),
            "{e}"
        );
        for asked in ["1.38", "1.38.0", "1.27"] {
            let e = resolve_upgrade(&from, asked).unwrap_err();
            assert!(
                e.starts_with(&format!(
                    "Kubernetes {asked} is not in meson's catalogue; from 1.29.8"
                )) && !e.contains("1.28.9"),
                "{e}"
            );
        }
        assert!(
            resolve_upgrade(&from, "latest")
                .unwrap_err()
                .contains("must be")
        );
        let r = resolve_upgrade(&from, "1.30").unwrap();
        assert_eq!(r.release.version, v("1.30.14"));
        assert!(r.from_minor);
        assert!(check_upgrade(&from, &from).unwrap_err().contains("already"));
        assert!(
            check_upgrade(&newest, &v("1.32.2"))
                .unwrap_err()
                .contains("no upgrade available")
        );
        assert!(check_upgrade(&v("1.35.9"), &v("1.36.4")).is_ok());
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
