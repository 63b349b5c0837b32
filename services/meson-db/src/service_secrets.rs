//! meson's own secrets (not a tenant's), sealed by the caller.

use crate::DbResult;
use meson_core::Error;

/// The sealed secret `name`, if made.
pub async fn get(db: impl sqlx::PgExecutor<'_>, name: &str) -> Result<Option<Vec<u8>>, Error> {
    sqlx::query_scalar!("select sealed from service_secrets where name = $1", name)
        .fetch_optional(db)
        .await
        .ctx("reading a service secret")
}

/// Stores `sealed` as `name` unless a secret of that name exists (replicas
/// racing to make it agree on the first one); returns the one stored.
pub async fn get_or_insert(
    db: &crate::PgPool,
    name: &str,
    sealed: &[u8],
) -> Result<Vec<u8>, Error> {
    sqlx::query!(
        "insert into service_secrets (name, sealed) values ($1, $2) on conflict (name) do nothing",
        name,
        sealed
    )
    .execute(db)
    .await
    .ctx("storing a service secret")?;
    get(db, name)
        .await?
        .ok_or_else(|| Error::internal("a service secret vanished"))
}
