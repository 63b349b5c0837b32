//! Storage daemon: volume listing, create/destroy, image clones and the cloud-init upload protocol.

use crate::client::{AtomosClient, Call, Daemon};
use crate::compute::refusal_is_capacity;
use crate::error::{DriverError, ErrorKind};
use crate::schema::ListOf;
use crate::schema::storage::{
    CanCreateBody, CloneBody, CloudinitCreateBody, CloudinitMetadata, CloudinitMetadataResponse,
    CreateBody, CreateResponse, CreateUrlBody, ResizeBody, TransferBody, VolumeIdBody,
    VolumeInfoResponse, VolumeObject,
};
use base64::Engine;
use reqwest::multipart::{Form, Part};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Volume {
    /// 32 lowercase hex characters.
    pub id: String,
    pub name: String,
    pub size_gb: f64,
    pub bootable: bool,
    pub readonly: bool,
    pub shareable: bool,
    pub private: bool,
    pub cloudinit: bool,
    /// `qcow2`, `raw`, `iso`, ...
    pub format: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeCreate {
    pub name: String,
    pub size_gb: u32,
    pub bootable: bool,
    pub readonly: bool,
    pub shareable: bool,
    pub private: bool,
}

/// A boot volume cloned from a qcow2 cloud image at `url`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageVolumeCreate {
    pub name: String,
    pub size_gb: u32,
    pub url: String,
}

/// A volume the host downloads from `url` (http or https): `size_gb` GB,
/// refused when the file is larger or, given `sha256`, differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UrlVolumeCreate {
    pub name: String,
    pub url: String,
    pub size_gb: u32,
    /// Lowercase hex.
    pub sha256: Option<String>,
}

/// A volume made by [`AtomosClient::volume_create_from_url`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UrlVolume {
    pub id: String,
    /// sha256 (hex) of the download, when the daemon reports it.
    pub sha256: Option<String>,
}

/// Route label of the metadata uploads: the path carries the payload, which
/// must stay out of span names and errors.
const METADATA_ROUTE: &str = "volume/cloudinit/metadata";

impl AtomosClient {
    pub async fn volumes(&self) -> Result<Vec<Volume>, DriverError> {
        let list: ListOf<VolumeObject> = self.get_json(Daemon::Storage, "/accessible").await?;
        Ok(list.into_vec().into_iter().map(volume_from_wire).collect())
    }

    pub async fn volume_info(&self, id: &str) -> Result<Volume, DriverError> {
        let call = Call::post(Daemon::Storage, "/info").safe();
        let body = VolumeIdBody {
            volume_id: Some(id.to_owned()),
            name: None,
        };
        let answer: VolumeInfoResponse = self.send_json(&call, &body).await?.json(&call.route)?;
        Ok(volume_from_wire(answer.volume))
    }

    /// Checks that `size_gb` fits; a refusal is [`ErrorKind::Capacity`].
    pub async fn volume_can_create(&self, size_gb: u32) -> Result<(), DriverError> {
        let call = Call::post(Daemon::Storage, "/cancreate").safe();
        let reply = self
            .send_json(&call, &CanCreateBody { size: size_gb })
            .await
            .map_err(refusal_is_capacity)?;
        // Answers seen: `{"cancreate": bool}` (mock) or a bare integer
        // (thesis type); `false` or `0` mean no room.
        let refused = match serde_json::from_slice::<serde_json::Value>(&reply.body) {
            Ok(serde_json::Value::Bool(b)) => !b,
            Ok(serde_json::Value::Number(n)) => n.as_f64() == Some(0.0),
            Ok(serde_json::Value::Object(o)) => {
                o.get("cancreate").and_then(serde_json::Value::as_bool) == Some(false)
            }
            _ => false,
        };
        if refused {
            return Err(DriverError::new(
                ErrorKind::Capacity,
                &call.route,
                Some(reply.status),
                format!("no room for a {size_gb} GB volume"),
            ));
        }
        Ok(())
    }

    /// Creates an empty volume and returns its id. Never retried automatically.
    pub async fn volume_create(&self, req: &VolumeCreate) -> Result<String, DriverError> {
        let call = Call::post(Daemon::Storage, "/create");
        let body = CreateBody {
            name: req.name.clone(),
            size: req.size_gb,
            bootable: req.bootable,
            readonly: req.readonly,
            shareable: req.shareable,
            private: req.private,
        };
        let answer: CreateResponse = self.send_json(&call, &body).await?.json(&call.route)?;
        Ok(answer.vid)
    }

    /// Creates a bootable volume from a qcow2 image URL and returns its id.
    pub async fn volume_create_from_image(
        &self,
        req: &ImageVolumeCreate,
    ) -> Result<String, DriverError> {
        let call = Call::post(Daemon::Storage, "/cloudinit/create");
        // The fixed fields are what the thesis client sends for a cloud image (docs/atomos.md).
        let body = CloudinitCreateBody {
            name: req.name.clone(),
            size: req.size_gb,
            url: req.url.clone(),
            alg: "cp".to_owned(),
            format: "qcow2".to_owned(),
            bus: "virtio".to_owned(),
            clonable: true,
            private: false,
        };
        let answer: CreateResponse = self.send_json(&call, &body).await?.json(&call.route)?;
        Ok(answer.vid)
    }

    /// Copies a volume on its host (`/clone`; allowed while a running VM has
    /// it attached) and returns the copy's id. Never retried automatically.
    pub async fn volume_clone(&self, source_id: &str, name: &str) -> Result<String, DriverError> {
        let call = Call::post(Daemon::Storage, "/clone");
        let body = CloneBody {
            volume_id: source_id.to_owned(),
            name: name.to_owned(),
        };
        let answer: CreateResponse = self.send_json(&call, &body).await?.json(&call.route)?;
        Ok(answer.vid)
    }

    /// Makes a volume holding the file at `req.url`, downloaded by the host
    /// (`/create/url`). A download the host refuses (unreachable, too large,
    /// another sha256) is [`ErrorKind::Invalid`] with the daemon's words in
    /// its message, whatever the URL in them says; no room on the host is
    /// [`ErrorKind::Capacity`], as for [`Self::volume_create`]. Never
    /// retried automatically.
    pub async fn volume_create_from_url(
        &self,
        req: &UrlVolumeCreate,
    ) -> Result<UrlVolume, DriverError> {
        let call = Call::post(Daemon::Storage, "/create/url");
        let body = CreateUrlBody {
            name: req.name.clone(),
            url: req.url.clone(),
            size: req.size_gb,
            sha256: req.sha256.clone(),
            format: None,
            bootable: Some(true),
        };
        let answer: CreateResponse = self
            .send_json(&call, &body)
            .await
            .map_err(download_refusal)?
            .json(&call.route)?;
        Ok(UrlVolume {
            id: answer.vid,
            sha256: answer.sha256,
        })
    }

    /// Builds a cloud-init ISO volume from two uploads (user-data, then
    /// meta-data) and returns its id. See [`Self::cloudinit_create_files`].
    pub async fn cloudinit_create(
        &self,
        name: &str,
        user_data: &str,
        meta_data: &str,
    ) -> Result<String, DriverError> {
        self.cloudinit_create_files(name, &[("user-data", user_data), ("meta-data", meta_data)])
            .await
    }

    /// Builds a cloud-init ISO volume from one upload per file (`(file name,
    /// content)`, e.g. user-data, meta-data, network-config) and returns its
    /// id. Every answer but the last is 206 ("more files expected"), the
    /// first naming the volume; the last must be 200.
    pub async fn cloudinit_create_files(
        &self,
        name: &str,
        files: &[(&str, &str)],
    ) -> Result<String, DriverError> {
        let Some(((first_name, first_content), rest)) = files.split_first() else {
            return Err(DriverError::new(
                ErrorKind::Invalid,
                METADATA_ROUTE,
                None,
                "a cloud-init volume needs at least one file",
            ));
        };
        let first = CloudinitMetadata {
            name: Some(name.to_owned()),
            private: Some(false),
            bootable: Some(true),
            clonable: Some(false),
            alg: Some("no".to_owned()),
            expected_files: Some(files.len() as u32),
            ..Default::default()
        };
        let answer = self
            .cloudinit_upload(&first, first_name, first_content)
            .await?;
        let vid = answer.1.vid.filter(|v| !v.is_empty()).ok_or_else(|| {
            DriverError::new(
                ErrorKind::Invalid,
                METADATA_ROUTE,
                Some(answer.0),
                "first upload answered without a vid",
            )
        })?;
        let mut status = answer.0;
        for (file_name, content) in rest {
            let next = CloudinitMetadata {
                vid: Some(vid.clone()),
                ..Default::default()
            };
            status = self.cloudinit_upload(&next, file_name, content).await?.0;
        }
        if status == 206 {
            return Err(DriverError::new(
                ErrorKind::Invalid,
                METADATA_ROUTE,
                Some(status),
                format!("volume {vid} still expects files after the last one"),
            ));
        }
        Ok(vid)
    }

    /// Sends a copy of a volume to another host's storage daemon (its base
    /// URL, `http://host:port`); the copy's id there. The copy keeps the
    /// volume's name, so a repeated transfer is found by name first.
    pub async fn volume_transfer(&self, id: &str, target: &str) -> Result<String, DriverError> {
        let call = Call::post(Daemon::Storage, "/update/transfer");
        let body = TransferBody {
            volume_id: id.to_owned(),
            target: target.to_owned(),
        };
        let answer: CreateResponse = self.send_json(&call, &body).await?.json(&call.route)?;
        Ok(answer.vid)
    }

    /// Grows a volume to `size_gb`; a smaller size, or more than the host
    /// has free, is refused (`Invalid`, `Capacity`).
    pub async fn volume_resize(&self, id: &str, size_gb: u32) -> Result<(), DriverError> {
        let call = Call::post(Daemon::Storage, "/update/resize");
        let body = ResizeBody {
            volume_id: id.to_owned(),
            size: size_gb,
        };
        self.send_json(&call, &body).await?;
        Ok(())
    }

    /// Destroys a volume; a volume attached to a registered VM is refused.
    pub async fn volume_destroy(&self, id: &str) -> Result<(), DriverError> {
        let call = Call::post(Daemon::Storage, "/destroy");
        let body = VolumeIdBody {
            volume_id: Some(id.to_owned()),
            name: None,
        };
        self.send_json(&call, &body).await?;
        Ok(())
    }

    async fn cloudinit_upload(
        &self,
        meta: &CloudinitMetadata,
        file_name: &str,
        content: &str,
    ) -> Result<(u16, CloudinitMetadataResponse), DriverError> {
        let json = serde_json::to_vec(meta).map_err(|e| {
            DriverError::new(
                ErrorKind::Invalid,
                METADATA_ROUTE,
                None,
                format!("encoding: {e}"),
            )
        })?;
        let path = format!("/cloudinit/metadata/{}", metadata_segment(&json));
        let call = Call::post(Daemon::Storage, &path).with_route(METADATA_ROUTE);
        let part = Part::text(content.to_owned())
            .file_name(file_name.to_owned())
            .mime_str("application/octet-stream")
            .map_err(|e| {
                DriverError::new(ErrorKind::Invalid, METADATA_ROUTE, None, e.to_string())
            })?;
        let reply = self
            .send_multipart(&call, Form::new().part("file", part))
            .await?;
        let answer = if reply.body.is_empty() {
            CloudinitMetadataResponse::default()
        } else {
            reply.json(&call.route)?
        };
        Ok((reply.status, answer))
    }
}

/// How the storage daemon names its refusals of a `/create/url` download
/// (`[ClassName] message`, docs/atomos.md).
const DOWNLOAD_REFUSALS: &[&str] = &[
    "[CreateImageDownloadFailed]",
    "[ImageTooLarge]",
    "[ChecksumMismatch]",
];

/// A 400/422 naming a download refusal is the request's fault
/// ([`ErrorKind::Invalid`]), even when the URL or reason quoted in it reads
/// like a capacity problem (`.../not-enough-room.img`), which would
/// otherwise send the caller to another host.
fn download_refusal(mut err: DriverError) -> DriverError {
    if matches!(err.status, Some(400 | 422))
        && DOWNLOAD_REFUSALS.iter().any(|m| err.message.contains(m))
    {
        err.kind = ErrorKind::Invalid;
    }
    err
}

/// Standard base64 of the JSON, as the daemon decodes it (docs/atomos.md). A `/` in it
/// would split the path segment, so it is percent-encoded; `+` and `=` are
/// legal in a segment and left alone.
fn metadata_segment(json: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD
        .encode(json)
        .replace('/', "%2F")
}

/// Sizes above this many "GB" can only be bytes (the mock's unit; docs/atomos.md):
/// no single volume is a petabyte.
const BYTES_THRESHOLD: f64 = 1024.0 * 1024.0;

pub(crate) fn size_to_gb(size: f64) -> f64 {
    if size > BYTES_THRESHOLD {
        size / (1024.0 * 1024.0 * 1024.0)
    } else {
        size
    }
}

fn volume_from_wire(v: VolumeObject) -> Volume {
    Volume {
        id: v.volume_id,
        name: v.name,
        size_gb: size_to_gb(v.size),
        bootable: v.bootable,
        readonly: v.readonly,
        shareable: v.shareable,
        private: v.private,
        cloudinit: v.cloudinit,
        format: v.format,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes_in_bytes_become_gb() {
        assert_eq!(size_to_gb(50.0), 50.0);
        assert_eq!(size_to_gb(0.125), 0.125);
        assert_eq!(size_to_gb(53_687_091_200.0), 50.0);
    }

    #[test]
    fn volume_normalizes() {
        let v: VolumeObject = serde_json::from_value(json!({
            "volumeID": "a8", "name": "boot", "size": 50, "img_format": "qcow2",
            "bootable": true, "cloudinit": false
        }))
        .unwrap();
        let v = volume_from_wire(v);
        assert_eq!(v.id, "a8");
        assert_eq!(v.format.as_deref(), Some("qcow2"));
        assert!(v.bootable && !v.private);
    }

    #[test]
    fn download_refusals_are_invalid_whatever_the_url_says() {
        let refused = |status, message: &str| {
            download_refusal(DriverError::new(
                crate::error::classify(status, message),
                "volume/create/url",
                Some(status),
                message,
            ))
        };
        let e = refused(
            400,
            "[CreateImageDownloadFailed] cannot download http://x/not-enough-room.img: 404 Not Found",
        );
        assert_eq!(e.kind, ErrorKind::Invalid);
        assert!(e.message.contains("404 Not Found"), "{e}");
        let e = refused(
            400,
            "[ImageTooLarge] http://x/a.img is larger than the volume",
        );
        assert_eq!(e.kind, ErrorKind::Invalid);
        // No room on the host stays a capacity problem.
        let e = refused(507, "[VolumeNotAllocable] 40 GB free, 50 asked");
        assert_eq!(e.kind, ErrorKind::Capacity);
        let e = refused(503, "[CreateImageDownloadFailed] busy");
        assert_eq!(e.kind, ErrorKind::Transient);
    }

    #[test]
    fn metadata_segment_is_standard_base64_and_one_segment() {
        let json = br#"{"vid":"ab"}"#;
        assert_eq!(metadata_segment(json), "eyJ2aWQiOiJhYiJ9");
        // '?' at a byte offset ≡ 2 (mod 3) yields a '/' in standard base64.
        let seg = metadata_segment(b"ab?");
        assert_eq!(seg, "YWI%2F");
        assert!(!seg.contains('/'));
    }
}
