//! Runs one claimed job of a workflow: resume, step, record, retry or unwind.

use crate::backoff;
use crate::completer::{Completed, Completer};
use crate::workflow::{Step, StepCtx, StepError, Workflow};
use futures::FutureExt;
use meson_core::action::ActionFailure;
use meson_core::{Code, Error};
use meson_db::PgPool;
use meson_db::jobs::ClaimedJob;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

/// How a run of a job ended, for the worker's bookkeeping and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    /// Failed for good, undos done.
    Failed,
    /// Given back to the queue to run again later.
    Retrying,
    /// Another worker owns the job now (our lease expired).
    LostLease,
}

/// Retry timing.
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    pub base: Duration,
    pub cap: Duration,
    /// Undos are retried past `max_attempts` by this many attempts before the
    /// job is left failed for an operator: cleanup deserves more patience.
    pub extra_undo_attempts: i32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            base: Duration::from_millis(500),
            cap: Duration::from_secs(60),
            extra_undo_attempts: 20,
        }
    }
}

/// A workflow with its type erased, so the worker can hold many kinds.
pub trait ErasedWorkflow: Send + Sync {
    fn execute<'a>(
        &'a self,
        store: &'a Store,
        job: &'a ClaimedJob,
        retry: &'a RetryPolicy,
    ) -> Pin<Box<dyn Future<Output = Result<Outcome, Error>> + Send + 'a>>;
}

/// Where a job's progress is written: the pool, and the completer that
/// group-commits job ends; and the job's slot in its worker.
#[derive(Clone)]
pub struct Store {
    pub pool: PgPool,
    pub completer: Completer,
    pub slot: Slot,
}

/// A job's share of its worker's concurrency, given back once its run is
/// over and only its completion's commit is awaited: the worker claims the
/// next jobs while that commit is on its way. (The job's lease is held
/// until the commit, so a crash before it still reruns the job.)
#[derive(Clone, Default)]
pub struct Slot(Arc<std::sync::Mutex<Option<tokio::sync::OwnedSemaphorePermit>>>);

impl Slot {
    pub fn new(permit: tokio::sync::OwnedSemaphorePermit) -> Slot {
        Slot(Arc::new(std::sync::Mutex::new(Some(permit))))
    }

    /// Gives the slot back (once; later calls do nothing).
    fn free(&self) {
        let permit = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        drop(permit);
    }
}

impl<W: Workflow> ErasedWorkflow for W {
    fn execute<'a>(
        &'a self,
        store: &'a Store,
        job: &'a ClaimedJob,
        retry: &'a RetryPolicy,
    ) -> Pin<Box<dyn Future<Output = Result<Outcome, Error>> + Send + 'a>> {
        Box::pin(execute(self, store, job, retry))
    }
}

pub type Registry = HashMap<&'static str, Arc<dyn ErasedWorkflow>>;

fn failure_of(e: &StepError) -> ActionFailure {
    ActionFailure {
        code: e.code().to_owned(),
        message: e.message().to_owned(),
    }
}

/// Runs `job` as far as it can go now.
pub async fn execute<W: Workflow>(
    wf: &W,
    store: &Store,
    job: &ClaimedJob,
    retry: &RetryPolicy,
) -> Result<Outcome, Error> {
    let pool = &store.pool;
    let params: W::Params = match serde_json::from_value(job.args.clone()) {
        Ok(p) => p,
        Err(e) => {
            // Nothing ran, so there is nothing to undo.
            tracing::error!(job = %job.id, error = %e, "undecodable workflow parameters");
            let failure = ActionFailure {
                code: Code::ServiceError.into(),
                message: "internal error: invalid workflow parameters".into(),
            };
            return finish(store, job, Some(&failure)).await;
        }
    };

    if job.attempt > job.max_attempts + retry.extra_undo_attempts {
        // The job keeps dying mid-run (a process crash, not an error the
        // engine saw). Stop instead of looping forever; leave it for an operator.
        tracing::error!(job = %job.id, attempt = job.attempt, "job exceeded every attempt; giving up");
        let failure = ActionFailure {
            code: Code::ServiceError.into(),
            message: "the operation could not be completed; support has been notified".into(),
        };
        return finish(store, job, Some(&failure)).await;
    }

    let mut outputs = HashMap::new();
    let mut undone = HashSet::new();
    for (step, direction, output) in &job.steps {
        if direction == "do" {
            outputs.insert(step.clone(), output.clone());
        } else {
            undone.insert(step.clone());
        }
    }

    let steps = W::Step::ALL;
    let mut failure: Option<ActionFailure> = job
        .failure
        .as_ref()
        .and_then(|f| serde_json::from_value(f.clone()).ok());

    if failure.is_none() {
        for (i, &step) in steps.iter().enumerate() {
            let name = step.name();
            if outputs.contains_key(name) {
                continue;
            }
            let cx = ctx(pool, step, &params, job, &outputs);
            tracing::info!(job = %job.id, step = name, "running step");
            let span = tracing::info_span!("step", step = name, direction = "do");
            match guarded(wf.run(&cx, step)).instrument(span).await {
                Ok(out) => {
                    let progress = (((i + 1) * 100) / steps.len()) as u8;
                    if !record(pool, job, name, "do", &out, Some(progress)).await? {
                        return Ok(Outcome::LostLease);
                    }
                    outputs.insert(name.to_owned(), out);
                }
                Err(e @ StepError::Retryable { .. }) if job.attempt < job.max_attempts => {
                    tracing::warn!(job = %job.id, step = name, error = %e, "step failed, will retry");
                    return reschedule(pool, job, retry, name, &e).await;
                }
                Err(e) => {
                    tracing::warn!(job = %job.id, step = name, error = %e, "step failed for good, unwinding");
                    let f = failure_of(&e);
                    if !mark_failed(pool, job, &f).await? {
                        return Ok(Outcome::LostLease);
                    }
                    failure = Some(f);
                    break;
                }
            }
        }
        if failure.is_none() {
            return finish(store, job, None).await;
        }
    }

    let failure = failure.expect("set above");
    // Undo in reverse every completed step and the step that failed: it may
    // have done part of its work (a fan-out's first items, a volume created
    // before an error). Undos are idempotent and tolerate partial work.
    let reached = steps
        .iter()
        .position(|s| !outputs.contains_key(s.name()))
        .map_or(steps.len(), |i| i + 1);
    for &step in steps[..reached].iter().rev() {
        let name = step.name();
        if undone.contains(name) {
            continue;
        }
        let cx = ctx(pool, step, &params, job, &outputs);
        tracing::info!(job = %job.id, step = name, "undoing step");
        let span = tracing::info_span!("step", step = name, direction = "undo");
        match guarded(wf.undo(&cx, step)).instrument(span).await {
            Ok(()) => {
                if !record(pool, job, name, "undo", &Value::Null, None).await? {
                    return Ok(Outcome::LostLease);
                }
            }
            Err(e) if job.attempt < job.max_attempts + retry.extra_undo_attempts => {
                tracing::warn!(job = %job.id, step = name, error = %e, "undo failed, will retry");
                return reschedule(pool, job, retry, name, &e).await;
            }
            Err(e) => {
                // Leave the job failed and loud: something may be left on AtomOS.
                tracing::error!(job = %job.id, step = name, error = %e, "undo failed for good; manual cleanup needed");
                break;
            }
        }
    }
    if let Err(e) = wf.on_failed(&params, &failure).await
        && job.attempt < job.max_attempts + retry.extra_undo_attempts
    {
        return reschedule(pool, job, retry, "on_failed", &e).await;
    }
    finish(store, job, Some(&failure)).await
}

/// Runs a step, turning a panic into a fatal error so it unwinds instead of
/// crash-looping the job.
async fn guarded<T>(fut: impl Future<Output = Result<T, StepError>>) -> Result<T, StepError> {
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(r) => r,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(panic = %what, "workflow step panicked");
            Err(StepError::internal("an internal error occurred"))
        }
    }
}

fn ctx<'a, P, S>(
    pool: &'a PgPool,
    step: S,
    params: &'a P,
    job: &ClaimedJob,
    outputs: &'a HashMap<String, Value>,
) -> StepCtx<'a, P, S> {
    StepCtx {
        params,
        job: job.id,
        attempt: job.attempt,
        action: job.action_id,
        outputs,
        pool,
        step,
    }
}

/// Records a step (and the action's progress) if the job is still ours.
async fn record(
    pool: &PgPool,
    job: &ClaimedJob,
    step: &str,
    direction: &str,
    output: &Value,
    progress: Option<u8>,
) -> Result<bool, Error> {
    let mut tx = meson_db::begin(pool).await?;
    if !meson_db::jobs::fence(&mut tx, job.id, job.attempt).await? {
        return Ok(false);
    }
    meson_db::jobs::record_step(&mut tx, job.id, job.attempt, step, direction, output).await?;
    if let (Some(action), Some(p)) = (job.action_id, progress) {
        meson_db::actions::set_progress(&mut tx, action, p).await?;
    }
    meson_db::commit(tx).await?;
    Ok(true)
}

async fn mark_failed(pool: &PgPool, job: &ClaimedJob, f: &ActionFailure) -> Result<bool, Error> {
    let mut tx = meson_db::begin(pool).await?;
    if !meson_db::jobs::fence(&mut tx, job.id, job.attempt).await? {
        return Ok(false);
    }
    meson_db::jobs::set_failure(&mut tx, job.id, &json!(f)).await?;
    meson_db::commit(tx).await?;
    Ok(true)
}

async fn reschedule(
    pool: &PgPool,
    job: &ClaimedJob,
    retry: &RetryPolicy,
    step: &str,
    e: &StepError,
) -> Result<Outcome, Error> {
    let wait = backoff::delay(job.attempt, retry.base, retry.cap);
    let run_at = chrono::Utc::now() + chrono::Duration::from_std(wait).unwrap_or_default();
    let err = json!({"attempt": job.attempt, "step": step, "code": e.code(), "message": e.message(), "at": chrono::Utc::now()});
    metrics::counter!("meson_job_failures_total",
        "kind" => job.kind.clone(), "outcome" => "retried")
    .increment(1);
    Ok(
        if meson_db::jobs::retry_at(pool, job.id, job.attempt, run_at, &err).await? {
            Outcome::Retrying
        } else {
            Outcome::LostLease
        },
    )
}

/// Ends the job and its action, atomically (group-committed with other
/// jobs' ends by the completer).
async fn finish(
    store: &Store,
    job: &ClaimedJob,
    failure: Option<&ActionFailure>,
) -> Result<Outcome, Error> {
    store.slot.free();
    let finished = match store.completer.finish(job.id, job.attempt, failure).await? {
        Completed::Lost => return Ok(Outcome::LostLease),
        Completed::Finished(action) => action,
    };
    let status = if failure.is_none() {
        "success"
    } else {
        "error"
    };
    if let Some((command, seconds)) = finished {
        metrics::counter!("meson_actions_finished_total",
            "command" => command.clone(), "status" => status)
        .increment(1);
        metrics::histogram!("meson_action_duration_seconds",
            "command" => command, "status" => status)
        .record(seconds);
    }
    if failure.is_some() {
        metrics::counter!("meson_job_failures_total",
            "kind" => job.kind.clone(), "outcome" => "failed")
        .increment(1);
    }
    tracing::info!(job = %job.id, ok = failure.is_none(), "job finished");
    Ok(if failure.is_none() {
        Outcome::Succeeded
    } else {
        Outcome::Failed
    })
}

/// A task aborted when this is dropped.
pub struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
