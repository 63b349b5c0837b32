//! The worker: claims jobs, runs them with heartbeats, and shuts down gracefully.

use crate::completer::Completer;
use crate::engine::{AbortOnDrop, ErasedWorkflow, Outcome, Registry, RetryPolicy, Slot, Store};
use crate::wakeup::{IDLE_GRACE, Idle, Wakeups};
use crate::workflow::Workflow;
use meson_core::JobId;
use meson_db::PgPool;
use meson_db::jobs::ClaimedJob;
use rand::Rng;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast, oneshot, watch};
use tokio::task::JoinSet;
use tracing::Instrument;

#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// Identifies this worker in `jobs.locked_by`.
    pub id: String,
    /// Jobs run at once by this worker. Jobs whose run ended and whose
    /// completion is being committed no longer count; at most as many
    /// again may be waiting so.
    pub concurrency: usize,
    /// The longest a due job waits to be seen when no notification arrives:
    /// the queue is polled at this interval, jittered down by 5 to 30% (the
    /// 5% leaves room for the claim itself on a loaded machine).
    pub poll_interval: Duration,
    /// Wake on PostgreSQL notifications (LISTEN). Off, the worker only
    /// polls: for connection poolers in transaction mode, where LISTEN
    /// does not work.
    pub listen: bool,
    /// A job whose lease is not renewed in this time is reclaimed by others.
    pub lease: Duration,
    /// On shutdown, running jobs get this long to finish before they are released.
    pub shutdown_grace: Duration,
    pub retry: RetryPolicy,
    /// Finished jobs (and their step logs) are kept this long for inspection.
    pub retention: Duration,
    /// How often this worker prunes finished jobs past retention.
    pub prune_interval: Duration,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            id: format!("worker-{}", uuid::Uuid::new_v4().simple()),
            concurrency: 16,
            poll_interval: Duration::from_secs(1),
            listen: true,
            lease: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(20),
            retry: RetryPolicy::default(),
            retention: Duration::from_secs(7 * 24 * 3600),
            prune_interval: Duration::from_secs(600),
        }
    }
}

/// What happened to a job run, broadcast for tests and metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobEvent {
    pub job: JobId,
    pub kind: String,
    pub outcome: Outcome,
}

pub struct Worker {
    pool: PgPool,
    cfg: WorkerConfig,
    registry: Registry,
}

/// A job this worker is running.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunningJob {
    pub id: JobId,
    pub kind: String,
    pub action_id: Option<meson_core::ActionId>,
}

pub struct WorkerHandle {
    shutdown: watch::Sender<bool>,
    release: watch::Sender<bool>,
    running: watch::Receiver<Vec<RunningJob>>,
    join: tokio::task::JoinHandle<()>,
    events: broadcast::Sender<JobEvent>,
}

impl WorkerHandle {
    /// Stops claiming, lets running jobs finish within the grace period, then
    /// releases the rest to the queue.
    pub async fn shutdown(self) {
        self.stop_claiming();
        let _ = self.join.await;
    }

    /// Begins a graceful shutdown without waiting for it: no more claims;
    /// running jobs go on until they end, the grace period passes, or
    /// [`WorkerHandle::release_now`]. [`WorkerHandle::shutdown`] then waits.
    pub fn stop_claiming(&self) {
        let _ = self.shutdown.send(true);
    }

    /// Stops claiming and releases running jobs to the queue at once, with
    /// no grace period: they resume from their last recorded step on the
    /// next claim (another worker, or this process's next start).
    pub fn release_now(&self) {
        let _ = self.release.send(true);
        self.stop_claiming();
    }

    /// The jobs running now, kept current (empty once the worker stopped).
    pub fn running(&self) -> watch::Receiver<Vec<RunningJob>> {
        self.running.clone()
    }

    pub fn events(&self) -> broadcast::Receiver<JobEvent> {
        self.events.subscribe()
    }

    /// Turns `true` when the worker is asked to shut down (and closes when
    /// it is killed): for loops that live and die with it.
    pub fn stop_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Stops the worker abruptly, as a crash would: jobs stay claimed until
    /// their leases expire. For fault-injection tests.
    pub fn kill(self) {
        self.join.abort();
    }
}

/// A claimed job's run.
struct Inflight {
    job: RunningJob,
    attempt: i32,
}

/// The worker loop's side of its handle's controls.
struct Control {
    /// Turns `true` to release running jobs at once.
    release: watch::Receiver<bool>,
    running: watch::Sender<Vec<RunningJob>>,
}

impl Control {
    fn publish(&self, inflight: &HashMap<tokio::task::Id, Inflight>) {
        let mut jobs: Vec<RunningJob> = inflight.values().map(|i| i.job.clone()).collect();
        jobs.sort_by_key(|j| j.id.0);
        self.running.send_if_modified(|now| {
            let changed = *now != jobs;
            *now = jobs;
            changed
        });
    }
}

impl Worker {
    pub fn new(pool: PgPool, cfg: WorkerConfig) -> Self {
        Worker {
            pool,
            cfg,
            registry: HashMap::new(),
        }
    }

    pub fn register<W: Workflow>(mut self, wf: W) -> Self {
        self.registry.insert(W::KIND, Arc::new(wf));
        self
    }

    pub fn start(self) -> WorkerHandle {
        let (shutdown, rx) = watch::channel(false);
        let (release, release_rx) = watch::channel(false);
        let (running_tx, running) = watch::channel(Vec::new());
        let (events, _) = broadcast::channel(1024);
        let join = tokio::spawn(self.run(
            rx,
            Control {
                release: release_rx,
                running: running_tx,
            },
            events.clone(),
        ));
        WorkerHandle {
            shutdown,
            release,
            running,
            join,
            events,
        }
    }

    async fn run(
        self,
        mut shutdown: watch::Receiver<bool>,
        mut control: Control,
        events: broadcast::Sender<JobEvent>,
    ) {
        let kinds: Vec<String> = self.registry.keys().map(|k| (*k).to_owned()).collect();
        let mut wakeups = Wakeups::new(self.pool.clone(), &self.cfg.id, self.cfg.listen).await;
        let mut running: JoinSet<(JobId, String, Outcome)> = JoinSet::new();
        let mut inflight: HashMap<tokio::task::Id, Inflight> = HashMap::new();
        // Stopped (dropped) last, after running jobs had their chance to end.
        let (completer, _completer) = Completer::start(self.pool.clone());
        let store = Store {
            pool: self.pool.clone(),
            completer,
            slot: Slot::default(),
        };
        // A job holds a slot while it runs; once only its completion's
        // commit is awaited it gives the slot back, and jobs awaiting their
        // commit are bounded by `concurrency` too.
        let slots = Arc::new(Semaphore::new(self.cfg.concurrency));
        let most_held = 2 * self.cfg.concurrency;
        let leases = Leases::default();
        let _heartbeat = AbortOnDrop(tokio::spawn(
            leases.clone().renew(self.pool.clone(), self.cfg.lease),
        ));
        tracing::info!(worker = %self.cfg.id, kinds = ?kinds, "worker started");

        let mut next_prune = tokio::time::Instant::now() + jitter(self.cfg.prune_interval);
        loop {
            if *shutdown.borrow() {
                break;
            }
            if tokio::time::Instant::now() >= next_prune {
                next_prune = tokio::time::Instant::now() + jitter(self.cfg.prune_interval);
                self.prune().await;
            }
            let poll = jitter_down(self.cfg.poll_interval);
            let mut permits: Vec<OwnedSemaphorePermit> = (0..most_held
                .saturating_sub(running.len()))
                .map_while(|_| slots.clone().try_acquire_owned().ok())
                .collect();
            let free = permits.len();
            let wait = if free == 0 {
                // Full: the queue is looked at again when a slot frees up.
                wakeups.busy().await;
                poll
            } else {
                match meson_db::jobs::claim(
                    &self.pool,
                    &self.cfg.id,
                    &kinds,
                    free as i64,
                    self.cfg.lease.as_secs_f64(),
                )
                .await
                {
                    Ok(jobs) => {
                        let claimed = jobs.len();
                        for (job, permit) in jobs.into_iter().zip(permits.drain(..)) {
                            metrics::histogram!("meson_job_claim_latency_seconds",
                                "kind" => job.kind.clone())
                            .record(job.waited_secs);
                            metrics::counter!("meson_job_attempts_total",
                                "kind" => job.kind.clone())
                            .increment(1);
                            let started = Inflight {
                                attempt: job.attempt,
                                job: RunningJob {
                                    id: job.id,
                                    kind: job.kind.clone(),
                                    action_id: job.action_id,
                                },
                            };
                            let store = Store {
                                slot: Slot::new(permit),
                                ..store.clone()
                            };
                            let handle = running.spawn(self.run_job(job, store, &leases));
                            inflight.insert(handle.id(), started);
                        }
                        if claimed > 0 {
                            control.publish(&inflight);
                            wakeups.busy().await;
                        }
                        // Slots the claim found no job for.
                        drop(permits);
                        if claimed == free {
                            // There may be more waiting: claim again right
                            // away, or once a slot frees up.
                            continue;
                        }
                        if claimed > 0 {
                            // The queue is drained while jobs still arrive:
                            // look again soon (or when a job ends).
                            IDLE_GRACE
                        } else {
                            match wakeups.idle(poll).await {
                                Idle::LookAgain => continue,
                                Idle::Wait(d) => d,
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "claiming jobs failed");
                        poll
                    }
                }
            };
            let all_running = slots.available_permits() == 0 && running.len() < most_held;
            tokio::select! {
                _ = shutdown.changed() => {}
                () = wakeups.notified() => {}
                () = tokio::time::sleep(wait) => wakeups.reconnect().await,
                _ = slots.acquire(), if all_running => {
                    // A job's run ended; its completion is being committed.
                    // Let the others of its batch end too, so that one claim
                    // fills their slots.
                    tokio::task::yield_now().await;
                }
                Some(done) = running.join_next_with_id(), if !running.is_empty() => {
                    self.finished(done, &mut inflight, &events);
                    // Jobs end in groups (their completions share a commit):
                    // count every free slot before claiming again, so one
                    // claim fills them all.
                    while let Some(done) = running.try_join_next_with_id() {
                        self.finished(done, &mut inflight, &events);
                    }
                    control.publish(&inflight);
                }
            }
        }
        wakeups.busy().await;

        // Graceful shutdown: no more claims; give running jobs a deadline
        // (none when told to release them now).
        tracing::info!(worker = %self.cfg.id, running = running.len(), "worker stopping");
        let deadline = tokio::time::sleep(self.cfg.shutdown_grace);
        tokio::pin!(deadline);
        while !running.is_empty() {
            tokio::select! {
                Some(done) = running.join_next_with_id() => {
                    self.finished(done, &mut inflight, &events);
                }
                _ = &mut deadline => break,
                _ = control.release.wait_for(|r| *r) => break,
            }
            control.publish(&inflight);
        }
        running.abort_all();
        while running.join_next().await.is_some() {}
        for (_, Inflight { job, attempt }) in inflight {
            let job = job.id;
            match meson_db::jobs::release(&self.pool, job, attempt).await {
                Ok(true) => tracing::info!(%job, "released job on shutdown"),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(%job, error = %e, "could not release job; its lease will expire")
                }
            }
        }
        control.running.send_replace(Vec::new());
        tracing::info!(worker = %self.cfg.id, "worker stopped");
    }

    fn finished(
        &self,
        done: Result<(tokio::task::Id, (JobId, String, Outcome)), tokio::task::JoinError>,
        inflight: &mut HashMap<tokio::task::Id, Inflight>,
        events: &broadcast::Sender<JobEvent>,
    ) {
        match done {
            Ok((task, (job, kind, outcome))) => {
                inflight.remove(&task);
                let _ = events.send(JobEvent { job, kind, outcome });
            }
            Err(e) => {
                // A panicking step: the lease expires and the job is retried elsewhere.
                tracing::error!(error = %e, "job task failed");
                inflight.remove(&e.id());
            }
        }
    }

    /// Prunes finished jobs past retention, and the registrations of
    /// sleeping workers whose sessions died.
    async fn prune(&self) {
        match meson_db::jobs::prune(&self.pool, self.cfg.retention.as_secs_f64(), 1000).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(pruned = n, "pruned finished jobs"),
            Err(e) => tracing::warn!(error = %e, "pruning finished jobs failed"),
        }
        if let Err(e) = meson_db::jobs::forget_dead_sleepers(&self.pool).await {
            tracing::warn!(error = %e, "forgetting dead sleeping workers failed");
        }
    }

    /// Runs one job while [`Leases`] keeps its lease; abandons it if the lease is lost.
    fn run_job(
        &self,
        job: ClaimedJob,
        store: Store,
        leases: &Leases,
    ) -> impl std::future::Future<Output = (JobId, String, Outcome)> + use<> {
        let wf = self.registry.get(job.kind.as_str()).cloned();
        let retry = self.cfg.retry.clone();
        // Held from the claim on; let go when the task ends, aborted or not.
        let held = leases.hold(job.id, job.attempt);
        let span = tracing::info_span!(
            "job",
            id = %job.id,
            kind = %job.kind,
            attempt = job.attempt,
            action_id = job.action_id.map(|a| a.to_string()),
        );
        crate::trace_context::continue_trace(&span, job.trace_context.as_ref());
        async move {
            let Some(wf) = wf else {
                return (job.id, job.kind, Outcome::LostLease);
            };
            let mut held = held;
            let outcome = tokio::select! {
                r = ErasedWorkflow::execute(&*wf, &store, &job, &retry) => match r {
                    Ok(o) => o,
                    Err(e) => {
                        // A database error mid-bookkeeping: the lease will expire
                        // and the job resumes from its last recorded step.
                        tracing::error!(job = %job.id, error = %e, "job bookkeeping failed");
                        Outcome::LostLease
                    }
                },
                _ = &mut held.lost => {
                    tracing::warn!(job = %job.id, "lost the lease; abandoning the job");
                    Outcome::LostLease
                }
            };
            drop(held);
            (job.id, job.kind, outcome)
        }
        .instrument(span)
    }
}

/// The leases of the jobs a worker runs, renewed together: one statement
/// every third of a lease for all of them, rather than a timer and a
/// statement per job.
#[derive(Clone, Default)]
struct Leases(Arc<Mutex<HashMap<JobId, Holder>>>);

/// A held lease's entry: the attempt that fences it, and how its job
/// learns that it was lost.
struct Holder {
    attempt: i32,
    lost: oneshot::Sender<()>,
}

/// A job's hold on its lease, for as long as the job runs.
struct Held {
    job: JobId,
    attempt: i32,
    leases: Leases,
    /// Resolves when the lease was lost.
    lost: oneshot::Receiver<()>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut held = self.leases.lock();
        // Unless the job was claimed again meanwhile (this attempt lost it).
        if held
            .get(&self.job)
            .is_some_and(|h| h.attempt == self.attempt)
        {
            held.remove(&self.job);
        }
    }
}

impl Leases {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<JobId, Holder>> {
        // The map stays consistent whatever panicked while holding it.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn hold(&self, job: JobId, attempt: i32) -> Held {
        let (tx, lost) = oneshot::channel();
        self.lock().insert(job, Holder { attempt, lost: tx });
        Held {
            job,
            attempt,
            leases: self.clone(),
            lost,
        }
    }

    /// Tells the jobs of `lost` (held by the attempts given) that their
    /// leases are gone.
    fn lose(&self, lost: impl IntoIterator<Item = (JobId, i32)>) {
        let mut held = self.lock();
        for (job, attempt) in lost {
            if held.get(&job).is_some_and(|h| h.attempt == attempt)
                && let Some(h) = held.remove(&job)
            {
                let _ = h.lost.send(());
            }
        }
    }

    /// Renews every held lease each third of `lease`, until aborted. A job
    /// whose lease was not renewed (another worker holds it now), or whose
    /// renewals failed twice in a row, is told it lost it.
    async fn renew(self, pool: PgPool, lease: Duration) {
        let mut failures = 0;
        loop {
            tokio::time::sleep(lease / 3).await;
            let held: Vec<(JobId, i32)> =
                self.lock().iter().map(|(j, h)| (*j, h.attempt)).collect();
            if held.is_empty() {
                continue;
            }
            match meson_db::jobs::heartbeat(&pool, &held, lease.as_secs_f64()).await {
                Ok(renewed) => {
                    failures = 0;
                    let renewed: std::collections::HashSet<JobId> = renewed.into_iter().collect();
                    self.lose(held.into_iter().filter(|(j, _)| !renewed.contains(j)));
                }
                Err(e) => {
                    failures += 1;
                    tracing::warn!(jobs = held.len(), error = %e, "heartbeat failed");
                    if failures >= 2 {
                        self.lose(held);
                    }
                }
            }
        }
    }
}

fn jitter(d: Duration) -> Duration {
    d.mul_f64(rand::thread_rng().gen_range(0.75..1.25))
}

/// `d` less 5 to 30%: spreads workers' polls, and a due job is seen within
/// `d` even counting the claim that finds it.
fn jitter_down(d: Duration) -> Duration {
    d.mul_f64(rand::thread_rng().gen_range(0.70..=0.95))
}
