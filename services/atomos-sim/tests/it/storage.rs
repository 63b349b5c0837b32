//! Storage capacity, validation and the cloud-init upload protocol at the HTTP level.

use crate::common::{client, sim};
use atomos_driver::{ErrorKind, VolumeCreate};
use base64::Engine;
use std::time::Duration;

fn data_volume(name: &str, size_gb: u32) -> VolumeCreate {
    VolumeCreate {
        name: name.into(),
        size_gb,
        bootable: false,
        readonly: false,
        shareable: false,
        private: true,
    }
}

#[tokio::test]
async fn disk_capacity_is_accounted() {
    let sim = sim(Duration::from_millis(50)).await;
    let c = client(&sim, "small");
    c.volume_can_create(100).await.unwrap();
    let err = c.volume_can_create(101).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
    assert!(err.message.contains("VolumeNotAllocable"), "{err}");
    let id = c.volume_create(&data_volume("a", 60)).await.unwrap();
    assert_eq!(
        c.volume_can_create(41).await.unwrap_err().kind,
        ErrorKind::Capacity
    );
    assert_eq!(
        c.volume_create(&data_volume("b", 41))
            .await
            .unwrap_err()
            .kind,
        ErrorKind::Capacity
    );
    c.volume_destroy(&id).await.unwrap();
    c.volume_can_create(100).await.unwrap();
}

#[tokio::test]
async fn bad_volume_requests_are_invalid() {
    let sim = sim(Duration::from_millis(50)).await;
    let c = client(&sim, "small");
    assert_eq!(
        c.volume_create(&data_volume("", 1)).await.unwrap_err().kind,
        ErrorKind::Invalid
    );
    assert_eq!(
        c.volume_create(&data_volume("z", 0))
            .await
            .unwrap_err()
            .kind,
        ErrorKind::Invalid
    );
    let mut both = data_volume("both", 1);
    both.shareable = true;
    both.bootable = true;
    assert_eq!(
        c.volume_create(&both).await.unwrap_err().kind,
        ErrorKind::Invalid
    );
    assert!(
        c.volume_info("0123456789abcdef0123456789abcdef")
            .await
            .unwrap_err()
            .is_not_found()
    );
}

/// The protocol by hand: 206 after the first of two files, 200 after the
/// second, and an incomplete ISO cannot be attached.
#[tokio::test]
async fn cloudinit_uploads_answer_206_then_200() {
    let sim = sim(Duration::from_millis(50)).await;
    let target = sim.host("small").unwrap().target().clone();
    let http = reqwest::Client::new();
    let url = |meta: &serde_json::Value| {
        let data = base64::engine::general_purpose::STANDARD.encode(meta.to_string());
        format!(
            "http://{}:{}/api/v1.0/client/volume/cloudinit/metadata/{data}",
            target.host, target.ports.storage
        )
    };
    let upload = |meta: serde_json::Value, file: &'static str| {
        let form = reqwest::multipart::Form::new()
            .part("file", reqwest::multipart::Part::text("x").file_name(file));
        http.post(url(&meta)).multipart(form).send()
    };
    let first = upload(
        serde_json::json!({"name": "ci", "expectedFiles": 2}),
        "user-data",
    )
    .await
    .unwrap();
    assert_eq!(first.status(), 206);
    let vid = first.json::<serde_json::Value>().await.unwrap()["vid"]
        .as_str()
        .unwrap()
        .to_owned();

    // Not complete yet, so a VM cannot use it.
    let c = client(&sim, "small");
    let req = atomos_driver::Register {
        vm_name: "early".into(),
        spec: crate::common::spec(1, 512),
        volume_ids: vec![vid.clone()],
        network_ids: vec![],
        nic_macs: vec![],
    };
    assert_eq!(c.register(&req).await.unwrap_err().kind, ErrorKind::Invalid);

    let second = upload(serde_json::json!({"vid": vid}), "meta-data")
        .await
        .unwrap();
    assert_eq!(second.status(), 200);
    let third = upload(serde_json::json!({"vid": vid}), "extra")
        .await
        .unwrap();
    assert_eq!(third.status(), 400);
    let unknown = upload(
        serde_json::json!({"vid": "ffffffffffffffffffffffffffffffff"}),
        "x",
    )
    .await
    .unwrap();
    assert_eq!(unknown.status(), 404);
    // Garbage in the path or body is a 400 with a detail, not a crash.
    let garbage = http
        .post(format!(
            "http://{}:{}/api/v1.0/client/volume/cloudinit/metadata/%%%",
            target.host, target.ports.storage
        ))
        .body("nope")
        .send()
        .await
        .unwrap();
    assert_eq!(garbage.status(), 400);
    let no_form = http
        .post(url(&serde_json::json!({"name": "x"})))
        .body("nope")
        .send()
        .await
        .unwrap();
    assert_eq!(no_form.status(), 400);
    let body: serde_json::Value = no_form.json().await.unwrap();
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("CloudInitMetadataUploadFailed")
    );

    c.register(&req).await.unwrap();
}

/// Serves `bytes` at `/disk.img` (and 404 elsewhere) on a loopback port.
async fn serve(bytes: Vec<u8>) -> String {
    let app = axum::Router::new().route(
        "/disk.img",
        axum::routing::get(move || {
            let bytes = bytes.clone();
            async move { bytes }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn content(sim: &atomos_sim::Simulator, host: &str, id: &str) -> Option<String> {
    sim.host(host)?
        .inventory()
        .volumes
        .into_iter()
        .find(|v| v.id == id)
        .map(|v| v.content)
}

#[tokio::test]
async fn a_clone_copies_size_and_content_and_outlives_its_source() {
    let sim = sim(Duration::from_millis(50)).await;
    let c = client(&sim, "small");
    let bytes = b"a disk".repeat(1000);
    let base = serve(bytes.clone()).await;
    let source = c
        .volume_create_from_url(&atomos_driver::UrlVolumeCreate {
            name: "golden".into(),
            url: format!("{base}/disk.img"),
            size_gb: 3,
            sha256: None,
        })
        .await
        .unwrap();
    let sum = atomos_sim::content_hash(&bytes);
    assert_eq!(source.sha256.as_deref(), Some(sum.as_str()));
    assert_eq!(content(&sim, "small", &source.id), Some(sum.clone()));

    let copy = c.volume_clone(&source.id, "copy").await.unwrap();
    let info = c.volume_info(&copy).await.unwrap();
    assert_eq!((info.size_gb, info.bootable), (3.0, true));
    assert_eq!(content(&sim, "small", &copy), Some(sum.clone()));
    c.volume_destroy(&source.id).await.unwrap();
    assert_eq!(content(&sim, "small", &copy), Some(sum));

    let missing = c.volume_clone(&source.id, "again").await.unwrap_err();
    assert_eq!(missing.kind, ErrorKind::NotFound, "{missing}");
    // A clone needs room like any volume: 100 GB of disk, 3 used.
    let big = c.volume_create(&data_volume("big", 96)).await.unwrap();
    let full = c.volume_clone(&big, "big-copy").await.unwrap_err();
    assert_eq!(full.kind, ErrorKind::Capacity, "{full}");
    c.volume_destroy(&big).await.unwrap();
    // An injected fault on the route fails it, transiently.
    sim.host("small")
        .unwrap()
        .faults()
        .fail_next("volume/clone", 503, 1);
    let err = c.volume_clone(&copy, "faulty").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Transient, "{err}");
    c.volume_clone(&copy, "after").await.unwrap();
}

#[tokio::test]
async fn a_download_is_refused_when_missing_too_large_or_not_the_checksum() {
    let sim = sim(Duration::from_millis(50)).await;
    let c = client(&sim, "small");
    let base = serve(vec![7u8; 4096]).await;
    let req = |url: String, sha256: Option<String>| atomos_driver::UrlVolumeCreate {
        name: "img".into(),
        url,
        size_gb: 1,
        sha256,
    };
    let missing = c
        .volume_create_from_url(&req(format!("{base}/nope"), None))
        .await
        .unwrap_err();
    assert_eq!(missing.kind, ErrorKind::Invalid, "{missing}");
    assert!(
        missing.message.contains("CreateImageDownloadFailed"),
        "{missing}"
    );
    let wrong = c
        .volume_create_from_url(&req(format!("{base}/disk.img"), Some("0".repeat(64))))
        .await
        .unwrap_err();
    assert_eq!(wrong.kind, ErrorKind::Invalid, "{wrong}");
    assert!(wrong.message.contains("ChecksumMismatch"), "{wrong}");
    let right = atomos_sim::content_hash(&[7u8; 4096]);
    c.volume_create_from_url(&req(format!("{base}/disk.img"), Some(right)))
        .await
        .unwrap();
    // Nothing was kept of the refused downloads.
    assert_eq!(sim.host("small").unwrap().inventory().volumes.len(), 1);
}
