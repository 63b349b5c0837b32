//! Backups: crash-consistent copies of a VM's volumes (its cloud-init ISO
//! aside), kept on the VM's AtomOS host by the compute daemon's `/backup`.
//! A backup is taken on request, or daily by the VM's [`BackupPolicy`]; it
//! outlives its VM and counts its size against the `images_gb` quota. A
//! restore writes a backup's copies back into the same VM's volumes, or
//! into the volumes of a new VM made like the backed-up one.

use crate::id::{BackupId, TargetId, TenantId, VmId, VolumeId};
use crate::labels::Labels;
use crate::parse::{Parser, Warning};
use crate::vm::VmSpec;
use crate::volume::VolumeKind;
use chrono::{DateTime, Duration, Timelike, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::ops::RangeInclusive;

/// How many automatic backups a policy may keep.
pub const KEEP: RangeInclusive<i64> = 1..=31;
/// What a policy keeps when the request does not say.
pub const DEFAULT_KEEP: u32 = 7;
/// The hours of the window meson picks when the request gives none.
pub const DEFAULT_WINDOW_HOURS: u8 = 4;
/// An automatic backup is due once the VM's last is this old (a day, less
/// slack so a window's start drifting by a pass does not skip a day).
pub const DAILY: Duration = Duration::hours(20);
/// Longest backup name (the VM name's rule).
pub const MAX_BACKUP_NAME_LEN: usize = crate::vm::MAX_NAME_LEN;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackupStatus {
    /// Being copied on its host.
    Creating,
    Available,
    Deleting,
    /// Its create or delete failed (`error_message` says why).
    Error,
}

impl BackupStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            BackupStatus::Creating => "creating",
            BackupStatus::Available => "available",
            BackupStatus::Deleting => "deleting",
            BackupStatus::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "creating" => Self::Creating,
            "available" => Self::Available,
            "deleting" => Self::Deleting,
            "error" => Self::Error,
            _ => return None,
        })
    }
}

/// Who asked for a backup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackupKind {
    /// A tenant's request: kept until deleted.
    Manual,
    /// The VM's policy: the newest `keep` kept.
    Automatic,
}

impl BackupKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackupKind::Manual => "manual",
            BackupKind::Automatic => "automatic",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "manual" => Some(Self::Manual),
            "automatic" => Some(Self::Automatic),
            _ => None,
        }
    }
}

/// One volume's copy in a backup.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupVolume {
    /// meson's volume, when the host's copy is of one meson knows.
    pub volume: Option<VolumeId>,
    /// The copied volume's AtomOS id: the copy's handle in a restore.
    pub source: String,
    /// `boot` or `data`.
    pub kind: VolumeKind,
    /// A standalone volume attached to the VM (not one of its own).
    #[serde(default)]
    pub standalone: bool,
    pub size_gb: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Backup {
    pub id: BackupId,
    pub tenant: TenantId,
    pub vm_id: VmId,
    pub vm_name: String,
    pub name: String,
    pub labels: Labels,
    pub kind: BackupKind,
    pub status: BackupStatus,
    /// The host it lives on (its VM's when taken).
    pub target_id: TargetId,
    pub host: String,
    pub provider: String,
    pub region: String,
    /// GB: the VM's volumes' when requested, the copies' once taken.
    pub size_gb: u32,
    /// The copies, once taken (empty before).
    pub volumes: Vec<BackupVolume>,
    /// The VM's spec when requested: what a restore into a new VM makes.
    pub spec: VmSpec,
    pub error_message: Option<String>,
    pub created: DateTime<Utc>,
    /// When meson deletes it (an automatic backup whose VM is gone or whose
    /// policy was disabled).
    pub expires: Option<DateTime<Utc>>,
}

/// The name a backup gets when its request gives none: the VM's name and
/// the time, cut to fit.
pub fn default_name(vm_name: &str, at: DateTime<Utc>) -> String {
    let stamp = at.format("-%Y%m%d-%H%M").to_string();
    let room = MAX_BACKUP_NAME_LEN - stamp.len();
    let head: String = vm_name.chars().take(room).collect();
    format!("{}{stamp}", head.trim_end_matches('-'))
}

/// A VM's automatic backups: one a day, started within the UTC hours
/// `[window_start, window_end)` (across midnight when the end is the
/// smaller), the newest `keep` kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupPolicy {
    pub window_start: u8,
    pub window_end: u8,
    pub keep: u32,
    /// When this window was set: the first automatic backup is taken in a
    /// window that opens after it (enabling backups, or moving the window,
    /// in the middle of one starts nothing until the next).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
}

impl BackupPolicy {
    /// `HH-HH`.
    pub fn window(&self) -> String {
        format!("{:02}-{:02}", self.window_start, self.window_end)
    }

    /// Whether a backup may start at `at`: `at` is in a window that opened
    /// after the policy's window was set.
    pub fn due_at(&self, at: DateTime<Utc>) -> bool {
        self.in_window(at) && self.since.is_none_or(|s| s <= self.opened_before(at))
    }

    /// The latest start of the window at or before `at`.
    pub fn opened_before(&self, at: DateTime<Utc>) -> DateTime<Utc> {
        let today = at
            .date_naive()
            .and_hms_opt(u32::from(self.window_start), 0, 0)
            .map(|t| t.and_utc())
            .unwrap_or(at);
        if today > at {
            today - Duration::days(1)
        } else {
            today
        }
    }

    /// Whether `at` falls in the window.
    pub fn in_window(&self, at: DateTime<Utc>) -> bool {
        let h = at.hour() as u8;
        let (s, e) = (self.window_start, self.window_end);
        if s < e {
            (s..e).contains(&h)
        } else {
            h >= s || h < e
        }
    }

    /// The window meson gives a VM whose request names none: four hours
    /// starting at an hour drawn from its id, so a host's VMs spread over
    /// the day.
    pub fn default_window(vm: VmId) -> (u8, u8) {
        let start = (vm.0.as_u128() % 24) as u8;
        (start, (start + DEFAULT_WINDOW_HOURS) % 24)
    }

    /// Parses `POST /v1/vms/{id}/actions/enable-backups` for VM `vm`:
    /// `{"window"?: "HH-HH", "keep"?: 1..31}`, naming every bad field.
    pub fn parse(body: &Value, vm: VmId) -> crate::Result<(BackupPolicy, Vec<Warning>)> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let window = match p.string(&mut root, "window", false) {
            None => Some(Self::default_window(vm)),
            Some((path, w)) => {
                let parsed = parse_window(w);
                if parsed.is_none() {
                    p.errors.add(
                        path,
                        format!(
                            "must be \"HH-HH\", two different UTC hours from 00 to 23 (e.g. \
                             \"22-02\"), got {w:?}"
                        ),
                    );
                }
                parsed
            }
        };
        let keep = match root.get("keep") {
            (_, None) => Some(i64::from(DEFAULT_KEEP)),
            (path, Some(v)) => p.int_value(path, v, KEEP),
        };
        p.done(root);
        let Parser { errors, warnings } = p;
        match (window, keep) {
            (Some((window_start, window_end)), Some(keep)) if errors.is_empty() => Ok((
                BackupPolicy {
                    window_start,
                    window_end,
                    keep: keep as u32,
                    since: None,
                },
                warnings,
            )),
            _ => Err(errors.into_error().unwrap_or_else(|| {
                crate::Error::internal("a backup policy failed without a reason")
            })),
        }
    }
}

/// `HH-HH`: two different hours.
fn parse_window(w: &str) -> Option<(u8, u8)> {
    let (a, b) = w.split_once('-')?;
    let hour = |s: &str| {
        (s.len() == 2 && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse::<u8>().ok())
            .flatten()
            .filter(|h| *h < 24)
    };
    let (a, b) = (hour(a)?, hour(b)?);
    (a != b).then_some((a, b))
}

/// A parsed `POST /v1/vms/{id}/actions/backup`.
#[derive(Clone, Debug, PartialEq)]
pub struct BackupCreate {
    pub name: Option<String>,
    pub labels: Labels,
    pub warnings: Vec<Warning>,
}

impl BackupCreate {
    pub fn parse(body: &Value) -> crate::Result<BackupCreate> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let name = p.atomos_name(&mut root, "name", false, MAX_BACKUP_NAME_LEN);
        let labels = crate::image::optional_labels(&mut p, &mut root);
        p.done(root);
        let Parser { errors, warnings } = p;
        match labels {
            Some(labels) if errors.is_empty() => Ok(BackupCreate {
                name,
                labels,
                warnings,
            }),
            _ => Err(errors.into_error().unwrap_or_else(|| {
                crate::Error::internal("a backup request failed without a reason")
            })),
        }
    }
}

/// Where a restore writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestoreInto {
    /// The VM's own volumes.
    Same,
    /// A new VM's, named so (`None`: meson names it).
    New { name: Option<String> },
}

/// A parsed `POST /v1/vms/{id}/actions/restore`.
#[derive(Clone, Debug, PartialEq)]
pub struct Restore {
    pub backup: BackupId,
    pub into: RestoreInto,
    pub warnings: Vec<Warning>,
}

impl Restore {
    /// `{"backup", "into"?: "same"|"new", "name"?}`; `name` only with `new`.
    pub fn parse(body: &Value) -> crate::Result<Restore> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let backup = p.id(&mut root, "backup", "a backup", true).flatten();
        let new = match p.string(&mut root, "into", false) {
            None => Some(false),
            Some((_, "same")) => Some(false),
            Some((_, "new")) => Some(true),
            Some((path, other)) => {
                p.errors
                    .add(path, format!("must be \"same\" or \"new\", got {other:?}"));
                None
            }
        };
        let name_path = crate::parse::join(root.path(), "name");
        let name = p.atomos_name(&mut root, "name", false, crate::vm::MAX_NAME_LEN);
        if name.is_some() && new == Some(false) {
            p.errors
                .add(name_path, "names a new VM: only with \"into\": \"new\"");
        }
        p.done(root);
        let Parser { errors, warnings } = p;
        match (backup, new) {
            (Some(backup), Some(new)) if errors.is_empty() => Ok(Restore {
                backup,
                into: if new {
                    RestoreInto::New { name }
                } else {
                    RestoreInto::Same
                },
                warnings,
            }),
            _ => Err(errors.into_error().unwrap_or_else(|| {
                crate::Error::internal("a restore request failed without a reason")
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    fn fields(e: crate::Error) -> Vec<String> {
        match e {
            crate::Error::InvalidInput { fields } => fields.into_iter().map(|f| f.name).collect(),
            other => panic!("not invalid input: {other:?}"),
        }
    }

    fn at(h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 29, h, 30, 0).unwrap()
    }

    #[test]
    fn a_policy_defaults_and_windows_wrap_midnight() {
        let vm = VmId::new();
        let (p, w) = BackupPolicy::parse(&json!({}), vm).unwrap();
        assert!(w.is_empty());
        assert_eq!(p.keep, DEFAULT_KEEP);
        assert_eq!(
            (p.window_start, p.window_end),
            BackupPolicy::default_window(vm)
        );
        let (p, _) = BackupPolicy::parse(&json!({"window": "22-02", "keep": 3}), vm).unwrap();
        assert_eq!((p.window(), p.keep), ("22-02".to_owned(), 3));
        assert!(p.in_window(at(22)) && p.in_window(at(23)) && p.in_window(at(1)));
        assert!(!p.in_window(at(2)) && !p.in_window(at(12)) && !p.in_window(at(21)));
        let (p, _) = BackupPolicy::parse(&json!({"window": "02-06"}), vm).unwrap();
        assert!(p.in_window(at(2)) && p.in_window(at(5)) && !p.in_window(at(6)));
    }

    #[test]
    fn the_first_backup_waits_for_a_window_opening_after_the_policy() {
        let vm = VmId::new();
        let (mut p, _) = BackupPolicy::parse(&json!({"window": "22-02"}), vm).unwrap();
        // Set in the middle of a window: not that one, the next.
        p.since = Some(at(23));
        assert!(!p.due_at(at(23)));
        assert!(!p.due_at(at(23) + Duration::hours(2)), "01:30 the next day");
        assert!(p.due_at(at(22) + Duration::days(1)), "22:30 the next day");
        assert_eq!(
            p.opened_before(at(1) + Duration::days(1)),
            Utc.with_ymd_and_hms(2026, 11, 29, 22, 0, 0).unwrap()
        );
        // Set before a window: that one.
        p.since = Some(at(12));
        assert!(p.due_at(at(22)));
        assert!(!p.due_at(at(12)), "outside the window");
        p.since = None;
        assert!(p.due_at(at(23)));
    }

    #[test]
    fn a_bad_policy_names_its_fields() {
        for w in ["22", "24-02", "2-6", "05-05", "aa-bb", "22-02-03"] {
            let e = BackupPolicy::parse(&json!({"window": w}), VmId::new()).unwrap_err();
            assert_eq!(fields(e), ["window"], "{w}");
        }
        let e = BackupPolicy::parse(&json!({"window": 3, "keep": 0}), VmId::new()).unwrap_err();
        assert_eq!(fields(e), ["window", "keep"]);
        let e = BackupPolicy::parse(&json!({"keep": 32}), VmId::new()).unwrap_err();
        assert_eq!(fields(e), ["keep"]);
    }

    #[test]
    fn restores_name_their_bad_fields() {
        let b = BackupId::new();
        let r = Restore::parse(&json!({"backup": b.to_string()})).unwrap();
        assert_eq!((r.backup, r.into), (b, RestoreInto::Same));
        let r =
            Restore::parse(&json!({"backup": b.to_string(), "into": "new", "name": "x"})).unwrap();
        assert_eq!(
            r.into,
            RestoreInto::New {
                name: Some("x".to_owned())
            }
        );
        let e = Restore::parse(&json!({"backup": "no", "into": "elsewhere"})).unwrap_err();
        assert_eq!(fields(e), ["backup", "into"]);
        let e = Restore::parse(&json!({"backup": b.to_string(), "name": "x"})).unwrap_err();
        assert_eq!(fields(e), ["name"]);
        let e = Restore::parse(&json!({})).unwrap_err();
        assert_eq!(fields(e), ["backup"]);
    }

    #[test]
    fn default_names_fit() {
        let long = "a".repeat(63);
        let n = default_name(&long, at(7));
        assert!(
            n.len() <= MAX_BACKUP_NAME_LEN && n.ends_with("-20261129-0730"),
            "{n}"
        );
        assert_eq!(default_name("web", at(7)), "web-20261129-0730");
    }
}
