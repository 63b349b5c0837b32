//! Storage daemon JSON: volume objects, create bodies, the cloud-init upload metadata.

use serde::{Deserialize, Serialize};

/// A volume as `/accessible`, `/info` and `req_json.volumes` describe it.
/// Everything but the id defaults: each source lists a different subset.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VolumeObject {
    #[serde(rename = "volumeID", alias = "vid", alias = "volume_id")]
    pub volume_id: String,
    #[serde(default)]
    pub name: String,
    /// GB per the thesis and the on-disk `volumefile`; bytes in the mock (docs/atomos.md).
    #[serde(default)]
    pub size: f64,
    #[serde(
        rename = "sizeOnDisk",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub size_on_disk: Option<f64>,
    /// `qcow2`, `raw`, `vmdk`, `iso`; create answers call it `img_format`.
    #[serde(default, alias = "img_format", skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alg: Option<String>,
    #[serde(default)]
    pub private: bool,
    #[serde(default)]
    pub bootable: bool,
    #[serde(default)]
    pub readonly: bool,
    #[serde(default)]
    pub shareable: bool,
    #[serde(default)]
    pub clonable: bool,
    #[serde(default)]
    pub cloudinit: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceph: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exported: Option<bool>,
    #[serde(
        rename = "creatorID",
        alias = "creator_id",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub creator_id: Option<String>,
    /// `"YYYY-MM-DD HH:MM:SS.mmm"`.
    #[serde(
        rename = "lastUpdated",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub last_updated: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serverurl: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nservers: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own: Option<bool>,
}

/// `POST /info` answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VolumeInfoResponse {
    pub volume: VolumeObject,
}

/// `{"volume_id": ...}` for `/info` and `/destroy`; the mock also reads
/// `volumeID` or `name`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VolumeIdBody {
    #[serde(alias = "volumeID", default, skip_serializing_if = "Option::is_none")]
    pub volume_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `POST /cancreate`: size in GB.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CanCreateBody {
    pub size: u32,
}

/// `POST /create`: size in GB.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CreateBody {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub size: u32,
    #[serde(default)]
    pub bootable: bool,
    #[serde(default)]
    pub readonly: bool,
    #[serde(default)]
    pub shareable: bool,
    #[serde(default)]
    pub private: bool,
}

/// `POST /cloudinit/create`: a boot volume cloned from an image URL.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CloudinitCreateBody {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub size: u32,
    #[serde(default)]
    pub url: String,
    /// Clone algorithm: `no`, `cp`, `lzo`, `zlib`.
    #[serde(default)]
    pub alg: String,
    #[serde(default)]
    pub format: String,
    #[serde(default)]
    pub bus: String,
    #[serde(default)]
    pub clonable: bool,
    #[serde(default)]
    pub private: bool,
}

/// `POST /clone`: a copy of `volume_id` named `name` (meson's shape: the
/// upstream body is undocumented).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CloneBody {
    #[serde(default)]
    pub volume_id: String,
    #[serde(default)]
    pub name: String,
}

/// `POST /update/transfer`: a copy of `volume_id` sent to the storage daemon
/// of another host at `target` (`http://host:port`), which answers the
/// copy's id (meson's shape: the upstream body is undocumented).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TransferBody {
    #[serde(default)]
    pub volume_id: String,
    #[serde(default)]
    pub target: String,
}

/// `POST /import`: a volume another host sends (its `/update/transfer`):
/// its name, flags, size, bytes (as a content hash) and cloud-init files.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ImportBody {
    pub name: String,
    pub size: f64,
    #[serde(default)]
    pub bootable: bool,
    #[serde(default)]
    pub readonly: bool,
    #[serde(default)]
    pub shareable: bool,
    #[serde(default)]
    pub private: bool,
    #[serde(default)]
    pub clonable: bool,
    #[serde(default)]
    pub cloudinit: bool,
    #[serde(default)]
    pub format: String,
    #[serde(default)]
    pub bus: String,
    #[serde(default)]
    pub alg: String,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub expected_files: u32,
    #[serde(default)]
    pub files: Vec<ImportFile>,
    /// sha256 standing for the volume's bytes.
    #[serde(default)]
    pub content: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ImportFile {
    pub name: String,
    pub content: String,
}

/// `POST /update/resize`: `volume_id` grown to `size` GB (meson's shape:
/// the upstream body is undocumented).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResizeBody {
    #[serde(default)]
    pub volume_id: String,
    #[serde(default)]
    pub size: u32,
}

/// `POST /create/url`: a volume of `size` GB holding the file at `url`,
/// which must have `sha256` when given (meson's shape: the upstream body is
/// undocumented).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CreateUrlBody {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub size: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootable: Option<bool>,
}

/// Answer of `/create` and `/cloudinit/create`; only `vid` is relied upon.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CreateResponse {
    #[serde(alias = "volumeID")]
    pub vid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clonable: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alg: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub img_format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shareable: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readonly: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootable: Option<bool>,
    #[serde(rename = "creatorID", default, skip_serializing_if = "Option::is_none")]
    pub creator_id: Option<String>,
    /// sha256 (hex) of what `/create/url` downloaded, when the daemon says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// The JSON that travels base64-encoded in `/cloudinit/metadata/{data}`:
/// the first upload names the volume and `expectedFiles`, later ones only `vid`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CloudinitMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootable: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clonable: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alg: Option<String>,
    #[serde(
        rename = "expectedFiles",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub expected_files: Option<u32>,
}

/// Answer of a metadata upload (206 = more files expected, 200 = complete).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CloudinitMetadataResponse {
    #[serde(default, alias = "volumeID", skip_serializing_if = "Option::is_none")]
    pub vid: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ListOf;
    use serde_json::json;

    /// `/create` answer as captured in the Insomnia export (docs/atomos.md).
    #[test]
    fn create_response_parses() {
        let r: CreateResponse = serde_json::from_value(json!({
            "vid": "a812966242ac4c1e9f0b3e2d7c6a5b40", "name": "data", "size": 50,
            "private": true, "clonable": false, "alg": "no", "img_format": "qcow2",
            "bus": "virtio", "shareable": false, "readonly": false, "bootable": true,
            "creatorID": "someone"
        }))
        .unwrap();
        assert_eq!(r.vid, "a812966242ac4c1e9f0b3e2d7c6a5b40");
        assert_eq!(r.img_format.as_deref(), Some("qcow2"));
    }

    /// `/accessible` element (thesis + mock fields) and the `/info` wrapper.
    #[test]
    fn volume_object_round_trips() {
        let fixture = json!({
            "volumeID": "a8", "name": "web-1-boot", "size": 50.0, "sizeOnDisk": 1234.0,
            "format": "qcow2", "bus": "virtio", "alg": "cp", "private": false,
            "bootable": true, "readonly": false, "shareable": false, "clonable": true,
            "cloudinit": false, "creatorID": "me", "lastUpdated": "2025-04-01 10:00:00.000",
            "serverurl": "https://192.168.1.10", "own": true
        });
        let v: VolumeObject = serde_json::from_value(fixture.clone()).unwrap();
        assert_eq!(serde_json::to_value(&v).unwrap(), fixture);
        let info: VolumeInfoResponse =
            serde_json::from_value(json!({"volume": {"volumeID": "x", "creator_id": "t"}}))
                .unwrap();
        assert_eq!(info.volume.creator_id.as_deref(), Some("t"));
        let list: ListOf<VolumeObject> =
            serde_json::from_value(json!({"volumes": [{"volumeID": "x"}]})).unwrap();
        assert_eq!(list.into_vec().len(), 1);
    }

    /// Both metadata payloads of the two-upload protocol (docs/atomos.md).
    #[test]
    fn metadata_payloads() {
        let first = CloudinitMetadata {
            name: Some("vm-cloudinit".into()),
            private: Some(false),
            bootable: Some(true),
            clonable: Some(false),
            alg: Some("no".into()),
            expected_files: Some(2),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&first).unwrap(),
            json!({"name": "vm-cloudinit", "private": false, "bootable": true,
                   "clonable": false, "alg": "no", "expectedFiles": 2})
        );
        let next = CloudinitMetadata {
            vid: Some("ab".into()),
            ..Default::default()
        };
        assert_eq!(serde_json::to_value(&next).unwrap(), json!({"vid": "ab"}));
    }

    #[test]
    fn volume_id_body_accepts_aliases() {
        let b: VolumeIdBody = serde_json::from_value(json!({"volumeID": "x"})).unwrap();
        assert_eq!(b.volume_id.as_deref(), Some("x"));
        let b = VolumeIdBody {
            volume_id: Some("y".into()),
            name: None,
        };
        assert_eq!(serde_json::to_value(&b).unwrap(), json!({"volume_id": "y"}));
    }
}
