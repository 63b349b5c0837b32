//! Conformance: one suite of driver calls, run against the simulator always and against a real AtomOS when `ATOMOS_CONFORMANCE_HOST` names one.
//!
//! Environment for the real run:
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `ATOMOS_CONFORMANCE_HOST` | IP or name of the daemons | unset: skipped |
//! | `ATOMOS_CONFORMANCE_PORTS` | `compute,storage,network,auth` | `17777,27777,37777,47777` |
//! | `ATOMOS_CONFORMANCE_USER`, `ATOMOS_CONFORMANCE_PASSWORD` | log in first | no login |
//! | `ATOMOS_CONFORMANCE_VOLUME_GB` | size of the volumes it creates | 1 |
//! | `ATOMOS_CONFORMANCE_CIDR` | the test network, gateway/prefix | `192.168.213.1/24` |
//! | `ATOMOS_CONFORMANCE_BOOT_TIMEOUT_S` | how long a VM may take to run | 600 |
//! | `ATOMOS_CONFORMANCE_IMAGE_URL` | a file the host can download (`/create/url`), at most `..._VOLUME_GB` | unset: that case is skipped |
//! | `ATOMOS_CONFORMANCE_FORWARD_PORT` | a free TCP port of the host for the port-forward case | 20022 |
//!
//! Everything it creates is named `meson-conformance-<run>-...` (a port
//! forward or a backup by its id) and is deleted after every case, passed
//! or failed.

use atomos_driver::{
    AtomosClient, ClientOptions, DriverError, ErrorKind, NetworkCreate, PortForwardCreate, Ports,
    Register, Target, UrlVolumeCreate, VmSpec, VmState, VolumeCreate,
};
use atomos_sim::{SimConfig, Simulator};
use std::future::Future;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a case runs against.
struct Endpoint {
    label: String,
    client: AtomosClient,
    /// `meson-conformance-<run>-`: the only names this suite touches.
    prefix: String,
    real: bool,
    volume_gb: u32,
    cidr: String,
    boot_timeout: Duration,
    poll: Duration,
    credentials: Option<(String, String)>,
    /// A file the host can download, and its bytes when known (the
    /// simulator's own file server).
    image: Option<(String, Option<Vec<u8>>)>,
    /// A TCP port of the host free to forward.
    forward_port: u16,
    /// Keeps the simulated host alive for the run.
    sim: Option<Simulator>,
}

fn run_prefix() -> String {
    format!("meson-conformance-{:08x}-", rand::random::<u32>())
}

impl Endpoint {
    async fn simulator() -> Endpoint {
        let host = atomos_sim::HostConfig {
            name: "conformance".into(),
            ..atomos_sim::dev_hosts()[0].clone()
        };
        let sim = atomos_sim::start(SimConfig {
            hosts: vec![host],
            boot_time: Duration::from_millis(50),
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            state: None,
        })
        .await
        .expect("simulator starts");
        let client = AtomosClient::new(
            sim.targets()[0].clone(),
            ClientOptions {
                timeout: Duration::from_secs(2),
                retries: 2,
                concurrency: 4,
            },
        )
        .expect("client");
        let image = (serve_image().await, Some(IMAGE.to_vec()));
        // The simulator forwards for real on loopback: a port free there.
        let forward_port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        Endpoint {
            label: "the simulator".into(),
            client,
            prefix: run_prefix(),
            real: false,
            volume_gb: 1,
            cidr: "192.168.213.1/24".into(),
            boot_timeout: Duration::from_secs(5),
            poll: Duration::from_millis(10),
            credentials: Some(("conformance".into(), "secret".into())),
            image: Some(image),
            forward_port,
            sim: Some(sim),
        }
    }

    /// `None` when `ATOMOS_CONFORMANCE_HOST` is unset; an error for a
    /// variable that is set but unusable.
    fn real_from_env() -> Option<Result<Endpoint, String>> {
        let host = std::env::var("ATOMOS_CONFORMANCE_HOST")
            .ok()
            .filter(|h| !h.trim().is_empty())?;
        Some(Endpoint::real(host.trim().to_owned()))
    }

    fn real(host: String) -> Result<Endpoint, String> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let ports = match var("ATOMOS_CONFORMANCE_PORTS") {
            None => Ports::default(),
            Some(raw) => {
                let p: Vec<u16> = raw
                    .split(',')
                    .map(|x| x.trim().parse::<u16>())
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("ATOMOS_CONFORMANCE_PORTS={raw:?}: {e}"))?;
                let [compute, storage, network, auth] = p[..] else {
                    return Err(format!(
                        "ATOMOS_CONFORMANCE_PORTS={raw:?}: want compute,storage,network,auth"
                    ));
                };
                Ports {
                    compute,
                    storage,
                    network,
                    auth,
                }
            }
        };
        let number = |name: &str, default: u64| -> Result<u64, String> {
            var(name).map_or(Ok(default), |v| {
                v.trim().parse().map_err(|e| format!("{name}={v:?}: {e}"))
            })
        };
        let volume_gb = u32::try_from(number("ATOMOS_CONFORMANCE_VOLUME_GB", 1)?)
            .map_err(|e| format!("ATOMOS_CONFORMANCE_VOLUME_GB: {e}"))?;
        let boot_timeout = Duration::from_secs(number("ATOMOS_CONFORMANCE_BOOT_TIMEOUT_S", 600)?);
        let forward_port = u16::try_from(number("ATOMOS_CONFORMANCE_FORWARD_PORT", 20022)?)
            .map_err(|e| format!("ATOMOS_CONFORMANCE_FORWARD_PORT: {e}"))?;
        let credentials = match (
            var("ATOMOS_CONFORMANCE_USER"),
            var("ATOMOS_CONFORMANCE_PASSWORD"),
        ) {
            (Some(u), Some(p)) => Some((u, p)),
            (None, None) => None,
            _ => {
                return Err(
                    "set both ATOMOS_CONFORMANCE_USER and ATOMOS_CONFORMANCE_PASSWORD, or neither"
                        .into(),
                );
            }
        };
        let target = Target {
            name: "conformance".into(),
            host: host.clone(),
            ports,
            provider: "atomos".into(),
            region: "conformance".into(),
            continent: "unknown".into(),
        };
        let client =
            AtomosClient::new(target, ClientOptions::default()).map_err(|e| e.to_string())?;
        Ok(Endpoint {
            label: format!("the AtomOS at {host}"),
            client,
            prefix: run_prefix(),
            real: true,
            volume_gb,
            cidr: var("ATOMOS_CONFORMANCE_CIDR").unwrap_or_else(|| "192.168.213.1/24".into()),
            boot_timeout,
            poll: Duration::from_secs(2),
            credentials,
            image: var("ATOMOS_CONFORMANCE_IMAGE_URL").map(|url| (url, None)),
            forward_port,
            sim: None,
        })
    }

    fn name(&self, what: &str) -> String {
        format!("{}{what}", self.prefix)
    }

    /// Polls `vm`'s state until `want` holds; panics after the boot timeout.
    async fn wait_vm(&self, name: &str, what: &str, want: impl Fn(&atomos_driver::Vm) -> bool) {
        let deadline = Instant::now() + self.boot_timeout;
        loop {
            let vm = self
                .client
                .vm_by_name(name)
                .await
                .expect("status")
                .unwrap_or_else(|| panic!("{name} is listed"));
            if want(&vm) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{name} not {what} within {:?}: {vm:?}",
                self.boot_timeout
            );
            tokio::time::sleep(self.poll).await;
        }
    }

    /// Deletes everything named with this run's prefix: port forwards first
    /// (they name VMs), backups, VMs (they hold volumes and networks), then
    /// volumes and networks. Returns what could not be deleted.
    async fn sweep(&self) -> Vec<String> {
        let mut left = Vec::new();
        let mine = |name: &str| name.starts_with(&self.prefix);
        match self.client.backups().await {
            Ok(backups) => {
                for b in backups.into_iter().filter(|b| mine(&b.id)) {
                    if let Err(e) = self.client.backup_delete(&b.id).await
                        && !e.is_not_found()
                    {
                        left.push(format!("backup {} ({}): {e}", b.id, b.vm_name));
                    }
                }
            }
            // A host without the route has no backups to sweep.
            Err(e) if e.is_not_found() => {}
            Err(e) => left.push(format!("listing backups: {e}")),
        }
        match self.client.port_forwards().await {
            Ok(forwards) => {
                for f in forwards.into_iter().filter(|f| mine(&f.id)) {
                    if let Err(e) = self.client.port_forward_delete(&f.id).await
                        && !e.is_not_found()
                    {
                        left.push(format!("port forward {} ({}): {e}", f.id, f.port));
                    }
                }
            }
            // A host without the route has no forwards to sweep.
            Err(e) if e.is_not_found() => {}
            Err(e) => left.push(format!("listing port forwards: {e}")),
        }
        match self.client.vms().await {
            Ok(vms) => {
                for vm in vms.into_iter().filter(|v| mine(&v.name)) {
                    if let Err(e) = self.client.unregister(&vm.id).await
                        && !e.is_not_found()
                    {
                        left.push(format!("VM {} ({}): {e}", vm.name, vm.id));
                    }
                }
            }
            Err(e) => left.push(format!("listing VMs: {e}")),
        }
        match self.client.volumes().await {
            Ok(volumes) => {
                for v in volumes.into_iter().filter(|v| mine(&v.name)) {
                    if let Err(e) = self.client.volume_destroy(&v.id).await
                        && !e.is_not_found()
                    {
                        left.push(format!("volume {} ({}): {e}", v.name, v.id));
                    }
                }
            }
            Err(e) => left.push(format!("listing volumes: {e}")),
        }
        match self.client.networks().await {
            Ok(networks) => {
                for n in networks.into_iter().filter(|n| mine(&n.name)) {
                    if let Err(e) = self.client.network_delete(&n.id).await
                        && !e.is_not_found()
                    {
                        left.push(format!("network {} ({}): {e}", n.name, n.id));
                    }
                }
            }
            Err(e) => left.push(format!("listing networks: {e}")),
        }
        left
    }
}

/// What the simulator's file server serves at `/disk.img`.
const IMAGE: &[u8] = b"not really qcow2, but bytes all the same\n";

/// A file server on a loopback port for the simulated host to download
/// from: [`IMAGE`] at `/disk.img`, 404 elsewhere. Raw HTTP/1.1 over tokio
/// (this crate has no server framework). Returns the image's URL.
async fn serve_image() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("file server binds");
    let addr = listener.local_addr().expect("file server address");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let found = head.starts_with(b"GET /disk.img ");
                let (status, body) = if found {
                    ("200 OK", IMAGE)
                } else {
                    ("404 Not Found", &b"not found"[..])
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(body).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    format!("http://{addr}/disk.img")
}

fn small_spec() -> VmSpec {
    VmSpec {
        slots: 1,
        overprovision: 1,
        allow_smt: false,
        archs: vec!["X86_64".into()],
        flags: vec![],
        min_frequency_ghz: None,
        ram_mib: 1024,
        require_ecc: false,
        pci: vec![],
        os_family: "linux".into(),
        os_flavour: "ubuntu".into(),
    }
}

fn assert_kind(result: Result<impl std::fmt::Debug, DriverError>, kind: ErrorKind, what: &str) {
    match result {
        Err(e) => assert_eq!(e.kind, kind, "{what}: {e}"),
        Ok(v) => panic!("{what}: expected {kind:?}, got {v:?}"),
    }
}

// The cases. Each creates only prefixed names and may leave them behind on
// failure: the runner sweeps after every case.

async fn daemons_answer_and_auth(ep: Arc<Endpoint>) {
    let c = &ep.client;
    if let Some((user, password)) = &ep.credentials {
        assert!(c.login(user, password).await.unwrap(), "login accepted");
        let status = c.auth_status().await.unwrap();
        assert!(status.authenticated);
        assert_eq!(status.username.as_deref(), Some(user.as_str()));
    } else {
        c.auth_status().await.unwrap();
    }
    // Every daemon answers its list route.
    c.vms().await.unwrap();
    c.volumes().await.unwrap();
    c.networks().await.unwrap();
}

async fn templates_parse(ep: Arc<Endpoint>) {
    let templates = ep.client.templates().await.unwrap();
    for t in &templates {
        assert!(!t.name.is_empty(), "{t:?}");
        assert!(t.slots > 0 && t.ram_mib > 0, "{t:?}");
    }
    if !ep.real {
        assert!(!templates.is_empty());
    }
}

async fn canallocate_quotes(ep: Arc<Endpoint>) {
    match ep.client.can_allocate(&small_spec()).await {
        Ok(quotes) => {
            for q in &quotes {
                assert!(q.price_hour >= 0.0 && q.price_month >= 0.0, "{q:?}");
                assert!(!q.currency.is_empty(), "{q:?}");
            }
            if !ep.real {
                assert_eq!(quotes.len(), 1);
            }
        }
        // A busy real endpoint may refuse; that is an answer too.
        Err(e) if ep.real && e.is_capacity() => {}
        Err(e) => panic!("canallocate: {e}"),
    }
}

async fn volume_lifecycle(ep: Arc<Endpoint>) {
    let c = &ep.client;
    c.volume_can_create(ep.volume_gb).await.unwrap();
    let name = ep.name("data");
    let id = c
        .volume_create(&VolumeCreate {
            name: name.clone(),
            size_gb: ep.volume_gb,
            bootable: false,
            readonly: false,
            shareable: false,
            private: true,
        })
        .await
        .unwrap();
    assert!(!id.is_empty());
    let info = c.volume_info(&id).await.unwrap();
    assert_eq!(info.id, id);
    assert_eq!(info.name, name);
    assert!(
        (info.size_gb - f64::from(ep.volume_gb)).abs() < 0.01,
        "{info:?}"
    );
    assert!(!info.cloudinit);
    assert!(c.volumes().await.unwrap().iter().any(|v| v.id == id));
    c.volume_destroy(&id).await.unwrap();
    assert_kind(
        c.volume_info(&id).await,
        ErrorKind::NotFound,
        "info after destroy",
    );
    assert_kind(
        c.volume_destroy(&id).await,
        ErrorKind::NotFound,
        "destroy twice",
    );
}

/// The simulator's content hash of volume `id`; `None` on a real host.
fn sim_content(ep: &Endpoint, id: &str) -> Option<String> {
    let sim = ep.sim.as_ref()?;
    sim.hosts()
        .iter()
        .flat_map(|h| h.inventory().volumes)
        .find(|v| v.id == id)
        .map(|v| v.content)
}

async fn volume_clone(ep: Arc<Endpoint>) {
    let c = &ep.client;
    let source = c
        .volume_create(&VolumeCreate {
            name: ep.name("clone-source"),
            size_gb: ep.volume_gb,
            bootable: true,
            readonly: false,
            shareable: false,
            private: true,
        })
        .await
        .unwrap();
    let name = ep.name("clone");
    let copy = c.volume_clone(&source, &name).await.unwrap();
    assert_ne!(copy, source);
    let info = c.volume_info(&copy).await.unwrap();
    assert_eq!(info.name, name);
    assert!(
        (info.size_gb - f64::from(ep.volume_gb)).abs() < 0.01,
        "{info:?}"
    );
    assert!(info.bootable, "{info:?}");
    if !ep.real {
        assert_eq!(sim_content(&ep, &copy), sim_content(&ep, &source));
    }
    // The copy is its own volume.
    c.volume_destroy(&source).await.unwrap();
    assert_eq!(c.volume_info(&copy).await.unwrap().id, copy);
    assert_kind(
        c.volume_clone(&source, &ep.name("clone-again")).await,
        ErrorKind::NotFound,
        "clone of a destroyed volume",
    );
    c.volume_destroy(&copy).await.unwrap();
}

async fn volume_from_url(ep: Arc<Endpoint>) {
    let Some((url, bytes)) = &ep.image else {
        let _ = std::io::stderr()
            .write_all(b"conformance: volume from URL skipped: set ATOMOS_CONFORMANCE_IMAGE_URL\n");
        return;
    };
    let c = &ep.client;
    let req = UrlVolumeCreate {
        name: ep.name("download"),
        url: url.clone(),
        size_gb: ep.volume_gb,
        sha256: None,
    };
    let made = c.volume_create_from_url(&req).await.unwrap();
    let info = c.volume_info(&made.id).await.unwrap();
    assert_eq!(info.name, req.name);
    assert!(info.bootable, "{info:?}");
    if let Some(bytes) = bytes {
        let sum = atomos_sim::content_hash(bytes);
        assert_eq!(made.sha256.as_deref(), Some(sum.as_str()));
        assert_eq!(sim_content(&ep, &made.id), Some(sum));
        // The file server's 404 is the request's fault, in the host's words.
        let missing = UrlVolumeCreate {
            name: ep.name("download-missing"),
            url: url.replace("/disk.img", "/missing.img"),
            ..req.clone()
        };
        match c.volume_create_from_url(&missing).await {
            Err(e) => {
                assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
                assert!(e.message.contains("[CreateImageDownloadFailed]"), "{e}");
            }
            Ok(v) => panic!("a missing file was downloaded: {v:?}"),
        }
    }
    c.volume_destroy(&made.id).await.unwrap();
}

async fn cloudinit_upload(ep: Arc<Endpoint>) {
    let c = &ep.client;
    let name = ep.name("ci");
    let id = c
        .cloudinit_create(
            &name,
            "#cloud-config\nhostname: conformance\n",
            "instance-id: conformance\n",
        )
        .await
        .unwrap();
    let info = c.volume_info(&id).await.unwrap();
    assert_eq!(info.name, name);
    assert!(info.cloudinit, "{info:?}");
    c.volume_destroy(&id).await.unwrap();
}

async fn network_lifecycle(ep: Arc<Endpoint>) {
    let c = &ep.client;
    let (start, end) = dhcp_range(&ep.cidr);
    let req = NetworkCreate {
        name: ep.name("net"),
        cidr: ep.cidr.clone(),
        dhcp_start: Some(start),
        dhcp_end: Some(end),
    };
    let net = c.network_create(&req).await.unwrap();
    assert_eq!(net.name, req.name);
    assert_eq!(c.network_info(&net.id).await.unwrap().id, net.id);
    assert!(c.networks().await.unwrap().iter().any(|n| n.id == net.id));
    if !ep.real {
        // Unconfirmed on real daemons (docs/atomos.md), so only checked here.
        assert_kind(
            c.network_create(&req).await,
            ErrorKind::AlreadyExists,
            "duplicate name",
        );
    }
    c.network_delete(&net.id).await.unwrap();
    assert_kind(
        c.network_info(&net.id).await,
        ErrorKind::NotFound,
        "info after delete",
    );
}

/// `.10`-`.20` of the CIDR's /24 (the conformance network is small).
fn dhcp_range(cidr: &str) -> (String, String) {
    let gateway: Ipv4Addr = cidr
        .split('/')
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(Ipv4Addr::new(192, 168, 213, 1));
    let [a, b, c, _] = gateway.octets();
    (
        Ipv4Addr::new(a, b, c, 10).to_string(),
        Ipv4Addr::new(a, b, c, 20).to_string(),
    )
}

async fn vm_lifecycle(ep: Arc<Endpoint>) {
    let c = &ep.client;
    let data = c
        .volume_create(&VolumeCreate {
            name: ep.name("vm-data"),
            size_gb: ep.volume_gb,
            bootable: true,
            readonly: false,
            shareable: false,
            private: true,
        })
        .await
        .unwrap();
    let ci = c
        .cloudinit_create(
            &ep.name("vm-cloudinit"),
            "#cloud-config\n",
            "instance-id: conformance-vm\n",
        )
        .await
        .unwrap();
    let name = ep.name("vm");
    let req = Register {
        vm_name: name.clone(),
        spec: small_spec(),
        volume_ids: vec![data.clone(), ci.clone()],
        network_ids: vec![],
        nic_macs: vec![],
    };
    c.register(&req).await.unwrap();
    let vm = c.vm_by_name(&name).await.unwrap().expect("found by name");
    assert!(!vm.id.is_empty());
    assert_eq!(vm.volume_ids, vec![data.clone(), ci.clone()]);
    if !ep.real {
        // Unconfirmed on real daemons, and a second VM there would cost money.
        assert_kind(
            c.register(&req).await,
            ErrorKind::AlreadyExists,
            "same name",
        );
    }
    ep.wait_vm(&name, "running", |v| v.state == VmState::Running)
        .await;
    if !ep.real {
        // A real guest without an OS image never leases an address.
        ep.wait_vm(&name, "addressed", |v| v.ipv4.is_some()).await;
        // Not tried on a real host: it would break the VM if allowed.
        assert_kind(
            c.volume_destroy(&data).await,
            ErrorKind::Invalid,
            "destroying an attached volume",
        );
    }

    c.stop(&vm.id).await.unwrap();
    ep.wait_vm(&name, "off", |v| v.state == VmState::Off).await;
    c.start(&vm.id).await.unwrap();
    ep.wait_vm(&name, "running again", |v| v.state == VmState::Running)
        .await;
    c.reboot(&vm.id).await.unwrap();
    ep.wait_vm(&name, "running after reboot", |v| {
        v.state == VmState::Running
    })
    .await;

    c.unregister(&vm.id).await.unwrap();
    assert!(c.vm_by_name(&name).await.unwrap().is_none());
    assert_kind(
        c.unregister(&vm.id).await,
        ErrorKind::NotFound,
        "unregister twice",
    );
    c.volume_destroy(&data).await.unwrap();
    c.volume_destroy(&ci).await.unwrap();
}

/// A living VM's day two: a volume hot-plugged and unplugged, grown; a NIC
/// plugged and unplugged; the VM resized while off. The daemons document
/// none of these bodies (docs/atomos.md), so a real host is the judge.
async fn vm_day_two(ep: Arc<Endpoint>) {
    let c = &ep.client;
    let volume = |name: &str| VolumeCreate {
        name: ep.name(name),
        size_gb: ep.volume_gb,
        bootable: false,
        readonly: false,
        shareable: false,
        private: true,
    };
    let boot = c
        .volume_create(&VolumeCreate {
            bootable: true,
            ..volume("d2-boot")
        })
        .await
        .unwrap();
    let data = c.volume_create(&volume("d2-data")).await.unwrap();
    let name = ep.name("d2-vm");
    c.register(&Register {
        vm_name: name.clone(),
        spec: small_spec(),
        volume_ids: vec![boot.clone()],
        network_ids: vec![],
        nic_macs: vec![],
    })
    .await
    .unwrap();
    ep.wait_vm(&name, "running", |v| v.state == VmState::Running)
        .await;
    let vm = c.vm_by_name(&name).await.unwrap().expect("listed");

    c.volume_attach(&vm.id, &data).await.unwrap();
    ep.wait_vm(&name, "volume attached", |v| v.volume_ids.contains(&data))
        .await;
    c.volume_resize(&data, ep.volume_gb + 1).await.unwrap();
    let grown = c.volume_info(&data).await.unwrap().size_gb;
    assert!(
        (grown - f64::from(ep.volume_gb + 1)).abs() < 0.01,
        "{grown}"
    );
    c.volume_detach(&vm.id, &data).await.unwrap();
    ep.wait_vm(&name, "volume detached", |v| !v.volume_ids.contains(&data))
        .await;

    let (start, end) = dhcp_range(&ep.cidr);
    let net = c
        .network_create(&NetworkCreate {
            name: ep.name("d2-net"),
            cidr: ep.cidr.clone(),
            dhcp_start: Some(start),
            dhcp_end: Some(end),
        })
        .await
        .unwrap();
    c.network_attach(&vm.id, &net.id, "52:54:00:d2:00:01")
        .await
        .unwrap();
    ep.wait_vm(&name, "NIC plugged", |v| v.network_ids.contains(&net.id))
        .await;
    c.network_detach(&vm.id, &net.id).await.unwrap();
    ep.wait_vm(&name, "NIC unplugged", |v| !v.network_ids.contains(&net.id))
        .await;

    c.stop(&vm.id).await.unwrap();
    ep.wait_vm(&name, "off", |v| v.state == VmState::Off).await;
    c.vm_update(&vm.id, 2, 2048).await.unwrap();
    ep.wait_vm(&name, "resized", |v| v.slots == 2 && v.ram_mib == 2048)
        .await;

    c.unregister(&vm.id).await.unwrap();
    c.network_delete(&net.id).await.unwrap();
    c.volume_destroy(&data).await.unwrap();
    c.volume_destroy(&boot).await.unwrap();
}

/// A port forward to a VM, made with an id of the client's choosing,
/// listed and deleted.
async fn port_forward_lifecycle(ep: Arc<Endpoint>) {
    let c = &ep.client;
    let boot = c
        .volume_create(&VolumeCreate {
            name: ep.name("pf-boot"),
            size_gb: ep.volume_gb,
            bootable: true,
            readonly: false,
            shareable: false,
            private: true,
        })
        .await
        .unwrap();
    let name = ep.name("pf-vm");
    c.register(&Register {
        vm_name: name.clone(),
        spec: small_spec(),
        volume_ids: vec![boot.clone()],
        network_ids: vec![],
        nic_macs: vec![],
    })
    .await
    .unwrap();
    let vm = c.vm_by_name(&name).await.unwrap().expect("listed");
    let req = PortForwardCreate {
        id: ep.name("pf"),
        protocol: "tcp".into(),
        port: ep.forward_port,
        vm_id: vm.id.clone(),
        vm_name: name.clone(),
        target_port: 22,
    };
    let made = c.port_forward_create(&req).await.unwrap();
    assert_eq!(
        (
            &made.id,
            made.protocol.as_str(),
            made.port,
            &made.vm_id,
            made.target_port
        ),
        (&req.id, "tcp", req.port, &req.vm_id, 22),
        "{made:?}"
    );
    let listed = c.port_forwards().await.unwrap();
    assert!(listed.contains(&made), "{listed:?}");
    if !ep.real {
        // Unconfirmed on real daemons (the dashboard's fixtures only show
        // the shapes), so only checked here.
        assert_eq!(c.port_forward_create(&req).await.unwrap(), made, "a retry");
        assert_kind(
            c.port_forward_create(&PortForwardCreate {
                id: ep.name("pf-2"),
                ..req.clone()
            })
            .await,
            ErrorKind::AlreadyExists,
            "a port taken",
        );
    }
    c.port_forward_delete(&req.id).await.unwrap();
    let listed = c.port_forwards().await.unwrap();
    assert!(!listed.iter().any(|f| f.id == req.id), "{listed:?}");
    if !ep.real {
        assert_kind(
            c.port_forward_delete(&req.id).await,
            ErrorKind::NotFound,
            "delete twice",
        );
    }
    c.unregister(&vm.id).await.unwrap();
    c.volume_destroy(&boot).await.unwrap();
}

/// The simulated host holding volume `id`; `None` on a real host.
fn sim_host_of(ep: &Endpoint, id: &str) -> Option<atomos_sim::SimHost> {
    let sim = ep.sim.as_ref()?;
    sim.hosts()
        .into_iter()
        .find(|h| h.inventory().volumes.iter().any(|v| v.id == id))
}

/// A VM's backup, made with an id of the client's choosing, listed and
/// searched by VM, restored in place while the VM is off and into a fresh
/// volume, and deleted. Only `backup_id` is confirmed on real daemons
/// (docs/atomos.md); the simulator also shows the bytes moved.
async fn backup_lifecycle(ep: Arc<Endpoint>) {
    let c = &ep.client;
    let volume = |name: &str, bootable: bool| VolumeCreate {
        name: ep.name(name),
        size_gb: ep.volume_gb,
        bootable,
        readonly: false,
        shareable: false,
        private: true,
    };
    let boot = c.volume_create(&volume("bk-boot", true)).await.unwrap();
    let data = c.volume_create(&volume("bk-data", false)).await.unwrap();
    let name = ep.name("bk-vm");
    c.register(&Register {
        vm_name: name.clone(),
        spec: small_spec(),
        volume_ids: vec![boot.clone(), data.clone()],
        network_ids: vec![],
        nic_macs: vec![],
    })
    .await
    .unwrap();
    ep.wait_vm(&name, "running", |v| v.state == VmState::Running)
        .await;
    let vm = c.vm_by_name(&name).await.unwrap().expect("listed");
    let sim = sim_host_of(&ep, &boot);
    if let Some(host) = &sim {
        host.write_volume(&boot, b"before the backup").unwrap();
    }

    let id = ep.name("bk");
    let made = c.backup_create(&vm.id, &id, &id).await.unwrap();
    assert_eq!((&made.id, &made.vm_id), (&id, &vm.id), "{made:?}");
    let copied: Vec<&str> = made.volumes.iter().map(|v| v.volume_id.as_str()).collect();
    assert_eq!(copied, [boot.as_str(), data.as_str()], "{made:?}");
    assert!(made.created.is_some(), "{made:?}");
    assert!(c.backups().await.unwrap().contains(&made));
    assert_eq!(c.backups_of(&vm.id).await.unwrap(), vec![made.clone()]);
    let backed_up = sim_content(&ep, &boot);
    if !ep.real {
        assert_eq!(made.volumes[0].content_hash, backed_up);
        assert_eq!(
            c.backup_create(&vm.id, &id, &id).await.unwrap(),
            made,
            "a retry"
        );
        assert_kind(
            c.backup_restore(&id, &[(&boot, &boot)]).await,
            ErrorKind::Invalid,
            "a restore into a running VM",
        );
    }
    if let Some(host) = &sim {
        host.write_volume(&boot, b"after the backup").unwrap();
        assert_ne!(sim_content(&ep, &boot), backed_up);
    }

    c.stop(&vm.id).await.unwrap();
    ep.wait_vm(&name, "off", |v| v.state == VmState::Off).await;
    c.backup_restore(&id, &[(&boot, &boot), (&data, &data)])
        .await
        .unwrap();
    let fresh = c.volume_create(&volume("bk-fresh", true)).await.unwrap();
    c.backup_restore(&id, &[(&boot, &fresh)]).await.unwrap();
    if !ep.real {
        assert_eq!(sim_content(&ep, &boot), backed_up, "restored in place");
        assert_eq!(sim_content(&ep, &fresh), backed_up, "restored elsewhere");
        assert_kind(
            c.backup_restore(&id, &[("not-in-it", fresh.as_str())])
                .await,
            ErrorKind::Invalid,
            "a volume not in the backup",
        );
    }

    // A backup outlives its VM.
    c.unregister(&vm.id).await.unwrap();
    assert_eq!(c.backups_of(&vm.id).await.unwrap(), vec![made]);
    c.backup_delete(&id).await.unwrap();
    assert!(!c.backups().await.unwrap().iter().any(|b| b.id == id));
    if !ep.real {
        assert_kind(
            c.backup_delete(&id).await,
            ErrorKind::NotFound,
            "delete twice",
        );
    }
    for v in [&boot, &data, &fresh] {
        c.volume_destroy(v).await.unwrap();
    }
}

async fn errors_are_classified(ep: Arc<Endpoint>) {
    let c = &ep.client;
    let no_vm = "00000000-0000-4000-8000-000000000000";
    assert_kind(
        c.start(no_vm).await,
        ErrorKind::NotFound,
        "start unknown VM",
    );
    assert_kind(
        c.unregister(no_vm).await,
        ErrorKind::NotFound,
        "unregister unknown VM",
    );
    assert_kind(
        c.volume_info("0123456789abcdef0123456789abcdef").await,
        ErrorKind::NotFound,
        "info of unknown volume",
    );
    assert_kind(
        c.network_info("00000000-0000-4000-8000-000000000000").await,
        ErrorKind::NotFound,
        "info of unknown network",
    );
    let bad = Register {
        vm_name: format!("{}bad_name", ep.prefix),
        spec: small_spec(),
        volume_ids: vec![],
        network_ids: vec![],
        nic_macs: vec![],
    };
    assert_kind(
        c.register(&bad).await,
        ErrorKind::Invalid,
        "invalid VM name",
    );
}

type CaseFn = fn(Arc<Endpoint>) -> Pin<Box<dyn Future<Output = ()> + Send>>;

const CASES: &[(&str, CaseFn)] = &[
    ("daemons answer, auth", |ep| {
        Box::pin(daemons_answer_and_auth(ep))
    }),
    ("templates", |ep| Box::pin(templates_parse(ep))),
    ("canallocate", |ep| Box::pin(canallocate_quotes(ep))),
    ("volume lifecycle", |ep| Box::pin(volume_lifecycle(ep))),
    ("cloud-init upload", |ep| Box::pin(cloudinit_upload(ep))),
    ("volume clone", |ep| Box::pin(volume_clone(ep))),
    ("volume from URL", |ep| Box::pin(volume_from_url(ep))),
    ("network lifecycle", |ep| Box::pin(network_lifecycle(ep))),
    ("VM lifecycle", |ep| Box::pin(vm_lifecycle(ep))),
    ("VM day two", |ep| Box::pin(vm_day_two(ep))),
    ("port forwards", |ep| Box::pin(port_forward_lifecycle(ep))),
    ("backups", |ep| Box::pin(backup_lifecycle(ep))),
    ("error classes", |ep| Box::pin(errors_are_classified(ep))),
];

/// Runs every case against `ep`, sweeping after each one; fails with a
/// summary naming every failed case and anything left behind.
async fn run(ep: Endpoint) {
    let ep = Arc::new(ep);
    let mut failures = Vec::new();
    for (name, case) in CASES {
        // A task, so that a failed assertion is caught and the sweep runs.
        let outcome = tokio::spawn(case(ep.clone())).await;
        if let Err(e) = outcome {
            failures.push(format!("{name}: {e}"));
        }
        let left = ep.sweep().await;
        if !left.is_empty() {
            failures.push(format!("{name}: left behind {left:?}"));
        }
    }
    if let Some(sim) = &ep.sim {
        for host in sim.hosts() {
            assert!(host.inventory().is_empty(), "{:?}", host.inventory());
        }
    }
    assert!(
        failures.is_empty(),
        "conformance against {} failed:\n{}",
        ep.label,
        failures.join("\n")
    );
}

#[tokio::test]
async fn conformance_on_the_simulator() {
    run(Endpoint::simulator().await).await;
}

#[tokio::test]
async fn conformance_on_a_real_atomos() {
    match Endpoint::real_from_env() {
        None => {
            // Straight to stderr, past the test harness's capture, so the
            // reason shows in a normal `cargo test` run.
            let _ = std::io::stderr().write_all(
                b"conformance_on_a_real_atomos skipped: set ATOMOS_CONFORMANCE_HOST to run \
                  against a real AtomOS\n",
            );
        }
        Some(Err(e)) => panic!("conformance environment: {e}"),
        Some(Ok(ep)) => run(ep).await,
    }
}

#[test]
fn dhcp_range_follows_the_cidr() {
    assert_eq!(
        dhcp_range("10.1.2.1/24"),
        ("10.1.2.10".into(), "10.1.2.20".into())
    );
    assert_eq!(dhcp_range("junk").0, "192.168.213.10");
}
