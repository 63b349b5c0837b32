//! Client for Elemento's AtomOS daemons.
//!
//! [`AtomosClient`] talks plain HTTP/JSON to one target's four daemons
//! (compute, storage, network, auth). Its methods speak domain types; every
//! wire-format quirk (MiB vs GiB, PCI objects vs strings, where the VM name,
//! state and IPv4 live) is settled in this crate and nowhere else. The wire
//! types themselves are in [`schema`].

mod auth;
mod backup;
mod client;
mod compute;
mod console;
mod error;
mod network;
pub mod schema;
mod storage;

pub use auth::AuthStatus;
pub use backup::{Backup, BackupVolume};
pub use client::{AtomosClient, ClientOptions, Ports, Target};
pub use compute::{PciDevice, Quote, Register, Template, Vm, VmSpec, VmState, pci_from_wire};
pub use console::Console;
pub use error::{DriverError, ErrorKind};
pub use network::{Network, NetworkCreate, PortForward, PortForwardCreate};
pub use storage::{ImageVolumeCreate, UrlVolume, UrlVolumeCreate, Volume, VolumeCreate};
