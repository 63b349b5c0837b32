//! A database outage: which errors mean PostgreSQL cannot be reached (they
//! become `503 unavailable`, not `500 service_error`), and the circuit
//! breaker that, once one was seen, answers at once for a short while
//! instead of making every request wait for a connection that will not come.
//!
//! The breaker is the API's ([`Breaker`]); a request runs under it
//! ([`watched`]) and every outage error its queries meet trips it. While it
//! is open, [`Breaker::check`] refuses at once; when the pause is over the
//! next requests try the database again, and the first that fails opens it
//! once more.
//!
//! An outage breaks every pooled connection at once (PostgreSQL restarted,
//! failed over, the network cut), and a broken connection only says so when
//! it is used: one after another, requests would each meet one, long after
//! the database is back. So the request that tripped the breaker, before it
//! answers, tests the idle connections of the pools it watches, drops the
//! broken ones, and tries a fresh one: if the database answers, the breaker
//! closes at once.

use meson_core::Error;
use sqlx::PgPool;
use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long testing one connection, or making a fresh one, may take after
/// an outage error: a database that answers does so well within it.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// How often a request waiting for the database asks it again.
const PROBE_EVERY: Duration = Duration::from_millis(200);

/// What the refusals name.
pub const WHAT: &str = "the database";

/// Seconds a client should wait: the breaker's pause, rounded up.
fn retry_after(pause: Duration) -> u64 {
    pause.as_secs_f64().ceil().max(1.0) as u64
}

/// True when `e` says PostgreSQL cannot be reached or is not serving (no
/// connection within the acquire timeout, a broken connection, a server
/// shutting down or starting up, too many connections), not that a query
/// was wrong.
pub fn is_outage(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // 08: connection exception; 57P01-57P03: admin or crash
            // shutdown, cannot connect now; 53300: too many connections;
            // 25006: a write reached a server that is read-only, a standby
            // still being promoted or a primary being demoted (a failover
            // under way).
            code.starts_with("08")
                || matches!(&*code, "57P01" | "57P02" | "57P03" | "53300" | "25006")
        }),
        _ => false,
    }
}

/// The error of a failed database call: an outage (which trips the
/// breaker the task runs under, if any), or an opaque internal error.
pub fn error(context: &'static str, e: sqlx::Error) -> Error {
    if !is_outage(&e) {
        return Error::internal_from(context, e);
    }
    let pause = BREAKER
        .try_with(|b| {
            b.trip(context, &e);
            b.pause
        })
        .unwrap_or(DEFAULT_PAUSE);
    Error::Outage {
        what: WHAT,
        retry_after: retry_after(pause),
        source: Some(Box::new(e)),
    }
}

/// How long a breaker stays open by default.
pub const DEFAULT_PAUSE: Duration = Duration::from_secs(2);

/// How long a request waits for the database by default, in all, when it
/// meets it unreachable before touching it (see [`Breaker::wait_closed`]):
/// longer than a planned switchover takes, far shorter than a client's
/// patience.
pub const DEFAULT_HOLD: Duration = Duration::from_secs(5);

/// Opens when the database is found unreachable; refuses at once while
/// open.
#[derive(Debug)]
pub struct Breaker {
    pause: Duration,
    /// How long a request may wait for an open breaker to close.
    hold: Duration,
    open_until: Mutex<Option<Instant>>,
    /// The pools an outage makes suspect.
    pools: Vec<PgPool>,
    /// Tripped since the pools were last tested.
    suspect: AtomicBool,
    /// One test of the pools at a time.
    testing: tokio::sync::Mutex<()>,
}

impl Breaker {
    /// A breaker that tests no pool.
    pub fn new(pause: Duration) -> Arc<Breaker> {
        Breaker::watching(pause, Vec::new())
    }

    /// A breaker whose trips test `pools` (see the module's summary).
    pub fn watching(pause: Duration, pools: Vec<PgPool>) -> Arc<Breaker> {
        Arc::new(Breaker {
            pause,
            hold: Duration::ZERO,
            open_until: Mutex::new(None),
            pools,
            suspect: AtomicBool::new(false),
            testing: tokio::sync::Mutex::new(()),
        })
    }

    /// The same breaker, whose requests wait up to `hold` for the database
    /// (see [`Breaker::wait_closed`]).
    pub fn with_hold(pause: Duration, hold: Duration, pools: Vec<PgPool>) -> Arc<Breaker> {
        let mut b = Breaker::watching(pause, pools);
        Arc::get_mut(&mut b).expect("new").hold = hold;
        b
    }

    /// How long a request may wait for the database, in all.
    pub fn hold(&self) -> Duration {
        self.hold
    }

    /// Waits until the breaker is closed, or its pause is over, for at most
    /// `limit`; true when the database may be tried again. A request that
    /// met the database unreachable before touching it (so that running
    /// it again cannot do anything twice) waits here instead of failing:
    /// a failover or a planned switchover, seconds long, then costs a
    /// delay, not an error.
    pub async fn wait_closed(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if self.check().is_ok() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            // Ask the database rather than sit out the pause: the wait ends
            // as soon as it answers. One waiter asks at a time.
            let asked = match self.testing.try_lock() {
                Ok(_one) => {
                    self.probe().await;
                    true
                }
                Err(_) => false,
            };
            if !asked || self.check().is_err() {
                let left = deadline.saturating_duration_since(Instant::now());
                tokio::time::sleep(left.min(PROBE_EVERY)).await;
            }
        }
    }

    /// Pause in whole seconds, as `Retry-After` says it.
    pub fn retry_after(&self) -> u64 {
        retry_after(self.pause)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.open_until.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `unavailable` while open; `Ok` when the database may be tried.
    pub fn check(&self) -> Result<(), Error> {
        match *self.state() {
            Some(until) if Instant::now() < until => Err(Error::Outage {
                what: WHAT,
                retry_after: retry_after(self.pause),
                source: None,
            }),
            _ => Ok(()),
        }
    }

    /// True while open.
    pub fn is_open(&self) -> bool {
        self.check().is_err()
    }

    /// Opens for the pause (again), saying so when it was closed.
    pub fn trip(&self, context: &str, cause: &sqlx::Error) {
        let mut state = self.state();
        let now = Instant::now();
        if state.is_none_or(|until| until <= now) {
            tracing::error!(
                error = %cause,
                while_ = context,
                pause_ms = self.pause.as_millis() as u64,
                "the database is unreachable: answering 503 unavailable"
            );
            metrics::counter!("meson_database_outages_total").increment(1);
        }
        *state = Some(now + self.pause);
        self.suspect.store(true, Ordering::Release);
    }

    /// Once a watched call is done: if it tripped the breaker, tests the
    /// pools.
    async fn after_trip(&self) {
        if self.suspect.load(Ordering::Acquire) {
            self.test_pools().await;
        }
    }

    /// After a trip: drops the watched pools' broken idle connections, and
    /// closes the breaker if a fresh connection answers.
    async fn test_pools(&self) {
        if self.pools.is_empty() {
            return;
        }
        let _one = self.testing.lock().await;
        if !self.suspect.swap(false, Ordering::AcqRel) {
            return;
        }
        self.probe().await;
    }

    /// Drops the watched pools' broken idle connections, and closes the
    /// breaker if a fresh connection answers. The caller holds `testing`.
    async fn probe(&self) {
        if self.pools.is_empty() {
            return;
        }
        let mut dropped = 0;
        for pool in &self.pools {
            dropped += drop_broken(pool).await;
        }
        let answers = tokio::time::timeout(PROBE_TIMEOUT, async {
            let mut conn = self.pools[0].acquire().await?;
            sqlx::Connection::ping(&mut *conn).await
        })
        .await
        .is_ok_and(|r| r.is_ok());
        if answers {
            *self.state() = None;
            tracing::warn!(
                dropped,
                "the database answers again: broken connections dropped, requests served"
            );
        } else {
            tracing::info!(dropped, "the database does not answer yet");
        }
    }
}

/// Pings every idle connection of `pool` and drops those that fail; how
/// many it dropped.
pub async fn drop_broken(pool: &PgPool) -> usize {
    let mut kept = Vec::new();
    let mut dropped = 0;
    for _ in 0..pool.num_idle() {
        let Some(mut conn) = pool.try_acquire() else {
            break;
        };
        match tokio::time::timeout(PROBE_TIMEOUT, sqlx::Connection::ping(&mut *conn)).await {
            Ok(Ok(())) => kept.push(conn),
            _ => {
                conn.close_on_drop();
                dropped += 1;
            }
        }
    }
    // Back to the pool, tested.
    drop(kept);
    dropped
}

tokio::task_local! {
    static BREAKER: Arc<Breaker>;
    static CONNECTED: Arc<AtomicBool>;
}

/// Runs `f` under `breaker`: outage errors its queries meet trip it, and
/// then, before `f`'s answer is given, the breaker tests its pools.
pub async fn watched<F: Future>(breaker: Arc<Breaker>, f: F) -> F::Output {
    let out = BREAKER.scope(breaker.clone(), f).await;
    breaker.after_trip().await;
    out
}

/// [`watched`], and whether `f` was handed a live database connection
/// (one that answered, or a fresh one): until then nothing it asked of the
/// database can have happened, so it may be run again.
pub async fn watched_connecting<F: Future>(breaker: Arc<Breaker>, f: F) -> (F::Output, bool) {
    let connected = Arc::new(AtomicBool::new(false));
    let out = BREAKER
        .scope(breaker.clone(), CONNECTED.scope(connected.clone(), f))
        .await;
    breaker.after_trip().await;
    (out, connected.load(Ordering::Acquire))
}

/// What the pools' hooks call, in the acquiring task, as they hand out a
/// connection: a flag that the connection is live (see
/// [`watched_connecting`]), set by the caller once it is.
pub fn connecting() -> Option<Arc<AtomicBool>> {
    CONNECTED.try_with(Arc::clone).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_failures_are_outages_and_query_errors_are_not() {
        assert!(is_outage(&sqlx::Error::PoolTimedOut));
        assert!(is_outage(&sqlx::Error::Io(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused
        ))));
        assert!(!is_outage(&sqlx::Error::RowNotFound));
        assert!(!is_outage(&sqlx::Error::ColumnNotFound("x".into())));
    }

    /// A write that reaches a read-only server (a standby being promoted)
    /// is an outage; an error of the statement itself is not.
    #[tokio::test]
    async fn a_read_only_server_is_an_outage_a_bad_statement_is_not() {
        let db = crate::testing::TestDatabase::new().await;
        let mut tx = db.pool.begin().await.unwrap();
        sqlx::raw_sql("set transaction read only")
            .execute(&mut *tx)
            .await
            .unwrap();
        let e = sqlx::raw_sql("create temp table t (x int)")
            .execute(&mut *tx)
            .await
            .unwrap_err();
        assert!(is_outage(&e), "{e}");
        drop(tx);
        let e = sqlx::raw_sql("select 1/0")
            .execute(&db.pool)
            .await
            .unwrap_err();
        assert!(!is_outage(&e), "{e}");
    }

    #[tokio::test]
    async fn a_tripped_breaker_refuses_until_its_pause_is_over() {
        let b = Breaker::new(Duration::from_millis(200));
        assert!(b.check().is_ok());
        let e = watched(b.clone(), async {
            error("reading", sqlx::Error::PoolTimedOut)
        })
        .await;
        assert_eq!(e.code(), "unavailable");
        assert_eq!(e.retry_after(), Some(1));
        let Err(refused) = b.check() else {
            panic!("open after an outage error")
        };
        assert_eq!(refused.code(), "unavailable");
        // Not an outage: the breaker stays as it is.
        let b2 = Breaker::new(Duration::from_secs(60));
        let e = watched(b2.clone(), async {
            error("reading", sqlx::Error::RowNotFound)
        })
        .await;
        assert_eq!(e.code(), "service_error");
        assert!(b2.check().is_ok());
        // The pause ends: the database may be tried again.
        for _ in 0..100 {
            if b.check().is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the breaker never closed");
    }
}
