//! The PostgreSQL job queue and the workflow engine.
//!
//! A workflow is a list of typed steps (see [`steps!`]), each with an action and an optional
//! undo. After each step its output is recorded in PostgreSQL (fenced by the
//! job's attempt), so a worker that dies is resumed by another from the last
//! recorded step. A fatal error, or retries exhausted, runs the undos of the
//! completed steps in reverse and ends the action in `error`.

pub mod backoff;
pub mod completer;
pub mod engine;
pub mod testing;
pub mod trace_context;
pub mod wakeup;
pub mod worker;
pub mod workflow;

pub use meson_db::jobs::Enqueued;
pub use worker::{RunningJob, Worker, WorkerConfig, WorkerHandle};
pub use workflow::{
    EnqueueOpts, Step, StepCtx, StepError, StepResult, Workflow, enqueue, job, to_output,
};
