//! The audit log: who did what to which resource, when, from which request.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// One audited request (every request that may change something, allowed or
/// refused, once the caller is known).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub id: i64,
    pub at: DateTime<Utc>,
    pub tenant: String,
    /// The token's subject.
    pub subject: String,
    /// The role the caller acted with (`viewer`, `editor`, `owner`, `admin`).
    pub role: String,
    /// The API operation (`vm_create`, ...), the same for REST and gRPC.
    pub operation: String,
    pub method: String,
    pub path: String,
    /// The resource acted on, when one is named (by the path, or created).
    pub resource_type: Option<String>,
    pub resource_id: Option<String>,
    /// The action the request started, if any.
    pub action_id: Option<Uuid>,
    /// The HTTP status answered.
    pub status: u16,
    pub correlation_id: String,
}

/// Which entries to list.
#[derive(Clone, Debug, Default)]
pub struct AuditFilter {
    pub tenant: Option<String>,
    pub subject: Option<String>,
    pub operation: Option<String>,
    pub resource_id: Option<String>,
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
}
