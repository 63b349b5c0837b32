//! Volumes on the wire.

use crate::action::Action;
use crate::{Meta, Warning};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;
use uuid::Uuid;

/// A volume: a VM's own (boot disk, cloud-init ISO, data disks, which go
/// with the VM) or a standalone one (`POST /v1/volumes`, `vm` null), which
/// lives on one AtomOS host and is attached to at most one VM at a time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Volume {
    pub id: Uuid,
    pub name: String,
    /// `boot`, `cloudinit` or `data` (standalone volumes are `data`).
    #[schema(value_type = VolumeKind)]
    pub kind: String,
    /// GB.
    pub size: u32,
    /// `creating`, `available`, `attached` (standalone, to `attached_to`),
    /// `deleting` or `error`.
    #[schema(value_type = VolumeStatus)]
    pub status: String,
    /// The VM that owns it; null for a standalone volume.
    #[schema(required = true)]
    pub vm: Option<Uuid>,
    /// Made by `POST /v1/volumes`, not with a VM.
    #[serde(default)]
    pub standalone: bool,
    /// The VM a standalone volume is attached to.
    #[serde(default)]
    #[schema(required = true)]
    pub attached_to: Option<Uuid>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub bootable: bool,
    #[serde(default)]
    pub readonly: bool,
    /// The AtomOS host a standalone volume lives on (a VM attaching it is
    /// placed there); null until placed, and for a VM's own volumes (see
    /// the VM's `host`).
    #[serde(default)]
    #[schema(required = true)]
    pub host: Option<String>,
    #[serde(default)]
    #[schema(required = true)]
    pub provider: Option<String>,
    #[serde(default)]
    #[schema(required = true)]
    pub region: Option<String>,
    pub created: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VolumeResponse {
    pub volume: Volume,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

/// `POST /v1/volumes`: the volume (`creating`) and its `create_volume` action.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VolumeCreateResponse {
    pub volume: Volume,
    pub action: Action,
    /// Always empty (as a VM's create): the volume is ready when `action` is.
    #[serde(default)]
    pub next_actions: Vec<Action>,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VolumeList {
    pub volumes: Vec<Volume>,
    pub meta: Meta,
}

crate::common::placed! {
    /// `POST /v1/volumes`: a standalone volume. The server reads the body
    /// leniently (booleans may also be `"True"`/`"False"` strings or 0/1, as
    /// this type reads them; unknown fields are ignored and reported in
    /// `warnings`).
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
    pub struct VolumeCreateRequest {
        /// Unique among the tenant's standalone volumes.
        #[schema(
            example = "data-1",
            max_length = 63,
            pattern = "^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$"
        )]
        pub name: String,
        /// GB.
        #[schema(minimum = 1, maximum = 10_240, example = 50)]
        pub size: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(value_type = Option<crate::requests::LabelsRequest>)]
        pub labels: Option<BTreeMap<String, String>>,
        /// Default false; passed to AtomOS.
        #[serde(
            default,
            deserialize_with = "crate::lenient::opt_bool",
            skip_serializing_if = "Option::is_none"
        )]
        #[schema(value_type = Option<crate::requests::LenientBool>)]
        pub bootable: Option<bool>,
        /// Default false; passed to AtomOS.
        #[serde(
            default,
            deserialize_with = "crate::lenient::opt_bool",
            skip_serializing_if = "Option::is_none"
        )]
        #[schema(value_type = Option<crate::requests::LenientBool>)]
        pub readonly: Option<bool>,
        /// Only false (the default): meson attaches a volume to one VM at a time.
        #[serde(
            default,
            deserialize_with = "crate::lenient::opt_bool",
            skip_serializing_if = "Option::is_none"
        )]
        #[schema(value_type = Option<crate::requests::LenientBool>)]
        pub shareable: Option<bool>,
        /// Only true (the default): a volume is private to its tenant.
        #[serde(
            default,
            deserialize_with = "crate::lenient::opt_bool",
            skip_serializing_if = "Option::is_none"
        )]
        #[schema(value_type = Option<crate::requests::LenientBool>)]
        pub private: Option<bool>,
    }
}

/// `POST /v1/volumes/{id}/actions/attach`: the VM to attach the volume to
/// (the tenant's, on the volume's host, running or off).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VolumeAttachRequest {
    pub vm: Uuid,
}

/// `POST /v1/volumes/{id}/actions/move`: the host to move a free
/// standalone volume to (of its provider).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VolumeMoveRequest {
    /// An AtomOS host of the volume's provider (a target's name).
    #[schema(example = "ionos-las-1")]
    pub host: String,
}

/// `POST /v1/volumes/{id}/actions/resize`: the new size, GB (volumes only grow).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VolumeResizeRequest {
    #[schema(minimum = 1, maximum = 10_240, example = 100)]
    pub size: u32,
}

/// What a volume holds (documentation: the wire field is a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum VolumeKind {
    /// The OS disk, cloned from the distribution's cloud image.
    Boot,
    /// The cloud-init ISO that configures the guest.
    Cloudinit,
    /// A data disk from the request's `volumes`, or a standalone volume.
    Data,
}

/// A volume's status (documentation: the wire field is a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum VolumeStatus {
    /// Being made on AtomOS.
    Creating,
    /// Ready; a standalone volume can be attached.
    Available,
    /// A standalone volume attached to a VM (from the VM's create until it
    /// is deleted).
    Attached,
    Deleting,
    /// Its create failed (delete it), or its VM's did.
    Error,
}
