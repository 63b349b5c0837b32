//! AtomOS targets, as operators register and manage them.

use super::App;
use crate::auth::Principal;
use meson_core::action::Action;
use meson_core::orphan::{Decision, Orphan};
use meson_core::parse::Warning;
use meson_core::target::Target;
use meson_core::{OrphanId, Result, TargetId, VmId};
use meson_db::scope;

/// What a drain did: the migrations it started, and the VMs it left.
pub struct Drained {
    pub target: Target,
    pub actions: Vec<Action>,
    pub left: Vec<(VmId, String)>,
}

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

    /// Drains a target: it takes no new VMs, and every tenant's VM on it
    /// (running or off) starts migrating to another host of its provider.
    /// A VM that cannot move (a cluster's node, one on private networks,
    /// one busy with another action) is left, with why; undrain and drain
    /// again once it is free.
    pub async fn target_drain(&self, p: &Principal, id: TargetId) -> Result<Drained> {
        let mut target = meson_db::targets::get(&self.pool, id).await?;
        if target.enabled {
            target.enabled = false;
            meson_db::targets::update(&self.pool, &target).await?;
        }
        let mut drained = Drained {
            target,
            actions: Vec::new(),
            left: Vec::new(),
        };
        for (vm, tenant, node) in meson_db::vms::on_target(&self.pool, id).await? {
            if node {
                drained.left.push((
                    vm,
                    "a cluster's node: replace it (its pool places the new one)".into(),
                ));
                continue;
            }
            let owner = Principal {
                tenant,
                subject: p.subject.clone(),
                role: p.role,
                email: None,
            };
            match self.vm_migrate(&owner, vm, &serde_json::json!({})).await {
                Ok((action, _)) => drained.actions.push(action),
                Err(e) => drained.left.push((vm, e.to_string())),
            }
        }
        tracing::info!(target = %drained.target.name, moving = drained.actions.len(),
            left = drained.left.len(), by = %p.subject, "AtomOS target drained");
        Ok(drained)
    }

    /// Undrains a target: it takes new VMs again (those moved off stay put).
    pub async fn target_undrain(&self, p: &Principal, id: TargetId) -> Result<Target> {
        let mut target = meson_db::targets::get(&self.pool, id).await?;
        target.enabled = true;
        meson_db::targets::update(&self.pool, &target).await?;
        tracing::info!(target = %target.name, by = %p.subject, "AtomOS target undrained");
        Ok(target)
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

/// Orphans: VMs hosts hold that meson has no record of. No tenant's rows:
/// operators read and decide them in the system scope. The API only
/// records a decision; the reconciler carries it out.
impl App {
    pub async fn orphan_list(&self, _p: &Principal) -> Result<Vec<Orphan>> {
        scope::system(meson_db::orphans::list(&self.pool)).await
    }

    pub async fn orphan_get(&self, _p: &Principal, id: OrphanId) -> Result<Orphan> {
        scope::system(meson_db::orphans::get(&self.pool, id)).await
    }

    /// Decides to adopt an orphan into a tenant (the one its name's tag
    /// names, if it carries one).
    pub async fn orphan_adopt(
        &self,
        p: &Principal,
        id: OrphanId,
        body: &serde_json::Value,
    ) -> Result<(Orphan, Vec<Warning>)> {
        let orphan = scope::system(meson_db::orphans::get(&self.pool, id)).await?;
        let (decision, warnings) = Decision::parse_adopt(body, &orphan)?;
        let orphan = scope::system(meson_db::orphans::decide(
            &self.pool, id, &decision, &p.subject,
        ))
        .await?;
        tracing::warn!(orphan = %id, name = %orphan.atomos_name, by = %p.subject,
            "orphan: adoption decided");
        Ok((orphan, warnings))
    }

    /// Decides to delete an orphan from its host, with its own volumes.
    pub async fn orphan_delete(&self, p: &Principal, id: OrphanId) -> Result<Orphan> {
        let orphan = scope::system(meson_db::orphans::decide(
            &self.pool,
            id,
            &Decision::Delete,
            &p.subject,
        ))
        .await?;
        tracing::warn!(orphan = %id, name = %orphan.atomos_name, by = %p.subject,
            "orphan: deletion decided");
        Ok(orphan)
    }
}
