//! The data sources: meson's catalogue, a cluster's kubeconfig, and the
//! usage and cost metering counted.

use super::{Json, number, obj, parse_id, text};
use crate::diag::{Failure, Res};
use crate::schema::{Attr, Block, Step};
use crate::value::{Ty, V};
use meson_client::Client;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Data {
    Flavors,
    Providers,
    KubernetesVersions,
    Kubeconfig,
    Usage,
}

fn obj_ty(attrs: &[(&str, Ty)]) -> Ty {
    Ty::Obj(
        attrs
            .iter()
            .map(|(k, t)| ((*k).to_owned(), t.clone()))
            .collect(),
    )
}

fn none(_: &str) -> Option<Vec<Step>> {
    None
}

/// `meson_usage`'s arguments are the query's parameters, by the same names.
fn usage_field(f: &str) -> Option<Vec<Step>> {
    ["from", "to", "group_by", "tenant"]
        .contains(&f)
        .then(|| vec![Step::Attr(f.to_owned())])
}

/// An RFC 3339 time of the configuration, as the SDK's query takes it (the
/// type is the query's: read with its serde, the parse meson's JSON gets).
fn time<T: serde::de::DeserializeOwned>(config: &Json, k: &str) -> Res<Option<T>> {
    text(config, k)
        .map(|s| {
            serde_json::from_value(Json::from(s.trim())).map_err(|_| {
                Failure::msg(
                    format!("{k} must be an RFC 3339 time, like 2026-11-01T00:00:00Z"),
                    format!("{s:?} is not one: a date, a time and an offset (Z for UTC)"),
                )
                .at(vec![Step::Attr(k.to_owned())])
            })
        })
        .transpose()
}

/// `meson_usage`'s query (unset arguments are meson's defaults).
fn usage_query(config: &Json) -> Res<meson_client::UsageQuery> {
    Ok(meson_client::UsageQuery {
        from: time(config, "from")?,
        to: time(config, "to")?,
        group_by: text(config, "group_by"),
        tenant: text(config, "tenant"),
    })
}

impl Data {
    pub const ALL: [Data; 5] = [
        Data::Flavors,
        Data::Providers,
        Data::KubernetesVersions,
        Data::Kubeconfig,
        Data::Usage,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Data::Flavors => "meson_flavors",
            Data::Providers => "meson_providers",
            Data::KubernetesVersions => "meson_kubernetes_versions",
            Data::Kubeconfig => "meson_cluster_kubeconfig",
            Data::Usage => "meson_usage",
        }
    }

    pub fn parse(name: &str) -> Option<Data> {
        Data::ALL.into_iter().find(|d| d.name() == name)
    }

    pub fn block(self) -> Block {
        let id = Attr::computed("id", Ty::Str, "An id for Terraform.");
        match self {
            Data::Flavors => Block {
                description: "meson's VM flavors: named sizes.",
                attrs: vec![
                    id,
                    Attr::computed(
                        "flavors",
                        Ty::list(obj_ty(&[
                            ("name", Ty::Str),
                            ("description", Ty::Str),
                            ("vcpus", Ty::Num),
                            ("memory_mib", Ty::Num),
                            ("gpus", Ty::Num),
                        ])),
                        "The flavors: name, description, vcpus, memory_mib, gpus.",
                    ),
                ],
                blocks: vec![],
            },
            Data::Providers => Block {
                description: "The providers meson places VMs and clusters with, and their regions.",
                attrs: vec![
                    id,
                    Attr::computed(
                        "providers",
                        Ty::list(obj_ty(&[
                            ("name", Ty::Str),
                            ("continents", Ty::list(Ty::Str)),
                            (
                                "regions",
                                Ty::list(obj_ty(&[
                                    ("name", Ty::Str),
                                    ("continent", Ty::Str),
                                    ("hosts", Ty::Num),
                                ])),
                            ),
                        ])),
                        "The providers: name, continents, regions (name, continent, hosts).",
                    ),
                ],
                blocks: vec![],
            },
            Data::KubernetesVersions => Block {
                description: "The Kubernetes versions meson's clusters run.",
                attrs: vec![
                    id,
                    Attr::computed("default", Ty::Str, "The version a cluster gets by default."),
                    Attr::computed(
                        "versions",
                        Ty::list(obj_ty(&[
                            ("version", Ty::Str),
                            ("minor", Ty::Str),
                            ("default", Ty::Bool),
                            ("deprecated", Ty::Bool),
                            ("end_of_life", Ty::Str),
                            ("upgradable_to", Ty::list(Ty::Str)),
                        ])),
                        "Every supported release, oldest first.",
                    ),
                ],
                blocks: vec![],
            },
            Data::Kubeconfig => Block {
                description: "An admin kubeconfig of a cluster (sensitive).",
                attrs: vec![
                    id,
                    Attr::required("cluster_id", Ty::Str, "The cluster's id."),
                    Attr::optional(
                        "expiry_seconds",
                        Ty::Num,
                        "How long the credential is valid (meson's default otherwise).",
                    ),
                    Attr::computed("kubeconfig", Ty::Str, "The kubeconfig, YAML.").sensitive(),
                ],
                blocks: vec![],
            },
            Data::Usage => Block {
                description: "What meson metered within `[from, to)` and what it cost, at the \
                              prices in force at the time (`GET /v1/usage`): a line per group \
                              and meter, and the totals per currency. Quantities and amounts \
                              are decimal strings (`tonumber()` reads them). Read at every \
                              plan, so the figures grow with open usage; to count resources \
                              the same apply creates, give it `depends_on` them.",
                attrs: vec![
                    id,
                    Attr::defaulted(
                        "from",
                        Ty::Str,
                        "The start, RFC 3339 (`2026-11-01T00:00:00Z`); meson's default: the \
                         start of this month (UTC), as it answered it.",
                    ),
                    Attr::defaulted(
                        "to",
                        Ty::Str,
                        "The end (excluded), RFC 3339, after `from` and at most 366 days \
                         later; meson's default: now, as it answered it.",
                    ),
                    Attr::optional(
                        "group_by",
                        Ty::Str,
                        "`resource` (the default), `day` (UTC), `tenant` or `label:<key>`.",
                    )
                    .default(V::Str("resource".into())),
                    Attr::optional(
                        "tenant",
                        Ty::Str,
                        "Operators: whose usage (default: every tenant's). A tenant's token \
                         reads its own only.",
                    ),
                    Attr::computed(
                        "lines",
                        Ty::list(obj_ty(&[
                            ("tenant", Ty::Str),
                            ("meter", Ty::Str),
                            ("unit", Ty::Str),
                            ("group", Ty::Str),
                            ("name", Ty::Str),
                            ("quantity", Ty::Str),
                            ("cost", Ty::Str),
                            ("currency", Ty::Str),
                        ])),
                        "One group's use of one meter, by group then meter: its tenant; \
                         `meter` (`vm`, `volume`, `cluster`, `image`, `backup`) and its \
                         `unit` (`hour`, `GB-hour`); `group`, the resource's id, the day \
                         (`2026-11-28`), the tenant or the label's value (null: resources \
                         without the label); `name`, the resource's (by resource only, else \
                         null); `quantity` and `cost`, six decimals; `currency`.",
                    ),
                    Attr::computed(
                        "totals",
                        Ty::list(obj_ty(&[("currency", Ty::Str), ("amount", Ty::Str)])),
                        "The cost of every line per currency (`EUR`), `amount` to the cent.",
                    ),
                ],
                blocks: vec![],
            },
        }
    }

    /// Refuses what meson would, before it is asked (unknown values read
    /// as null: checked when read).
    pub fn check(self, config: &Json) -> Res<()> {
        match self {
            Data::Usage => usage_query(config).map(|_| ()),
            _ => Ok(()),
        }
    }

    /// The data source's values from its configuration.
    pub async fn read(self, c: &Client, config: &Json) -> Res<Json> {
        let err = |e| Failure::from_client(e, none);
        Ok(match self {
            Data::Flavors => {
                let f = c.flavors().await.map_err(err)?;
                obj([
                    ("id", Json::from("flavors")),
                    (
                        "flavors",
                        Json::from(
                            f.iter()
                                .map(|f| {
                                    obj([
                                        ("name", Json::from(f.name.clone())),
                                        ("description", Json::from(f.description.clone())),
                                        ("vcpus", Json::from(f.vcpus)),
                                        ("memory_mib", Json::from(f.memory_mib)),
                                        ("gpus", Json::from(f.gpus)),
                                    ])
                                })
                                .collect::<Vec<_>>(),
                        ),
                    ),
                ])
            }
            Data::Providers => {
                let p = c.providers().await.map_err(err)?;
                obj([
                    ("id", Json::from("providers")),
                    (
                        "providers",
                        Json::from(
                            p.iter()
                                .map(|p| {
                                    obj([
                                        ("name", Json::from(p.name.clone())),
                                        ("continents", Json::from(p.continents.clone())),
                                        (
                                            "regions",
                                            Json::from(
                                                p.regions
                                                    .iter()
                                                    .map(|r| {
                                                        obj([
                                                            ("name", Json::from(r.name.clone())),
                                                            (
                                                                "continent",
                                                                Json::from(r.continent.clone()),
                                                            ),
                                                            ("hosts", Json::from(r.hosts)),
                                                        ])
                                                    })
                                                    .collect::<Vec<_>>(),
                                            ),
                                        ),
                                    ])
                                })
                                .collect::<Vec<_>>(),
                        ),
                    ),
                ])
            }
            Data::KubernetesVersions => {
                let v = c.kubernetes_versions().await.map_err(err)?;
                let default = v.iter().find(|v| v.default).map(|v| v.version.clone());
                obj([
                    ("id", Json::from("kubernetes_versions")),
                    ("default", Json::from(default)),
                    (
                        "versions",
                        Json::from(
                            v.iter()
                                .map(|v| {
                                    obj([
                                        ("version", Json::from(v.version.clone())),
                                        ("minor", Json::from(v.minor.clone())),
                                        ("default", Json::from(v.default)),
                                        ("deprecated", Json::from(v.deprecated)),
                                        ("end_of_life", Json::from(v.end_of_life.clone())),
                                        ("upgradable_to", Json::from(v.upgradable_to.clone())),
                                    ])
                                })
                                .collect::<Vec<_>>(),
                        ),
                    ),
                ])
            }
            Data::Kubeconfig => {
                let cluster = text(config, "cluster_id").unwrap_or_default();
                let id =
                    parse_id(&cluster).map_err(|f| f.at(vec![Step::Attr("cluster_id".into())]))?;
                let expiry = number(config, "expiry_seconds");
                let yaml = c.kubeconfig(id, expiry).await.map_err(err)?;
                obj([
                    ("id", Json::from(cluster)),
                    (
                        "cluster_id",
                        config.get("cluster_id").cloned().unwrap_or_default(),
                    ),
                    (
                        "expiry_seconds",
                        config.get("expiry_seconds").cloned().unwrap_or_default(),
                    ),
                    ("kubeconfig", Json::from(yaml)),
                ])
            }
            Data::Usage => {
                let u = c
                    .usage(&usage_query(config)?)
                    .await
                    .map_err(|e| Failure::from_client(e, usage_field))?;
                // What the configuration says stays as written; meson's
                // answer fills in the rest.
                let given = |k: &str, answered: Json| match config.get(k) {
                    Some(v) if !v.is_null() => v.clone(),
                    _ => answered,
                };
                let when = |t| serde_json::to_value(t).unwrap_or_default();
                let (from, to) = (when(u.from), when(u.to));
                let tenant = text(config, "tenant");
                let mut id = format!(
                    "{}/{}/{}",
                    from.as_str().unwrap_or_default(),
                    to.as_str().unwrap_or_default(),
                    u.group_by
                );
                if let Some(t) = &tenant {
                    id = format!("{id}/{t}");
                }
                obj([
                    ("id", Json::from(id)),
                    ("from", given("from", from)),
                    ("to", given("to", to)),
                    (
                        "group_by",
                        given("group_by", Json::from(u.group_by.clone())),
                    ),
                    ("tenant", Json::from(tenant)),
                    (
                        "lines",
                        Json::from(
                            u.lines
                                .into_iter()
                                .map(|l| {
                                    obj([
                                        ("tenant", Json::from(l.tenant)),
                                        ("meter", Json::from(l.meter.as_str())),
                                        ("unit", Json::from(l.unit)),
                                        ("group", Json::from(l.group)),
                                        ("name", Json::from(l.name)),
                                        ("quantity", Json::from(l.quantity)),
                                        ("cost", Json::from(l.cost)),
                                        ("currency", Json::from(l.currency)),
                                    ])
                                })
                                .collect::<Vec<_>>(),
                        ),
                    ),
                    (
                        "totals",
                        Json::from(
                            u.totals
                                .into_iter()
                                .map(|m| {
                                    obj([
                                        ("currency", Json::from(m.currency)),
                                        ("amount", Json::from(m.amount)),
                                    ])
                                })
                                .collect::<Vec<_>>(),
                        ),
                    ),
                ])
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn usage_times_are_rfc_3339_and_a_bad_one_names_its_argument() {
        let q = usage_query(&json!({
            "from": "2026-11-01T00:00:00Z",
            "to": "2026-11-02T01:00:00+01:00",
            "group_by": "day",
        }))
        .unwrap();
        assert_eq!(q.from.unwrap().to_rfc3339(), "2026-11-01T00:00:00+00:00");
        assert_eq!(q.to.unwrap().to_rfc3339(), "2026-11-02T00:00:00+00:00");
        assert_eq!(q.group_by.as_deref(), Some("day"));
        assert!(q.tenant.is_none());
        // Unset (or unknown until apply): meson's defaults.
        let q = usage_query(&json!({"from": null})).unwrap();
        assert!(q.from.is_none() && q.to.is_none() && q.group_by.is_none());
        for bad in ["yesterday", "2026-11-01", "2026-11-01T00:00:00"] {
            let f = Data::Usage.check(&json!({ "to": bad })).unwrap_err();
            assert_eq!(f.path, Some(vec![Step::Attr("to".into())]), "{bad}");
            assert!(f.summary.contains("RFC 3339"), "{}", f.summary);
        }
        assert_eq!(
            usage_field("group_by"),
            Some(vec![Step::Attr("group_by".into())])
        );
        assert_eq!(usage_field("specs"), None);
    }
}
