//! SSH keys on the wire: public keys a tenant keeps at meson, as Hetzner's
//! `ssh_keys`.

use crate::common::Labels;
use crate::{Meta, Warning};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;
use uuid::Uuid;

/// A public key of the tenant's. Its name and its fingerprint are each
/// the tenant's only one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SshKey {
    pub id: Uuid,
    pub name: String,
    /// The OpenSSH line as given: type, base64 key, comment.
    pub public_key: String,
    /// `SHA256:` and the unpadded base64 of the key's SHA-256, as
    /// `ssh-keygen -l` prints it.
    #[schema(example = "SHA256:8zFz2Yd5kBz3Wk1h0JmQ0rjWcYQ6sC7o0h8nH5mNqvI")]
    pub fingerprint: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    pub created: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SshKeyResponse {
    pub ssh_key: SshKey,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SshKeyList {
    pub ssh_keys: Vec<SshKey>,
    pub meta: Meta,
}

/// `POST /v1/ssh-keys`: keep a public key.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SshKeyCreateRequest {
    /// Unique among the tenant's SSH keys.
    #[schema(
        example = "laptop",
        max_length = 63,
        pattern = "^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$"
    )]
    pub name: String,
    /// An OpenSSH public key line (`ssh-ed25519 AAAA... user@host`): ed25519,
    /// RSA or ECDSA, security keys included; DSA keys are refused.
    #[schema(
        example = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMLavtiPfhiG3t6TAxHosXoVh7Pc/lSD8L9SNPyAzp1d user@host",
        max_length = 16384
    )]
    pub public_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<crate::requests::LabelsRequest>)]
    pub labels: Option<Labels>,
}

impl SshKeyCreateRequest {
    pub fn new(name: impl Into<String>, public_key: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            public_key: public_key.into(),
            labels: None,
        }
    }
}

/// `GET /v1/ssh-keys` filters.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SshKeyListQuery {
    /// Only the key with this name.
    pub name: Option<String>,
    /// Kubernetes label selector: `env=prod,tier!=db,team in (a,b),!legacy`.
    pub label_selector: Option<String>,
    /// `field[:asc|:desc]`, field among id, name and created; up to two
    /// keys (repeat the parameter).
    #[param(max_items = 2, value_type = Option<Vec<SshKeySort>>, inline)]
    pub sort: Option<Vec<String>>,
}

/// A sort key of `GET /v1/ssh-keys`.
pub struct SshKeySort;

impl utoipa::PartialSchema for SshKeySort {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .pattern(Some("^(id|name|created)(:(asc|desc))?$"))
            .examples(["name"])
            .into()
    }
}

impl ToSchema for SshKeySort {}
