//! Node pools: answers, and requests as the REST ones.

use super::cluster::{node_specs, node_specs_request};
use super::json::Obj;
use super::meta::map;
use meson_proto::meson::v1 as pb;
use meson_types as wire;
use serde_json::Value;

pub fn pool(p: wire::cluster::Pool) -> pb::Pool {
    pb::Pool {
        id: p.id.to_string(),
        name: p.name,
        autoscale: p.autoscale,
        min_nodes: p.min_nodes,
        max_nodes: p.max_nodes,
        desired_nodes: p.desired_nodes,
        current_nodes: p.current_nodes,
        specs: Some(node_specs(p.specs)),
        billing: p.billing,
        labels: map(&p.labels),
        taints: p.taints,
    }
}

/// A `NodePoolRequest` as the REST pool: an item of `req.nodepool`, or the
/// body of `POST /v1/clusters/{id}/pools`.
pub fn pool_create(p: &pb::NodePoolRequest) -> Value {
    Obj::new()
        .str("pool_name", &p.pool_name)
        .flag("autoscale", p.autoscale)
        .opt("min_nodes", p.min_nodes)
        .opt("max_nodes", p.max_nodes)
        .opt("desired_nodes", p.desired_nodes)
        .obj("specs", p.specs.as_ref().map(node_specs_request))
        .str("billing", &p.billing)
        .labels("labels", &p.labels)
        .list("taints", &p.taints)
        .value()
}

/// `UpdatePoolRequest` as the REST PATCH: only the fields set.
pub fn pool_update(r: &pb::UpdatePoolRequest) -> Value {
    Obj::new()
        .opt("desired_nodes", r.desired_nodes)
        .opt("min_nodes", r.min_nodes)
        .opt("max_nodes", r.max_nodes)
        .opt("autoscale", r.autoscale)
        .value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_typed_pool_patch_is_the_rest_one() {
        let p = pb::UpdatePoolRequest {
            desired_nodes: Some(0),
            autoscale: Some(false),
            ..Default::default()
        };
        assert_eq!(
            pool_update(&p),
            json!({"desired_nodes": 0, "autoscale": false})
        );
    }
}
