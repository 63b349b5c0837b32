//! A fresh, migrated database per test, dropped when the test ends.
//!
//! Each test database is owned by [`APP_ROLE`], an ordinary role (no
//! superuser, no `BYPASSRLS`), and tests connect as it: row-level security
//! binds the tests exactly as it binds meson in production.

use crate::{MIGRATOR, PgPool};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, Executor, PgConnection};
use std::str::FromStr;

/// The role test databases belong to and tests connect as.
pub const APP_ROLE: &str = "meson_test_app";

/// The server tests create their databases on: `MESON_TEST_DATABASE_URL`,
/// else `DATABASE_URL`, else the local PostgreSQL.
pub fn server_url() -> String {
    std::env::var("MESON_TEST_DATABASE_URL")
        .or_else(|_| std::env::var("DATABASE_URL"))
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

fn with_database(url: &str, db: &str) -> String {
    // Replace the path component (the database name), keep any query string.
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let cut = base
        .rfind('/')
        .filter(|&i| i > "postgres://".len())
        .unwrap_or(base.len());
    let mut out = format!("{}/{db}", &base[..cut]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

pub struct TestDatabase {
    pub name: String,
    /// The database as [`APP_ROLE`] reaches it.
    pub url: String,
    /// A system-scope pool (see [`crate::scope`]): every tenant's rows.
    pub pool: PgPool,
    server: String,
}

/// Creates a login role that row-level security binds (no superuser, no
/// `BYPASSRLS`) unless it exists; callers racing to create it agree.
pub async fn create_app_role_if_missing(
    conn: &mut PgConnection,
    name: &str,
    password: &str,
) -> Result<(), meson_core::Error> {
    let plain = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    if !plain(name) || !plain(password) {
        return Err(meson_core::Error::invalid(
            "role",
            "name and password must be lowercase identifiers",
        ));
    }
    let exists = sqlx::query_scalar!(
        r#"select exists(select 1 from pg_roles where rolname = $1) as "exists!""#,
        name
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(|e| meson_core::Error::internal_from("looking up a role", e))?;
    if exists {
        return Ok(());
    }
    let sql = format!(
        "do $$ begin create role {name} login password '{password}' nosuperuser nobypassrls; \
         exception when duplicate_object or unique_violation then null; end $$"
    );
    conn.execute(sql.as_str())
        .await
        .map_err(|e| meson_core::Error::internal_from("creating a role", e))?;
    Ok(())
}

/// `server` with the test role's credentials and database `db`.
fn app_url(server: &str, db: &str) -> String {
    let opts = PgConnectOptions::from_str(&with_database(server, db))
        .expect("MESON_TEST_DATABASE_URL parses")
        .username(APP_ROLE)
        .password(APP_ROLE);
    opts.to_url_lossy().to_string()
}

impl TestDatabase {
    /// Creates `meson_test_<random>` and runs every migration on it.
    pub async fn new() -> TestDatabase {
        let server = server_url();
        let name = format!("meson_test_{}", uuid::Uuid::new_v4().simple());
        let mut admin = PgConnection::connect(&server)
            .await
            .unwrap_or_else(|e| panic!("tests need PostgreSQL at {server}: {e}"));
        create_app_role_if_missing(&mut admin, APP_ROLE, APP_ROLE)
            .await
            .expect("create the test role");
        admin
            .execute(format!("create database {name} owner {APP_ROLE}").as_str())
            .await
            .expect("create test db");
        admin.close().await.ok();
        let url = app_url(&server, &name);
        let pool = crate::connect(&url, 10).await.expect("connect test db");
        MIGRATOR.run(&pool).await.expect("migrate test db");
        TestDatabase {
            name,
            url,
            pool,
            server,
        }
    }

    /// A pool as the API has one: each connection sees the rows of the
    /// asking task's [`crate::scope::Scope`], and none outside one.
    pub fn api_pool(&self) -> PgPool {
        crate::scope::connect_scoped(&self.url, 10).expect("scoped pool")
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // Drop may run inside the test's runtime, which this thread blocks
        // while it waits: so the cleanup must not touch the pool (its sockets
        // belong to that runtime). `with (force)` ends its sessions server-side.
        let (server, name) = (self.server.clone(), self.name.clone());
        let cleanup = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                rt.block_on(async {
                    if let Ok(mut c) = PgConnection::connect(&server).await {
                        let sql = format!("drop database if exists {name} with (force)");
                        let _ = c.execute(sql.as_str()).await;
                    }
                });
            }
        });
        let _ = cleanup.join();
    }
}

/// Creates a database owned by `owner` unless it exists (dev mode's
/// private cluster).
pub async fn create_database_if_missing(
    pool: &PgPool,
    name: &str,
    owner: &str,
) -> Result<(), meson_core::Error> {
    if ![name, owner].iter().all(|n| {
        n.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    }) {
        return Err(meson_core::Error::invalid(
            "database",
            "must be a lowercase identifier",
        ));
    }
    let exists = sqlx::query_scalar!(
        "select exists(select 1 from pg_database where datname = $1) as \"e!\"",
        name
    )
    .fetch_one(pool)
    .await
    .map_err(|e| meson_core::Error::internal_from("checking for the database", e))?;
    if !exists {
        pool.execute(format!("create database {name} owner {owner}").as_str())
            .await
            .map_err(|e| meson_core::Error::internal_from("creating the database", e))?;
    }
    Ok(())
}

/// Holds every VM row out of reach until `tx` ends: a request that reads
/// VMs waits (for tests of timeouts).
pub async fn lock_vms(tx: &mut crate::Tx<'_>) -> Result<(), sqlx::Error> {
    sqlx::query!("lock table vms in access exclusive mode")
        .execute(&mut **tx)
        .await
        .map(|_| ())
}

/// Whether some session of the current database comes to wait for a lock
/// within about ten seconds (polled): for tests that a statement waits for
/// another transaction.
pub async fn a_session_waits_for_a_lock(pool: &PgPool) -> bool {
    for _ in 0..200 {
        let waiting = sqlx::query_scalar!(
            r#"select count(*) as "n!" from pg_stat_activity
               where datname = current_database() and wait_event_type = 'Lock'"#
        )
        .fetch_one(pool)
        .await
        .expect("pg_stat_activity");
        if waiting > 0 {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    false
}

/// Moves console `id`'s expiry a second into the past (its minute over).
pub async fn expire_console(pool: &PgPool, id: uuid::Uuid) -> Result<(), sqlx::Error> {
    crate::scope::system(
        sqlx::query!(
            "update consoles set expires_at = now() - interval '1 second' where id = $1",
            id
        )
        .execute(pool),
    )
    .await
    .map(|_| ())
}

/// Makes console `id` an open session whose relay last recorded it 31 s
/// ago, as when the process relaying it stopped.
pub async fn orphan_console(pool: &PgPool, id: uuid::Uuid) -> Result<(), sqlx::Error> {
    crate::scope::system(
        sqlx::query!(
            "update consoles set status = 'open', closed_at = null, close_reason = null,
                    seen_at = now() - interval '31 seconds'
             where id = $1",
            id
        )
        .execute(pool),
    )
    .await
    .map(|_| ())
}

/// Moves token `id`'s expiry a second into the past.
pub async fn expire_token(pool: &PgPool, id: uuid::Uuid) -> Result<(), sqlx::Error> {
    crate::scope::system(
        sqlx::query!(
            "update api_tokens set expires_at = now() - interval '1 second' where id = $1",
            id
        )
        .execute(pool),
    )
    .await
    .map(|_| ())
}

/// What meson stores of invitation `id`'s token (a test proves it is a
/// hash, never the token).
pub async fn invitation_secret(pool: &PgPool, id: uuid::Uuid) -> Result<Vec<u8>, sqlx::Error> {
    crate::scope::system(
        sqlx::query_scalar!("select secret_hash from invitations where id = $1", id)
            .fetch_one(pool),
    )
    .await
}

/// Freezes the metering clock at `at` (`meson_clock()`: usage intervals,
/// statements and usage queries read it), so that a test drives a
/// simulated month through real processes that all share that clock.
pub async fn freeze_clock(
    pool: &PgPool,
    at: chrono::DateTime<chrono::Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "insert into meson_clock (only_row, frozen_at) values (true, $1)
         on conflict (only_row) do update set frozen_at = excluded.frozen_at",
        at
    )
    .execute(pool)
    .await
    .map(|_| ())
}

/// Tries to change closed statement `id`'s total, as a buggy or malicious
/// writer would: the database refuses.
pub async fn rewrite_statement_total(pool: &PgPool, id: &str) -> Result<(), sqlx::Error> {
    let id: uuid::Uuid = id.parse().map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    sqlx::query!("update statements set total = total + 1 where id = $1", id)
        .execute(pool)
        .await
        .map(|_| ())
}

/// The node VMs of cluster `cluster`: each one's id, hourly price as a
/// decimal (as the VM row holds it) and metered disk GB (its cloud-init
/// disk aside), for a test's own reckoning of what they cost.
pub async fn cluster_vm_prices(
    pool: &PgPool,
    cluster: uuid::Uuid,
) -> Result<Vec<(uuid::Uuid, String, i64)>, sqlx::Error> {
    let rows = crate::scope::system(
        sqlx::query!(
            r#"select v.id, v.price_hourly::numeric::text as "price!",
                      coalesce(sum(x.size_gb) filter (where x.kind <> 'cloudinit'), 0)::bigint
                          as "disk_gb!"
               from vms v left join volumes x on x.vm_id = v.id
               where v.cluster_id = $1 and v.deleted_at is null
               group by v.id order by v.id"#,
            cluster
        )
        .fetch_all(pool),
    )
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.id, r.price, r.disk_gb))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn swaps_database_name() {
        assert_eq!(
            with_database("postgres://u@h:5/postgres", "x"),
            "postgres://u@h:5/x"
        );
        assert_eq!(
            with_database("postgres://u@h:5/db?sslmode=disable", "x"),
            "postgres://u@h:5/x?sslmode=disable"
        );
        assert_eq!(with_database("postgres://u@h:5", "x"), "postgres://u@h:5/x");
    }
}
