//! Drift detection for standalone VMs (cluster nodes are auto-repair's):
//! on every reconciler pass each VM meson records `running` or `off` is
//! compared with its host's inventory, and the database is made to show
//! the truth:
//!
//! - a VM meson records running that its host reports off (meson did not
//!   stop it: no action runs on it) crashed: it is `off`, and its
//!   `error_message` says it was found off;
//! - a VM its host no longer has is `error`, "missing from its hypervisor";
//! - a VM meson records off (a crash found earlier) that its host reports
//!   running again is `running`, its message cleared.
//!
//! Port forwards are compared the same way: one its host no longer lists
//! is `error`, one listed again `active`. So are backups: an `available`
//! one its host no longer lists is `error` (a restore would find nothing),
//! and `available` again if the host lists it again.
//!
//! Nothing is recreated or restarted: what to do is the user's call (power
//! it on, delete it). The comparison is batched per host (one status call
//! per host, hosts one after the other, so a pass asks AtomOS at most one
//! thing at a time), skips VMs under a running action, decides nothing on a
//! host that does not answer, and writes only what did not change since the
//! VMs were read.

use crate::Env;
use atomos_driver::VmState;
use meson_core::TargetId;
use meson_core::backup::{Backup, BackupStatus};
use meson_core::port_forward::{PortForward, PortForwardStatus};
use meson_core::vm::VmStatus;
use meson_db::vms::Watched;
use std::collections::BTreeMap;

/// What a pass found and recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// Hosts asked (one status call each).
    pub hosts: usize,
    /// Hosts that did not answer (their VMs left as they are).
    pub unanswered: usize,
    pub crashed: usize,
    pub missing: usize,
    pub recovered: usize,
}

/// What one VM's comparison calls for: its new status and message.
pub fn judge(
    recorded: VmStatus,
    seen: Option<&VmState>,
    host: &str,
) -> Option<(VmStatus, Option<String>)> {
    match (recorded, seen) {
        (VmStatus::Running | VmStatus::Off, None) => Some((
            VmStatus::Error,
            Some(format!(
                "the VM is missing from its hypervisor: host {host} has no VM of its name"
            )),
        )),
        (VmStatus::Running, Some(VmState::Off)) => Some((
            VmStatus::Off,
            Some(format!(
                "the VM crashed: host {host} reports it off, and meson did not stop it"
            )),
        )),
        (VmStatus::Off, Some(VmState::Running)) => Some((VmStatus::Running, None)),
        _ => None,
    }
}

/// One pass over every standalone VM, then over every port forward.
pub async fn tick(env: &Env) -> meson_core::Result<Pass> {
    let pass = vms(env).await?;
    forwards(env).await?;
    backups(env).await?;
    Ok(pass)
}

/// What one backup's comparison calls for: its new status and message.
pub fn judge_backup(
    recorded: BackupStatus,
    listed: bool,
    host: &str,
) -> Option<(BackupStatus, Option<String>)> {
    match (recorded, listed) {
        (BackupStatus::Available, false) => Some((
            BackupStatus::Error,
            Some(format!(
                "{}: host {host} no longer lists it",
                meson_db::backups::MISSING
            )),
        )),
        (BackupStatus::Error, true) => Some((BackupStatus::Available, None)),
        _ => None,
    }
}

/// Compares every available backup (and those found missing) with its
/// host's list. Hosts that do not answer are left alone.
async fn backups(env: &Env) -> meson_core::Result<()> {
    let (backups, seen_at) = meson_db::backups::watched(&env.pool).await?;
    let mut by_host: BTreeMap<TargetId, Vec<Backup>> = BTreeMap::new();
    for b in backups {
        by_host.entry(b.target_id).or_default().push(b);
    }
    for (target, backups) in by_host {
        let listed = match env.atomos.client(target).await {
            Ok(c) => c.backups().await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let Ok(listed) = listed else {
            continue;
        };
        for b in backups {
            let on = listed.iter().any(|l| l.id == b.id.to_string());
            let Some((to, message)) = judge_backup(b.status, on, &b.host) else {
                continue;
            };
            if meson_db::backups::record_drift(
                &env.pool,
                b.id,
                b.status,
                to,
                message.as_deref(),
                seen_at,
            )
            .await?
            {
                tracing::warn!(backup = %b.id, host = %b.host, to = to.as_str(),
                    "drift: the backup on AtomOS differs from meson's record");
                metrics::counter!("meson_backup_drift_total", "to" => to.as_str()).increment(1);
            }
        }
    }
    Ok(())
}

/// What one forward's comparison calls for: its new status and message.
pub fn judge_forward(
    recorded: PortForwardStatus,
    listed: bool,
    host: &str,
) -> Option<(PortForwardStatus, Option<String>)> {
    match (recorded, listed) {
        (PortForwardStatus::Active, false) => Some((
            PortForwardStatus::Error,
            Some(format!(
                "the forward is missing from its host: host {host} no longer lists it"
            )),
        )),
        (PortForwardStatus::Error, true) => Some((PortForwardStatus::Active, None)),
        _ => None,
    }
}

/// Compares every active or failed forward with its host's list: one the
/// host lost is `error`, one it lists again `active`. Hosts that do not
/// answer are left alone.
async fn forwards(env: &Env) -> meson_core::Result<()> {
    let (forwards, seen_at) = meson_db::port_forwards::watched(&env.pool).await?;
    let mut by_host: BTreeMap<TargetId, Vec<PortForward>> = BTreeMap::new();
    for f in forwards {
        by_host.entry(f.target_id).or_default().push(f);
    }
    for (target, forwards) in by_host {
        let listed = match env.atomos.client(target).await {
            Ok(c) => c.port_forwards().await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let Ok(listed) = listed else {
            continue;
        };
        for f in forwards {
            let on = listed.iter().any(|l| l.id == f.id.to_string());
            let Some((to, message)) = judge_forward(f.status, on, &f.host) else {
                continue;
            };
            if meson_db::port_forwards::record_drift(
                &env.pool,
                f.id,
                f.status,
                to,
                message.as_deref(),
                seen_at,
            )
            .await?
            {
                tracing::warn!(forward = %f.id, host = %f.host, to = to.as_str(),
                    "drift: the port forward on AtomOS differs from meson's record");
                metrics::counter!("meson_port_forward_drift_total", "to" => to.as_str())
                    .increment(1);
            }
        }
    }
    Ok(())
}

/// One pass over every standalone VM.
async fn vms(env: &Env) -> meson_core::Result<Pass> {
    let (vms, seen_at) = meson_db::vms::watched(&env.pool).await?;
    let mut by_host: BTreeMap<TargetId, Vec<Watched>> = BTreeMap::new();
    for vm in vms {
        by_host.entry(vm.target).or_default().push(vm);
    }
    let mut pass = Pass::default();
    for (target, vms) in by_host {
        pass.hosts += 1;
        let listed = match env.atomos.client(target).await {
            Ok(c) => c.vms().await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let listed = match listed {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(%target, error = %e, "drift: host did not answer");
                pass.unanswered += 1;
                continue;
            }
        };
        for vm in vms {
            let seen = listed
                .iter()
                .find(|v| v.name == vm.atomos_name)
                .map(|v| &v.state);
            let Some((to, message)) = judge(vm.status, seen, &vm.host) else {
                continue;
            };
            let recorded = meson_db::vms::record_drift(
                &env.pool,
                vm.id,
                vm.status,
                to,
                message.as_deref(),
                seen_at,
            )
            .await?;
            if !recorded {
                continue;
            }
            tracing::warn!(vm = %vm.id, host = %vm.host, from = vm.status.as_str(), to = to.as_str(),
                "drift: the VM's state on AtomOS differs from meson's record");
            metrics::counter!("meson_vm_drift_total", "to" => to.as_str()).increment(1);
            match to {
                VmStatus::Off => pass.crashed += 1,
                VmStatus::Error => pass.missing += 1,
                _ => pass.recovered += 1,
            }
        }
    }
    Ok(pass)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_backup_is_error_and_a_found_one_available() {
        let (s, m) = judge_backup(BackupStatus::Available, false, "h").unwrap();
        assert_eq!(s, BackupStatus::Error);
        assert!(m.unwrap().starts_with(meson_db::backups::MISSING));
        assert_eq!(
            judge_backup(BackupStatus::Error, true, "h"),
            Some((BackupStatus::Available, None))
        );
        assert_eq!(judge_backup(BackupStatus::Available, true, "h"), None);
        assert_eq!(judge_backup(BackupStatus::Error, false, "h"), None);
    }

    #[test]
    fn a_crash_is_off_a_vanished_vm_error_a_recovered_one_running() {
        let h = "ionos-fra-1";
        let (s, m) = judge(VmStatus::Running, Some(&VmState::Off), h).unwrap();
        assert_eq!(s, VmStatus::Off);
        assert!(m.unwrap().contains("crashed"));
        let (s, m) = judge(VmStatus::Running, None, h).unwrap();
        assert_eq!(s, VmStatus::Error);
        assert!(m.unwrap().contains("missing from its hypervisor"));
        assert_eq!(judge(VmStatus::Off, None, h).unwrap().0, VmStatus::Error);
        assert_eq!(
            judge(VmStatus::Off, Some(&VmState::Running), h),
            Some((VmStatus::Running, None))
        );
        assert_eq!(judge(VmStatus::Running, Some(&VmState::Running), h), None);
        assert_eq!(judge(VmStatus::Off, Some(&VmState::Off), h), None);
        assert_eq!(judge(VmStatus::Running, Some(&VmState::Starting), h), None);
    }
}
