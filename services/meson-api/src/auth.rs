//! Bearer JWT authentication: who is calling, for which tenant, with which role.

use crate::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use meson_core::{Error, TenantId};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Viewer,
    Editor,
    Admin,
}

/// The authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub tenant: TenantId,
    pub subject: String,
    pub role: Role,
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

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    tenant: String,
    #[serde(default)]
    roles: Vec<Role>,
    iss: String,
    aud: String,
    exp: i64,
    iat: i64,
}

/// Verifies (and, in dev, issues) HS256 tokens with a shared secret.
#[derive(Clone)]
pub struct Auth {
    inner: Arc<AuthInner>,
}

struct AuthInner {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    issuer: String,
}

pub const AUDIENCE: &str = "meson";

impl Auth {
    pub fn hs256(secret: &[u8], issuer: &str) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[issuer]);
        validation.set_audience(&[AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = 30;
        Auth {
            inner: Arc::new(AuthInner {
                encoding: EncodingKey::from_secret(secret),
                decoding: DecodingKey::from_secret(secret),
                validation,
                issuer: issuer.to_owned(),
            }),
        }
    }

    /// Issues a token (dev mode and tests).
    pub fn issue(&self, tenant: &str, subject: &str, role: Role, ttl: chrono::Duration) -> String {
        let now = chrono::Utc::now().timestamp();
        let claims = Claims {
            sub: subject.to_owned(),
            tenant: tenant.to_owned(),
            roles: vec![role],
            iss: self.inner.issuer.clone(),
            aud: AUDIENCE.to_owned(),
            exp: now + ttl.num_seconds(),
            iat: now,
        };
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &self.inner.encoding,
        )
        .unwrap_or_default()
    }

    /// Verifies a bearer token. Why it failed is logged, never returned.
    pub fn verify(&self, token: &str) -> Result<Principal, Error> {
        let data =
            jsonwebtoken::decode::<Claims>(token, &self.inner.decoding, &self.inner.validation)
                .map_err(|e| {
                    tracing::info!(reason = %e, "rejected bearer token");
                    Error::Unauthorized
                })?;
        let c = data.claims;
        if c.tenant.is_empty() || c.tenant.len() > 128 {
            tracing::info!("rejected bearer token: bad tenant claim");
            return Err(Error::Unauthorized);
        }
        let role = c.roles.iter().copied().max().unwrap_or(Role::Viewer);
        Ok(Principal {
            tenant: TenantId(c.tenant),
            subject: c.sub,
            role,
        })
    }
}

/// Anything that can hand out the verifier (the router state).
pub trait HasAuth {
    fn auth(&self) -> &Auth;
}

impl<S: HasAuth + Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or(ApiError(Error::Unauthorized))?;
        let token = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .ok_or(ApiError(Error::Unauthorized))?;
        Ok(state.auth().verify(token.trim())?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejections() {
        let auth = Auth::hs256(b"secret-secret-secret-secret-1234", "meson-test");
        let t = auth.issue("t1", "alice", Role::Editor, chrono::Duration::minutes(5));
        let p = auth.verify(&t).unwrap();
        assert_eq!(p.tenant.as_str(), "t1");
        assert_eq!(p.role, Role::Editor);
        assert!(p.require(Role::Admin).is_err());

        let other = Auth::hs256(b"another-secret-another-secret-12", "meson-test");
        assert!(other.verify(&t).is_err(), "bad signature accepted");
        let expired = auth.issue("t1", "alice", Role::Editor, chrono::Duration::minutes(-5));
        assert!(auth.verify(&expired).is_err(), "expired token accepted");
        assert!(auth.verify("not.a.jwt").is_err());
    }
}
