//! Images: a tenant's boot disks to create VMs from, made as a snapshot of
//! a VM's boot volume or imported from an HTTP(S) URL. An image is a volume
//! on one AtomOS host (the snapshot's VM's, or the one an import was placed
//! on) and counts its size against the `images_gb` quota.

use crate::id::{ImageId, TenantId, VmId};
use crate::labels::{self, Labels};
use crate::parse::{Parser, Warning};
use crate::target::Target;
use crate::volume::VolumePlacement;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::ops::RangeInclusive;

/// An imported image's size bounds, in GB (a data volume's).
pub const IMAGE_GB: RangeInclusive<i64> = crate::volume::VOLUME_GB;
/// An import's size when the request gives none: room for a distribution's
/// cloud image (a few hundred MB to 3 GB).
pub const DEFAULT_IMPORT_GB: u32 = 10;
/// Longest image name (the VM name's rule).
pub const MAX_IMAGE_NAME_LEN: usize = crate::vm::MAX_NAME_LEN;
/// Longest URL an import accepts.
pub const MAX_URL_LEN: usize = 2048;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageStatus {
    Creating,
    Available,
    Deleting,
    Error,
}

impl ImageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ImageStatus::Creating => "creating",
            ImageStatus::Available => "available",
            ImageStatus::Deleting => "deleting",
            ImageStatus::Error => "error",
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

/// Where an image's bytes came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ImageSource {
    /// A crash-consistent copy of a VM's boot volume (the VM keeps running:
    /// what its guest had not flushed is not in it).
    Snapshot { vm: VmId },
    /// Downloaded by the host from `url`; `checksum` (sha256, hex) when the
    /// request gave one, which the download must match.
    Url {
        url: String,
        checksum: Option<String>,
    },
}

impl ImageSource {
    pub fn kind(&self) -> &'static str {
        match self {
            ImageSource::Snapshot { .. } => "snapshot",
            ImageSource::Url { .. } => "url",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    pub id: ImageId,
    pub tenant: TenantId,
    pub name: String,
    pub labels: Labels,
    pub status: ImageStatus,
    pub source: ImageSource,
    /// GB: the snapshot's boot volume's size, or the import's.
    pub size_gb: u32,
    /// The host it lives on, once placed.
    pub placement: Option<VolumePlacement>,
    pub atomos_name: String,
    pub atomos_id: Option<String>,
    /// sha256 (hex) of what an import downloaded, once it has.
    pub sha256: Option<String>,
    /// Why its create failed.
    pub error_message: Option<String>,
    pub created: chrono::DateTime<chrono::Utc>,
}

impl Image {
    /// A new image's row, not written yet.
    pub fn new(
        tenant: &TenantId,
        name: String,
        labels: Labels,
        source: ImageSource,
        size_gb: u32,
        placement: Option<VolumePlacement>,
    ) -> Image {
        let id = ImageId::new();
        Image {
            id,
            tenant: tenant.clone(),
            name,
            labels,
            status: ImageStatus::Creating,
            source,
            size_gb,
            placement,
            atomos_name: crate::naming::image_atomos_name(id),
            atomos_id: None,
            sha256: None,
            error_message: None,
            created: chrono::Utc::now(),
        }
    }
}

/// A parsed `POST /v1/vms/{id}/actions/create-image`.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageSnapshot {
    pub name: String,
    pub labels: Labels,
    pub warnings: Vec<Warning>,
}

impl ImageSnapshot {
    /// Parses the body, naming every bad field; unknown fields are warnings.
    pub fn parse(body: &Value) -> crate::Result<ImageSnapshot> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let name = p.atomos_name(&mut root, "name", true, MAX_IMAGE_NAME_LEN);
        let labels = optional_labels(&mut p, &mut root);
        p.done(root);
        let Parser { errors, warnings } = p;
        match (name, labels) {
            (Some(name), Some(labels)) if errors.is_empty() => Ok(ImageSnapshot {
                name,
                labels,
                warnings,
            }),
            _ => Err(errors.into_error().unwrap_or_else(|| {
                crate::Error::internal("an image request failed without a reason")
            })),
        }
    }
}

/// A parsed `POST /v1/images`: an import from a URL.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageImport {
    pub name: String,
    pub url: String,
    /// sha256, lowercase hex.
    pub checksum: Option<String>,
    pub size_gb: u32,
    pub labels: Labels,
    pub provider: Option<String>,
    pub continent: Option<String>,
    pub region: Option<String>,
    pub warnings: Vec<Warning>,
}

impl ImageImport {
    /// Parses and validates the request, naming every bad field; the
    /// location constraints are checked against `targets`.
    pub fn parse(body: &Value, targets: &[Target]) -> crate::Result<ImageImport> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let name = p.atomos_name(&mut root, "name", true, MAX_IMAGE_NAME_LEN);
        let url = match p.string(&mut root, "url", true) {
            Some((path, url)) => match check_url(url) {
                Ok(()) => Some(url.to_owned()),
                Err(m) => {
                    p.errors.add(path, m);
                    None
                }
            },
            None => None,
        };
        let checksum = match p.string(&mut root, "checksum", false) {
            Some((path, c)) => match parse_checksum(c) {
                Ok(c) => Some(c),
                Err(m) => {
                    p.errors.add(path, m);
                    None
                }
            },
            None => None,
        };
        let size = p.int(&mut root, "size", IMAGE_GB, false);
        let labels = optional_labels(&mut p, &mut root);
        let [provider, continent, region] =
            crate::vm::parse_location(&mut p, &mut root, Some(targets));
        p.done(root);
        let Parser { errors, warnings } = p;
        match (name, url, labels) {
            (Some(name), Some(url), Some(labels)) if errors.is_empty() => Ok(ImageImport {
                name,
                url,
                checksum,
                size_gb: size.map_or(DEFAULT_IMPORT_GB, |s| s as u32),
                labels,
                provider,
                continent,
                region,
                warnings,
            }),
            _ => Err(errors.into_error().unwrap_or_else(|| {
                crate::Error::internal("an image request failed without a reason")
            })),
        }
    }
}

pub(crate) fn optional_labels(p: &mut Parser, root: &mut crate::parse::Obj<'_>) -> Option<Labels> {
    match root.get("labels") {
        (path, Some(v)) => labels::parse(&path, v, &mut p.errors),
        (_, None) => Some(Labels::new()),
    }
}

/// An import's URL: absolute `http` or `https` with a host, no credentials
/// (they would show in every read of the image).
fn check_url(url: &str) -> Result<(), String> {
    if url.len() > MAX_URL_LEN {
        return Err(format!("must be at most {MAX_URL_LEN} characters"));
    }
    let parsed = url::Url::parse(url).map_err(|e| format!("is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "must be an http or https URL, got the scheme {:?}",
            parsed.scheme()
        ));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err("must name a host".to_owned());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("must not carry credentials (they would be shown with the image)".to_owned());
    }
    Ok(())
}

/// A sha256 as 64 hex digits, optionally prefixed `sha256:`; lowercased.
fn parse_checksum(c: &str) -> Result<String, String> {
    let hex = c.strip_prefix("sha256:").unwrap_or(c);
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(hex.to_ascii_lowercase())
    } else {
        Err("must be a sha256: 64 hex digits, optionally prefixed \"sha256:\"".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(err: crate::Error) -> Vec<String> {
        let crate::Error::InvalidInput { fields } = err else {
            panic!("{err:?}")
        };
        fields.into_iter().map(|f| f.name).collect()
    }

    #[test]
    fn an_import_reads_its_fields_and_defaults_its_size() {
        let sum = "AB".repeat(32);
        let i = ImageImport::parse(
            &json!({"name": "golden", "url": "https://example.com/a.qcow2",
                    "checksum": format!("sha256:{sum}"), "labels": {"os": "ubuntu"}, "x": 1}),
            &[],
        )
        .unwrap();
        assert_eq!(i.name, "golden");
        assert_eq!(i.checksum.as_deref(), Some("ab".repeat(32).as_str()));
        assert_eq!(i.size_gb, DEFAULT_IMPORT_GB);
        assert_eq!(i.labels.get("os").map(String::as_str), Some("ubuntu"));
        assert_eq!(i.warnings[0].field, "x");
        let sized = ImageImport::parse(
            &json!({"name": "g", "url": "http://10.0.0.1:8080/x.img", "size": 20}),
            &[],
        )
        .unwrap();
        assert_eq!((sized.size_gb, sized.checksum), (20, None));
    }

    #[test]
    fn every_bad_import_field_is_named() {
        let err = ImageImport::parse(
            &json!({"name": "a b", "url": "ftp://x/y", "checksum": "md5:abc", "size": 0,
                    "labels": {"": "x"}}),
            &[],
        )
        .unwrap_err();
        let names = fields(err);
        for f in ["name", "url", "checksum", "size"] {
            assert!(names.iter().any(|n| n == f), "{f} not in {names:?}");
        }
        assert!(names.iter().any(|n| n.starts_with("labels")), "{names:?}");
        assert_eq!(
            fields(ImageImport::parse(&json!({}), &[]).unwrap_err()),
            ["name", "url"]
        );
        for url in [
            "not a url",
            "file:///etc/passwd",
            "https://user:pw@example.com/x",
        ] {
            let err = ImageImport::parse(&json!({"name": "a", "url": url}), &[]).unwrap_err();
            assert_eq!(fields(err), ["url"], "{url}");
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN));
        assert_eq!(
            fields(ImageImport::parse(&json!({"name": "a", "url": long}), &[]).unwrap_err()),
            ["url"]
        );
    }

    #[test]
    fn a_snapshot_needs_a_name() {
        let s = ImageSnapshot::parse(&json!({"name": "web-golden"})).unwrap();
        assert_eq!((s.name.as_str(), s.labels.len()), ("web-golden", 0));
        assert_eq!(
            fields(ImageSnapshot::parse(&json!({})).unwrap_err()),
            ["name"]
        );
        assert!(ImageSnapshot::parse(&json!("x")).is_err());
    }
}
