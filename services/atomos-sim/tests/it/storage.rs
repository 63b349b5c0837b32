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
