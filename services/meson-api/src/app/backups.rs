//! Backups: a VM's policy (enable, disable), a backup taken now, reads,
//! renames and deletes of backups, and restores into the same VM or a new
//! one.

use super::list::{BackupQuery, Paged};
use super::vms::VmParts;
use super::{App, new_action};
use crate::auth::Principal;
use meson_core::action::{Action, Command, ResourceType};
use meson_core::backup::{
    Backup, BackupCreate, BackupKind, BackupPolicy, BackupStatus, MAX_BACKUP_NAME_LEN, Restore,
    RestoreInto,
};
use meson_core::parse::Warning;
use meson_core::vm::{Vm, VmStatus};
use meson_core::volume::VolumeKind;
use meson_core::{BackupId, Error, Result, VmId, naming};
use meson_workflows::{backup, vm_create, vm_restore};

pub struct BackupCreated {
    pub backup: Backup,
    pub action: Action,
    pub warnings: Vec<Warning>,
}

/// A restore accepted: the VM it writes (the same, or the new one), its
/// action, and whether the VM is new.
pub struct Restored {
    pub vm: Vm,
    pub parts: VmParts,
    pub action: Action,
    pub new: bool,
    pub warnings: Vec<Warning>,
}

impl App {
    pub async fn backup_get(&self, p: &Principal, id: BackupId) -> Result<Backup> {
        meson_db::backups::get(&self.pool, &p.tenant, id).await
    }

    pub async fn backup_list(&self, p: &Principal, q: &BackupQuery) -> Result<Paged<Backup>> {
        self.page(&p.tenant, &q.list.page, q.bound(&p.tenant)?, &q.filter())
            .await
    }

    /// Sets a VM's backup policy (a daily backup in its window, the newest
    /// `keep` kept); its automatic backups no longer expire.
    pub async fn vm_enable_backups(
        &self,
        p: &Principal,
        id: VmId,
        body: &serde_json::Value,
    ) -> Result<(Vm, VmParts, Vec<Warning>)> {
        let (mut policy, warnings) = BackupPolicy::parse(body, id)?;
        let mut tx = meson_db::begin(&self.pool).await?;
        let vm = meson_db::vms::get(&mut *tx, &p.tenant, id).await?;
        // The first backup is in a window opening from now on, unless the
        // window stays as it was.
        policy.since = match vm.backup_policy {
            Some(was)
                if (was.window_start, was.window_end)
                    == (policy.window_start, policy.window_end) =>
            {
                was.since
            }
            _ => Some(chrono::Utc::now()),
        };
        meson_db::backups::set_policy(&mut *tx, &p.tenant, id, Some(&policy)).await?;
        meson_db::backups::set_expiry(&mut *tx, id, None).await?;
        meson_db::commit(tx).await?;
        tracing::info!(vm = %id, window = %policy.window(), keep = policy.keep, "backups enabled");
        let (vm, parts) = self.vm_get(p, id).await?;
        Ok((vm, parts, warnings))
    }

    /// Clears a VM's backup policy: no more automatic backups, and those it
    /// has expire in as many days as the policy kept them.
    pub async fn vm_disable_backups(&self, p: &Principal, id: VmId) -> Result<(Vm, VmParts)> {
        let mut tx = meson_db::begin(&self.pool).await?;
        let vm = meson_db::vms::get(&mut *tx, &p.tenant, id).await?;
        meson_db::backups::set_policy(&mut *tx, &p.tenant, id, None).await?;
        if let Some(policy) = vm.backup_policy {
            let expires = chrono::Utc::now() + chrono::Duration::days(policy.keep.into());
            meson_db::backups::set_expiry(&mut *tx, id, Some(expires)).await?;
        }
        meson_db::commit(tx).await?;
        tracing::info!(vm = %id, "backups disabled");
        self.vm_get(p, id).await
    }

    /// Takes a backup of a VM now: in one transaction, under the VM's key,
    /// the backup (`creating`, counted against `images_gb`), its action
    /// and job.
    pub async fn vm_backup(
        &self,
        p: &Principal,
        id: VmId,
        body: &serde_json::Value,
    ) -> Result<BackupCreated> {
        let req = BackupCreate::parse(body)?;
        let mut tx = meson_db::begin(&self.pool).await?;
        let vm = meson_db::vms::get(&mut *tx, &p.tenant, id).await?;
        super::vms::live_on_host(&vm, "backed up")?;
        let b = backup::new_backup(
            &self.pool,
            &vm,
            BackupKind::Manual,
            req.name,
            req.labels,
            chrono::Utc::now(),
        )
        .await?;
        let action = new_action(
            p,
            Command::CreateBackup,
            vec![(ResourceType::Backup, b.id.0), (ResourceType::Vm, vm.id.0)],
        );
        meson_db::actions::insert(&mut tx, &action).await?;
        let params = backup::Params {
            backup_id: b.id,
            vm_id: vm.id,
        };
        backup::enqueue_create(&mut tx, &params, action.id, &p.tenant)
            .await?
            .or_locked("vm", vm.id)?;
        let held = self.hold_usage(&mut tx, &p.tenant).await?;
        meson_db::backups::insert(&mut tx, &b).await?;
        self.within_quotas(&mut tx, &p.tenant, &held).await?;
        meson_db::commit(tx).await?;
        tracing::info!(backup = %b.id, vm = %vm.id, action = %action.id, "backup accepted");
        Ok(BackupCreated {
            backup: b,
            action,
            warnings: req.warnings,
        })
    }

    /// Renames a backup and/or replaces its labels.
    pub async fn backup_update(
        &self,
        p: &Principal,
        id: BackupId,
        body: &serde_json::Value,
    ) -> Result<(Backup, Vec<Warning>)> {
        let renamed = meson_db::backups::RENAMED;
        let warnings = self
            .rename::<Backup>(&p.tenant, id.0, body, MAX_BACKUP_NAME_LEN, renamed)
            .await?;
        Ok((self.backup_get(p, id).await?, warnings))
    }

    /// Starts deleting a backup; `locked` while it is being taken, read by
    /// a restore, or deleted.
    pub async fn backup_delete(&self, p: &Principal, id: BackupId) -> Result<Action> {
        let mut tx = meson_db::begin(&self.pool).await?;
        let b = meson_db::backups::lock(&mut tx, &p.tenant, id).await?;
        let running = meson_db::backups::running_action(&mut tx, id).await?;
        if b.status == BackupStatus::Creating
            || (b.status != BackupStatus::Deleting && running.is_some())
        {
            return Err(Error::Locked {
                kind: "backup",
                id: id.to_string(),
                action_id: running.map(|a| a.0).unwrap_or_default(),
            });
        }
        let action = new_action(p, Command::DeleteBackup, vec![(ResourceType::Backup, id.0)]);
        meson_db::actions::insert(&mut tx, &action).await?;
        let params = backup::Params {
            backup_id: id,
            vm_id: b.vm_id,
        };
        backup::enqueue_delete(&mut tx, &params, action.id, &p.tenant)
            .await?
            .or_locked("backup", id)?;
        meson_db::backups::set_status(
            &mut *tx,
            id,
            &[BackupStatus::Available, BackupStatus::Error],
            BackupStatus::Deleting,
            None,
        )
        .await?;
        meson_db::commit(tx).await?;
        tracing::info!(backup = %id, action = %action.id, "backup delete accepted");
        Ok(action)
    }

    /// Restores a backup of VM `id` into it (`same`) or into a new VM made
    /// like it on the backup's host (`new`; VM `id` may be deleted by then).
    pub async fn vm_restore(
        &self,
        p: &Principal,
        id: VmId,
        body: &serde_json::Value,
    ) -> Result<Restored> {
        let req = Restore::parse(body)?;
        let mut tx = meson_db::begin(&self.pool).await?;
        // The VM, unless it is gone (a backup of it may still name it).
        let live = match meson_db::vms::get(&mut *tx, &p.tenant, id).await {
            Err(Error::NotFound { .. }) => None,
            other => Some(other?),
        };
        let no_vm = || Error::not_found("vm", id);
        let b = match meson_db::backups::lock(&mut tx, &p.tenant, req.backup).await {
            Err(Error::NotFound { .. }) if live.is_none() => return Err(no_vm()),
            Err(Error::NotFound { .. }) => {
                return Err(Error::invalid("backup", "no such backup"));
            }
            other => other?,
        };
        if live.is_none() && b.vm_id != id {
            return Err(no_vm());
        }
        if b.status != BackupStatus::Available {
            return Err(Error::Conflict {
                message: format!(
                    "backup {} is {}; only an available backup can be restored",
                    b.name,
                    b.status.as_str()
                ),
            });
        }
        match req.into {
            RestoreInto::Same => {
                let vm = live.ok_or_else(no_vm)?;
                self.restore_same(p, tx, vm, b, req.warnings).await
            }
            // The backed-up VM may be gone: its id still names its backups.
            RestoreInto::New { name } => {
                if b.vm_id != id {
                    return Err(Error::invalid(
                        "backup",
                        format!("is a backup of VM {}, not of this one", b.vm_name),
                    ));
                }
                self.restore_new(p, tx, b, name, req.warnings).await
            }
        }
    }

    async fn restore_same(
        &self,
        p: &Principal,
        mut tx: meson_db::Tx<'static>,
        vm: Vm,
        b: Backup,
        warnings: Vec<Warning>,
    ) -> Result<Restored> {
        if b.vm_id != vm.id {
            return Err(Error::invalid(
                "backup",
                format!(
                    "is a backup of VM {}, not of this one: restore it into a new VM",
                    b.vm_name
                ),
            ));
        }
        let action = new_action(
            p,
            Command::RestoreVm,
            vec![(ResourceType::Vm, vm.id.0), (ResourceType::Backup, b.id.0)],
        );
        meson_db::actions::insert(&mut tx, &action).await?;
        let params = vm_restore::Params {
            vm_id: vm.id,
            backup_id: b.id,
            restart: vm.status == VmStatus::Running,
        };
        vm_restore::enqueue(&mut tx, &params, action.id, &p.tenant)
            .await?
            .or_locked("vm", vm.id)?;
        // Checked with the VM's key held: nothing else changes it now.
        super::vms::live_on_host(&vm, "restored")?;
        if vm.placement.as_ref().map(|pl| pl.target_id) != Some(b.target_id) {
            return Err(Error::Conflict {
                message: format!(
                    "the VM has moved off host {}, where the backup is: restore it into a new VM",
                    b.host
                ),
            });
        }
        let mut conn_parts = meson_db::volumes::list_for_vms(&mut *tx, &[vm.id]).await?;
        conn_parts.extend(meson_db::volumes::attached_to_vms(&mut *tx, &[vm.id]).await?);
        for copy in b.volumes.iter().filter(|c| c.kind == VolumeKind::Data) {
            if !conn_parts.iter().any(|v| Some(v.id) == copy.volume) {
                return Err(Error::Conflict {
                    message: format!(
                        "volume {} of the backup is no longer attached to the VM: attach it \
                         again, or restore into a new VM",
                        copy.volume
                            .map(|v| v.to_string())
                            .unwrap_or(copy.source.clone())
                    ),
                });
            }
        }
        meson_db::commit(tx).await?;
        tracing::info!(vm = %vm.id, backup = %b.id, action = %action.id, "restore accepted");
        let (vm, parts) = self.vm_get(p, vm.id).await?;
        Ok(Restored {
            vm,
            parts,
            action,
            new: false,
            warnings,
        })
    }

    async fn restore_new(
        &self,
        p: &Principal,
        mut tx: meson_db::Tx<'static>,
        b: Backup,
        name: Option<String>,
        warnings: Vec<Warning>,
    ) -> Result<Restored> {
        let id = VmId::new();
        let mut spec = b.spec.clone();
        spec.name = name.unwrap_or_else(|| restored_name(&b.vm_name, id));
        spec.image = None;
        spec.backup = Some(b.id);
        // The boot copy may be larger than the flavour's disk (grown since).
        if let Some(boot) = b.volumes.iter().find(|v| v.kind == VolumeKind::Boot) {
            spec.boot_volume_gb = spec.boot_volume_gb.max(boot.size_gb);
        }
        let (vm, volumes) = Vm::new_with_volumes(
            &p.tenant,
            id,
            spec,
            Default::default(),
            naming::vm_atomos_name(id, &p.tenant),
        );
        let mut resources = vec![(ResourceType::Vm, id.0)];
        resources.extend(volumes.iter().map(|v| (ResourceType::Volume, v.id.0)));
        // Named, so that deleting the backup waits for the restore (423).
        resources.push((ResourceType::Backup, b.id.0));
        let action = new_action(p, Command::RestoreVm, resources);
        let held = self.hold_usage(&mut tx, &p.tenant).await?;
        let member = self.hold_member(&mut tx, p).await?;
        meson_db::vms::insert_with_volumes(&mut tx, &vm, &volumes).await?;
        meson_db::actions::insert(&mut tx, &action).await?;
        vm_create::enqueue(&mut tx, id, action.id, &p.tenant)
            .await?
            .of_new("VM")?;
        self.within_quotas(&mut tx, &p.tenant, &held).await?;
        self.within_member_limits(&mut tx, p, id, member).await?;
        meson_db::commit(tx).await?;
        tracing::info!(vm = %id, backup = %b.id, action = %action.id, "restore into a new vm accepted");
        Ok(Restored {
            vm,
            parts: VmParts {
                volumes,
                nics: vec![],
            },
            action,
            new: true,
            warnings,
        })
    }
}

/// A restored VM's name: the backed-up VM's, `-restored-` and the new
/// id's last twelve hex digits (48 of its random bits: restores of one VM
/// never meet each other's names in practice, where four digits met within
/// a few hundred), cut to fit.
fn restored_name(vm_name: &str, id: VmId) -> String {
    let hex = id.0.simple().to_string();
    let tail = format!("-restored-{}", &hex[hex.len() - 12..]);
    let room = meson_core::vm::MAX_NAME_LEN - tail.len();
    let head: String = vm_name.chars().take(room).collect();
    format!("{}{tail}", head.trim_end_matches('-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restored_name_is_the_vms_with_the_new_ids_random_tail_and_fits() {
        let id = VmId::new();
        let hex = id.0.simple().to_string();
        let name = restored_name("web", id);
        assert_eq!(name, format!("web-restored-{}", &hex[20..]));
        let long = restored_name(&"a".repeat(63), id);
        assert_eq!(long.len(), meson_core::vm::MAX_NAME_LEN);
        assert!(long.ends_with(&name["web".len()..]), "{long}");
        // A trailing dash of the cut name is dropped, not doubled.
        let dashed = restored_name(&format!("{}-b", "a".repeat(40)), id);
        assert!(!dashed.contains("--"), "{dashed}");
        // Two restores of one VM: their names differ as their ids do.
        let names: std::collections::BTreeSet<String> = (0..2000)
            .map(|_| restored_name("web", VmId::new()))
            .collect();
        assert_eq!(names.len(), 2000);
    }
}
