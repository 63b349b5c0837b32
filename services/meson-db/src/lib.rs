//! Every SQL statement of meson, the migrator and the test database helper.
//!
//! One file per resource. Queries use the compile-checked `query!` family;
//! their metadata lives in `.sqlx/` (regenerate with `scripts/sqlx-prepare`).
//! Rows are converted to `meson-core` domain types here and nowhere else.

pub mod actions;
pub mod audit;
pub mod cluster_upgrades;
pub mod clusters;
pub mod idempotency;
pub mod jobs;
mod list;
pub mod networks;
pub mod node_health;
pub mod node_pools;
pub mod outage;
pub mod quotas;
pub mod reservations;
pub mod scope;
pub mod service_secrets;
pub mod targets;
pub mod testing;
pub mod vms;
pub mod volumes;

use meson_core::Error;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::str::FromStr;
use std::time::Duration;

pub use list::{ListFilter, Listed, Start, bad_cursor};
pub use sqlx::{PgConnection, PgPool};
pub type Tx<'a> = sqlx::Transaction<'a, sqlx::Postgres>;

/// Migrations embedded from the repository's `migrations/`.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// Opens a pool in the system scope (every tenant's rows: workers, the
/// migrator; the API uses [`scope::connect_scoped`]). Statement timeouts keep
/// a stuck query from holding a worker forever.
pub async fn connect(url: &str, max_connections: u32) -> Result<PgPool, Error> {
    let opts = PgConnectOptions::from_str(url)
        .map_err(|e| Error::internal_from("invalid DATABASE_URL", e))?
        .application_name("meson")
        .options([
            ("statement_timeout", "30s"),
            (scope::SETTING, scope::SYSTEM),
        ]);
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(opts)
        .await
        .map_err(|e| Error::internal_from("connecting to PostgreSQL", e))
}

pub async fn migrate(pool: &PgPool) -> Result<(), Error> {
    MIGRATOR
        .run(pool)
        .await
        .map_err(|e| Error::internal_from("running migrations", e))
}

/// True when the database answers (an outage trips the task's breaker).
pub async fn ping(pool: &PgPool) -> bool {
    sqlx::query_scalar!("select 1 as \"one!\"")
        .fetch_one(pool)
        .await
        .ctx("pinging the database")
        .is_ok()
}

/// A connection of `pool` for several statements in a row (outside a
/// transaction).
pub async fn acquire(pool: &PgPool) -> Result<sqlx::pool::PoolConnection<sqlx::Postgres>, Error> {
    pool.acquire()
        .await
        .map_err(|e| outage::error("acquiring a connection", e))
}

pub async fn begin(pool: &PgPool) -> Result<Tx<'static>, Error> {
    pool.begin()
        .await
        .map_err(|e| outage::error("beginning a transaction", e))
}

pub async fn commit(tx: Tx<'_>) -> Result<(), Error> {
    tx.commit()
        .await
        .map_err(|e| outage::error("committing a transaction", e))
}

/// Attaches context to database errors: `unavailable` when the database
/// cannot be reached ([`outage`]), opaque internal errors otherwise.
pub(crate) trait DbResult<T> {
    fn ctx(self, context: &'static str) -> Result<T, Error>;
}

impl<T> DbResult<T> for Result<T, sqlx::Error> {
    fn ctx(self, context: &'static str) -> Result<T, Error> {
        self.map_err(|e| outage::error(context, e))
    }
}

/// A write that broke the unique index `constraint` becomes
/// `uniqueness_error` on `field`; any other result passes through.
pub(crate) fn unique_violation<T>(
    res: Result<T, sqlx::Error>,
    constraint: &str,
    kind: &'static str,
    field: &str,
) -> Result<Result<T, sqlx::Error>, Error> {
    match res {
        Err(sqlx::Error::Database(e)) if e.constraint() == Some(constraint) => {
            Err(Error::AlreadyExists {
                kind,
                field: field.to_owned(),
            })
        }
        other => Ok(other),
    }
}

/// Labels for an update's `labels = coalesce($n, labels)`: `None` keeps them.
pub(crate) fn labels_json(
    labels: Option<&meson_core::labels::Labels>,
) -> Result<Option<serde_json::Value>, Error> {
    labels
        .map(serde_json::to_value)
        .transpose()
        .map_err(|e| Error::internal_from("labels", e))
}

/// The end of a rename or relabel of resource `kind` `id` (after its
/// [`unique_violation`] check): no row touched is `not_found`.
pub(crate) fn updated(
    res: Result<sqlx::postgres::PgQueryResult, sqlx::Error>,
    kind: &'static str,
    id: impl std::fmt::Display,
    context: &'static str,
) -> Result<(), Error> {
    match res {
        Ok(r) if r.rows_affected() == 0 => Err(Error::not_found(kind, id)),
        other => other.map(|_| ()).ctx(context),
    }
}

/// A stored value that no longer parses: the schema's CHECKs should make this impossible.
pub(crate) fn corrupt(what: &'static str, value: impl std::fmt::Display) -> Error {
    Error::internal(format!("unexpected {what} in the database: {value}"))
}
