//! `--zones` and `--control-plane-zones` as the cluster's region or
//! continent, matched against the places meson offers.

use super::Report;

/// A place meson can put a cluster (`GET /v1/providers`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub provider: String,
    pub name: String,
    pub continent: String,
}

/// The regions and continents zones are matched against.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalog {
    pub regions: Vec<Region>,
}

impl Catalog {
    /// The regions of `mesond dev`'s simulated fleet (atomos-sim's
    /// `dev_hosts`), used when no meson is at hand to ask.
    pub fn builtin() -> Catalog {
        let r = |provider: &str, name: &str, continent: &str| Region {
            provider: provider.into(),
            name: name.into(),
            continent: continent.into(),
        };
        Catalog {
            regions: vec![
                r("ovh", "eu-west-gra", "europe"),
                r("ovh", "ca-east-bhs", "north-america"),
                r("ionos", "de-fra", "europe"),
                r("ionos", "us-las", "north-america"),
                r("gigas", "es-mad", "europe"),
                r("arubacloud", "it-ar1", "europe"),
                r("atomos", "on-prem", "europe"),
            ],
        }
    }

    fn continents(&self) -> Vec<&str> {
        let mut c: Vec<&str> = self.regions.iter().map(|r| r.continent.as_str()).collect();
        c.sort_unstable();
        c.dedup();
        c
    }

    fn region_names(&self) -> Vec<&str> {
        let mut c: Vec<&str> = self.regions.iter().map(|r| r.name.as_str()).collect();
        c.sort_unstable();
        c.dedup();
        c
    }
}

/// Where the zones place the cluster: `("region"|"continent", name)`.
pub(super) fn placement(
    zones: Option<(String, Vec<String>)>,
    cp_zones: Option<(String, Vec<String>)>,
    catalog: &Catalog,
    reports: &mut Vec<Report>,
) -> Option<(&'static str, String)> {
    let mut chosen: Option<(&'static str, String)> = None;
    for (written, list) in [zones, cp_zones].into_iter().flatten() {
        let mut unknown = Vec::new();
        let mut others = Vec::new();
        for z in &list {
            let lz = z.to_ascii_lowercase();
            let hit = if let Some(r) = catalog.regions.iter().find(|r| r.name == lz) {
                Some(("region", r.name.clone()))
            } else if catalog.regions.iter().any(|r| r.continent == lz) {
                Some(("continent", lz))
            } else {
                None
            };
            match (hit, &chosen) {
                (None, _) => unknown.push(z.clone()),
                (Some(h), None) => chosen = Some(h),
                (Some(h), Some(c)) if h == *c => {}
                (Some(h), Some(_)) => others.push(h.1),
            }
        }
        if !unknown.is_empty() {
            reports.push(Report {
                flag: written.clone(),
                message: format!(
                    "{} {unknown:?} {} no meson region ({}) or continent ({}){}",
                    if unknown.len() == 1 { "zone" } else { "zones" },
                    if unknown.len() == 1 { "names" } else { "name" },
                    catalog.region_names().join(", "),
                    catalog.continents().join(", "),
                    if chosen.is_none() {
                        ": meson picks the cheapest region that fits the cluster"
                    } else {
                        ""
                    }
                ),
            });
        }
        if let (false, Some(c)) = (others.is_empty(), &chosen) {
            reports.push(Report {
                flag: written,
                message: format!(
                    "a meson cluster lives in one region (its nodes share one network): \
                     using {} {:?}, not {others:?}",
                    c.0, c.1
                ),
            });
        }
    }
    chosen
}
