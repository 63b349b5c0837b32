//! Organisations and sub-organisations. An organisation is a tenant, under
//! the same id; a sub-organisation's id is its parent's, a dot and its own
//! name, and its quotas are carved out of its parent's (what it may hold
//! counts as held by its parent: `migrations/*_suborgs.sql`).

use crate::error::{Error, FieldErrors, Result};
use crate::id::TenantId;
use crate::quota::{NAMES, Resources};
use chrono::{DateTime, Utc};
use serde_json::Value;

/// An organisation id's longest (a tenant id's).
pub const MAX_ID_LEN: usize = 128;
/// A sub-organisation's own name: 1 to 32 of `[a-z0-9-]`, a letter or
/// digit first.
pub const MAX_NAME_LEN: usize = 32;

/// An organisation meson knows more of than an id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Organization {
    pub id: TenantId,
    pub parent: Option<TenantId>,
    pub name: String,
    pub created_by: String,
    pub created: DateTime<Utc>,
}

/// `POST /v1/organizations`: a sub-organisation of the organisation the
/// call acts in, with what it may hold (each resource not named: none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrgCreate {
    pub name: String,
    pub quotas: Resources,
}

/// `PATCH /v1/organizations/{id}`: quotas named change, the rest stay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrgUpdate {
    pub quotas: crate::quota::QuotaOverrides,
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= MAX_NAME_LEN
        && n.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && n.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The id of `parent`'s sub-organisation `name`.
pub fn child_id(parent: &TenantId, name: &str) -> Result<TenantId> {
    let id = format!("{}.{name}", parent.as_str());
    if id.len() > MAX_ID_LEN {
        return Err(Error::invalid(
            "name",
            format!("the sub-organisation's id, {id:?}, would pass {MAX_ID_LEN} characters"),
        ));
    }
    Ok(TenantId(id))
}

/// Reads `{"vms": 3, ...}`: every quota a non-negative integer, every bad
/// one named under `quotas.`.
fn quotas(v: &Value, errs: &mut FieldErrors) -> crate::quota::QuotaOverrides {
    let mut out = crate::quota::QuotaOverrides::default();
    let Some(map) = v.as_object() else {
        errs.add("quotas", "must be an object of quotas");
        return out;
    };
    for (k, v) in map {
        match NAMES.iter().position(|n| n == k) {
            None => errs.add(
                format!("quotas.{k}"),
                format!("unknown quota (known: {})", NAMES.join(", ")),
            ),
            Some(i) => match v.as_i64().filter(|n| *n >= 0) {
                Some(n) => {
                    let mut a: [Option<i64>; 7] = out.entries().map(|(_, v)| v);
                    a[i] = Some(n);
                    out = crate::quota::QuotaOverrides::from_array(a);
                }
                None => errs.add(format!("quotas.{k}"), "must be a non-negative integer"),
            },
        }
    }
    out
}

fn fields(body: &Value, known: &[&str], errs: &mut FieldErrors) -> Result<()> {
    #[cfg(feature = "testing")]
    for key in known {
        crate::parse::keys::read(key);
    }
    let Some(map) = body.as_object() else {
        return Err(Error::invalid("(body)", "must be a JSON object"));
    };
    for k in map.keys() {
        if !known.contains(&k.as_str()) {
            errs.add(k.clone(), "unknown field");
        }
    }
    Ok(())
}

impl OrgCreate {
    pub fn parse(body: &Value) -> Result<OrgCreate> {
        let mut errs = FieldErrors::default();
        fields(body, &["name", "quotas"], &mut errs)?;
        let name = match body.get("name") {
            Some(Value::String(n)) if valid_name(n) => Some(n.clone()),
            Some(_) => {
                errs.add(
                    "name",
                    format!(
                        "must be 1 to {MAX_NAME_LEN} of a-z, 0-9 and '-', a letter or digit first"
                    ),
                );
                None
            }
            None => {
                errs.add("name", "is required");
                None
            }
        };
        let q = match body.get("quotas") {
            None | Some(Value::Null) => crate::quota::QuotaOverrides::default(),
            Some(v) => quotas(v, &mut errs),
        };
        let req = name.map(|name| OrgCreate {
            name,
            quotas: q.effective(&Resources::default()),
        });
        match req {
            Some(r) if errs.is_empty() => Ok(r),
            _ => Err(errs
                .into_error()
                .unwrap_or_else(|| Error::invalid("(body)", "not a sub-organisation"))),
        }
    }
}

impl OrgUpdate {
    pub fn parse(body: &Value) -> Result<OrgUpdate> {
        let mut errs = FieldErrors::default();
        fields(body, &["quotas"], &mut errs)?;
        let q = match body.get("quotas") {
            None | Some(Value::Null) => {
                errs.add("quotas", "is required");
                crate::quota::QuotaOverrides::default()
            }
            Some(v) => quotas(v, &mut errs),
        };
        errs.finish(OrgUpdate { quotas: q })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rejected(r: Result<impl std::fmt::Debug>) -> Vec<String> {
        match r {
            Err(Error::InvalidInput { fields }) => {
                let mut names: Vec<String> = fields.into_iter().map(|f| f.name).collect();
                names.sort();
                names
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sub_organisations_are_read_with_every_bad_field_named() {
        let c =
            OrgCreate::parse(&json!({"name": "team-a", "quotas": {"vms": 3, "vcpus": 8}})).unwrap();
        assert_eq!(c.name, "team-a");
        assert_eq!((c.quotas.vms, c.quotas.vcpus, c.quotas.nodes), (3, 8, 0));
        assert_eq!(
            rejected(OrgCreate::parse(
                &json!({"name": "Team A", "quotas": {"vms": -1, "gpus": 1}, "x": 1})
            )),
            ["name", "quotas.gpus", "quotas.vms", "x"]
        );
        assert_eq!(rejected(OrgCreate::parse(&json!({}))), ["name"]);
        assert_eq!(rejected(OrgCreate::parse(&json!({"name": "-a"}))), ["name"]);
        assert_eq!(rejected(OrgUpdate::parse(&json!({}))), ["quotas"]);
        let u = OrgUpdate::parse(&json!({"quotas": {"ram_mib": 4096}})).unwrap();
        assert_eq!((u.quotas.ram_mib, u.quotas.vms), (Some(4096), None));
    }

    #[test]
    fn a_child_id_is_its_parents_and_its_name() {
        let p = TenantId("acme".into());
        assert_eq!(child_id(&p, "team-a").unwrap().as_str(), "acme.team-a");
        let long = TenantId("x".repeat(120));
        assert!(child_id(&long, "team-abcd").is_err());
    }
}
