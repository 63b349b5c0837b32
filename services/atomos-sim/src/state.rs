//! What a host holds: its VMs, volumes, networks, port forwards, backups and files, and the power
//! and demand records behind them, as the host keeps them in memory and
//! its state file ([`crate::store`]) holds them. It knows nothing of the
//! host's behaviour ([`crate::host`]) or faults ([`crate::faults`]), which
//! both build on it.

use atomos_driver::schema::compute::SpecFile;
use atomos_driver::{PciDevice, VmState, pci_from_wire};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Locks a mutex, recovering from poisoning: every mutation below leaves the
/// state consistent before it can panic, so a panicked handler must not take
/// the whole host down with it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A VM as the host keeps it (and its state file holds it).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct VmRec {
    pub id: String,
    pub name: String,
    pub demand: Demand,
    /// The host arch chosen among the requested ones.
    pub arch: String,
    pub volume_ids: Vec<String>,
    pub network_ids: Vec<String>,
    pub created: chrono::DateTime<chrono::Utc>,
    pub power: Power,
    /// Assigned at register, shown once the guest has booted; kept while
    /// the VM exists, like a libvirt DHCP lease.
    pub ipv4: Ipv4Addr,
    /// The network whose DHCP range `ipv4` comes from; `None` for the host's
    /// own address block.
    pub ip_network: Option<String>,
    /// Shut off by a crash rather than by `/stop`; cleared by `/start`.
    pub crashed: bool,
    /// Where the guest's cloud-init posts once booted, from its user-data.
    pub phone_home_url: Option<String>,
    /// The call still to make; taken when the guest first runs.
    pub phone_home: Option<PhoneHome>,
    /// The phone-home call got a 2xx.
    pub phoned_home: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "SavedPower", from = "SavedPower")]
pub(crate) enum Power {
    /// Powered on at `since`; running once the boot (or the shorter reboot)
    /// has taken its time.
    On {
        since: Instant,
        reboot: bool,
    },
    Off,
}

/// [`Power`] in a state file: the wall-clock time the VM powered on, so
/// that a VM booting when the simulator stopped keeps booting after a
/// restart, and a running one keeps running.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum SavedPower {
    On {
        since: chrono::DateTime<chrono::Utc>,
        reboot: bool,
    },
    Off,
}

impl From<Power> for SavedPower {
    fn from(p: Power) -> SavedPower {
        match p {
            Power::On { since, reboot } => SavedPower::On {
                since: to_wall(since),
                reboot,
            },
            Power::Off => SavedPower::Off,
        }
    }
}

impl From<SavedPower> for Power {
    fn from(p: SavedPower) -> Power {
        match p {
            SavedPower::On { since, reboot } => Power::On {
                since: from_wall(since),
                reboot,
            },
            SavedPower::Off => Power::Off,
        }
    }
}

/// Both clocks read once per process: instants convert to wall-clock times
/// and back through this one pair, so a time read back from a state file
/// converts to the same instant, and saving it again writes the same bytes.
static CLOCKS: LazyLock<(Instant, chrono::DateTime<chrono::Utc>)> =
    LazyLock::new(|| (Instant::now(), chrono::Utc::now()));

pub(crate) fn to_wall(at: Instant) -> chrono::DateTime<chrono::Utc> {
    let (i0, w0) = *CLOCKS;
    let delta = match at.checked_duration_since(i0) {
        Some(after) => chrono::TimeDelta::from_std(after).unwrap_or(chrono::TimeDelta::MAX),
        None => -chrono::TimeDelta::from_std(i0 - at).unwrap_or(chrono::TimeDelta::MAX),
    };
    w0.checked_add_signed(delta).unwrap_or(w0)
}

fn from_wall(at: chrono::DateTime<chrono::Utc>) -> Instant {
    let (i0, w0) = *CLOCKS;
    let delta = at.signed_duration_since(w0);
    if let Ok(ahead) = delta.to_std() {
        return i0.checked_add(ahead).unwrap_or(i0);
    }
    // Earlier than the monotonic clock can express (the machine booted
    // since): the latest instant that is still at least as long ago works
    // as well for a boot of seconds.
    let mut ago = delta.abs().to_std().unwrap_or(Duration::MAX);
    loop {
        if let Some(at) = i0.checked_sub(ago) {
            return at;
        }
        ago /= 2;
    }
}

/// A reboot skips firmware and first-boot setup: it takes this fraction of a boot.
const REBOOT_FRACTION: u32 = 4;

impl Power {
    pub fn on(now: Instant) -> Power {
        Power::On {
            since: now,
            reboot: false,
        }
    }

    /// Time left until the guest runs: `None` when off, zero once running.
    pub fn boot_left(&self, now: Instant, boot_time: Duration) -> Option<Duration> {
        match *self {
            Power::Off => None,
            Power::On { since, reboot } => {
                let needed = if reboot {
                    boot_time / REBOOT_FRACTION
                } else {
                    boot_time
                };
                Some(needed.saturating_sub(now.saturating_duration_since(since)))
            }
        }
    }
}

impl VmRec {
    /// State and address now. Computed from timestamps, so no background task
    /// is needed to finish a boot.
    pub fn observe(&self, now: Instant, boot_time: Duration) -> (VmState, Option<Ipv4Addr>) {
        match self.power.boot_left(now, boot_time) {
            None => (VmState::Off, None),
            Some(left) if left.is_zero() => (VmState::Running, Some(self.ipv4)),
            Some(_) => (VmState::Starting, None),
        }
    }
}

/// A normalized, validated hardware request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Demand {
    pub slots: u32,
    pub overprovision: u32,
    pub allow_smt: bool,
    pub archs: Vec<String>,
    pub flags: Vec<String>,
    /// Lowest acceptable CPU clock, GHz.
    pub min_frequency_ghz: Option<f64>,
    pub ram_mib: u64,
    pub ecc: bool,
    pub pci: Vec<PciDevice>,
    pub os_family: Option<String>,
    pub os_flavour: Option<String>,
}

impl Demand {
    pub fn from_wire(spec: SpecFile) -> Result<Demand, String> {
        if spec.slots == 0 {
            return Err("slots must be at least 1".into());
        }
        if spec.ramsize == 0 {
            return Err("ramsize (MiB) must be at least 1".into());
        }
        let pci: Vec<PciDevice> = spec.pci.into_iter().map(pci_from_wire).collect();
        if let Some(bad) = pci
            .iter()
            .find(|p| p.vendor.is_empty() || p.model.is_empty())
        {
            return Err(format!("pci device {bad:?} needs a vendor and a model"));
        }
        if let Some(f) = spec.min_frequency
            && !(f.is_finite() && f >= 0.0)
        {
            return Err(format!(
                "min_frequency {f} must be a non-negative number of GHz"
            ));
        }
        Ok(Demand {
            slots: spec.slots,
            // 0 is what a client that omits the field sends; it means no sharing.
            overprovision: spec.overprovision.max(1),
            allow_smt: spec.allow_smt,
            archs: spec.archs,
            flags: spec.flags,
            min_frequency_ghz: spec.min_frequency.filter(|f| *f > 0.0),
            ram_mib: spec.ramsize,
            ecc: spec.req_ecc,
            pci,
            os_family: spec.misc.os_family,
            os_flavour: spec.misc.os_flavour,
        })
    }

    /// Physical cores taken: `overprovision` VMs may share a core.
    pub fn cores(&self) -> f64 {
        f64::from(self.slots) / f64::from(self.overprovision)
    }

    pub(crate) fn gpu_count(&self) -> u32 {
        self.pci.iter().map(|p| p.quantity).sum()
    }
}

/// A cloud-init file as uploaded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimFile {
    pub name: String,
    pub content: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimVolume {
    /// 32 lowercase hex characters.
    pub id: String,
    pub name: String,
    pub size_gb: f64,
    pub bootable: bool,
    pub readonly: bool,
    pub shareable: bool,
    pub private: bool,
    pub clonable: bool,
    pub cloudinit: bool,
    pub format: String,
    pub bus: String,
    pub alg: String,
    /// Image the volume was cloned from.
    pub url: Option<String>,
    /// Cloud-init uploads: how many the first upload announced, and those received.
    pub expected_files: u32,
    pub files: Vec<SimFile>,
    /// VMs this volume is attached to (filled in snapshots).
    pub attached_to: Vec<String>,
    /// sha256 (hex) standing for the volume's bytes: of what a `/create/url`
    /// downloaded, its source's for a clone, of a description of what the
    /// simulator does not hold (an empty disk, a cloud image it does not
    /// download, a cloud-init ISO's files). Tests compare them to prove
    /// bytes moved.
    #[serde(default)]
    pub content: String,
}

/// sha256 of `bytes`, lowercase hex.
pub fn content_hash(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    format!("{:x}", Sha256::digest(bytes))
}

impl SimVolume {
    /// A cloud-init volume still waiting for uploads cannot be used.
    pub fn is_complete(&self) -> bool {
        self.files.len() as u64 >= u64::from(self.expected_files)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimNetwork {
    pub id: String,
    pub name: String,
    pub cidr: String,
    pub mode: String,
    pub dhcp_start: Option<String>,
    pub dhcp_end: Option<String>,
}

/// A port forward: `protocol` `port` on the host to `target_port` of VM
/// `vm_id`. The simulator forwards for real, on loopback ([`crate::SimHost::serve_guest_port`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimPortForward {
    /// `forward_uid`, chosen by the client.
    pub id: String,
    /// `tcp` or `udp`.
    pub protocol: String,
    /// The host's port, bound on 127.0.0.1.
    pub port: u16,
    /// The target VM's `uniqueID`; the VM may be gone since.
    pub vm_id: String,
    /// Its name when the forward was made.
    pub vm_name: String,
    /// The guest's port.
    pub target_port: u16,
}

impl SimPortForward {
    /// `20000/tcp`.
    pub(crate) fn label(&self) -> String {
        format!("{}/{}", self.port, self.protocol)
    }
}

/// A backup of a VM ([`crate::SimHost`]'s `POST /backup`): a copy of each
/// volume the VM had attached but its cloud-init ISO, on the VM's host.
/// Independent of the volumes and of the VM, which may be gone since.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimBackup {
    /// `backup_id`, chosen by the client or else a dashed UUID.
    pub id: String,
    /// The VM's `uniqueID`.
    pub vm_id: String,
    /// Its name when the backup was taken.
    pub vm_name: String,
    pub name: String,
    /// The host's clock ([`crate::SimHost::wall_clock`]) when taken.
    pub created: chrono::DateTime<chrono::Utc>,
    /// The copies, in the VM's order of volumes.
    pub volumes: Vec<SimBackupVolume>,
}

impl SimBackup {
    /// GB, the copies' sum: what the backup takes of the host's disk.
    pub fn size_gb(&self) -> f64 {
        self.volumes.iter().map(|v| v.size_gb).sum()
    }
}

/// One volume's copy in a [`SimBackup`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimBackupVolume {
    /// The source volume's id, the copy's handle in a restore.
    pub volume_id: String,
    /// The source's name when the backup was taken.
    pub name: String,
    pub size_gb: f64,
    /// The source's [`SimVolume::content`] when the backup was taken: the
    /// bytes a restore writes back.
    pub content: String,
}

/// An open VM console tunnel (the compute daemon's
/// `porttunnel/vncWebSocket`): a WebSocket on loopback carrying the RFB
/// protocol of the VM's screen. Not kept in the state file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimConsole {
    /// `instance_id`, chosen by the host (a dashed UUID).
    pub id: String,
    /// The VM's `uniqueID`.
    pub vm_id: String,
    pub vm_name: String,
    /// The tunnel's port on 127.0.0.1.
    pub port: u16,
    /// `ws://127.0.0.1:<port>/vnc/<id>`.
    pub ws_url: String,
    /// The host's clock when opened.
    pub created: chrono::DateTime<chrono::Utc>,
    /// WebSocket sessions connected now.
    pub sessions: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimVm {
    /// `uniqueID`.
    pub id: String,
    pub name: String,
    pub state: VmState,
    pub ipv4: Option<Ipv4Addr>,
    pub slots: u32,
    pub overprovision: u32,
    pub ram_mib: u64,
    pub pci: Vec<PciDevice>,
    pub volume_ids: Vec<String>,
    pub network_ids: Vec<String>,
    /// Shut off by an injected crash (and not started since).
    #[serde(default)]
    pub crashed: bool,
    /// The cloud-init phone-home URL, when the user-data has one.
    #[serde(default)]
    pub phone_home_url: Option<String>,
    /// The phone-home call was answered with a 2xx.
    #[serde(default)]
    pub phoned_home: bool,
    /// Console sessions (WebSocket clients of its tunnel) connected now.
    #[serde(default)]
    pub console_sessions: u32,
}

/// Snapshot of what a host holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    pub vms: Vec<SimVm>,
    pub volumes: Vec<SimVolume>,
    pub networks: Vec<SimNetwork>,
    #[serde(default)]
    pub port_forwards: Vec<SimPortForward>,
    #[serde(default)]
    pub backups: Vec<SimBackup>,
    /// Open console tunnels, oldest first.
    #[serde(default)]
    pub consoles: Vec<SimConsole>,
}

impl Inventory {
    pub fn is_empty(&self) -> bool {
        self.vms.is_empty()
            && self.volumes.is_empty()
            && self.networks.is_empty()
            && self.port_forwards.is_empty()
            && self.backups.is_empty()
            && self.consoles.is_empty()
    }
}

/// Everything the four daemons of a host share; what its state file holds.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct HostState {
    pub vms: Vec<VmRec>,
    pub volumes: Vec<SimVolume>,
    pub networks: Vec<SimNetwork>,
    /// Absent from the files of simulators that had no port forwards.
    #[serde(default)]
    pub port_forwards: Vec<SimPortForward>,
    /// Absent from the files of simulators that had no backups.
    #[serde(default)]
    pub backups: Vec<SimBackup>,
    /// Next VM address; never reused, so a stale address is never handed out twice.
    pub next_ip: u32,
    /// Who the auth daemon says is logged in.
    pub user: Option<String>,
    /// How many times each VM name was registered here (a register that
    /// succeeded): a VM made twice shows 2, even if the first is gone.
    #[serde(default)]
    pub registrations: BTreeMap<String, u32>,
}

impl Default for HostState {
    fn default() -> Self {
        HostState {
            vms: Vec::new(),
            volumes: Vec::new(),
            networks: Vec::new(),
            port_forwards: Vec::new(),
            backups: Vec::new(),
            next_ip: 0,
            registrations: BTreeMap::new(),
            // The real daemons are logged in by the desktop app before any
            // client shows up, so a fresh host is too.
            user: Some("sim".to_owned()),
        }
    }
}

impl HostState {
    pub fn vm_attached(&self, volume_id: &str) -> Option<&VmRec> {
        self.vms
            .iter()
            .find(|vm| vm.volume_ids.iter().any(|v| v == volume_id))
    }

    pub fn volume(&self, id: &str) -> Option<&SimVolume> {
        self.volumes.iter().find(|v| v.id == id)
    }

    /// GB taken on the host's disk: its volumes' and its backups'.
    pub(crate) fn used_disk_gb(&self) -> f64 {
        let volumes: f64 = self.volumes.iter().map(|v| v.size_gb).sum();
        let backups: f64 = self.backups.iter().map(SimBackup::size_gb).sum();
        volumes + backups
    }
}

/// What the guest's cloud-init `phone_home` module would post, and where.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct PhoneHome {
    pub url: String,
    /// Form fields in the order of the `post` list.
    pub form: Vec<(String, String)>,
    /// Attempts in all, 1..=10.
    pub tries: u32,
}
