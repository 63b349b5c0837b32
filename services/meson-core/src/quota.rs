//! Per-tenant quotas: what a tenant may hold, and the shapes of what it
//! holds.
//!
//! Usage is counted on the desired state: a tenant's VMs (cluster nodes
//! apart), its standalone volumes, its clusters, each cluster's nodes at
//! the control plane's size plus every pool's `desired_nodes`, and its
//! images by their size. A request is
//! refused when it would take any counter it raises above its quota; a
//! request that raises nothing (a pool scaled down, say) passes even over a
//! quota lowered since. What each row counts and that rule are SQL, written
//! once (`migrations/*_tenant_usage.sql`, `*_quota_rule.sql`): the usage
//! triggers, the recount and the check all apply them. Here are only the
//! quotas (defaults, overrides) and the refusal's wording ([`exceeded`]).

use crate::error::{Error, FieldErrors, LimitExceeded, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One `T` per resource a quota limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerResource<T> {
    /// VMs, cluster nodes apart.
    pub vms: T,
    pub vcpus: T,
    pub ram_mib: T,
    pub storage_gb: T,
    pub clusters: T,
    /// Cluster nodes, control planes included.
    pub nodes: T,
    /// Images, by their size.
    pub images_gb: T,
}

/// An amount of every resource.
pub type Resources = PerResource<i64>;

/// A tenant's quotas where they differ from the defaults (`None`: the default).
pub type QuotaOverrides = PerResource<Option<i64>>;

impl<T: Copy> PerResource<T> {
    fn slot(&mut self, name: &str) -> Option<&mut T> {
        Some(match name {
            "vms" => &mut self.vms,
            "vcpus" => &mut self.vcpus,
            "ram_mib" => &mut self.ram_mib,
            "storage_gb" => &mut self.storage_gb,
            "clusters" => &mut self.clusters,
            "nodes" => &mut self.nodes,
            "images_gb" => &mut self.images_gb,
            _ => return None,
        })
    }

    /// One value per resource, in [`NAMES`] order.
    pub fn from_array(
        [vms, vcpus, ram_mib, storage_gb, clusters, nodes, images_gb]: [T; 7],
    ) -> Self {
        PerResource {
            vms,
            vcpus,
            ram_mib,
            storage_gb,
            clusters,
            nodes,
            images_gb,
        }
    }

    /// `(name, value)` for every resource, in [`NAMES`] order.
    pub fn entries(&self) -> [(&'static str, T); 7] {
        [
            ("vms", self.vms),
            ("vcpus", self.vcpus),
            ("ram_mib", self.ram_mib),
            ("storage_gb", self.storage_gb),
            ("clusters", self.clusters),
            ("nodes", self.nodes),
            ("images_gb", self.images_gb),
        ]
    }
}

/// The resources' names, as the API shows them, in order.
pub const NAMES: [&str; 7] = [
    "vms",
    "vcpus",
    "ram_mib",
    "storage_gb",
    "clusters",
    "nodes",
    "images_gb",
];

impl PerResource<i64> {
    /// The defaults of a fresh deployment: room for real work, a stop for
    /// runaway automation.
    pub const DEFAULT_QUOTAS: Resources = Resources {
        vms: 100,
        vcpus: 512,
        ram_mib: 1024 * 1024,
        storage_gb: 20_000,
        clusters: 20,
        nodes: 200,
        images_gb: 1_000,
    };

    /// Parses `vms=100,vcpus=512,...` (`MESON_DEFAULT_QUOTAS`); resources
    /// not named keep `base`'s amount.
    pub fn parse_list(base: Resources, text: &str) -> std::result::Result<Resources, String> {
        let mut out = base;
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| format!("'{item}' is not name=amount"))?;
            let slot = out.slot(name.trim()).ok_or_else(|| {
                format!(
                    "unknown quota '{}' (known: {})",
                    name.trim(),
                    NAMES.join(", ")
                )
            })?;
            *slot = value
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|v| *v >= 0)
                .ok_or_else(|| format!("'{}' is not a non-negative integer", value.trim()))?;
        }
        Ok(out)
    }
}

impl PerResource<Option<i64>> {
    /// The quotas in force: each override, else the default.
    pub fn effective(&self, defaults: &Resources) -> Resources {
        Resources {
            vms: self.vms.unwrap_or(defaults.vms),
            vcpus: self.vcpus.unwrap_or(defaults.vcpus),
            ram_mib: self.ram_mib.unwrap_or(defaults.ram_mib),
            storage_gb: self.storage_gb.unwrap_or(defaults.storage_gb),
            clusters: self.clusters.unwrap_or(defaults.clusters),
            nodes: self.nodes.unwrap_or(defaults.nodes),
            images_gb: self.images_gb.unwrap_or(defaults.images_gb),
        }
    }

    /// Applies a PATCH body: `{"vms": 10}` sets a quota, `{"vms": null}`
    /// returns it to the default, an absent name leaves it alone. Every bad
    /// field is named.
    pub fn patch(self, body: &Value) -> Result<QuotaOverrides> {
        let mut errs = FieldErrors::default();
        let out = self.patch_at("", body, &mut errs);
        errs.finish(out)
    }

    /// [`QuotaOverrides::patch`] of the object at `at` (`quotas`, ``: the
    /// body), its bad fields named from there into `errs`.
    fn patch_at(mut self, at: &str, body: &Value, errs: &mut FieldErrors) -> QuotaOverrides {
        let field = |name: &str| crate::parse::join(at, name);
        #[cfg(feature = "testing")]
        for name in NAMES {
            crate::parse::keys::read(&field(name));
        }
        let Some(map) = body.as_object() else {
            let name = if at.is_empty() { "(body)" } else { at };
            errs.add(name, "must be a JSON object");
            return self;
        };
        for (name, value) in map {
            let Some(slot) = self.slot(name) else {
                errs.add(
                    field(name),
                    format!("unknown quota (known: {})", NAMES.join(", ")),
                );
                continue;
            };
            match value {
                Value::Null => *slot = None,
                v => match v.as_i64().filter(|n| *n >= 0) {
                    Some(n) => *slot = Some(n),
                    None => errs.add(field(name), "must be a non-negative integer or null"),
                },
            }
        }
        self
    }

    /// A tenant's quota PATCH (`PATCH /v1/tenants/{tenant}/quotas`): its
    /// quotas applied to these, as [`QuotaOverrides::patch`], and its
    /// `plan` (absent: `None`; a plan's name, or null, `default` or `none`
    /// for no plan: `Some`).
    pub fn patch_tenant(self, body: &Value) -> Result<(QuotaOverrides, Option<Option<String>>)> {
        #[cfg(feature = "testing")]
        crate::parse::keys::read("plan");
        let mut quotas = body.clone();
        let plan = match quotas.as_object_mut().and_then(|m| m.remove("plan")) {
            None => None,
            Some(Value::Null) => Some(None),
            Some(Value::String(n)) if n == DEFAULT_PLAN || n == "none" => Some(None),
            Some(Value::String(n)) => Some(Some(plan_name("plan", &n)?)),
            Some(_) => return Err(Error::invalid("plan", "must be a plan's name or null")),
        };
        Ok((self.patch(&quotas)?, plan))
    }
}

impl PerResource<Option<i64>> {
    /// These overrides over `under`'s: each set here, else `under`'s (a
    /// tenant's own over its plan's).
    pub fn over(&self, under: &QuotaOverrides) -> QuotaOverrides {
        QuotaOverrides {
            vms: self.vms.or(under.vms),
            vcpus: self.vcpus.or(under.vcpus),
            ram_mib: self.ram_mib.or(under.ram_mib),
            storage_gb: self.storage_gb.or(under.storage_gb),
            clusters: self.clusters.or(under.clusters),
            nodes: self.nodes.or(under.nodes),
            images_gb: self.images_gb.or(under.images_gb),
        }
    }
}

/// The name of the deployment's defaults as a plan: a tenant on no plan.
pub const DEFAULT_PLAN: &str = "default";

/// A plan: a named set of quotas an operator puts tenants on. A tenant's
/// quota is its own override, else its plan's, else the default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub name: String,
    pub description: String,
    /// `None`: the deployment's default.
    pub quotas: QuotaOverrides,
    /// How many tenants are on it.
    pub tenants: i64,
}

/// A plan's name: 1 to 63 of `[a-z0-9-]`, starting with a letter or digit,
/// not `default` nor `none` (the defaults' own, as clients write them).
pub fn plan_name(field: &str, raw: &str) -> Result<String> {
    let ok = (1..=63).contains(&raw.len())
        && raw
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !raw.starts_with('-');
    if !ok {
        return Err(Error::invalid(
            field,
            "must be 1 to 63 lowercase letters, digits or '-', not starting with '-'",
        ));
    }
    if raw == DEFAULT_PLAN || raw == "none" {
        return Err(Error::invalid(
            field,
            format!("'{raw}' means the deployment's defaults: put the tenant on no plan (null)"),
        ));
    }
    Ok(raw.to_owned())
}

/// `PUT /v1/admin/plans/{name}`'s body: `{"description"?, "quotas": {...}}`,
/// `quotas` as a quota PATCH's (absent or null: the default). Every bad
/// field is named (`quotas.vms`, …).
pub fn parse_plan(body: &Value) -> Result<(String, QuotaOverrides)> {
    let Some(map) = body.as_object() else {
        return Err(Error::invalid("(body)", "must be a JSON object"));
    };
    let mut errs = FieldErrors::default();
    let description = match map.get("description") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(d)) if d.chars().count() <= 200 && !d.contains('\0') => d.clone(),
        Some(_) => {
            errs.add("description", "must be a string of at most 200 characters");
            String::new()
        }
    };
    let quotas = match map.get("quotas") {
        None | Some(Value::Null) => QuotaOverrides::default(),
        Some(q) => QuotaOverrides::default().patch_at("quotas", q, &mut errs),
    };
    #[cfg(feature = "testing")]
    for key in ["description", "quotas"] {
        crate::parse::keys::read(key);
    }
    for key in map.keys() {
        if key != "description" && key != "quotas" {
            errs.add(key.clone(), "unknown field (known: description, quotas)");
        }
    }
    errs.finish((description, quotas))
}

/// Refuses a request that meson's quota rule found would take the
/// resources named in `over` above their quotas, naming each such quota
/// with what the tenant holds now; nothing over is no refusal. The rule
/// itself, like what each resource counts, is SQL (`meson_quota_over` and
/// the usage functions in `migrations/`), applied where the usage is
/// locked, so it is written once.
pub fn exceeded(quotas: &Resources, usage: &Resources, over: &[&str]) -> Result<()> {
    let limits: Vec<LimitExceeded> = quotas
        .entries()
        .into_iter()
        .zip(usage.entries())
        .filter(|((name, _), _)| over.contains(name))
        .map(|((name, quota), (_, current))| LimitExceeded {
            name: name.to_owned(),
            quota,
            current,
        })
        .collect();
    if limits.is_empty() {
        Ok(())
    } else {
        Err(Error::QuotaExceeded { limits })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r(vms: i64, vcpus: i64) -> Resources {
        Resources {
            vms,
            vcpus,
            ..Resources::default()
        }
    }

    #[test]
    fn a_refusal_names_each_quota_over_with_what_is_held() {
        let quotas = Resources {
            vms: 2,
            vcpus: 4,
            ..Resources::DEFAULT_QUOTAS
        };
        assert!(exceeded(&quotas, &r(1, 2), &[]).is_ok());
        let Err(Error::QuotaExceeded { limits }) = exceeded(&quotas, &r(2, 3), &["vms", "vcpus"])
        else {
            panic!("expected resource_limit_exceeded")
        };
        assert_eq!(
            limits,
            vec![
                LimitExceeded {
                    name: "vms".into(),
                    quota: 2,
                    current: 2
                },
                LimitExceeded {
                    name: "vcpus".into(),
                    quota: 4,
                    current: 3
                },
            ]
        );
    }

    #[test]
    fn defaults_parse_and_bad_lists_name_the_problem() {
        let q = Resources::parse_list(Resources::DEFAULT_QUOTAS, "vms=3, nodes=0").unwrap();
        assert_eq!((q.vms, q.nodes, q.vcpus), (3, 0, 512));
        assert!(
            Resources::parse_list(Resources::DEFAULT_QUOTAS, "gpus=1")
                .unwrap_err()
                .contains("gpus")
        );
        assert!(Resources::parse_list(Resources::DEFAULT_QUOTAS, "vms=-1").is_err());
        assert!(Resources::parse_list(Resources::DEFAULT_QUOTAS, "vms").is_err());
    }

    #[test]
    fn patches_set_reset_and_name_every_bad_field() {
        let o = QuotaOverrides::default()
            .patch(&json!({"vms": 5, "nodes": 9}))
            .unwrap();
        assert_eq!((o.vms, o.nodes), (Some(5), Some(9)));
        let o = o.patch(&json!({"vms": null})).unwrap();
        assert_eq!((o.vms, o.nodes), (None, Some(9)));
        assert_eq!(o.effective(&Resources::DEFAULT_QUOTAS).vms, 100);
        let Err(Error::InvalidInput { fields }) =
            o.patch(&json!({"vms": -1, "gpus": 2, "ram_mib": "lots"}))
        else {
            panic!("expected invalid_input")
        };
        let mut names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["gpus", "ram_mib", "vms"]);
    }
}
