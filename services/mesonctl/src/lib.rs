//! mesonctl: meson's command line. `main.rs` parses the command line and
//! exits with [`error::exit`]'s codes; the rest is here so it can be tested.

pub mod app;
pub mod cli;
/// Where meson and its token are found: shared with every client, in the SDK.
pub use meson_client::config;
pub mod error;
pub mod kops;
pub mod output;
pub mod progress;
