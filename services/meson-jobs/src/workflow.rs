//! What a workflow is: typed steps with typed inputs and recorded outputs.

use meson_core::{ActionId, Code, JobId};
use meson_db::jobs::{Enqueued, NewJob};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::HashMap;
use std::future::Future;

/// Why a step failed, and whether trying again can help.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// A transient fault (timeout, 5xx, lost connection): retry with backoff.
    #[error("{code}: {message}")]
    Retryable { code: String, message: String },
    /// Retrying cannot help (invalid request, no capacity): unwind now.
    #[error("{code}: {message}")]
    Fatal { code: String, message: String },
}

impl StepError {
    pub fn retryable(code: impl Into<String>, message: impl Into<String>) -> Self {
        StepError::Retryable {
            code: code.into(),
            message: message.into(),
        }
    }

    pub fn fatal(code: impl Into<String>, message: impl Into<String>) -> Self {
        StepError::Fatal {
            code: code.into(),
            message: message.into(),
        }
    }

    /// A fatal internal error (`service_error`): a bug or broken invariant.
    pub fn internal(message: impl Into<String>) -> Self {
        StepError::fatal(Code::ServiceError, message)
    }

    /// A retryable internal error (`service_error`): a fault that may pass.
    pub fn temporary(message: impl Into<String>) -> Self {
        StepError::retryable(Code::ServiceError, message)
    }

    pub fn code(&self) -> &str {
        match self {
            StepError::Retryable { code, .. } | StepError::Fatal { code, .. } => code,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            StepError::Retryable { message, .. } | StepError::Fatal { message, .. } => message,
        }
    }
}

impl From<meson_core::Error> for StepError {
    fn from(e: meson_core::Error) -> Self {
        use meson_core::Error as E;
        match e {
            // Database hiccups, a database out of reach (a failover) and
            // timeouts pass; the step is idempotent.
            E::Internal { .. } | E::Unavailable { .. } | E::Outage { .. } | E::Timeout => {
                tracing::warn!(error = %e, "retryable error in workflow step");
                StepError::temporary("a temporary error occurred")
            }
            other => StepError::fatal(other.code(), other.public_message()),
        }
    }
}

pub type StepResult<T = Value> = Result<T, StepError>;

/// Serializes a step's output for the log.
pub fn to_output(v: impl Serialize) -> StepResult {
    serde_json::to_value(v).map_err(|e| StepError::internal(format!("encoding step output: {e}")))
}

/// The steps of one workflow: a fieldless enum, declared with [`steps!`](crate::steps).
///
/// The names are persisted in each job's step log (a resumed job skips the
/// steps recorded there): never rename one.
pub trait Step: Copy + Eq + std::fmt::Debug + Send + Sync + 'static {
    /// Every step, in the order they run.
    const ALL: &'static [Self];

    /// The persisted name.
    fn name(self) -> &'static str;
}

/// Declares the steps of a workflow: an enum whose variants are the steps in
/// order, each with its persisted name, implementing [`Step`]:
///
/// ```
/// meson_jobs::steps! {
///     /// The steps of creating a thing.
///     pub enum CreateStep {
///         Place = "place",
///         Register = "register",
///     }
/// }
/// use meson_jobs::Step;
/// assert_eq!(CreateStep::ALL, &[CreateStep::Place, CreateStep::Register]);
/// assert_eq!(CreateStep::Register.name(), "register");
/// ```
///
/// A `run` or `undo` that forgets a step does not compile:
///
/// ```compile_fail,E0004
/// meson_jobs::steps! {
///     enum CreateStep {
///         Place = "place",
///         Register = "register",
///     }
/// }
/// fn run(step: CreateStep) -> u8 {
///     match step {
///         CreateStep::Place => 1,
///     }
/// }
/// ```
#[macro_export]
macro_rules! steps {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $persisted:literal),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($(#[$vmeta])* $variant),*
        }

        impl $crate::Step for $name {
            const ALL: &'static [Self] = &[$($name::$variant),*];

            fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $persisted),*
                }
            }
        }
    };
}

/// Everything a step may read: the workflow's parameters and earlier
/// outputs, by step.
pub struct StepCtx<'a, P, S> {
    pub params: &'a P,
    pub job: JobId,
    pub attempt: i32,
    pub action: Option<ActionId>,
    pub(crate) outputs: &'a HashMap<String, Value>,
    pub(crate) pool: &'a meson_db::PgPool,
    pub(crate) step: S,
}

/// The record key of one fanned-out item of a step.
fn item_key(step: &str, key: &str) -> String {
    format!("{step}[{key}]")
}

impl<P, S: Step> StepCtx<'_, P, S> {
    /// The recorded output of an earlier step.
    pub fn output<T: DeserializeOwned>(&self, step: S) -> StepResult<T> {
        let step = step.name();
        let v = self.outputs.get(step).ok_or_else(|| {
            StepError::internal(format!("workflow step '{step}' has no output yet"))
        })?;
        serde_json::from_value(v.clone())
            .map_err(|e| StepError::internal(format!("decoding output of step '{step}': {e}")))
    }

    /// Runs `f` once per item, at most `limit` at a time, recording each
    /// item's output as it completes (under `step[key]`): a step resumed after
    /// a crash skips the items already done. Returns the outputs in item order.
    /// After the first error no new item starts; those running finish and
    /// are recorded, then the error is returned. Items must be idempotent
    /// like any step: one cut short by a crash runs again.
    pub async fn fan_out<T, O, F, Fut>(
        &self,
        items: Vec<(String, T)>,
        limit: usize,
        f: F,
    ) -> StepResult<Vec<O>>
    where
        O: Serialize + DeserializeOwned,
        F: Fn(T) -> Fut,
        Fut: Future<Output = StepResult<O>>,
    {
        use futures::stream::{self, StreamExt};
        let keys: Vec<String> = items.iter().map(|(k, _)| k.clone()).collect();
        let mut done: HashMap<String, Value> = HashMap::new();
        let pending: Vec<(String, T)> = items
            .into_iter()
            .filter(
                |(k, _)| match self.outputs.get(&item_key(self.step.name(), k)) {
                    Some(v) => {
                        done.insert(k.clone(), v.clone());
                        false
                    }
                    None => true,
                },
            )
            .collect();
        // After the first error no new item starts, but items in flight run
        // to completion and are recorded: a retry redoes as little as possible.
        let failed = std::sync::atomic::AtomicBool::new(false);
        let failed = &failed;
        let f = &f;
        let results: Vec<StepResult<Option<(String, Value)>>> = stream::iter(pending)
            .map(|(key, item)| async move {
                if failed.load(std::sync::atomic::Ordering::SeqCst) {
                    return Ok(None);
                }
                match f(item).await.and_then(to_output) {
                    Ok(out) => {
                        self.record_item(&key, &out).await?;
                        Ok(Some((key, out)))
                    }
                    Err(e) => {
                        failed.store(true, std::sync::atomic::Ordering::SeqCst);
                        Err(e)
                    }
                }
            })
            .buffer_unordered(limit.max(1))
            .collect()
            .await;
        let mut fresh = Vec::new();
        for r in results {
            if let Some(pair) = r? {
                fresh.push(pair);
            }
        }
        done.extend(fresh);
        keys.iter()
            .map(|k| {
                let v = done.remove(k).unwrap_or(Value::Null);
                serde_json::from_value(v)
                    .map_err(|e| StepError::internal(format!("decoding output of item {k}: {e}")))
            })
            .collect()
    }

    async fn record_item(&self, key: &str, out: &Value) -> StepResult<()> {
        let mut tx = meson_db::begin(self.pool).await?;
        // Items end at the same time (a cluster's nodes booting together):
        // their records share the job's lock instead of queueing for it.
        if !meson_db::jobs::fence_shared(&mut tx, self.job, self.attempt).await? {
            return Err(StepError::retryable(
                "lease_lost",
                "another worker owns this job now",
            ));
        }
        meson_db::jobs::record_step(
            &mut tx,
            self.job,
            self.attempt,
            &item_key(self.step.name(), key),
            "do",
            out,
        )
        .await?;
        meson_db::commit(tx).await?;
        Ok(())
    }

    /// Outputs of the fanned-out items of `step` that completed, by key (for undos).
    pub fn fan_out_outputs<T: DeserializeOwned>(&self, step: S) -> Vec<(String, T)> {
        let prefix = format!("{}[", step.name());
        let mut out: Vec<(String, T)> = self
            .outputs
            .iter()
            .filter_map(|(k, v)| {
                let key = k.strip_prefix(&prefix)?.strip_suffix(']')?;
                Some((key.to_owned(), serde_json::from_value(v.clone()).ok()?))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The recorded output of an earlier step, if it ran.
    pub fn try_output<T: DeserializeOwned>(&self, step: S) -> Option<T> {
        self.outputs
            .get(step.name())
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }
}

/// A durable workflow: its steps are [`Workflow::Step`], run in the order of
/// [`Step::ALL`]; their names are persisted: never rename one.
///
/// Every step and undo must be idempotent: it may run again after a crash
/// between doing its work and recording its output. "Already exists" and
/// "already gone" count as success.
pub trait Workflow: Send + Sync + 'static {
    /// The job kind, persisted.
    const KIND: &'static str;
    type Params: Serialize + DeserializeOwned + Send + Sync + 'static;
    /// The steps (see [`steps!`](crate::steps)).
    type Step: Step;

    fn run(
        &self,
        cx: &StepCtx<'_, Self::Params, Self::Step>,
        step: Self::Step,
    ) -> impl Future<Output = StepResult> + Send;

    /// Undoes a completed step (or the one that failed, which may have done
    /// part of its work). Steps without an undo just return `Ok`.
    fn undo(
        &self,
        cx: &StepCtx<'_, Self::Params, Self::Step>,
        step: Self::Step,
    ) -> impl Future<Output = StepResult<()>> + Send;

    /// Runs after the undos of a failed workflow, e.g. to mark the resource `error`.
    fn on_failed(
        &self,
        _params: &Self::Params,
        _failure: &meson_core::action::ActionFailure,
    ) -> impl Future<Output = StepResult<()>> + Send {
        async { Ok(()) }
    }
}

/// Options of one enqueue.
#[derive(Clone, Debug)]
pub struct EnqueueOpts {
    pub action: Option<ActionId>,
    pub tenant: Option<String>,
    pub concurrency_key: Option<String>,
    pub priority: i16,
    pub max_attempts: i32,
}

impl Default for EnqueueOpts {
    fn default() -> Self {
        EnqueueOpts {
            action: None,
            tenant: None,
            concurrency_key: None,
            priority: 2,
            max_attempts: 10,
        }
    }
}

/// The job row of workflow `W` with `params`: what [`enqueue`] inserts,
/// for a statement that inserts it with other rows.
pub fn job<W: Workflow>(
    params: &W::Params,
    opts: EnqueueOpts,
) -> Result<NewJob, meson_core::Error> {
    let args = serde_json::to_value(params)
        .map_err(|e| meson_core::Error::internal_from("encoding workflow params", e))?;
    Ok(NewJob {
        kind: W::KIND.to_owned(),
        args,
        priority: opts.priority,
        max_attempts: opts.max_attempts,
        concurrency_key: opts.concurrency_key,
        action_id: opts.action,
        tenant_id: opts.tenant,
        trace_context: crate::trace_context::current(),
    })
}

/// Enqueues workflow `W` in the caller's transaction.
pub async fn enqueue<W: Workflow>(
    tx: &mut meson_db::Tx<'_>,
    params: &W::Params,
    opts: EnqueueOpts,
) -> Result<Enqueued, meson_core::Error> {
    meson_db::jobs::enqueue(tx, &job::<W>(params, opts)?).await
}

#[cfg(test)]
mod tests {
    use super::StepError;
    use meson_core::Error;

    #[test]
    fn a_database_out_of_reach_is_retried_a_refusal_is_not() {
        let outage = Error::Outage {
            what: "the database",
            retry_after: 2,
            source: None,
        };
        assert!(matches!(
            StepError::from(outage),
            StepError::Retryable { .. }
        ));
        assert!(matches!(
            StepError::from(Error::Timeout),
            StepError::Retryable { .. }
        ));
        assert!(matches!(
            StepError::from(Error::not_found("vm", "x")),
            StepError::Fatal { .. }
        ));
    }
}
