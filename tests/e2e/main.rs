//! End-to-end tests: meson started on loopback sockets with a fresh database
//! and the AtomOS simulator, driven over real HTTP.

mod actions;
mod admin;
mod auth;
mod autoscaler;
mod backups;
mod catalog;
mod cluster_nodes;
mod cluster_pools;
mod cluster_upgrades;
mod clusters;
mod consoles;
mod cursors;
mod drift;
mod grpc;
mod grpc_resources;
mod harness;
mod idempotency;
mod images;
mod limits;
mod metrics;
mod networks;
mod openapi;
mod placement;
mod plans;
mod port_forwards;
mod quotas;
mod quotes;
mod reconciler;
mod tenancy;
mod tokens;
mod unwinding;
mod usage;
mod validation;
mod vm;
mod volumes;
