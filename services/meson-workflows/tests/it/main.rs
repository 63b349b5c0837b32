//! The generic workflow harness (`meson_jobs::testing`) run against every
//! workflow, with the AtomOS simulator: every step twice, a fault before and
//! after every step, every undo twice, a worker killed before every step.

mod backups;
mod clusters;
mod images;
mod networks;
mod nodes;
mod pools;
mod port_forwards;
#[path = "../../../../tests/e2e/seeds.rs"]
mod seeds;
mod upgrades;
mod vms;
mod volumes;
mod world;
