//! The job queue and the workflow step log.
//!
//! Every write a worker makes about a job is *fenced* by the attempt number it
//! claimed: once a lease expires and another worker reclaims the job (bumping
//! `attempt`), the first worker's heartbeats, step records and completion all
//! match no row and it knows it lost the job.

use crate::{DbResult, Tx};
use chrono::{DateTime, Utc};
use meson_core::action::ActionFailure;
use meson_core::{ActionId, Error, JobId};
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

/// A job to enqueue.
#[derive(Clone, Debug)]
pub struct NewJob {
    pub kind: String,
    pub args: Value,
    pub priority: i16,
    pub max_attempts: i32,
    /// Jobs sharing a key never run concurrently (one mutation per resource).
    pub concurrency_key: Option<String>,
    pub action_id: Option<ActionId>,
    pub tenant_id: Option<String>,
    /// The enqueuing request's trace context (see the migration).
    pub trace_context: Option<Value>,
}

/// A job a worker holds, with the attempt that fences its writes.
#[derive(Clone, Debug)]
pub struct ClaimedJob {
    pub id: JobId,
    pub kind: String,
    pub args: Value,
    pub attempt: i32,
    pub max_attempts: i32,
    pub action_id: Option<ActionId>,
    pub failure: Option<Value>,
    /// How long the job waited between becoming due and being claimed.
    pub waited_secs: f64,
    /// The enqueuing request's trace context.
    pub trace_context: Option<Value>,
    /// The workflow's step log so far, oldest first: (step, direction, output).
    pub steps: Vec<(String, String, Value)>,
}

/// Outcome of an enqueue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enqueued {
    Job(JobId),
    /// Another live job holds the concurrency key; its action is named when known.
    Locked(Option<ActionId>),
}

impl Enqueued {
    /// The job, or `locked` on the resource `kind` `id` while another
    /// action holds it (named when known).
    pub fn or_locked(self, kind: &'static str, id: impl std::fmt::Display) -> Result<JobId, Error> {
        match self {
            Enqueued::Job(job) => Ok(job),
            Enqueued::Locked(blocking) => Err(Error::Locked {
                kind,
                id: id.to_string(),
                action_id: blocking.map(|a| a.0).unwrap_or_default(),
            }),
        }
    }

    /// The job of a resource created in the same transaction, which no
    /// other action can hold yet (`what` names it in the internal error).
    pub fn of_new(self, what: &str) -> Result<JobId, Error> {
        match self {
            Enqueued::Job(job) => Ok(job),
            Enqueued::Locked(_) => Err(Error::internal(format!(
                "a brand-new {what} is already locked"
            ))),
        }
    }
}

/// Enqueues a job inside the caller's transaction, so it exists only if the
/// caller's own writes commit.
pub async fn enqueue(tx: &mut Tx<'_>, job: &NewJob) -> Result<Enqueued, Error> {
    let id = sqlx::query_scalar!(
        r#"insert into jobs (kind, args, priority, max_attempts, concurrency_key, action_id, tenant_id,
                             trace_context)
           values ($1, $2, $3, $4, $5, $6, $7, $8)
           on conflict (concurrency_key)
             where state in ('available', 'running') and concurrency_key is not null
           do nothing
           returning id"#,
        job.kind,
        job.args,
        job.priority,
        job.max_attempts,
        job.concurrency_key,
        job.action_id.map(|a| a.0),
        job.tenant_id,
        job.trace_context,
    )
    .fetch_optional(&mut **tx)
    .await
    .ctx("enqueueing a job")?;
    if let Some(id) = id {
        return Ok(Enqueued::Job(JobId(id)));
    }
    let key = job.concurrency_key.as_deref().unwrap_or_default();
    let blocking = live_on_key(&mut **tx, key).await?.flatten();
    Ok(Enqueued::Locked(blocking))
}

/// The action of the live job holding `key`, if one does (a job without an
/// action holds it as `Some(None)`).
pub async fn live_on_key(
    db: impl sqlx::PgExecutor<'_>,
    key: &str,
) -> Result<Option<Option<ActionId>>, Error> {
    let found = sqlx::query_scalar!(
        r#"select action_id from jobs
           where concurrency_key = $1 and state in ('available', 'running')"#,
        key,
    )
    .fetch_optional(db)
    .await
    .ctx("finding a live job")?;
    Ok(found.map(|a| a.map(ActionId)))
}

/// As [`live_on_key`], counting only a job of `kind` (a volume's move, not
/// the end of its create).
pub async fn live_on_key_of_kind(
    db: impl sqlx::PgExecutor<'_>,
    key: &str,
    kind: &str,
) -> Result<Option<Option<ActionId>>, Error> {
    let found = sqlx::query_scalar!(
        r#"select action_id from jobs
           where concurrency_key = $1 and kind = $2 and state in ('available', 'running')"#,
        key,
        kind,
    )
    .fetch_optional(db)
    .await
    .ctx("finding a live job")?;
    Ok(found.map(|a| a.map(ActionId)))
}

/// Claims up to `limit` jobs in one statement: running jobs whose lease
/// expired (their worker died) first, oldest lease first, then due
/// available jobs in priority order; each with its step log (so resuming
/// one costs no second round trip).
///
/// Each kind of pick walks its own partial index in its order and stops at
/// the limit. One pick with both conditions (`available and due or running
/// and expired`) cannot use either index's order: it read and sorted every
/// available job for every claim, so a backlog of 30,000 jobs made each
/// claim cost 10 ms. The picks are `materialized` CTEs: without that fence
/// the planner may join them as a nested loop and lock, and bump the
/// attempt of, more rows than `limit` (Oban's basic engine documents the
/// trap). The statement is the function `meson_claim_jobs`, whose plan finds
/// the picked jobs by primary key whatever the planner's statistics (its
/// migration tells what a join with the picks cost).
pub async fn claim(
    db: impl sqlx::PgExecutor<'_>,
    worker: &str,
    kinds: &[String],
    limit: i64,
    lease_secs: f64,
) -> Result<Vec<ClaimedJob>, Error> {
    let rows = sqlx::query!(
        r#"select id as "id!", kind as "kind!", args as "args!", attempt as "attempt!",
                  max_attempts as "max_attempts!", action_id, failure,
                  waited_secs as "waited_secs!", trace_context, steps as "steps!"
           from meson_claim_jobs($1, $2, $3, $4)"#,
        kinds,
        limit,
        worker,
        lease_secs,
    )
    .fetch_all(db)
    .await
    .ctx("claiming jobs")?;
    rows.into_iter()
        .map(|r| {
            let steps: Vec<(String, String, Value)> = serde_json::from_value(r.steps)
                .map_err(|e| Error::internal_from("decoding a job's step log", e))?;
            Ok(ClaimedJob {
                id: JobId(r.id),
                kind: r.kind,
                args: r.args,
                attempt: r.attempt,
                max_attempts: r.max_attempts,
                action_id: r.action_id.map(ActionId),
                failure: r.failure,
                waited_secs: r.waited_secs,
                trace_context: r.trace_context,
                steps,
            })
        })
        .collect()
}

/// Extends the leases of jobs still held by the attempts given, in one
/// statement: `(job, attempt)`. Returns the jobs renewed; the others are no
/// longer ours. Rows are locked in id order, as [`finish_many`] locks them:
/// a heartbeat and a batch of completions never deadlock.
pub async fn heartbeat(
    pool: &PgPool,
    jobs: &[(JobId, i32)],
    lease_secs: f64,
) -> Result<Vec<JobId>, Error> {
    let ids: Vec<i64> = jobs.iter().map(|j| j.0.0).collect();
    let attempts: Vec<i32> = jobs.iter().map(|j| j.1).collect();
    Ok(sqlx::query_scalar!(
        r#"with held as materialized (
             select j.id from jobs j
             join unnest($1::bigint[], $2::int[]) as u(id, attempt)
               on j.id = u.id and j.attempt = u.attempt
             where j.state = 'running'
             order by j.id
             for update of j
           )
           update jobs j set lease_expires_at = now() + make_interval(secs => $3)
           from held where j.id = held.id
           returning j.id"#,
        &ids,
        &attempts,
        lease_secs,
    )
    .fetch_all(pool)
    .await
    .ctx("extending job leases")?
    .into_iter()
    .map(JobId)
    .collect())
}

/// Registers `worker`'s listening session (the connection this runs on) as
/// asleep: from its commit on, every enqueue notifies. The caller must then
/// pass the gate ([`gate_passed`]) before its last look at the queue (see
/// the `job_sleepers` migration).
pub async fn register_sleeper<'c>(
    listener: impl sqlx::PgExecutor<'c>,
    worker: &str,
) -> Result<(), Error> {
    sqlx::query!(
        r#"insert into job_sleepers (worker, pid) values ($1, pg_backend_pid())
           on conflict (worker) do update set pid = excluded.pid, since = now()"#,
        worker,
    )
    .execute(listener)
    .await
    .ctx("registering a sleeping worker")?;
    Ok(())
}

/// Ends `worker`'s registration: enqueues stop notifying for it.
pub async fn unregister_sleeper<'c>(
    conn: impl sqlx::PgExecutor<'c>,
    worker: &str,
) -> Result<(), Error> {
    sqlx::query!("delete from job_sleepers where worker = $1", worker)
        .execute(conn)
        .await
        .ctx("unregistering a sleeping worker")?;
    Ok(())
}

/// True once every producer that may have missed a registration committed
/// before this call has ended: the queue is then worth a last look, after
/// which the registered worker may sleep until notified. False (never
/// waits) while a producer is still at it.
pub async fn gate_passed<'c>(conn: impl sqlx::PgExecutor<'c>) -> Result<bool, Error> {
    sqlx::query_scalar!(r#"select meson_jobs_gate_passed() as "passed!""#)
        .fetch_one(conn)
        .await
        .ctx("passing the job queue's gate")
}

/// Drops the registrations of sessions that ended without removing theirs
/// (a worker killed while asleep): they would only make enqueues notify.
pub async fn forget_dead_sleepers(pool: &PgPool) -> Result<u64, Error> {
    Ok(sqlx::query!(
        r#"delete from job_sleepers s
           where not exists (select from pg_stat_activity a where a.pid = s.pid)"#
    )
    .execute(pool)
    .await
    .ctx("forgetting dead sleeping workers")?
    .rows_affected())
}

/// Workers registered as asleep, for tests and operators.
pub async fn sleepers(pool: &PgPool) -> Result<Vec<String>, Error> {
    sqlx::query_scalar!("select worker from job_sleepers order by worker")
        .fetch_all(pool)
        .await
        .ctx("listing sleeping workers")
}

/// Locks our job row for the rest of the transaction. False: it is no longer ours.
pub async fn fence(tx: &mut Tx<'_>, id: JobId, attempt: i32) -> Result<bool, Error> {
    let row = sqlx::query_scalar!(
        r#"select id from jobs where id = $1 and attempt = $2 and state = 'running' for update"#,
        id.0,
        attempt,
    )
    .fetch_optional(&mut **tx)
    .await
    .ctx("fencing a job")?;
    Ok(row.is_some())
}

/// [`fence`], shared with the job's other writers that only add to its
/// step log (the items of a fan-out, each recorded in its own transaction
/// as it ends): they no longer wait for each other's commits, and a
/// reclaim, a heartbeat or a completion still waits for all of them. A
/// transaction fenced so must not update the job's row (two of them would
/// deadlock upgrading their locks).
pub async fn fence_shared(tx: &mut Tx<'_>, id: JobId, attempt: i32) -> Result<bool, Error> {
    let row = sqlx::query_scalar!(
        r#"select id from jobs where id = $1 and attempt = $2 and state = 'running' for share"#,
        id.0,
        attempt,
    )
    .fetch_optional(&mut **tx)
    .await
    .ctx("fencing a job")?;
    Ok(row.is_some())
}

/// Step outputs recorded so far: (step, direction, output), for operators
/// and tests (a claim brings them to the worker).
pub async fn steps(pool: &PgPool, id: JobId) -> Result<Vec<(String, String, Value)>, Error> {
    Ok(sqlx::query!(
        "select step, direction, output from workflow_steps where job_id = $1 order by finished_at",
        id.0
    )
    .fetch_all(pool)
    .await
    .ctx("loading workflow steps")?
    .into_iter()
    .map(|r| (r.step, r.direction, r.output))
    .collect())
}

/// Records a finished step (call after [`fence`] in the same transaction).
pub async fn record_step(
    tx: &mut Tx<'_>,
    id: JobId,
    attempt: i32,
    step: &str,
    direction: &str,
    output: &Value,
) -> Result<(), Error> {
    sqlx::query!(
        r#"insert into workflow_steps (job_id, step, direction, output, attempt)
           values ($1, $2, $3, $4, $5)
           on conflict (job_id, step, direction) do update set output = excluded.output"#,
        id.0,
        step,
        direction,
        output,
        attempt,
    )
    .execute(&mut **tx)
    .await
    .ctx("recording a workflow step")?;
    Ok(())
}

/// Marks the workflow as failed for good: from now on it runs undos.
pub async fn set_failure(tx: &mut Tx<'_>, id: JobId, failure: &Value) -> Result<(), Error> {
    sqlx::query!("update jobs set failure = $2 where id = $1", id.0, failure)
        .execute(&mut **tx)
        .await
        .ctx("recording a workflow failure")?;
    Ok(())
}

/// Gives the job back to the queue to run again at `run_at`, recording the error.
pub async fn retry_at(
    pool: &PgPool,
    id: JobId,
    attempt: i32,
    run_at: DateTime<Utc>,
    error: &Value,
) -> Result<bool, Error> {
    let n = sqlx::query!(
        r#"update jobs set state = 'available', run_at = $3, lease_expires_at = null,
                           locked_by = null, errors = errors || jsonb_build_array($4::jsonb)
           where id = $1 and attempt = $2 and state = 'running'"#,
        id.0,
        attempt,
        run_at,
        error,
    )
    .execute(pool)
    .await
    .ctx("rescheduling a job")?
    .rows_affected();
    Ok(n == 1)
}

/// Releases a job without counting the attempt (graceful shutdown).
pub async fn release(pool: &PgPool, id: JobId, attempt: i32) -> Result<bool, Error> {
    let n = sqlx::query!(
        r#"update jobs set state = 'available', attempt = attempt - 1, lease_expires_at = null,
                           locked_by = null
           where id = $1 and attempt = $2 and state = 'running'"#,
        id.0,
        attempt,
    )
    .execute(pool)
    .await
    .ctx("releasing a job")?
    .rows_affected();
    Ok(n == 1)
}

/// A job to finish: the attempt that holds it, and why it failed (`None`:
/// it succeeded).
#[derive(Clone, Copy, Debug)]
pub struct Ending<'a> {
    pub job: JobId,
    pub attempt: i32,
    pub failure: Option<&'a ActionFailure>,
}

/// A job [`finish_many`] finished, with its action's command and duration
/// when it had one still running.
#[derive(Clone, Debug, PartialEq)]
pub struct Ended {
    pub job: JobId,
    pub action: Option<(String, f64)>,
}

/// Finishes jobs still held by the attempts given, and their running
/// actions (`success`, or `error` with the failure's code and message), in
/// one statement. Returns the jobs finished; the others are no longer ours
/// (their lease expired and another worker took them), and their actions
/// are left alone. Rows are locked in id order (see [`heartbeat`]).
///
/// The statement is the function `meson_finish_jobs`, which looks each job
/// up by primary key whatever the planner's statistics (its migration tells
/// what a join cost), locking them in the order given: sorted here.
pub async fn finish_many(
    db: impl sqlx::PgExecutor<'_>,
    jobs: &[Ending<'_>],
) -> Result<Vec<Ended>, Error> {
    let mut jobs: Vec<&Ending<'_>> = jobs.iter().collect();
    jobs.sort_by_key(|j| j.job.0);
    let ids: Vec<i64> = jobs.iter().map(|j| j.job.0).collect();
    let attempts: Vec<i32> = jobs.iter().map(|j| j.attempt).collect();
    let codes: Vec<Option<String>> = jobs
        .iter()
        .map(|j| j.failure.map(|f| f.code.clone()))
        .collect();
    let messages: Vec<Option<String>> = jobs
        .iter()
        .map(|j| j.failure.map(|f| f.message.clone()))
        .collect();
    let rows = sqlx::query!(
        r#"select id as "id!", command, seconds from meson_finish_jobs($1, $2, $3, $4)"#,
        &ids,
        &attempts,
        &codes as &[Option<String>],
        &messages as &[Option<String>],
    )
    .fetch_all(db)
    .await
    .ctx("finishing jobs")?;
    Ok(rows
        .into_iter()
        .map(|r| Ended {
            job: JobId(r.id),
            action: r.command.zip(r.seconds),
        })
        .collect())
}

/// A job's state, for tests and operators.
#[derive(Clone, Debug)]
pub struct JobState {
    pub id: JobId,
    pub kind: String,
    pub state: String,
    pub attempt: i32,
    pub errors: Value,
    pub action_id: Option<Uuid>,
}

pub async fn for_action(pool: &PgPool, action: ActionId) -> Result<Vec<JobState>, Error> {
    Ok(sqlx::query!(
        "select id, kind, state, attempt, errors, action_id from jobs where action_id = $1 order by id",
        action.0
    )
    .fetch_all(pool)
    .await
    .ctx("loading jobs")?
    .into_iter()
    .map(|r| JobState {
        id: JobId(r.id),
        kind: r.kind,
        state: r.state,
        attempt: r.attempt,
        errors: r.errors,
        action_id: r.action_id,
    })
    .collect())
}

/// Deletes up to `limit` jobs finished more than `older_than_secs` ago (their
/// step logs go with them; actions stay as the user's history).
pub async fn prune(pool: &PgPool, older_than_secs: f64, limit: i64) -> Result<u64, Error> {
    Ok(sqlx::query!(
        r#"delete from jobs where id in (
             select id from jobs
             where finalized_at < now() - make_interval(secs => $1)
             order by finalized_at limit $2)"#,
        older_than_secs,
        limit,
    )
    .execute(pool)
    .await
    .ctx("pruning finished jobs")?
    .rows_affected())
}

/// Jobs not finished yet (queued or running).
pub async fn unfinished(pool: &PgPool) -> Result<i64, Error> {
    sqlx::query_scalar!(
        r#"select count(*) as "n!" from jobs where state in ('available', 'running')"#
    )
    .fetch_one(pool)
    .await
    .ctx("counting unfinished jobs")
}

/// Sets a job's state bypassing the engine, so tests can check that the
/// schema's CHECK constraints refuse impossible states.
#[doc(hidden)]
pub async fn testing_force_state(tx: &mut Tx<'_>, id: JobId, state: &str) -> Result<(), Error> {
    sqlx::query!("update jobs set state = $2 where id = $1", id.0, state)
        .execute(&mut **tx)
        .await
        .ctx("forcing a job state")?;
    Ok(())
}

/// How many transactions last wrote these jobs (their distinct `xmin`), so
/// tests can see what was group-committed.
#[doc(hidden)]
pub async fn testing_writers(pool: &PgPool, ids: &[JobId]) -> Result<i64, Error> {
    let ids: Vec<i64> = ids.iter().map(|j| j.0).collect();
    sqlx::query_scalar!(
        r#"select count(distinct xmin::text) as "n!" from jobs where id = any($1)"#,
        &ids
    )
    .fetch_one(pool)
    .await
    .ctx("counting job writers")
}

/// What the session's open transaction read of `jobs` so far, so tests can
/// see how a statement found its rows.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TestingReads {
    pub seq_scans: i64,
    pub seq_rows: i64,
    pub index_fetches: i64,
}

#[doc(hidden)]
pub async fn testing_reads(db: impl sqlx::PgExecutor<'_>) -> Result<TestingReads, Error> {
    let r = sqlx::query!(
        r#"select coalesce(sum(seq_scan), 0)::int8 as "seq_scans!",
                  coalesce(sum(seq_tup_read), 0)::int8 as "seq_rows!",
                  coalesce(sum(idx_tup_fetch), 0)::int8 as "index_fetches!"
           from pg_stat_xact_user_tables where relname = 'jobs'"#
    )
    .fetch_one(db)
    .await
    .ctx("reading the transaction's table statistics")?;
    Ok(TestingReads {
        seq_scans: r.seq_scans,
        seq_rows: r.seq_rows,
        index_fetches: r.index_fetches,
    })
}

/// The states of these jobs, in id order.
#[doc(hidden)]
pub async fn testing_states(pool: &PgPool, ids: &[JobId]) -> Result<Vec<String>, Error> {
    let ids: Vec<i64> = ids.iter().map(|j| j.0).collect();
    sqlx::query_scalar!(
        "select state from jobs where id = any($1) order by id",
        &ids
    )
    .fetch_all(pool)
    .await
    .ctx("reading job states")
}

/// Moves the time of these running jobs `secs` on: their leases expire
/// that much sooner, as if the time had passed (the queue reads
/// PostgreSQL's clock). Returns how many were running.
#[doc(hidden)]
pub async fn testing_age_leases(pool: &PgPool, ids: &[JobId], secs: f64) -> Result<u64, Error> {
    let ids: Vec<i64> = ids.iter().map(|j| j.0).collect();
    Ok(sqlx::query!(
        "update jobs set lease_expires_at = lease_expires_at - make_interval(secs => $2)
         where id = any($1) and state = 'running'",
        &ids,
        secs
    )
    .execute(pool)
    .await
    .ctx("ageing leases")?
    .rows_affected())
}

/// Moves the time of these finished jobs `secs` on, for their retention.
#[doc(hidden)]
pub async fn testing_age_finished(pool: &PgPool, ids: &[JobId], secs: f64) -> Result<u64, Error> {
    let ids: Vec<i64> = ids.iter().map(|j| j.0).collect();
    Ok(sqlx::query!(
        "update jobs set finalized_at = finalized_at - make_interval(secs => $2)
         where id = any($1) and finalized_at is not null",
        &ids,
        secs
    )
    .execute(pool)
    .await
    .ctx("ageing finished jobs")?
    .rows_affected())
}

/// Jobs by state and kind, for metrics (finished ones are counted until
/// they are pruned).
pub async fn counts(pool: &PgPool) -> Result<Vec<(String, String, i64)>, Error> {
    Ok(sqlx::query!(
        r#"select state, kind, count(*) as "n!" from jobs
           where state in ('available', 'running') group by state, kind"#
    )
    .fetch_all(pool)
    .await
    .ctx("counting jobs")?
    .into_iter()
    .map(|r| (r.state, r.kind, r.n))
    .collect())
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn records_of_one_job_share_its_lock_and_a_heartbeat_waits_for_them() {
        let db = crate::testing::TestDatabase::new().await;
        let mut tx = crate::begin(&db.pool).await.expect("begin");
        let new = NewJob {
            kind: "k".into(),
            args: serde_json::json!({}),
            priority: 2,
            max_attempts: 3,
            concurrency_key: None,
            action_id: None,
            tenant_id: None,
            trace_context: None,
        };
        let Enqueued::Job(id) = enqueue(&mut tx, &new).await.expect("enqueue") else {
            panic!("no job")
        };
        crate::commit(tx).await.expect("commit");
        let job = claim(&db.pool, "w", &["k".to_owned()], 1, 30.0)
            .await
            .expect("claim")
            .remove(0);
        // Two items record at once: the second fences while the first's
        // transaction is open, without waiting for it (it would fail here).
        let mut a = crate::begin(&db.pool).await.expect("begin");
        let mut b = crate::begin(&db.pool).await.expect("begin");
        sqlx::raw_sql("set local lock_timeout = '2s'")
            .execute(&mut *b)
            .await
            .expect("lock_timeout");
        for (tx, step) in [(&mut a, "s[1]"), (&mut b, "s[2]")] {
            assert!(fence_shared(tx, id, job.attempt).await.expect("fence"));
            record_step(tx, id, job.attempt, step, "do", &Value::Null)
                .await
                .expect("record");
        }
        // A heartbeat (as a reclaim or a completion would) waits for both.
        let pool = db.pool.clone();
        let beat = tokio::spawn(async move { heartbeat(&pool, &[(id, job.attempt)], 30.0).await });
        assert!(
            crate::testing::a_session_waits_for_a_lock(&db.pool).await,
            "the heartbeat did not wait for the records"
        );
        crate::commit(a).await.expect("commit a");
        crate::commit(b).await.expect("commit b");
        assert_eq!(beat.await.expect("joined").expect("heartbeat"), vec![id]);
        let steps: Vec<String> = steps(&db.pool, id)
            .await
            .expect("steps")
            .into_iter()
            .map(|(s, _, _)| s)
            .collect();
        assert_eq!(steps.len(), 2, "{steps:?}");
    }

    #[test]
    fn a_locked_enqueue_names_the_resource_and_the_blocking_action() {
        assert_eq!(
            Enqueued::Job(JobId(7)).or_locked("vm", "v-1").unwrap(),
            JobId(7)
        );
        let blocking = ActionId(uuid::Uuid::from_u128(42));
        match Enqueued::Locked(Some(blocking)).or_locked("vm", "v-1") {
            Err(Error::Locked {
                kind,
                id,
                action_id,
            }) => assert_eq!((kind, id.as_str(), action_id), ("vm", "v-1", blocking.0)),
            other => panic!("{other:?}"),
        }
        match Enqueued::Locked(None).or_locked("network", "n-1") {
            Err(Error::Locked { action_id, .. }) => assert!(action_id.is_nil()),
            other => panic!("{other:?}"),
        }
        assert_eq!(Enqueued::Job(JobId(3)).of_new("VM").unwrap(), JobId(3));
        assert!(matches!(
            Enqueued::Locked(None).of_new("VM"),
            Err(Error::Internal { .. })
        ));
    }
}
