//! Who is calling: the principal a verified token names, and its role.

use crate::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use meson_core::{Error, TenantId};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads its tenant's resources.
    Viewer,
    /// Also creates, changes and deletes them.
    Editor,
    /// Also manages its organisation's members and invitations, never
    /// its owners.
    Manager,
    /// A tenant's own administrator: an editor who also reads its tenant's
    /// audit log. Never reaches another tenant.
    Owner,
    /// Elemento's operator, across tenants: quotas, targets, every tenant's
    /// audit log. Never for a tenant's users.
    Admin,
}

impl Role {
    /// The name used in tokens' roles claim.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Editor => "editor",
            Role::Manager => "manager",
            Role::Owner => "owner",
            Role::Admin => "admin",
        }
    }

    /// The role a claim's word names, exactly (`ADMIN` is not `admin`: a
    /// role is a word of meson's, not a phrase an identity provider may
    /// spell as it likes); `None` for any other word.
    pub(crate) fn from_claim(name: &str) -> Option<Role> {
        [
            Role::Viewer,
            Role::Editor,
            Role::Manager,
            Role::Owner,
            Role::Admin,
        ]
        .into_iter()
        .find(|r| r.as_str() == name)
    }
}

/// The authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub tenant: TenantId,
    pub subject: String,
    pub role: Role,
    /// The email address the identity provider verified for the subject
    /// (a JWT's `email` with `email_verified` true): what accepting an
    /// invitation is checked against. meson's own tokens have none.
    pub email: Option<String>,
}

impl Principal {
    /// Fails with `forbidden` unless the caller has at least `role`.
    pub fn require(&self, role: Role) -> Result<(), Error> {
        if self.role >= role {
            Ok(())
        } else {
            Err(Error::Forbidden {
                message: format!("this needs the {role:?} role").to_lowercase(),
            })
        }
    }
}

/// The caller, as the gate (`http::gate`) authenticated it before the
/// handler runs. A handler reached without the gate refuses.
impl<S: Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<Principal>().cloned().ok_or_else(|| {
            tracing::error!(path = %parts.uri.path(),
                "refused: a handler that needs a caller was reached without the gate");
            ApiError(Error::Unauthorized)
        })
    }
}
