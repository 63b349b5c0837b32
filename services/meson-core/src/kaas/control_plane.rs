//! `req.control_plane: {nodes, specs}`: how many control-plane nodes, and
//! their size.

use super::node_size::parse_specs;
use super::{
    CONTROL_PLANE_CPU, CONTROL_PLANE_RAM_MIB, ControlPlaneSpec, DEFAULT_CONTROL_PLANE_SPECS,
};
use crate::parse::{Obj, Parser, join};

/// `control_plane`: 1 or 3 nodes (1 when left out), of at least kubeadm's
/// minimum size.
pub(super) fn parse_control_plane(p: &mut Parser, req: &mut Obj<'_>) -> Option<ControlPlaneSpec> {
    match p.object(req, "control_plane", false) {
        Some(mut cp) => {
            let nodes = match p.int(&mut cp, "nodes", 1..=3, false) {
                Some(2) => {
                    p.errors.add(
                        join(cp.path(), "nodes"),
                        "must be 1 or 3 (etcd needs an odd number of members)",
                    );
                    None
                }
                Some(n) => Some(n as u32),
                None if p.errors.has(&join(cp.path(), "nodes")) => None,
                None => Some(1),
            };
            let specs = parse_specs(
                p,
                &mut cp,
                CONTROL_PLANE_CPU,
                CONTROL_PLANE_RAM_MIB,
                DEFAULT_CONTROL_PLANE_SPECS,
            );
            p.done(cp);
            match (nodes, specs) {
                (Some(nodes), Some(specs)) => Some(ControlPlaneSpec { nodes, specs }),
                _ => None,
            }
        }
        None if p.errors.has(&join(req.path(), "control_plane")) => None,
        None => Some(ControlPlaneSpec {
            nodes: 1,
            specs: DEFAULT_CONTROL_PLANE_SPECS,
        }),
    }
}

#[cfg(test)]
mod tests {
    use crate::kaas::fixtures::*;
    use serde_json::json;

    #[test]
    fn each_bad_control_plane_field_is_named() {
        assert_refusals(vec![
            (
                with(|v| v["req"]["control_plane"] = json!({"nodes": 2})),
                &["req.control_plane.nodes"],
            ),
            (
                with(|v| v["req"]["control_plane"] = json!({"nodes": 5})),
                &["req.control_plane.nodes"],
            ),
            (
                with(|v| v["req"]["control_plane"] = json!({"specs": {"cpu": 1}})),
                &["req.control_plane.specs.cpu"],
            ),
        ]);
    }
}
