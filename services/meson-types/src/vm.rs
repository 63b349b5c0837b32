//! Virtual machines on the wire.

use crate::{Action, Meta, Warning};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;
use uuid::Uuid;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Vm {
    pub id: Uuid,
    #[schema(example = "test")]
    pub name: String,
    /// `initializing`, `starting`, `running`, `stopping`, `off`, `deleting`, `error`.
    #[schema(value_type = VmStatus)]
    pub status: String,
    /// What the reconciler found wrong with the VM: it crashed (found off
    /// on its host though meson did not stop it) or is missing from its
    /// hypervisor. Cleared when meson next changes the VM's state.
    #[serde(default)]
    #[schema(required = true)]
    pub error_message: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub created: DateTime<Utc>,
    /// Placement, once decided (`null` until then).
    #[schema(required = true, example = "ionos")]
    pub provider: Option<String>,
    #[schema(required = true)]
    pub region: Option<String>,
    /// The AtomOS target (host) the VM runs on.
    #[schema(required = true)]
    pub host: Option<String>,
    /// Once known.
    #[schema(required = true, format = Ipv4)]
    pub ipv4: Option<String>,
    pub specs: VmSpecs,
    /// Boot disk, cloud-init ISO and data disks.
    pub volumes: Vec<VmVolume>,
    /// The VM's NICs on private networks, in order.
    #[serde(default)]
    #[schema(required = true)]
    pub private_net: Vec<crate::network::PrivateNet>,
    /// Its automatic backups' policy; null when they are disabled.
    #[serde(default)]
    #[schema(required = true)]
    pub backups: Option<crate::backup::BackupPolicy>,
    /// The placement's price, once placed.
    #[schema(required = true)]
    pub price: Option<Price>,
}

/// A VM's status (documentation: the wire field is a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum VmStatus {
    Initializing,
    Starting,
    Running,
    Stopping,
    Off,
    Deleting,
    Error,
}

/// `POST /v1/vms/{id}/actions/resize`: a VM's new size (give at least one).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VmResizeRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 128, example = 4)]
    pub cores: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 128, maximum = 1_048_576, example = 8192)]
    pub memory_mib: Option<u64>,
    /// A running VM is stopped, resized and started again (default false:
    /// a running VM is refused, as AtomOS resizes a VM that is off).
    #[serde(
        default,
        deserialize_with = "crate::lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<crate::requests::LenientBool>)]
    pub stop: Option<bool>,
}

/// `POST /v1/vms/{id}/actions/rebuild`: what the new boot volume is made
/// from, one of them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VmRebuildRequest {
    /// The tenant's `available` image on the VM's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Uuid>,
    /// A distribution (`Debian`, `Ubuntu 22.04`, ...): its cloud image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "Debian")]
    pub os: Option<String>,
}

/// `POST /v1/vms/{id}/actions/migrate`: where to (optional).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VmMigrateRequest {
    /// A host of the VM's provider (an AtomOS target's name); default: the
    /// cheapest other one with room.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "ionos-fra-2")]
    pub host: Option<String>,
}

/// `POST /v1/vms/{id}/actions/attach-network` and `.../detach-network`:
/// the private network to join or leave.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VmNetworkRequest {
    /// The tenant's private network (`POST /v1/networks`).
    pub network: Uuid,
}

/// What `POST /v1/vms/{id}/actions/{command}` (and gRPC `PowerVm`) does to
/// a VM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PowerCommand {
    /// Start a VM that is `off`.
    Poweron,
    /// Stop a VM that is `running`.
    Poweroff,
    /// Restart a VM that is `running`.
    Reboot,
}

impl PowerCommand {
    pub const ALL: [PowerCommand; 3] = [Self::Poweron, Self::Poweroff, Self::Reboot];

    /// The command as the URL and gRPC write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Poweron => "poweron",
            Self::Poweroff => "poweroff",
            Self::Reboot => "reboot",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl std::fmt::Display for PowerCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The normalized request: units fixed, quirks resolved, defaults applied.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VmSpecs {
    pub vcpus: u32,
    pub cores: u32,
    pub threads_per_core: u32,
    pub smt: bool,
    #[schema(required = true)]
    pub min_frequency_ghz: Option<f64>,
    pub arch: Vec<String>,
    pub flags: Vec<String>,
    pub memory_mib: u64,
    pub require_ecc: bool,
    pub pci_devices: Vec<PciDevice>,
    pub os_distribution: String,
    pub os_version: String,
    pub ssh_keys: Vec<String>,
    /// Placement constraints of the request (`null`: any).
    #[schema(required = true)]
    pub requested_provider: Option<String>,
    #[schema(required = true)]
    pub requested_continent: Option<String>,
    #[schema(required = true)]
    pub requested_region: Option<String>,
    /// The image the boot volume was copied from (`null`: the OS's cloud image).
    #[serde(default)]
    #[schema(required = true)]
    pub image: Option<Uuid>,
    /// The backup the VM was restored from when it was made (a restore
    /// into a new VM); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<Uuid>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PciDevice {
    pub vendor: String,
    pub model: String,
    pub quantity: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct VmVolume {
    pub id: Uuid,
    pub name: String,
    /// GB.
    pub size: u32,
    /// `boot`, `cloudinit` or `data`.
    #[schema(value_type = crate::volume::VolumeKind)]
    pub kind: String,
    /// A standalone volume attached to the VM (it outlives the VM); the
    /// others are the VM's own and go with it.
    #[serde(default)]
    pub standalone: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Price {
    pub hourly: f64,
    pub monthly: f64,
    pub currency: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VmCreateResponse {
    pub vm: Vm,
    pub action: Action,
    pub next_actions: Vec<Action>,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VmResponse {
    pub vm: Vm,
}

/// `PATCH /v1/vms/{id}`: the VM as it is now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VmUpdateResponse {
    pub vm: Vm,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VmList {
    pub vms: Vec<Vm>,
    pub meta: Meta,
}

#[cfg(test)]
mod tests {
    use super::PowerCommand;

    #[test]
    fn a_power_command_is_written_alike_in_urls_and_json() {
        for c in PowerCommand::ALL {
            assert_eq!(PowerCommand::parse(c.as_str()), Some(c));
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
        assert_eq!(PowerCommand::parse("shutdown"), None);
    }
}
