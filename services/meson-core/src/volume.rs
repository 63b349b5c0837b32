//! Volumes meson created on AtomOS: boot images, cloud-init ISOs and data disks.

use crate::id::{TenantId, VmId, VolumeId};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VolumeKind {
    Boot,
    Cloudinit,
    Data,
}

impl VolumeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            VolumeKind::Boot => "boot",
            VolumeKind::Cloudinit => "cloudinit",
            VolumeKind::Data => "data",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "boot" => Self::Boot,
            "cloudinit" => Self::Cloudinit,
            "data" => Self::Data,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VolumeStatus {
    Creating,
    Available,
    Deleting,
    Error,
}

impl VolumeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            VolumeStatus::Creating => "creating",
            VolumeStatus::Available => "available",
            VolumeStatus::Deleting => "deleting",
            VolumeStatus::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "creating" => Self::Creating,
            "available" => Self::Available,
            "deleting" => Self::Deleting,
            "error" => Self::Error,
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Volume {
    pub id: VolumeId,
    pub tenant: TenantId,
    pub vm_id: Option<VmId>,
    /// The user-facing name (the data volume's name from the request, or `boot`/`cloudinit`).
    pub name: String,
    pub kind: VolumeKind,
    pub size_gb: u32,
    pub atomos_name: String,
    pub atomos_id: Option<String>,
    pub status: VolumeStatus,
}
