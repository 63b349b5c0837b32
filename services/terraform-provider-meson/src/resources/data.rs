//! The data sources: meson's catalogue, and a cluster's kubeconfig.

use super::{Json, number, obj, parse_id, text};
use crate::diag::{Failure, Res};
use crate::schema::{Attr, Block, Step};
use crate::value::Ty;
use meson_client::Client;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Data {
    Flavors,
    Providers,
    KubernetesVersions,
    Kubeconfig,
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

impl Data {
    pub const ALL: [Data; 4] = [
        Data::Flavors,
        Data::Providers,
        Data::KubernetesVersions,
        Data::Kubeconfig,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Data::Flavors => "meson_flavors",
            Data::Providers => "meson_providers",
            Data::KubernetesVersions => "meson_kubernetes_versions",
            Data::Kubeconfig => "meson_cluster_kubeconfig",
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
        })
    }
}
