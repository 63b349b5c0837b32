//! Storage routes: list, info, cancreate, create, image clones, cloud-init uploads, destroy.

use super::{ApiError, ApiResult, ok, parse};
use crate::host::SimHost;
use crate::multipart::file_part;
use crate::state::{HostState, SimFile, SimVolume, content_hash};
use atomos_driver::schema::storage::{
    CanCreateBody, CloneBody, CloudinitCreateBody, CloudinitMetadata, CloudinitMetadataResponse,
    CreateBody, CreateResponse, CreateUrlBody, ImportBody, ImportFile, ResizeBody, TransferBody,
    VolumeIdBody, VolumeInfoResponse, VolumeObject,
};
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use base64::Engine;
use serde_json::json;

pub(super) fn routes() -> Router<SimHost> {
    Router::new()
        .route("/accessible", get(accessible))
        .route("/info", post(info))
        .route("/cancreate", post(cancreate))
        .route("/create", post(create))
        .route("/cloudinit/create", post(cloudinit_create))
        .route("/cloudinit/metadata/{data}", post(cloudinit_metadata))
        .route("/clone", post(clone))
        .route("/create/url", post(create_url))
        .route("/destroy", post(destroy))
        .route("/update/resize", post(resize))
        .route("/update/transfer", post(transfer))
        .route("/import", post(import))
}

/// Size given to a cloud-init ISO; real ones are a few hundred KiB.
const CLOUDINIT_SIZE_GB: f64 = 0.001;

/// Files a cloud-init volume may announce; at least user-data and meta-data.
const MIN_EXPECTED_FILES: u32 = 2;
const MAX_EXPECTED_FILES: u32 = 8;

pub(crate) fn volume_to_wire(host: &SimHost, v: &SimVolume) -> VolumeObject {
    VolumeObject {
        volume_id: v.id.clone(),
        name: v.name.clone(),
        size: v.size_gb,
        size_on_disk: None,
        format: Some(v.format.clone()),
        bus: Some(v.bus.clone()),
        alg: Some(v.alg.clone()),
        private: v.private,
        bootable: v.bootable,
        readonly: v.readonly,
        shareable: v.shareable,
        clonable: v.clonable,
        cloudinit: v.cloudinit,
        ceph: Some(false),
        exported: Some(false),
        creator_id: Some("sim".to_owned()),
        last_updated: None,
        serverurl: Some(host.server_url()),
        server: None,
        servers: Vec::new(),
        nservers: Some(1),
        own: Some(true),
    }
}

fn create_answer(v: &SimVolume) -> CreateResponse {
    CreateResponse {
        vid: v.id.clone(),
        name: Some(v.name.clone()),
        size: Some(v.size_gb),
        url: v.url.clone(),
        private: Some(v.private),
        clonable: Some(v.clonable),
        alg: Some(v.alg.clone()),
        img_format: Some(v.format.clone()),
        bus: Some(v.bus.clone()),
        shareable: Some(v.shareable),
        readonly: Some(v.readonly),
        bootable: Some(v.bootable),
        creator_id: Some("sim".to_owned()),
        sha256: None,
    }
}

/// Volume ids are 32 lowercase hex characters.
fn new_volume_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Resolves `{"volume_id"}` (or the mock's `volumeID`/`name`) to an index.
fn find_volume(state: &HostState, body: &VolumeIdBody) -> Result<usize, ApiError> {
    let found = match (&body.volume_id, &body.name) {
        (Some(id), _) => state.volumes.iter().position(|v| &v.id == id),
        (None, Some(name)) => state.volumes.iter().position(|v| &v.name == name),
        (None, None) => return Err(ApiError::bad_request("volume_id is required")),
    };
    found.ok_or_else(|| {
        let key = body
            .volume_id
            .as_deref()
            .or(body.name.as_deref())
            .unwrap_or_default();
        ApiError::not_found(format!("[VolumeNotFound] volume {key} does not exist"))
    })
}

fn require_name(name: &str) -> Result<(), ApiError> {
    if name.trim().is_empty() {
        return Err(ApiError::bad_request("name is required"));
    }
    Ok(())
}

fn require_size(size: u32) -> Result<(), ApiError> {
    if size == 0 {
        return Err(ApiError::bad_request("size (GB) must be at least 1"));
    }
    Ok(())
}

fn refuse(why: String) -> ApiError {
    ApiError::no_capacity(format!("[VolumeNotAllocable] {why}"))
}

async fn accessible(State(host): State<SimHost>) -> ApiResult {
    let state = host.state();
    let list: Vec<VolumeObject> = state
        .volumes
        .iter()
        .map(|v| volume_to_wire(&host, v))
        .collect();
    ok(list)
}

async fn info(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let body: VolumeIdBody = parse(&body)?;
    let state = host.state();
    let i = find_volume(&state, &body)?;
    ok(VolumeInfoResponse {
        volume: volume_to_wire(&host, &state.volumes[i]),
    })
}

async fn cancreate(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let CanCreateBody { size } = parse(&body)?;
    require_size(size)?;
    host.fit_disk(&host.state(), f64::from(size))
        .map_err(refuse)?;
    ok(json!({ "cancreate": true }))
}

async fn create(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let body: CreateBody = parse(&body)?;
    require_name(&body.name)?;
    require_size(body.size)?;
    if body.shareable && body.bootable {
        // Shareable volumes go over NFS, bootable ones over iSCSI.
        return Err(ApiError::bad_request(
            "[VolumeCannotBeCreated] a volume cannot be both shareable and bootable",
        ));
    }
    let mut state = host.state();
    host.fit_disk(&state, f64::from(body.size))
        .map_err(refuse)?;
    let volume = SimVolume {
        id: new_volume_id(),
        name: body.name,
        size_gb: f64::from(body.size),
        bootable: body.bootable,
        readonly: body.readonly,
        shareable: body.shareable,
        private: body.private,
        clonable: false,
        cloudinit: false,
        format: "qcow2".to_owned(),
        bus: "virtio".to_owned(),
        alg: "no".to_owned(),
        url: None,
        expected_files: 0,
        files: Vec::new(),
        attached_to: Vec::new(),
        content: content_hash(format!("empty:{}", body.size).as_bytes()),
    };
    let answer = create_answer(&volume);
    tracing::info!(host = host.name(), volume = %volume.name, id = %volume.id, "volume created");
    state.volumes.push(volume);
    ok(answer)
}

async fn cloudinit_create(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let body: CloudinitCreateBody = parse(&body)?;
    require_name(&body.name)?;
    require_size(body.size)?;
    if !(body.url.starts_with("http://") || body.url.starts_with("https://")) {
        return Err(ApiError::bad_request(format!(
            "[CloudInitCreateImageDownloadfailed] cannot download {:?}",
            body.url
        )));
    }
    let mut state = host.state();
    host.fit_disk(&state, f64::from(body.size))
        .map_err(refuse)?;
    let or = |s: String, default: &str| if s.is_empty() { default.to_owned() } else { s };
    let volume = SimVolume {
        id: new_volume_id(),
        name: body.name,
        size_gb: f64::from(body.size),
        bootable: true,
        readonly: false,
        shareable: false,
        private: body.private,
        clonable: body.clonable,
        cloudinit: false,
        format: or(body.format, "qcow2"),
        bus: or(body.bus, "virtio"),
        alg: or(body.alg, "cp"),
        content: content_hash(format!("url:{}", body.url).as_bytes()),
        url: Some(body.url),
        expected_files: 0,
        files: Vec::new(),
        attached_to: Vec::new(),
    };
    let answer = create_answer(&volume);
    tracing::info!(host = host.name(), volume = %volume.name, id = %volume.id, "image volume created");
    state.volumes.push(volume);
    ok(answer)
}

/// Accepts standard or URL-safe base64, padded or not: clients differ.
fn decode_metadata(data: &str) -> Result<CloudinitMetadata, ApiError> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let raw = [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|engine| engine.decode(data).ok())
        .ok_or_else(|| ApiError::bad_request("path data is not base64"))?;
    serde_json::from_slice(&raw)
        .map_err(|e| ApiError::bad_request(format!("path data is not the expected JSON: {e}")))
}

/// One upload of the cloud-init protocol: the first call (with `name` and
/// `expectedFiles`) creates the volume, later ones (with `vid`) add files.
/// 206 while files are missing, 200 with the last one.
async fn cloudinit_metadata(
    State(host): State<SimHost>,
    data: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    let Path(data) = data.map_err(|e| ApiError::bad_request(format!("bad path: {e}")))?;
    let meta = decode_metadata(&data)?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let part = file_part(content_type, &body, "file")
        .map_err(|e| ApiError::bad_request(format!("[CloudInitMetadataUploadFailed] {e}")))?;
    let file = SimFile {
        name: part.file_name.unwrap_or_else(|| "file".to_owned()),
        content: String::from_utf8_lossy(&part.data).into_owned(),
    };
    let mut state = host.state();
    let index = match meta.vid {
        Some(vid) => {
            let i = state
                .volumes
                .iter()
                .position(|v| v.id == vid && v.cloudinit)
                .ok_or_else(|| {
                    ApiError::not_found(format!(
                        "[CloudInitExpectedFilesTrackerNotFound] no upload in progress for {vid}"
                    ))
                })?;
            if state.volumes[i].is_complete() {
                return Err(ApiError::bad_request(format!(
                    "[CloudInitMetafilesNumberExceeded] volume {vid} already has all its files"
                )));
            }
            state.volumes[i].files.push(file);
            i
        }
        None => {
            let name = meta.name.filter(|n| !n.trim().is_empty()).ok_or_else(|| {
                ApiError::bad_request("the first upload needs a name (or a vid for later ones)")
            })?;
            let expected = meta.expected_files.unwrap_or(MIN_EXPECTED_FILES);
            if !(MIN_EXPECTED_FILES..=MAX_EXPECTED_FILES).contains(&expected) {
                return Err(ApiError::bad_request(format!(
                    "expectedFiles must be between {MIN_EXPECTED_FILES} and {MAX_EXPECTED_FILES}"
                )));
            }
            host.fit_disk(&state, CLOUDINIT_SIZE_GB).map_err(refuse)?;
            state.volumes.push(SimVolume {
                id: new_volume_id(),
                name,
                size_gb: CLOUDINIT_SIZE_GB,
                bootable: meta.bootable.unwrap_or(true),
                readonly: true,
                shareable: false,
                private: meta.private.unwrap_or(false),
                clonable: meta.clonable.unwrap_or(false),
                cloudinit: true,
                format: "iso".to_owned(),
                bus: "ide".to_owned(),
                alg: meta.alg.unwrap_or_else(|| "no".to_owned()),
                url: None,
                expected_files: expected,
                content: String::new(),
                files: vec![file],
                attached_to: Vec::new(),
            });
            state.volumes.len() - 1
        }
    };
    let all: Vec<u8> = state.volumes[index]
        .files
        .iter()
        .flat_map(|f| [f.name.as_bytes(), b"\0", f.content.as_bytes(), b"\0"].concat())
        .collect();
    state.volumes[index].content = content_hash(&all);
    let volume = &state.volumes[index];
    let status = if volume.is_complete() {
        StatusCode::OK
    } else {
        StatusCode::PARTIAL_CONTENT
    };
    let answer = CloudinitMetadataResponse {
        vid: Some(volume.id.clone()),
    };
    Ok((status, axum::Json(answer)).into_response())
}

/// `POST /clone {"volume_id", "name"}`: a copy of a volume on the same
/// host, allowed while a running VM has the source attached (a
/// crash-consistent copy). The upstream body is undocumented; this is the
/// shape meson sends (docs/atomos.md).
async fn clone(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let body: CloneBody = parse(&body)?;
    require_name(&body.name)?;
    let mut state = host.state();
    let i = find_volume(
        &state,
        &VolumeIdBody {
            volume_id: Some(body.volume_id.clone()),
            name: None,
        },
    )?;
    let source = &state.volumes[i];
    if !source.is_complete() || source.shareable {
        return Err(ApiError::bad_request(format!(
            "[VolumeCannotBeCloned] volume {} is {}",
            source.id,
            if source.shareable {
                "shareable"
            } else {
                "waiting for its cloud-init files"
            }
        )));
    }
    host.fit_disk(&state, source.size_gb).map_err(refuse)?;
    let volume = SimVolume {
        id: new_volume_id(),
        name: body.name,
        clonable: true,
        private: true,
        attached_to: Vec::new(),
        ..source.clone()
    };
    let answer = create_answer(&volume);
    tracing::info!(host = host.name(), volume = %volume.name, id = %volume.id, "volume cloned");
    state.volumes.push(volume);
    ok(answer)
}

/// How long a `/create/url` download may take, from connecting to the last byte.
const DOWNLOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A `/create/url` volume of `size` GB holds at most `size` × 10^9 bytes.
const BYTES_PER_GB: u64 = 1_000_000_000;

/// `POST /create/url {"name", "url", "size", "sha256"?}`: a volume of
/// `size` GB holding the file at `url`, downloaded by the host. A file
/// larger than `size` GB (10^9 bytes each), an answer other than 2xx, or
/// bytes whose sha256 differs from `sha256` are refused (400); the answer
/// carries the download's `sha256`. The upstream body is undocumented;
/// this is the shape meson sends (docs/atomos.md).
async fn create_url(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let body: CreateUrlBody = parse(&body)?;
    require_name(&body.name)?;
    require_size(body.size)?;
    if !(body.url.starts_with("http://") || body.url.starts_with("https://")) {
        return Err(download_failed(&body.url, "not an http(s) URL"));
    }
    // Checked before the download (no point fetching what cannot be kept)
    // and again after it: the lock is not held while the bytes arrive, so
    // other volumes may have taken the room meanwhile.
    host.fit_disk(&host.state(), f64::from(body.size))
        .map_err(refuse)?;
    let sha256 = download(&body.url, u64::from(body.size) * BYTES_PER_GB).await?;
    if let Some(expected) = body.sha256.as_deref()
        && !expected.eq_ignore_ascii_case(&sha256)
    {
        return Err(ApiError::bad_request(format!(
            "[ChecksumMismatch] {} has sha256 {sha256}, not {expected}",
            body.url
        )));
    }
    let mut state = host.state();
    host.fit_disk(&state, f64::from(body.size))
        .map_err(refuse)?;
    let volume = SimVolume {
        id: new_volume_id(),
        name: body.name,
        size_gb: f64::from(body.size),
        bootable: body.bootable.unwrap_or(true),
        readonly: false,
        shareable: false,
        private: true,
        clonable: true,
        cloudinit: false,
        format: body.format.unwrap_or_else(|| "qcow2".to_owned()),
        bus: "virtio".to_owned(),
        alg: "cp".to_owned(),
        url: Some(body.url),
        expected_files: 0,
        files: Vec::new(),
        attached_to: Vec::new(),
        content: sha256.clone(),
    };
    let answer = CreateResponse {
        sha256: Some(sha256),
        ..create_answer(&volume)
    };
    tracing::info!(host = host.name(), volume = %volume.name, id = %volume.id, "volume downloaded");
    state.volumes.push(volume);
    ok(answer)
}

fn download_failed(url: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!(
        "[CreateImageDownloadFailed] cannot download {url}: {why}"
    ))
}

/// A transport error with its causes (`error sending request: ...:
/// Connection refused`), the URL left out: the message names it already.
fn transport(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// The sha256 (lowercase hex) of the body at `url`, refused past `cap`
/// bytes: on its Content-Length before reading, and while reading (a
/// chunked body has none). The bytes are hashed as they arrive and not
/// kept, so memory does not grow with the file.
async fn download(url: &str, cap: u64) -> Result<String, ApiError> {
    use sha2::{Digest, Sha256};
    let too_large = || {
        ApiError::bad_request(format!(
            "[ImageTooLarge] {url} is larger than the volume ({cap} bytes)"
        ))
    };
    let client = reqwest::Client::builder()
        .timeout(DOWNLOAD_TIMEOUT)
        .build()
        .map_err(|e| download_failed(url, transport(e)))?;
    let mut answer = client
        .get(url)
        .send()
        .await
        .map_err(|e| download_failed(url, transport(e)))?;
    if !answer.status().is_success() {
        return Err(download_failed(url, answer.status()));
    }
    if answer.content_length().is_some_and(|n| n > cap) {
        return Err(too_large());
    }
    let mut hasher = Sha256::new();
    let mut read: u64 = 0;
    while let Some(chunk) = answer
        .chunk()
        .await
        .map_err(|e| download_failed(url, transport(e)))?
    {
        read = read.saturating_add(chunk.len() as u64);
        if read > cap {
            return Err(too_large());
        }
        hasher.update(&chunk);
    }
    Ok(format!("{:x}", hasher.finalize()))
}

/// `POST /update/resize {"volume_id", "size"}`: grows a volume to `size`
/// GB, attached or not and its VM running or off (Hetzner's rule; the
/// daemons' is undocumented). A smaller size is refused (a disk cannot give
/// back bytes its filesystem may use), the same size is a no-op, and the
/// growth must fit the host's free disk. A cloud-init ISO cannot grow.
async fn resize(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let ResizeBody { volume_id, size } = parse(&body)?;
    require_size(size)?;
    let mut state = host.state();
    let i = find_volume(
        &state,
        &VolumeIdBody {
            volume_id: Some(volume_id),
            name: None,
        },
    )?;
    let v = &state.volumes[i];
    let (id, was) = (v.id.clone(), v.size_gb);
    if v.cloudinit || v.format == "iso" {
        return Err(ApiError::bad_request(format!(
            "[VolumeResizeFailed] volume {id} is an ISO"
        )));
    }
    let to = f64::from(size);
    if to < was - 1e-9 {
        return Err(ApiError::bad_request(format!(
            "[VolumeResizeFailed] volume {id} has {was} GB; volumes only grow"
        )));
    }
    host.fit_disk(&state, to - was).map_err(refuse)?;
    state.volumes[i].size_gb = to;
    tracing::info!(host = host.name(), %id, from = was, to, "volume resized");
    ok(json!({ "volume_id": id, "size": to }))
}

/// How long a `/update/transfer` may take to hand a volume over.
const TRANSFER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// `POST /update/transfer {"volume_id", "target"}`: sends a copy of the
/// volume (its bytes, as their content hash, and a cloud-init ISO's files)
/// to the storage daemon at `target` (`http://host:port`, another host's),
/// through that daemon's `/import`; answers the copy's id there. The volume
/// stays here, attached or not (a VM moving to another host is stopped by
/// its caller first). A target that refuses (no room) or cannot be reached
/// is a 502 naming why; nothing is kept here.
async fn transfer(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let TransferBody { volume_id, target } = parse(&body)?;
    let target = reqwest::Url::parse(&target)
        .ok()
        .filter(|u| u.scheme() == "http" || u.scheme() == "https")
        .ok_or_else(|| ApiError::bad_request(format!("target {target:?} is not an http(s) URL")))?;
    let sent = {
        let state = host.state();
        let i = find_volume(
            &state,
            &VolumeIdBody {
                volume_id: Some(volume_id),
                name: None,
            },
        )?;
        let v = &state.volumes[i];
        ImportBody {
            name: v.name.clone(),
            size: v.size_gb,
            bootable: v.bootable,
            readonly: v.readonly,
            shareable: v.shareable,
            private: v.private,
            clonable: v.clonable,
            cloudinit: v.cloudinit,
            format: v.format.clone(),
            bus: v.bus.clone(),
            alg: v.alg.clone(),
            url: v.url.clone(),
            expected_files: v.expected_files,
            files: v
                .files
                .iter()
                .map(|f| ImportFile {
                    name: f.name.clone(),
                    content: f.content.clone(),
                })
                .collect(),
            content: v.content.clone(),
        }
    };
    let to = format!(
        "{}/api/v1.0/client/volume/import",
        target.as_str().trim_end_matches('/')
    );
    let failed = |why: String| {
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            format!("[VolumeTransferFailed] {to}: {why}"),
        )
    };
    let answer = reqwest::Client::new()
        .post(&to)
        .json(&sent)
        .timeout(TRANSFER_TIMEOUT)
        .send()
        .await
        .map_err(|e| failed(e.to_string()))?;
    let status = answer.status();
    let text = answer.text().await.map_err(|e| failed(e.to_string()))?;
    if !status.is_success() {
        return Err(if status == StatusCode::INSUFFICIENT_STORAGE {
            refuse(format!("the target has no room: {text}"))
        } else {
            failed(format!("{status}: {text}"))
        });
    }
    let made: CreateResponse = serde_json::from_str(&text).map_err(|e| failed(e.to_string()))?;
    tracing::info!(host = host.name(), volume = %sent.name, %to, vid = %made.vid, "volume transferred");
    ok(made)
}

/// `POST /import`: takes a volume another host's `/update/transfer` sends
/// (see there); it needs room like any volume.
async fn import(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let body: ImportBody = parse(&body)?;
    require_name(&body.name)?;
    if body.size.is_nan() || body.size <= 0.0 {
        return Err(ApiError::bad_request("size (GB) must be more than 0"));
    }
    let mut state = host.state();
    host.fit_disk(&state, body.size).map_err(refuse)?;
    let volume = SimVolume {
        id: new_volume_id(),
        name: body.name,
        size_gb: body.size,
        bootable: body.bootable,
        readonly: body.readonly,
        shareable: body.shareable,
        private: body.private,
        clonable: body.clonable,
        cloudinit: body.cloudinit,
        format: body.format,
        bus: body.bus,
        alg: body.alg,
        url: body.url,
        expected_files: body.expected_files,
        files: body
            .files
            .into_iter()
            .map(|f| SimFile {
                name: f.name,
                content: f.content,
            })
            .collect(),
        attached_to: Vec::new(),
        content: body.content,
    };
    let answer = create_answer(&volume);
    tracing::info!(host = host.name(), volume = %volume.name, id = %volume.id, "volume imported");
    state.volumes.push(volume);
    ok(answer)
}

async fn destroy(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    let body: VolumeIdBody = parse(&body)?;
    let mut state = host.state();
    let i = find_volume(&state, &body)?;
    let id = state.volumes[i].id.clone();
    if let Some(vm) = state.vm_attached(&id) {
        return Err(ApiError::bad_request(format!(
            "[VolumeCannotBeDeleted] volume {id} is attached to VM {}",
            vm.name
        )));
    }
    state.volumes.remove(i);
    tracing::info!(host = host.name(), %id, "volume destroyed");
    ok(json!({ "volume_id": id }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_decodes_any_base64_flavour() {
        let json = br#"{"name":"n?>","expectedFiles":2}"#;
        for engine in [
            base64::engine::general_purpose::STANDARD,
            base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ] {
            let meta = decode_metadata(&engine.encode(json)).unwrap();
            assert_eq!(meta.name.as_deref(), Some("n?>"));
            assert_eq!(meta.expected_files, Some(2));
        }
        assert!(decode_metadata("!!!").is_err());
        assert!(decode_metadata(&base64::engine::general_purpose::STANDARD.encode("42")).is_err());
    }

    /// Serves `response` raw on a loopback port to every request.
    async fn serve_raw(response: Vec<u8>) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let response = response.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let _ = stream.write_all(&response).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        format!("http://{addr}/disk.img")
    }

    /// A body without a Content-Length is cut off as it streams past the cap.
    #[tokio::test]
    async fn downloads_stop_at_the_cap_while_streaming() {
        let mut response = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for i in 0..5u8 {
            response.extend_from_slice(b"a\r\n");
            response.extend_from_slice(&[b'0' + i; 10]);
            response.extend_from_slice(b"\r\n");
        }
        response.extend_from_slice(b"0\r\n\r\n");
        let url = serve_raw(response).await;
        let all: Vec<u8> = (0..5u8).flat_map(|i| [b'0' + i; 10]).collect();
        assert_eq!(download(&url, 50).await.unwrap(), content_hash(&all));
        let err = download(&url, 49).await.unwrap_err();
        assert_eq!(err.status, StatusCode::BAD_REQUEST);
        assert!(err.detail.starts_with("[ImageTooLarge]"), "{err:?}");
    }

    #[tokio::test]
    async fn downloads_are_refused_on_a_large_content_length() {
        let url =
            serve_raw(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world".to_vec()).await;
        assert_eq!(
            download(&url, 11).await.unwrap(),
            content_hash(b"hello world")
        );
        let err = download(&url, 10).await.unwrap_err();
        assert!(err.detail.starts_with("[ImageTooLarge]"), "{err:?}");
        let url =
            serve_raw(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n".to_vec())
                .await;
        let err = download(&url, 10).await.unwrap_err();
        assert_eq!(
            err.detail,
            format!("[CreateImageDownloadFailed] cannot download {url}: 500 Internal Server Error")
        );
    }

    #[test]
    fn volume_ids_are_32_hex() {
        let id = new_volume_id();
        assert_eq!(id.len(), 32);
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
    }
}
