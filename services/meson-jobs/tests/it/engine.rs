//! The engine with a toy workflow: retries, unwinding, panics, fan-out,
//! graceful shutdown.

use meson_core::action::{Action, ActionStatus, Command};
use meson_core::{ActionId, TenantId};
use meson_db::testing::TestDatabase;
use meson_jobs::testing::{test_worker_config, wait_final};
use meson_jobs::{
    EnqueueOpts, Enqueued, Step, StepCtx, StepError, StepResult, Worker, WorkerConfig, Workflow,
    to_output,
};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Default)]
struct Behaviour {
    /// Step "b" fails with a retryable error this many times.
    b_transient_failures: AtomicU32,
    b_always_fails: AtomicBool,
    b_panics: AtomicBool,
    /// Step "b" blocks until released.
    b_blocks: AtomicBool,
    /// Item 5 of the fan-out fails once.
    item_fails_once: AtomicBool,
    log: Mutex<Vec<String>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

impl Behaviour {
    fn log(&self, s: impl Into<String>) {
        self.log.lock().unwrap().push(s.into());
    }
    fn count(&self, s: &str) -> usize {
        self.log.lock().unwrap().iter().filter(|x| *x == s).count()
    }
}

struct InFlight<'a>(&'a Behaviour);

impl<'a> InFlight<'a> {
    fn enter(b: &'a Behaviour) -> Self {
        let n = b.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        b.max_in_flight.fetch_max(n, Ordering::SeqCst);
        InFlight(b)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

struct Toy(Arc<Behaviour>);

meson_jobs::steps! {
    enum ToyStep {
        A = "a",
        B = "b",
        Fan = "fan",
    }
}

impl Workflow for Toy {
    const KIND: &'static str = "toy";
    type Params = u32;
    type Step = ToyStep;

    async fn run(&self, cx: &StepCtx<'_, u32, ToyStep>, step: ToyStep) -> StepResult {
        let b = &self.0;
        match step {
            ToyStep::A => {
                b.log("a");
                to_output(*cx.params * 2)
            }
            ToyStep::B => {
                b.log("b");
                assert_eq!(
                    cx.output::<u32>(ToyStep::A)?,
                    *cx.params * 2,
                    "outputs of earlier steps are readable"
                );
                if b.b_panics.load(Ordering::SeqCst) {
                    panic!("step b exploded");
                }
                while b.b_blocks.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                if b.b_always_fails.load(Ordering::SeqCst) {
                    return Err(StepError::retryable("flaky", "b is flaky"));
                }
                if b.b_transient_failures.load(Ordering::SeqCst) > 0 {
                    b.b_transient_failures.fetch_sub(1, Ordering::SeqCst);
                    return Err(StepError::retryable("flaky", "b is flaky"));
                }
                to_output("b done")
            }
            ToyStep::Fan => {
                let items = (0..10u32).map(|i| (i.to_string(), i)).collect();
                let outs: Vec<u32> = cx
                    .fan_out(items, 3, |i| async move {
                        // Counted down on drop too: a cancelled item leaves the flight.
                        let _flying = InFlight::enter(b);
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        if i == 5 && b.item_fails_once.swap(false, Ordering::SeqCst) {
                            return Err(StepError::retryable("flaky", "item 5 is flaky"));
                        }
                        b.log(format!("item{i}"));
                        Ok(i * 10)
                    })
                    .await?;
                to_output(outs.iter().sum::<u32>())
            }
        }
    }

    async fn undo(&self, cx: &StepCtx<'_, u32, ToyStep>, step: ToyStep) -> StepResult<()> {
        self.0.log(format!("undo {}", step.name()));
        if step == ToyStep::Fan {
            for (k, _) in cx.fan_out_outputs::<u32>(ToyStep::Fan) {
                self.0.log(format!("undo item{k}"));
            }
        }
        Ok(())
    }
}

async fn start(db: &TestDatabase, max_attempts: i32) -> ActionId {
    let action = Action {
        id: ActionId::new(),
        tenant: TenantId("t".into()),
        command: Command::CreateVm.as_str().into(),
        status: ActionStatus::Running,
        progress: 0,
        started: chrono::Utc::now(),
        finished: None,
        resources: vec![],
        error: None,
    };
    let mut tx = meson_db::begin(&db.pool).await.unwrap();
    meson_db::actions::insert(&mut tx, &action).await.unwrap();
    let opts = EnqueueOpts {
        action: Some(action.id),
        max_attempts,
        ..EnqueueOpts::default()
    };
    assert!(matches!(
        meson_jobs::enqueue::<Toy>(&mut tx, &21, opts)
            .await
            .unwrap(),
        Enqueued::Job(_)
    ));
    meson_db::commit(tx).await.unwrap();
    action.id
}

async fn run(db: &TestDatabase, b: &Arc<Behaviour>, max_attempts: i32) -> Action {
    let w = Worker::new(db.pool.clone(), test_worker_config())
        .register(Toy(b.clone()))
        .start();
    let id = start(db, max_attempts).await;
    let a = wait_final(&db.pool, id).await;
    w.shutdown().await;
    a
}

#[tokio::test]
async fn transient_failures_are_retried_with_backoff() {
    let db = TestDatabase::new().await;
    let b = Arc::new(Behaviour::default());
    b.b_transient_failures.store(2, Ordering::SeqCst);
    let a = run(&db, &b, 5).await;
    assert_eq!(a.status, ActionStatus::Success);
    assert_eq!(a.progress, 100);
    assert_eq!(
        b.count("a"),
        1,
        "a completed step is not run again on retry"
    );
    assert_eq!(b.count("b"), 3);
    let jobs = meson_db::jobs::for_action(&db.pool, a.id).await.unwrap();
    assert_eq!((jobs[0].state.as_str(), jobs[0].attempt), ("succeeded", 3));
    assert_eq!(
        jobs[0].errors.as_array().unwrap().len(),
        2,
        "each failure is recorded"
    );
}

#[tokio::test]
async fn exhausted_retries_unwind_in_reverse() {
    let db = TestDatabase::new().await;
    let b = Arc::new(Behaviour::default());
    b.b_always_fails.store(true, Ordering::SeqCst);
    let a = run(&db, &b, 3).await;
    assert_eq!(a.status, ActionStatus::Error);
    let e = a.error.unwrap();
    assert_eq!(
        (e.code.as_str(), e.message.as_str()),
        ("flaky", "b is flaky")
    );
    assert_eq!(b.count("b"), 3, "max_attempts bounds the tries");
    let log = b.log.lock().unwrap().clone();
    let undos: Vec<_> = log
        .iter()
        .filter(|l| l.starts_with("undo"))
        .cloned()
        .collect();
    assert_eq!(
        undos,
        ["undo b", "undo a"],
        "the failed step and then the completed ones, in reverse"
    );
}

#[tokio::test]
async fn a_panicking_step_fails_the_action_instead_of_looping() {
    let db = TestDatabase::new().await;
    let b = Arc::new(Behaviour::default());
    b.b_panics.store(true, Ordering::SeqCst);
    let a = run(&db, &b, 5).await;
    assert_eq!(a.status, ActionStatus::Error);
    assert_eq!(
        a.error.unwrap().code,
        meson_core::Code::ServiceError.as_str()
    );
    assert_eq!(b.count("b"), 1);
    assert_eq!(b.count("undo a"), 1);
}

#[tokio::test]
async fn fan_out_is_bounded_and_resumes_without_redoing_items() {
    let db = TestDatabase::new().await;
    let b = Arc::new(Behaviour::default());
    b.item_fails_once.store(true, Ordering::SeqCst);
    let a = run(&db, &b, 5).await;
    assert_eq!(a.status, ActionStatus::Success, "{:?}", a.error);
    assert!(
        b.max_in_flight.load(Ordering::SeqCst) <= 3,
        "at most 3 items at once"
    );
    assert!(
        b.max_in_flight.load(Ordering::SeqCst) >= 2,
        "items do run in parallel"
    );
    for i in 0..10 {
        assert_eq!(
            b.count(&format!("item{i}")),
            1,
            "item {i} completed exactly once"
        );
    }
}

#[tokio::test]
async fn shutdown_releases_a_job_that_cannot_finish_in_time() {
    let db = TestDatabase::new().await;
    let b = Arc::new(Behaviour::default());
    b.b_blocks.store(true, Ordering::SeqCst);
    let cfg = WorkerConfig {
        shutdown_grace: Duration::from_millis(100),
        ..test_worker_config()
    };
    let w = Worker::new(db.pool.clone(), cfg)
        .register(Toy(b.clone()))
        .start();
    let id = start(&db, 5).await;
    while b.count("b") == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    w.shutdown().await;
    let jobs = meson_db::jobs::for_action(&db.pool, id).await.unwrap();
    assert_eq!(
        (jobs[0].state.as_str(), jobs[0].attempt),
        ("available", 0),
        "released, attempt not counted"
    );

    b.b_blocks.store(false, Ordering::SeqCst);
    let a = run_existing(&db, &b, id).await;
    assert_eq!(a.status, ActionStatus::Success);
    assert_eq!(b.count("a"), 1, "resumed after the last recorded step");
}

#[tokio::test]
async fn a_stopping_worker_lists_its_running_jobs_and_releases_them_when_told() {
    let db = TestDatabase::new().await;
    let b = Arc::new(Behaviour::default());
    b.b_blocks.store(true, Ordering::SeqCst);
    // A grace period no test waits out: only `release_now` ends the job.
    let cfg = WorkerConfig {
        shutdown_grace: Duration::from_secs(3600),
        ..test_worker_config()
    };
    let w = Worker::new(db.pool.clone(), cfg)
        .register(Toy(b.clone()))
        .start();
    let id = start(&db, 5).await;
    let mut running = w.running();
    let jobs = running
        .wait_for(|r| !r.is_empty())
        .await
        .expect("the worker runs")
        .clone();
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        (jobs[0].kind.as_str(), jobs[0].action_id),
        ("toy", Some(id))
    );

    // Stopping: no new claims, the running job goes on.
    w.stop_claiming();
    let other = start(&db, 5).await;
    while b.count("b") == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        w.running().borrow().iter().any(|j| j.action_id == Some(id)),
        "still running"
    );

    w.release_now();
    running.wait_for(|r| r.is_empty()).await.expect("released");
    w.shutdown().await;
    for action in [id, other] {
        let jobs = meson_db::jobs::for_action(&db.pool, action).await.unwrap();
        assert_eq!(
            (jobs[0].state.as_str(), jobs[0].attempt),
            ("available", 0),
            "released (or never claimed), attempt not counted"
        );
    }

    b.b_blocks.store(false, Ordering::SeqCst);
    let w = Worker::new(db.pool.clone(), test_worker_config())
        .register(Toy(b.clone()))
        .start();
    for action in [id, other] {
        assert_eq!(
            wait_final(&db.pool, action).await.status,
            ActionStatus::Success
        );
    }
    w.shutdown().await;
    assert_eq!(
        b.count("a"),
        2,
        "once per action: the released one resumed after step a"
    );
}

async fn run_existing(db: &TestDatabase, b: &Arc<Behaviour>, id: ActionId) -> Action {
    let w = Worker::new(db.pool.clone(), test_worker_config())
        .register(Toy(b.clone()))
        .start();
    let a = wait_final(&db.pool, id).await;
    w.shutdown().await;
    a
}

/// A workflow whose one step takes a while, counting the runs at once.
struct Slow(Arc<Behaviour>);

meson_jobs::steps! {
    enum SlowStep {
        Wait = "wait",
    }
}

impl Workflow for Slow {
    const KIND: &'static str = "slow";
    type Params = u32;
    type Step = SlowStep;

    async fn run(&self, _cx: &StepCtx<'_, u32, SlowStep>, _step: SlowStep) -> StepResult {
        let _flying = InFlight::enter(&self.0);
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.0.log("wait");
        to_output(())
    }

    async fn undo(&self, _cx: &StepCtx<'_, u32, SlowStep>, _step: SlowStep) -> StepResult<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_worker_runs_at_most_its_concurrency_and_holds_at_most_twice_that() {
    let db = TestDatabase::new().await;
    let b = Arc::new(Behaviour::default());
    let mut tx = meson_db::begin(&db.pool).await.unwrap();
    let mut ids = Vec::new();
    for i in 0..24u32 {
        match meson_jobs::enqueue::<Slow>(&mut tx, &i, EnqueueOpts::default()).await {
            Ok(Enqueued::Job(id)) => ids.push(id),
            other => panic!("not enqueued: {other:?}"),
        }
    }
    meson_db::commit(tx).await.unwrap();
    let cfg = WorkerConfig {
        concurrency: 3,
        ..test_worker_config()
    };
    let w = Worker::new(db.pool.clone(), cfg)
        .register(Slow(b.clone()))
        .start();
    // Jobs held (claimed and not yet ended), as the database sees them,
    // until every job ended.
    let mut most_held = 0;
    loop {
        let states = meson_db::jobs::testing_states(&db.pool, &ids)
            .await
            .unwrap();
        most_held = most_held.max(states.iter().filter(|s| *s == "running").count());
        if states.iter().all(|s| s == "succeeded") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    w.shutdown().await;
    let most = b.max_in_flight.load(Ordering::SeqCst);
    assert!(most <= 3, "{most} steps ran at once");
    assert!(most >= 2, "jobs do run in parallel");
    assert!(most_held <= 6, "{most_held} jobs held at once");
    assert_eq!(b.count("wait"), 24, "every job ran once");
}
