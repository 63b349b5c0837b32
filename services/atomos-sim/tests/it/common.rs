//! Shared helpers: a small fleet, clients, specs and a bounded wait for boot.

use atomos_driver::{AtomosClient, ClientOptions, PciDevice, Vm, VmSpec, VmState};
use atomos_sim::{HostConfig, SimConfig, Simulator, dev_hosts};
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

/// Two hosts: `small` (4 cores, 8 GiB, 100 GB, no GPU, no ECC) and `gpu`
/// (the dev fleet's first host, with P4000s and ECC).
pub async fn sim(boot: Duration) -> Simulator {
    start(boot, None).await.expect("simulator starts")
}

/// [`sim`]'s fleet, keeping its state in `state` when given.
pub async fn start(boot: Duration, state: Option<PathBuf>) -> std::io::Result<Simulator> {
    let gpu = HostConfig {
        name: "gpu".into(),
        ..dev_hosts()[0].clone()
    };
    let small = HostConfig {
        name: "small".into(),
        cores: 4,
        ram_mib: 8192,
        disk_gb: 100,
        gpus: vec![],
        ecc: false,
        ..dev_hosts()[2].clone()
    };
    atomos_sim::start(SimConfig {
        hosts: vec![small, gpu],
        boot_time: boot,
        bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
        state,
    })
    .await
}

pub fn opts() -> ClientOptions {
    ClientOptions {
        timeout: Duration::from_secs(2),
        retries: 3,
        concurrency: 4,
    }
}

pub fn client_with(sim: &Simulator, host: &str, opts: ClientOptions) -> AtomosClient {
    let target = sim.host(host).expect("host exists").target().clone();
    AtomosClient::new(target, opts).expect("client builds")
}

pub fn client(sim: &Simulator, host: &str) -> AtomosClient {
    client_with(sim, host, opts())
}

pub fn spec(slots: u32, ram_mib: u64) -> VmSpec {
    VmSpec {
        slots,
        overprovision: 1,
        allow_smt: false,
        archs: vec!["X86_64".into()],
        flags: vec!["sse2".into()],
        min_frequency_ghz: None,
        ram_mib,
        require_ecc: false,
        pci: vec![],
        os_family: "linux".into(),
        os_flavour: "ubuntu".into(),
    }
}

pub fn p4000(quantity: u32) -> PciDevice {
    PciDevice {
        vendor: "10de".into(),
        model: "1bb1".into(),
        quantity,
    }
}

/// Polls `/status` until `name` runs with an IPv4; bounded to ~2 s.
pub async fn wait_running(client: &AtomosClient, name: &str) -> Vm {
    for _ in 0..200 {
        let vm = client
            .vm_by_name(name)
            .await
            .expect("status")
            .expect("vm listed");
        if vm.state == VmState::Running && vm.ipv4.is_some() {
            return vm;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{name} did not reach running with an IPv4");
}

/// A register request for `name` with `spec(slots, ram_mib)` and no volumes.
pub fn register(name: &str, slots: u32, ram_mib: u64) -> atomos_driver::Register {
    atomos_driver::Register {
        vm_name: name.into(),
        spec: spec(slots, ram_mib),
        volume_ids: vec![],
        network_ids: vec![],
        nic_macs: vec![],
    }
}

/// Polls `check` every 10 ms until it holds; panics after ~3 s.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..300 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

/// One request to the control endpoint: status and JSON body.
pub async fn control(
    sim: &Simulator,
    method: reqwest::Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let mut req = reqwest::Client::new()
        .request(method, format!("{}{path}", sim.control_url()))
        .timeout(Duration::from_secs(10));
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.expect("control endpoint answers");
    let status = resp.status().as_u16();
    let body = resp.json().await.expect("control endpoint answers JSON");
    (status, body)
}
