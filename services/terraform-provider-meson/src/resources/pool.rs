//! `meson_node_pool`: a cluster's further worker pool (the first is the
//! cluster's `default_pool`: meson makes a cluster with at least one).

use super::{Json, changed, flag, labels, number, number_u32, obj, parse_id, text, texts, wait};
use crate::diag::{Failure, Res, map_field};
use crate::schema::{Attr, Block, Step, timeouts_block};
use crate::value::Ty;
use meson_client::Client;
use meson_client::types::cluster::Pool;
use meson_client::types::kaas::{NodePoolRequest, NodeSpecsRequest, TaintRequest};
use meson_client::types::pool::NodePoolUpdateRequest;
use std::time::Duration;
use uuid::Uuid;

/// The attributes of a pool, shared by `meson_node_pool` and the cluster's
/// `default_pool` block.
pub fn pool_attrs() -> Vec<Attr> {
    let fixed = |a: Attr| a.force_new();
    vec![
        Attr::computed("id", Ty::Str, "The pool's id."),
        fixed(Attr::required("name", Ty::Str, "Unique in the cluster.")),
        Attr::defaulted("desired_nodes", Ty::Num, "How many nodes (in place: the nodes follow).")
            .tracked(),
        Attr::defaulted("min_nodes", Ty::Num, "The autoscaler's lower bound (in place; default `desired_nodes`).")
            .tracked(),
        Attr::defaulted("max_nodes", Ty::Num, "The autoscaler's upper bound (in place; default `desired_nodes`).")
            .tracked(),
        Attr::defaulted("autoscale", Ty::Bool, "Let the cluster-autoscaler move `desired_nodes` between the bounds (in place; default false).")
            .tracked(),
        fixed(Attr::defaulted("cpu", Ty::Num, "vCPUs per node (default 2).").tracked()),
        fixed(Attr::defaulted("ram", Ty::Num, "MiB per node (default 2048).").tracked()),
        fixed(Attr::defaulted("storage", Ty::Num, "GB of disk per node (default 40).").tracked()),
        fixed(Attr::defaulted("gpu", Ty::Num, "GPUs per node (default 0).").tracked()),
        fixed(Attr::defaulted("billing", Ty::Str, "`HOURLY` (the default) or `MONTHLY`.")),
        fixed(Attr::optional("labels", Ty::map(Ty::Str), "Kubernetes labels of the nodes.").tracked()),
        fixed(Attr::optional("taints", Ty::list(Ty::Str), "Node taints, `key=value:Effect`.")),
        Attr::computed("current_nodes", Ty::Num, "Nodes that exist now.").volatile(),
    ]
}

pub fn block() -> Block {
    let mut attrs = vec![
        Attr::required("cluster_id", Ty::Str, "The cluster's id.")
            .force_new()
            .tracked(),
    ];
    attrs.extend(pool_attrs());
    Block {
        description: "A worker pool of a cluster. Its size, bounds and autoscaling change in \
                      place (the nodes follow); its node specs, labels and taints replace it. \
                      Import as `CLUSTER_ID/POOL_ID`.",
        attrs,
        blocks: vec![timeouts_block()],
    }
}

pub fn field(f: &str) -> Option<Vec<Step>> {
    map_field(POOL_FIELDS, f)
}

/// meson's pool fields and the attributes they are.
pub const POOL_FIELDS: &[(&str, &[&str])] = &[
    ("pool_name", &["name"]),
    ("desired_nodes", &["desired_nodes"]),
    ("min_nodes", &["min_nodes"]),
    ("max_nodes", &["max_nodes"]),
    ("autoscale", &["autoscale"]),
    ("specs.cpu", &["cpu"]),
    ("specs.ram", &["ram"]),
    ("specs.storage", &["storage"]),
    ("specs.gpu", &["gpu"]),
    ("billing", &["billing"]),
    ("labels", &["labels"]),
    ("taints", &["taints"]),
];

fn err(e: meson_client::Error) -> Failure {
    Failure::from_client(e, field)
}

/// A pool as the state holds it.
pub fn pool_json(p: &Pool) -> Json {
    obj([
        ("id", Json::from(p.id.to_string())),
        ("name", Json::from(p.name.clone())),
        ("desired_nodes", Json::from(p.desired_nodes)),
        ("min_nodes", Json::from(p.min_nodes)),
        ("max_nodes", Json::from(p.max_nodes)),
        ("autoscale", Json::from(p.autoscale)),
        ("cpu", Json::from(p.specs.cpu)),
        ("ram", Json::from(p.specs.ram)),
        ("storage", Json::from(p.specs.storage)),
        ("gpu", Json::from(p.specs.gpu)),
        ("billing", Json::from(p.billing.clone())),
        ("labels", super::labels_json(&p.labels)),
        (
            "taints",
            if p.taints.is_empty() {
                Json::Null
            } else {
                Json::from(p.taints.clone())
            },
        ),
        ("current_nodes", Json::from(p.current_nodes)),
    ])
}

/// The request for a pool from its planned values.
pub fn pool_request(p: &Json) -> Res<NodePoolRequest> {
    let taints = texts(p, "taints")
        .map(|l| {
            l.into_iter()
                .map(|t| {
                    serde_json::from_value::<TaintRequest>(Json::from(t.clone())).map_err(|e| {
                        Failure::msg(format!("bad taint {t:?}: {e}"), "write key=value:Effect")
                    })
                })
                .collect::<Res<Vec<_>>>()
        })
        .transpose()?;
    let specs = NodeSpecsRequest {
        cpu: number_u32(p, "cpu"),
        ram: number(p, "ram"),
        storage: number_u32(p, "storage"),
        gpu: number_u32(p, "gpu"),
    };
    Ok(NodePoolRequest {
        pool_name: text(p, "name").unwrap_or_default(),
        autoscale: flag(p, "autoscale"),
        min_nodes: number_u32(p, "min_nodes"),
        max_nodes: number_u32(p, "max_nodes"),
        desired_nodes: number_u32(p, "desired_nodes"),
        specs: (specs != NodeSpecsRequest::default()).then_some(specs),
        billing: text(p, "billing"),
        labels: labels(p),
        taints,
    })
}

/// Resizes a pool as the plan says; waits for its nodes.
pub async fn resize(
    c: &Client,
    cluster: Uuid,
    pool: Uuid,
    prior: &Json,
    p: &Json,
    t: Duration,
    fields: crate::diag::FieldMap,
) -> Res<()> {
    let ch = |k| changed(prior, p, k);
    if !(ch("desired_nodes") || ch("min_nodes") || ch("max_nodes") || ch("autoscale")) {
        return Ok(());
    }
    let req = NodePoolUpdateRequest {
        desired_nodes: ch("desired_nodes")
            .then(|| number_u32(p, "desired_nodes"))
            .flatten(),
        min_nodes: ch("min_nodes")
            .then(|| number_u32(p, "min_nodes"))
            .flatten(),
        max_nodes: ch("max_nodes")
            .then(|| number_u32(p, "max_nodes"))
            .flatten(),
        autoscale: ch("autoscale").then(|| flag(p, "autoscale")).flatten(),
    };
    let r = c
        .pool_update(cluster, pool, &req)
        .await
        .map_err(|e| Failure::from_client(e, fields))?;
    if let Some(a) = r.action {
        wait(c, &[a.id], t, fields).await?;
    }
    Ok(())
}

fn ids(state: &Json) -> Res<(Uuid, Uuid)> {
    Ok((
        parse_id(&text(state, "cluster_id").unwrap_or_default())?,
        parse_id(&text(state, "id").unwrap_or_default())?,
    ))
}

fn with_cluster(mut j: Json, cluster: Uuid) -> Json {
    j["cluster_id"] = Json::from(cluster.to_string());
    j
}

pub async fn create(c: &Client, p: &Json, t: Duration, notes: &mut super::Notes) -> Res<Json> {
    let cluster = parse_id(&text(p, "cluster_id").unwrap_or_default())
        .map_err(|f| f.at(vec![Step::Attr("cluster_id".into())]))?;
    let r = c
        .pool_create(cluster, &pool_request(p)?)
        .await
        .map_err(err)?;
    notes.extend(r.warnings);
    let id = r.pool.id;
    wait(c, &[r.action.id], t, field).await.map_err(|f| {
        let mut f = f.created(id);
        f.created = f.created.map(|j| Box::new(with_cluster(*j, cluster)));
        f
    })?;
    let pool = c.pool_get(cluster, id).await.map_err(err)?;
    Ok(with_cluster(pool_json(&pool), cluster))
}

pub async fn read(c: &Client, state: &Json) -> Res<Option<Json>> {
    let (cluster, pool) = ids(state)?;
    match c.pool_get(cluster, pool).await {
        Ok(p) => Ok(Some(with_cluster(pool_json(&p), cluster))),
        Err(e) if e.code() == Some("not_found") => Ok(None),
        Err(e) => Err(err(e)),
    }
}

pub async fn update(c: &Client, prior: &Json, p: &Json, t: Duration) -> Res<Json> {
    let (cluster, pool) = ids(prior)?;
    resize(c, cluster, pool, prior, p, t, field).await?;
    let now = c.pool_get(cluster, pool).await.map_err(err)?;
    Ok(with_cluster(pool_json(&now), cluster))
}

pub async fn delete(c: &Client, prior: &Json, t: Duration) -> Res<()> {
    let (cluster, pool) = ids(prior)?;
    let a = c.pool_delete(cluster, pool).await.map_err(err)?;
    wait(c, &[a.id], t, field).await
}
