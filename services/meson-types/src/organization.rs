//! Organisations and sub-organisations, on the wire.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// An organisation (a tenant, same id): the one a call acts in, or a
/// sub-organisation below it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Organization {
    /// A sub-organisation's is its parent's, a dot and its name.
    #[schema(example = "acme.platform")]
    pub id: String,
    #[schema(example = "platform")]
    pub name: String,
    /// Null: a root organisation.
    #[serde(default)]
    #[schema(required = true, example = "acme")]
    pub parent: Option<String>,
    /// What a sub-organisation may hold, carved out of its parent's
    /// quotas (each counts as held by the parent); null for the
    /// organisation the call acts in when it is a root (its quotas are
    /// `GET /v1/quotas`).
    #[serde(default)]
    #[schema(required = true, example = json!({"vms": 10, "vcpus": 32, "ram_mib": 65536,
        "storage_gb": 500, "clusters": 1, "nodes": 6, "images_gb": 50}))]
    pub quotas: Option<BTreeMap<String, i64>>,
    /// How far below the organisation the call acts in (0: that one).
    pub depth: i32,
    pub created_by: String,
    pub created: DateTime<Utc>,
}

/// `POST /v1/organizations`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OrganizationCreateRequest {
    /// 1 to 32 of `a-z`, `0-9` and `-`: the id's last part.
    #[schema(example = "platform", pattern = "^[a-z0-9][a-z0-9-]{0,31}$")]
    pub name: String,
    /// What it may hold (`vms`, `vcpus`, `ram_mib`, `storage_gb`,
    /// `clusters`, `nodes`, `images_gb`); each not named: none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(example = json!({"vms": 10, "vcpus": 32}))]
    pub quotas: BTreeMap<String, i64>,
}

/// `PATCH /v1/organizations/{id}`: the quotas named change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OrganizationUpdateRequest {
    #[schema(example = json!({"vms": 20}))]
    pub quotas: BTreeMap<String, i64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OrganizationResponse {
    pub organization: Organization,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OrganizationList {
    /// The organisation the call acts in first, then those below it, by id.
    pub organizations: Vec<Organization>,
}
