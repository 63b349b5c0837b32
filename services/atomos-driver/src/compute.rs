//! Compute (matcher) daemon: allocation quotes, register/unregister, power, status, templates.

use crate::client::{AtomosClient, Call, Daemon};
use crate::error::{DriverError, ErrorKind};
use crate::schema::compute::{
    CanAllocateResponse, LocalIndex, Misc, NetworkAttachBody, NetworkRef, RegisterBody,
    RegisterInfo, SpecFile, TemplateWire, VmStatus, VmUpdateBody, VolumeAttachBody, VolumeRef,
};
use crate::schema::{PciEntry, PciObject};
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;

/// The hardware a VM asks for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VmSpec {
    /// vCPUs.
    pub slots: u32,
    /// How many VMs may share one core.
    pub overprovision: u32,
    pub allow_smt: bool,
    /// `X86_64`, ...
    pub archs: Vec<String>,
    /// CPU ISA extensions (`sse2`, `avx2`).
    pub flags: Vec<String>,
    pub min_frequency_ghz: Option<f64>,
    pub ram_mib: u64,
    pub require_ecc: bool,
    pub pci: Vec<PciDevice>,
    pub os_family: String,
    pub os_flavour: String,
}

/// PCI ids as lowercase hex strings (`10de`, `1bb1`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciDevice {
    pub vendor: String,
    pub model: String,
    pub quantity: u32,
}

/// A price offer from canallocate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Quote {
    pub provider: String,
    pub region: String,
    pub price_hour: f64,
    pub price_month: f64,
    pub currency: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Register {
    /// `^[a-zA-Z0-9-]+$`; the only handle on the VM until `/status` shows its id.
    pub vm_name: String,
    pub spec: VmSpec,
    pub volume_ids: Vec<String>,
    pub network_ids: Vec<String>,
    /// The MAC of the VM's NIC on each of `network_ids`, in the same order,
    /// so the guest's network-config can match it; empty lets AtomOS choose.
    pub nic_macs: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VmState {
    Starting,
    Running,
    Stopping,
    Off,
    Paused,
    /// A word we do not know, kept verbatim (empty when the daemon gave none).
    Unknown(String),
}

impl VmState {
    /// Maps both vocabularies: the thesis `status` field and libvirt's words
    /// in `req_json.states` (docs/atomos.md).
    pub fn parse(word: &str) -> VmState {
        match word.trim().to_ascii_lowercase().as_str() {
            "starting" | "initializing" | "booting" | "rebooting" => VmState::Starting,
            "running" | "active" => VmState::Running,
            "stopping" | "in shutdown" | "shutting down" | "deleting" => VmState::Stopping,
            "off" | "shut off" | "shutoff" | "shutdown" | "stopped" | "crashed" => VmState::Off,
            "paused" | "pmsuspended" | "suspended" => VmState::Paused,
            _ => VmState::Unknown(word.to_owned()),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Vm {
    /// `uniqueID` (dashed UUID).
    pub id: String,
    pub name: String,
    pub state: VmState,
    /// `None` while the guest boots or when stopped.
    pub ipv4: Option<Ipv4Addr>,
    pub slots: u32,
    pub ram_mib: u64,
    pub volume_ids: Vec<String>,
    /// The AtomOS networks its NICs are on (`netdevs[].network_uid`).
    pub network_ids: Vec<String>,
    pub server_url: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Template {
    pub name: String,
    pub description: String,
    pub slots: u32,
    pub overprovision: u32,
    pub allow_smt: bool,
    pub archs: Vec<String>,
    pub flags: Vec<String>,
    pub ram_mib: u64,
    pub require_ecc: bool,
    pub pci: Vec<PciDevice>,
}

impl AtomosClient {
    /// Asks whether the target can host `spec` and at what price. A host that
    /// cannot fit it answers non-2xx, reported as [`ErrorKind::Capacity`].
    pub async fn can_allocate(&self, spec: &VmSpec) -> Result<Vec<Quote>, DriverError> {
        let call = Call::post(Daemon::Compute, "/canallocate").safe();
        let reply = self
            .send_json(&call, &spec_to_wire(spec))
            .await
            .map_err(refusal_is_capacity)?;
        let answer: CanAllocateResponse = reply.json(&call.route)?;
        // The mock's `{"canallocate": false}` is a refusal with a 200.
        if answer.canallocate == Some(false) {
            return Err(DriverError::new(
                ErrorKind::Capacity,
                &call.route,
                Some(reply.status),
                "target cannot allocate the request",
            ));
        }
        Ok(answer.mesos.into_iter().map(quote_from_wire).collect())
    }

    /// Registers (creates and boots) a VM. The answer is opaque: find the VM
    /// with [`AtomosClient::vm_by_name`]. Never retried automatically.
    pub async fn register(&self, req: &Register) -> Result<(), DriverError> {
        let call = Call::post(Daemon::Compute, "/register");
        self.send_json(&call, &register_to_wire(req)).await?;
        Ok(())
    }

    pub async fn vms(&self) -> Result<Vec<Vm>, DriverError> {
        let rows: Vec<VmStatus> = self.get_json(Daemon::Compute, "/status").await?;
        Ok(rows.into_iter().map(vm_from_wire).collect())
    }

    pub async fn vm_by_name(&self, name: &str) -> Result<Option<Vm>, DriverError> {
        Ok(self.vms().await?.into_iter().find(|vm| vm.name == name))
    }

    /// Deletes the VM; its volumes stay and are destroyed separately.
    pub async fn unregister(&self, vm_id: &str) -> Result<(), DriverError> {
        self.vm_action("/unregister", vm_id).await
    }

    pub async fn start(&self, vm_id: &str) -> Result<(), DriverError> {
        self.vm_action("/start", vm_id).await
    }

    pub async fn stop(&self, vm_id: &str) -> Result<(), DriverError> {
        self.vm_action("/stop", vm_id).await
    }

    pub async fn reboot(&self, vm_id: &str) -> Result<(), DriverError> {
        self.vm_action("/reboot", vm_id).await
    }

    pub async fn templates(&self) -> Result<Vec<Template>, DriverError> {
        let rows: Vec<TemplateWire> = self.get_json(Daemon::Compute, "/templates").await?;
        Ok(rows.into_iter().map(template_from_wire).collect())
    }

    /// Changes a stopped VM's vCPUs and RAM (MiB); a running VM, or more
    /// than the host has free, is refused (`Invalid`, `Capacity`).
    pub async fn vm_update(
        &self,
        vm_id: &str,
        slots: u32,
        ram_mib: u64,
    ) -> Result<(), DriverError> {
        let call = Call::post(Daemon::Compute, "/update");
        let body = VmUpdateBody {
            local_index: vm_id.to_owned(),
            slots: Some(slots),
            ramsize: Some(ram_mib),
        };
        self.send_json(&call, &body).await?;
        Ok(())
    }

    /// Attaches a volume of this host to a VM, running or off; a volume
    /// attached elsewhere (unless shareable) or already on the VM is refused.
    pub async fn volume_attach(&self, vm_id: &str, volume_id: &str) -> Result<(), DriverError> {
        self.volume_action("/volume/attach", vm_id, volume_id).await
    }

    /// Detaches a volume from a VM; a VM's boot volume stays while it runs.
    pub async fn volume_detach(&self, vm_id: &str, volume_id: &str) -> Result<(), DriverError> {
        self.volume_action("/volume/detach", vm_id, volume_id).await
    }

    /// Plugs a NIC on one of this host's networks into a VM, running or
    /// off, with the MAC meson chose for it.
    pub async fn network_attach(
        &self,
        vm_id: &str,
        network_id: &str,
        mac: &str,
    ) -> Result<(), DriverError> {
        self.network_action("/network/attach", vm_id, network_id, Some(mac))
            .await
    }

    /// Unplugs a VM's NIC on a network.
    pub async fn network_detach(&self, vm_id: &str, network_id: &str) -> Result<(), DriverError> {
        self.network_action("/network/detach", vm_id, network_id, None)
            .await
    }

    async fn network_action(
        &self,
        path: &str,
        vm_id: &str,
        network_id: &str,
        mac: Option<&str>,
    ) -> Result<(), DriverError> {
        let call = Call::post(Daemon::Compute, path);
        let body = NetworkAttachBody {
            local_index: vm_id.to_owned(),
            network: NetworkRef {
                network_uid: network_id.to_owned(),
                mac: mac.map(str::to_owned),
            },
        };
        self.send_json(&call, &body).await?;
        Ok(())
    }

    async fn volume_action(
        &self,
        path: &str,
        vm_id: &str,
        volume_id: &str,
    ) -> Result<(), DriverError> {
        let call = Call::post(Daemon::Compute, path);
        let body = VolumeAttachBody {
            local_index: vm_id.to_owned(),
            volume_id: volume_id.to_owned(),
        };
        self.send_json(&call, &body).await?;
        Ok(())
    }

    async fn vm_action(&self, path: &str, vm_id: &str) -> Result<(), DriverError> {
        let call = Call::post(Daemon::Compute, path);
        self.send_json(
            &call,
            &LocalIndex {
                local_index: vm_id.to_owned(),
            },
        )
        .await?;
        Ok(())
    }
}

/// The GUI treats any refusal of canallocate as "cannot allocate", and the
/// real failure payload is unknown (docs/atomos.md), so client-side errors other than
/// auth and validation become capacity; 5xx stay transient.
pub(crate) fn refusal_is_capacity(mut err: DriverError) -> DriverError {
    if matches!(
        err.kind,
        ErrorKind::Invalid | ErrorKind::NotFound | ErrorKind::AlreadyExists
    ) && err
        .status
        .is_some_and(|s| (400..500).contains(&s) && s != 422)
    {
        err.kind = ErrorKind::Capacity;
    }
    err
}

fn spec_to_wire(spec: &VmSpec) -> SpecFile {
    SpecFile {
        slots: spec.slots,
        overprovision: spec.overprovision,
        allow_smt: spec.allow_smt,
        archs: spec.archs.clone(),
        flags: spec.flags.clone(),
        min_frequency: spec.min_frequency_ghz,
        ramsize: spec.ram_mib,
        req_ecc: spec.require_ecc,
        pci: spec
            .pci
            .iter()
            .map(|p| {
                PciEntry::Object(PciObject {
                    vendor: p.vendor.clone(),
                    model: p.model.clone(),
                    quantity: Some(p.quantity),
                })
            })
            .collect(),
        misc: Misc {
            os_family: Some(spec.os_family.clone()).filter(|s| !s.is_empty()),
            os_flavour: Some(spec.os_flavour.clone()).filter(|s| !s.is_empty()),
        },
    }
}

fn register_to_wire(req: &Register) -> RegisterBody {
    RegisterBody {
        spec: spec_to_wire(&req.spec),
        // The 2025+ form; the top-level `vm_name` is only read.
        info: Some(RegisterInfo {
            vm_name: Some(req.vm_name.clone()),
        }),
        vm_name: None,
        volumes: req
            .volume_ids
            .iter()
            .map(|id| VolumeRef { vid: id.clone() })
            .collect(),
        networks: req
            .network_ids
            .iter()
            .enumerate()
            .map(|(i, id)| NetworkRef {
                network_uid: id.clone(),
                mac: req.nic_macs.get(i).cloned(),
            })
            .collect(),
        netdevs: None,
        ip_address: None,
    }
}

fn quote_from_wire(q: crate::schema::compute::MesosQuote) -> Quote {
    Quote {
        provider: q.provider,
        region: q.region,
        price_hour: q.price.hour,
        price_month: q.price.month,
        currency: if q.price.unit.is_empty() {
            "EUR".to_owned()
        } else {
            q.price.unit
        },
    }
}

/// Accepts both PCI forms: objects, or `vendor:model[:quantity]` strings.
pub fn pci_from_wire(entry: PciEntry) -> PciDevice {
    match entry {
        PciEntry::Object(o) => PciDevice {
            vendor: o.vendor.to_ascii_lowercase(),
            model: o.model.to_ascii_lowercase(),
            quantity: o.quantity.unwrap_or(1),
        },
        PciEntry::Text(s) => {
            let mut parts = s.split(':');
            let vendor = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
            let model = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
            let quantity = parts
                .next()
                .and_then(|q| q.trim().parse().ok())
                .unwrap_or(1);
            PciDevice {
                vendor,
                model,
                quantity,
            }
        }
    }
}

/// `/status` reports RAM in GiB, possibly fractional (docs/atomos.md).
fn gib_to_mib(gib: f64) -> u64 {
    if gib.is_finite() && gib > 0.0 {
        (gib * 1024.0).round() as u64
    } else {
        0
    }
}

/// Tolerates a CIDR suffix (`10.0.0.5/24`) and garbage (-> `None`).
fn parse_ipv4(raw: &str) -> Option<Ipv4Addr> {
    raw.split('/')
        .next()
        .unwrap_or_default()
        .trim()
        .parse()
        .ok()
}

fn vm_from_wire(row: VmStatus) -> Vm {
    let req = row.req_json;
    // The thesis `status` is the richer vocabulary (it knows "starting"),
    // libvirt's `states` says "running" while the guest still boots.
    let state = match row.status.as_deref().or(req.states.as_deref()) {
        Some(word) => VmState::parse(word),
        None => VmState::Unknown(String::new()),
    };
    let ipv4 = req
        .network_config
        .as_ref()
        .or(row.network_config.as_ref())
        .and_then(|n| n.ipv4.as_deref())
        .and_then(parse_ipv4);
    Vm {
        id: row.unique_id,
        name: req.vm_name.unwrap_or_default(),
        state,
        ipv4,
        slots: req.slots.unwrap_or_default(),
        ram_mib: req.ramsize.map(gib_to_mib).unwrap_or_default(),
        volume_ids: req.volumes.into_iter().map(|v| v.volume_id).collect(),
        network_ids: req
            .netdevs
            .iter()
            .filter_map(|n| n.get("network_uid")?.as_str().map(str::to_owned))
            .collect(),
        server_url: row.serverurl,
    }
}

fn template_from_wire(t: TemplateWire) -> Template {
    Template {
        name: t.info.name,
        description: t.info.description,
        slots: t.cpu.slots,
        overprovision: t.cpu.overprovision,
        allow_smt: t.cpu.allow_smt,
        archs: t.cpu.archs,
        flags: t.cpu.flags,
        // Templates are request-shaped, so MiB.
        ram_mib: t.ram.ramsize,
        require_ecc: t.ram.req_ecc,
        pci: t.pci.into_iter().map(pci_from_wire).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> VmSpec {
        VmSpec {
            slots: 2,
            overprovision: 2,
            allow_smt: false,
            archs: vec!["X86_64".into()],
            flags: vec!["sse2".into()],
            min_frequency_ghz: None,
            ram_mib: 2048,
            require_ecc: false,
            pci: vec![PciDevice {
                vendor: "10de".into(),
                model: "1bb1".into(),
                quantity: 1,
            }],
            os_family: "linux".into(),
            os_flavour: "ubuntu".into(),
        }
    }

    #[test]
    fn register_sends_gui_form() {
        let req = Register {
            vm_name: "web-1".into(),
            spec: spec(),
            volume_ids: vec!["v1".into(), "v2".into()],
            network_ids: vec!["n1".into()],
            nic_macs: vec![],
        };
        assert_eq!(
            serde_json::to_value(register_to_wire(&req)).unwrap(),
            json!({
                "slots": 2, "overprovision": 2, "allowSMT": false, "archs": ["X86_64"],
                "flags": ["sse2"], "ramsize": 2048, "reqECC": false,
                "pci": [{"vendor": "10de", "model": "1bb1", "quantity": 1}],
                "misc": {"os_family": "linux", "os_flavour": "ubuntu"},
                "info": {"vm_name": "web-1"},
                "volumes": [{"vid": "v1"}, {"vid": "v2"}],
                "networks": [{"network_uid": "n1"}]
            })
        );
    }

    #[test]
    fn status_rows_normalize() {
        let row: VmStatus = serde_json::from_value(json!({
            "uniqueID": "6f1c1b1e-8a4e-4a57-9a53-0d7b8f0f3c11",
            "serverurl": "https://192.168.1.10",
            "req_json": {"vm_name": "web-1", "slots": 2, "ramsize": 0.5,
                         "volumes": [{"volumeID": "a"}, {"volumeID": "b"}],
                         "states": "shut off", "network_config": {"ipv4": "10.0.0.5/24"}}
        }))
        .unwrap();
        let vm = vm_from_wire(row);
        assert_eq!(vm.ram_mib, 512);
        assert_eq!(vm.state, VmState::Off);
        assert_eq!(vm.ipv4, Some(Ipv4Addr::new(10, 0, 0, 5)));
        assert_eq!(vm.volume_ids, vec!["a", "b"]);
        assert_eq!(vm.server_url.as_deref(), Some("https://192.168.1.10"));
    }

    #[test]
    fn status_field_wins_and_top_level_network_config_is_read() {
        let row: VmStatus = serde_json::from_value(json!({
            "uniqueID": "u", "status": "starting",
            "network_config": {"ipv4": "10.1.2.3"},
            "req_json": {"vm_name": "x", "states": "running", "ramsize": 4}
        }))
        .unwrap();
        let vm = vm_from_wire(row);
        assert_eq!(vm.state, VmState::Starting);
        assert_eq!(vm.ipv4, Some(Ipv4Addr::new(10, 1, 2, 3)));
        assert_eq!(vm.ram_mib, 4096);
        let bare = vm_from_wire(serde_json::from_value(json!({"uniqueID": "u"})).unwrap());
        assert_eq!(bare.state, VmState::Unknown(String::new()));
        assert_eq!(bare.ipv4, None);
    }

    #[test]
    fn state_words_map() {
        assert_eq!(VmState::parse("running"), VmState::Running);
        assert_eq!(VmState::parse("Shut Off"), VmState::Off);
        assert_eq!(VmState::parse("paused"), VmState::Paused);
        assert_eq!(VmState::parse("initializing"), VmState::Starting);
        assert_eq!(
            VmState::parse("migrating"),
            VmState::Unknown("migrating".into())
        );
    }

    #[test]
    fn pci_accepts_both_forms() {
        assert_eq!(
            pci_from_wire(PciEntry::Text("10DE:1bb1".into())),
            PciDevice {
                vendor: "10de".into(),
                model: "1bb1".into(),
                quantity: 1
            }
        );
        assert_eq!(
            pci_from_wire(PciEntry::Text("10de:1bb1:2".into())).quantity,
            2
        );
        let obj = PciEntry::Object(PciObject {
            vendor: "10de".into(),
            model: "24b0".into(),
            quantity: None,
        });
        assert_eq!(pci_from_wire(obj).quantity, 1);
    }

    #[test]
    fn units_and_addresses() {
        assert_eq!(gib_to_mib(2.0), 2048);
        assert_eq!(gib_to_mib(0.125), 128);
        assert_eq!(gib_to_mib(f64::NAN), 0);
        assert_eq!(gib_to_mib(-1.0), 0);
        assert_eq!(parse_ipv4("not an ip"), None);
    }

    #[test]
    fn canallocate_refusals_become_capacity() {
        let refused = DriverError::new(ErrorKind::Invalid, "vm/canallocate", Some(400), "no");
        assert_eq!(refusal_is_capacity(refused).kind, ErrorKind::Capacity);
        let invalid = DriverError::new(ErrorKind::Invalid, "vm/canallocate", Some(422), "bad");
        assert_eq!(refusal_is_capacity(invalid).kind, ErrorKind::Invalid);
        let down = DriverError::new(ErrorKind::Transient, "vm/canallocate", Some(503), "");
        assert_eq!(refusal_is_capacity(down).kind, ErrorKind::Transient);
        let auth = DriverError::new(ErrorKind::Auth, "vm/canallocate", Some(401), "");
        assert_eq!(refusal_is_capacity(auth).kind, ErrorKind::Auth);
    }

    #[test]
    fn templates_normalize() {
        let t: TemplateWire = serde_json::from_value(json!({
            "info": {"name": "Neon", "description": "small"},
            "cpu": {"slots": 2, "overprovision": 2, "archs": ["X86_64"], "flags": ["sse2"]},
            "ram": {"ramsize": 2048}, "pci": []
        }))
        .unwrap();
        let t = template_from_wire(t);
        assert_eq!((t.name.as_str(), t.slots, t.ram_mib), ("Neon", 2, 2048));
    }
}
