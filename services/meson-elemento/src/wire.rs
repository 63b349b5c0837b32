//! The daemons' JSON and its mapping onto meson's `/v1` wire types.
//!
//! Units as the clients read them: `req_json.ramsize` in GB (both clients
//! multiply by 10^9), template `ram.ramsize` and specfile `ramsize` in MiB,
//! volume `size` in bytes, KaaS `ram_gb` in GB. Dates as
//! `M/D/YYYY, HH:MM:SS` (UTC): the GUI parses that and throws on ISO-8601.
//! Pure functions; the routes call meson with what they build.

use crate::error::{DResult, Detail};
use chrono::{DateTime, Utc};
use meson_types as mt;
use serde_json::{Map, Value, json};

/// The date format the GUI parses.
pub fn daemon_date(t: &DateTime<Utc>) -> String {
    t.format("%-m/%-d/%Y, %H:%M:%S").to_string()
}

/// A whole number as an integer, else as a float (`2048 MiB` is `2` GB).
fn number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

const GB: u64 = 1_000_000_000;

// --- compute

/// `GET /templates`: a flavour as a daemon template (`ram.ramsize` in MiB).
pub fn template(f: &mt::catalog::Flavor) -> Value {
    let pci: Vec<Value> = match (&f.gpu_model, f.gpus) {
        (Some(model), n) if n > 0 => {
            let (vendor, model) = model.split_once(':').unwrap_or(("", model.as_str()));
            vec![json!({"vendor": vendor, "model": model, "quantity": n})]
        }
        _ => Vec::new(),
    };
    json!({
        "info": {"name": f.name, "description": f.description},
        "cpu": {"slots": f.vcpus, "overprovision": 1, "allowSMT": false,
                "archs": ["X86_64"], "flags": f.cpu_flags},
        "ram": {"ramsize": f.memory_mib, "reqECC": false},
        "pci": pci,
    })
}

/// The daemons' state words (libvirt's) for meson's VM statuses.
pub fn vm_state(status: &str) -> &str {
    match status {
        "off" => "shut off",
        "stopping" => "in shutdown",
        other => other,
    }
}

/// What the storage daemon shows of a volume.
pub struct VolumeFacts<'a> {
    pub id: uuid::Uuid,
    pub name: &'a str,
    pub size_gb: u32,
    /// meson's kind: `boot`, `cloudinit` or `data`.
    pub kind: &'a str,
    /// meson's status (`creating`, `available`, `attached`, ...).
    pub status: &'a str,
    pub bootable: bool,
    pub readonly: bool,
    /// The host it lives on (or a stand-in until it is placed).
    pub server: &'a str,
    /// The VM it belongs or is attached to.
    pub vm: Option<uuid::Uuid>,
}

/// A volume as the storage daemon shows it (`size` in bytes).
pub fn volume_object(v: &VolumeFacts<'_>) -> Value {
    let bytes = u64::from(v.size_gb) * GB;
    json!({
        "volumeID": v.id,
        "name": v.name,
        "size": bytes,
        "sizeOnDisk": bytes,
        "format": "qcow2",
        "bus": "virtio",
        "alg": "no",
        "kind": v.kind,
        "status": v.status,
        "bootable": v.bootable,
        "cloudinit": v.kind == "cloudinit",
        // meson volumes belong to the caller's tenant, attach to one VM.
        "private": true,
        "readonly": v.readonly,
        "shareable": false,
        "clonable": false,
        "own": true,
        "nservers": 1,
        // elemento-cli prints `servers` joined and fails on an empty list.
        "servers": [v.server],
        "vm": v.vm,
    })
}

/// A meson volume (standalone, or a VM's own by id) as the storage daemon
/// lists it.
pub fn volume(v: &mt::volume::Volume) -> Value {
    let server = v
        .host
        .as_deref()
        .or(v.provider.as_deref())
        .unwrap_or("meson");
    let mut o = volume_object(&VolumeFacts {
        id: v.id,
        name: &v.name,
        size_gb: v.size,
        kind: &v.kind,
        status: &v.status,
        bootable: v.bootable,
        readonly: v.readonly,
        server,
        vm: v.attached_to.or(v.vm),
    });
    o["creation_date"] = json!(daemon_date(&v.created));
    o
}

/// Where a VM runs, as a URL (elemento-cli splits it on `:`; never null).
fn server_url(vm: &mt::Vm) -> String {
    let host = vm
        .host
        .clone()
        .or_else(|| vm.provider.clone())
        .unwrap_or_else(|| "meson".to_owned());
    format!("https://{host}")
}

/// `GET /status`: a VM as the compute daemon lists it.
pub fn vm_row(vm: &mt::Vm) -> Value {
    let s = &vm.specs;
    let server = vm.host.clone().unwrap_or_else(|| "meson".to_owned());
    let volumes: Vec<Value> = vm
        .volumes
        .iter()
        .map(|v| {
            volume_object(&VolumeFacts {
                id: v.id,
                name: &v.name,
                size_gb: v.size,
                kind: &v.kind,
                status: if v.standalone {
                    "attached"
                } else {
                    "available"
                },
                bootable: v.kind == "boot",
                readonly: false,
                server: &server,
                vm: Some(vm.id),
            })
        })
        .collect();
    let pcidevs: Vec<Value> = s
        .pci_devices
        .iter()
        .map(|d| json!({"vendor": d.vendor, "model": d.model, "quantity": d.quantity}))
        .collect();
    let mac = vm.private_net.first().map(|n| n.mac_address.clone());
    let states = vm_state(&vm.status);
    let price = vm
        .price
        .as_ref()
        .map(|p| json!({"hour": p.hourly, "month": p.monthly, "unit": p.currency}));
    json!({
        "uniqueID": vm.id,
        "serverurl": server_url(vm),
        "target_type": "meson_private",
        "provider": vm.provider,
        "states": states,
        "status": vm.status,
        // meson's daily backups (`POST /backup/schedule`): `{window, keep}`,
        // null when off.
        "backups": vm.backups,
        "req_json": {
            "vm_name": vm.name,
            "slots": s.vcpus,
            "overprovision": 1,
            "allowSMT": s.smt,
            "arch": s.arch.first().cloned().unwrap_or_else(|| "X86_64".to_owned()),
            "flags": s.flags,
            "ramsize": number(s.memory_mib as f64 / 1024.0),
            "reqECC": s.require_ecc,
            "volumes": volumes,
            "pcidevs": pcidevs,
            "netdevs": vm.private_net.iter().map(|n| json!({
                "network_uid": n.network,
                "mac": n.mac_address,
                "ip": n.ip,
            })).collect::<Vec<_>>(),
            "os_family": "linux",
            "os_flavour": s.os_distribution.to_lowercase(),
            "creation_date": daemon_date(&vm.created),
            "states": states,
            "provider": vm.provider,
            "deployment_region": vm.region,
            // elemento-cli prints the network line only when `domviewer`
            // is present; the viewer fields have nothing in meson.
            "network_config": {"ipv4": vm.ipv4, "mac": mac},
            "viewer": null,
            "domviewer": null,
            "mesos": {"provider": vm.provider, "price": price},
        },
    })
}

/// A field of a JSON object, `null` counting as absent.
fn get<'a>(o: &'a Value, key: &str) -> Option<&'a Value> {
    o.get(key).filter(|v| !v.is_null())
}

/// Daemon booleans: `true`, `"True"`, `1` (meson reads them the same way).
fn passthrough(v: Option<&Value>) -> Option<Value> {
    v.cloned()
}

/// A daemon specfile, flat (`slots`, `ramsize`, ...) or a template as
/// elemento-cli sends it (`cpu{slots,...}`, `ram{ramsize,...}`), as meson's
/// VM request. `vm_name` is the name to use; `quote`: for `/v1/quotes`.
pub fn specfile_to_vm(body: &Value, vm_name: &str) -> DResult<Value> {
    if !body.is_object() {
        return Err(Detail::field(
            "body",
            "must be a JSON object (the specfile)",
        ));
    }
    let cpu_src = get(body, "cpu").filter(|c| c.is_object()).unwrap_or(body);
    let ram_src = get(body, "ram").filter(|r| r.is_object()).unwrap_or(body);
    let slots = get(cpu_src, "slots").ok_or_else(|| Detail::field("slots", "is required"))?;
    let ramsize =
        get(ram_src, "ramsize").ok_or_else(|| Detail::field("ramsize", "is required (MiB)"))?;
    let mut cpu = Map::new();
    cpu.insert("numberOfCores".into(), slots.clone());
    if let Some(v) = passthrough(get(cpu_src, "allowSMT")) {
        cpu.insert("smtEnabled".into(), v);
    }
    if let Some(v) = get(cpu_src, "archs").or_else(|| get(cpu_src, "arch")) {
        let v = match v {
            Value::String(s) => json!([s.to_uppercase()]),
            Value::Array(a) => Value::Array(
                a.iter()
                    .map(|x| x.as_str().map_or(x.clone(), |s| json!(s.to_uppercase())))
                    .collect(),
            ),
            other => other.clone(),
        };
        cpu.insert("arch".into(), v);
    }
    if let Some(v) = get(cpu_src, "flags") {
        cpu.insert("flags".into(), v.clone());
    }
    if let Some(v) = get(cpu_src, "min_frequency").or_else(|| get(body, "min_frequency")) {
        cpu.insert("min_frequency".into(), v.clone());
    }
    let mut mem = Map::new();
    mem.insert("capacity".into(), ramsize.clone());
    if let Some(v) = passthrough(get(ram_src, "reqECC")) {
        mem.insert("requireECC".into(), v);
    }
    let mut req = Map::new();
    req.insert("cpu".into(), Value::Object(cpu));
    req.insert("mem".into(), Value::Object(mem));
    if let Some(pci) = get(body, "pci") {
        match pci {
            Value::Array(list) => {
                req.insert("pci".into(), json!({"devices": list}));
            }
            _ => {
                return Err(Detail::field(
                    "pci",
                    "must be a list of {vendor, model, quantity}",
                ));
            }
        }
    }
    if let Some(misc) = get(body, "misc") {
        if let Some(family) = get(misc, "os_family") {
            let family = family.as_str().unwrap_or_default();
            if !family.eq_ignore_ascii_case("linux") {
                return Err(Detail::field(
                    "misc.os_family",
                    format!("meson runs Linux guests only, not {family:?}"),
                ));
            }
        }
        if let Some(flavour) = get(misc, "os_flavour") {
            req.insert("misc".into(), json!({"osDistribution": flavour}));
        }
    }
    let mut out = json!({
        "specs": {"req": Value::Object(req), "vm_name": vm_name},
    });
    // `<provider>.mesos.elemento.cloud` picks a provider; a host IP or
    // anything else leaves the placement to meson.
    if let Some(ip) = get(body, "ip_address").and_then(Value::as_str)
        && let Some(p) = ip.strip_suffix(".mesos.elemento.cloud")
    {
        out["provider"] = json!(p);
    }
    if let Some(p) = get(body, "provider").and_then(Value::as_str) {
        out["provider"] = json!(p);
    }
    Ok(out)
}

/// meson's VM request fields back to the specfile's names.
pub fn specfile_field(meson: &str) -> String {
    const MAP: &[(&str, &str)] = &[
        ("specs.req.cpu.numberOfCores", "slots"),
        ("specs.req.cpu.smtEnabled", "allowSMT"),
        ("specs.req.cpu.numberOfThreads", "allowSMT"),
        ("specs.req.cpu.arch", "archs"),
        ("specs.req.cpu.flags", "flags"),
        ("specs.req.cpu.min_frequency", "min_frequency"),
        ("specs.req.mem.capacity", "ramsize"),
        ("specs.req.mem.requireECC", "reqECC"),
        ("specs.req.pci.devices", "pci"),
        ("specs.req.misc.osDistribution", "misc.os_flavour"),
        ("specs.vm_name", "info.vm_name"),
        ("specs.volumes", "volumes"),
        ("provider", "ip_address"),
    ];
    // A standalone volume to attach, `volumes[i]`: the register's `{vid}`.
    if meson.starts_with("volumes[") && meson.ends_with(']') {
        return format!("{meson}.vid");
    }
    for (from, to) in MAP {
        if let Some(rest) = meson.strip_prefix(from) {
            return format!("{to}{rest}");
        }
    }
    meson.to_owned()
}

/// `POST /canallocate`'s answer: meson's quotes as `mesos[]`.
pub fn canallocate(q: &mt::quote::QuoteResponse) -> Value {
    let mesos: Vec<Value> = q
        .quotes
        .iter()
        .map(|x| {
            json!({"provider": x.provider, "region": x.region,
                   "price": {"hour": x.price.hourly, "month": x.price.monthly, "unit": x.price.currency}})
        })
        .collect();
    json!({"canallocate": !mesos.is_empty(), "nservers": mesos.len(), "mesos": mesos})
}

// --- networks

/// A meson network as the network daemon lists it.
pub fn network_object(n: &mt::network::Network) -> Value {
    let bits = n
        .cidr
        .split_once('/')
        .and_then(|(_, b)| b.parse::<u8>().ok())
        .unwrap_or(24);
    let dhcp = n
        .dhcp
        .then(|| json!({"start": n.range.start, "end": n.range.last, "hosts": []}));
    json!({
        "network_uid": n.id,
        "network_name": n.name,
        "type": "libvirt",
        "mode": "nat",
        "private": true,
        "status": n.status,
        "creator_uid": null,
        "servers": [],
        "device_name": null,
        "libvirt_network": null,
        "ip": {"address": format!("{}/{bits}", n.gateway), "net_bits": bits, "dhcp": dhcp},
        "routes": [],
        "cidr": n.cidr,
        "vms": n.vms,
        "creation_date": daemon_date(&n.created),
    })
}

/// The network daemon's create body as meson's.
pub fn network_create(body: &Value) -> DResult<Value> {
    let name = get(body, "network_name")
        .or_else(|| get(body, "name"))
        .ok_or_else(|| Detail::field("network_name", "is required"))?;
    if let Some(t) = get(body, "type").and_then(Value::as_str)
        && t != "libvirt"
    {
        return Err(Detail::field(
            "type",
            format!("meson offers libvirt networks only, not {t:?}"),
        ));
    }
    let ip = get(body, "ip").ok_or_else(|| {
        Detail::field(
            "ip.address",
            "is required (the gateway's CIDR, e.g. 192.168.101.1/24)",
        )
    })?;
    let address = get(ip, "address").and_then(Value::as_str).ok_or_else(|| {
        Detail::field(
            "ip.address",
            "is required (the gateway's CIDR, e.g. 192.168.101.1/24)",
        )
    })?;
    let net: ipnet::Ipv4Net = address
        .parse()
        .map_err(|_| Detail::field("ip.address", format!("{address:?} is not an IPv4 CIDR")))?;
    let mut out = json!({
        "name": name,
        "cidr": net.trunc().to_string(),
        "gateway": net.addr().to_string(),
    });
    match get(ip, "dhcp") {
        Some(d) => {
            out["dhcp"] = json!(true);
            if let (Some(start), Some(end)) = (get(d, "start"), get(d, "end")) {
                out["dhcp_range"] = json!({"start": start, "last": end});
            }
        }
        None => out["dhcp"] = json!(false),
    }
    Ok(out)
}

pub fn network_field(meson: &str) -> String {
    match meson {
        "name" => "network_name".into(),
        "cidr" | "gateway" => "ip.address".into(),
        "dhcp" => "ip.dhcp".into(),
        m if m.starts_with("dhcp_range") => "ip.dhcp".into(),
        m => m.to_owned(),
    }
}

// --- port forwards

/// A forward's public address as the daemon's `serverurl` (an IPv6 address
/// in brackets).
fn forward_url(ip: &str) -> String {
    if ip.contains(':') {
        format!("https://[{ip}]")
    } else {
        format!("https://{ip}")
    }
}

/// A meson port forward as the network daemon shows it: `port` is the
/// host's (meson's `public_port`), `target_port` the VM's (`private_port`),
/// `serverurl` the host's public address; `vm` is its VM when known (its
/// name as `target`, its provider). meson has no tailscale, and never
/// replaces a forward (`force`). Extra keys: meson's `status` (`creating`,
/// `active`, `deleting`, `error`) and why it is in `error`, its network,
/// its creation date.
pub fn port_forward_object(f: &mt::port_forward::PortForward, vm: Option<&mt::Vm>) -> Value {
    json!({
        "serverurl": forward_url(&f.public_ip),
        "provider": vm.and_then(|v| v.provider.clone()),
        "protocol": f.protocol,
        "port": f.public_port,
        "target": vm.map_or("", |v| v.name.as_str()),
        "target_vm_uid": f.vm,
        "target_port": f.private_port,
        "tailscale": false,
        "force": false,
        "forward_uid": f.id,
        "status": f.status,
        "error_message": f.error,
        "network_uid": f.network,
        "creation_date": daemon_date(&f.created),
    })
}

/// The network daemon's port-forward create body as meson's, forwarding to
/// VM `vm` (the route finds it from `target_vm_uid` or `target`).
/// `tailscale: true` is refused by name: meson has no tailscale, a forward
/// is reached at its VM's host's address. `force` is read by no one: meson
/// never takes a port in use nor replaces a forward (a taken port is a
/// `409` whatever it says). `serverurl` is not passed on either: a forward
/// lives on its VM's host, whose address the answer's `serverurl` gives.
/// A client-chosen `forward_uid` is not kept: meson names its forwards.
pub fn port_forward_create(body: &Value, vm: uuid::Uuid) -> DResult<Value> {
    if !body.is_object() {
        return Err(Detail::field(
            "body",
            "must be a JSON object {protocol, port, target_vm_uid, target_port}",
        ));
    }
    if let Some(t) = get(body, "tailscale") {
        match mt::lenient::boolean(t) {
            Some(false) => {}
            Some(true) => {
                return Err(Detail::field(
                    "tailscale",
                    "meson has no tailscale: a forward is reached at its VM's host's \
                     public address (send false, or leave it out)",
                ));
            }
            None => {
                return Err(Detail::field(
                    "tailscale",
                    format!("must be {}", mt::lenient::BOOLEAN),
                ));
            }
        }
    }
    let port = get(body, "port")
        .ok_or_else(|| Detail::field("port", "is required (the host's public port)"))?;
    let target_port = get(body, "target_port")
        .ok_or_else(|| Detail::field("target_port", "is required (the VM's port)"))?;
    let mut out = json!({"public_port": port, "vm": vm, "private_port": target_port});
    if let Some(p) = get(body, "protocol") {
        out["protocol"] = p.clone();
    }
    Ok(out)
}

/// meson's port-forward fields back to the daemon's names.
pub fn port_forward_field(meson: &str) -> String {
    match meson {
        "public_port" => "port".into(),
        "private_port" => "target_port".into(),
        "vm" => "target_vm_uid".into(),
        m => m.to_owned(),
    }
}

/// A resize's field as the daemon's `/update` names it.
pub fn resize_field(meson: &str) -> String {
    match meson {
        "cores" => "slots".into(),
        "memory_mib" => "ramsize".into(),
        m => m.to_owned(),
    }
}

// --- backups

/// A backup as the compute daemon shows it: the AtomOS daemon's backup
/// object (`backup_id`, `local_index` the VM's id, `vm_name`, `name`,
/// `creation_date`, `size` in GB, `volumes`), the `created_at` Electros
/// keeps (RFC 3339), and meson's `status` (`creating` → `available`),
/// `kind`, host, `labels`, `error_message` and `expires`.
pub fn backup_object(b: &mt::backup::Backup) -> Value {
    use chrono::SecondsFormat::Millis;
    let volumes: Vec<Value> = b
        .volumes
        .iter()
        .map(|v| json!({"volume_id": v.volume, "kind": v.kind, "size": v.size}))
        .collect();
    json!({
        "backup_id": b.id,
        "local_index": b.vm,
        "vm_name": b.vm_name,
        "name": b.name,
        "creation_date": daemon_date(&b.created),
        "created_at": b.created.to_rfc3339_opts(Millis, true),
        "size": b.size,
        "volumes": volumes,
        "status": b.status,
        "kind": b.kind,
        "serverurl": format!("https://{}", b.host),
        "host": b.host,
        "provider": b.provider,
        "region": b.region,
        "labels": b.labels,
        "error_message": b.error,
        "expires": b.expires.map(|t| t.to_rfc3339_opts(Millis, true)),
    })
}

/// The compute daemon's `POST /backup` body as meson's: `name` and
/// `labels` are passed on (meson checks them, under the same names); the
/// VM is `local_index`, the route's. A client-chosen `backup_id` is not
/// kept (meson names its backups), and nothing else is read.
pub fn backup_create(body: &Value) -> DResult<Value> {
    if !body.is_object() {
        return Err(Detail::field(
            "body",
            "must be a JSON object {local_index, name?}",
        ));
    }
    let mut out = json!({});
    for key in ["name", "labels"] {
        if let Some(v) = get(body, key) {
            out[key] = v.clone();
        }
    }
    Ok(out)
}

/// meson's restore fields back to the daemon's names (`name_field`: the
/// key the client named the new VM with).
pub fn restore_field(meson: &str, name_field: &str) -> String {
    match meson {
        "backup" => "backup_id".into(),
        "name" => name_field.to_owned(),
        m => m.to_owned(),
    }
}

/// What `POST /backup/schedule` asks of a VM's automatic backups.
#[derive(Debug, PartialEq)]
pub enum Schedule {
    /// Stop them (meson's `disable-backups`).
    Off,
    /// meson's `enable-backups` with what the body gave: `window` (`HH-HH`,
    /// UTC) and `keep`, each `None` when the body says nothing of it.
    On {
        window: Option<String>,
        /// The key the window came from (`window`, `hour`, `time`, ...).
        window_field: &'static str,
        keep: Option<Value>,
        /// The key `keep` came from (`keep`, `retention`, ...).
        keep_field: &'static str,
    },
}

/// The first of `keys` the body has (`null` counting as absent).
fn first<'a>(body: &'a Value, keys: &[&'static str]) -> Option<(&'static str, &'a Value)> {
    keys.iter().find_map(|k| get(body, k).map(|v| (*k, v)))
}

/// An hour of the day from `09`, `9`, `"09:30"`, `"9:30:00"` (minutes are
/// dropped: meson's windows are whole hours).
fn hour_of(v: &Value) -> Option<u8> {
    let h = match v {
        Value::Number(_) => match mt::lenient::integer(v) {
            mt::lenient::Integer::Value(n) => n,
            _ => return None,
        },
        Value::String(s) => {
            let mut parts = s.trim().split(':');
            let h = parts.next()?;
            if h.is_empty() || h.len() > 2 || !h.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            for rest in parts {
                if rest.len() != 2 || !rest.bytes().all(|c| c.is_ascii_digit()) {
                    return None;
                }
            }
            h.parse().ok()?
        }
        _ => return None,
    };
    u8::try_from(h).ok().filter(|h| *h < 24)
}

/// The hour a daily cron line (`m h * * *`) runs at.
fn cron_hour(cron: &str) -> Option<u8> {
    let f: Vec<&str> = cron.split_whitespace().collect();
    match f.as_slice() {
        [m, h, "*", "*", "*"] if m.parse::<u8>().is_ok_and(|m| m < 60) => {
            hour_of(&Value::String((*h).to_owned()))
        }
        _ => None,
    }
}

/// Words that turn a schedule off.
fn is_off_word(s: &str) -> bool {
    matches!(
        s.trim().to_ascii_lowercase().as_str(),
        "none" | "off" | "never" | "disabled" | "disable"
    )
}

/// The compute daemon's `POST /backup/schedule` body (the VM aside) as
/// meson's backup policy. meson backs a VM up once a day, starting within
/// a window of UTC hours, and keeps the newest `keep`:
///
/// - `enabled` (or `enable`, `active`) `false`, or a `frequency` (or
///   `interval`) of `none`/`off`/`never`/`disabled`, turns them off;
/// - `frequency`/`interval` must otherwise be daily (`daily`, `day`, `1d`,
///   `24h`): another frequency is refused by name;
/// - the time: `window` (`HH-HH`) as is, else `hour`/`time`/`start_time`
///   (`22`, `"22:30"`: the hour's window, `22-23`) or a daily `cron`
///   (`m h * * *`); a `timezone` other than UTC is refused (the hours are
///   UTC);
/// - `keep` (or `retention`, `retention_days`, `max_backups`, `keep_last`,
///   `retain`): how many are kept (daily backups, so days), 1 to 31.
///
/// Anything else is ignored.
pub fn backup_schedule(body: &Value) -> DResult<Schedule> {
    if !body.is_object() {
        return Err(Detail::field(
            "body",
            "must be a JSON object {local_index, enabled?, hour?, keep?}",
        ));
    }
    if let Some((key, v)) = first(body, &["enabled", "enable", "active"]) {
        match mt::lenient::boolean(v) {
            Some(true) => {}
            Some(false) => return Ok(Schedule::Off),
            None => {
                return Err(Detail::field(
                    key,
                    format!("must be {}", mt::lenient::BOOLEAN),
                ));
            }
        }
    }
    if let Some((key, v)) = first(body, &["frequency", "interval"]) {
        let daily = match v {
            Value::String(s) if is_off_word(s) => return Ok(Schedule::Off),
            // Empty: not said, meson's daily.
            Value::String(s) => matches!(
                s.trim().to_ascii_lowercase().as_str(),
                "" | "daily" | "day" | "1d" | "24h" | "everyday" | "every day"
            ),
            _ => false,
        };
        if !daily {
            return Err(Detail::field(
                key,
                format!(
                    "meson backs a VM up once a day: send \"daily\" (or leave {key} out), \
                     got {v}"
                ),
            ));
        }
    }
    if let Some((key, v)) = first(body, &["timezone", "tz"]) {
        let utc = v.as_str().is_some_and(|s| {
            matches!(
                s.trim().to_ascii_uppercase().as_str(),
                "UTC" | "Z" | "GMT" | "ETC/UTC" | "ETC/GMT" | "+00:00" | "UTC+0" | "UTC+00:00"
            )
        });
        if !utc {
            return Err(Detail::field(
                key,
                format!("meson's backup hours are UTC: send the time in UTC, got {v}"),
            ));
        }
    }
    let (window, window_field) = if let Some(w) = get(body, "window") {
        match w {
            Value::String(s) => (Some(s.clone()), "window"),
            other => {
                return Err(Detail::field(
                    "window",
                    format!("must be \"HH-HH\" (UTC hours, e.g. \"22-02\"), not {other}"),
                ));
            }
        }
    } else if let Some((key, v)) = first(body, &["hour", "time", "start_time"]) {
        let h = hour_of(v).ok_or_else(|| {
            Detail::field(
                key,
                format!("must be an hour of the day, 0 to 23 (or \"HH:MM\", UTC), not {v}"),
            )
        })?;
        (Some(format!("{h:02}-{:02}", (h + 1) % 24)), key)
    } else if let Some(c) = get(body, "cron") {
        let h = c.as_str().and_then(cron_hour).ok_or_else(|| {
            Detail::field(
                "cron",
                format!(
                    "meson backs a VM up once a day: send a daily line, \"m h * * *\" \
                     (UTC), not {c}"
                ),
            )
        })?;
        (Some(format!("{h:02}-{:02}", (h + 1) % 24)), "cron")
    } else {
        (None, "window")
    };
    let (keep, keep_field) = match first(
        body,
        &[
            "keep",
            "retention",
            "retention_days",
            "max_backups",
            "keep_last",
            "retain",
        ],
    ) {
        // A count as elemento-cli sends numbers: a string of digits too.
        Some((key, Value::String(s))) => match s.trim().parse::<u64>() {
            Ok(n) => (Some(json!(n)), key),
            Err(_) => (Some(Value::String(s.clone())), key),
        },
        Some((key, v)) => (Some(v.clone()), key),
        None => (None, "keep"),
    };
    Ok(Schedule::On {
        window,
        window_field,
        keep,
        keep_field,
    })
}

// --- consoles

/// The port a console's WebSocket URL (`wss://host[:port]/...`) is reached
/// on: the URL's own, else its scheme's (443 for `wss`/`https`, 80 for
/// `ws`/`http`); `None` for a URL it cannot read.
pub fn url_port(url: &str) -> Option<u16> {
    let (scheme, rest) = url.split_once("://")?;
    let default = match scheme.to_ascii_lowercase().as_str() {
        "wss" | "https" => 443,
        "ws" | "http" => 80,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    // An IPv6 literal's colons are inside its brackets.
    let after_host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split_once(']')?.1,
        None => host_port.split_once(':').map_or("", |(_, p)| p),
    };
    match after_host.strip_prefix(':').unwrap_or(after_host) {
        "" => Some(default),
        port => port.parse().ok(),
    }
}

/// A meson console as the compute daemon's `porttunnel/vncWebSocket`
/// tunnel: `instance_id` (the console's id), `local_index` (its VM's),
/// `vm_name`, `status` `open` while it is live (meson's `requested`, not
/// connected to yet, and `open`), `sessions` (1 while a client is
/// connected) and `creation_date` (RFC 3339, as AtomOS gives it). `ws_url`
/// (and its `port`) only when it was just requested: its token is good for
/// one connection and shown once; elsewhere `ws_url` is `""` and `port`
/// null. The VNC password is never in it (a request's answer adds it).
pub fn tunnel_object(c: &mt::console::Console, vm_name: &str, ws_url: Option<&str>) -> Value {
    use chrono::SecondsFormat::Millis;
    let live = matches!(c.status.as_str(), "requested" | "open");
    json!({
        "instance_id": c.id,
        "local_index": c.vm,
        "vm_name": vm_name,
        "ws_url": ws_url.unwrap_or_default(),
        "port": ws_url.and_then(url_port),
        "status": if live { "open" } else { "closed" },
        "sessions": u32::from(c.status == "open"),
        "creation_date": c.created.to_rfc3339_opts(Millis, true),
    })
}

// --- KaaS

/// The KaaS row (`running`): `provisioning` while meson creates.
pub fn kaas_status(status: &str) -> &str {
    match status {
        "creating" => "provisioning",
        other => other,
    }
}

pub fn kaas_row(c: &mt::cluster::Cluster) -> Value {
    json!({
        "service_type": "kaas",
        "service_uuid": c.id,
        "billing_uuid": null,
        "cluster_name": c.name,
        "provider": c.provider,
        "status": kaas_status(&c.status),
        "version": c.kubernetes_version,
        "network_cidr": c.network.cidr,
        "location": c.region.clone().unwrap_or_default(),
    })
}

/// `running/{uuid}`: the row with what a detail page shows.
pub fn kaas_detail(c: &mt::cluster::Cluster) -> Value {
    let mut row = kaas_row(c);
    row["endpoint"] = json!(c.control_plane.endpoint);
    row["error_message"] = json!(c.error_message);
    row["created"] = json!(daemon_date(&c.created));
    row["update_policy"] = json!(c.update_policy);
    row["controlplane_ha"] = json!(c.control_plane.nodes > 1);
    row["nodepools"] = c
        .pools
        .iter()
        .map(|p| {
            json!({"pool_name": p.name, "autoscale": p.autoscale, "min_nodes": p.min_nodes,
                   "max_nodes": p.max_nodes, "desired_nodes": p.desired_nodes,
                   "current_nodes": p.current_nodes,
                   "specs": {"cpu_cores": p.specs.cpu, "ram_gb": number(p.specs.ram as f64 / 1024.0),
                             "storage_gb": p.specs.storage, "gpu": p.specs.gpu}})
        })
        .collect();
    row
}

/// Expands the form's slash-separated keys (`nodes_subnet/network`) into
/// nested objects, at every level; a nested key wins over a flat one.
pub fn expand_slash_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            let (flat, nested): (Vec<_>, Vec<_>) = m.iter().partition(|(k, _)| k.contains('/'));
            for (k, val) in flat {
                let mut parts: Vec<&str> = k.split('/').collect();
                let last = parts.pop().unwrap_or_default();
                let mut cur = &mut out;
                for p in parts {
                    let entry = cur.entry(p.to_owned()).or_insert_with(|| json!({}));
                    if !entry.is_object() {
                        *entry = json!({});
                    }
                    cur = entry.as_object_mut().expect("an object");
                }
                cur.insert(last.to_owned(), expand_slash_keys(val));
            }
            for (k, val) in nested {
                let val = expand_slash_keys(val);
                match (out.get_mut(k.as_str()), &val) {
                    (Some(Value::Object(existing)), Value::Object(new)) => {
                        for (nk, nv) in new {
                            existing.insert(nk.clone(), nv.clone());
                        }
                    }
                    _ => {
                        out.insert(k.clone(), val);
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(expand_slash_keys).collect()),
        other => other.clone(),
    }
}

/// The Electros KaaS form as meson's KaaS request. Translation only:
/// ranges, names and versions are meson's to check.
pub fn kaas_form(body: &Value) -> DResult<Value> {
    let form = expand_slash_keys(body);
    if !form.is_object() {
        return Err(Detail::field(
            "body",
            "must be a JSON object (the KaaS form)",
        ));
    }
    let name = get(&form, "name")
        .ok_or_else(|| Detail::field("name", "is required"))?
        .as_str()
        .ok_or_else(|| Detail::field("name", "must be a string"))?;
    let billing = match get(&form, "billing_frequency").map(|b| b.as_str().unwrap_or_default()) {
        None => None,
        Some("day" | "week") => Some("HOURLY"),
        Some("month" | "year") => Some("MONTHLY"),
        Some(other) => {
            return Err(Detail::field(
                "billing_frequency",
                format!("must be day, week, month or year, not {other:?}"),
            ));
        }
    };
    let pools = get(&form, "nodepools")
        .ok_or_else(|| Detail::field("nodepools", "is required (at least one pool)"))?
        .as_array()
        .ok_or_else(|| Detail::field("nodepools", "must be a list"))?;
    let mut nodepool = Vec::new();
    for (i, p) in pools.iter().enumerate() {
        if !p.is_object() {
            return Err(Detail::field(
                &format!("nodepools[{i}]"),
                "must be an object",
            ));
        }
        if let Some(s) = get(p, "shared_storage_gb")
            && s.as_f64().is_some_and(|x| x > 0.0)
        {
            return Err(Detail::field(
                &format!("nodepools[{i}].shared_storage_gb"),
                "meson has no shared storage for node pools: leave it at 0",
            ));
        }
        let mut pool = Map::new();
        for key in [
            "pool_name",
            "autoscale",
            "min_nodes",
            "max_nodes",
            "desired_nodes",
        ] {
            if let Some(v) = get(p, key) {
                let v = match (key, v) {
                    ("pool_name", Value::String(s)) => json!(s.to_lowercase()),
                    _ => v.clone(),
                };
                pool.insert(key.to_owned(), v);
            }
        }
        if !pool.contains_key("desired_nodes")
            && let Some(min) = get(p, "min_nodes")
        {
            pool.insert("desired_nodes".into(), min.clone());
        }
        if let Some(specs) = get(p, "specs") {
            let mut s = Map::new();
            if let Some(v) = get(specs, "cpu_cores") {
                s.insert("cpu".into(), v.clone());
            }
            if let Some(v) = get(specs, "ram_gb") {
                let gb = v.as_f64().ok_or_else(|| {
                    Detail::field(
                        &format!("nodepools[{i}].specs.ram_gb"),
                        "must be a number (GB)",
                    )
                })?;
                s.insert("ram".into(), number(gb * 1024.0));
            }
            if let Some(v) = get(specs, "storage_gb") {
                s.insert("storage".into(), v.clone());
            }
            if let Some(v) = get(specs, "gpu") {
                s.insert("gpu".into(), v.clone());
            }
            pool.insert("specs".into(), Value::Object(s));
        }
        if let Some(b) = billing {
            pool.insert("billing".into(), json!(b));
        }
        nodepool.push(Value::Object(pool));
    }
    let subnet = get(&form, "nodes_subnet")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut nodes_subnet = Map::new();
    if let Some(d) = get(&subnet, "dhcp") {
        nodes_subnet.insert("dhcp".into(), d.clone());
    }
    // The form's default subnet when the client sent none.
    let network = get(&subnet, "network")
        .or_else(|| get(&subnet, "subnet_netmask"))
        .cloned()
        .unwrap_or_else(|| json!("192.170.5.0/24"));
    // The form has no DHCP range; meson wants one that leaves an address
    // outside it for the cluster's API endpoint. Keep the subnet's first
    // addresses (10, or 2 in a small subnet) out of the range.
    let dhcp = get(&subnet, "dhcp").is_none_or(|d| match d {
        Value::Bool(b) => *b,
        Value::String(s) => s.eq_ignore_ascii_case("true"),
        Value::Number(n) => n.as_u64() != Some(0),
        _ => true,
    });
    if dhcp
        && get(&subnet, "start_address").is_none()
        && get(&subnet, "last_address").is_none()
        && let Some((start, last)) = network.as_str().and_then(dhcp_range)
    {
        nodes_subnet.insert("start_address".into(), json!(start));
        nodes_subnet.insert("last_address".into(), json!(last));
    }
    for key in ["start_address", "last_address", "gateway"] {
        if let Some(v) = get(&subnet, key) {
            nodes_subnet.insert(key.into(), v.clone());
        }
    }
    nodes_subnet.insert("subnet_netmask".into(), network);
    let mut req = json!({
        "name": name.to_lowercase(),
        "nodepool": nodepool,
        "nodes_subnet": Value::Object(nodes_subnet),
    });
    if let Some(v) = get(&form, "update_policy") {
        req["update_policy"] = v.clone();
    }
    if let Some(v) = get(&form, "kubernetes_version") {
        req["kubernetes_version"] = v.clone();
    }
    if let Some(ha) = get(&form, "controlplane_ha") {
        let ha = match ha {
            Value::Bool(b) => *b,
            Value::String(s) if s.eq_ignore_ascii_case("true") => true,
            Value::String(s) if s.eq_ignore_ascii_case("false") => false,
            _ => return Err(Detail::field("controlplane_ha", "must be true or false")),
        };
        req["control_plane"] = json!({"nodes": if ha { 3 } else { 1 }});
    }
    let mut out = json!({ "req": req });
    for key in ["region", "provider", "continent"] {
        if let Some(v) = get(&form, key) {
            out[key] = v.clone();
        }
    }
    Ok(out)
}

/// A DHCP range for a subnet given without one: its usable addresses but
/// the first few (kept for the gateway and the API endpoint).
fn dhcp_range(cidr: &str) -> Option<(String, String)> {
    let net: ipnet::Ipv4Net = cidr.trim().parse().ok()?;
    let hosts: Vec<std::net::Ipv4Addr> = net.trunc().hosts().collect();
    let keep = if hosts.len() > 32 { 10 } else { 2 };
    let start = hosts.get(keep)?;
    let last = hosts.last()?;
    Some((start.to_string(), last.to_string()))
}

/// meson's KaaS fields back to the form's names.
pub fn kaas_field(meson: &str) -> String {
    let s = meson.strip_prefix("req.").unwrap_or(meson);
    let s = s
        .replace("nodepool[", "nodepools[")
        .replace("specs.cpu", "specs.cpu_cores")
        .replace("specs.ram", "specs.ram_gb")
        .replace("specs.storage", "specs.storage_gb")
        .replace("nodes_subnet.subnet_netmask", "nodes_subnet.network")
        .replace("control_plane.nodes", "controlplane_ha");
    if s == "nodepool" {
        "nodepools".to_owned()
    } else {
        s
    }
}

/// `kaas/cancreate`: one entry per provider that can host the cluster.
pub fn kaas_cancreate(q: &mt::quote::KaasQuoteResponse) -> Value {
    let mut servers: Vec<Value> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for p in &q.placements {
        if !seen.insert(p.provider.clone()) {
            continue;
        }
        servers.push(json!({
            "cancreate": true,
            "provider": p.provider,
            "target": format!("{}-{}", p.provider, p.region),
            "region": p.region,
            "carbon_footprint": null,
            "billing": [],
            "price": {"hour": p.price.hourly, "month": p.price.monthly, "unit": p.price.currency},
        }));
    }
    json!({"nservers": servers.len(), "servers": servers})
}

// --- metering: usage, market prices, billing

/// Hours in an average month: the AtomOS daemons' monthly price is the
/// hourly one times this, to the cent.
pub const HOURS_PER_MONTH: f64 = 730.0;

/// A time as Elemento's billing shows it: RFC 3339, UTC, to the second.
pub fn billing_time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// One of meson's decimal strings (`"12.34"`, `"720.000000"`) as a JSON
/// number, as the daemons give amounts (`79`, `107.17`); `null` if it is
/// not one.
pub fn amount(decimal: &str) -> Value {
    decimal
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .map_or(Value::Null, number)
}

/// To six decimal places (a usage line's precision): sums of lines stay
/// free of binary noise.
fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn parsed(decimal: &str) -> f64 {
    decimal.trim().parse::<f64>().unwrap_or(0.0)
}

/// The daemons' price object: per hour, per month (730 hours, to the
/// cent), and the currency as `unit`.
fn price_object(hour: f64, month: f64, currency: &str) -> Value {
    json!({"hour": hour, "month": month, "unit": currency})
}

/// The compute daemon's `GET /usage` over meson's `GET /v1/usage`
/// (grouped by resource): the period, the tenant's total (its first
/// currency's; every currency's in `totals`), a summary per meter and
/// currency (`vm`, `volume`, `cluster`, `image`, `backup`, each listed,
/// zero when unused) and a line per resource and meter. Quantities are in
/// the meter's `unit` (`hour`, `GB-hour`), amounts in `currency`, as
/// numbers. `currency` is the currency to show when nothing was used yet
/// (meson's totals are then empty).
pub fn usage_object(u: &mt::usage::Usage, tenant: &str, currency: &str) -> Value {
    use mt::usage::Meter;
    let mut totals: Vec<(String, Value)> = u
        .totals
        .iter()
        .map(|t| (t.currency.clone(), amount(&t.amount)))
        .collect();
    if totals.is_empty() {
        totals.push((currency.to_owned(), json!(0)));
    }
    let mut meters = Vec::new();
    for (cur, _) in &totals {
        for m in Meter::ALL {
            let lines = u
                .lines
                .iter()
                .filter(|l| l.meter == m && &l.currency == cur);
            let (quantity, cost) = lines.fold((0.0, 0.0), |(q, c), l| {
                (q + parsed(&l.quantity), c + parsed(&l.cost))
            });
            meters.push(json!({
                "meter": m.as_str(),
                "unit": m.unit(),
                "currency": cur,
                "quantity": number(round6(quantity)),
                "cost": number(round6(cost)),
            }));
        }
    }
    let resources: Vec<Value> = u
        .lines
        .iter()
        .map(|l| {
            json!({
                "resource_id": l.group,
                "name": l.name,
                "meter": l.meter.as_str(),
                "unit": l.unit,
                "quantity": amount(&l.quantity),
                "cost": amount(&l.cost),
                "currency": l.currency,
                "cluster_id": l.cluster_id,
            })
        })
        .collect();
    json!({
        "tenant": tenant,
        "from": billing_time(&u.from),
        "to": billing_time(&u.to),
        "currency": totals[0].0,
        "total": totals[0].1,
        "totals": totals
            .iter()
            .map(|(c, a)| json!({"currency": c, "amount": a}))
            .collect::<Vec<_>>(),
        "meters": meters,
        "resources": resources,
    })
}

/// A VM's market price at one placement: `template` (a flavour's name;
/// `null` for a specfile's), the provider and region, meson's quote per
/// hour and month.
fn vm_market_price(template: Option<&mt::catalog::Flavor>, q: &mt::quote::Quote) -> Value {
    json!({
        "meter": "vm",
        "template": template.map(|f| f.name.as_str()),
        "slots": template.map(|f| f.vcpus),
        "ramsize": template.map(|f| f.memory_mib),
        "provider": q.provider,
        "region": q.region,
        "continent": q.continent,
        "unit": "hour",
        "unit_price": q.price.hourly,
        "currency": q.price.currency,
        "price": price_object(q.price.hourly, q.price.monthly, &q.price.currency),
    })
}

/// Each (provider, region)'s cheapest of `quotes` (meson sorts them
/// cheapest first), in that order.
fn cheapest_per_region(quotes: &[mt::quote::Quote]) -> Vec<&mt::quote::Quote> {
    let mut seen = std::collections::BTreeSet::new();
    quotes
        .iter()
        .filter(|q| seen.insert((q.provider.as_str(), q.region.as_str())))
        .collect()
}

/// A price of meson's price list (per unit and hour) as a market price;
/// its month is 730 hours of one unit, to six places (a GB-month of
/// storage is a fraction of a cent).
fn list_market_price(p: &mt::usage::PriceEntry) -> Value {
    let hour = parsed(&p.unit_price);
    json!({
        "meter": p.meter.as_str(),
        "template": null,
        "provider": p.provider,
        "unit": p.unit,
        "unit_price": amount(&p.unit_price),
        "currency": p.currency,
        "price": price_object(hour, round6(hour * HOURS_PER_MONTH), &p.currency),
        "effective_from": billing_time(&p.effective_from),
        "until": p.until.as_ref().map(billing_time),
    })
}

/// The prices of the price list in force at `now`.
pub fn prices_in_force(
    prices: &[mt::usage::PriceEntry],
    now: DateTime<Utc>,
) -> Vec<&mt::usage::PriceEntry> {
    prices
        .iter()
        .filter(|p| p.effective_from <= now && p.until.is_none_or(|u| now < u))
        .collect()
}

/// The compute daemon's `GET /marketprices`: every flavour's VM price at
/// each provider and region that can run it (the cheapest host there,
/// from meson's quotes; `quotes[i]` is `flavors[i]`'s, `None` when no host
/// fits it), then the price list's prices in force (volume, image and
/// backup per GB-hour, a cluster's control plane per hour, per provider or
/// `*`). `currency` is the first price's.
pub fn market_prices(
    flavors: &[mt::catalog::Flavor],
    quotes: &[Option<mt::quote::QuoteResponse>],
    list: &[&mt::usage::PriceEntry],
) -> Value {
    let mut prices: Vec<Value> = Vec::new();
    for (f, q) in flavors.iter().zip(quotes) {
        if let Some(q) = q {
            prices.extend(
                cheapest_per_region(&q.quotes)
                    .into_iter()
                    .map(|x| vm_market_price(Some(f), x)),
            );
        }
    }
    prices.extend(list.iter().map(|p| list_market_price(p)));
    let currency = prices
        .first()
        .map_or(Value::Null, |p| p["currency"].clone());
    json!({"source": "meson", "currency": currency, "prices": prices})
}

/// `POST /marketprices` with a specfile: its price at each provider and
/// region that can run it, and the cheapest as `mesos` (`{provider,
/// region, price: {hour, month, unit}}`, as Elemento's GUI reads it).
pub fn spec_market_prices(q: &mt::quote::QuoteResponse) -> Value {
    let prices: Vec<Value> = cheapest_per_region(&q.quotes)
        .into_iter()
        .map(|x| vm_market_price(None, x))
        .collect();
    let c = &q.cheapest;
    json!({
        "source": "meson",
        "currency": c.price.currency,
        "prices": prices,
        "mesos": {"provider": c.provider, "region": c.region,
                  "price": price_object(c.price.hourly, c.price.monthly, &c.price.currency)},
    })
}

/// A meson statement as the auth daemon's billing transaction: one per
/// month (`interval` `month`, `[start_timestamp, end_timestamp)`), its
/// total as `price` (in `currency`), `billing_uuid` the statement's id
/// (`current` for the running month), `status` `pending` while the month
/// runs (its figures still grow) and `closed` once written (it never
/// changes), `client_uuid` the caller, `organisation_name` the tenant.
pub fn transaction(s: &mt::usage::Statement, client: &str) -> Value {
    use mt::usage::StatementStatus;
    json!({
        "billing_uuid": s.id,
        "client_uuid": client,
        "organisation_name": s.tenant,
        "status": match s.status {
            StatementStatus::Open => "pending",
            StatementStatus::Closed => "closed",
        },
        "interval": "month",
        "start_timestamp": billing_time(&s.period_start),
        "end_timestamp": billing_time(&s.period_end),
        "price": amount(&s.total),
        "currency": s.currency,
        "closed_timestamp": s.closed.as_ref().map(billing_time),
    })
}

// --- subscriptions and limits: meson's plans and quotas

/// The auth daemon's name of one of meson's quotas (its `limits`' keys):
/// `vms` is `max_vms`, `vcpus` `max_slots`, `ram_mib` `max_ram_mib`,
/// `storage_gb` `max_storage_gb`, any other `max_<name>` (`max_clusters`,
/// `max_nodes`, `max_images_gb`).
pub fn limit_key(quota: &str) -> String {
    match quota {
        "vms" => "max_vms".to_owned(),
        "vcpus" => "max_slots".to_owned(),
        other => format!("max_{other}"),
    }
}

/// A tenant's quotas as the auth daemon's `limits`, and what it holds of
/// each as `usage`, under the same keys (`-1` would be unlimited; meson
/// always has a number).
pub fn quota_limits(q: &mt::admin::Quota) -> (Value, Value) {
    let mut limits = Map::new();
    let mut usage = Map::new();
    for l in &q.limits {
        limits.insert(limit_key(&l.name), json!(l.quota));
        usage.insert(limit_key(&l.name), json!(l.current));
    }
    (Value::Object(limits), Value::Object(usage))
}

/// The name of the plan of a tenant on none: the deployment's defaults.
pub const DEFAULT_PLAN: &str = "default";

/// A meson plan as one of the auth daemon's subscription tiers: `id`,
/// `name` and `display_name` the plan's name (`default`: the deployment's
/// defaults), `description` its description, `level` its place in meson's
/// list (from 1, `default` first), `limits` its quotas under the daemon's
/// keys and `quotas` meson's own entries (`default`: left at the
/// deployment's default). A plan has no price of its own (meson bills
/// usage, by its price list), so `price_monthly` and `price_yearly` are
/// `0`, in `currency`. Every plan reaches every provider meson has
/// (`max_connections`, as the target daemon counts them); meson offers no
/// AI proxy nor hypermonitor (`feature`).
pub fn tier(p: &mt::admin::Plan, level: usize, currency: &str, max_connections: usize) -> Value {
    let limits: Map<String, Value> = p
        .quotas
        .iter()
        .map(|q| (limit_key(&q.name), json!(q.quota)))
        .collect();
    json!({
        "id": p.name,
        "name": p.name,
        "display_name": p.name,
        "description": p.description,
        "price_monthly": 0,
        "price_yearly": 0,
        "currency": currency,
        "max_connections": max_connections,
        "limits": limits,
        "quotas": p.quotas,
        "feature": {"ai_proxy": false, "hypermonitor": false},
        "public": true,
        "active": true,
        "level": level,
    })
}

/// The month `now` is in, `[start, end)` (UTC): meson's billing period.
fn billing_month(now: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    use chrono::{Datelike, NaiveDate};
    let start = NaiveDate::from_ymd_opt(now.year(), now.month(), 1)?;
    let end = start.checked_add_months(chrono::Months::new(1))?;
    Some((
        start.and_hms_opt(0, 0, 0)?.and_utc(),
        end.and_hms_opt(0, 0, 0)?.and_utc(),
    ))
}

/// The caller's subscription as the auth daemon's: its tenant (`id`,
/// `organisation_id`, `organisation_name`) on its plan (`tier_id`,
/// `tier_name`: `p`'s name, `default` for a tenant on none; `plan` as
/// meson has it, `null` for none), `account_id` and `email` the session's
/// username (meson knows no e-mail). Always `active`, billed `monthly`
/// (meson's statements), its period this month (`current_period_start`,
/// `current_period_end`, UTC); never a trial, never cancelled, nothing
/// pending, no Stripe; when it began meson does not say
/// (`subscribed_at` `null`). `limits` and `usage` are the quotas in force
/// (the tenant's own over its plan's) and what it holds, as `/status`
/// shows them; `connections` is meson's providers.
pub fn subscription(
    q: &mt::admin::Quota,
    p: &mt::admin::Plan,
    username: &str,
    connections: usize,
    now: DateTime<Utc>,
) -> Value {
    let (limits, usage) = quota_limits(q);
    let month = billing_month(now);
    json!({
        "id": q.tenant,
        "account_id": username,
        "email": username,
        "organisation_id": q.tenant,
        "organisation_name": q.tenant,
        "tier_id": p.name,
        "tier_name": p.name,
        "plan": q.plan,
        "description": p.description,
        "billing_frequency": "monthly",
        "status": "active",
        "is_trial": false,
        "subscribed_at": null,
        "current_period_start": month.map(|(s, _)| billing_time(&s)),
        "current_period_end": month.map(|(_, e)| billing_time(&e)),
        "cancel_at_period_end": false,
        "cancelled_at": null,
        "stripe_subscription_id": null,
        "max_connections": connections.max(1),
        "current_connections": connections,
        "pending_tier_id": null,
        "pending_tier_name": null,
        "limits": limits,
        "usage": usage,
    })
}

/// The auth daemon's organisation limits (`GET /orgs/{org_id}/limits`)
/// of the caller's tenant: the quotas in force under the daemon's keys,
/// what it holds of each in `usage`, and its `plan` (`null`: none).
pub fn org_limits(q: &mt::admin::Quota) -> Value {
    let (mut limits, usage) = quota_limits(q);
    if let Value::Object(o) = &mut limits {
        o.insert("usage".into(), usage);
        o.insert("plan".into(), json!(q.plan));
    }
    limits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_as_the_gui_parses_them() {
        let t = DateTime::parse_from_rfc3339("2026-03-07T04:05:06Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(daemon_date(&t), "3/7/2026, 04:05:06");
    }

    #[test]
    fn template_and_flat_specfiles() {
        let t = json!({"info": {"name": "neon"}, "cpu": {"slots": 2, "allowSMT": false,
            "archs": ["X86_64"], "flags": ["sse2"]}, "ram": {"ramsize": 2048, "reqECC": false},
            "pci": [], "misc": {"os_family": "Linux"}});
        let v = specfile_to_vm(&t, "neon-1").unwrap();
        assert_eq!(v["specs"]["req"]["cpu"]["numberOfCores"], 2);
        assert_eq!(v["specs"]["req"]["mem"]["capacity"], 2048);
        assert_eq!(v["specs"]["vm_name"], "neon-1");
        let flat = json!({"slots": 4, "ramsize": 4096, "archs": ["X86_64"],
            "misc": {"os_family": "linux", "os_flavour": "ubuntu"},
            "ip_address": "ovh.mesos.elemento.cloud"});
        let v = specfile_to_vm(&flat, "x").unwrap();
        assert_eq!(v["provider"], "ovh");
        assert_eq!(v["specs"]["req"]["misc"]["osDistribution"], "ubuntu");
        let e = specfile_to_vm(
            &json!({"slots": 1, "ramsize": 512, "misc": {"os_family": "Windows"}}),
            "x",
        )
        .unwrap_err();
        assert_eq!(e.fields[0]["name"], "misc.os_family");
        assert_eq!(
            specfile_to_vm(&json!({"ramsize": 1}), "x")
                .unwrap_err()
                .fields[0]["name"],
            "slots"
        );
        assert_eq!(specfile_field("specs.req.mem.capacity"), "ramsize");
        assert_eq!(specfile_field("volumes[1]"), "volumes[1].vid");
    }

    #[test]
    fn electros_kaas_form_nested_and_flat() {
        let nested = json!({"name": "My-Cluster", "nodepools": [{"pool_name": "p1", "autoscale": false,
            "min_nodes": 1, "max_nodes": 3, "shared_storage_gb": 0,
            "specs": {"cpu_cores": 2, "ram_gb": 4, "storage_gb": 32, "gpu": 0}}],
            "nodes_subnet": {"dhcp": true, "network": "192.170.5.0/24"}, "update_policy": "MANUAL",
            "kubernetes_version": "1.34", "controlplane_ha": true, "region": "fr-par",
            "billing_frequency": "month"});
        let v = kaas_form(&nested).unwrap();
        assert_eq!(v["req"]["name"], "my-cluster");
        assert_eq!(v["req"]["nodepool"][0]["specs"]["ram"], 4096);
        assert_eq!(v["req"]["nodepool"][0]["desired_nodes"], 1);
        assert_eq!(v["req"]["nodepool"][0]["billing"], "MONTHLY");
        assert_eq!(v["req"]["nodes_subnet"]["subnet_netmask"], "192.170.5.0/24");
        assert_eq!(v["req"]["nodes_subnet"]["start_address"], "192.170.5.11");
        assert_eq!(v["req"]["nodes_subnet"]["last_address"], "192.170.5.254");
        assert_eq!(v["req"]["control_plane"]["nodes"], 3);
        assert_eq!(v["region"], "fr-par");

        let flat = json!({"name": "c", "nodes_subnet/network": "10.1.0.0/24", "nodes_subnet/dhcp": true,
            "nodepools": [{"pool_name": "p", "min_nodes": 1, "max_nodes": 1, "specs/cpu_cores": 2,
            "specs/ram_gb": 2, "specs/storage_gb": 40}]});
        let v = kaas_form(&flat).unwrap();
        assert_eq!(v["req"]["nodes_subnet"]["subnet_netmask"], "10.1.0.0/24");
        assert_eq!(v["req"]["nodepool"][0]["specs"]["cpu"], 2);

        let mut bad = nested.clone();
        bad["nodepools"][0]["shared_storage_gb"] = json!(10);
        assert_eq!(
            kaas_form(&bad).unwrap_err().fields[0]["name"],
            "nodepools[0].shared_storage_gb"
        );
        assert_eq!(
            kaas_field("req.nodepool[0].specs.ram"),
            "nodepools[0].specs.ram_gb"
        );
    }

    #[test]
    fn port_forward_bodies() {
        let vm = uuid::Uuid::new_v4();
        // Electros' create, as its fixtures have it.
        let v = port_forward_create(
            &json!({"serverurl": "https://192.168.1.10", "provider": "p", "protocol": "udp",
                    "port": 20000, "target": "web", "target_vm_uid": vm, "target_port": 22,
                    "tailscale": false, "force": true, "forward_uid": "fw-1"}),
            vm,
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"protocol": "udp", "public_port": 20000, "vm": vm, "private_port": 22})
        );
        let v = port_forward_create(&json!({"port": 1, "target_port": 2}), vm).unwrap();
        assert!(v.get("protocol").is_none(), "meson's default");
        for (body, field) in [
            (
                json!({"port": 1, "target_port": 2, "tailscale": true}),
                "tailscale",
            ),
            (
                json!({"port": 1, "target_port": 2, "tailscale": "True"}),
                "tailscale",
            ),
            (
                json!({"port": 1, "target_port": 2, "tailscale": "maybe"}),
                "tailscale",
            ),
            (json!({"target_port": 2}), "port"),
            (json!({"port": 1, "target_port": null}), "target_port"),
            (json!([1, 2]), "body"),
        ] {
            let e = port_forward_create(&body, vm).unwrap_err();
            assert_eq!(e.fields[0]["name"], field, "{body}");
        }
        assert_eq!(port_forward_field("public_port"), "port");
        assert_eq!(port_forward_field("private_port"), "target_port");
        assert_eq!(port_forward_field("vm"), "target_vm_uid");
        assert_eq!(port_forward_field("protocol"), "protocol");
        let (id, net) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
        let f: mt::port_forward::PortForward = serde_json::from_value(json!({"id": id,
            "network": net, "vm": vm, "protocol": "tcp", "public_ip": "203.0.113.10",
            "public_port": 2222, "private_port": 22, "status": "active", "host": "h1",
            "error": null, "created": "2026-03-07T04:05:06Z"}))
        .unwrap();
        assert_eq!(
            port_forward_object(&f, None),
            json!({"serverurl": "https://203.0.113.10", "provider": null, "protocol": "tcp",
                   "port": 2222, "target": "", "target_vm_uid": vm, "target_port": 22,
                   "tailscale": false, "force": false, "forward_uid": id, "status": "active",
                   "error_message": null, "network_uid": net,
                   "creation_date": "3/7/2026, 04:05:06"})
        );
        assert_eq!(forward_url("203.0.113.10"), "https://203.0.113.10");
        assert_eq!(forward_url("2001:db8::1"), "https://[2001:db8::1]");
    }

    #[test]
    fn backup_objects_and_bodies() {
        let (id, vm, vol) = (
            uuid::Uuid::new_v4(),
            uuid::Uuid::new_v4(),
            uuid::Uuid::new_v4(),
        );
        let b: mt::backup::Backup = serde_json::from_value(json!({"id": id,
            "name": "web-20261129-0712", "vm": vm, "vm_name": "web", "kind": "manual",
            "status": "available", "size": 12,
            "volumes": [{"volume": vol, "kind": "boot", "size": 10},
                        {"volume": null, "kind": "data", "size": 2}],
            "host": "h1", "provider": "ovh", "region": "gra", "labels": {"env": "prod"},
            "error": null, "created": "2026-03-07T04:05:06Z", "expires": null}))
        .unwrap();
        assert_eq!(
            backup_object(&b),
            json!({"backup_id": id, "local_index": vm, "vm_name": "web",
                   "name": "web-20261129-0712", "creation_date": "3/7/2026, 04:05:06",
                   "created_at": "2026-03-07T04:05:06.000Z", "size": 12,
                   "volumes": [{"volume_id": vol, "kind": "boot", "size": 10},
                               {"volume_id": null, "kind": "data", "size": 2}],
                   "status": "available", "kind": "manual", "serverurl": "https://h1",
                   "host": "h1", "provider": "ovh", "region": "gra",
                   "labels": {"env": "prod"}, "error_message": null, "expires": null})
        );
        // Electros' create: the VM is the route's, a chosen backup_id is not kept.
        assert_eq!(
            backup_create(&json!({"local_index": vm, "name": "before", "backup_id": id})).unwrap(),
            json!({"name": "before"})
        );
        assert_eq!(
            backup_create(&json!({"local_index": vm})).unwrap(),
            json!({})
        );
        assert_eq!(
            backup_create(&json!([1])).unwrap_err().fields[0]["name"],
            "body"
        );
        assert_eq!(restore_field("backup", "vm_name"), "backup_id");
        assert_eq!(restore_field("name", "vm_name"), "vm_name");
        assert_eq!(restore_field("into", "name"), "into");
    }

    #[test]
    fn backup_schedules() {
        let on = |body: Value| match backup_schedule(&body).unwrap() {
            Schedule::On {
                window,
                window_field,
                keep,
                keep_field,
            } => (window, window_field, keep, keep_field),
            Schedule::Off => panic!("off: {body}"),
        };
        assert_eq!(
            on(json!({"local_index": "x", "hour": 22, "keep": 3})),
            (Some("22-23".to_owned()), "hour", Some(json!(3)), "keep")
        );
        assert_eq!(
            on(
                json!({"time": "23:30", "retention_days": "7", "frequency": "Daily",
                      "timezone": "UTC", "enabled": "True"})
            ),
            (
                Some("23-00".to_owned()),
                "time",
                Some(json!(7)),
                "retention_days"
            )
        );
        assert_eq!(
            on(json!({"window": "22-02", "hour": 5})),
            (Some("22-02".to_owned()), "window", None, "keep")
        );
        assert_eq!(
            on(json!({"cron": "15 3 * * *", "max_backups": 2})),
            (
                Some("03-04".to_owned()),
                "cron",
                Some(json!(2)),
                "max_backups"
            )
        );
        assert_eq!(on(json!({})), (None, "window", None, "keep"));
        // A keep that is no count is meson's to refuse, by the client's name.
        assert_eq!(on(json!({"keep": "many"})).2, Some(json!("many")));
        for body in [
            json!({"enabled": false, "hour": 99}),
            json!({"enable": 0}),
            json!({"frequency": "none"}),
            json!({"interval": "disabled"}),
        ] {
            assert_eq!(backup_schedule(&body).unwrap(), Schedule::Off, "{body}");
        }
        for (body, field) in [
            (json!({"frequency": "weekly"}), "frequency"),
            (json!({"interval": 24}), "interval"),
            (json!({"hour": 24}), "hour"),
            (json!({"start_time": "7pm"}), "start_time"),
            (json!({"time": "22:3"}), "time"),
            (json!({"cron": "0 3 * * 1"}), "cron"),
            (json!({"cron": "0 */6 * * *"}), "cron"),
            (json!({"window": 22}), "window"),
            (json!({"timezone": "Europe/Rome", "hour": 1}), "timezone"),
            (json!({"enabled": "maybe"}), "enabled"),
            (json!("daily"), "body"),
        ] {
            let e = backup_schedule(&body).unwrap_err();
            assert_eq!(e.fields[0]["name"], field, "{body}");
        }
    }

    #[test]
    fn network_bodies() {
        let v = network_create(&json!({"network_name": "n", "type": "libvirt", "mode": "nat",
            "ip": {"address": "192.168.101.1/24", "dhcp": {"start": "192.168.101.10", "end": "192.168.101.99"}}}))
        .unwrap();
        assert_eq!(v["cidr"], "192.168.101.0/24");
        assert_eq!(v["gateway"], "192.168.101.1");
        assert_eq!(v["dhcp_range"]["last"], "192.168.101.99");
        let e =
            network_create(&json!({"network_name": "n", "ip": {"address": "nope"}})).unwrap_err();
        assert_eq!(e.fields[0]["name"], "ip.address");
    }

    #[test]
    fn console_ports() {
        for (url, port) in [
            (
                "wss://api.example.com/v1/consoles/x/websocket?token=t",
                Some(443),
            ),
            (
                "ws://127.0.0.1:8080/v1/consoles/x/websocket?token=t",
                Some(8080),
            ),
            ("ws://[::1]:9000/v1/consoles/x", Some(9000)),
            ("wss://[2001:db8::1]/v1/consoles/x", Some(443)),
            ("ws://host/v1?token=a:b", Some(80)),
            ("WSS://Host:8443", Some(8443)),
            ("ws://host:nope/", None),
            ("ftp://host/", None),
            ("", None),
        ] {
            assert_eq!(url_port(url), port, "{url}");
        }
    }

    #[test]
    fn consoles_as_tunnels() {
        let t = DateTime::parse_from_rfc3339("2026-03-07T04:05:06Z")
            .unwrap()
            .with_timezone(&Utc);
        let mut c = mt::console::Console {
            id: uuid::Uuid::nil(),
            vm: uuid::Uuid::max(),
            status: "requested".into(),
            requested_by: "dev".into(),
            created: t,
            expires: t,
            opened: None,
            closed: None,
            close_reason: None,
            bytes_in: 0,
            bytes_out: 0,
        };
        let url = "ws://127.0.0.1:7000/v1/consoles/x/websocket?token=t";
        let o = tunnel_object(&c, "web", Some(url));
        assert_eq!(o["instance_id"], c.id.to_string());
        assert_eq!(o["local_index"], c.vm.to_string());
        assert_eq!(o["vm_name"], "web");
        assert_eq!((&o["ws_url"], &o["port"]), (&json!(url), &json!(7000)));
        assert_eq!((&o["status"], &o["sessions"]), (&json!("open"), &json!(0)));
        assert_eq!(o["creation_date"], "2026-03-07T04:05:06.000Z");
        assert!(o.get("password").is_none());
        c.status = "open".into();
        let o = tunnel_object(&c, "web", None);
        assert_eq!((&o["ws_url"], &o["port"]), (&json!(""), &Value::Null));
        assert_eq!((&o["status"], &o["sessions"]), (&json!("open"), &json!(1)));
        c.status = "closed".into();
        assert_eq!(tunnel_object(&c, "web", None)["status"], "closed");
    }

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn amounts_are_numbers() {
        assert_eq!(amount("79.00"), json!(79));
        assert_eq!(amount("107.17"), json!(107.17));
        assert_eq!(amount("0.000060"), json!(0.00006));
        assert_eq!(amount("0.000000000001"), json!(0.000000000001));
        assert_eq!(amount("nope"), Value::Null);
        assert_eq!(
            billing_time(&at("2026-11-01T00:00:00.5Z")),
            "2026-11-01T00:00:00Z"
        );
    }

    #[test]
    fn usage_by_resource_and_meter() {
        use mt::usage::{Meter, Money, Usage, UsageLine};
        let line = |id: &str, meter: Meter, q: &str, c: &str| UsageLine {
            tenant: "acme".into(),
            meter,
            unit: meter.unit().into(),
            group: Some(id.into()),
            name: Some(format!("n-{id}")),
            cluster_id: None,
            quantity: q.into(),
            cost: c.into(),
            currency: "EUR".into(),
        };
        let u = Usage {
            from: at("2026-11-01T00:00:00Z"),
            to: at("2026-11-10T12:00:00Z"),
            group_by: "resource".into(),
            lines: vec![
                line("a", Meter::Vm, "10.000000", "0.100000"),
                line("b", Meter::Vm, "5.000000", "0.200000"),
                line("c", Meter::Volume, "50.000000", "0.003000"),
            ],
            totals: vec![Money {
                currency: "EUR".into(),
                amount: "0.30".into(),
            }],
        };
        let o = usage_object(&u, "acme", "USD");
        assert_eq!(o["tenant"], "acme");
        assert_eq!(
            (&o["from"], &o["to"]),
            (
                &json!("2026-11-01T00:00:00Z"),
                &json!("2026-11-10T12:00:00Z")
            )
        );
        assert_eq!((&o["currency"], &o["total"]), (&json!("EUR"), &json!(0.3)));
        assert_eq!(o["totals"], json!([{"currency": "EUR", "amount": 0.3}]));
        let meters = o["meters"].as_array().unwrap();
        assert_eq!(meters.len(), 5, "every meter, once per currency");
        assert_eq!(
            meters[0],
            json!({"meter": "vm", "unit": "hour", "currency": "EUR", "quantity": 15, "cost": 0.3})
        );
        assert_eq!(meters[1]["unit"], "GB-hour");
        assert_eq!(
            (&meters[1]["quantity"], &meters[1]["cost"]),
            (&json!(50), &json!(0.003))
        );
        assert_eq!(
            (&meters[4]["meter"], &meters[4]["cost"]),
            (&json!("backup"), &json!(0))
        );
        let r = &o["resources"];
        assert_eq!(r.as_array().unwrap().len(), 3);
        assert_eq!(
            r[2],
            json!({"resource_id": "c", "name": "n-c", "meter": "volume", "unit": "GB-hour",
                   "quantity": 50, "cost": 0.003, "currency": "EUR", "cluster_id": null})
        );
        // Nothing used yet: a zero total in the currency given.
        let empty = Usage {
            lines: vec![],
            totals: vec![],
            ..u
        };
        let o = usage_object(&empty, "acme", "USD");
        assert_eq!((&o["currency"], &o["total"]), (&json!("USD"), &json!(0)));
        assert!(o["resources"].as_array().unwrap().is_empty());
        assert_eq!(o["meters"][0]["cost"], 0);
    }

    fn quote(provider: &str, region: &str, hourly: f64) -> mt::quote::Quote {
        mt::quote::Quote {
            provider: provider.into(),
            region: region.into(),
            continent: "Europe".into(),
            host: format!("{provider}-{region}-{hourly}"),
            price: mt::Price {
                hourly,
                monthly: (hourly * HOURS_PER_MONTH * 100.0).round() / 100.0,
                currency: "EUR".into(),
            },
        }
    }

    #[test]
    fn market_prices_per_flavour_and_meter() {
        use mt::usage::{Meter, PriceEntry};
        let flavor = mt::catalog::Flavor {
            name: "neon".into(),
            description: String::new(),
            vcpus: 2,
            memory_mib: 2048,
            gpus: 0,
            gpu_model: None,
            cpu_flags: vec![],
        };
        let quotes = vec![
            quote("sim", "eu-1", 0.02),
            quote("sim", "eu-1", 0.03),
            quote("sim", "eu-2", 0.04),
        ];
        let q = mt::quote::QuoteResponse {
            cheapest: quotes[0].clone(),
            quotes,
            warnings: vec![],
        };
        let entry = |from: &str, until: Option<&str>, price: &str| PriceEntry {
            meter: Meter::Volume,
            provider: "*".into(),
            unit: "GB-hour".into(),
            unit_price: price.into(),
            currency: "EUR".into(),
            effective_from: at(from),
            until: until.map(at),
        };
        let list = vec![
            entry(
                "1970-01-01T00:00:00Z",
                Some("2026-12-01T00:00:00Z"),
                "0.00006",
            ),
            entry("2026-12-01T00:00:00Z", None, "0.0001"),
        ];
        let now = at("2026-11-15T00:00:00Z");
        let in_force = prices_in_force(&list, now);
        assert_eq!(in_force.len(), 1);
        assert_eq!(in_force[0].unit_price, "0.00006");
        assert_eq!(
            prices_in_force(&list, at("2026-12-01T00:00:00Z"))[0].unit_price,
            "0.0001"
        );

        let o = market_prices(
            &[flavor.clone(), flavor.clone()],
            &[Some(q.clone()), None],
            &in_force,
        );
        assert_eq!(
            (&o["source"], &o["currency"]),
            (&json!("meson"), &json!("EUR"))
        );
        let prices = o["prices"].as_array().unwrap();
        assert_eq!(
            prices.len(),
            3,
            "one per region, none for a flavour no host fits: {o}"
        );
        assert_eq!(
            prices[0],
            json!({"meter": "vm", "template": "neon", "slots": 2, "ramsize": 2048,
                   "provider": "sim", "region": "eu-1", "continent": "Europe", "unit": "hour",
                   "unit_price": 0.02, "currency": "EUR",
                   "price": {"hour": 0.02, "month": 14.6, "unit": "EUR"}})
        );
        assert_eq!(prices[1]["region"], "eu-2");
        assert_eq!(
            prices[2],
            json!({"meter": "volume", "template": null, "provider": "*", "unit": "GB-hour",
                   "unit_price": 0.00006, "currency": "EUR",
                   "price": {"hour": 0.00006, "month": 0.0438, "unit": "EUR"},
                   "effective_from": "1970-01-01T00:00:00Z", "until": "2026-12-01T00:00:00Z"})
        );
        assert_eq!(market_prices(&[], &[], &[])["currency"], Value::Null);

        let o = spec_market_prices(&q);
        assert_eq!(
            o["mesos"],
            json!({"provider": "sim", "region": "eu-1",
                   "price": {"hour": 0.02, "month": 14.6, "unit": "EUR"}})
        );
        assert_eq!(o["prices"].as_array().unwrap().len(), 2);
        assert_eq!(o["prices"][0]["template"], Value::Null);
    }

    #[test]
    fn statements_as_transactions() {
        use mt::usage::{Statement, StatementStatus};
        let mut s = Statement {
            id: "current".into(),
            tenant: "acme".into(),
            status: StatementStatus::Open,
            period_start: at("2026-11-01T00:00:00Z"),
            period_end: at("2026-12-01T00:00:00Z"),
            currency: "EUR".into(),
            total: "12.30".into(),
            closed: None,
            lines: None,
        };
        assert_eq!(
            transaction(&s, "alice"),
            json!({"billing_uuid": "current", "client_uuid": "alice", "organisation_name": "acme",
                   "status": "pending", "interval": "month",
                   "start_timestamp": "2026-11-01T00:00:00Z", "end_timestamp": "2026-12-01T00:00:00Z",
                   "price": 12.3, "currency": "EUR", "closed_timestamp": null})
        );
        s.id = uuid::Uuid::nil().to_string();
        s.status = StatementStatus::Closed;
        s.closed = Some(at("2026-12-01T00:10:00Z"));
        s.total = "79.00".into();
        let t = transaction(&s, "alice");
        assert_eq!((&t["status"], &t["price"]), (&json!("closed"), &json!(79)));
        assert_eq!(t["billing_uuid"], uuid::Uuid::nil().to_string());
        assert_eq!(t["closed_timestamp"], "2026-12-01T00:10:00Z");
    }

    fn quota(plan: Option<&str>) -> mt::admin::Quota {
        let limit = |name: &str, quota, current, default| mt::admin::QuotaLimit {
            name: name.into(),
            quota,
            current,
            default,
        };
        mt::admin::Quota {
            tenant: "acme".into(),
            plan: plan.map(str::to_owned),
            limits: vec![
                limit("vms", 2, 1, false),
                limit("vcpus", 64, 2, true),
                limit("ram_mib", 65536, 2048, true),
                limit("images_gb", 100, 0, true),
            ],
        }
    }

    fn plan(name: &str) -> mt::admin::Plan {
        mt::admin::Plan {
            name: name.into(),
            description: "Try it out".into(),
            quotas: vec![
                mt::admin::PlanQuota {
                    name: "vms".into(),
                    quota: 2,
                    default: false,
                },
                mt::admin::PlanQuota {
                    name: "storage_gb".into(),
                    quota: 500,
                    default: true,
                },
            ],
        }
    }

    #[test]
    fn plans_as_tiers() {
        let t = tier(&plan("small"), 2, "EUR", 3);
        assert_eq!(
            t,
            json!({"id": "small", "name": "small", "display_name": "small",
                   "description": "Try it out", "price_monthly": 0, "price_yearly": 0,
                   "currency": "EUR", "max_connections": 3,
                   "limits": {"max_vms": 2, "max_storage_gb": 500},
                   "quotas": [{"name": "vms", "quota": 2, "default": false},
                              {"name": "storage_gb", "quota": 500, "default": true}],
                   "feature": {"ai_proxy": false, "hypermonitor": false},
                   "public": true, "active": true, "level": 2})
        );
    }

    #[test]
    fn a_tenants_plan_as_its_subscription() {
        let s = subscription(
            &quota(Some("small")),
            &plan("small"),
            "alice",
            0,
            at("2026-12-31T23:59:59Z"),
        );
        for (key, want) in [
            ("id", json!("acme")),
            ("organisation_id", json!("acme")),
            ("account_id", json!("alice")),
            ("tier_id", json!("small")),
            ("tier_name", json!("small")),
            ("plan", json!("small")),
            ("status", json!("active")),
            ("billing_frequency", json!("monthly")),
            ("is_trial", json!(false)),
            ("cancel_at_period_end", json!(false)),
            ("current_period_start", json!("2026-12-01T00:00:00Z")),
            ("current_period_end", json!("2027-01-01T00:00:00Z")),
            ("max_connections", json!(1)),
            ("current_connections", json!(0)),
            ("pending_tier_id", Value::Null),
            (
                "limits",
                json!({"max_vms": 2, "max_slots": 64, "max_ram_mib": 65536,
                              "max_images_gb": 100}),
            ),
            (
                "usage",
                json!({"max_vms": 1, "max_slots": 2, "max_ram_mib": 2048,
                             "max_images_gb": 0}),
            ),
        ] {
            assert_eq!(s[key], want, "{key}: {s}");
        }
        let d = subscription(
            &quota(None),
            &plan(DEFAULT_PLAN),
            "bob",
            2,
            at("2026-02-10T00:00:00Z"),
        );
        assert_eq!(
            (&d["tier_name"], &d["plan"]),
            (&json!("default"), &Value::Null)
        );
        assert_eq!(d["current_period_end"], "2026-03-01T00:00:00Z");
        assert_eq!(d["max_connections"], 2);
    }

    #[test]
    fn a_tenants_quotas_as_its_limits() {
        assert_eq!(
            org_limits(&quota(None)),
            json!({"max_vms": 2, "max_slots": 64, "max_ram_mib": 65536, "max_images_gb": 100,
                   "usage": {"max_vms": 1, "max_slots": 2, "max_ram_mib": 2048, "max_images_gb": 0},
                   "plan": null})
        );
    }
}
