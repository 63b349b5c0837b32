//! Actions: the progress of asynchronous work, Hetzner style.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Action {
    pub id: Uuid,
    /// e.g. `create_vm`, `delete_vm`.
    pub command: String,
    /// `running`, `success` or `error`.
    pub status: String,
    /// 0 to 100.
    pub progress: u8,
    pub started: DateTime<Utc>,
    pub finished: Option<DateTime<Utc>>,
    pub resources: Vec<ActionResource>,
    pub error: Option<ActionError>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionResource {
    pub id: Uuid,
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionError {
    pub code: String,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActionResponse {
    pub action: Action,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActionList {
    pub actions: Vec<Action>,
}

/// A page of a resource's actions (`GET /v1/vms/{id}/actions`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActionPage {
    pub actions: Vec<Action>,
    pub meta: crate::Meta,
}
