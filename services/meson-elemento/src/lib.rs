//! Elemento's client daemons over meson.
//!
//! Electros and elemento-cli talk plain HTTP/JSON to six daemons on the
//! user's machine (auth, compute, storage, network, target, service). This
//! gateway answers their routes, with their JSON, by calling meson's `/v1`
//! API through the SDK: by default each daemon on its usual port on
//! 127.0.0.1, plus all of them on one single-origin listener.

pub mod access;
pub mod backups;
pub mod billing;
pub mod catalog;
pub mod consoles;
pub mod error;
pub mod hosts;
pub mod orgs;
pub mod port_forwards;
pub mod routes;
pub mod session;
pub mod storage;
pub mod subscription;
pub mod targets;
pub mod tunnels;
pub mod wire;

pub mod server;

pub use catalog::Daemon;
pub use server::{Config, Gateway, Listening, TlsFiles};
