//! AtomOS targets as meson knows them: where a set of daemons answers, and what it is.

use crate::id::TargetId;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub id: TargetId,
    /// Unique name, shown to users as the VM's `host`.
    pub name: String,
    pub host: String,
    pub compute_port: u16,
    pub storage_port: u16,
    pub network_port: u16,
    pub auth_port: u16,
    pub provider: String,
    pub region: String,
    pub continent: String,
    pub enabled: bool,
}
