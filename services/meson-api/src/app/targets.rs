//! AtomOS targets, as operators register and manage them.

use super::App;
use crate::auth::Principal;
use meson_core::parse::Warning;
use meson_core::target::Target;
use meson_core::{Result, TargetId};

impl App {
    pub async fn target_list(&self, _p: &Principal) -> Result<Vec<Target>> {
        meson_db::targets::list(&self.pool).await
    }

    pub async fn target_get(&self, _p: &Principal, id: TargetId) -> Result<Target> {
        meson_db::targets::get(&self.pool, id).await
    }

    /// Registers a target: new VMs may be placed on it at once, unless it
    /// is created disabled.
    pub async fn target_create(
        &self,
        p: &Principal,
        body: &serde_json::Value,
    ) -> Result<(Target, Vec<Warning>)> {
        let (target, warnings) = Target::parse_new(body)?;
        meson_db::targets::insert(&self.pool, &target).await?;
        tracing::info!(target = %target.name, by = %p.subject, "AtomOS target registered");
        Ok((target, warnings))
    }

    /// Changes a target's endpoint, or enables or disables it.
    pub async fn target_update(
        &self,
        p: &Principal,
        id: TargetId,
        body: &serde_json::Value,
    ) -> Result<(Target, Vec<Warning>)> {
        let (target, warnings) = meson_db::targets::get(&self.pool, id)
            .await?
            .patched(body)?;
        meson_db::targets::update(&self.pool, &target).await?;
        tracing::info!(target = %target.name, enabled = target.enabled, by = %p.subject,
            "AtomOS target updated");
        Ok((target, warnings))
    }
}
