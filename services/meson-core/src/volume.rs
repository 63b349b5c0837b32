//! Volumes meson made on AtomOS: a VM's own (boot image, cloud-init ISO,
//! data disks), and standalone data volumes made by `POST /v1/volumes`,
//! placed on one host and attached to at most one VM at a time.

use crate::id::{TargetId, TenantId, VmId, VolumeId};
use crate::labels::{self, Labels};
use crate::parse::{Parser, Warning};
use crate::target::Target;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::ops::RangeInclusive;

/// A data volume's size bounds, in GB (a VM's data disks and standalone volumes).
pub const VOLUME_GB: RangeInclusive<i64> = 1..=10_240;
/// Longest standalone volume name (the VM name's rule).
pub const MAX_VOLUME_NAME_LEN: usize = crate::vm::MAX_NAME_LEN;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VolumeKind {
    Boot,
    Cloudinit,
    Data,
}

impl VolumeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            VolumeKind::Boot => "boot",
            VolumeKind::Cloudinit => "cloudinit",
            VolumeKind::Data => "data",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "boot" => Self::Boot,
            "cloudinit" => Self::Cloudinit,
            "data" => Self::Data,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VolumeStatus {
    Creating,
    Available,
    /// A standalone volume attached to a VM.
    Attached,
    Deleting,
    Error,
}

impl VolumeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            VolumeStatus::Creating => "creating",
            VolumeStatus::Available => "available",
            VolumeStatus::Attached => "attached",
            VolumeStatus::Deleting => "deleting",
            VolumeStatus::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "creating" => Self::Creating,
            "available" => Self::Available,
            "attached" => Self::Attached,
            "deleting" => Self::Deleting,
            "error" => Self::Error,
            _ => return None,
        })
    }
}

/// Where a standalone volume lives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumePlacement {
    pub target_id: TargetId,
    /// The target's name.
    pub host: String,
    pub provider: String,
    pub region: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Volume {
    pub id: VolumeId,
    pub tenant: TenantId,
    /// The VM that owns it; `None` for a standalone volume.
    pub vm_id: Option<VmId>,
    /// The user-facing name (the data volume's name from the request,
    /// `boot`/`cloudinit`, or a standalone volume's name).
    pub name: String,
    pub kind: VolumeKind,
    pub size_gb: u32,
    pub atomos_name: String,
    pub atomos_id: Option<String>,
    pub status: VolumeStatus,
    pub labels: Labels,
    pub bootable: bool,
    pub readonly: bool,
    /// A standalone volume's host, once placed.
    pub placement: Option<VolumePlacement>,
    /// The VM a standalone volume is attached to.
    pub attached_to: Option<VmId>,
    pub created: chrono::DateTime<chrono::Utc>,
}

impl Volume {
    /// Made by `POST /v1/volumes` rather than with a VM.
    pub fn standalone(&self) -> bool {
        self.vm_id.is_none()
    }

    /// A new standalone volume's row, not written yet.
    pub fn new_standalone(tenant: &TenantId, req: &VolumeCreate) -> Volume {
        let id = VolumeId::new();
        Volume {
            id,
            tenant: tenant.clone(),
            vm_id: None,
            name: req.name.clone(),
            kind: VolumeKind::Data,
            size_gb: req.size_gb,
            atomos_name: crate::naming::volume_atomos_name(id),
            atomos_id: None,
            status: VolumeStatus::Creating,
            labels: req.labels.clone(),
            bootable: req.bootable,
            readonly: req.readonly,
            placement: None,
            attached_to: None,
            created: chrono::Utc::now(),
        }
    }
}

/// A parsed `POST /v1/volumes`.
#[derive(Clone, Debug, PartialEq)]
pub struct VolumeCreate {
    pub name: String,
    pub size_gb: u32,
    pub labels: Labels,
    pub bootable: bool,
    pub readonly: bool,
    pub provider: Option<String>,
    pub continent: Option<String>,
    pub region: Option<String>,
    pub warnings: Vec<Warning>,
}

impl VolumeCreate {
    /// Parses and validates the request, naming every bad field; the
    /// location constraints are checked against `targets`. Booleans are
    /// lenient (`"True"`/`"False"`, 0/1). meson honours `bootable` and
    /// `readonly` (passed to AtomOS); a volume is always private to its
    /// tenant and attached to one VM at a time, so `private: false` and
    /// `shareable: true` are refused rather than ignored.
    pub fn parse(body: &Value, targets: &[Target]) -> crate::Result<VolumeCreate> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let name = p.atomos_name(&mut root, "name", true, MAX_VOLUME_NAME_LEN);
        let size = p.int(&mut root, "size", VOLUME_GB, true);
        let labels = match root.get("labels") {
            (path, Some(v)) => labels::parse(&path, v, &mut p.errors),
            (_, None) => Some(Labels::new()),
        };
        let [provider, continent, region] =
            crate::vm::parse_location(&mut p, &mut root, Some(targets));
        let bootable = p.bool(&mut root, "bootable").unwrap_or(false);
        let readonly = p.bool(&mut root, "readonly").unwrap_or(false);
        if p.bool(&mut root, "shareable") == Some(true) {
            p.errors.add(
                "shareable",
                "meson attaches a volume to one VM at a time: only false is accepted",
            );
        }
        if p.bool(&mut root, "private") == Some(false) {
            p.errors.add(
                "private",
                "a volume is always private to its tenant: only true is accepted",
            );
        }
        p.done(root);
        let Parser { errors, warnings } = p;
        match (name, size, labels) {
            (Some(name), Some(size), Some(labels)) if errors.is_empty() => Ok(VolumeCreate {
                name,
                size_gb: size as u32,
                labels,
                bootable,
                readonly,
                provider,
                continent,
                region,
                warnings,
            }),
            _ => Err(errors
                .into_error()
                .unwrap_or_else(|| crate::Error::invalid("(body)", "invalid request"))),
        }
    }
}

/// A parsed `POST /v1/volumes/{id}/actions/attach`.
#[derive(Clone, Debug, PartialEq)]
pub struct VolumeAttach {
    pub vm: VmId,
    pub warnings: Vec<Warning>,
}

impl VolumeAttach {
    /// `{"vm": "<uuid>"}`; unknown fields are warnings.
    pub fn parse(body: &Value) -> crate::Result<VolumeAttach> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let vm = p.id::<VmId>(&mut root, "vm", "a VM", true).flatten();
        p.done(root);
        let Parser { errors, warnings } = p;
        match vm {
            Some(vm) if errors.is_empty() => Ok(VolumeAttach { vm, warnings }),
            _ => Err(errors
                .into_error()
                .unwrap_or_else(|| crate::Error::invalid("vm", "invalid request"))),
        }
    }
}

/// A parsed `POST /v1/volumes/{id}/actions/move`.
#[derive(Clone, Debug, PartialEq)]
pub struct VolumeMove {
    /// The host to move to (a target's name).
    pub host: String,
    pub warnings: Vec<Warning>,
}

impl VolumeMove {
    /// `{"host": "<target name>"}`; unknown fields are warnings.
    pub fn parse(body: &Value) -> crate::Result<VolumeMove> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let host = crate::vm::parse_host(&mut p, &mut root, true);
        p.done(root);
        let Parser { errors, warnings } = p;
        match host {
            Some(host) if errors.is_empty() => Ok(VolumeMove { host, warnings }),
            _ => Err(errors
                .into_error()
                .unwrap_or_else(|| crate::Error::invalid("host", "invalid request"))),
        }
    }
}

/// A parsed `POST /v1/volumes/{id}/actions/resize`.
#[derive(Clone, Debug, PartialEq)]
pub struct VolumeResize {
    /// GB; not checked against the volume's current size here.
    pub size_gb: u32,
    pub warnings: Vec<Warning>,
}

impl VolumeResize {
    /// `{"size": GB}` within [`VOLUME_GB`]; unknown fields are warnings.
    pub fn parse(body: &Value) -> crate::Result<VolumeResize> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let size = p.int(&mut root, "size", VOLUME_GB, true);
        p.done(root);
        let Parser { errors, warnings } = p;
        match size {
            Some(size) if errors.is_empty() => Ok(VolumeResize {
                size_gb: size as u32,
                warnings,
            }),
            _ => Err(errors
                .into_error()
                .unwrap_or_else(|| crate::Error::invalid("size", "invalid request"))),
        }
    }

    /// Volumes only grow: a filesystem may use every byte it was given.
    pub fn check_grows(&self, from_gb: u32) -> crate::Result<()> {
        if self.size_gb < from_gb {
            return Err(crate::Error::invalid(
                "size",
                format!(
                    "the volume has {from_gb} GB and volumes only grow: give at least {from_gb}"
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target(provider: &str, region: &str) -> Target {
        Target {
            id: TargetId::new(),
            name: format!("{provider}-1"),
            host: "127.0.0.1".into(),
            compute_port: 1,
            storage_port: 2,
            network_port: 3,
            auth_port: 4,
            provider: provider.into(),
            region: region.into(),
            continent: "europe".into(),
            enabled: true,
        }
    }

    #[test]
    fn a_volume_request_parses_leniently() {
        let targets = [target("ionos", "de-fra")];
        let v = VolumeCreate::parse(
            &json!({"name": "data-1", "size": 50, "bootable": "True", "readonly": 0,
                    "shareable": "False", "private": "true", "provider": " IONOS ",
                    "labels": {"env": "prod"}, "extra": 1}),
            &targets,
        )
        .unwrap();
        assert_eq!((v.name.as_str(), v.size_gb), ("data-1", 50));
        assert!(v.bootable && !v.readonly);
        assert_eq!(v.provider.as_deref(), Some("ionos"));
        assert_eq!(v.labels["env"], "prod");
        assert_eq!(v.warnings.len(), 1);
        let constraints = [&v.provider, &v.continent, &v.region];
        assert!(targets[0].meets(constraints) && !target("ovh", "fr").meets(constraints));
    }

    #[test]
    fn a_bad_volume_request_names_every_field() {
        let e = VolumeCreate::parse(
            &json!({"name": "bad_name", "size": 0, "shareable": true, "private": "False",
                    "bootable": "maybe", "provider": "nowhere"}),
            &[target("ionos", "de-fra")],
        )
        .unwrap_err();
        let crate::Error::InvalidInput { fields } = e else {
            panic!("{e:?}")
        };
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        for f in [
            "name",
            "size",
            "shareable",
            "private",
            "bootable",
            "provider",
        ] {
            assert!(names.contains(&f), "{f} in {names:?}");
        }
        let e = VolumeCreate::parse(&json!({}), &[]).unwrap_err();
        let crate::Error::InvalidInput { fields } = e else {
            panic!("{e:?}")
        };
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["name", "size"]);
    }

    #[test]
    fn attach_and_resize_bodies_name_their_fields() {
        let vm = VmId::new();
        let a = VolumeAttach::parse(&json!({"vm": vm.to_string(), "x": 1})).unwrap();
        assert_eq!((a.vm, a.warnings.len()), (vm, 1));
        for bad in [json!({}), json!({"vm": "nope"}), json!({"vm": 3})] {
            let crate::Error::InvalidInput { fields } = VolumeAttach::parse(&bad).unwrap_err()
            else {
                panic!("{bad}")
            };
            assert_eq!(fields[0].name, "vm", "{bad}");
        }
        let r = VolumeResize::parse(&json!({"size": 20})).unwrap();
        assert_eq!(r.size_gb, 20);
        assert!(r.check_grows(20).is_ok() && r.check_grows(10).is_ok());
        let crate::Error::InvalidInput { fields } = r.check_grows(21).unwrap_err() else {
            panic!()
        };
        assert_eq!(fields[0].name, "size");
        for bad in [json!({}), json!({"size": 0}), json!({"size": "big"})] {
            let crate::Error::InvalidInput { fields } = VolumeResize::parse(&bad).unwrap_err()
            else {
                panic!("{bad}")
            };
            assert_eq!(fields[0].name, "size", "{bad}");
        }
    }
}
