//! Virtual machines: the validated spec built from the inbound request, and statuses.

use crate::error::{FieldErrors, Result};
use crate::labels::{self, Labels};
use crate::naming::check_atomos_name;
use crate::os::{DEFAULT_DISTRIBUTION, OsImage};
use crate::parse::{Parser, Warning};
use crate::ssh::SshKey;
use crate::target::Target;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Size of the boot volume cloned from the OS image, in GB.
pub const BOOT_VOLUME_GB: u32 = 20;
/// Longest VM name; it is also the guest hostname, so one DNS label.
pub const MAX_NAME_LEN: usize = 63;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuSpec {
    pub cores: u32,
    pub threads_per_core: u32,
    pub smt: bool,
    pub min_frequency_ghz: Option<f64>,
    pub archs: Vec<String>,
    pub flags: Vec<String>,
}

impl CpuSpec {
    /// vCPUs AtomOS must allocate (its `slots`).
    pub fn vcpus(&self) -> u32 {
        self.cores * self.threads_per_core
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciRequest {
    pub vendor: String,
    pub model: String,
    pub quantity: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataVolumeSpec {
    pub name: String,
    pub size_gb: u32,
    pub private: bool,
    pub shareable: bool,
    pub bootable: bool,
    pub readonly: bool,
}

/// A VM request after validation and normalization: units fixed (MiB, GB),
/// quirks resolved, defaults applied.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VmSpec {
    pub name: String,
    pub cpu: CpuSpec,
    pub memory_mib: u64,
    pub require_ecc: bool,
    pub pci: Vec<PciRequest>,
    pub os: OsImage,
    pub boot_volume_gb: u32,
    pub volumes: Vec<DataVolumeSpec>,
    pub ssh_keys: Vec<SshKey>,
    /// Requested provider, if any; otherwise meson picks the cheapest placement.
    pub provider: Option<String>,
    /// Requested continent (`europe`, `north-america`, ...), if any.
    #[serde(default)]
    pub continent: Option<String>,
    /// Requested region, if any.
    #[serde(default)]
    pub region: Option<String>,
    /// The tenant's image the boot volume is a copy of (instead of the
    /// OS's cloud image); the VM runs on the image's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<crate::ImageId>,
    /// The backup the VM's volumes are written from before it first boots
    /// (a restore into a new VM); the VM runs on the backup's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<crate::BackupId>,
}

impl VmSpec {
    /// Whether a VM of `other` asks of a host what one of `self` does (size,
    /// devices, image, volumes, where), so that one placement decision can
    /// serve both: everything but the name and the SSH keys, which differ
    /// between a node group's members and no host looks at.
    pub fn places_like(&self, other: &VmSpec) -> bool {
        let VmSpec {
            name: _,
            cpu,
            memory_mib,
            require_ecc,
            pci,
            os,
            boot_volume_gb,
            volumes,
            ssh_keys: _,
            provider,
            continent,
            region,
            image,
            backup,
        } = self;
        *cpu == other.cpu
            && *memory_mib == other.memory_mib
            && *require_ecc == other.require_ecc
            && *pci == other.pci
            && *os == other.os
            && *boot_volume_gb == other.boot_volume_gb
            && *volumes == other.volumes
            && *provider == other.provider
            && *continent == other.continent
            && *region == other.region
            && *image == other.image
            && *backup == other.backup
    }
}

/// A parsed create-VM request.
#[derive(Clone, Debug, PartialEq)]
pub struct VmCreate {
    pub spec: VmSpec,
    pub labels: Labels,
    /// Private networks to attach, in NIC order (their existence and owner
    /// are checked when the VM is written).
    pub networks: Vec<crate::NetworkId>,
    /// Standalone volumes to attach (their owner, status and host are
    /// checked when the VM is written; they pin its placement).
    pub volumes: Vec<crate::VolumeId>,
    /// Keys the tenant keeps at meson (`/v1/ssh-keys`) to add to
    /// `spec.ssh_keys`, each by id or name with its field's path: the app
    /// looks them up, and names the field of one it does not find.
    pub kept_ssh_keys: Vec<(String, String)>,
    pub warnings: Vec<Warning>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VmStatus {
    Initializing,
    Starting,
    Running,
    Stopping,
    Off,
    Deleting,
    Error,
}

impl VmStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            VmStatus::Initializing => "initializing",
            VmStatus::Starting => "starting",
            VmStatus::Running => "running",
            VmStatus::Stopping => "stopping",
            VmStatus::Off => "off",
            VmStatus::Deleting => "deleting",
            VmStatus::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "initializing" => Self::Initializing,
            "starting" => Self::Starting,
            "running" => Self::Running,
            "stopping" => Self::Stopping,
            "off" => Self::Off,
            "deleting" => Self::Deleting,
            "error" => Self::Error,
            _ => return None,
        })
    }
}

const ARCHS: &[&str] = &["X86_64", "X86_32", "ARM_7", "ARM_8", "PPC_64", "S390X"];

fn is_hex4(s: &str) -> bool {
    s.len() == 4 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A provider name: lowercase letters, digits and dashes.
pub fn valid_provider(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// One of a target's placement attributes.
type TargetField = fn(&Target) -> &String;

/// Rejects provider/continent/region constraints that no enabled target
/// meets, naming the field and what is available. Creating and quoting a VM
/// both check this before doing anything else.
pub fn check_placement(targets: &[Target], spec: &VmSpec) -> Result<()> {
    let mut errors = FieldErrors::default();
    constraint_errors(
        targets,
        [&spec.provider, &spec.continent, &spec.region],
        &mut errors,
    );
    errors.finish(())
}

/// Records the first of provider, continent and region (in that order) that
/// no enabled target meeting the ones before it satisfies.
pub(crate) fn constraint_errors(
    targets: &[Target],
    wanted: [&Option<String>; 3],
    errors: &mut FieldErrors,
) {
    let enabled: Vec<&Target> = targets.iter().filter(|t| t.enabled).collect();
    let known = |get: TargetField, of: &[&Target]| {
        let mut v: Vec<&str> = of.iter().map(|t| get(t).as_str()).collect();
        v.sort_unstable();
        v.dedup();
        v.join(", ")
    };
    let fields: [(&str, TargetField); 3] = [
        ("provider", |t| &t.provider),
        ("continent", |t| &t.continent),
        ("region", |t| &t.region),
    ];
    let mut fitting = enabled.clone();
    for ((field, get), want) in fields.into_iter().zip(wanted) {
        let Some(want) = want else { continue };
        let next: Vec<&Target> = fitting.iter().copied().filter(|t| get(t) == want).collect();
        if next.is_empty() {
            let so_far = if fitting.len() == enabled.len() {
                ""
            } else {
                " with the other constraints"
            };
            errors.add(
                field,
                format!(
                    "no hosts in {field} '{want}'{so_far}; available: {}",
                    known(get, &fitting)
                ),
            );
            return;
        }
        fitting = next;
    }
}

impl VmCreate {
    /// Parses and validates the VM request payload (docs/payloads.md), naming every bad field.
    pub fn parse(body: &Value) -> Result<VmCreate> {
        Self::parse_inner(body, None)
    }

    /// [`VmCreate::parse`], plus the provider/continent/region constraints
    /// checked against `targets` (see [`check_placement`]), so that a bad
    /// constraint is named together with every other bad field.
    pub fn parse_placed(body: &Value, targets: &[Target]) -> Result<VmCreate> {
        Self::parse_inner(body, Some(targets))
    }

    fn parse_inner(body: &Value, targets: Option<&[Target]>) -> Result<VmCreate> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;

        let [provider, continent, region] = parse_location(&mut p, &mut root, targets);
        let labels = match root.get("labels") {
            (path, Some(v)) => labels::parse(&path, v, &mut p.errors),
            (_, None) => Some(Labels::new()),
        };
        let networks = parse_networks(&mut p, &mut root);
        let attach = parse_attached_volumes(&mut p, &mut root);
        let image = parse_image(&mut p, &mut root);

        let mut specs = p.object(&mut root, "specs", true);
        let mut name = None;
        let mut volumes = Some(Vec::new());
        let mut ssh_keys = Some((Vec::new(), Vec::new()));
        let mut req_parts = None;
        if let Some(specs) = specs.as_mut() {
            name = parse_name(&mut p, specs);
            volumes = parse_volumes(&mut p, specs);
            ssh_keys = parse_auth(&mut p, specs);
            if let Some(mut req) = p.object(specs, "req", true) {
                req_parts = parse_req(&mut p, &mut req);
                p.done(req);
            }
        }
        if let Some(specs) = specs {
            p.done(specs);
        }
        p.done(root);

        let Parser { errors, warnings } = p;
        match (
            name, volumes, ssh_keys, req_parts, labels, networks, attach, image,
        ) {
            (
                Some(name),
                Some(volumes),
                Some(ssh_keys),
                Some(req),
                Some(labels),
                Some(networks),
                Some(attach),
                Some(image),
            ) if errors.is_empty() => {
                let (cpu, memory_mib, require_ecc, pci, os) = req;
                let (ssh_keys, kept_ssh_keys) = ssh_keys;
                let spec = VmSpec {
                    name,
                    cpu,
                    memory_mib,
                    require_ecc,
                    pci,
                    os,
                    boot_volume_gb: BOOT_VOLUME_GB,
                    volumes,
                    ssh_keys,
                    provider,
                    continent,
                    region,
                    image,
                    backup: None,
                };
                Ok(VmCreate {
                    spec,
                    labels,
                    networks,
                    volumes: attach,
                    kept_ssh_keys,
                    warnings,
                })
            }
            _ => Err(errors
                .into_error()
                .unwrap_or_else(|| crate::Error::invalid("(body)", "invalid request"))),
        }
    }
}

/// `provider`, `continent` and `region`: where a resource may be placed
/// (trimmed, lowercased), checked against `targets` when given (see
/// [`check_placement`]) so that a constraint no host meets is named with
/// every other bad field. A VM request and a volume request share them.
pub(crate) fn parse_location(
    p: &mut Parser,
    root: &mut crate::parse::Obj<'_>,
    targets: Option<&[Target]>,
) -> [Option<String>; 3] {
    let provider = p.string(root, "provider", false).and_then(|(path, s)| {
        let s = s.trim().to_ascii_lowercase();
        if valid_provider(&s) {
            Some(s)
        } else {
            p.errors.add(
                path,
                "must be a provider name such as ovh, ionos, gigas, arubacloud or atomos",
            );
            None
        }
    });
    let continent = parse_place(p, root, "continent");
    let region = parse_place(p, root, "region");
    if let Some(targets) = targets {
        constraint_errors(targets, [&provider, &continent, &region], &mut p.errors);
    }
    [provider, continent, region]
}

/// The optional place name at `key` (`provider`, `continent`, `region`),
/// trimmed and lowercased.
pub(crate) fn parse_place(
    p: &mut Parser,
    root: &mut crate::parse::Obj<'_>,
    key: &'static str,
) -> Option<String> {
    p.string(root, key, false).and_then(|(path, s)| {
        let s = s.trim().to_ascii_lowercase();
        if valid_provider(&s) {
            Some(s)
        } else {
            p.errors.add(
                path,
                format!("must be a {key} name: lowercase letters, digits and '-'"),
            );
            None
        }
    })
}

/// Validates a VM name (PATCH uses it too).
pub fn check_name(errors: &mut FieldErrors, path: &str, name: &str) -> bool {
    match check_atomos_name(name, MAX_NAME_LEN) {
        Ok(()) => true,
        Err(m) => {
            errors.add(path, m);
            false
        }
    }
}

/// Most private networks one VM joins.
pub const MAX_NETWORKS: usize = 4;

/// `networks`: ids of the tenant's private networks, no repeats.
fn parse_networks(
    p: &mut Parser,
    root: &mut crate::parse::Obj<'_>,
) -> Option<Vec<crate::NetworkId>> {
    parse_ids(p, root, "networks", MAX_NETWORKS, "network")
}

/// Most standalone volumes one VM attaches.
/// The distribution `name` (at `path`), or an error naming the supported ones.
fn distribution(p: &mut Parser, path: String, name: &str) -> Option<OsImage> {
    OsImage::lookup(name).or_else(|| {
        p.errors.add(
            path,
            format!(
                "unsupported distribution '{name}'; supported: {}",
                OsImage::supported().join(", ")
            ),
        );
        None
    })
}

/// A parsed `POST /v1/vms/{id}/actions/migrate`.
#[derive(Clone, Debug, PartialEq)]
pub struct VmMigrate {
    /// The host to move to (a target's name); placement picks one otherwise.
    pub host: Option<String>,
    pub warnings: Vec<Warning>,
}

impl VmMigrate {
    /// `{"host"?}`; an empty body is fine.
    pub fn parse(body: &Value) -> Result<VmMigrate> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let host = parse_host(&mut p, &mut root, false);
        p.done(root);
        let Parser { errors, warnings } = p;
        match errors.into_error() {
            Some(e) => Err(e),
            None => Ok(VmMigrate { host, warnings }),
        }
    }
}

/// A parsed `POST /v1/vms/{id}/actions/attach-network` or
/// `.../detach-network`.
#[derive(Clone, Debug, PartialEq)]
pub struct VmNetworkChange {
    pub network: crate::NetworkId,
    pub warnings: Vec<Warning>,
}

impl VmNetworkChange {
    /// `{"network": "<id>"}`; unknown fields are warnings.
    pub fn parse(body: &Value) -> Result<VmNetworkChange> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let network = p.id(&mut root, "network", "a network", true).flatten();
        p.done(root);
        let Parser { errors, warnings } = p;
        match network {
            Some(network) if errors.is_empty() => Ok(VmNetworkChange { network, warnings }),
            _ => Err(errors
                .into_error()
                .unwrap_or_else(|| crate::Error::invalid("network", "invalid request"))),
        }
    }
}

/// `host`: an AtomOS host's (a target's) name, not blank.
pub(crate) fn parse_host(
    p: &mut Parser,
    root: &mut crate::parse::Obj<'_>,
    required: bool,
) -> Option<String> {
    p.string(root, "host", required).and_then(|(path, s)| {
        let s = s.trim();
        if s.is_empty() {
            p.errors.add(path, "must name a host");
            return None;
        }
        Some(s.to_owned())
    })
}

/// What a rebuilt VM's new boot volume is made from.
#[derive(Clone, Debug, PartialEq)]
pub enum RebuildSource {
    /// A copy of the tenant's image.
    Image(crate::ImageId),
    /// The distribution's cloud image.
    Os(OsImage),
}

/// A parsed `POST /v1/vms/{id}/actions/rebuild`.
#[derive(Clone, Debug, PartialEq)]
pub struct VmRebuild {
    pub source: RebuildSource,
    pub warnings: Vec<Warning>,
}

impl VmRebuild {
    /// `{"image": "<id>"}` or `{"os": "<distribution>"}`, one of them.
    pub fn parse(body: &Value) -> Result<VmRebuild> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let image = parse_image(&mut p, &mut root);
        let os = p
            .string(&mut root, "os", false)
            .map(|(path, name)| distribution(&mut p, path, name));
        let source = match (image, os) {
            (Some(Some(id)), None) => Some(RebuildSource::Image(id)),
            (Some(None), Some(Some(os))) => Some(RebuildSource::Os(os)),
            (Some(None), None) => {
                p.errors
                    .add("image", "give image (an image id) or os (a distribution)");
                None
            }
            (Some(Some(_)), Some(_)) => {
                p.errors.add("image", "give image or os, not both");
                None
            }
            _ => None,
        };
        p.done(root);
        let Parser { errors, warnings } = p;
        match source {
            Some(source) if errors.is_empty() => Ok(VmRebuild { source, warnings }),
            _ => Err(errors
                .into_error()
                .unwrap_or_else(|| crate::Error::invalid("image", "invalid request"))),
        }
    }
}

/// A VM's cores, and its memory in MiB (its create's and its resize's rule).
pub const CORES: std::ops::RangeInclusive<i64> = 1..=128;
pub const MEMORY_MIB: std::ops::RangeInclusive<i64> = 128..=1_048_576;

/// A parsed `POST /v1/vms/{id}/actions/resize`.
#[derive(Clone, Debug, PartialEq)]
pub struct VmResize {
    pub cores: Option<u32>,
    pub memory_mib: Option<u64>,
    /// Stop a running VM for the change and start it again after.
    pub stop: bool,
    pub warnings: Vec<Warning>,
}

impl VmResize {
    /// `{"cores"?, "memory_mib"?, "stop"?}`, at least one of the sizes;
    /// unknown fields are warnings.
    pub fn parse(body: &Value) -> Result<VmResize> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let cores = p.int(&mut root, "cores", CORES, false);
        let memory = p.int(&mut root, "memory_mib", MEMORY_MIB, false);
        let stop = p.bool(&mut root, "stop").unwrap_or(false);
        let named = root.get("cores").1.is_some() || root.get("memory_mib").1.is_some();
        if !named {
            p.errors
                .add("cores", "give cores and/or memory_mib: the VM's new size");
        }
        p.done(root);
        let Parser { errors, warnings } = p;
        if !errors.is_empty() {
            return Err(errors
                .into_error()
                .unwrap_or_else(|| crate::Error::invalid("cores", "invalid request")));
        }
        Ok(VmResize {
            cores: cores.map(|c| c as u32),
            memory_mib: memory.map(|m| m as u64),
            stop,
            warnings,
        })
    }

    /// `spec` with this resize's sizes.
    pub fn apply(&self, spec: &VmSpec) -> VmSpec {
        let mut to = spec.clone();
        if let Some(c) = self.cores {
            to.cpu.cores = c;
        }
        if let Some(m) = self.memory_mib {
            to.memory_mib = m;
        }
        to
    }
}

pub const MAX_ATTACHED_VOLUMES: usize = 8;

/// `volumes`: ids of the tenant's standalone volumes to attach, no repeats.
fn parse_attached_volumes(
    p: &mut Parser,
    root: &mut crate::parse::Obj<'_>,
) -> Option<Vec<crate::VolumeId>> {
    parse_ids(p, root, "volumes", MAX_ATTACHED_VOLUMES, "volume")
}

/// `image`: the tenant's image to copy the boot volume from; `Some(None)`
/// when absent, `None` when malformed (named).
fn parse_image(p: &mut Parser, root: &mut crate::parse::Obj<'_>) -> Option<Option<crate::ImageId>> {
    p.id(root, "image", "an image", false)
}

/// A list of at most `max` distinct resource ids (UUIDs) at `key`.
fn parse_ids<T: std::str::FromStr + PartialEq>(
    p: &mut Parser,
    root: &mut crate::parse::Obj<'_>,
    key: &'static str,
    max: usize,
    what: &str,
) -> Option<Vec<T>> {
    let items = match root.get(key) {
        (_, None) => return Some(Vec::new()),
        _ => p.array(root, key, max)?,
    };
    let mut out: Vec<T> = Vec::new();
    let mut ok = true;
    for (path, v) in items {
        match v.as_str().map(str::parse::<T>) {
            Some(Ok(id)) if out.contains(&id) => {
                p.errors.add(path, format!("this {what} is already listed"));
                ok = false;
            }
            Some(Ok(id)) => out.push(id),
            _ => {
                p.errors.add(path, format!("must be a {what} id (a UUID)"));
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

fn parse_name(p: &mut Parser, specs: &mut crate::parse::Obj<'_>) -> Option<String> {
    let (path, s) = p.string(specs, "vm_name", true)?;
    check_name(&mut p.errors, &path, s).then(|| s.to_owned())
}

type ReqParts = (CpuSpec, u64, bool, Vec<PciRequest>, OsImage);

fn parse_req(p: &mut Parser, req: &mut crate::parse::Obj<'_>) -> Option<ReqParts> {
    let cpu = p.object(req, "cpu", true).and_then(|mut cpu| {
        let smt = p.bool(&mut cpu, "smtEnabled").unwrap_or(false);
        let cores = p.int(&mut cpu, "numberOfCores", CORES, true);
        let threads = p
            .int(&mut cpu, "numberOfThreads", 1..=8, false)
            .unwrap_or(1);
        if threads > 1 && !smt {
            p.errors.add(
                crate::parse::join(cpu.path(), "numberOfThreads"),
                "must be 1 unless smtEnabled is true",
            );
        }
        let min_frequency_ghz = p.float(&mut cpu, "min_frequency", 0.1..=6.0);
        let archs = match cpu.get("arch") {
            (path, Some(Value::String(s))) => check_archs(p, &path, vec![s.clone()]),
            (path, Some(Value::Array(_))) => {
                cpu.accept(&["arch"]);
                p.strings(&mut cpu, "arch", 8)
                    .and_then(|a| check_archs(p, &path, a))
            }
            (path, Some(_)) => {
                p.errors.add(
                    path,
                    "must be an array of architectures such as [\"X86_64\"]",
                );
                None
            }
            (_, None) => Some(vec!["X86_64".to_owned()]),
        };
        let flags = match p.strings(&mut cpu, "flags", 64) {
            Some(flags) => {
                let path = crate::parse::join(cpu.path(), "flags");
                let bad: Vec<_> = flags
                    .iter()
                    .filter(|f| {
                        f.is_empty()
                            || f.len() > 32
                            || !f
                                .bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
                    })
                    .collect();
                if bad.is_empty() {
                    Some(flags.iter().map(|f| f.to_ascii_lowercase()).collect())
                } else {
                    p.errors.add(
                        path,
                        format!("invalid CPU flags {bad:?}: use names such as sse2, avx2"),
                    );
                    None
                }
            }
            None if p.errors.has(&crate::parse::join(cpu.path(), "flags")) => None,
            None => Some(Vec::new()),
        };
        p.done(cpu);
        Some(CpuSpec {
            cores: cores? as u32,
            threads_per_core: threads as u32,
            smt,
            min_frequency_ghz,
            archs: archs?,
            flags: flags?,
        })
    });

    let mem = p.object(req, "mem", true).and_then(|mut mem| {
        let capacity = p.int(&mut mem, "capacity", MEMORY_MIB, true);
        let ecc = p.bool(&mut mem, "requireECC");
        let ecc_bad = p.errors.has(&crate::parse::join(mem.path(), "requireECC"));
        p.done(mem);
        if ecc_bad {
            return None;
        }
        Some((capacity? as u64, ecc.unwrap_or(false)))
    });

    let pci = match p.object(req, "pci", false) {
        Some(mut pci) => {
            let out = parse_pci(p, &mut pci);
            p.done(pci);
            out
        }
        None => Some(Vec::new()),
    };

    let os = match p.object(req, "misc", false) {
        Some(mut misc) => {
            let os = match p.string(&mut misc, "osDistribution", false) {
                Some((path, name)) => distribution(p, path, name),
                None => OsImage::lookup(DEFAULT_DISTRIBUTION),
            };
            p.done(misc);
            os
        }
        None => OsImage::lookup(DEFAULT_DISTRIBUTION),
    };

    let (memory_mib, require_ecc) = mem?;
    Some((cpu?, memory_mib, require_ecc, pci?, os?))
}

fn check_archs(p: &mut Parser, path: &str, archs: Vec<String>) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for a in archs {
        let up = a.to_ascii_uppercase();
        if ARCHS.contains(&up.as_str()) {
            if !out.contains(&up) {
                out.push(up);
            }
        } else {
            p.errors.add(
                path,
                format!("unknown architecture '{a}'; one of {}", ARCHS.join(", ")),
            );
            return None;
        }
    }
    if out.is_empty() {
        p.errors.add(path, "must name at least one architecture");
        return None;
    }
    Some(out)
}

/// Most distinct PCI device kinds one VM may ask for.
const MAX_PCI_DEVICES: usize = 8;

/// `pci.devices` as `{"vendor:model": count}` or `[{vendor, model, quantity}]`.
fn parse_pci(p: &mut Parser, pci: &mut crate::parse::Obj<'_>) -> Option<Vec<PciRequest>> {
    let (path, devices) = pci.get("devices");
    let entries = match devices {
        Some(Value::Object(map)) => map.len(),
        Some(Value::Array(items)) => items.len(),
        _ => 0,
    };
    if entries > MAX_PCI_DEVICES {
        p.errors.add(
            path,
            format!("must name at most {MAX_PCI_DEVICES} kinds of device"),
        );
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    let mut push = |p: &mut Parser, path: String, vendor: &str, model: &str, qty: Option<i64>| {
        let (vendor, model) = (vendor.to_ascii_lowercase(), model.to_ascii_lowercase());
        if !is_hex4(&vendor) || !is_hex4(&model) {
            p.errors.add(
                path,
                "PCI ids must be 4 hex digits each, as in \"10de:1bb1\"",
            );
            return false;
        }
        match qty {
            Some(q) => {
                out.push(PciRequest {
                    vendor,
                    model,
                    quantity: q as u32,
                });
                true
            }
            None => false,
        }
    };
    match devices {
        None => {}
        Some(Value::Object(map)) => {
            for (key, count) in map {
                let item_path = format!("{path}.{key}");
                let qty = p.int_value(item_path.clone(), count, 1..=8);
                let good = match key.split_once(':') {
                    Some((v, m)) => push(p, item_path, v, m, qty),
                    None => {
                        p.errors
                            .add(item_path, "keys must be \"<vendor>:<model>\" PCI ids");
                        false
                    }
                };
                ok &= good;
            }
        }
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let item_path = format!("{path}[{i}]");
                let Some(mut o) = p.item_object(item_path.clone(), item) else {
                    ok = false;
                    continue;
                };
                let vendor = p.string(&mut o, "vendor", true).map(|(_, s)| s.to_owned());
                let model = p.string(&mut o, "model", true).map(|(_, s)| s.to_owned());
                let qty = p.int(&mut o, "quantity", 1..=8, false).or(Some(1));
                p.done(o);
                ok &= match (vendor, model) {
                    (Some(v), Some(m)) => push(p, item_path, &v, &m, qty),
                    _ => false,
                };
            }
        }
        Some(_) => {
            p.errors.add(&path, "must be an object {\"vendor:model\": count} or a list of {vendor, model, quantity}");
            ok = false;
        }
    }
    // Ids are compared lowercased, so "10DE:1BB1" and "10de:1bb1" are one device.
    for (i, d) in out.iter().enumerate() {
        if out[..i]
            .iter()
            .any(|e| (&e.vendor, &e.model) == (&d.vendor, &d.model))
        {
            p.errors.add(
                &path,
                format!(
                    "device {}:{} is listed twice; give its total quantity once",
                    d.vendor, d.model
                ),
            );
            ok = false;
        }
    }
    ok.then_some(out)
}

fn parse_volumes(p: &mut Parser, specs: &mut crate::parse::Obj<'_>) -> Option<Vec<DataVolumeSpec>> {
    let Some(items) = p.array(specs, "volumes", 8) else {
        return (!p.errors.has(&crate::parse::join(specs.path(), "volumes"))).then(Vec::new);
    };
    let mut out = Vec::new();
    let mut ok = true;
    for (path, item) in items {
        let Some(mut o) = p.item_object(path.clone(), item) else {
            ok = false;
            continue;
        };
        let name =
            p.string(&mut o, "name", true)
                .and_then(|(npath, s)| match check_atomos_name(s, 40) {
                    Ok(()) => Some(s.to_owned()),
                    Err(m) => {
                        p.errors.add(npath, m);
                        None
                    }
                });
        let size = p.int(&mut o, "size", crate::volume::VOLUME_GB, true);
        let private = p.bool(&mut o, "private");
        let shareable = p.bool(&mut o, "shareable");
        let bootable = p.bool(&mut o, "bootable");
        let readonly = p.bool(&mut o, "readonly");
        let bad_flag = ["private", "shareable", "bootable", "readonly"]
            .iter()
            .any(|k| p.errors.has(&crate::parse::join(o.path(), k)));
        if shareable == Some(true) && bootable == Some(true) {
            p.errors.add(
                crate::parse::join(o.path(), "shareable"),
                "a shareable volume cannot be bootable",
            );
            ok = false;
        }
        if let Some(n) = &name
            && out.iter().any(|v: &DataVolumeSpec| &v.name == n)
        {
            p.errors.add(
                crate::parse::join(o.path(), "name"),
                format!("duplicate volume name '{n}'"),
            );
            ok = false;
        }
        p.done(o);
        match (name, size) {
            (Some(name), Some(size)) if !bad_flag => out.push(DataVolumeSpec {
                name,
                size_gb: size as u32,
                private: private.unwrap_or(true),
                shareable: shareable.unwrap_or(false),
                bootable: bootable.unwrap_or(false),
                readonly: readonly.unwrap_or(false),
            }),
            _ => ok = false,
        }
    }
    ok.then_some(out)
}

/// The keys to install: the lines given, and the kept keys named (by id
/// or name, with their paths).
type Auth = (Vec<SshKey>, Vec<(String, String)>);

fn parse_auth(p: &mut Parser, specs: &mut crate::parse::Obj<'_>) -> Option<Auth> {
    let Some(mut auth) = p.object(specs, "authentication", false) else {
        let path = crate::parse::join(specs.path(), "authentication");
        return (!p.errors.has(&path)).then(|| (Vec::new(), Vec::new()));
    };
    let mut keys = Vec::new();
    let mut ok = true;
    if let Some((path, line)) = p.string(&mut auth, "ssh-key", false) {
        match SshKey::parse(line) {
            Ok(k) => keys.push(k),
            Err(m) => {
                p.errors.add(path, m);
                ok = false;
            }
        }
    }
    if let Some(lines) = p.strings(&mut auth, "ssh-keys", 16) {
        for (i, line) in lines.iter().enumerate() {
            match SshKey::parse(line) {
                Ok(k) => keys.push(k),
                Err(m) => {
                    p.errors.add(format!("{}.ssh-keys[{i}]", auth.path()), m);
                    ok = false;
                }
            }
        }
    }
    let mut kept = Vec::new();
    if let Some(refs) = p.strings(&mut auth, "ssh-key-ids", 16) {
        for (i, r) in refs.into_iter().enumerate() {
            let path = format!("{}.ssh-key-ids[{i}]", auth.path());
            if r.trim().is_empty() {
                p.errors.add(path, "must name a kept SSH key by id or name");
                ok = false;
            } else {
                kept.push((path, r.trim().to_owned()));
            }
        }
    }
    ok &= !p.errors.has(&crate::parse::join(auth.path(), "ssh-keys"))
        && !p.errors.has(&crate::parse::join(auth.path(), "ssh-key"))
        && !p
            .errors
            .has(&crate::parse::join(auth.path(), "ssh-key-ids"));
    p.done(auth);
    ok.then_some((keys, kept))
}

/// Where a VM was placed, and at what price.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    pub target_id: crate::TargetId,
    /// The target's name, shown as the VM's `host`.
    pub host: String,
    pub provider: String,
    pub region: String,
    pub price_hourly: f64,
    pub price_monthly: f64,
    pub currency: String,
}

/// Where a VM runs, without its spec: what a cluster's views show of
/// their nodes' VMs (address, host, price).
#[derive(Clone, Debug, PartialEq)]
pub struct VmLocation {
    pub id: crate::VmId,
    pub placement: Option<Placement>,
    pub ipv4: Option<std::net::Ipv4Addr>,
}

/// A VM as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct Vm {
    pub id: crate::VmId,
    pub tenant: crate::TenantId,
    pub name: String,
    pub status: VmStatus,
    pub labels: Labels,
    pub spec: VmSpec,
    pub atomos_name: String,
    pub atomos_id: Option<String>,
    pub placement: Option<Placement>,
    pub ipv4: Option<std::net::Ipv4Addr>,
    pub created: chrono::DateTime<chrono::Utc>,
    /// What the reconciler found wrong with the VM (crashed, missing from
    /// its host); cleared when meson next changes its state.
    pub error_message: Option<String>,
    /// Its automatic backups' policy; `None` while disabled.
    pub backup_policy: Option<crate::backup::BackupPolicy>,
}

impl Vm {
    /// A new VM's row and its volumes' (boot, cloud-init, data), not
    /// written yet.
    pub fn new_with_volumes(
        tenant: &crate::TenantId,
        id: crate::VmId,
        spec: VmSpec,
        labels: Labels,
        atomos_name: String,
    ) -> (Vm, Vec<crate::volume::Volume>) {
        use crate::naming;
        use crate::volume::{Volume, VolumeKind, VolumeStatus};
        let vm = Vm {
            id,
            tenant: tenant.clone(),
            name: spec.name.clone(),
            status: VmStatus::Initializing,
            labels,
            atomos_name,
            atomos_id: None,
            placement: None,
            ipv4: None,
            created: chrono::Utc::now(),
            error_message: None,
            backup_policy: None,
            spec,
        };
        let volume = |name: &str, kind, size_gb, atomos_name, bootable, readonly| Volume {
            id: crate::VolumeId::new(),
            tenant: tenant.clone(),
            vm_id: Some(id),
            name: name.to_owned(),
            kind,
            size_gb,
            atomos_name,
            atomos_id: None,
            status: VolumeStatus::Creating,
            labels: Labels::new(),
            bootable,
            readonly,
            placement: None,
            attached_to: None,
            created: vm.created,
        };
        let mut volumes = vec![
            volume(
                "boot",
                VolumeKind::Boot,
                vm.spec.boot_volume_gb,
                naming::vm_boot_volume_name(id),
                true,
                false,
            ),
            volume(
                "cloudinit",
                VolumeKind::Cloudinit,
                1,
                naming::vm_cloudinit_volume_name(id),
                true,
                false,
            ),
        ];
        for (i, d) in vm.spec.volumes.iter().enumerate() {
            volumes.push(volume(
                &d.name,
                VolumeKind::Data,
                d.size_gb,
                naming::vm_data_volume_name(id, i),
                d.bootable,
                d.readonly,
            ));
        }
        (vm, volumes)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::Error;
    use serde_json::json;

    #[test]
    fn a_network_change_names_the_network_field() {
        let id = uuid::Uuid::new_v4();
        let r = VmNetworkChange::parse(&json!({"network": id.to_string(), "x": 1})).unwrap();
        assert_eq!(r.network.0, id);
        assert_eq!(r.warnings[0].field, "x");
        for (bad, why) in [
            (json!({}), "is required"),
            (json!({"network": 3}), "must be a string"),
            (json!({"network": "net-1"}), "must be a network id"),
        ] {
            match VmNetworkChange::parse(&bad).unwrap_err() {
                Error::InvalidInput { fields } => {
                    assert_eq!(fields.len(), 1, "{bad}");
                    assert_eq!(fields[0].name, "network", "{bad}");
                    assert!(
                        fields[0].messages[0].contains(why),
                        "{bad}: {:?}",
                        fields[0]
                    );
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
        assert!(VmNetworkChange::parse(&json!([])).is_err());
    }

    #[test]
    fn a_resize_names_its_fields_and_keeps_the_rest() {
        let r = VmResize::parse(&json!({"cores": 4, "stop": "True", "x": 1})).unwrap();
        assert_eq!(
            (r.cores, r.memory_mib, r.stop, r.warnings.len()),
            (Some(4), None, true, 1)
        );
        let spec = VmCreate::parse(&seed()).unwrap().spec;
        let to = r.apply(&spec);
        assert_eq!((to.cpu.cores, to.memory_mib), (4, spec.memory_mib));
        assert_eq!(to.cpu.threads_per_core, spec.cpu.threads_per_core);
        for (bad, field) in [
            (json!({}), "cores"),
            (json!({"stop": true}), "cores"),
            (json!({"cores": 0}), "cores"),
            (json!({"cores": 129}), "cores"),
            (json!({"memory_mib": 64}), "memory_mib"),
            (json!({"memory_mib": "lots"}), "memory_mib"),
            (json!({"cores": 2, "stop": "maybe"}), "stop"),
        ] {
            let e = VmResize::parse(&bad).unwrap_err();
            assert_eq!(fields(e), [field], "{bad}");
        }
    }

    pub const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMLavtiPfhiG3t6TAxHosXoVh7Pc/lSD8L9SNPyAzp1d user@host";

    pub fn seed() -> Value {
        json!({"specs":{"req":{"cpu":{"smtEnabled":false,"numberOfCores":2,"numberOfThreads":1,
          "min_frequency":1.0,"arch":["X86_64"],"flags":[]},
          "mem":{"capacity":4096,"requireECC":0},"pci":{"devices":{}},
          "misc":{"osDistribution":"Debian"}},
          "volumes":[{"name":"test","size":30,"private":"True","shareable":"False",
            "bootable":"False","readonly":"False"}],
          "authentication":{"ssh-key": KEY},
          "vm_name":"test"},
         "provider":"ionos"})
    }

    fn fields(e: Error) -> Vec<String> {
        match e {
            Error::InvalidInput { fields } => fields.into_iter().map(|f| f.name).collect(),
            other => panic!("expected invalid_input, got {other:?}"),
        }
    }

    #[test]
    fn specs_that_differ_only_in_name_and_keys_place_alike() {
        let a = VmCreate::parse(&seed()).unwrap().spec;
        let mut b = a.clone();
        b.name = "another".into();
        b.ssh_keys.clear();
        assert!(a.places_like(&b) && b.places_like(&a));
        let mut bigger = b.clone();
        bigger.memory_mib *= 2;
        assert!(!a.places_like(&bigger));
        let mut elsewhere = b.clone();
        elsewhere.region = Some("it-1".into());
        assert!(!a.places_like(&elsewhere));
        let mut more_disk = b;
        more_disk.volumes[0].size_gb += 1;
        assert!(!a.places_like(&more_disk));
    }

    #[test]
    fn seed_payload_parses() {
        let vm = VmCreate::parse(&seed()).unwrap();
        assert_eq!(vm.spec.name, "test");
        assert_eq!(vm.spec.cpu.vcpus(), 2);
        assert_eq!(vm.spec.memory_mib, 4096);
        assert!(!vm.spec.require_ecc);
        assert_eq!(vm.spec.os.flavour, "debian");
        assert_eq!(vm.spec.volumes.len(), 1);
        assert!(vm.spec.volumes[0].private && !vm.spec.volumes[0].bootable);
        assert_eq!(vm.spec.provider.as_deref(), Some("ionos"));
        assert!(vm.warnings.is_empty(), "{:?}", vm.warnings);
    }

    #[test]
    fn pci_as_object_or_list() {
        let mut v = seed();
        v["specs"]["req"]["pci"]["devices"] = json!({"10de:1BB1": 2});
        assert_eq!(VmCreate::parse(&v).unwrap().spec.pci[0].quantity, 2);
        v["specs"]["req"]["pci"]["devices"] =
            json!([{"vendor": "10de", "model": "1bb1", "quantity": 1}]);
        assert_eq!(VmCreate::parse(&v).unwrap().spec.pci[0].model, "1bb1");
        v["specs"]["req"]["pci"]["devices"] = json!({"nvidia": 1});
        assert_eq!(
            fields(VmCreate::parse(&v).unwrap_err()),
            vec!["specs.req.pci.devices.nvidia"]
        );
    }

    #[test]
    fn every_bad_field_is_named() {
        let mut v = seed();
        v["specs"]["vm_name"] = json!("bad_name!");
        v["specs"]["req"]["cpu"]["numberOfCores"] = json!("two");
        v["specs"]["req"]["mem"]["capacity"] = json!(0);
        v["specs"]["req"]["mem"]["requireECC"] = json!("maybe");
        v["specs"]["volumes"][0]["size"] = json!(-1);
        v["specs"]["authentication"]["ssh-key"] = json!("ssh-rsa AAAA... user@host");
        v["specs"]["req"]["misc"]["osDistribution"] = json!("TempleOS");
        let mut names = fields(VmCreate::parse(&v).unwrap_err());
        names.sort();
        assert_eq!(
            names,
            vec![
                "specs.authentication.ssh-key",
                "specs.req.cpu.numberOfCores",
                "specs.req.mem.capacity",
                "specs.req.mem.requireECC",
                "specs.req.misc.osDistribution",
                "specs.vm_name",
                "specs.volumes[0].size",
            ]
        );
    }

    #[test]
    fn unknown_fields_warn() {
        let mut v = seed();
        v["specs"]["req"]["cpu"]["turbo"] = json!(true);
        v["colour"] = json!("blue");
        let vm = VmCreate::parse(&v).unwrap();
        let w: Vec<_> = vm.warnings.iter().map(|w| w.field.as_str()).collect();
        assert_eq!(w, vec!["specs.req.cpu.turbo", "colour"]);
    }

    #[test]
    fn missing_sections_and_wrong_root() {
        assert_eq!(
            fields(VmCreate::parse(&json!([])).unwrap_err()),
            vec!["(body)"]
        );
        assert_eq!(
            fields(VmCreate::parse(&json!({})).unwrap_err()),
            vec!["specs"]
        );
        let v = json!({"specs": {"vm_name": "x", "req": {}}});
        let mut names = fields(VmCreate::parse(&v).unwrap_err());
        names.sort();
        assert_eq!(names, vec!["specs.req.cpu", "specs.req.mem"]);
    }

    #[test]
    fn pci_devices_are_bounded_and_unique() {
        let mut v = seed();
        v["specs"]["req"]["pci"]["devices"] = json!({"10de:1bb1": 1, "10DE:1BB1": 1});
        assert_eq!(
            fields(VmCreate::parse(&v).unwrap_err()),
            vec!["specs.req.pci.devices"]
        );
        v["specs"]["req"]["pci"]["devices"] = json!([
            {"vendor": "10de", "model": "1bb1"},
            {"vendor": "10DE", "model": "1BB1", "quantity": 2}
        ]);
        assert_eq!(
            fields(VmCreate::parse(&v).unwrap_err()),
            vec!["specs.req.pci.devices"]
        );
        let many: serde_json::Map<String, Value> = (0..9)
            .map(|i| (format!("10de:{i:04x}"), json!(1)))
            .collect();
        v["specs"]["req"]["pci"]["devices"] = Value::Object(many);
        assert_eq!(
            fields(VmCreate::parse(&v).unwrap_err()),
            vec!["specs.req.pci.devices"]
        );
    }

    fn target(name: &str, provider: &str, continent: &str, enabled: bool) -> Target {
        Target {
            id: crate::TargetId::new(),
            name: name.into(),
            host: "127.0.0.1".into(),
            compute_port: 1,
            storage_port: 2,
            network_port: 3,
            auth_port: 4,
            provider: provider.into(),
            region: format!("{name}-region"),
            continent: continent.into(),
            enabled,
        }
    }

    #[test]
    fn placement_constraints_name_the_field_and_the_choices() {
        let targets = [
            target("a", "ionos", "europe", true),
            target("b", "ovh", "north-america", true),
            target("c", "gigas", "europe", false),
        ];
        let mut spec = VmCreate::parse(&seed()).unwrap().spec;
        check_placement(&targets, &spec).unwrap();
        spec.continent = Some("north-america".into());
        let Err(crate::Error::InvalidInput { fields }) = check_placement(&targets, &spec) else {
            panic!("ionos is not in north-america")
        };
        assert_eq!(fields[0].name, "continent");
        assert!(fields[0].messages[0].contains("with the other constraints"));
        spec.provider = Some("gigas".into());
        let Err(crate::Error::InvalidInput { fields }) = check_placement(&targets, &spec) else {
            panic!("gigas is disabled")
        };
        assert_eq!(fields[0].name, "provider");
        assert!(fields[0].messages[0].ends_with("available: ionos, ovh"));
    }

    #[test]
    fn parse_placed_names_a_bad_constraint_with_the_other_fields() {
        let targets = [target("a", "ionos", "europe", true)];
        VmCreate::parse_placed(&seed(), &targets).unwrap();
        let mut v = seed();
        v["provider"] = json!("nowhere");
        v["specs"]["vm_name"] = json!("a_b");
        let mut names = fields(VmCreate::parse_placed(&v, &targets).unwrap_err());
        names.sort();
        assert_eq!(names, vec!["provider", "specs.vm_name"]);
    }

    #[test]
    fn threads_need_smt() {
        let mut v = seed();
        v["specs"]["req"]["cpu"]["numberOfThreads"] = json!(2);
        assert_eq!(
            fields(VmCreate::parse(&v).unwrap_err()),
            vec!["specs.req.cpu.numberOfThreads"]
        );
        v["specs"]["req"]["cpu"]["smtEnabled"] = json!("True");
        assert_eq!(VmCreate::parse(&v).unwrap().spec.cpu.vcpus(), 4);
    }
}
