//! How a worker learns of new jobs without a notification per job.
//!
//! A notifying commit takes a cluster-wide lock in PostgreSQL, so a NOTIFY
//! per enqueued job serialises the producers' commits. Instead an enqueue
//! notifies only while some worker is registered as asleep (the
//! `job_sleepers` migration has the SQL side). A busy worker is not
//! registered: it looks at the queue whenever a job ends, or
//! [`IDLE_GRACE`] after it drained the queue. Once the queue stayed empty
//! that long, the worker registers, passes the gate (every producer that
//! may have looked before the registration committed has ended), looks a
//! last time, and sleeps until notified (or until its poll interval, the
//! fallback). The first job it claims ends the registration.

use meson_db::PgPool;
use sqlx::postgres::PgListener;
use std::time::{Duration, Instant};

/// The channel enqueues notify on.
const CHANNEL: &str = "meson_jobs";

/// How long the queue stays empty before the worker registers to be woken,
/// and how soon a worker that drained the queue looks again: short against
/// a pickup, long against the gaps between jobs of a busy queue.
pub const IDLE_GRACE: Duration = Duration::from_millis(2);

/// Where a worker stands with the producers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Not registered: enqueues do not notify for this worker.
    Awake,
    /// Registered, but the gate was not passed yet: a producer that may
    /// have looked before the registration is still running.
    Registered,
    /// Registered and past the gate: every job enqueued since either was
    /// seen by the last look or notifies.
    Asleep,
}

/// What a worker that found the queue empty does next.
pub enum Idle {
    /// Claim again now.
    LookAgain,
    /// Wait this long (or for a notification, or a job's end).
    Wait(Duration),
}

pub struct Wakeups {
    pool: PgPool,
    worker: String,
    listen: bool,
    /// The listening session; `None` when polling only (not listening, or
    /// the session was lost: then retried at each poll).
    listener: Option<PgListener>,
    state: State,
    /// Since when claims found the queue empty.
    empty_since: Option<Instant>,
    /// A registration of a lost session may be left behind.
    stale: bool,
    /// Times in a row the gate was closed: the worker asks again less
    /// often while a producer's transaction lasts.
    gate_closed: u32,
}

impl Wakeups {
    pub async fn new(pool: PgPool, worker: &str, listen: bool) -> Self {
        // A worker killed while asleep left its registration behind.
        if listen && let Err(e) = meson_db::jobs::forget_dead_sleepers(&pool).await {
            tracing::warn!(error = %e, "forgetting dead sleeping workers failed");
        }
        let mut w = Wakeups {
            pool,
            worker: worker.to_owned(),
            listen,
            listener: None,
            state: State::Awake,
            empty_since: None,
            stale: false,
            gate_closed: 0,
        };
        w.reconnect().await;
        w
    }

    /// Listens again if the session was lost.
    pub async fn reconnect(&mut self) {
        if !self.listen || self.listener.is_some() {
            return;
        }
        match PgListener::connect_with(&self.pool).await {
            Ok(mut l) => match l.listen(CHANNEL).await {
                Ok(()) => self.listener = Some(l),
                Err(e) => tracing::warn!(error = %e, "listening for jobs failed; polling"),
            },
            Err(e) => tracing::warn!(error = %e, "listening for jobs failed; polling"),
        }
    }

    /// The worker claimed jobs, or has no room for more: producers need
    /// not notify it.
    pub async fn busy(&mut self) {
        self.empty_since = None;
        self.gate_closed = 0;
        if self.state == State::Awake && !self.stale {
            return;
        }
        self.state = State::Awake;
        self.stale = false;
        let r = match self.listener.as_mut() {
            Some(l) => meson_db::jobs::unregister_sleeper(l, &self.worker).await,
            None => meson_db::jobs::unregister_sleeper(&self.pool, &self.worker).await,
        };
        if let Err(e) = r {
            // Left behind, it only makes enqueues notify.
            tracing::warn!(error = %e, "unregistering a sleeping worker failed");
        }
    }

    /// A claim found the queue empty: what to do next. `poll` is the
    /// fallback's interval.
    pub async fn idle(&mut self, poll: Duration) -> Idle {
        let since = *self.empty_since.get_or_insert_with(Instant::now);
        let Some(l) = self.listener.as_mut() else {
            return Idle::Wait(poll);
        };
        if self.state == State::Awake {
            let left = IDLE_GRACE.saturating_sub(since.elapsed());
            if !left.is_zero() {
                return Idle::Wait(left);
            }
            if let Err(e) = meson_db::jobs::register_sleeper(&mut *l, &self.worker).await {
                tracing::warn!(error = %e, "registering a sleeping worker failed; polling");
                return Idle::Wait(poll);
            }
            self.state = State::Registered;
            self.stale = false;
        }
        if self.state == State::Registered {
            return match meson_db::jobs::gate_passed(&mut *l).await {
                Ok(true) => {
                    self.state = State::Asleep;
                    self.gate_closed = 0;
                    Idle::LookAgain
                }
                // A producer is still at it; it notifies if it looked after
                // the registration, else its job is seen by a later look
                // (2, 4, 8, 16, then every 32 ms while it lasts).
                Ok(false) => {
                    self.gate_closed = (self.gate_closed + 1).min(5);
                    Idle::Wait(IDLE_GRACE * (1 << (self.gate_closed - 1)))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "passing the job queue's gate failed");
                    Idle::Wait(IDLE_GRACE)
                }
            };
        }
        Idle::Wait(poll)
    }

    /// Resolves on a notification (never when not listening). Notifications
    /// already received are consumed with it: one look serves them all.
    pub async fn notified(&mut self) {
        let Some(l) = self.listener.as_mut() else {
            return std::future::pending().await;
        };
        match l.try_recv().await {
            Ok(Some(_)) => while l.next_buffered().is_some() {},
            Ok(None) | Err(_) => {
                // The session is gone, and with it the registration's
                // meaning (notifications in between were lost): the caller
                // looks at the queue now, and registers again when idle.
                tracing::warn!("lost the job notification session; polling until it is back");
                self.listener = None;
                self.stale = self.state != State::Awake;
                self.state = State::Awake;
            }
        }
    }
}
