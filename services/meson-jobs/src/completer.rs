//! Group commit for the end of jobs.
//!
//! Every job a worker runs ends with a durable write (the job and its action
//! finished, together). Written one transaction per job, short jobs pay one
//! WAL flush each and the queue tops out near the disk's flush rate. The
//! completer collects the completions that arrive while it is writing and
//! writes them all in the next transaction: under load many jobs share a
//! flush; alone, a job waits for no timer (River's batch completer, without
//! its tick). A job's `finish` returns only once its completion committed,
//! so nothing a caller sees changes: only how many jobs one commit carries.
//!
//! A batch that fails is retried one completion at a time, so one bad row
//! fails alone.

use crate::engine::AbortOnDrop;
use meson_core::action::ActionFailure;
use meson_core::{Error, JobId};
use meson_db::PgPool;
use meson_db::jobs::Ending;
use std::collections::HashMap;
use tokio::sync::{mpsc, oneshot};

/// Completions one transaction carries at most.
const MAX_BATCH: usize = 512;

/// How a completion ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Completed {
    /// Written; with the action's command and duration when it had one
    /// that was still running.
    Finished(Option<(String, f64)>),
    /// The job is no longer ours (our lease expired).
    Lost,
}

struct Completion {
    job: JobId,
    attempt: i32,
    failure: Option<ActionFailure>,
    reply: oneshot::Sender<Result<Completed, Error>>,
}

/// A handle on the completer task; the task ends when every handle is
/// dropped, or at once when the guard returned by [`Completer::start`] is.
#[derive(Clone)]
pub struct Completer {
    queue: mpsc::UnboundedSender<Completion>,
}

impl Completer {
    /// Starts the completer. Dropping the returned guard stops it (a killed
    /// worker's pending completions are then lost like its other work, and
    /// its jobs' leases expire).
    pub fn start(pool: PgPool) -> (Completer, AbortOnDrop) {
        let (queue, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(pool, rx));
        (Completer { queue }, AbortOnDrop(task))
    }

    /// Finishes `job` (held by `attempt`) and its action, once committed.
    pub async fn finish(
        &self,
        job: JobId,
        attempt: i32,
        failure: Option<&ActionFailure>,
    ) -> Result<Completed, Error> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Completion {
                job,
                attempt,
                failure: failure.cloned(),
                reply,
            })
            .map_err(|_| Error::Unavailable {
                message: "the job completer has stopped".into(),
            })?;
        answer.await.map_err(|_| Error::Unavailable {
            message: "the job completer stopped before writing".into(),
        })?
    }
}

async fn run(pool: PgPool, mut rx: mpsc::UnboundedReceiver<Completion>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        metrics::histogram!("meson_job_completion_batch_size").record(batch.len() as f64);
        flush(&pool, std::mem::take(&mut batch)).await;
    }
}

async fn flush(pool: &PgPool, mut batch: Vec<Completion>) {
    // One lock order for every writer.
    batch.sort_by_key(|c| c.job.0);
    match write(pool, &batch).await {
        Ok(done) => {
            for (c, d) in batch.into_iter().zip(done) {
                let _ = c.reply.send(Ok(d));
            }
        }
        Err(e) if batch.len() == 1 => {
            if let Some(c) = batch.pop() {
                let _ = c.reply.send(Err(e));
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, jobs = batch.len(), "a batch of job completions failed; writing them one by one");
            for c in batch {
                let r = write(pool, std::slice::from_ref(&c))
                    .await
                    .map(|mut d| d.pop().unwrap_or(Completed::Lost));
                let _ = c.reply.send(r);
            }
        }
    }
}

/// Writes `batch` in one statement (one commit); the result is in
/// `batch`'s order.
async fn write(pool: &PgPool, batch: &[Completion]) -> Result<Vec<Completed>, Error> {
    let endings: Vec<Ending<'_>> = batch
        .iter()
        .map(|c| Ending {
            job: c.job,
            attempt: c.attempt,
            failure: c.failure.as_ref(),
        })
        .collect();
    let mut ended: HashMap<JobId, Option<(String, f64)>> =
        meson_db::jobs::finish_many(pool, &endings)
            .await?
            .into_iter()
            .map(|e| (e.job, e.action))
            .collect();
    Ok(batch
        .iter()
        .map(|c| match ended.remove(&c.job) {
            Some(a) => Completed::Finished(a),
            None => Completed::Lost,
        })
        .collect())
}
