//! `specs: {cpu, ram, storage, gpu}`, the size of a pool's or the control
//! plane's nodes.

use super::{NODE_GPU, NODE_STORAGE_GB, NodeSpecs};
use crate::parse::{Obj, Parser, join};
use std::ops::RangeInclusive;

/// `specs: {cpu, ram, storage, gpu}`; `ram` in MiB, `storage` in GB.
pub(super) fn parse_specs(
    p: &mut Parser,
    parent: &mut Obj<'_>,
    cpu: RangeInclusive<i64>,
    ram: RangeInclusive<i64>,
    default: NodeSpecs,
) -> Option<NodeSpecs> {
    let Some(mut s) = p.object(parent, "specs", false) else {
        return (!p.errors.has(&join(parent.path(), "specs"))).then_some(default);
    };
    let mut field = |p: &mut Parser, key: &'static str, range: RangeInclusive<i64>, d: u64| match p
        .int(&mut s, key, range, false)
    {
        Some(n) => Some(n as u64),
        None if p.errors.has(&join(s.path(), key)) => None,
        None => Some(d),
    };
    let cpu = field(p, "cpu", cpu, default.cpu.into());
    let ram = field(p, "ram", ram, default.ram_mib);
    let storage = field(p, "storage", NODE_STORAGE_GB, default.storage_gb.into());
    let gpu = field(p, "gpu", NODE_GPU, default.gpu.into());
    p.done(s);
    Some(NodeSpecs {
        cpu: cpu? as u32,
        ram_mib: ram?,
        storage_gb: storage? as u32,
        gpu: gpu? as u32,
    })
}
