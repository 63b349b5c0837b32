//! A VM boots, leases an address on its network and phones home to a tiny server, as cloud-init would.

use crate::common::{client, eventually, sim, spec, wait_running};
use atomos_driver::{AtomosClient, ImageVolumeCreate, NetworkCreate, Register, VmState};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

/// One phone-home call as the server saw it.
#[derive(Debug)]
pub(crate) struct Call {
    pub id: String,
    pub form: HashMap<String, String>,
}

struct Server {
    calls: mpsc::UnboundedSender<Call>,
    /// Answer 500 to this many calls first.
    failures: AtomicU32,
}

/// Starts the server; returns its base URL and the calls it receives.
pub(crate) async fn phone_home_server(failures: u32) -> (String, mpsc::UnboundedReceiver<Call>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let state = Arc::new(Server {
        calls: tx,
        failures: AtomicU32::new(failures),
    });
    async fn handle(
        State(s): State<Arc<Server>>,
        Path(id): Path<String>,
        axum::Form(form): axum::Form<HashMap<String, String>>,
    ) -> StatusCode {
        let failing = s
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        let _ = s.calls.send(Call { id, form });
        if failing {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::NO_CONTENT
        }
    }
    let app = axum::Router::new()
        .route("/v1/vms/{id}/phone-home", post(handle))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, rx)
}

/// meson's cloud-init documents (meson-core/src/cloudinit.rs), verbatim in shape.
pub(crate) fn seed(hostname: &str, instance_id: &str, url: &str, tries: u32) -> (String, String) {
    let q = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
    let user_data = format!(
        "#cloud-config\nhostname: {}\npreserve_hostname: false\nssh_pwauth: false\n\
         users:\n  - default\n  - name: \"elemento\"\n    shell: \"/bin/bash\"\n\
         \x20   sudo: \"ALL=(ALL) NOPASSWD:ALL\"\n    lock_passwd: true\n\
         phone_home:\n  url: {}\n  post: [\"instance_id\", \"hostname\"]\n  tries: {tries}\n",
        q(hostname),
        q(url)
    );
    let meta_data = format!(
        "instance-id: {}\nlocal-hostname: {}\n",
        q(instance_id),
        q(hostname)
    );
    (user_data, meta_data)
}

/// Creates the three volumes of a VM and registers it on `network`.
pub(crate) async fn create_vm(
    c: &AtomosClient,
    name: &str,
    user_data: &str,
    meta_data: &str,
    network: &str,
) {
    let boot = c
        .volume_create_from_image(&ImageVolumeCreate {
            name: format!("{name}-boot"),
            size_gb: 10,
            url: "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img"
                .into(),
        })
        .await
        .unwrap();
    let ci = c
        .cloudinit_create(&format!("{name}-cloudinit"), user_data, meta_data)
        .await
        .unwrap();
    c.register(&Register {
        vm_name: name.into(),
        spec: spec(1, 1024),
        volume_ids: vec![boot, ci],
        network_ids: vec![network.into()],
        nic_macs: vec![],
    })
    .await
    .unwrap();
}

pub(crate) async fn network(c: &AtomosClient) -> String {
    c.network_create(&NetworkCreate {
        name: "nodes".into(),
        cidr: "192.170.5.1/24".into(),
        dhcp_start: Some("192.170.5.100".into()),
        dhcp_end: Some("192.170.5.200".into()),
    })
    .await
    .unwrap()
    .id
}

pub(crate) async fn next_call(rx: &mut mpsc::UnboundedReceiver<Call>) -> Call {
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("a phone-home call within 5 s")
        .expect("server running")
}

/// No call arrives within `wait`.
pub(crate) async fn quiet(rx: &mut mpsc::UnboundedReceiver<Call>, wait: Duration) {
    if let Ok(call) = tokio::time::timeout(wait, rx.recv()).await {
        panic!("unexpected phone-home call: {call:?}");
    }
}

#[tokio::test]
async fn a_vm_boots_leases_an_address_and_phones_home_once() {
    let (base, mut calls) = phone_home_server(0).await;
    let sim = sim(Duration::from_millis(300)).await;
    let host = sim.host("small").unwrap();
    let c = client(&sim, "small");
    let net = network(&c).await;
    let instance = "0190a6f4-0000-7000-8000-00000000beef";
    let (user_data, meta_data) = seed(
        "web-1",
        instance,
        &format!("{base}/v1/vms/{instance}/phone-home"),
        10,
    );
    create_vm(&c, "web-1", &user_data, &meta_data, &net).await;

    let starting = c.vm_by_name("web-1").await.unwrap().unwrap();
    assert_eq!((starting.state, starting.ipv4), (VmState::Starting, None));
    let vm = wait_running(&c, "web-1").await;
    let ip = vm.ipv4.unwrap();
    assert_eq!(
        ip,
        Ipv4Addr::new(192, 170, 5, 100),
        "first address of the range"
    );

    let call = next_call(&mut calls).await;
    assert_eq!(call.id, instance);
    assert_eq!(
        call.form.get("instance_id").map(String::as_str),
        Some(instance)
    );
    assert_eq!(call.form.get("hostname").map(String::as_str), Some("web-1"));
    assert_eq!(call.form.len(), 2, "only the posted keys: {:?}", call.form);
    eventually("the inventory to record the phone home", || async {
        host.inventory().vms[0].phoned_home
    })
    .await;
    let inv = host.inventory();
    assert_eq!(
        inv.vms[0].phone_home_url.as_deref(),
        Some(format!("{base}/v1/vms/{instance}/phone-home").as_str())
    );

    // cloud-init phones home once per instance, not on every boot.
    host.set_boot_time(Duration::from_millis(20));
    c.reboot(&vm.id).await.unwrap();
    wait_running(&c, "web-1").await;
    quiet(&mut calls, Duration::from_millis(200)).await;
}

#[tokio::test]
async fn phone_home_waits_for_the_boot_even_across_a_stop() {
    let (base, mut calls) = phone_home_server(0).await;
    let sim = sim(Duration::from_secs(600)).await;
    let host = sim.host("small").unwrap();
    let c = client(&sim, "small");
    let net = network(&c).await;
    let (user_data, meta_data) = seed(
        "slow",
        "i-slow",
        &format!("{base}/v1/vms/slow/phone-home"),
        3,
    );
    create_vm(&c, "slow", &user_data, &meta_data, &net).await;
    quiet(&mut calls, Duration::from_millis(100)).await;

    // Stopped before it booted: shortening the boot does not make it call.
    let vm = c.vm_by_name("slow").await.unwrap().unwrap();
    c.stop(&vm.id).await.unwrap();
    host.set_boot_time(Duration::from_millis(20));
    quiet(&mut calls, Duration::from_millis(100)).await;
    // Started again, it boots and calls.
    c.start(&vm.id).await.unwrap();
    let call = next_call(&mut calls).await;
    assert_eq!(call.form["instance_id"], "i-slow");
    assert_eq!(wait_running(&c, "slow").await.state, VmState::Running);
}

#[tokio::test]
async fn phone_home_retries_then_gives_up() {
    let (base, mut calls) = phone_home_server(2).await;
    let sim = sim(Duration::from_millis(20)).await;
    let host = sim.host("small").unwrap();
    let c = client(&sim, "small");
    let net = network(&c).await;

    // Two failures, then an answer: three calls, recorded as phoned home.
    let (ud, md) = seed(
        "retry",
        "i-retry",
        &format!("{base}/v1/vms/retry/phone-home"),
        5,
    );
    create_vm(&c, "retry", &ud, &md, &net).await;
    for _ in 0..3 {
        assert_eq!(next_call(&mut calls).await.id, "retry");
    }
    eventually("phoned_home", || async {
        host.inventory()
            .vms
            .iter()
            .any(|v| v.name == "retry" && v.phoned_home)
    })
    .await;

    // A target that always fails: `tries` attempts, then the guest gives up.
    let (failing, mut refusals) = phone_home_server(u32::MAX).await;
    let (ud, md) = seed(
        "lonely",
        "i-lonely",
        &format!("{failing}/v1/vms/lonely/phone-home"),
        2,
    );
    create_vm(&c, "lonely", &ud, &md, &net).await;
    let lonely = wait_running(&c, "lonely").await;
    assert_eq!(lonely.ipv4, Some(Ipv4Addr::new(192, 170, 5, 101)));
    for _ in 0..2 {
        assert_eq!(next_call(&mut refusals).await.id, "lonely");
    }
    quiet(&mut refusals, Duration::from_millis(300)).await;
    quiet(&mut calls, Duration::ZERO).await;
    let inv = host.inventory();
    let lonely = inv.vms.iter().find(|v| v.name == "lonely").unwrap();
    assert!(!lonely.phoned_home);
}

#[tokio::test]
async fn user_data_without_phone_home_makes_no_call() {
    let (_base, mut calls) = phone_home_server(0).await;
    let sim = sim(Duration::from_millis(20)).await;
    let c = client(&sim, "small");
    let net = network(&c).await;
    create_vm(
        &c,
        "quiet",
        "#cloud-config\nhostname: quiet\n",
        "instance-id: q\n",
        &net,
    )
    .await;
    wait_running(&c, "quiet").await;
    quiet(&mut calls, Duration::from_millis(100)).await;
    let inv = sim.host("small").unwrap().inventory();
    assert_eq!(inv.vms[0].phone_home_url, None);
}
