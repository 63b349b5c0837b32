//! The meson daemon as a library: configuration, the private PostgreSQL of
//! dev mode, and the pieces (`api`, `worker`) every mode assembles.

pub mod config;
pub mod conn;
pub mod dev;
pub mod pg;
pub mod server;
pub mod telemetry;
