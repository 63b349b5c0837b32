//! How many workers and control-plane nodes. kOps: one node per zone, one
//! control-plane node per control-plane zone (else one).

use super::Report;
use super::args::{Parsed, parse_number};

const MAX_POOL_NODES: u32 = 100;

/// `(workers, control-plane nodes)`.
pub(super) fn counts(p: &Parsed, reports: &mut Vec<Report>) -> Result<(u32, u32), String> {
    let zone_count = p.list("zones").map_or(0, |(_, z)| z.len());
    let nodes = match p.last("node-count") {
        Some(g) => {
            let n: u32 = parse_number(g)?;
            let kept = n.clamp(1, MAX_POOL_NODES);
            if kept != n {
                reports.push(Report {
                    flag: g.written.clone(),
                    message: format!(
                        "a meson pool holds 1 to {MAX_POOL_NODES} nodes here: using {kept}"
                    ),
                });
            }
            kept
        }
        None => u32::try_from(zone_count.max(1))
            .unwrap_or(1)
            .min(MAX_POOL_NODES),
    };
    let control_planes = match p.last("control-plane-count") {
        Some(g) => {
            let n: u32 = parse_number(g)?;
            let kept = if n <= 1 { 1 } else { 3 };
            if kept != n {
                reports.push(Report {
                    flag: g.written.clone(),
                    message: format!(
                        "meson runs 1 or 3 control-plane nodes (etcd wants an odd quorum): \
                         using {kept}"
                    ),
                });
            }
            kept
        }
        None => match p.list("control-plane-zones").map_or(1, |(_, z)| z.len()) {
            0 | 1 => 1,
            _ => 3,
        },
    };
    Ok((nodes, control_planes))
}
