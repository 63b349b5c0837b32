//! Backups on the wire: a VM's backup policy, its backups, and restores.

use crate::action::Action;
use crate::{Meta, Vm, Warning};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;
use uuid::Uuid;

/// A VM's automatic backups: one a day, taken in `window`, the newest
/// `keep` kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BackupPolicy {
    /// `HH-HH`, UTC hours: the backup starts within it (meson spreads a
    /// host's backups over the window).
    #[schema(example = "22-02", pattern = "^([01][0-9]|2[0-3])-([01][0-9]|2[0-3])$")]
    pub window: String,
    /// How many automatic backups are kept; the oldest beyond are deleted.
    #[schema(example = 7, minimum = 1, maximum = 31)]
    pub keep: u32,
}

/// `POST /v1/vms/{id}/actions/enable-backups`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BackupPolicyRequest {
    /// `HH-HH` (UTC hours, start and end, e.g. `22-02`); default: a
    /// four-hour window meson picks for the VM, spreading VMs over the day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "22-02", pattern = "^([01][0-9]|2[0-3])-([01][0-9]|2[0-3])$")]
    pub window: Option<String>,
    /// 1 to 31, default 7.
    #[serde(
        default,
        deserialize_with = "crate::lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 1, maximum = 31, example = 7)]
    pub keep: Option<u32>,
}

/// A backup: a crash-consistent copy of every volume a VM had attached
/// (its cloud-init ISO aside), kept on the VM's host. It outlives the VM.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Backup {
    pub id: Uuid,
    pub name: String,
    /// The VM it is a copy of (which may since have been deleted).
    pub vm: Uuid,
    /// The VM's name when the backup was taken.
    pub vm_name: String,
    /// `manual` (taken on request) or `automatic` (by the VM's policy).
    #[schema(value_type = BackupKind)]
    pub kind: String,
    /// `creating`, `available`, `deleting` or `error` (see `error`).
    #[schema(value_type = BackupStatus)]
    pub status: String,
    /// GB: the copies' sizes added up (counted against `images_gb`).
    pub size: u32,
    pub volumes: Vec<BackupVolume>,
    /// The AtomOS host it lives on: its VM's.
    pub host: String,
    pub provider: String,
    pub region: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Why it is in `error`; null otherwise.
    #[serde(default)]
    #[schema(required = true)]
    pub error: Option<String>,
    pub created: DateTime<Utc>,
    /// When meson deletes it: set on an automatic backup once its VM is
    /// deleted or its backups disabled; null while kept by its policy or
    /// kept until deleted (a manual backup).
    #[serde(default)]
    #[schema(required = true)]
    pub expires: Option<DateTime<Utc>>,
}

/// One volume's copy in a backup.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BackupVolume {
    /// The volume copied (null when the host listed one meson does not know).
    #[serde(default)]
    #[schema(required = true)]
    pub volume: Option<Uuid>,
    /// `boot`, `data` (one of the VM's own), or `standalone` (a
    /// standalone volume attached to it; a restore into a new VM leaves
    /// it out).
    #[schema(example = "boot")]
    pub kind: String,
    /// GB.
    pub size: u32,
}

/// A backup's kind (documentation: the wire field is a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum BackupKind {
    Manual,
    Automatic,
}

/// A backup's status (documentation: the wire field is a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum BackupStatus {
    /// Being copied on its host.
    Creating,
    /// Ready to restore.
    Available,
    Deleting,
    /// Its create or delete failed (see `error`); delete it.
    Error,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BackupResponse {
    pub backup: Backup,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

/// A backup (`creating`) and its `create_backup` action.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BackupCreateResponse {
    pub backup: Backup,
    pub action: Action,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BackupList {
    pub backups: Vec<Backup>,
    pub meta: Meta,
}

/// `POST /v1/vms/{id}/actions/backup`: take a backup now.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BackupCreateRequest {
    /// Default: the VM's name and the time (`web-1-20261129-0712`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "before-upgrade", max_length = 63)]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<crate::requests::LabelsRequest>)]
    pub labels: Option<BTreeMap<String, String>>,
}

/// `POST /v1/vms/{id}/actions/restore`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RestoreRequest {
    /// A backup of this VM (which, for `new`, may since have been deleted).
    pub backup: Uuid,
    /// `same` (default): this VM is stopped, its volumes overwritten with
    /// the backup's copies, and started again if it was running. `new`: a
    /// new VM like the backed-up one, on the backup's host, its volumes
    /// written from the backup before it first boots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<RestoreInto>)]
    pub into: Option<String>,
    /// `new` only: the new VM's name (default: the backed-up VM's name with
    /// `-restored` and a short suffix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "web-restored", max_length = 63)]
    pub name: Option<String>,
}

/// Where a restore writes (documentation: the wire field is a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RestoreInto {
    Same,
    New,
}

/// A restore: the VM written to (this one, or the new one) and the action.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RestoreResponse {
    pub vm: Vm,
    pub action: Action,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

/// `GET /v1/backups` filters.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BackupListQuery {
    /// Only the backups of this VM (deleted VMs' too).
    pub vm: Option<Uuid>,
    /// Only the backup with this name.
    pub name: Option<String>,
    /// Only backups in one of these statuses (repeat the parameter).
    pub status: Option<Vec<BackupStatus>>,
    /// Kubernetes label selector: `env=prod,tier!=db,team in (a,b),!legacy`.
    pub label_selector: Option<String>,
    /// `field[:asc|:desc]`, field among id, name, status and created; up to
    /// two keys (repeat the parameter).
    #[param(max_items = 2, value_type = Option<Vec<crate::requests::VmSort>>)]
    pub sort: Option<Vec<String>>,
}
