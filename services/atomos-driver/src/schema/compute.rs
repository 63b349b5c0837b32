//! Compute (matcher) daemon JSON: specfile, register, status, canallocate, templates, backups.

use super::PciEntry;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `misc` of the specfile: the guest OS, values from Elemento's `iso.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Misc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_family: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_flavour: Option<String>,
}

/// The hardware request ("specfile") of `/canallocate`; `/register` flattens it.
/// Every field defaults on input so the simulator can name what is missing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SpecFile {
    #[serde(default)]
    pub slots: u32,
    #[serde(default)]
    pub overprovision: u32,
    #[serde(rename = "allowSMT", default)]
    pub allow_smt: bool,
    #[serde(default)]
    pub archs: Vec<String>,
    #[serde(default)]
    pub flags: Vec<String>,
    /// GHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_frequency: Option<f64>,
    /// MiB on requests (GiB in `/status`, see [`ReqJson::ramsize`]).
    #[serde(default)]
    pub ramsize: u64,
    #[serde(rename = "reqECC", default)]
    pub req_ecc: bool,
    #[serde(default)]
    pub pci: Vec<PciEntry>,
    #[serde(default)]
    pub misc: Misc,
}

/// `info` of a register body (2025+ form).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RegisterInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_name: Option<String>,
}

/// `{"vid": ...}` in a register body's `volumes`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VolumeRef {
    #[serde(alias = "volumeID", alias = "volume_id")]
    pub vid: String,
}

/// `{"network_uid": ...}` in a register body's `networks`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkRef {
    pub network_uid: String,
    /// The NIC's MAC, chosen by the client (as the kOps provider does, to
    /// match the guest's network configuration); AtomOS picks one without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// `POST /register`: the specfile plus name, volumes and networks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RegisterBody {
    #[serde(flatten)]
    pub spec: SpecFile,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<RegisterInfo>,
    /// The 2023 form of the name (docs/atomos.md); read, never sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_name: Option<String>,
    #[serde(default)]
    pub volumes: Vec<VolumeRef>,
    #[serde(default)]
    pub networks: Vec<NetworkRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netdevs: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_address: Option<String>,
}

/// `price` of a quote.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Price {
    #[serde(default)]
    pub hour: f64,
    #[serde(default)]
    pub month: f64,
    #[serde(default)]
    pub unit: String,
}

/// One element of `mesos` in the canallocate answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MesosQuote {
    #[serde(default)]
    pub provider: String,
    #[serde(default)]
    pub region: String,
    #[serde(default)]
    pub price: Price,
}

/// `POST /canallocate` answer: `{"mesos": [...]}`, or the mock's `{"canallocate": bool}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CanAllocateResponse {
    #[serde(default)]
    pub mesos: Vec<MesosQuote>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canallocate: Option<bool>,
}

/// `{"local_index": "<uniqueID>"}` for unregister/start/stop/reboot; the mock
/// also reads `vm_uid`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LocalIndex {
    #[serde(alias = "vm_uid")]
    pub local_index: String,
}

/// `POST /volume/attach` and `/volume/detach`: a volume on the VM's host
/// attached to (or detached from) the VM (meson's shape: the upstream body
/// is undocumented; `local_index` as the power routes, `volume_id` as the
/// storage routes).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VolumeAttachBody {
    #[serde(alias = "vm_uid")]
    pub local_index: String,
    #[serde(alias = "vid", alias = "volumeID")]
    pub volume_id: String,
}

/// `POST /network/attach` and `/network/detach`: a NIC on one of the VM's
/// host's networks (meson's shape: the upstream body is undocumented;
/// `local_index` as the power routes, the network as a register body's
/// `networks` entry, its `mac` ignored by a detach).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkAttachBody {
    #[serde(alias = "vm_uid")]
    pub local_index: String,
    #[serde(flatten)]
    pub network: NetworkRef,
}

/// `POST /update`: a stopped VM's vCPUs (`slots`) and RAM (`ramsize`,
/// MiB as in the specfile), each kept when absent (meson's shape: the
/// upstream body is undocumented).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VmUpdateBody {
    #[serde(alias = "vm_uid")]
    pub local_index: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramsize: Option<u64>,
}

/// `network_config`: inside `req_json` (GUI) or at the top level (thesis).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// Null while the guest boots.
    #[serde(default)]
    pub ipv4: Option<String>,
}

/// `req_json` of a `/status` element: the spec as the daemon stored it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReqJson {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overprovision: Option<u32>,
    #[serde(rename = "allowSMT", default, skip_serializing_if = "Option::is_none")]
    pub allow_smt: Option<bool>,
    /// A single string here (`X86_64`; the mock writes `x86_64`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    #[serde(default)]
    pub flags: Vec<String>,
    /// **GiB** in this answer, possibly fractional (docs/atomos.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramsize: Option<f64>,
    #[serde(rename = "reqECC", default, skip_serializing_if = "Option::is_none")]
    pub req_ecc: Option<bool>,
    #[serde(default)]
    pub volumes: Vec<super::storage::VolumeObject>,
    /// Shape unconfirmed on the real daemons, so kept raw.
    #[serde(default)]
    pub pcidevs: Vec<Value>,
    #[serde(default)]
    pub netdevs: Vec<Value>,
    /// `os_family` and `os_flavour`, flat here (a request nests them in `misc`).
    #[serde(flatten)]
    pub os: Misc,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_date: Option<String>,
    /// libvirt word: `running`, `shut off`, `paused` (the mock's form of the state; docs/atomos.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub states: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_config: Option<NetworkConfig>,
    /// Present when the VM runs on a public provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesos: Option<Value>,
}

/// One element of `GET /status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VmStatus {
    #[serde(rename = "uniqueID")]
    pub unique_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serverurl: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_type: Option<String>,
    /// Thesis form of the state (`starting`, `running`, `off`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Thesis form of the network block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_config: Option<NetworkConfig>,
    #[serde(default)]
    pub req_json: ReqJson,
}

/// `info` of a template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TemplateInfo {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
}

/// `cpu` of a template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TemplateCpu {
    #[serde(default)]
    pub slots: u32,
    #[serde(default)]
    pub overprovision: u32,
    #[serde(rename = "allowSMT", default)]
    pub allow_smt: bool,
    #[serde(default)]
    pub archs: Vec<String>,
    #[serde(default)]
    pub flags: Vec<String>,
}

/// `ram` of a template; `ramsize` in MiB like every request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TemplateRam {
    #[serde(default)]
    pub ramsize: u64,
    #[serde(rename = "reqECC", default)]
    pub req_ecc: bool,
}

/// One element of `GET /templates`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TemplateWire {
    #[serde(default)]
    pub info: TemplateInfo,
    #[serde(default)]
    pub cpu: TemplateCpu,
    #[serde(default)]
    pub ram: TemplateRam,
    #[serde(default)]
    pub pci: Vec<PciEntry>,
}

/// `POST /backup`: a crash-consistent copy of every volume VM
/// `local_index` has attached but its cloud-init ISO (meson's shape beyond
/// the answer's `backup_id`; docs/atomos.md). The client may choose
/// `backup_id`, so that a retried call finds the backup the first made.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BackupCreateBody {
    #[serde(alias = "vm_uid")]
    pub local_index: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// One volume's copy in a backup object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BackupVolumeObject {
    /// The source volume's id (32 hex), the copy's handle in a restore.
    #[serde(default, alias = "volumeID", alias = "vid")]
    pub volume_id: String,
    #[serde(default)]
    pub name: String,
    /// GB, as in volume objects (a value above 1048576 is bytes).
    #[serde(default)]
    pub size: f64,
    /// sha256 (hex) standing for the copy's bytes, when the host tells it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
}

/// A backup as `POST /backup` answers it and `GET /backups` lists it.
/// Only `backup_id` is confirmed; the rest is meson's design, so every
/// other field may be missing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BackupObject {
    pub backup_id: String,
    /// The VM's `uniqueID`; the VM may be gone since.
    #[serde(default, alias = "vm_uid")]
    pub local_index: String,
    #[serde(default)]
    pub vm_name: String,
    #[serde(default)]
    pub name: String,
    /// The host's clock when the copy was taken: RFC 3339 (the GUI's
    /// `M/D/YYYY, HH:MM:SS`, UTC, is also read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_date: Option<String>,
    /// GB, the sum of the copies'.
    #[serde(default)]
    pub size: f64,
    #[serde(default)]
    pub volumes: Vec<BackupVolumeObject>,
}

/// `GET /backups` and `GET /backups/search`: a bare array, or wrapped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BackupList {
    Bare(Vec<BackupObject>),
    Wrapped { backups: Vec<BackupObject> },
}

impl BackupList {
    pub fn into_vec(self) -> Vec<BackupObject> {
        match self {
            BackupList::Bare(v) | BackupList::Wrapped { backups: v } => v,
        }
    }
}

/// `{"backup_id": ...}` for `DELETE /backups`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BackupIdBody {
    pub backup_id: String,
}

/// One pair of `POST /backup/restore`: the copy of volume `from` (a
/// `volume_id` of the backup) written into volume `into` of the host.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BackupRestoreVolume {
    pub from: String,
    pub into: String,
}

/// `POST /backup/restore`: in place (each `into` its own `from`) or into
/// other volumes, such as a new VM's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BackupRestoreBody {
    pub backup_id: String,
    #[serde(default)]
    pub volumes: Vec<BackupRestoreVolume>,
}

/// One restored volume in the answer of `POST /backup/restore`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BackupRestoredVolume {
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub into: String,
    /// The target's size after the restore, GB.
    #[serde(default)]
    pub size: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
}

/// The answer of `POST /backup/restore` (the driver reads nothing of it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BackupRestoreResponse {
    #[serde(default)]
    pub backup_id: String,
    #[serde(default)]
    pub volumes: Vec<BackupRestoredVolume>,
}

/// A console tunnel (`porttunnel/vncWebSocket`) as `POST` answers it, `GET
/// .../{instance_id}` shows it and `GET` lists it. The routes are
/// Elemento's; the bodies are meson's design (docs/atomos.md), so every
/// field but `instance_id` may be missing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConsoleObject {
    /// The tunnel's id, chosen by the host.
    #[serde(alias = "tunnel_id", alias = "id")]
    pub instance_id: String,
    /// The VM's `uniqueID`.
    #[serde(default, alias = "vm_uid")]
    pub local_index: String,
    #[serde(default)]
    pub vm_name: String,
    /// Where a client connects: `ws://` (or `wss://`) on the host's side.
    #[serde(default, alias = "url", alias = "websocket_url")]
    pub ws_url: String,
    /// The tunnel's port (a number, or its digits in a string).
    #[serde(
        default,
        deserialize_with = "lenient_port",
        skip_serializing_if = "Option::is_none"
    )]
    pub port: Option<u16>,
    /// `open` while it listens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// WebSocket clients connected now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<u32>,
    /// When it was opened, by the host's clock (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_date: Option<String>,
}

/// A port as a number or as digits in a string; anything else is none.
fn lenient_port<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u16>, D::Error> {
    Ok(match Option::<Value>::deserialize(d)? {
        Some(Value::Number(n)) => n.as_u64().and_then(|p| u16::try_from(p).ok()),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    })
}

/// `GET /porttunnel/vncWebSocket`: a bare array, or wrapped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ConsoleList {
    Bare(Vec<ConsoleObject>),
    Wrapped { tunnels: Vec<ConsoleObject> },
}

impl ConsoleList {
    pub fn into_vec(self) -> Vec<ConsoleObject> {
        match self {
            ConsoleList::Bare(v) | ConsoleList::Wrapped { tunnels: v } => v,
        }
    }
}

/// `{"instance_id": ...}` for `DELETE /porttunnel/vncWebSocket/stop`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConsoleIdBody {
    pub instance_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::PciObject;
    use serde_json::json;

    /// Register body as the 2025 GUI/hackathon send it (docs/atomos.md).
    #[test]
    fn register_body_gui_form_round_trips() {
        let fixture = json!({
            "slots": 2, "overprovision": 2, "allowSMT": false,
            "archs": ["X86_64"], "flags": ["sse2"], "min_frequency": 2.5,
            "ramsize": 2048, "reqECC": false,
            "pci": [{"vendor": "10de", "model": "24b0", "quantity": 1}],
            "misc": {"os_family": "linux", "os_flavour": "ubuntu"},
            "info": {"vm_name": "web-1"},
            "volumes": [{"vid": "a812966242ac4c1e9f0b3e2d7c6a5b40"}],
            "networks": [{"network_uid": "n-1"}]
        });
        let body: RegisterBody = serde_json::from_value(fixture.clone()).unwrap();
        assert_eq!(body.spec.ramsize, 2048);
        assert!(body.vm_name.is_none());
        assert_eq!(
            body.info.as_ref().unwrap().vm_name.as_deref(),
            Some("web-1")
        );
        assert_eq!(
            body.spec.pci,
            vec![PciEntry::Object(PciObject {
                vendor: "10de".into(),
                model: "24b0".into(),
                quantity: Some(1)
            })]
        );
        assert_eq!(serde_json::to_value(&body).unwrap(), fixture);
    }

    /// Older form: top-level `vm_name`, pci as strings, thesis `has_network` ignored.
    #[test]
    fn register_body_legacy_form_parses() {
        let body: RegisterBody = serde_json::from_value(json!({
            "vm_name": "old", "slots": 1, "ramsize": 512, "pci": ["10de:1bb1"],
            "volumes": [{"volumeID": "ab"}], "has_network": true
        }))
        .unwrap();
        assert_eq!(body.vm_name.as_deref(), Some("old"));
        assert_eq!(body.spec.pci, vec![PciEntry::Text("10de:1bb1".into())]);
        assert_eq!(body.volumes[0].vid, "ab");
    }

    /// `/status` element with the GUI's `req_json.network_config` and the mock's `states`.
    #[test]
    fn status_element_parses_both_forms() {
        let gui: Vec<VmStatus> = serde_json::from_value(json!([{
            "uniqueID": "6f1c1b1e-8a4e-4a57-9a53-0d7b8f0f3c11",
            "serverurl": "https://192.168.1.10",
            "req_json": {
                "vm_name": "web-1", "slots": 2, "overprovision": 2, "allowSMT": false,
                "arch": "X86_64", "flags": ["sse2"], "ramsize": 2, "reqECC": false,
                "volumes": [{"volumeID": "a8", "name": "web-1-boot", "size": 50,
                             "bootable": true}],
                "pcidevs": [], "netdevs": [], "os_family": "linux", "os_flavour": "ubuntu",
                "creation_date": "3/14/2025, 10:00:00",
                "states": "running",
                "network_config": {"ipv4": "10.0.0.5"}
            }
        }]))
        .unwrap();
        let vm = &gui[0];
        assert_eq!(vm.req_json.ramsize, Some(2.0));
        assert_eq!(vm.req_json.states.as_deref(), Some("running"));
        assert_eq!(
            vm.req_json
                .network_config
                .as_ref()
                .and_then(|n| n.ipv4.as_deref()),
            Some("10.0.0.5")
        );
        assert_eq!(vm.req_json.volumes[0].volume_id, "a8");
        assert_eq!(vm.req_json.os.os_flavour.as_deref(), Some("ubuntu"));
        // Written flat, as the daemons write it.
        let back = serde_json::to_value(&vm.req_json).unwrap();
        assert_eq!(
            (&back["os_family"], &back["os_flavour"]),
            (&json!("linux"), &json!("ubuntu"))
        );
        assert!(
            back.get("os").is_none() && back.get("misc").is_none(),
            "{back}"
        );

        let thesis: VmStatus = serde_json::from_value(json!({
            "uniqueID": "u", "status": "starting",
            "network_config": {"name": "default", "mac": "52:54:00:00:00:01", "ipv4": null},
            "req_json": {"vm_name": "x", "ramsize": 0.5}
        }))
        .unwrap();
        assert_eq!(thesis.status.as_deref(), Some("starting"));
        assert_eq!(thesis.network_config.unwrap().ipv4, None);
    }

    #[test]
    fn canallocate_answers_parse() {
        let real: CanAllocateResponse = serde_json::from_value(json!({
            "mesos": [{"provider": "ovh", "region": "eu-west",
                       "price": {"hour": 0.05, "month": 36.5, "unit": "EUR"}}]
        }))
        .unwrap();
        assert_eq!(real.mesos[0].price.unit, "EUR");
        let mock: CanAllocateResponse =
            serde_json::from_value(json!({"canallocate": true})).unwrap();
        assert!(mock.mesos.is_empty());
        assert_eq!(mock.canallocate, Some(true));
    }

    /// Template shape of `elemento-vm-templates` (Argon).
    #[test]
    fn template_parses() {
        let t: TemplateWire = serde_json::from_value(json!({
            "info": {"name": "Argon", "description": "decent CPU power"},
            "cpu": {"slots": 4, "overprovision": 2, "allowSMT": false,
                    "archs": ["X86_64"], "flags": ["sse2", "avx2"]},
            "ram": {"ramsize": 4096, "reqECC": false},
            "pci": [{"vendor": "10de", "model": "1bb1", "quantity": 1}]
        }))
        .unwrap();
        assert_eq!(t.cpu.slots, 4);
        assert_eq!(t.ram.ramsize, 4096);
        assert_eq!(t.pci.len(), 1);
    }

    #[test]
    fn local_index_accepts_mock_alias() {
        let a: LocalIndex = serde_json::from_value(json!({"vm_uid": "x"})).unwrap();
        assert_eq!(a.local_index, "x");
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            json!({"local_index": "x"})
        );
    }

    #[test]
    fn backup_objects_round_trip_and_tolerate_missing_and_extra_fields() {
        let fixture = json!({
            "backup_id": "b-1", "local_index": "6f1c1b1e-8a4e-4a57-9a53-0d7b8f0f3c11",
            "vm_name": "web", "name": "nightly", "creation_date": "2026-01-02T03:04:05.678Z",
            "size": 11.0,
            "volumes": [
                {"volume_id": "a8", "name": "web-boot", "size": 10.0, "content_hash": "ab"},
                {"volume_id": "c9", "name": "web-data0", "size": 1.0, "content_hash": "cd"}
            ]
        });
        let b: BackupObject = serde_json::from_value(fixture.clone()).unwrap();
        assert_eq!(b.volumes[1].volume_id, "c9");
        assert_eq!(serde_json::to_value(&b).unwrap(), fixture);
        // The one confirmed answer: `{"backup_id"}` alone, plus fields
        // unknown here.
        let lean: BackupObject =
            serde_json::from_value(json!({"backup_id": "b-2", "status": "done"})).unwrap();
        assert_eq!(
            lean,
            BackupObject {
                backup_id: "b-2".into(),
                ..BackupObject::default()
            }
        );
        let other: BackupObject = serde_json::from_value(json!({
            "backup_id": "b-3", "vm_uid": "v", "volumes": [{"volumeID": "x", "extra": 1}]
        }))
        .unwrap();
        assert_eq!(
            (
                other.local_index.as_str(),
                other.volumes[0].volume_id.as_str()
            ),
            ("v", "x")
        );
        assert_eq!(other.volumes[0].content_hash, None);
        for list in [
            json!([fixture.clone()]),
            json!({"backups": [fixture.clone()]}),
        ] {
            let list: BackupList = serde_json::from_value(list).unwrap();
            assert_eq!(list.into_vec(), vec![b.clone()]);
        }
    }

    #[test]
    fn backup_bodies_have_meson_shapes() {
        let create = BackupCreateBody {
            local_index: "v".into(),
            backup_id: Some("b".into()),
            name: None,
        };
        assert_eq!(
            serde_json::to_value(&create).unwrap(),
            json!({"local_index": "v", "backup_id": "b"})
        );
        let read: BackupCreateBody = serde_json::from_value(json!({"vm_uid": "v"})).unwrap();
        assert_eq!((read.local_index.as_str(), read.backup_id), ("v", None));
        let restore = BackupRestoreBody {
            backup_id: "b".into(),
            volumes: vec![BackupRestoreVolume {
                from: "a8".into(),
                into: "f0".into(),
            }],
        };
        assert_eq!(
            serde_json::to_value(&restore).unwrap(),
            json!({"backup_id": "b", "volumes": [{"from": "a8", "into": "f0"}]})
        );
        assert_eq!(
            serde_json::to_value(BackupIdBody {
                backup_id: "b".into()
            })
            .unwrap(),
            json!({"backup_id": "b"})
        );
        let answer: BackupRestoreResponse = serde_json::from_value(json!({})).unwrap();
        assert!(answer.volumes.is_empty());
    }

    #[test]
    fn console_objects_are_read_leniently() {
        let fixture = json!({
            "instance_id": "t-1", "local_index": "v-1", "vm_name": "web",
            "ws_url": "ws://127.0.0.1:40000/vnc/t-1", "port": 40000, "status": "open",
            "sessions": 2, "creation_date": "2026-01-02T03:04:05.678Z"
        });
        let c: ConsoleObject = serde_json::from_value(fixture.clone()).unwrap();
        assert_eq!((c.port, c.sessions), (Some(40000), Some(2)));
        assert_eq!(serde_json::to_value(&c).unwrap(), fixture);
        let lean: ConsoleObject =
            serde_json::from_value(json!({"id": "t-2", "url": "wss://h/x", "port": "59441"}))
                .unwrap();
        assert_eq!(
            (lean.instance_id.as_str(), lean.ws_url.as_str(), lean.port),
            ("t-2", "wss://h/x", Some(59441))
        );
        let odd: ConsoleObject =
            serde_json::from_value(json!({"instance_id": "t", "port": 70000})).unwrap();
        assert_eq!(odd.port, None);
        for list in [json!([fixture.clone()]), json!({"tunnels": [fixture]})] {
            let list: ConsoleList = serde_json::from_value(list).unwrap();
            assert_eq!(list.into_vec(), vec![c.clone()]);
        }
        assert_eq!(
            serde_json::to_value(ConsoleIdBody {
                instance_id: "t".into()
            })
            .unwrap(),
            json!({"instance_id": "t"})
        );
    }
}
