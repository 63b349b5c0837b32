//! Every SQL statement of meson, the migrator and the test database helper.
//!
//! One file per resource. Queries use the compile-checked `query!` family;
//! their metadata lives in `.sqlx/` (regenerate with `scripts/sqlx-prepare`).
//! Rows are converted to `meson-core` domain types here and nowhere else.

pub mod actions;
pub mod audit;
pub mod backups;
pub mod cluster_upgrades;
pub mod clusters;
pub mod consoles;
pub mod idempotency;
pub mod images;
pub mod jobs;
mod list;
pub mod members;
pub mod networks;
pub mod node_health;
pub mod node_pools;
pub mod organizations;
pub mod orphans;
pub mod outage;
pub mod plans;
pub mod port_forwards;
pub mod quotas;
pub mod reservations;
pub mod scope;
pub mod service_secrets;
pub mod ssh_keys;
pub mod targets;
pub mod testing;
pub mod tokens;
pub mod usage;
pub mod vms;
pub mod volumes;

use meson_core::Error;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::str::FromStr;
use std::time::Duration;

pub use list::{
    Filter, ListFilter, Listable, Listed, Renamed, Source, Start, bad_cursor, page, page_at, rename,
};
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

/// True when PostgreSQL aborted the transaction behind `e` to break a
/// deadlock (`40P01`) or a serialization failure (`40001`): nothing of it
/// was written, and running it again is safe.
pub fn is_deadlock(e: &Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(sqlx::Error::Database(db)) = c.downcast_ref::<sqlx::Error>()
            && db
                .code()
                .is_some_and(|code| matches!(&*code, "40P01" | "40001"))
        {
            return true;
        }
        cause = c.source();
    }
    false
}

/// Runs `f`, and again (three times in all at most) while its transaction
/// is the victim of a deadlock with another (a workflow's, on the same
/// rows): PostgreSQL's advice for deadlock victims.
pub async fn retry_deadlocks<T, F, Fut>(mut f: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    let mut tries = 0;
    loop {
        tries += 1;
        match f().await {
            Err(e) if tries < 3 && is_deadlock(&e) => {
                tracing::info!(error = %e, tries, "deadlock victim: running the transaction again");
            }
            other => return other,
        }
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

#[cfg(test)]
// The test makes a deadlock on a table of its own, with SQL built at run time.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::testing::TestDatabase;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A real deadlock: two transactions lock two rows in opposite orders;
    /// PostgreSQL aborts one of them. Its error, as meson-db maps it.
    async fn deadlock_error(db: &TestDatabase) -> Error {
        sqlx::query("create table dl (id int primary key, v int)")
            .execute(&db.pool)
            .await
            .unwrap();
        sqlx::query("insert into dl values (1, 0), (2, 0)")
            .execute(&db.pool)
            .await
            .unwrap();
        let mut a = db.pool.begin().await.unwrap();
        let mut b = db.pool.begin().await.unwrap();
        let set = |id: i32| sqlx::query("update dl set v = v + 1 where id = $1").bind(id);
        set(1).execute(&mut *a).await.unwrap();
        set(2).execute(&mut *b).await.unwrap();
        let (ra, rb) = tokio::join!(set(2).execute(&mut *a), set(1).execute(&mut *b));
        match (ra, rb) {
            (Err(e), _) | (_, Err(e)) => Err::<(), _>(e).ctx("updating dl").unwrap_err(),
            _ => panic!("no deadlock"),
        }
    }

    #[tokio::test]
    async fn a_deadlock_victim_is_known_and_runs_again() {
        let db = TestDatabase::new().await;
        let e = deadlock_error(&db).await;
        assert!(is_deadlock(&e), "{e:?}");
        assert!(!is_deadlock(&Error::internal("something else")));
        let refused = sqlx::query("insert into dl values (1, 0)")
            .execute(&db.pool)
            .await
            .unwrap_err();
        assert!(!is_deadlock(
            &Err::<(), _>(refused).ctx("inserting").unwrap_err()
        ));

        // The victim runs again, and only the victim.
        let calls = AtomicUsize::new(0);
        let deadlocked = std::sync::Mutex::new(Some(e));
        let r = retry_deadlocks(|| {
            calls.fetch_add(1, Ordering::SeqCst);
            let first = deadlocked.lock().unwrap().take();
            async move { first.map_or(Ok(7), Err) }
        })
        .await;
        assert_eq!(r.unwrap(), 7);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        let calls = AtomicUsize::new(0);
        let r: Result<(), Error> = retry_deadlocks(|| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(Error::internal("not a deadlock")) }
        })
        .await;
        assert!(r.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
