//! Volumes on the wire.

use crate::Meta;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Volume {
    pub id: Uuid,
    pub name: String,
    /// `boot`, `cloudinit` or `data`.
    pub kind: String,
    /// GB.
    pub size: u32,
    /// `creating`, `available`, `deleting` or `error`.
    pub status: String,
    /// The VM that owns it.
    pub vm: Option<Uuid>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VolumeResponse {
    pub volume: Volume,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VolumeList {
    pub volumes: Vec<Volume>,
    pub meta: Meta,
}
