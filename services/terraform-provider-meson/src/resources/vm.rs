//! `meson_vm`: a virtual machine, the fields of meson's VM request typed.

use super::{J, b, changed, id, labels, labels_json, n, n32, obj, s, strs, wait};
use crate::diag::{Failure, Res, map_field};
use crate::schema::{Attr, Block, Nested, Nesting, Step, timeouts_block};
use crate::value::Ty;
use meson_client::Client;
use meson_client::types::Vm;
use meson_client::types::requests::{
    CpuArch, CpuRequest, MemRequest, MiscRequest, VmAuthentication, VmCreateRequest,
    VmRequestSpecs, VmRequirements, VolumeRequest,
};
use meson_client::types::vm::PowerCommand;
use std::time::Duration;
use uuid::Uuid;

pub fn block() -> Block {
    let fixed = |a: Attr| a.force_new().tracked();
    Block {
        description: "A virtual machine. Its name, labels and power state change in place; \
                      everything else replaces it.",
        attrs: vec![
            Attr::computed("id", Ty::Str, "The VM's id."),
            Attr::required("name", Ty::Str, "The VM's name and hostname, unique per tenant (in place).")
                .tracked(),
            fixed(Attr::required("cores", Ty::Num, "CPU cores.")),
            fixed(Attr::required("memory_mib", Ty::Num, "Memory, MiB.")),
            fixed(Attr::defaulted("threads_per_core", Ty::Num, "Threads per core (1 unless `smt`).")),
            fixed(Attr::defaulted("smt", Ty::Bool, "Simultaneous multithreading (default false).")),
            fixed(Attr::defaulted("min_frequency", Ty::Num, "The lowest acceptable clock, GHz.")),
            fixed(Attr::defaulted("arch", Ty::list(Ty::Str), "Acceptable architectures (default `[\"X86_64\"]`).")),
            fixed(Attr::defaulted("cpu_flags", Ty::list(Ty::Str), "CPU flags the host must have (`avx2`, ...).")),
            fixed(Attr::defaulted("require_ecc", Ty::Bool, "ECC memory (default false).")),
            Attr::defaulted("os", Ty::Str, "The OS distribution: `Debian` (the default), `Ubuntu`, `Ubuntu 22.04`, `AlmaLinux`, ...")
                .force_new(),
            fixed(Attr::defaulted("ssh_keys", Ty::list(Ty::Str), "SSH public keys for the default user.")),
            fixed(Attr::defaulted("provider_name", Ty::Str, "Place the VM with this provider (`ionos`, `ovh`, `atomos`, ...); default: the cheapest that fits.")),
            fixed(Attr::defaulted("continent", Ty::Str, "Place the VM on this continent.")),
            fixed(Attr::defaulted("region", Ty::Str, "Place the VM in this region.")),
            fixed(Attr::defaulted("networks", Ty::list(Ty::Str), "Private networks to attach (ids, in NIC order, at most 4).")),
            fixed(Attr::optional("attached_volumes", Ty::list(Ty::Str), "Standalone volumes to attach (ids, at most 8).")),
            Attr::optional("labels", Ty::map(Ty::Str), "Labels (in place).").tracked(),
            Attr::defaulted("power_state", Ty::Str, "`running` (the default) or `stopped` (in place, through the power API).")
                .tracked(),
            Attr::computed("status", Ty::Str, "meson's status of the VM (`running`, `off`, ...).").volatile(),
            Attr::computed("placed_provider", Ty::Str, "The provider the VM runs with."),
            Attr::computed("placed_region", Ty::Str, "The region the VM runs in."),
            Attr::computed("host", Ty::Str, "The AtomOS host the VM runs on.").volatile(),
            Attr::computed("ipv4", Ty::Str, "The VM's address, once known.").volatile(),
        ],
        blocks: vec![
            Nested {
                name: "volume",
                nesting: Nesting::List,
                min: 0,
                max: 0,
                block: Block {
                    description: "A data disk, besides the boot disk.",
                    attrs: vec![
                        fixed(Attr::required("name", Ty::Str, "Unique among the VM's volumes.")),
                        fixed(Attr::required("size", Ty::Num, "GB.")),
                        Attr::defaulted("private", Ty::Bool, "Default true.").force_new(),
                        Attr::defaulted("shareable", Ty::Bool, "Default false.").force_new(),
                        Attr::defaulted("bootable", Ty::Bool, "Default false.").force_new(),
                        Attr::defaulted("readonly", Ty::Bool, "Default false.").force_new(),
                    ],
                    blocks: vec![],
                },
            },
            timeouts_block(),
        ],
    }
}

pub fn field(f: &str) -> Option<Vec<Step>> {
    map_field(
        &[
            ("specs.vm_name", &["name"]),
            ("specs.req.cpu.numberOfCores", &["cores"]),
            ("specs.req.cpu.numberOfThreads", &["threads_per_core"]),
            ("specs.req.cpu.smtEnabled", &["smt"]),
            ("specs.req.cpu.min_frequency", &["min_frequency"]),
            ("specs.req.cpu.arch", &["arch"]),
            ("specs.req.cpu.flags", &["cpu_flags"]),
            ("specs.req.mem.capacity", &["memory_mib"]),
            ("specs.req.mem.requireECC", &["require_ecc"]),
            ("specs.req.misc.osDistribution", &["os"]),
            ("specs.authentication", &["ssh_keys"]),
            ("specs.volumes", &["volume"]),
            ("provider", &["provider_name"]),
            ("continent", &["continent"]),
            ("region", &["region"]),
            ("networks", &["networks"]),
            ("volumes", &["attached_volumes"]),
            ("labels", &["labels"]),
            ("name", &["name"]),
        ],
        f,
    )
}

fn err(e: meson_client::Error) -> Failure {
    Failure::from_client(e, field)
}

fn power_state(status: &str) -> &'static str {
    match status {
        "off" | "stopping" => "stopped",
        _ => "running",
    }
}

fn to_json(vm: &Vm) -> J {
    let sp = &vm.specs;
    let standalone: Vec<String> = vm
        .volumes
        .iter()
        .filter(|v| v.standalone)
        .map(|v| v.id.to_string())
        .collect();
    let data: Vec<J> = vm
        .volumes
        .iter()
        .filter(|v| v.kind == "data" && !v.standalone)
        .map(|v| obj([("name", J::from(v.name.clone())), ("size", J::from(v.size))]))
        .collect();
    obj([
        ("id", J::from(vm.id.to_string())),
        ("name", J::from(vm.name.clone())),
        ("cores", J::from(sp.cores)),
        ("memory_mib", J::from(sp.memory_mib)),
        ("threads_per_core", J::from(sp.threads_per_core)),
        ("smt", J::from(sp.smt)),
        ("min_frequency", J::from(sp.min_frequency_ghz)),
        ("arch", J::from(sp.arch.clone())),
        ("cpu_flags", J::from(sp.flags.clone())),
        ("require_ecc", J::from(sp.require_ecc)),
        ("os", J::from(sp.os_distribution.clone())),
        ("ssh_keys", J::from(sp.ssh_keys.clone())),
        ("provider_name", J::from(sp.requested_provider.clone())),
        ("continent", J::from(sp.requested_continent.clone())),
        ("region", J::from(sp.requested_region.clone())),
        (
            "networks",
            J::from(
                vm.private_net
                    .iter()
                    .map(|p| p.network.to_string())
                    .collect::<Vec<_>>(),
            ),
        ),
        (
            "attached_volumes",
            if standalone.is_empty() {
                J::Null
            } else {
                J::from(standalone)
            },
        ),
        ("labels", labels_json(&vm.labels)),
        ("power_state", J::from(power_state(&vm.status))),
        ("status", J::from(vm.status.clone())),
        ("placed_provider", J::from(vm.provider.clone())),
        ("placed_region", J::from(vm.region.clone())),
        ("host", J::from(vm.host.clone())),
        ("ipv4", J::from(vm.ipv4.clone())),
        ("volume", J::Array(data)),
    ])
}

fn ids(p: &J, k: &str) -> Res<Option<Vec<Uuid>>> {
    strs(p, k)
        .map(|l| l.iter().map(|s| super::parse_id(s)).collect())
        .transpose()
}

fn request(p: &J) -> Res<VmCreateRequest> {
    let volumes: Option<Vec<VolumeRequest>> = p
        .get("volume")
        .and_then(J::as_array)
        .filter(|a| !a.is_empty())
        .map(|a| {
            a.iter()
                .map(|v| VolumeRequest {
                    name: s(v, "name").unwrap_or_default(),
                    size: n32(v, "size").unwrap_or_default(),
                    private: b(v, "private"),
                    shareable: b(v, "shareable"),
                    bootable: b(v, "bootable"),
                    readonly: b(v, "readonly"),
                })
                .collect()
        });
    Ok(VmCreateRequest {
        specs: VmRequestSpecs {
            req: VmRequirements {
                cpu: CpuRequest {
                    smt_enabled: b(p, "smt"),
                    number_of_cores: n32(p, "cores").unwrap_or_default(),
                    number_of_threads: n32(p, "threads_per_core"),
                    min_frequency: p.get("min_frequency").and_then(J::as_f64),
                    arch: strs(p, "arch").map(CpuArch),
                    flags: strs(p, "cpu_flags"),
                },
                mem: MemRequest {
                    capacity: n(p, "memory_mib").unwrap_or_default(),
                    require_ecc: b(p, "require_ecc"),
                },
                pci: None,
                misc: s(p, "os").map(|os| MiscRequest {
                    os_distribution: Some(os),
                }),
            },
            volumes,
            authentication: strs(p, "ssh_keys").map(|keys| VmAuthentication {
                ssh_key: None,
                ssh_keys: Some(keys),
            }),
            vm_name: s(p, "name").unwrap_or_default(),
        },
        provider: s(p, "provider_name"),
        continent: s(p, "continent"),
        region: s(p, "region"),
        labels: labels(p),
        networks: ids(p, "networks")?,
        volumes: ids(p, "attached_volumes")?,
    })
}

async fn power(c: &Client, id: Uuid, to: &str, t: Duration) -> Res<()> {
    let cmd = if to == "stopped" {
        PowerCommand::Poweroff
    } else {
        PowerCommand::Poweron
    };
    let a = c.vm_power(id, cmd).await.map_err(err)?;
    wait(c, &[a.id], t, field).await
}

/// `power_state`, when given, is `running` or `stopped`.
pub fn check_power_state(p: &J) -> Res<()> {
    match s(p, "power_state").as_deref() {
        None | Some("running" | "stopped") => Ok(()),
        Some(other) => Err(Failure::msg(
            format!("power_state must be running or stopped, got {other:?}"),
            "",
        )
        .at(vec![Step::Attr("power_state".into())])),
    }
}

pub async fn create(c: &Client, p: &J, t: Duration, notes: &mut super::Notes) -> Res<J> {
    check_power_state(p)?;
    let r = c.vm_create(&request(p)?).await.map_err(err)?;
    notes.extend(r.warnings);
    let mut actions = vec![r.action.id];
    actions.extend(r.next_actions.iter().map(|a| a.id));
    let id = r.vm.id;
    wait(c, &actions, t, field)
        .await
        .map_err(|f| f.created(id))?;
    if s(p, "power_state").as_deref() == Some("stopped") {
        power(c, id, "stopped", t)
            .await
            .map_err(|f| f.created(id))?;
    }
    Ok(to_json(&c.vm_get(r.vm.id).await.map_err(err)?))
}

pub async fn read(c: &Client, state: &J) -> Res<Option<J>> {
    match c.vm_get(id(state)?).await {
        Ok(vm) if vm.status == "deleting" => Ok(None),
        Ok(vm) => Ok(Some(to_json(&vm))),
        Err(e) if e.code() == Some("not_found") => Ok(None),
        Err(e) => Err(err(e)),
    }
}

pub async fn update(c: &Client, prior: &J, p: &J, t: Duration) -> Res<J> {
    let id = id(prior)?;
    if let Some(req) = super::rename_relabel(prior, p) {
        c.vm_update(id, &req).await.map_err(err)?;
    }
    if changed(prior, p, "power_state")
        && let Some(to) = s(p, "power_state")
    {
        power(c, id, &to, t).await?;
    }
    Ok(to_json(&c.vm_get(id).await.map_err(err)?))
}

pub async fn delete(c: &Client, prior: &J, t: Duration) -> Res<()> {
    let a = c.vm_delete(id(prior)?).await.map_err(err)?;
    wait(c, &[a.id], t, field).await
}
