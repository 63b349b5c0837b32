//! `meson_cluster`: a Kubernetes cluster, its control plane, its nodes'
//! subnet and its first worker pool (`default_pool`: meson makes a cluster
//! with at least one pool; more are `meson_node_pool`s).

use super::{Json, changed, id, labels, labels_json, number, number_u32, obj, text, wait};
use crate::diag::{Failure, Res, map_field};
use crate::resources::pool::{pool_attrs, pool_json, pool_request, resize};
use crate::schema::{Attr, Block, Nested, Nesting, Step, timeouts_block};
use crate::value::Ty;
use meson_client::Client;
use meson_client::types::cluster::{Cluster, ClusterUpdateRequest};
use meson_client::types::kaas::{
    ControlPlaneRequest, KaasCreateRequest, KaasRequestSpec, NodeSpecsRequest, NodesSubnetRequest,
};
use meson_client::types::upgrade::ClusterUpgradeRequest;
use std::time::Duration;

pub fn block() -> Block {
    let fixed = |a: Attr| a.force_new();
    let single = |name, description, attrs| Nested {
        name,
        nesting: Nesting::Single,
        min: 1,
        max: 1,
        block: Block {
            description,
            attrs,
            blocks: vec![],
        },
    };
    Block {
        description: "A Kubernetes cluster. Its labels and update policy change in place, its \
                      Kubernetes version by an upgrade, its default pool's size and bounds by \
                      resizing; the rest replaces it.",
        attrs: vec![
            Attr::computed("id", Ty::Str, "The cluster's id."),
            fixed(Attr::required("name", Ty::Str, "The cluster's name.").tracked()),
            Attr::defaulted(
                "kubernetes_version",
                Ty::Str,
                "`1.35.2`, or `1.35` for that minor's latest patch (a change upgrades the cluster in place; default: the catalogue's default).",
            ),
            Attr::computed(
                "current_kubernetes_version",
                Ty::Str,
                "The version the cluster runs.",
            )
            .tracked()
            .volatile(),
            Attr::defaulted(
                "update_policy",
                Ty::Str,
                "`NEVER_UPDATE` (the default), `PATCH_UPDATE` or `ALWAYS_UPDATE` (in place).",
            ),
            fixed(
                Attr::defaulted(
                    "cni",
                    Ty::Str,
                    "`calico` (the default), `cilium` or `flannel`.",
                )
                .tracked(),
            ),
            fixed(
                Attr::defaulted(
                    "pod_cidr",
                    Ty::Str,
                    "The pod network (default `10.244.0.0/16`).",
                )
                .tracked(),
            ),
            fixed(
                Attr::defaulted(
                    "service_cidr",
                    Ty::Str,
                    "The service network (default `10.96.0.0/12`).",
                )
                .tracked(),
            ),
            fixed(Attr::defaulted(
                "provider_name",
                Ty::Str,
                "Place the cluster with this provider; default: the cheapest region that fits.",
            )),
            fixed(Attr::optional(
                "continent",
                Ty::Str,
                "Place the cluster on this continent.",
            )),
            fixed(Attr::defaulted(
                "region",
                Ty::Str,
                "Place the cluster in this region.",
            )),
            fixed(
                Attr::defaulted(
                    "control_plane_nodes",
                    Ty::Num,
                    "Control-plane nodes: 1 (the default) or 3.",
                )
                .tracked(),
            ),
            fixed(
                Attr::defaulted(
                    "control_plane_cpu",
                    Ty::Num,
                    "vCPUs per control-plane node (default 4).",
                )
                .tracked(),
            ),
            fixed(
                Attr::defaulted(
                    "control_plane_ram",
                    Ty::Num,
                    "MiB per control-plane node (default 4096).",
                )
                .tracked(),
            ),
            fixed(
                Attr::defaulted(
                    "control_plane_storage",
                    Ty::Num,
                    "GB per control-plane node (default 40).",
                )
                .tracked(),
            ),
            Attr::optional(
                "labels",
                Ty::map(Ty::Str),
                "The cluster's labels (in place).",
            )
            .tracked(),
            Attr::computed(
                "endpoint",
                Ty::Str,
                "The API server, `https://<address>:6443`.",
            ),
            Attr::computed("status", Ty::Str, "meson's status of the cluster.").volatile(),
        ],
        blocks: vec![
            single(
                "subnet",
                "The nodes' private network.",
                vec![
                    fixed(Attr::required("cidr", Ty::Str, "An IPv4 CIDR, /8 to /29.").tracked()),
                    fixed(
                        Attr::defaulted("dhcp", Ty::Bool, "Addresses by DHCP (default true).")
                            .tracked(),
                    ),
                    fixed(Attr::defaulted(
                        "start_address",
                        Ty::Str,
                        "The first node address.",
                    )),
                    fixed(Attr::defaulted(
                        "last_address",
                        Ty::Str,
                        "The last node address.",
                    )),
                    fixed(Attr::optional(
                        "gateway",
                        Ty::Str,
                        "The gateway (default: the first usable address).",
                    )),
                ],
            ),
            single(
                "default_pool",
                "The cluster's first worker pool.",
                pool_attrs(),
            ),
            timeouts_block(),
        ],
    }
}

pub fn field(f: &str) -> Option<Vec<Step>> {
    // `req.nodepool[0].<field>`: the default pool's.
    if let Some(rest) = f.strip_prefix("req.nodepool[0].") {
        let mut p = vec![Step::Attr("default_pool".into())];
        p.extend(super::pool::field(rest)?);
        return Some(p);
    }
    map_field(
        &[
            ("req.name", &["name"]),
            ("req.kubernetes_version", &["kubernetes_version"]),
            ("kubernetes_version", &["kubernetes_version"]),
            ("req.update_policy", &["update_policy"]),
            ("update_policy", &["update_policy"]),
            ("req.cni", &["cni"]),
            ("req.pod_cidr", &["pod_cidr"]),
            ("req.service_cidr", &["service_cidr"]),
            ("req.control_plane.nodes", &["control_plane_nodes"]),
            ("req.control_plane.specs.cpu", &["control_plane_cpu"]),
            ("req.control_plane.specs.ram", &["control_plane_ram"]),
            (
                "req.control_plane.specs.storage",
                &["control_plane_storage"],
            ),
            ("req.nodes_subnet.subnet_netmask", &["subnet", "cidr"]),
            ("req.nodes_subnet", &["subnet"]),
            ("provider", &["provider_name"]),
            ("continent", &["continent"]),
            ("region", &["region"]),
            ("labels", &["labels"]),
            ("req.labels", &["labels"]),
        ],
        f,
    )
}

fn err(e: meson_client::Error) -> Failure {
    Failure::from_client(e, field)
}

/// The pool the `default_pool` block is: by the state's id, else its name,
/// else the first.
fn default_pool<'a>(
    c: &'a Cluster,
    state: &Json,
) -> Option<&'a meson_client::types::cluster::Pool> {
    let dp = state.get("default_pool");
    let id = dp.and_then(|p| text(p, "id"));
    let name = dp.and_then(|p| text(p, "name"));
    c.pools
        .iter()
        .find(|p| Some(p.id.to_string()) == id)
        .or_else(|| c.pools.iter().find(|p| Some(&p.name) == name.as_ref()))
        .or_else(|| c.pools.first())
}

fn to_json(c: &Cluster, state: &Json) -> Json {
    obj([
        ("id", Json::from(c.id.to_string())),
        ("name", Json::from(c.name.clone())),
        (
            "kubernetes_version",
            Json::from(c.kubernetes_version.clone()),
        ),
        (
            "current_kubernetes_version",
            Json::from(c.kubernetes_version.clone()),
        ),
        ("update_policy", Json::from(c.update_policy.clone())),
        ("cni", Json::from(c.cni.clone())),
        ("pod_cidr", Json::from(c.pod_cidr.clone())),
        ("service_cidr", Json::from(c.service_cidr.clone())),
        ("provider_name", Json::from(c.provider.clone())),
        ("region", Json::from(c.region.clone())),
        ("control_plane_nodes", Json::from(c.control_plane.nodes)),
        ("control_plane_cpu", Json::from(c.control_plane.specs.cpu)),
        ("control_plane_ram", Json::from(c.control_plane.specs.ram)),
        (
            "control_plane_storage",
            Json::from(c.control_plane.specs.storage),
        ),
        ("labels", labels_json(&c.labels)),
        ("endpoint", Json::from(c.control_plane.endpoint.clone())),
        ("status", Json::from(c.status.clone())),
        (
            "subnet",
            obj([
                ("cidr", Json::from(c.network.cidr.clone())),
                ("dhcp", Json::from(c.network.dhcp)),
                ("start_address", Json::from(c.network.range.start.clone())),
                ("last_address", Json::from(c.network.range.last.clone())),
            ]),
        ),
        (
            "default_pool",
            default_pool(c, state).map_or(Json::Null, pool_json),
        ),
    ])
}

fn request(p: &Json) -> Res<KaasCreateRequest> {
    let subnet = p.get("subnet").cloned().unwrap_or_default();
    let pool = p.get("default_pool").cloned().unwrap_or_default();
    let cp_specs = NodeSpecsRequest {
        cpu: number_u32(p, "control_plane_cpu"),
        ram: number(p, "control_plane_ram"),
        storage: number_u32(p, "control_plane_storage"),
        gpu: None,
    };
    let cp_nodes = number_u32(p, "control_plane_nodes");
    let control_plane =
        (cp_nodes.is_some() || cp_specs != NodeSpecsRequest::default()).then(|| {
            ControlPlaneRequest {
                nodes: cp_nodes,
                specs: (cp_specs != NodeSpecsRequest::default()).then_some(cp_specs),
            }
        });
    Ok(KaasCreateRequest {
        req: KaasRequestSpec {
            name: text(p, "name").unwrap_or_default(),
            metadata: None,
            nodepool: vec![
                pool_request(&pool).map_err(|f| f.at(vec![Step::Attr("default_pool".into())]))?,
            ],
            nodes_subnet: NodesSubnetRequest {
                dhcp: super::flag(&subnet, "dhcp"),
                subnet_netmask: text(&subnet, "cidr").unwrap_or_default(),
                start_address: text(&subnet, "start_address"),
                last_address: text(&subnet, "last_address"),
                gateway: text(&subnet, "gateway"),
            },
            update_policy: text(p, "update_policy"),
            kubernetes_version: text(p, "kubernetes_version"),
            control_plane,
            pod_cidr: text(p, "pod_cidr"),
            service_cidr: text(p, "service_cidr"),
            cni: text(p, "cni"),
            labels: None,
        },
        provider: text(p, "provider_name"),
        continent: text(p, "continent"),
        region: text(p, "region"),
        labels: labels(p),
    })
}

pub async fn create(c: &Client, p: &Json, t: Duration, notes: &mut super::Notes) -> Res<Json> {
    let r = c.cluster_create(&request(p)?).await.map_err(err)?;
    notes.extend(r.warnings);
    let id = r.cluster.id;
    wait(c, &[r.action.id], t, field)
        .await
        .map_err(|f| f.created(id))?;
    let now = c.cluster_get(id).await.map_err(err)?;
    Ok(to_json(&now, p))
}

pub async fn read(c: &Client, state: &Json) -> Res<Option<Json>> {
    match c.cluster_get(id(state)?).await {
        Ok(cl) if cl.status == "deleting" => Ok(None),
        Ok(cl) => Ok(Some(to_json(&cl, state))),
        Err(e) if e.code() == Some("not_found") => Ok(None),
        Err(e) => Err(err(e)),
    }
}

pub async fn update(
    c: &Client,
    prior: &Json,
    p: &Json,
    t: Duration,
    notes: &mut super::Notes,
) -> Res<Json> {
    let id = id(prior)?;
    if changed(prior, p, "labels") || changed(prior, p, "update_policy") {
        let req = ClusterUpdateRequest {
            labels: changed(prior, p, "labels").then(|| labels(p).unwrap_or_default()),
            update_policy: changed(prior, p, "update_policy")
                .then(|| text(p, "update_policy"))
                .flatten(),
        };
        c.cluster_update(id, &req).await.map_err(err)?;
    }
    if changed(prior, p, "kubernetes_version")
        && let Some(v) = text(p, "kubernetes_version")
    {
        let req = ClusterUpgradeRequest {
            kubernetes_version: v,
            ..ClusterUpgradeRequest::default()
        };
        let r = c.cluster_upgrade(id, &req).await.map_err(err)?;
        notes.extend(r.warnings);
        wait(c, &[r.action.id], t, field).await?;
    }
    let (pp, np) = (
        prior.get("default_pool").cloned().unwrap_or_default(),
        p.get("default_pool").cloned().unwrap_or_default(),
    );
    if let Some(pool) = text(&pp, "id") {
        let pool = super::parse_id(&pool)?;
        resize(c, id, pool, &pp, &np, t, |f| {
            let mut path = vec![Step::Attr("default_pool".into())];
            path.extend(super::pool::field(f)?);
            Some(path)
        })
        .await?;
    }
    let now = c.cluster_get(id).await.map_err(err)?;
    Ok(to_json(&now, p))
}

pub async fn delete(c: &Client, prior: &Json, t: Duration) -> Res<()> {
    let a = c.cluster_delete(id(prior)?).await.map_err(err)?;
    wait(c, &[a.id], t, field).await
}
