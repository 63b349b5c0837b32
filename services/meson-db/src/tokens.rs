//! API tokens issued by meson (`meson_core::token`).

use crate::DbResult;
use meson_core::token::ApiToken;
use meson_core::{Error, TenantId, TokenId};
use sqlx::PgPool;
use uuid::Uuid;

#[derive(Debug, sqlx::FromRow)]
struct TokenRow {
    id: Uuid,
    tenant_id: String,
    name: String,
    role: String,
    prefix: String,
    created_by: String,
    created_at: chrono::DateTime<chrono::Utc>,
    expires_at: Option<chrono::DateTime<chrono::Utc>>,
    revoked_at: Option<chrono::DateTime<chrono::Utc>>,
    revoked_by: Option<String>,
    last_used_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl From<TokenRow> for ApiToken {
    fn from(r: TokenRow) -> Self {
        ApiToken {
            id: TokenId(r.id),
            tenant: TenantId(r.tenant_id),
            name: r.name,
            role: r.role,
            prefix: r.prefix,
            created_by: r.created_by,
            created: r.created_at,
            expires: r.expires_at,
            revoked: r.revoked_at,
            revoked_by: r.revoked_by,
            last_used: r.last_used_at,
        }
    }
}

/// Stores a new token with its secret's hash; it expires `expires_in`
/// seconds from now (the database's clock) when given. A live token of
/// the tenant's with the same name is an `AlreadyExists` on `name`.
pub async fn insert(
    pool: &PgPool,
    t: &ApiToken,
    secret_hash: &[u8],
    expires_in: Option<i64>,
) -> Result<ApiToken, Error> {
    let row = sqlx::query_as!(
        TokenRow,
        r#"insert into api_tokens (id, tenant_id, name, role, prefix, secret_hash, created_by,
                                   expires_at)
           values ($1, $2, $3, $4, $5, $6, $7,
                   now() + make_interval(secs => $8::bigint))
           returning id, tenant_id, name, role, prefix, created_by, created_at, expires_at,
                     revoked_at, revoked_by, last_used_at"#,
        t.id.0,
        t.tenant.as_str(),
        t.name,
        t.role,
        t.prefix,
        secret_hash,
        t.created_by,
        expires_in,
    )
    .fetch_one(pool)
    .await;
    match row {
        Ok(r) => Ok(r.into()),
        Err(sqlx::Error::Database(e)) if e.constraint() == Some("api_tokens_name") => {
            Err(Error::AlreadyExists {
                kind: "token",
                field: "name".to_owned(),
            })
        }
        Err(e) => Err(e).ctx("storing a token"),
    }
}

/// A token of the scope's tenant, revoked or not.
pub async fn get(pool: &PgPool, id: TokenId) -> Result<Option<ApiToken>, Error> {
    Ok(sqlx::query_as!(
        TokenRow,
        r#"select id, tenant_id, name, role, prefix, created_by, created_at, expires_at,
                  revoked_at, revoked_by, last_used_at
           from api_tokens where id = $1"#,
        id.0
    )
    .fetch_optional(pool)
    .await
    .ctx("reading a token")?
    .map(Into::into))
}

/// The scope's tenant's tokens, newest first: the live ones, and the
/// revoked ones too when `revoked`.
pub async fn list(pool: &PgPool, revoked: bool) -> Result<Vec<ApiToken>, Error> {
    Ok(sqlx::query_as!(
        TokenRow,
        r#"select id, tenant_id, name, role, prefix, created_by, created_at, expires_at,
                  revoked_at, revoked_by, last_used_at
           from api_tokens where $1 or revoked_at is null
           order by created_at desc, id desc
           limit 1000"#,
        revoked
    )
    .fetch_all(pool)
    .await
    .ctx("listing tokens")?
    .into_iter()
    .map(Into::into)
    .collect())
}

/// Revokes a live token of the scope's tenant; the token, or `None` when
/// it is unknown or revoked already.
pub async fn revoke(pool: &PgPool, id: TokenId, by: &str) -> Result<Option<ApiToken>, Error> {
    Ok(sqlx::query_as!(
        TokenRow,
        r#"update api_tokens set revoked_at = now(), revoked_by = $2
           where id = $1 and revoked_at is null
           returning id, tenant_id, name, role, prefix, created_by, created_at, expires_at,
                     revoked_at, revoked_by, last_used_at"#,
        id.0,
        by
    )
    .fetch_optional(pool)
    .await
    .ctx("revoking a token")?
    .map(Into::into))
}

/// The live token whose secret hashes to `secret_hash` (neither revoked
/// nor expired, by the database's clock), whatever its tenant: the system
/// scope's read of authentication. Its last use is renewed when a minute
/// old, so a token used all day writes its row once a minute.
pub async fn authenticate(pool: &PgPool, secret_hash: &[u8]) -> Result<Option<ApiToken>, Error> {
    let found = sqlx::query_as!(
        TokenRow,
        r#"select id, tenant_id, name, role, prefix, created_by, created_at, expires_at,
                  revoked_at, revoked_by, last_used_at
           from api_tokens
           where secret_hash = $1 and revoked_at is null
             and (expires_at is null or expires_at > now())"#,
        secret_hash
    )
    .fetch_optional(pool)
    .await
    .ctx("authenticating a token")?;
    let Some(row) = found else { return Ok(None) };
    let stale = row
        .last_used_at
        .is_none_or(|t| chrono::Utc::now() - t > chrono::Duration::minutes(1));
    if stale {
        sqlx::query!(
            r#"update api_tokens set last_used_at = now()
               where id = $1 and (last_used_at is null
                                  or last_used_at < now() - interval '1 minute')"#,
            row.id
        )
        .execute(pool)
        .await
        .ctx("recording a token's use")?;
    }
    Ok(Some(row.into()))
}
