//! API tokens issued by meson (`meson_core::token`): create (the secret
//! shown once), list, read, revoke, and authenticate a request with one.

use super::App;
use crate::auth::{Principal, Role};
use meson_core::parse::Warning;
use meson_core::token::{ApiToken, SHOWN_PREFIX_LEN, TokenCreate, new_secret};
use meson_core::{Error, Result, TokenId};

/// A token just created, with its secret.
pub struct TokenCreated {
    pub token: ApiToken,
    pub secret: String,
    pub warnings: Vec<Warning>,
}

/// The subject a token's requests are made by (the audit log's).
pub fn subject(id: TokenId) -> String {
    format!("token:{id}")
}

impl App {
    /// A token of the caller's tenant, with a role no higher than the
    /// caller's own.
    pub async fn token_create(
        &self,
        p: &Principal,
        body: &serde_json::Value,
    ) -> Result<TokenCreated> {
        let (req, warnings) = TokenCreate::parse(body)?;
        let role = Role::from_claim(&req.role)
            .ok_or_else(|| Error::invalid("role", "must be viewer, editor or owner"))?;
        if role > p.role {
            return Err(Error::invalid(
                "role",
                format!(
                    "a token cannot have more rights than its creator: at most {}",
                    p.role.as_str()
                ),
            ));
        }
        let secret = new_secret();
        let token = ApiToken {
            id: TokenId::new(),
            tenant: p.tenant.clone(),
            name: req.name,
            role: req.role,
            prefix: secret[..SHOWN_PREFIX_LEN].to_owned(),
            created_by: p.subject.clone(),
            created: chrono::Utc::now(),
            expires: None,
            revoked: None,
            revoked_by: None,
            last_used: None,
        };
        let token = meson_db::tokens::insert(
            &self.pool,
            &token,
            &super::secret_hash(&secret),
            req.expires_in,
        )
        .await?;
        tracing::info!(token = %token.id, role = %token.role, "token created");
        Ok(TokenCreated {
            token,
            secret,
            warnings,
        })
    }

    /// The tenant's tokens, newest first; revoked ones too when asked.
    pub async fn token_list(&self, _p: &Principal, revoked: bool) -> Result<Vec<ApiToken>> {
        meson_db::tokens::list(&self.pool, revoked).await
    }

    pub async fn token_get(&self, _p: &Principal, id: TokenId) -> Result<ApiToken> {
        meson_db::tokens::get(&self.pool, id)
            .await?
            .ok_or_else(|| Error::not_found("token", id))
    }

    /// Revokes a token: every request with it is refused from now on, on
    /// every replica (each reads the token's row). One revoked already is a
    /// `conflict`.
    pub async fn token_delete(&self, p: &Principal, id: TokenId) -> Result<ApiToken> {
        match meson_db::tokens::revoke(&self.pool, id, &p.subject).await? {
            Some(t) => {
                tracing::info!(token = %id, "token revoked");
                Ok(t)
            }
            None => {
                self.token_get(p, id).await?;
                Err(Error::Conflict {
                    message: format!("token {id} is revoked already"),
                })
            }
        }
    }

    /// The caller a token's secret stands for: its tenant and role, as
    /// `token:<id>`. Unknown, revoked or expired: `unauthorized`; the
    /// database down: `unavailable`, as every request then.
    pub async fn token_principal(&self, secret: &str) -> Result<Principal> {
        self.breaker.check()?;
        // Whose it is is not known before it is found: the system scope,
        // and the secret is the wall.
        let found = self
            .watched(meson_db::scope::system(meson_db::tokens::authenticate(
                &self.pool,
                &super::secret_hash(secret),
            )))
            .await?;
        let t = found.ok_or_else(|| {
            tracing::info!("rejected bearer token: no live meson token has this secret");
            Error::Unauthorized
        })?;
        let role = Role::from_claim(&t.role)
            .ok_or_else(|| Error::internal(format!("token {} has role {:?}", t.id, t.role)))?;
        Ok(Principal {
            tenant: t.tenant,
            subject: subject(t.id),
            role,
            email: None,
        })
    }
}
