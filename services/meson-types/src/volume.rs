//! Volumes on the wire.

use crate::Meta;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Volume {
    pub id: Uuid,
    pub name: String,
    /// `boot`, `cloudinit` or `data`.
    #[schema(value_type = VolumeKind)]
    pub kind: String,
    /// GB.
    pub size: u32,
    /// `creating`, `available`, `deleting` or `error`.
    #[schema(value_type = VolumeStatus)]
    pub status: String,
    /// The VM that owns it.
    #[schema(required = true)]
    pub vm: Option<Uuid>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VolumeResponse {
    pub volume: Volume,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VolumeList {
    pub volumes: Vec<Volume>,
    pub meta: Meta,
}

/// What a volume holds (documentation: the wire field is a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum VolumeKind {
    /// The OS disk, cloned from the distribution's cloud image.
    Boot,
    /// The cloud-init ISO that configures the guest.
    Cloudinit,
    /// A data disk from the request's `volumes`.
    Data,
}

/// A volume's status (documentation: the wire field is a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum VolumeStatus {
    Creating,
    Available,
    Deleting,
    Error,
}
