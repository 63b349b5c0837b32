//! `req.nodepool`, and a pool given on its own: names, node counts, size,
//! billing, Kubernetes labels and taints.

use super::node_size::parse_specs;
use super::request::enum_field;
use super::{
    Billing, DEFAULT_NODE_SPECS, MAX_NODES_PER_POOL, MAX_POOLS, MAX_TAINTS, NODE_CPU, NODE_RAM_MIB,
    PoolSpec, Taint, check_pool_name,
};
use crate::labels::{self, Labels};
use crate::parse::{Obj, Parser, Warning, join};
use serde_json::Value;

impl PoolSpec {
    /// Parses one pool given on its own (adding a pool to a cluster): the
    /// same rules as an item of `req.nodepool`, fields named from the root.
    pub fn parse(body: &Value) -> crate::Result<(PoolSpec, Vec<Warning>)> {
        let mut p = Parser::default();
        let pool = parse_pool(&mut p, String::new(), body);
        let Parser { errors, warnings } = p;
        match pool {
            Some(pool) if errors.is_empty() => Ok((pool, warnings)),
            _ => Err(errors
                .into_error()
                .unwrap_or_else(|| crate::Error::invalid("(body)", "invalid pool"))),
        }
    }
}

/// `req.nodepool`: at least one pool, unique names, at least one worker.
pub(super) fn parse_pools(p: &mut Parser, req: &mut Obj<'_>) -> Option<Vec<PoolSpec>> {
    let path = join(req.path(), "nodepool");
    let Some(items) = p.array(req, "nodepool", MAX_POOLS) else {
        if !p.errors.has(&path) {
            p.missing(path);
        }
        return None;
    };
    if items.is_empty() {
        p.errors.add(&path, "must have at least one pool");
        return None;
    }
    let mut pools = Vec::new();
    let mut ok = true;
    for (item_path, item) in items {
        match parse_pool(p, item_path.clone(), item) {
            Some(pool) => {
                if pools.iter().any(|q: &PoolSpec| q.name == pool.name) {
                    p.errors.add(
                        join(&item_path, "pool_name"),
                        format!("duplicate pool name '{}'", pool.name),
                    );
                    ok = false;
                }
                pools.push(pool);
            }
            None => ok = false,
        }
    }
    if ok
        && pools
            .iter()
            .all(|pool| pool.desired_nodes == 0 && !pool.autoscale)
    {
        p.errors.add(
            &path,
            "the cluster needs a worker node: give a pool desired_nodes of at least 1, or autoscale",
        );
        ok = false;
    }
    ok.then_some(pools)
}

/// Label prefixes Kubernetes keeps for itself on nodes.
fn reserved_node_label(key: &str) -> bool {
    key.split_once('/').is_some_and(|(prefix, _)| {
        ["kubernetes.io", "k8s.io"]
            .iter()
            .any(|r| prefix == *r || prefix.ends_with(&format!(".{r}")))
    })
}

/// One pool, at `path` (`req.nodepool[0]`, or the root for a pool on its own).
fn parse_pool(p: &mut Parser, path: String, v: &Value) -> Option<PoolSpec> {
    let mut o = p.item_object(path, v)?;
    let name = p
        .string(&mut o, "pool_name", true)
        .and_then(|(path, s)| check_pool_name(&mut p.errors, &path, s).then(|| s.to_owned()));
    let autoscale = p.bool(&mut o, "autoscale");
    let autoscale_bad = p.errors.has(&join(o.path(), "autoscale"));

    let nodes = 0..=MAX_NODES_PER_POOL;
    let min = p.int(&mut o, "min_nodes", nodes.clone(), false);
    let max = p.int(&mut o, "max_nodes", 1..=MAX_NODES_PER_POOL, false);
    let desired = p.int(&mut o, "desired_nodes", nodes, false);
    let bad = |p: &Parser, key| p.errors.has(&join(o.path(), key));
    let counts_bad = bad(p, "min_nodes") || bad(p, "max_nodes") || bad(p, "desired_nodes");
    let counts = if counts_bad {
        None
    } else {
        match (min, max, desired.or(min)) {
            (_, _, None) => {
                p.errors.add(
                    join(o.path(), "desired_nodes"),
                    "is required (or give min_nodes and max_nodes)",
                );
                None
            }
            (min, max, Some(desired)) => {
                let min = min.unwrap_or(desired);
                let max = max.unwrap_or(desired.max(min).max(1));
                if min > max {
                    p.errors.add(
                        join(o.path(), "min_nodes"),
                        format!("must not exceed max_nodes ({max}), got {min}"),
                    );
                    None
                } else if !(min..=max).contains(&desired) {
                    p.errors.add(
                        join(o.path(), "desired_nodes"),
                        format!(
                            "must be between min_nodes ({min}) and max_nodes ({max}), got {desired}"
                        ),
                    );
                    None
                } else {
                    Some((min as u32, max as u32, desired as u32))
                }
            }
        }
    };

    let specs = parse_specs(p, &mut o, NODE_CPU, NODE_RAM_MIB, DEFAULT_NODE_SPECS);
    let billing = enum_field(
        p,
        &mut o,
        "billing",
        Billing::Hourly,
        Billing::parse,
        "HOURLY or MONTHLY",
    );

    let labels = match o.get("labels") {
        (path, Some(v)) => labels::parse(&path, v, &mut p.errors).and_then(|l| {
            let reserved: Vec<&String> = l.keys().filter(|k| reserved_node_label(k)).collect();
            for k in &reserved {
                p.errors.add(
                    format!("{path}.{k}"),
                    "the kubernetes.io and k8s.io prefixes are reserved for Kubernetes",
                );
            }
            reserved.is_empty().then_some(l)
        }),
        (_, None) => Some(Labels::new()),
    };
    let taints = parse_taints(p, &mut o);
    p.done(o);

    let (min_nodes, max_nodes, desired_nodes) = counts?;
    if autoscale_bad {
        return None;
    }
    Some(PoolSpec {
        name: name?,
        autoscale: autoscale.unwrap_or(false),
        min_nodes,
        max_nodes,
        desired_nodes,
        specs: specs?,
        billing: billing?,
        labels: labels?,
        taints: taints?,
    })
}

/// `taints`: `["key=value:Effect", ...]` or `[{key, value?, effect}, ...]`.
fn parse_taints(p: &mut Parser, o: &mut Obj<'_>) -> Option<Vec<Taint>> {
    let Some(items) = p.array(o, "taints", MAX_TAINTS) else {
        return (!p.errors.has(&join(o.path(), "taints"))).then(Vec::new);
    };
    let mut out: Vec<Taint> = Vec::new();
    let mut ok = true;
    for (path, item) in items {
        let taint = match item {
            Value::String(s) => Taint::parse(s),
            Value::Object(_) => {
                let mut t = p.item_object(path.clone(), item)?;
                let key = p.string(&mut t, "key", true).map(|(_, s)| s.to_owned());
                let value = p.string(&mut t, "value", false).map(|(_, s)| s.to_owned());
                let effect = p.string(&mut t, "effect", true).map(|(_, s)| s.to_owned());
                let parts_bad = ["key", "value", "effect"]
                    .iter()
                    .any(|k| p.errors.has(&join(t.path(), k)));
                p.done(t);
                match (key, effect) {
                    (Some(k), Some(e)) if !parts_bad => {
                        Taint::new(&k, value.as_deref().unwrap_or(""), &e)
                    }
                    _ => {
                        ok = false;
                        continue;
                    }
                }
            }
            _ => Err("must be a string key=value:Effect or an object {key, value, effect}".into()),
        };
        match taint {
            Ok(t) if out.iter().any(|u| u.key == t.key && u.effect == t.effect) => {
                p.errors.add(
                    path,
                    format!("taint {}:{} is given twice", t.key, t.effect.as_str()),
                );
                ok = false;
            }
            Ok(t) => out.push(t),
            Err(m) => {
                p.errors.add(path, m);
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

/// What a PATCH asks for; absent fields keep their value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolPatch {
    pub desired: Option<u32>,
    pub min: Option<u32>,
    pub max: Option<u32>,
    pub autoscale: Option<bool>,
}

impl PoolPatch {
    /// `PATCH /v1/clusters/{id}/pools/{pool_id}`'s body: node counts and
    /// `autoscale`, each optional; unknown fields are warnings.
    pub fn parse(body: &Value) -> crate::Result<(PoolPatch, Vec<Warning>)> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let count = |n: i64| n as u32;
        let patch = PoolPatch {
            desired: p
                .int(&mut root, "desired_nodes", 0..=MAX_NODES_PER_POOL, false)
                .map(count),
            min: p
                .int(&mut root, "min_nodes", 0..=MAX_NODES_PER_POOL, false)
                .map(count),
            max: p
                .int(&mut root, "max_nodes", 1..=MAX_NODES_PER_POOL, false)
                .map(count),
            autoscale: p.bool(&mut root, "autoscale"),
        };
        p.done(root);
        let Parser { errors, warnings } = p;
        errors.finish((patch, warnings))
    }

    /// The pool's spec with the patch applied, `min <= desired <= max`
    /// checked and blamed on a field the request gave.
    pub fn apply(&self, spec: &PoolSpec) -> crate::Result<PoolSpec> {
        let mut out = spec.clone();
        out.desired_nodes = self.desired.unwrap_or(spec.desired_nodes);
        out.min_nodes = self.min.unwrap_or(spec.min_nodes);
        out.max_nodes = self.max.unwrap_or(spec.max_nodes);
        out.autoscale = self.autoscale.unwrap_or(spec.autoscale);
        let (min, max, desired) = (out.min_nodes, out.max_nodes, out.desired_nodes);
        if min > max {
            return Err(if self.min.is_some() {
                crate::Error::invalid(
                    "min_nodes",
                    format!("must not exceed max_nodes ({max}), got {min}"),
                )
            } else {
                crate::Error::invalid(
                    "max_nodes",
                    format!("must be at least min_nodes ({min}), got {max}"),
                )
            });
        }
        if !(min..=max).contains(&desired) {
            return Err(if self.desired.is_some() {
                crate::Error::invalid(
                    "desired_nodes",
                    format!(
                        "must be between min_nodes ({min}) and max_nodes ({max}), got {desired}"
                    ),
                )
            } else if desired < min {
                crate::Error::invalid(
                    "min_nodes",
                    format!("must not exceed desired_nodes ({desired}), got {min}"),
                )
            } else {
                crate::Error::invalid(
                    "max_nodes",
                    format!("must be at least desired_nodes ({desired}), got {max}"),
                )
            });
        }
        Ok(out)
    }
}

/// `POST /v1/clusters/{id}/pools/{pool_id}/actions/delete-nodes`'s body,
/// `{"nodes": [node id, ...]}`: the nodes, or the first that is not an id.
pub fn delete_nodes(body: &Value) -> crate::Result<Vec<crate::NodeId>> {
    let required = || crate::Error::invalid("nodes", "is required: an array of node ids");
    let mut p = Parser::default();
    let Some(mut root) = p.root(body) else {
        return Err(required());
    };
    let Some(items) = root.get("nodes").1.and_then(Value::as_array) else {
        return Err(required());
    };
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_str()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| crate::Error::invalid(format!("nodes[{i}]"), "must be a node id"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{PoolPatch, delete_nodes};
    use crate::kaas::fixtures::*;
    use crate::kaas::*;
    use serde_json::{Value, json};

    #[test]
    fn a_pool_parses_on_its_own() {
        let (pool, w) = PoolSpec::parse(&json!({"pool_name": "gpu", "desired_nodes": 1,
            "specs": {"gpu": 1}, "x": 1}))
        .unwrap();
        assert_eq!(pool.specs.gpu, 1);
        assert_eq!(w[0].field, "x");
        assert_eq!(
            fields(
                PoolSpec::parse(&json!({"pool_name": "Gpu", "min_nodes": 2, "max_nodes": 1}))
                    .unwrap_err()
            ),
            ["min_nodes", "pool_name"]
        );
    }

    #[test]
    fn each_bad_pool_field_is_named() {
        assert_refusals(vec![
            (
                with(|v| v["req"]["nodepool"][0]["pool_name"] = json!("pool.1")),
                &["req.nodepool[0].pool_name"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["pool_name"] = json!("p".repeat(25))),
                &["req.nodepool[0].pool_name"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["min_nodes"] = json!(4)),
                &["req.nodepool[0].min_nodes"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["min_nodes"] = json!(-1)),
                &["req.nodepool[0].min_nodes"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["desired_nodes"] = json!(2)),
                &["req.nodepool[0].desired_nodes"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["max_nodes"] = json!(101)),
                &["req.nodepool[0].max_nodes"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["max_nodes"] = json!("3")),
                &["req.nodepool[0].max_nodes"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["autoscale"] = json!("sometimes")),
                &["req.nodepool[0].autoscale"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["specs"]["cpu"] = json!(0)),
                &["req.nodepool[0].specs.cpu"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["specs"]["ram"] = json!(512)),
                &["req.nodepool[0].specs.ram"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["specs"]["storage"] = json!(10)),
                &["req.nodepool[0].specs.storage"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["specs"]["gpu"] = json!(-1)),
                &["req.nodepool[0].specs.gpu"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["specs"] = json!("big")),
                &["req.nodepool[0].specs"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["billing"] = json!("WEEKLY")),
                &["req.nodepool[0].billing"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["labels"] = json!({"kubernetes.io/role": "x"})),
                &["req.nodepool[0].labels.kubernetes.io/role"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["taints"] = json!(["x=y:Sometimes"])),
                &["req.nodepool[0].taints[0]"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["taints"] = json!(["novalue"])),
                &["req.nodepool[0].taints[0]"],
            ),
            (
                with(|v| {
                    v["req"]["nodepool"][0]["taints"] = json!(["a:NoSchedule", "a=b:NoSchedule"])
                }),
                &["req.nodepool[0].taints[1]"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["taints"] = json!([{"key": "a"}])),
                &["req.nodepool[0].taints[0].effect"],
            ),
            (
                with(|v| v["req"]["nodepool"] = json!([])),
                &["req.nodepool"],
            ),
            (
                with(|v| v["req"]["nodepool"] = json!({})),
                &["req.nodepool"],
            ),
            (
                with(|v| {
                    v["req"].as_object_mut().unwrap().remove("nodepool");
                }),
                &["req.nodepool"],
            ),
            (
                with(|v| {
                    let p = v["req"]["nodepool"][0].clone();
                    v["req"]["nodepool"].as_array_mut().unwrap().push(p);
                }),
                &["req.nodepool[1].pool_name"],
            ),
            (
                with(|v| v["req"]["nodepool"][0]["desired_nodes"] = json!(0)),
                &["req.nodepool[0].desired_nodes"],
            ),
            (
                with(|v| {
                    let p = &mut v["req"]["nodepool"][0];
                    p["desired_nodes"] = json!(0);
                    p["min_nodes"] = json!(0);
                }),
                &["req.nodepool"],
            ),
        ]);
    }

    fn spec(min: u32, desired: u32, max: u32) -> PoolSpec {
        let (s, _) = PoolSpec::parse(&json!({
            "pool_name": "p", "min_nodes": min, "desired_nodes": desired, "max_nodes": max
        }))
        .unwrap();
        s
    }

    fn field(e: crate::Error) -> String {
        match e {
            crate::Error::InvalidInput { fields } => fields[0].name.clone(),
            other => panic!("expected invalid_input, got {other:?}"),
        }
    }

    fn patch(body: Value) -> PoolPatch {
        PoolPatch::parse(&body).unwrap().0
    }

    #[test]
    fn a_patch_reads_counts_and_lenient_booleans_and_warns_of_the_rest() {
        let (p, w) = PoolPatch::parse(&json!({
            "desired_nodes": 3, "autoscale": "True", "colour": "blue"
        }))
        .unwrap();
        assert_eq!(
            p,
            PoolPatch {
                desired: Some(3),
                autoscale: Some(true),
                ..PoolPatch::default()
            }
        );
        assert_eq!(w[0].field, "colour");
        let e = PoolPatch::parse(&json!({"desired_nodes": 101, "max_nodes": 0, "min_nodes": "x"}))
            .unwrap_err();
        let crate::Error::InvalidInput { fields } = e else {
            panic!("invalid_input")
        };
        let mut names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        names.sort();
        assert_eq!(names, ["desired_nodes", "max_nodes", "min_nodes"]);
        assert!(PoolPatch::parse(&json!([])).is_err());
    }

    #[test]
    fn bounds_are_checked_on_the_result_and_blamed_on_a_given_field() {
        let s = spec(1, 2, 3);
        let out = patch(json!({"desired_nodes": 3})).apply(&s).unwrap();
        assert_eq!((out.min_nodes, out.desired_nodes, out.max_nodes), (1, 3, 3));
        let out = patch(json!({"max_nodes": 5, "autoscale": true}))
            .apply(&s)
            .unwrap();
        assert_eq!((out.max_nodes, out.autoscale), (5, true));
        assert_eq!(
            field(patch(json!({"desired_nodes": 4})).apply(&s).unwrap_err()),
            "desired_nodes"
        );
        assert_eq!(
            field(patch(json!({"min_nodes": 4})).apply(&s).unwrap_err()),
            "min_nodes"
        );
        assert_eq!(
            field(patch(json!({"min_nodes": 3})).apply(&s).unwrap_err()),
            "min_nodes",
            "min above the desired count"
        );
        assert_eq!(
            field(patch(json!({"max_nodes": 1})).apply(&s).unwrap_err()),
            "max_nodes",
            "max below the desired count"
        );
        // Moving every bound at once is fine when the result holds.
        let out = patch(json!({"min_nodes": 5, "desired_nodes": 6, "max_nodes": 8}))
            .apply(&s)
            .unwrap();
        assert_eq!((out.min_nodes, out.desired_nodes, out.max_nodes), (5, 6, 8));
    }

    #[test]
    fn nodes_to_delete_are_ids_the_first_bad_one_named() {
        let id = crate::NodeId::new();
        assert_eq!(
            delete_nodes(&json!({"nodes": [id.to_string()]})).unwrap(),
            [id]
        );
        for (body, name) in [
            (json!({}), "nodes"),
            (json!([]), "nodes"),
            (json!({"nodes": "x"}), "nodes"),
            (json!({"nodes": [id.to_string(), 1, "x"]}), "nodes[1]"),
        ] {
            assert_eq!(field(delete_nodes(&body).unwrap_err()), name, "{body}");
        }
    }
}
