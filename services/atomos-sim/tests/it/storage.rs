//! Storage capacity, validation, the cloud-init upload protocol, clones and
//! downloads (`/clone`, `/create/url`) at the HTTP level, and the content
//! hash every volume shows in the inventory.

use crate::common::{client, control, register, sim, wait_running};
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

/// A server on a loopback port answering every request with `response`,
/// written raw (so it may lie about its length), then hanging up.
async fn serve_raw(response: &'static [u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                // The request head; a GET has no body.
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = stream.write_all(response).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    format!("http://{addr}")
}

/// A loopback URL nothing listens on.
async fn closed_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}/disk.img")
}

/// `POST` to `host`'s storage daemon by hand: status and JSON body.
async fn storage_post(
    sim: &atomos_sim::Simulator,
    host: &str,
    path: &str,
    body: serde_json::Value,
) -> (u16, serde_json::Value) {
    let target = sim.host(host).unwrap().target().clone();
    let answer = reqwest::Client::new()
        .post(format!(
            "http://{}:{}/api/v1.0/client/volume{path}",
            target.host, target.ports.storage
        ))
        .json(&body)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.json().await.unwrap())
}

/// Volume `id`'s entry in the control endpoint's `GET /inventory/{host}`.
async fn inventory_volume(
    sim: &atomos_sim::Simulator,
    host: &str,
    id: &str,
) -> Option<serde_json::Value> {
    let (status, inv) = control(
        sim,
        reqwest::Method::GET,
        &format!("/inventory/{host}"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{inv}");
    inv["volumes"]
        .as_array()?
        .iter()
        .find(|v| v["id"] == id)
        .cloned()
}

#[tokio::test]
async fn every_volume_shows_a_content_hash_in_the_control_inventory() {
    let sim = sim(Duration::from_millis(50)).await;
    let c = client(&sim, "small");
    let empty = c.volume_create(&data_volume("empty", 5)).await.unwrap();
    let image_url = "https://images.example/jammy.qcow2";
    let image = c
        .volume_create_from_image(&atomos_driver::ImageVolumeCreate {
            name: "boot".into(),
            size_gb: 10,
            url: image_url.into(),
        })
        .await
        .unwrap();
    let ci = c
        .cloudinit_create("ci", "#cloud-config\n", "instance-id: a\n")
        .await
        .unwrap();
    let same = c
        .cloudinit_create("ci2", "#cloud-config\n", "instance-id: a\n")
        .await
        .unwrap();
    let other = c
        .cloudinit_create("ci3", "#cloud-config\n", "instance-id: b\n")
        .await
        .unwrap();
    let bytes = b"qcow2 or not".repeat(100);
    let base = serve(bytes.clone()).await;
    let downloaded = c
        .volume_create_from_url(&atomos_driver::UrlVolumeCreate {
            name: "import".into(),
            url: format!("{base}/disk.img"),
            size_gb: 1,
            sha256: None,
        })
        .await
        .unwrap();

    let hash_of = |id: String| {
        let sim = &sim;
        async move {
            inventory_volume(sim, "small", &id).await.unwrap()["content"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    // An empty disk and a cloud image the simulator does not fetch stand
    // for their bytes by a description of them.
    assert_eq!(hash_of(empty).await, atomos_sim::content_hash(b"empty:5"));
    assert_eq!(
        hash_of(image).await,
        atomos_sim::content_hash(format!("url:{image_url}").as_bytes())
    );
    // A cloud-init ISO's hash follows its files.
    let ci = hash_of(ci).await;
    assert_eq!(ci.len(), 64);
    assert!(
        ci.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    assert_eq!(ci, hash_of(same).await);
    assert_ne!(ci, hash_of(other).await);
    // A download's is the sha256 of the bytes served.
    assert_eq!(
        hash_of(downloaded.id.clone()).await,
        atomos_sim::content_hash(&bytes)
    );
    // The fleet-wide inventory shows the same.
    let (_, all) = control(&sim, reqwest::Method::GET, "/inventory", None).await;
    let small = all["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "small")
        .unwrap();
    let entry = small["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == downloaded.id.as_str())
        .unwrap();
    assert_eq!(entry["content"], atomos_sim::content_hash(&bytes).as_str());
}

#[tokio::test]
async fn a_clone_is_a_private_detached_copy_even_of_a_running_vms_disk() {
    let sim = sim(Duration::from_millis(50)).await;
    let c = client(&sim, "small");
    let bytes = vec![42u8; 10_000];
    let base = serve(bytes.clone()).await;
    let boot = c
        .volume_create_from_url(&atomos_driver::UrlVolumeCreate {
            name: "boot".into(),
            url: format!("{base}/disk.img"),
            size_gb: 4,
            sha256: None,
        })
        .await
        .unwrap()
        .id;
    let mut req = register("vm", 1, 512);
    req.volume_ids = vec![boot.clone()];
    c.register(&req).await.unwrap();
    wait_running(&c, "vm").await;

    let (status, answer) = storage_post(
        &sim,
        "small",
        "/clone",
        serde_json::json!({"volume_id": boot, "name": "snap"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let snap = answer["vid"].as_str().unwrap().to_owned();
    assert_eq!(snap.len(), 32);
    assert_ne!(snap, boot);
    assert_eq!(answer["name"], "snap");
    let source = inventory_volume(&sim, "small", &boot).await.unwrap();
    let copy = inventory_volume(&sim, "small", &snap).await.unwrap();
    assert_eq!(source["attached_to"].as_array().unwrap().len(), 1);
    assert_eq!(copy["attached_to"], serde_json::json!([]));
    for field in ["size_gb", "format", "bus", "bootable", "content"] {
        assert_eq!(copy[field], source[field], "{field}");
    }
    assert_eq!(copy["content"], atomos_sim::content_hash(&bytes).as_str());
    assert_eq!(
        (&copy["clonable"], &copy["private"]),
        (&true.into(), &true.into())
    );
}

#[tokio::test]
async fn clones_of_missing_unfinished_or_shareable_volumes_are_refused() {
    let sim = sim(Duration::from_millis(50)).await;
    let c = client(&sim, "small");
    let (status, body) = storage_post(
        &sim,
        "small",
        "/clone",
        serde_json::json!({"volume_id": "0123456789abcdef0123456789abcdef", "name": "x"}),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .starts_with("[VolumeNotFound]"),
        "{body}"
    );

    let data = c.volume_create(&data_volume("data", 1)).await.unwrap();
    let (status, body) = storage_post(
        &sim,
        "small",
        "/clone",
        serde_json::json!({"volume_id": data, "name": " "}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = storage_post(&sim, "small", "/clone", serde_json::json!([data])).await;
    assert_eq!(status, 400);

    let mut shared = data_volume("shared", 1);
    shared.shareable = true;
    let shared = c.volume_create(&shared).await.unwrap();
    let err = c.volume_clone(&shared, "copy").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    assert!(err.message.starts_with("[VolumeCannotBeCloned]"), "{err}");

    // A cloud-init ISO with one of its two files.
    let target = sim.host("small").unwrap().target().clone();
    let meta = base64::engine::general_purpose::STANDARD
        .encode(serde_json::json!({"name": "ci", "expectedFiles": 2}).to_string());
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::text("x").file_name("user-data"),
    );
    let first = reqwest::Client::new()
        .post(format!(
            "http://{}:{}/api/v1.0/client/volume/cloudinit/metadata/{meta}",
            target.host, target.ports.storage
        ))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 206);
    let unfinished = first.json::<serde_json::Value>().await.unwrap()["vid"]
        .as_str()
        .unwrap()
        .to_owned();
    let err = c.volume_clone(&unfinished, "copy").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    assert!(err.message.starts_with("[VolumeCannotBeCloned]"), "{err}");
    // Nothing was made by the refusals.
    assert_eq!(sim.host("small").unwrap().inventory().volumes.len(), 3);
}

#[tokio::test]
async fn a_download_refuses_what_it_cannot_fetch_or_keep() {
    let sim = sim(Duration::from_millis(50)).await;
    let c = client(&sim, "small");
    let body =
        |url: String, size: u32| serde_json::json!({"name": "img", "url": url, "size": size});

    // A 404 from the file server, and nothing listening at all.
    let base = serve(vec![1u8; 16]).await;
    let (status, answer) = storage_post(
        &sim,
        "small",
        "/create/url",
        body(format!("{base}/nope"), 1),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    let detail = answer["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(&format!(
            "[CreateImageDownloadFailed] cannot download {base}/nope: 404"
        )),
        "{detail}"
    );
    let closed = closed_url().await;
    let (status, answer) =
        storage_post(&sim, "small", "/create/url", body(closed.clone(), 1)).await;
    assert_eq!(status, 400, "{answer}");
    let detail = answer["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(&format!(
            "[CreateImageDownloadFailed] cannot download {closed}: "
        )),
        "{detail}"
    );
    let (status, _) = storage_post(
        &sim,
        "small",
        "/create/url",
        body("ftp://x/y.img".into(), 1),
    )
    .await;
    assert_eq!(status, 400);

    // A file announcing more than 1 GB (10^9 bytes) is refused on its
    // Content-Length, before a byte of it is read.
    let huge =
        serve_raw(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000001\r\nConnection: close\r\n\r\nabc")
            .await;
    let (status, answer) = storage_post(
        &sim,
        "small",
        "/create/url",
        body(format!("{huge}/disk.img"), 1),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["detail"]
            .as_str()
            .unwrap()
            .starts_with("[ImageTooLarge]"),
        "{answer}"
    );
    let err = c
        .volume_create_from_url(&atomos_driver::UrlVolumeCreate {
            name: "img".into(),
            url: format!("{huge}/disk.img"),
            size_gb: 1,
            sha256: None,
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    assert!(err.message.contains("ImageTooLarge"), "{err}");

    // No room: refused before downloading (nothing listens at the URL, so
    // a download would have failed otherwise). 100 GB of disk.
    let err = c
        .volume_create_from_url(&atomos_driver::UrlVolumeCreate {
            name: "img".into(),
            url: closed,
            size_gb: 101,
            sha256: None,
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity, "{err}");
    assert!(err.message.contains("VolumeNotAllocable"), "{err}");

    // Bad bodies.
    for bad in [
        body(format!("{base}/disk.img"), 0),
        serde_json::json!({"name": "", "url": format!("{base}/disk.img"), "size": 1}),
        serde_json::json!({"name": "img", "url": format!("{base}/disk.img"), "size": "big"}),
    ] {
        let (status, answer) = storage_post(&sim, "small", "/create/url", bad.clone()).await;
        assert_eq!(status, 400, "{bad}: {answer}");
    }

    // An injected fault on the route fails the call once: it is not retried.
    sim.host("small")
        .unwrap()
        .faults()
        .fail_next("volume/create/url", 503, 1);
    let req = atomos_driver::UrlVolumeCreate {
        name: "img".into(),
        url: format!("{base}/disk.img"),
        size_gb: 1,
        sha256: None,
    };
    let err = c.volume_create_from_url(&req).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Transient, "{err}");
    assert!(sim.host("small").unwrap().inventory().volumes.is_empty());
    let made = c.volume_create_from_url(&req).await.unwrap();
    let entry = inventory_volume(&sim, "small", &made.id).await.unwrap();
    assert_eq!(
        entry["content"],
        atomos_sim::content_hash(&[1u8; 16]).as_str()
    );
    assert_eq!(entry["url"], req.url.as_str());
    assert_eq!(
        (&entry["bootable"], &entry["clonable"]),
        (&true.into(), &true.into())
    );
}

/// `/volume/attach` and `/volume/detach` on a running VM (a hot-plug), and
/// their refusals: twice on the same VM, on a second VM, not attached, a
/// running VM's boot volume, an unknown VM or volume.
#[tokio::test]
async fn volumes_attach_and_detach_on_a_running_vm() {
    let sim = sim(Duration::from_millis(50)).await;
    let c = client(&sim, "small");
    let boot = c
        .volume_create(&VolumeCreate {
            bootable: true,
            ..data_volume("boot", 2)
        })
        .await
        .unwrap();
    let mut req = register("hot", 1, 512);
    req.volume_ids = vec![boot.clone()];
    c.register(&req).await.unwrap();
    let vm = wait_running(&c, "hot").await;
    c.register(&register("other", 1, 512)).await.unwrap();
    let other = c.vm_by_name("other").await.unwrap().unwrap();

    let data = c.volume_create(&data_volume("data", 3)).await.unwrap();
    c.volume_attach(&vm.id, &data).await.unwrap();
    let on = c.vm_by_name("hot").await.unwrap().unwrap();
    assert_eq!(on.volume_ids, [boot.clone(), data.clone()]);
    assert_eq!(on.state, atomos_driver::VmState::Running, "still running");

    let again = c.volume_attach(&vm.id, &data).await.unwrap_err();
    assert_eq!(again.kind, ErrorKind::AlreadyExists, "{again}");
    assert!(again.message.contains("VolumeAlreadyAttached"), "{again}");
    let elsewhere = c.volume_attach(&other.id, &data).await.unwrap_err();
    assert_eq!(elsewhere.kind, ErrorKind::Invalid, "{elsewhere}");
    assert!(elsewhere.message.contains("hot"), "{elsewhere}");
    let boot_out = c.volume_detach(&vm.id, &boot).await.unwrap_err();
    assert!(boot_out.message.contains("VmNotStopped"), "{boot_out}");
    assert!(
        c.volume_attach("no-such-vm", &data)
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(
        c.volume_attach(&vm.id, "0123456789abcdef0123456789abcdef")
            .await
            .unwrap_err()
            .is_not_found()
    );

    c.volume_detach(&vm.id, &data).await.unwrap();
    let off = c.vm_by_name("hot").await.unwrap().unwrap();
    assert_eq!(off.volume_ids, std::slice::from_ref(&boot));
    assert!(
        c.volume_detach(&vm.id, &data)
            .await
            .unwrap_err()
            .is_not_found()
    );
    // Free again: another VM takes it, and it can be destroyed once detached.
    c.volume_attach(&other.id, &data).await.unwrap();
    assert_eq!(
        c.volume_destroy(&data).await.unwrap_err().kind,
        ErrorKind::Invalid
    );
    c.volume_detach(&other.id, &data).await.unwrap();
    c.volume_destroy(&data).await.unwrap();
    // A stopped VM gives its boot volume up.
    c.stop(&vm.id).await.unwrap();
    c.volume_detach(&vm.id, &boot).await.unwrap();
}

/// `/update/resize` grows a volume (attached or not) within the host's
/// disk, keeps its content, and refuses a smaller size or an ISO.
#[tokio::test]
async fn volumes_grow_but_never_shrink() {
    let sim = sim(Duration::from_millis(50)).await;
    let c = client(&sim, "small");
    let id = c.volume_create(&data_volume("grow", 10)).await.unwrap();
    let before = content(&sim, "small", &id);
    c.register(&register("holder", 1, 512)).await.unwrap();
    let vm = c.vm_by_name("holder").await.unwrap().unwrap();
    c.volume_attach(&vm.id, &id).await.unwrap();

    c.volume_resize(&id, 25).await.unwrap();
    assert_eq!(c.volume_info(&id).await.unwrap().size_gb, 25.0);
    assert_eq!(content(&sim, "small", &id), before, "the bytes stay");
    c.volume_resize(&id, 25).await.unwrap();

    let shrink = c.volume_resize(&id, 24).await.unwrap_err();
    assert_eq!(shrink.kind, ErrorKind::Invalid, "{shrink}");
    assert!(shrink.message.contains("only grow"), "{shrink}");
    // 100 GB of disk, 25 used: growing by 76 does not fit.
    let full = c.volume_resize(&id, 101).await.unwrap_err();
    assert_eq!(full.kind, ErrorKind::Capacity, "{full}");
    assert_eq!(c.volume_info(&id).await.unwrap().size_gb, 25.0);
    assert!(
        c.volume_resize("0123456789abcdef0123456789abcdef", 5)
            .await
            .unwrap_err()
            .is_not_found()
    );
}

/// `/update/transfer` hands a copy (name, bytes as content hash) to another
/// host's `/import`; a target without room or out of reach is refused and
/// leaves nothing there.
#[tokio::test]
async fn a_transfer_copies_a_volume_to_another_host() {
    let sim = sim(Duration::from_millis(50)).await;
    let (small, gpu) = (client(&sim, "small"), client(&sim, "gpu"));
    let id = small
        .volume_create(&data_volume("moving", 5))
        .await
        .unwrap();
    let sum = content(&sim, "small", &id).unwrap();
    let copy = small
        .volume_transfer(&id, &gpu.target().storage_origin())
        .await
        .unwrap();
    assert_ne!(copy, id);
    assert_eq!(content(&sim, "gpu", &copy), Some(sum), "the same bytes");
    let got = gpu.volume_info(&copy).await.unwrap();
    assert_eq!((got.name.as_str(), got.size_gb), ("moving", 5.0));
    assert!(small.volume_info(&id).await.is_ok(), "the source stays");

    // No room there: a capacity refusal; out of reach: named, not capacity.
    let big = small.volume_create(&data_volume("big", 90)).await.unwrap();
    let before = gpu.volumes().await.unwrap().len();
    // 100 GB of disk, 95 used: another 90 do not fit.
    let full = small
        .volume_transfer(&big, &sim.host("small").unwrap().target().storage_origin())
        .await
        .unwrap_err();
    assert_eq!(full.kind, ErrorKind::Capacity, "{full}");
    let closed = closed_url().await;
    let gone = small.volume_transfer(&id, &closed).await.unwrap_err();
    assert!(gone.message.contains("VolumeTransferFailed"), "{gone}");
    assert_eq!(
        gpu.volumes().await.unwrap().len(),
        before,
        "nothing half-made"
    );
    assert_eq!(small.volumes().await.unwrap().len(), 2);
}
