//! AtomOS targets: registered endpoint sets.

use crate::{DbResult, corrupt};
use meson_core::target::Target;
use meson_core::{Error, TargetId};
use sqlx::PgPool;
use uuid::Uuid;

struct TargetRow {
    id: Uuid,
    name: String,
    host: String,
    compute_port: i32,
    storage_port: i32,
    network_port: i32,
    auth_port: i32,
    provider: String,
    region: String,
    continent: String,
    enabled: bool,
}

fn port(p: i32) -> Result<u16, Error> {
    u16::try_from(p).map_err(|_| corrupt("port", p))
}

impl TryFrom<TargetRow> for Target {
    type Error = Error;
    fn try_from(r: TargetRow) -> Result<Self, Error> {
        Ok(Target {
            id: TargetId(r.id),
            name: r.name,
            host: r.host,
            compute_port: port(r.compute_port)?,
            storage_port: port(r.storage_port)?,
            network_port: port(r.network_port)?,
            auth_port: port(r.auth_port)?,
            provider: r.provider,
            region: r.region,
            continent: r.continent,
            enabled: r.enabled,
        })
    }
}

/// Registers a target, or updates the one with the same name (its id is kept).
pub async fn upsert(pool: &PgPool, t: &Target) -> Result<TargetId, Error> {
    let id = sqlx::query_scalar!(
        r#"insert into atomos_targets
             (id, name, host, compute_port, storage_port, network_port, auth_port,
              provider, region, continent, enabled)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
           on conflict (name) do update set
             host = excluded.host, compute_port = excluded.compute_port,
             storage_port = excluded.storage_port, network_port = excluded.network_port,
             auth_port = excluded.auth_port, provider = excluded.provider,
             region = excluded.region, continent = excluded.continent,
             enabled = excluded.enabled
           returning id"#,
        t.id.0,
        t.name,
        t.host,
        i32::from(t.compute_port),
        i32::from(t.storage_port),
        i32::from(t.network_port),
        i32::from(t.auth_port),
        t.provider,
        t.region,
        t.continent,
        t.enabled,
    )
    .fetch_one(pool)
    .await
    .ctx("upserting an AtomOS target")?;
    Ok(TargetId(id))
}

/// Every target, enabled or not, by name.
pub async fn list(pool: &PgPool) -> Result<Vec<Target>, Error> {
    sqlx::query_as!(
        TargetRow,
        r#"select id, name, host, compute_port, storage_port, network_port, auth_port,
                  provider, region, continent, enabled
           from atomos_targets order by name"#
    )
    .fetch_all(pool)
    .await
    .ctx("listing AtomOS targets")?
    .into_iter()
    .map(Target::try_from)
    .collect()
}

/// One target.
pub async fn get(pool: &PgPool, id: TargetId) -> Result<Target, Error> {
    sqlx::query_as!(
        TargetRow,
        r#"select id, name, host, compute_port, storage_port, network_port, auth_port,
                  provider, region, continent, enabled
           from atomos_targets where id = $1"#,
        id.0
    )
    .fetch_optional(pool)
    .await
    .ctx("fetching an AtomOS target")?
    .ok_or_else(|| Error::not_found("target", id))?
    .try_into()
}

/// Registers a new target; a taken name is a `uniqueness_error`.
pub async fn insert(pool: &PgPool, t: &Target) -> Result<(), Error> {
    let res = sqlx::query!(
        r#"insert into atomos_targets
             (id, name, host, compute_port, storage_port, network_port, auth_port,
              provider, region, continent, enabled)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"#,
        t.id.0,
        t.name,
        t.host,
        i32::from(t.compute_port),
        i32::from(t.storage_port),
        i32::from(t.network_port),
        i32::from(t.auth_port),
        t.provider,
        t.region,
        t.continent,
        t.enabled,
    )
    .execute(pool)
    .await;
    crate::unique_violation(res, "atomos_targets_name_key", "target", "name")?
        .ctx("registering an AtomOS target")?;
    Ok(())
}

/// Rewrites a target's endpoint and state (its name, provider, region and
/// continent are what VMs placed there refer to: they stay).
pub async fn update(pool: &PgPool, t: &Target) -> Result<(), Error> {
    let done = sqlx::query!(
        r#"update atomos_targets set host = $2, compute_port = $3, storage_port = $4,
             network_port = $5, auth_port = $6, enabled = $7
           where id = $1"#,
        t.id.0,
        t.host,
        i32::from(t.compute_port),
        i32::from(t.storage_port),
        i32::from(t.network_port),
        i32::from(t.auth_port),
        t.enabled,
    )
    .execute(pool)
    .await
    .ctx("updating an AtomOS target")?;
    if done.rows_affected() == 0 {
        return Err(Error::not_found("target", t.id));
    }
    Ok(())
}
