//! What tests need to run the reconciler's passes themselves (the e2e
//! Meson runs its own reconciler only once an hour).

use crate::harness::Meson;
use std::time::Duration;

/// The workflows' environment on meson's database and the simulator, for
/// running the reconciler's passes (auto-repair, drift detection) the way
/// the reconciler does.
pub fn workflow_env(
    m: &Meson,
    repair: meson_workflows::auto_repair::RepairConfig,
) -> meson_workflows::Env {
    let pool = m.dev().pool.clone();
    meson_workflows::Env {
        atomos: meson_workflows::Atomos::new(
            pool.clone(),
            atomos_driver::ClientOptions {
                timeout: Duration::from_secs(5),
                ..atomos_driver::ClientOptions::default()
            },
        ),
        pool,
        config: meson_workflows::WorkflowConfig {
            repair,
            ..meson_workflows::WorkflowConfig::default()
        },
    }
}
