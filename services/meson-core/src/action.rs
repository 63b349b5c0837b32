//! Actions: the user's view of a workflow, Hetzner style.

use crate::id::{ActionId, TenantId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use uuid::Uuid;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ActionStatus {
    Running,
    Success,
    Error,
}

impl ActionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ActionStatus::Running => "running",
            ActionStatus::Success => "success",
            ActionStatus::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "running" => Some(Self::Running),
            "success" => Some(Self::Success),
            "error" => Some(Self::Error),
            _ => None,
        }
    }
}

/// What an action does. Persisted as its string: never rename one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    CreateVm,
    DeleteVm,
    StartVm,
    StopVm,
    RebootVm,
    DeleteNetwork,
    CreateCluster,
    DeleteCluster,
    ReplaceNode,
    RebootNode,
    RepairNode,
    CreateNodePool,
    ScaleNodePool,
    DeleteNodePool,
    UpgradeCluster,
    RotateCredentials,
    CreateVolume,
    DeleteVolume,
    CreateImage,
    DeleteImage,
    AttachVolume,
    DetachVolume,
    ResizeVolume,
    MoveVolume,
    ResizeVm,
    RebuildVm,
    MigrateVm,
    AttachNetwork,
    DetachNetwork,
    CreatePortForward,
    DeletePortForward,
    CreateBackup,
    DeleteBackup,
    RestoreVm,
}

impl Command {
    pub fn as_str(self) -> &'static str {
        match self {
            Command::CreateVm => "create_vm",
            Command::DeleteVm => "delete_vm",
            Command::StartVm => "start_vm",
            Command::StopVm => "stop_vm",
            Command::RebootVm => "reboot_vm",
            Command::DeleteNetwork => "delete_network",
            Command::CreateCluster => "create_cluster",
            Command::DeleteCluster => "delete_cluster",
            Command::ReplaceNode => "replace_node",
            Command::RebootNode => "reboot_node",
            Command::RepairNode => "repair_node",
            Command::CreateNodePool => "create_node_pool",
            Command::ScaleNodePool => "scale_node_pool",
            Command::DeleteNodePool => "delete_node_pool",
            Command::UpgradeCluster => "upgrade_cluster",
            Command::RotateCredentials => "rotate_credentials",
            Command::CreateVolume => "create_volume",
            Command::DeleteVolume => "delete_volume",
            Command::CreateImage => "create_image",
            Command::DeleteImage => "delete_image",
            Command::AttachVolume => "attach_volume",
            Command::DetachVolume => "detach_volume",
            Command::ResizeVolume => "resize_volume",
            Command::MoveVolume => "move_volume",
            Command::ResizeVm => "resize_vm",
            Command::RebuildVm => "rebuild_vm",
            Command::MigrateVm => "migrate_vm",
            Command::AttachNetwork => "attach_network",
            Command::DetachNetwork => "detach_network",
            Command::CreatePortForward => "create_port_forward",
            Command::DeletePortForward => "delete_port_forward",
            Command::CreateBackup => "create_backup",
            Command::DeleteBackup => "delete_backup",
            Command::RestoreVm => "restore_vm",
        }
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Kinds of resources an action can touch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceType {
    Vm,
    Volume,
    Network,
    Cluster,
    NodePool,
    Node,
    Image,
    PortForward,
    Backup,
}

impl ResourceType {
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceType::Vm => "vm",
            ResourceType::Volume => "volume",
            ResourceType::Network => "network",
            ResourceType::Cluster => "cluster",
            ResourceType::NodePool => "node_pool",
            ResourceType::Node => "node",
            ResourceType::Image => "image",
            ResourceType::PortForward => "port_forward",
            ResourceType::Backup => "backup",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "vm" => Some(Self::Vm),
            "volume" => Some(Self::Volume),
            "network" => Some(Self::Network),
            "cluster" => Some(Self::Cluster),
            "node_pool" => Some(Self::NodePool),
            "node" => Some(Self::Node),
            "image" => Some(Self::Image),
            "port_forward" => Some(Self::PortForward),
            "backup" => Some(Self::Backup),
            _ => None,
        }
    }
}

/// Why an action failed, in words a user understands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionFailure {
    pub code: String,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Action {
    pub id: ActionId,
    pub tenant: TenantId,
    pub command: String,
    pub status: ActionStatus,
    pub progress: u8,
    pub started: DateTime<Utc>,
    pub finished: Option<DateTime<Utc>>,
    pub resources: Vec<(ResourceType, Uuid)>,
    pub error: Option<ActionFailure>,
}
