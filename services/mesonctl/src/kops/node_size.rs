//! The size of the workers and of the control-plane nodes: a meson
//! flavour named directly, or a cloud size mapped to the smallest flavour
//! holding it, raised to what the role needs, with the disk's size.

use super::Report;
use super::args::{Parsed, parse_number};
use super::cloud_sizes::instance_size;
use meson_core::flavor::{self, FLAVORS, Flavor};
use meson_core::kaas;
use meson_types::quote::NodeSpecs;
use serde_json::{Map, Value, json};

/// meson's bounds on a node's disk, in GB.
fn storage_gb_bounds() -> (u32, u32) {
    let r = &kaas::NODE_STORAGE_GB;
    (*r.start() as u32, *r.end() as u32)
}

/// The smallest flavour without GPUs holding `vcpus` and `mib`: a cloud
/// size has no GPU, and a node sized as a GPU flavour without its GPU
/// would be named for a card it does not have.
pub fn smallest_flavor(vcpus: u32, mib: u64) -> Option<&'static Flavor> {
    FLAVORS
        .iter()
        .find(|f| f.gpus == 0 && f.vcpus >= vcpus && f.memory_mib >= mib)
}

/// One node group's size, as the request's `specs` and for the metadata.
pub(super) struct NodeSize {
    pub(super) specs: NodeSpecs,
    /// `{"size": "t2.micro", "flavor": "neon"}` for the metadata.
    pub(super) note: Map<String, Value>,
}

/// Which node group a size is for.
#[derive(Clone, Copy)]
enum Role {
    Worker,
    ControlPlane,
}

impl Role {
    /// The role's smallest size meson accepts (for a control-plane node,
    /// kubeadm's preflight minimum).
    fn minimum(self) -> (u32, u64) {
        let (cpu, mib) = match self {
            Role::Worker => (&kaas::NODE_CPU, &kaas::NODE_RAM_MIB),
            Role::ControlPlane => (&kaas::CONTROL_PLANE_CPU, &kaas::CONTROL_PLANE_RAM_MIB),
        };
        (*cpu.start() as u32, *mib.start() as u64)
    }

    fn what(self) -> &'static str {
        match self {
            Role::Worker => "a node",
            Role::ControlPlane => "a control-plane node",
        }
    }

    /// meson's default size for the role (`neon`; `argon` without its GPU).
    fn default_size(self) -> (u32, u64) {
        let specs = self.default_specs();
        (specs.cpu, specs.ram_mib)
    }

    fn default_specs(self) -> &'static kaas::NodeSpecs {
        match self {
            Role::Worker => &kaas::DEFAULT_NODE_SPECS,
            Role::ControlPlane => &kaas::DEFAULT_CONTROL_PLANE_SPECS,
        }
    }
}

/// A node group's size from its size and volume-size flags.
fn size_specs(
    role: Role,
    size: Option<(String, Vec<String>)>,
    volume: Option<(String, u32)>,
    reports: &mut Vec<Report>,
) -> NodeSize {
    let storage = match volume {
        Some((written, gb)) => {
            let (min, max) = storage_gb_bounds();
            let clamped = gb.clamp(min, max);
            if clamped != gb {
                reports.push(Report {
                    flag: written,
                    message: format!(
                        "{gb} GB is outside meson's {min}..={max} GB for a node's disk: using {clamped} GB"
                    ),
                });
            }
            clamped
        }
        None => role.default_specs().storage_gb,
    };
    let mut note = Map::new();
    let (mut vcpus, mut mib) = role.default_size();
    let mut gpus = 0;
    if let Some((written, sizes)) = size {
        if sizes.len() > 1 {
            reports.push(Report {
                flag: written.clone(),
                message: format!(
                    "a meson pool has one node size: using {:?}, not {:?}",
                    sizes[0],
                    &sizes[1..]
                ),
            });
        }
        if let Some(name) = sizes.first() {
            note.insert("size".into(), json!(name));
            let lower = name.to_ascii_lowercase();
            let named = flavor::lookup(&lower);
            match (named, instance_size(name)) {
                (Some(fl), _) => {
                    // A flavour asked for by name brings its GPUs.
                    (vcpus, mib, gpus) = (fl.vcpus, fl.memory_mib, fl.gpus);
                    note.insert("flavor".into(), json!(fl.name));
                }
                (None, Some((c, m))) => match smallest_flavor(c, m) {
                    Some(fl) => {
                        (vcpus, mib) = (fl.vcpus, fl.memory_mib);
                        note.insert("flavor".into(), json!(fl.name));
                    }
                    None => (vcpus, mib) = (c, m),
                },
                (None, None) => reports.push(Report {
                    flag: written.clone(),
                    message: format!(
                        "unknown instance size {name:?} (known: meson's flavours {}, and AWS, \
                         GCE, Hetzner and DigitalOcean sizes): using meson's default, \
                         {vcpus} vCPUs / {mib} MiB",
                        FLAVORS
                            .iter()
                            .map(|f| f.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }),
            }
            let (min_cpu, min_mib) = role.minimum();
            if vcpus < min_cpu || mib < min_mib {
                let raised = smallest_flavor(vcpus.max(min_cpu), mib.max(min_mib));
                let (c, m) = raised.map_or((vcpus.max(min_cpu), mib.max(min_mib)), |f| {
                    (f.vcpus, f.memory_mib)
                });
                reports.push(Report {
                    flag: written,
                    message: format!(
                        "{name:?} ({vcpus} vCPUs / {mib} MiB) is below what {} needs \
                         ({min_cpu} vCPUs / {min_mib} MiB): using {}{c} vCPUs / {m} MiB",
                        role.what(),
                        raised.map_or(String::new(), |f| format!("{}, ", f.name)),
                    ),
                });
                (vcpus, mib) = (c, m);
                if let Some(f) = raised {
                    note.insert("flavor".into(), json!(f.name));
                }
            }
        }
    }
    NodeSize {
        specs: NodeSpecs {
            cpu: vcpus,
            ram: mib,
            storage,
            gpu: gpus,
        },
        note,
    }
}

/// The workers' size and the control plane's, from their flags.
pub(super) fn node_sizes(
    p: &Parsed,
    reports: &mut Vec<Report>,
) -> Result<(NodeSize, NodeSize), String> {
    let volume = |name: &str| -> Result<Option<(String, u32)>, String> {
        p.last(name)
            .map(|g| parse_number::<u32>(g).map(|n| (g.written.clone(), n)))
            .transpose()
    };
    let worker = size_specs(
        Role::Worker,
        p.list("node-size"),
        volume("node-volume-size")?,
        reports,
    );
    let control_plane = size_specs(
        Role::ControlPlane,
        p.list("control-plane-size"),
        volume("control-plane-volume-size")?,
        reports,
    );
    Ok((worker, control_plane))
}
