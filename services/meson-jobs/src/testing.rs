//! A generic harness every workflow must pass (after Omicron's saga test helpers):
//!
//! - every step run twice is harmless;
//! - a failure injected at each step in turn, before or after the step did its
//!   work, unwinds to a clean slate;
//! - every undo run twice is harmless;
//! - a worker killed before each step is resumed by another to the same end state.
//!
//! A workflow supplies a [`Scenario`]: how to start it, what "done" and
//! "clean" look like. The harness wraps the workflow in [`Injected`].

use crate::engine::RetryPolicy;
use crate::workflow::{Step, StepCtx, StepError, StepResult, Workflow};
use crate::{Worker, WorkerConfig};
use meson_core::ActionId;
use meson_core::action::{Action, ActionFailure, ActionStatus};
use meson_db::PgPool;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

crate::steps! {
    /// The steps of [`Empty`]: none at all.
    pub enum NoSteps {}
}

/// A workflow without steps: claimed, then finished. For tests and
/// benchmarks of the queue itself.
pub struct Empty;

impl Workflow for Empty {
    const KIND: &'static str = "empty";
    type Params = serde_json::Value;
    type Step = NoSteps;
    async fn run(&self, _: &StepCtx<'_, serde_json::Value, NoSteps>, step: NoSteps) -> StepResult {
        match step {}
    }
    async fn undo(
        &self,
        _: &StepCtx<'_, serde_json::Value, NoSteps>,
        step: NoSteps,
    ) -> StepResult<()> {
        match step {}
    }
}

/// What to do to a workflow with steps `S`, set by the test.
#[derive(Clone, Debug)]
pub struct Plan<S> {
    pub run_twice: bool,
    pub undo_twice: bool,
    /// Fail this step before it does anything.
    pub fail_before: Option<S>,
    /// Run this step, then fail as if it crashed right after its work.
    pub fail_after: Option<S>,
    /// Never finish this step (the test kills the worker meanwhile).
    pub hang_at: Option<S>,
}

impl<S> Default for Plan<S> {
    fn default() -> Self {
        Plan {
            run_twice: false,
            undo_twice: false,
            fail_before: None,
            fail_after: None,
            hang_at: None,
        }
    }
}

/// A workflow with faults injected according to a [`Plan`].
pub struct Injected<W: Workflow> {
    pub inner: W,
    pub plan: Plan<W::Step>,
    /// Set once a hang point is reached.
    pub hung: Arc<AtomicBool>,
}

fn injected(step: impl Step) -> StepError {
    StepError::fatal(
        "injected_fault",
        format!("fault injected at step {}", step.name()),
    )
}

impl<W: Workflow> Workflow for Injected<W> {
    const KIND: &'static str = W::KIND;
    type Params = W::Params;
    type Step = W::Step;

    async fn run(&self, cx: &StepCtx<'_, W::Params, W::Step>, step: W::Step) -> StepResult {
        if self.plan.hang_at == Some(step) {
            self.hung.store(true, Ordering::SeqCst);
            std::future::pending::<()>().await;
        }
        if self.plan.fail_before == Some(step) {
            return Err(injected(step));
        }
        let mut out = self.inner.run(cx, step).await?;
        if self.plan.run_twice {
            out = self.inner.run(cx, step).await?;
        }
        if self.plan.fail_after == Some(step) {
            return Err(injected(step));
        }
        Ok(out)
    }

    async fn undo(&self, cx: &StepCtx<'_, W::Params, W::Step>, step: W::Step) -> StepResult<()> {
        self.inner.undo(cx, step).await?;
        if self.plan.undo_twice {
            self.inner.undo(cx, step).await?;
        }
        Ok(())
    }

    async fn on_failed(&self, params: &W::Params, failure: &ActionFailure) -> StepResult<()> {
        self.inner.on_failed(params, failure).await
    }
}

/// One workflow under test.
pub trait Scenario: Sync {
    type W: Workflow;

    /// A fresh workflow value sharing the scenario's environment.
    fn workflow(&self) -> Self::W;

    /// Creates what the API would (rows, job) and returns the action to watch.
    fn start(&self) -> impl Future<Output = ActionId> + Send;

    /// After success: the world is exactly as the workflow promises.
    fn assert_done(&self, action: ActionId) -> impl Future<Output = ()> + Send;

    /// After a failure and its unwind: nothing dangles, nothing leaks.
    fn assert_clean(&self, action: ActionId) -> impl Future<Output = ()> + Send;
}

/// The steps of a scenario's workflow.
type StepOf<S> = <<S as Scenario>::W as Workflow>::Step;

/// Runs the harness against a scenario on `pool`.
pub struct Harness<'a, S> {
    pub pool: &'a PgPool,
    pub scenario: &'a S,
}

/// Worker settings for tests: short leases and backoff so faults resolve fast.
pub fn test_worker_config() -> WorkerConfig {
    WorkerConfig {
        concurrency: 8,
        poll_interval: Duration::from_millis(100),
        lease: Duration::from_millis(600),
        shutdown_grace: Duration::from_secs(5),
        retry: RetryPolicy {
            base: Duration::from_millis(10),
            cap: Duration::from_millis(100),
            extra_undo_attempts: 5,
        },
        ..WorkerConfig::default()
    }
}

/// Waits (bounded) until an action is final.
pub async fn wait_final(pool: &PgPool, id: ActionId) -> Action {
    for _ in 0..1500 {
        let a = meson_db::actions::get(pool, None, id)
            .await
            .expect("action readable");
        if a.status != ActionStatus::Running {
            return a;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("action {id} still running after 30 s");
}

impl<S: Scenario> Harness<'_, S> {
    async fn run_with(&self, plan: Plan<StepOf<S>>) -> (Action, Arc<AtomicBool>) {
        let hung = Arc::new(AtomicBool::new(false));
        let wf = Injected {
            inner: self.scenario.workflow(),
            plan,
            hung: hung.clone(),
        };
        let worker = Worker::new(self.pool.clone(), test_worker_config())
            .register(wf)
            .start();
        let action = self.scenario.start().await;
        let done = wait_final(self.pool, action).await;
        worker.shutdown().await;
        (done, hung)
    }

    fn steps(&self) -> &'static [StepOf<S>] {
        <StepOf<S> as Step>::ALL
    }

    /// Every step run twice in a row ends in the same success.
    pub async fn steps_run_twice(&self) {
        let (a, _) = self
            .run_with(Plan {
                run_twice: true,
                ..Plan::default()
            })
            .await;
        assert_eq!(
            a.status,
            ActionStatus::Success,
            "steps run twice: {:?}",
            a.error
        );
        assert_eq!(a.progress, 100);
        self.scenario.assert_done(a.id).await;
    }

    /// A fault at each step, before and after its work, unwinds to a clean slate.
    pub async fn failure_at_each_step_unwinds(&self) {
        for &step in self.steps() {
            for plan in [
                Plan {
                    fail_before: Some(step),
                    ..Plan::default()
                },
                Plan {
                    fail_after: Some(step),
                    ..Plan::default()
                },
            ] {
                let label = format!("{plan:?}");
                let (a, _) = self.run_with(plan).await;
                assert_eq!(a.status, ActionStatus::Error, "{label}");
                let err = a.error.as_ref().expect("error set");
                assert_eq!(err.code, "injected_fault", "{label}");
                assert!(a.finished.is_some(), "{label}");
                self.scenario.assert_clean(a.id).await;
            }
        }
    }

    /// Every undo run twice is harmless.
    pub async fn undos_run_twice(&self) {
        for &step in self.steps() {
            let plan = Plan {
                fail_after: Some(step),
                undo_twice: true,
                ..Plan::default()
            };
            let (a, _) = self.run_with(plan).await;
            assert_eq!(a.status, ActionStatus::Error, "undo twice after {step:?}");
            assert_eq!(
                a.error.as_ref().map(|e| e.code.as_str()),
                Some("injected_fault")
            );
            self.scenario.assert_clean(a.id).await;
        }
    }

    /// A worker killed before each step (after the previous one was
    /// recorded) is resumed by another worker to the same end state.
    pub async fn killed_before_each_step_resumes(&self) {
        for &step in self.steps() {
            let hung = Arc::new(AtomicBool::new(false));
            let plan = Plan {
                hang_at: Some(step),
                ..Plan::default()
            };
            let wf = Injected {
                inner: self.scenario.workflow(),
                plan,
                hung: hung.clone(),
            };
            let doomed = Worker::new(self.pool.clone(), test_worker_config())
                .register(wf)
                .start();
            let action = self.scenario.start().await;
            for _ in 0..1500 {
                if hung.load(Ordering::SeqCst) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert!(hung.load(Ordering::SeqCst), "never reached step {step:?}");
            doomed.kill();

            let rescuer = Worker::new(self.pool.clone(), test_worker_config())
                .register(self.scenario.workflow())
                .start();
            let a = wait_final(self.pool, action).await;
            rescuer.shutdown().await;
            assert_eq!(
                a.status,
                ActionStatus::Success,
                "resumed after a kill before {step:?}: {:?}",
                a.error
            );
            self.scenario.assert_done(a.id).await;
        }
    }

    /// All four checks, one after the other.
    pub async fn run_all(&self) {
        self.steps_run_twice().await;
        self.failure_at_each_step_unwinds().await;
        self.undos_run_twice().await;
        self.killed_before_each_step_resumes().await;
    }
}
