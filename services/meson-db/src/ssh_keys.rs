//! SSH keys: public keys a tenant keeps at meson.

use crate::{DbResult, corrupt};
use meson_core::labels::Labels;
use meson_core::ssh::SshKeyId;
use meson_core::ssh::{SshKey, StoredKey};
use meson_core::{Error, TenantId};
use sqlx::PgPool;
use uuid::Uuid;

/// A key as its queries read it.
#[derive(Debug, sqlx::FromRow)]
pub struct SshKeyRow {
    id: Uuid,
    tenant_id: String,
    name: String,
    public_key: String,
    fingerprint: String,
    labels: serde_json::Value,
    created_at: chrono::DateTime<chrono::Utc>,
}

impl TryFrom<SshKeyRow> for StoredKey {
    type Error = Error;
    fn try_from(r: SshKeyRow) -> Result<Self, Error> {
        Ok(StoredKey {
            id: SshKeyId(r.id),
            tenant: TenantId(r.tenant_id),
            name: r.name,
            key: SshKey::parse(&r.public_key).map_err(|e| corrupt("SSH key", e))?,
            fingerprint: r.fingerprint,
            labels: serde_json::from_value::<Labels>(r.labels)
                .map_err(|e| corrupt("SSH key labels", e))?,
            created: r.created_at,
        })
    }
}

/// Holds a live key's name once in its tenant.
const NAME_INDEX: &str = "ssh_keys_tenant_name";

/// A live key of the tenant's has this name or this key already.
fn taken<T>(res: Result<T, sqlx::Error>) -> Result<Result<T, sqlx::Error>, Error> {
    let res = crate::unique_violation(res, NAME_INDEX, "ssh_key", "name")?;
    crate::unique_violation(res, "ssh_keys_tenant_fingerprint", "ssh_key", "public_key")
}

pub async fn insert(pool: &PgPool, k: &StoredKey) -> Result<(), Error> {
    let labels = serde_json::to_value(&k.labels).map_err(|e| Error::internal_from("labels", e))?;
    let res = sqlx::query!(
        r#"insert into ssh_keys (id, tenant_id, name, public_key, fingerprint, labels, created_at)
           values ($1, $2, $3, $4, $5, $6, $7)"#,
        k.id.0,
        k.tenant.as_str(),
        k.name,
        k.key.as_str(),
        k.fingerprint,
        labels,
        k.created,
    )
    .execute(pool)
    .await;
    taken(res)?.map(|_| ()).ctx("inserting an SSH key")
}

/// A tenant's live key.
pub async fn get(
    db: impl sqlx::PgExecutor<'_>,
    tenant: &TenantId,
    id: SshKeyId,
) -> Result<StoredKey, Error> {
    sqlx::query_as!(
        SshKeyRow,
        r#"select id, tenant_id, name, public_key, fingerprint, labels, created_at
           from ssh_keys where id = $1 and tenant_id = $2 and deleted_at is null"#,
        id.0,
        tenant.as_str(),
    )
    .fetch_optional(db)
    .await
    .ctx("fetching an SSH key")?
    .ok_or_else(|| Error::not_found("ssh_key", id))?
    .try_into()
}

/// A tenant's live key by its id or its name, if there is one.
pub async fn find(
    pool: &PgPool,
    tenant: &TenantId,
    id_or_name: &str,
) -> Result<Option<StoredKey>, Error> {
    let id = id_or_name.parse::<Uuid>().ok();
    sqlx::query_as!(
        SshKeyRow,
        r#"select id, tenant_id, name, public_key, fingerprint, labels, created_at
           from ssh_keys
           where tenant_id = $1 and deleted_at is null and (id = $2 or name = $3)
           order by id = $2 desc limit 1"#,
        tenant.as_str(),
        id,
        id_or_name,
    )
    .fetch_optional(pool)
    .await
    .ctx("finding an SSH key")?
    .map(TryInto::try_into)
    .transpose()
}

/// How a key is renamed and relabelled ([`crate::rename`]).
pub const RENAMED: crate::Renamed = crate::Renamed {
    kind: "ssh_key",
    name_index: Some(NAME_INDEX),
    context: "updating an SSH key",
    also: "",
};

/// Forgets a live key: its name and key are free again. No live key:
/// `not_found`.
pub async fn delete(pool: &PgPool, tenant: &TenantId, id: SshKeyId) -> Result<(), Error> {
    let res = sqlx::query!(
        r#"update ssh_keys set deleted_at = now()
           where id = $1 and tenant_id = $2 and deleted_at is null"#,
        id.0,
        tenant.as_str(),
    )
    .execute(pool)
    .await
    .ctx("deleting an SSH key")?;
    if res.rows_affected() == 0 {
        return Err(Error::not_found("ssh_key", id));
    }
    Ok(())
}

/// What an SSH key list draws from: the tenant's live keys, filtered by
/// name and labels.
impl crate::Listable for StoredKey {
    type Row = SshKeyRow;
    type Filter = crate::ListFilter;
    const SOURCE: crate::Source = crate::Source {
        table: "ssh_keys",
        only: "",
        columns: "k.id, k.tenant_id, k.name, k.public_key, k.fingerprint, k.labels, k.created_at",
        joins: "join ssh_keys k on k.id = page.id",
        usage: None,
        listing: "listing SSH keys",
        counting: "counting SSH keys",
    };
}
