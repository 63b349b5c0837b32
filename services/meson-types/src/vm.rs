//! Virtual machines on the wire.

use crate::{Action, Meta, Warning};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Vm {
    pub id: Uuid,
    pub name: String,
    /// `initializing`, `starting`, `running`, `stopping`, `off`, `deleting`, `error`.
    pub status: String,
    pub labels: BTreeMap<String, String>,
    pub created: DateTime<Utc>,
    /// Placement, once decided.
    pub provider: Option<String>,
    pub region: Option<String>,
    /// The AtomOS target (host) the VM runs on.
    pub host: Option<String>,
    pub ipv4: Option<String>,
    pub specs: VmSpecs,
    pub volumes: Vec<VmVolume>,
    pub price: Option<Price>,
}

/// The normalized request: units fixed, quirks resolved, defaults applied.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VmSpecs {
    pub vcpus: u32,
    pub cores: u32,
    pub threads_per_core: u32,
    pub smt: bool,
    pub min_frequency_ghz: Option<f64>,
    pub arch: Vec<String>,
    pub flags: Vec<String>,
    pub memory_mib: u64,
    pub require_ecc: bool,
    pub pci_devices: Vec<PciDevice>,
    pub os_distribution: String,
    pub os_version: String,
    pub ssh_keys: Vec<String>,
    pub requested_provider: Option<String>,
    pub requested_continent: Option<String>,
    pub requested_region: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciDevice {
    pub vendor: String,
    pub model: String,
    pub quantity: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmVolume {
    pub id: Uuid,
    pub name: String,
    /// GB.
    pub size: u32,
    /// `boot`, `cloudinit` or `data`.
    pub kind: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Price {
    pub hourly: f64,
    pub monthly: f64,
    pub currency: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VmCreateResponse {
    pub vm: Vm,
    pub action: Action,
    pub next_actions: Vec<Action>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VmResponse {
    pub vm: Vm,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VmList {
    pub vms: Vec<Vm>,
    pub meta: Meta,
}
