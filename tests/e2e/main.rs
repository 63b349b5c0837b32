//! End-to-end tests: meson started on loopback sockets with a fresh database
//! and the AtomOS simulator, driven over real HTTP.

mod actions;
mod harness;
mod idempotency;
mod quotes;
mod validation;
mod vm;
mod workflows;
