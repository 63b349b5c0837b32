//! Wire types of meson's public API: the exact JSON shapes, with no logic.
//!
//! These structs are what clients see; the API layer converts domain values
//! into them. Changing a field here changes the public contract.
//! Requests are typed too (`requests`, `kaas`, ...): what clients build and
//! the SDK sends. Two modules hold a little logic: [`lenient`], the
//! deserializers that read requests' quirks as meson's parser does, and
//! [`dev`], how clients find a running `mesond dev` (its data directory
//! and `dev.json`).

pub mod action;
pub mod admin;
pub mod backup;
pub mod catalog;
pub mod cluster;
pub mod common;
pub mod console;
pub mod dev;
pub mod error;
pub mod image;
pub mod kaas;
pub mod lenient;
pub mod member;
pub mod meta;
pub mod network;
pub mod ops;
pub mod organization;
pub mod pool;
pub mod port_forward;
pub mod quote;
pub mod requests;
pub mod ssh_key;
pub mod token;
pub mod upgrade;
pub mod usage;
pub mod vm;
pub mod volume;

pub use action::{Action, ActionError, ActionList, ActionResource, ActionResponse};
pub use error::{ErrorBody, ErrorCode, ErrorDetails, ErrorResponse};
pub use meta::{Meta, Page, Pagination, Warning};
pub use vm::{Price, Vm, VmCreateResponse, VmList, VmResponse, VmSpecs, VmVolume};
