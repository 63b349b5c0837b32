//! The queue: claim order, batching, SKIP LOCKED, leases, fencing, invariants.

use meson_core::JobId;
use meson_db::jobs::{self, Enqueued, NewJob};
use meson_db::testing::TestDatabase;
use serde_json::json;

fn job(kind: &str, priority: i16, key: Option<&str>) -> NewJob {
    NewJob {
        kind: kind.into(),
        args: json!({}),
        priority,
        max_attempts: 3,
        concurrency_key: key.map(str::to_owned),
        action_id: None,
        tenant_id: None,
        trace_context: None,
    }
}

async fn enqueue(db: &TestDatabase, j: NewJob) -> Enqueued {
    let mut tx = meson_db::begin(&db.pool).await.unwrap();
    let r = jobs::enqueue(&mut tx, &j).await.unwrap();
    meson_db::commit(tx).await.unwrap();
    r
}

fn kinds() -> Vec<String> {
    vec!["k".into()]
}

/// Runs out the leases of `ids` (30 s ones) as their time passing would.
/// Leases are timed by PostgreSQL's clock, so the jobs' time is moved on
/// rather than waited for: no test depends on how fast the machine is.
async fn run_out_leases(db: &TestDatabase, ids: &[JobId]) {
    let moved = jobs::testing_age_leases(&db.pool, ids, 31.0).await.unwrap();
    assert_eq!(moved, ids.len() as u64, "every job given was running");
}

#[tokio::test]
async fn claims_by_priority_then_age_in_batches() {
    let db = TestDatabase::new().await;
    let Enqueued::Job(low) = enqueue(&db, job("k", 3, None)).await else {
        panic!()
    };
    let Enqueued::Job(high) = enqueue(&db, job("k", 1, None)).await else {
        panic!()
    };
    let Enqueued::Job(mid) = enqueue(&db, job("k", 2, None)).await else {
        panic!()
    };
    let Enqueued::Job(other) = enqueue(&db, job("other", 1, None)).await else {
        panic!()
    };

    let batch = jobs::claim(&db.pool, "w", &kinds(), 2, 30.0).await.unwrap();
    assert_eq!(
        batch.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![high, mid]
    );
    assert!(batch.iter().all(|j| j.attempt == 1));
    let rest = jobs::claim(&db.pool, "w", &kinds(), 10, 30.0)
        .await
        .unwrap();
    assert_eq!(
        rest.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![low],
        "kinds filter out {other}"
    );
    assert!(
        jobs::claim(&db.pool, "w", &kinds(), 10, 30.0)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn concurrent_claims_never_share_a_job() {
    let db = TestDatabase::new().await;
    for _ in 0..200 {
        enqueue(&db, job("k", 2, None)).await;
    }
    let claimers = (0..8).map(|i| {
        let pool = db.pool.clone();
        tokio::spawn(async move {
            let mut got = Vec::new();
            loop {
                let b = jobs::claim(&pool, &format!("w{i}"), &kinds(), 7, 30.0)
                    .await
                    .unwrap();
                if b.is_empty() {
                    return got;
                }
                got.extend(b.into_iter().map(|j| j.id));
            }
        })
    });
    let mut all: Vec<_> = Vec::new();
    for c in claimers {
        all.extend(c.await.unwrap());
    }
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!((n, all.len()), (200, 200), "every job claimed exactly once");
}

#[tokio::test]
async fn an_expired_lease_is_reclaimed_and_the_old_worker_is_fenced_out() {
    let db = TestDatabase::new().await;
    let Enqueued::Job(id) = enqueue(&db, job("k", 2, None)).await else {
        panic!()
    };
    let first = jobs::claim(&db.pool, "a", &kinds(), 1, 30.0)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(
        jobs::heartbeat(&db.pool, &[(id, first.attempt)], 30.0)
            .await
            .unwrap(),
        vec![id]
    );
    assert!(
        jobs::claim(&db.pool, "b", &kinds(), 1, 30.0)
            .await
            .unwrap()
            .is_empty(),
        "lease still held"
    );
    // A job of a higher priority, due meanwhile, waits behind the rescue.
    let Enqueued::Job(other) = enqueue(&db, job("k", 1, None)).await else {
        panic!()
    };

    run_out_leases(&db, &[id]).await;
    let second = jobs::claim(&db.pool, "b", &kinds(), 1, 30.0)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(
        (second.id, second.attempt),
        (id, 2),
        "the rescuer reclaimed the expired job first"
    );
    let rest = jobs::claim(&db.pool, "b", &kinds(), 5, 30.0).await.unwrap();
    assert_eq!(rest.iter().map(|j| j.id).collect::<Vec<_>>(), vec![other]);

    // The first worker can no longer heartbeat, record or finish.
    assert_eq!(
        jobs::heartbeat(&db.pool, &[(id, first.attempt)], 30.0)
            .await
            .unwrap(),
        vec![]
    );
    let mut tx = meson_db::begin(&db.pool).await.unwrap();
    assert!(!jobs::fence(&mut tx, id, first.attempt).await.unwrap());
    drop(tx);
    let mut tx = meson_db::begin(&db.pool).await.unwrap();
    assert!(jobs::fence(&mut tx, id, second.attempt).await.unwrap());
    // Finishing is fenced too: the stale attempt's completion matches nothing.
    assert_eq!(
        jobs::finish_many(&mut *tx, &[end(id, first.attempt)])
            .await
            .unwrap(),
        vec![]
    );
    assert_eq!(
        jobs::finish_many(
            &mut *tx,
            &[end(id, second.attempt), end(other, rest[0].attempt)]
        )
        .await
        .unwrap(),
        vec![
            jobs::Ended {
                job: id,
                action: None
            },
            jobs::Ended {
                job: other,
                action: None
            }
        ]
    );
    meson_db::commit(tx).await.unwrap();
    assert!(
        !jobs::retry_at(&db.pool, id, first.attempt, chrono::Utc::now(), &json!({}))
            .await
            .unwrap()
    );
    assert_eq!(jobs::unfinished(&db.pool).await.unwrap(), 0);
}

#[tokio::test]
async fn one_live_job_per_concurrency_key() {
    let db = TestDatabase::new().await;
    assert!(matches!(
        enqueue(&db, job("k", 2, Some("vm:1"))).await,
        Enqueued::Job(_)
    ));
    assert_eq!(
        enqueue(&db, job("k", 2, Some("vm:1"))).await,
        Enqueued::Locked(None)
    );
    assert!(matches!(
        enqueue(&db, job("k", 2, Some("vm:2"))).await,
        Enqueued::Job(_)
    ));
    // Once the first finishes, the key is free again.
    let j = jobs::claim(&db.pool, "w", &kinds(), 1, 30.0)
        .await
        .unwrap()
        .remove(0);
    let mut tx = meson_db::begin(&db.pool).await.unwrap();
    assert!(jobs::fence(&mut tx, j.id, j.attempt).await.unwrap());
    jobs::finish_many(&mut *tx, &[end(j.id, j.attempt)])
        .await
        .unwrap();
    meson_db::commit(tx).await.unwrap();
    assert!(matches!(
        enqueue(&db, job("k", 2, Some("vm:1"))).await,
        Enqueued::Job(_)
    ));
}

#[tokio::test]
async fn a_job_exists_only_if_the_callers_transaction_commits() {
    let db = TestDatabase::new().await;
    let mut tx = meson_db::begin(&db.pool).await.unwrap();
    jobs::enqueue(&mut tx, &job("k", 2, None)).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(jobs::unfinished(&db.pool).await.unwrap(), 0);
}

#[tokio::test]
async fn invariants_are_enforced_by_the_schema() {
    let db = TestDatabase::new().await;
    let mut tx = meson_db::begin(&db.pool).await.unwrap();
    let bad = jobs::enqueue(
        &mut tx,
        &NewJob {
            priority: 9,
            ..job("k", 2, None)
        },
    )
    .await;
    assert!(bad.is_err(), "priority out of range");
    drop(tx);
    // A running job must hold a lease; a finished one must carry finalized_at.
    let Enqueued::Job(id) = enqueue(&db, job("k", 2, None)).await else {
        panic!()
    };
    let mut tx = meson_db::begin(&db.pool).await.unwrap();
    jobs::fence(&mut tx, id, 0).await.unwrap();
    let r = jobs::testing_force_state(&mut tx, id, "succeeded").await;
    assert!(r.is_err(), "succeeded without finalized_at must be refused");
}

#[tokio::test]
async fn finished_jobs_are_pruned_after_retention() {
    let db = TestDatabase::new().await;
    let Enqueued::Job(id) = enqueue(&db, job("k", 2, None)).await else {
        panic!()
    };
    enqueue(&db, job("k", 2, None)).await;
    let j = jobs::claim(&db.pool, "w", &kinds(), 1, 30.0)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(j.id, id);
    let mut tx = meson_db::begin(&db.pool).await.unwrap();
    jobs::fence(&mut tx, id, j.attempt).await.unwrap();
    jobs::finish_many(&mut *tx, &[end(id, j.attempt)])
        .await
        .unwrap();
    meson_db::commit(tx).await.unwrap();
    assert_eq!(
        jobs::prune(&db.pool, 3600.0, 100).await.unwrap(),
        0,
        "kept during retention"
    );
    // Two hours on (the time is moved, not waited for).
    let aged = jobs::testing_age_finished(&db.pool, &[id], 7200.0)
        .await
        .unwrap();
    assert_eq!(aged, 1);
    assert_eq!(
        jobs::prune(&db.pool, 3600.0, 100).await.unwrap(),
        1,
        "only the finished job goes"
    );
    assert_eq!(jobs::unfinished(&db.pool).await.unwrap(), 1);
}

#[tokio::test]
async fn completions_arriving_together_share_one_commit_and_stay_fenced() {
    let db = TestDatabase::new().await;
    for _ in 0..40 {
        enqueue(&db, job("k", 2, None)).await;
    }
    // The first job's lease runs out and another worker takes it: our
    // completion of it must be refused while the rest are written.
    let mut claimed = jobs::claim(&db.pool, "w", &kinds(), 1, 30.0).await.unwrap();
    claimed.extend(
        jobs::claim(&db.pool, "w", &kinds(), 39, 30.0)
            .await
            .unwrap(),
    );
    assert_eq!(claimed.len(), 40);
    assert!(claimed.iter().all(|j| j.steps.is_empty()));
    run_out_leases(&db, &[claimed[0].id]).await;
    let stolen = jobs::claim(&db.pool, "thief", &kinds(), 1, 30.0)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(stolen.id, claimed[0].id);

    let (completer, _guard) = meson_jobs::completer::Completer::start(db.pool.clone());
    // Every completion is queued before the completer task first runs (this
    // runtime has one thread): they land in one transaction.
    let done = futures::future::join_all(
        claimed
            .iter()
            .map(|j| completer.finish(j.id, j.attempt, None)),
    )
    .await;
    use meson_jobs::completer::Completed;
    assert_eq!(done[0].as_ref().unwrap(), &Completed::Lost);
    assert!(
        done[1..]
            .iter()
            .all(|d| d.as_ref().unwrap() == &Completed::Finished(None))
    );
    let ids: Vec<_> = claimed[1..].iter().map(|j| j.id).collect();
    assert_eq!(
        jobs::testing_writers(&db.pool, &ids).await.unwrap(),
        1,
        "one commit for every completion"
    );
    let states = jobs::testing_states(&db.pool, &[stolen.id]).await.unwrap();
    assert_eq!(states, ["running"], "the thief's job is still its own");
}

#[tokio::test]
async fn a_claim_brings_the_step_log_of_a_resumed_job() {
    let db = TestDatabase::new().await;
    let Enqueued::Job(id) = enqueue(&db, job("k", 2, None)).await else {
        panic!()
    };
    let first = jobs::claim(&db.pool, "w1", &kinds(), 1, 30.0)
        .await
        .unwrap()
        .remove(0);
    let mut tx = meson_db::begin(&db.pool).await.unwrap();
    assert!(jobs::fence(&mut tx, id, first.attempt).await.unwrap());
    jobs::record_step(&mut tx, id, first.attempt, "a", "do", &json!({"x": 1}))
        .await
        .unwrap();
    jobs::record_step(&mut tx, id, first.attempt, "b", "do", &json!(null))
        .await
        .unwrap();
    meson_db::commit(tx).await.unwrap();
    // The worker dies; its lease runs out.
    run_out_leases(&db, &[id]).await;
    let again = jobs::claim(&db.pool, "w2", &kinds(), 1, 30.0)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(again.id, id);
    let mut steps = again.steps.clone();
    steps.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        steps,
        [
            ("a".to_owned(), "do".to_owned(), json!({"x": 1})),
            ("b".to_owned(), "do".to_owned(), json!(null)),
        ]
    );
}

/// A successful end of `job`, held by `attempt`.
fn end(job: JobId, attempt: i32) -> jobs::Ending<'static> {
    jobs::Ending {
        job,
        attempt,
        failure: None,
    }
}

/// Claims 32 jobs and finishes them on `conn`, checking that neither
/// statement scanned `jobs` or fetched more than a few rows per job.
async fn claim_and_finish_32(conn: &mut sqlx::PgConnection, db: &TestDatabase) {
    let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
    let before = jobs::testing_reads(&mut *tx).await.unwrap();
    let claimed = jobs::claim(&mut *tx, "w", &kinds(), 32, 30.0)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 32);
    let after_claim = jobs::testing_reads(&mut *tx).await.unwrap();
    let endings: Vec<_> = claimed.iter().map(|j| end(j.id, j.attempt)).collect();
    let finished = jobs::finish_many(&mut *tx, &endings).await.unwrap();
    assert_eq!(finished.len(), 32);
    let after_finish = jobs::testing_reads(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();

    for (what, (from, to)) in [
        ("the claim", (before, after_claim)),
        ("the completion", (after_claim, after_finish)),
    ] {
        assert_eq!(
            (to.seq_scans - from.seq_scans, to.seq_rows - from.seq_rows),
            (0, 0),
            "{what} scanned the table"
        );
        let fetched = to.index_fetches - from.index_fetches;
        assert!(
            fetched <= 3 * 32,
            "{what} fetched {fetched} rows through indexes for 32 jobs"
        );
    }
    let ids: Vec<_> = claimed.iter().map(|j| j.id).collect();
    assert_eq!(
        jobs::testing_states(&db.pool, &ids).await.unwrap(),
        vec!["succeeded"; 32]
    );
}

#[tokio::test]
async fn a_claim_and_its_completion_read_only_their_jobs_whatever_the_statistics() {
    let db = TestDatabase::new().await;
    let mut conn = db.pool.acquire().await.unwrap();
    // Autovacuum does not analyze the table during the test, and the
    // session keeps each statement's plan until an analyze: PostgreSQL's
    // plan cache may settle on such a generic plan from a statement's sixth
    // run on (the bench's sessions did); forced here from the first.
    sqlx::raw_sql(
        "alter table jobs set (autovacuum_enabled = off);
         set plan_cache_mode = force_generic_plan",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    // Planned on the empty table...
    for _ in 0..8 {
        assert!(
            jobs::claim(&mut *conn, "w", &kinds(), 32, 30.0)
                .await
                .unwrap()
                .is_empty()
        );
        assert!(jobs::finish_many(&mut *conn, &[]).await.unwrap().is_empty());
    }
    // ...run on 20,000 finished jobs and 40 due ones.
    sqlx::raw_sql(
        "insert into jobs (kind, args, state, finalized_at)
           select 'k', '{}', 'succeeded', now() from generate_series(1, 20000);
         insert into jobs (kind, args) select 'k', '{}' from generate_series(1, 40);",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    claim_and_finish_32(&mut conn, &db).await;

    // Planned again on current statistics, with a backlog of 5,000 due jobs.
    sqlx::raw_sql(
        "insert into jobs (kind, args) select 'k', '{}' from generate_series(1, 5000);
         analyze jobs;",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    claim_and_finish_32(&mut conn, &db).await;
}
