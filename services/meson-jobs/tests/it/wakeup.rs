//! Waking workers: an enqueue notifies only while a worker sleeps, and a
//! job committed while a worker goes to sleep is never missed. The workers
//! here poll once an hour, so only a notification or the gate can bring
//! them a job.

use meson_db::jobs::{self, NewJob};
use meson_db::testing::TestDatabase;
use meson_jobs::engine::Outcome;
use meson_jobs::testing::{Empty, test_worker_config};
use meson_jobs::worker::JobEvent;
use meson_jobs::{EnqueueOpts, Worker, WorkerConfig};
use serde_json::json;
use sqlx::postgres::PgListener;
use std::time::Duration;
use tokio::sync::broadcast;

/// A worker that polls so rarely that the test would end first.
fn sleepy(id: &str) -> WorkerConfig {
    WorkerConfig {
        id: id.into(),
        poll_interval: Duration::from_secs(3600),
        ..test_worker_config()
    }
}

/// Waits (bounded) until `worker` is registered as asleep.
async fn registered(db: &TestDatabase, worker: &str) {
    for _ in 0..3000 {
        if jobs::sleepers(&db.pool)
            .await
            .unwrap()
            .iter()
            .any(|w| w == worker)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("worker {worker} never registered as asleep");
}

/// Waits (bounded, far below the hour the worker polls at) until a job
/// succeeded.
async fn succeeded(events: &mut broadcast::Receiver<JobEvent>) -> JobEvent {
    let e = tokio::time::timeout(Duration::from_secs(120), events.recv())
        .await
        .expect("the job was missed: only the hourly poll would find it now")
        .unwrap();
    assert_eq!(e.outcome, Outcome::Succeeded);
    e
}

async fn enqueue(tx: &mut meson_db::Tx<'_>) -> meson_core::JobId {
    meson_jobs::enqueue::<Empty>(tx, &json!({}), EnqueueOpts::default())
        .await
        .unwrap()
        .of_new("test job")
        .unwrap()
}

#[tokio::test]
async fn a_job_committed_while_the_worker_goes_to_sleep_is_not_missed() {
    let db = TestDatabase::new().await;
    // The producer inserts its job (and looks for sleeping workers: none)
    // before the worker starts, and commits only once the worker
    // registered: without a notification, and after the worker's last
    // look but for the gate, which holds that look until the commit.
    let mut producer = meson_db::begin(&db.pool).await.unwrap();
    let id = enqueue(&mut producer).await;
    let w = Worker::new(db.pool.clone(), sleepy("late"))
        .register(Empty)
        .start();
    let mut events = w.events();
    registered(&db, "late").await;
    meson_db::commit(producer).await.unwrap();
    assert_eq!(succeeded(&mut events).await.job, id);
    w.shutdown().await;
}

#[tokio::test]
async fn a_sleeping_worker_is_woken_by_each_enqueue() {
    let db = TestDatabase::new().await;
    let w = Worker::new(db.pool.clone(), sleepy("idle"))
        .register(Empty)
        .start();
    let mut events = w.events();
    for _ in 0..3 {
        // Picked up, the job ends the registration; idle again, the worker
        // registers again.
        registered(&db, "idle").await;
        let mut tx = meson_db::begin(&db.pool).await.unwrap();
        let id = enqueue(&mut tx).await;
        meson_db::commit(tx).await.unwrap();
        assert_eq!(succeeded(&mut events).await.job, id);
    }
    w.shutdown().await;
}

fn job(kind: &str) -> NewJob {
    NewJob {
        kind: kind.into(),
        args: json!({}),
        priority: 2,
        max_attempts: 3,
        concurrency_key: None,
        action_id: None,
        tenant_id: None,
        trace_context: None,
    }
}

#[tokio::test]
async fn enqueues_notify_only_while_a_worker_sleeps() {
    let db = TestDatabase::new().await;
    let mut listener = PgListener::connect_with(&db.pool).await.unwrap();
    listener.listen("meson_jobs").await.unwrap();
    let add = async |kind: &str, isolation: &str| {
        let mut tx = meson_db::begin(&db.pool).await.unwrap();
        sqlx::raw_sql(&format!("set transaction isolation level {isolation}"))
            .execute(&mut *tx)
            .await
            .unwrap();
        jobs::enqueue(&mut tx, &job(kind)).await.unwrap();
        meson_db::commit(tx).await.unwrap();
    };
    // Nobody asleep: no notification (notifications arrive in commit
    // order, so the next one received shows this one never came).
    add("busy", "read committed").await;
    // A worker asleep (this session stands for its listener).
    jobs::register_sleeper(&mut listener, "w").await.unwrap();
    add("asleep", "read committed").await;
    assert_eq!(listener.recv().await.unwrap().payload(), "asleep");
    jobs::unregister_sleeper(&mut listener, "w").await.unwrap();
    add("busy again", "read committed").await;
    // Other isolation levels cannot see a registration committed after
    // their snapshot, so they always notify.
    add("repeatable", "repeatable read").await;
    assert_eq!(listener.recv().await.unwrap().payload(), "repeatable");
    // A registration outliving its session is forgotten.
    sqlx::raw_sql("insert into job_sleepers (worker, pid) values ('gone', 0)")
        .execute(&db.pool)
        .await
        .unwrap();
    jobs::register_sleeper(&mut listener, "w").await.unwrap();
    assert_eq!(jobs::forget_dead_sleepers(&db.pool).await.unwrap(), 1);
    assert_eq!(jobs::sleepers(&db.pool).await.unwrap(), vec!["w"]);
}

#[tokio::test]
async fn the_gate_waits_for_producers_that_may_have_missed_a_registration() {
    let db = TestDatabase::new().await;
    let mut producer = meson_db::begin(&db.pool).await.unwrap();
    jobs::enqueue(&mut producer, &job("k")).await.unwrap();
    assert!(!jobs::gate_passed(&db.pool).await.unwrap());
    meson_db::commit(producer).await.unwrap();
    assert!(jobs::gate_passed(&db.pool).await.unwrap());
}
