//! meson's REST API: thin axum handlers over the app layer.
//!
//! handler → `app` (validation, authorization, transactions, enqueueing) →
//! `meson-db` / workflows. Handlers never touch SQL; wire types are built
//! from domain types in `views` only.

pub mod app;
pub mod auth;
pub mod authz;
pub mod console;
pub mod error;
pub mod gate;
pub mod grpc;
pub mod http;
pub mod metrics;
pub mod ratelimit;
mod resources;
pub mod state;
pub mod trace_context;
pub mod views;

pub use app::App;
pub use auth::{Auth, Principal, Role};
pub use http::router;
pub use resources::{Body, Read, bodies, canonical, shown};
