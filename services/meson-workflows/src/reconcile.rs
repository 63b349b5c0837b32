//! The periodic reconciler: looks at every cluster and starts the
//! workflows its desired state calls for (automatic upgrades by update
//! policy, repair of failed nodes), and compares every standalone VM with
//! AtomOS's inventory (drift detection: [`crate::drift`]) and looks for
//! VMs no row names (orphans: [`crate::orphans`]), and runs the
//! backup schedule ([`crate::backup::tick`]), and writes consoles'
//! expiry (`meson_db::consoles::sweep`), and writes the statements of
//! months that are over (`meson_db::usage::close_statements`). It only enqueues
//! work and records what it finds; the workflows do the work, under the
//! same per-resource locks as the API's actions, so several worker
//! processes running the reconciler at once are harmless.

use crate::Env;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How long after a month ends its statements are written: longer than
/// any transaction that could still end a usage interval inside it.
pub const STATEMENT_GRACE: Duration = Duration::from_secs(600);

/// One pass over every cluster. Errors are logged by the loop; the next
/// pass tries again.
pub async fn tick(env: &Env) -> meson_core::Result<()> {
    // Each part runs whatever the others did: one failing (a host down for
    // drift detection) must not hold up the rest (a month's statements).
    let mut first_error = None;
    let mut note = |part: &str, r: meson_core::Result<()>| {
        if let Err(e) = r {
            tracing::warn!(part, error = %e, "a reconcile part failed");
            first_error.get_or_insert(e);
        }
    };
    note(
        "auto_repair",
        crate::auto_repair::tick(env).await.map(|_| ()),
    );
    note(
        "auto_upgrade",
        crate::auto_upgrade::tick(env).await.map(|_| ()),
    );
    note("drift", crate::drift::tick(env).await.map(|_| ()));
    // After drift: a VM found missing is `error` before any orphan is
    // adopted under its name on another host.
    note("orphans", crate::orphans::tick(env).await.map(|_| ()));
    note(
        "backups",
        crate::backup::tick(env, chrono::Utc::now())
            .await
            .map(|_| ()),
    );
    // Consoles' secrets do not outlive their minute: expired requests
    // forget their passwords.
    note(
        "consoles",
        meson_db::consoles::sweep(&env.pool).await.map(|swept| {
            if swept > 0 {
                tracing::debug!(swept, "consoles expired or closed");
            }
        }),
    );
    note(
        "statements",
        meson_db::usage::close_statements(&env.pool, STATEMENT_GRACE)
            .await
            .map(|closed| {
                if closed > 0 {
                    tracing::info!(months = closed, "statements written");
                }
            }),
    );
    first_error.map_or(Ok(()), Err)
}

/// Runs [`tick`] every `every` (jittered by up to a fifth) until `stop`.
pub fn spawn(
    env: Arc<Env>,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let jitter = every.mul_f64(rand::random::<f64>() / 5.0);
            tokio::select! {
                _ = tokio::time::sleep(every + jitter) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            if let Err(e) = tick(&env).await {
                tracing::warn!(error = %e, "reconcile pass failed");
            }
        }
    })
}
