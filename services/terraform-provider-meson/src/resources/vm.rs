//! `meson_vm`: a virtual machine, the fields of meson's VM request typed.

use super::{
    Json, changed, flag, id, labels, labels_json, number, number_u32, obj, text, texts, wait,
};
use crate::diag::{Failure, Res, map_field};
use crate::schema::{Attr, Block, Nested, Nesting, Step, timeouts_block};
use crate::value::{Ty, V};
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
        description: "A virtual machine. Its name, labels, power state, cores and memory, \
                      networks and backups change in place (a running VM is stopped for a new \
                      size and started again); everything else replaces it.",
        attrs: vec![
            Attr::computed("id", Ty::Str, "The VM's id."),
            Attr::required("name", Ty::Str, "The VM's name and hostname, unique per tenant (in place).")
                .tracked(),
            Attr::required("cores", Ty::Num, "CPU cores (in place: a running VM is stopped, resized and started again).").tracked(),
            Attr::required("memory_mib", Ty::Num, "Memory, MiB (in place, as `cores`).").tracked(),
            fixed(Attr::defaulted("threads_per_core", Ty::Num, "Threads per core (1 unless `smt`).")),
            fixed(Attr::defaulted("smt", Ty::Bool, "Simultaneous multithreading (default false).")),
            fixed(Attr::defaulted("min_frequency", Ty::Num, "The lowest acceptable clock, GHz.")),
            fixed(Attr::defaulted("arch", Ty::list(Ty::Str), "Acceptable architectures (default `[\"X86_64\"]`).")),
            fixed(Attr::defaulted("cpu_flags", Ty::list(Ty::Str), "CPU flags the host must have (`avx2`, ...).")),
            fixed(Attr::defaulted("require_ecc", Ty::Bool, "ECC memory (default false).")),
            Attr::defaulted("os", Ty::Str, "The OS distribution: `Debian` (the default), `Ubuntu`, `Ubuntu 22.04`, `AlmaLinux`, ...")
                .force_new(),
            fixed(Attr::defaulted("ssh_keys", Ty::list(Ty::Str), "SSH public keys for the default user.")),
            fixed(Attr::optional("ssh_key_ids", Ty::list(Ty::Str), "Keys kept at meson (`meson_ssh_key` ids or names) for the default user too.")),
            fixed(Attr::defaulted("provider_name", Ty::Str, "Place the VM with this provider (`ionos`, `ovh`, `atomos`, ...); default: the cheapest that fits.")),
            fixed(Attr::defaulted("continent", Ty::Str, "Place the VM on this continent.")),
            fixed(Attr::defaulted("region", Ty::Str, "Place the VM in this region.")),
            Attr::defaulted("networks", Ty::list(Ty::Str), "Private networks to attach (ids, in NIC order, at most 4; in place: NICs are attached and detached on the running VM, those after the first change of order re-attached).")
                .tracked(),
            fixed(Attr::optional("attached_volumes", Ty::list(Ty::Str), "Standalone volumes to attach (ids, at most 8).")),
            fixed(Attr::optional("image_id", Ty::Str, "An image (`meson_image`) to copy the boot volume from, in place of `os`'s cloud image; the VM runs on the image's host.")),
            Attr::optional("labels", Ty::map(Ty::Str), "Labels (in place).").tracked(),
            Attr::defaulted("power_state", Ty::Str, "`running` (the default) or `stopped` (in place, through the power API).")
                .tracked(),
            Attr::optional("backups", Ty::Bool, "Daily automatic backups, the newest `backup_keep` kept (default false; in place: removing it turns them off, and their backups then expire).")
                .default(V::Bool(false))
                .tracked(),
            Attr::defaulted("backup_window", Ty::Str, "`HH-HH`, the UTC hours the daily backup starts within, e.g. `22-02` (default: a four-hour window meson picks when `backups` turns on; in place).")
                .follows("backups")
                .tracked(),
            Attr::optional("backup_keep", Ty::Num, "How many automatic backups are kept, 1 to 31 (default 7; in place).")
                .default(V::Num(7.0))
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
                        Attr::required("size", Ty::Num, "GB (grows in place, running or off; a volume never shrinks).").tracked(),
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
            ("cores", &["cores"]),
            ("memory_mib", &["memory_mib"]),
            ("specs.req.cpu.numberOfThreads", &["threads_per_core"]),
            ("specs.req.cpu.smtEnabled", &["smt"]),
            ("specs.req.cpu.min_frequency", &["min_frequency"]),
            ("specs.req.cpu.arch", &["arch"]),
            ("specs.req.cpu.flags", &["cpu_flags"]),
            ("specs.req.mem.capacity", &["memory_mib"]),
            ("specs.req.mem.requireECC", &["require_ecc"]),
            ("specs.req.misc.osDistribution", &["os"]),
            ("specs.authentication.ssh-key-ids", &["ssh_key_ids"]),
            ("specs.authentication", &["ssh_keys"]),
            ("specs.volumes", &["volume"]),
            ("provider", &["provider_name"]),
            ("continent", &["continent"]),
            ("region", &["region"]),
            ("networks", &["networks"]),
            ("network", &["networks"]),
            ("volumes", &["attached_volumes"]),
            ("image", &["image_id"]),
            ("labels", &["labels"]),
            ("name", &["name"]),
            ("window", &["backup_window"]),
            ("keep", &["backup_keep"]),
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

/// meson's view of the VM in the schema's attributes. `known` is the
/// configuration or state it refreshes: `attached_volumes` are the volumes
/// it names that are still attached (a `meson_volume_attachment` attaches
/// others, which are not this resource's), or every standalone volume
/// attached when it names none at all (an import).
fn to_json(vm: &Vm, known: &Json) -> Json {
    let sp = &vm.specs;
    let attached: Vec<String> = vm
        .volumes
        .iter()
        .filter(|v| v.standalone)
        .map(|v| v.id.to_string())
        .collect();
    let standalone: Vec<String> = match known.get("attached_volumes") {
        None => attached,
        Some(named) => texts(&serde_json::json!({"v": named}), "v")
            .unwrap_or_default()
            .into_iter()
            .filter(|id| attached.contains(id))
            .collect(),
    };
    let data: Vec<Json> = vm
        .volumes
        .iter()
        .filter(|v| v.kind == "data" && !v.standalone)
        .map(|v| {
            obj([
                ("name", Json::from(v.name.clone())),
                ("size", Json::from(v.size)),
            ])
        })
        .collect();
    // Without a policy meson reports no window nor count: those the
    // configuration holds for when backups turn on are kept.
    let (window, keep) = match &vm.backups {
        Some(b) => (Json::from(b.window.clone()), Json::from(b.keep)),
        None => (
            known
                .get("backup_window")
                .filter(|w| w.is_string())
                .cloned()
                .unwrap_or(Json::Null),
            known
                .get("backup_keep")
                .filter(|k| k.is_number())
                .cloned()
                .unwrap_or(Json::from(DEFAULT_KEEP)),
        ),
    };
    // meson lists every key the VM has, kept ones included, and not which
    // were kept: with `ssh_key_ids`, `ssh_keys` stays as written.
    let kept_ids = known.get("ssh_key_ids").cloned().unwrap_or(Json::Null);
    let ssh_keys = match known.get("ssh_keys") {
        Some(written @ Json::Array(_)) if kept_ids.as_array().is_some_and(|k| !k.is_empty()) => {
            written.clone()
        }
        _ => Json::from(sp.ssh_keys.clone()),
    };
    obj([
        ("id", Json::from(vm.id.to_string())),
        ("name", Json::from(vm.name.clone())),
        ("cores", Json::from(sp.cores)),
        ("memory_mib", Json::from(sp.memory_mib)),
        ("threads_per_core", Json::from(sp.threads_per_core)),
        ("smt", Json::from(sp.smt)),
        ("min_frequency", Json::from(sp.min_frequency_ghz)),
        ("arch", Json::from(sp.arch.clone())),
        ("cpu_flags", Json::from(sp.flags.clone())),
        ("require_ecc", Json::from(sp.require_ecc)),
        ("os", Json::from(sp.os_distribution.clone())),
        ("ssh_keys", ssh_keys),
        ("ssh_key_ids", kept_ids),
        ("provider_name", Json::from(sp.requested_provider.clone())),
        ("continent", Json::from(sp.requested_continent.clone())),
        ("region", Json::from(sp.requested_region.clone())),
        (
            "networks",
            Json::from(
                vm.private_net
                    .iter()
                    .map(|p| p.network.to_string())
                    .collect::<Vec<_>>(),
            ),
        ),
        (
            "attached_volumes",
            if standalone.is_empty() {
                Json::Null
            } else {
                Json::from(standalone)
            },
        ),
        (
            "image_id",
            sp.image.map_or(Json::Null, |id| Json::from(id.to_string())),
        ),
        ("labels", labels_json(&vm.labels)),
        ("power_state", Json::from(power_state(&vm.status))),
        ("backups", Json::from(vm.backups.is_some())),
        ("backup_window", window),
        ("backup_keep", keep),
        ("status", Json::from(vm.status.clone())),
        ("placed_provider", Json::from(vm.provider.clone())),
        ("placed_region", Json::from(vm.region.clone())),
        ("host", Json::from(vm.host.clone())),
        ("ipv4", Json::from(vm.ipv4.clone())),
        ("volume", Json::Array(data)),
    ])
}

fn ids(p: &Json, k: &str) -> Res<Option<Vec<Uuid>>> {
    texts(p, k)
        .map(|l| l.iter().map(|s| super::parse_id(s)).collect())
        .transpose()
}

fn request(p: &Json) -> Res<VmCreateRequest> {
    let volumes: Option<Vec<VolumeRequest>> = p
        .get("volume")
        .and_then(Json::as_array)
        .filter(|a| !a.is_empty())
        .map(|a| {
            a.iter()
                .map(|v| VolumeRequest {
                    name: text(v, "name").unwrap_or_default(),
                    size: number_u32(v, "size").unwrap_or_default(),
                    private: flag(v, "private"),
                    shareable: flag(v, "shareable"),
                    bootable: flag(v, "bootable"),
                    readonly: flag(v, "readonly"),
                })
                .collect()
        });
    Ok(VmCreateRequest {
        specs: VmRequestSpecs {
            req: VmRequirements {
                cpu: CpuRequest {
                    smt_enabled: flag(p, "smt"),
                    number_of_cores: number_u32(p, "cores").unwrap_or_default(),
                    number_of_threads: number_u32(p, "threads_per_core"),
                    min_frequency: p.get("min_frequency").and_then(Json::as_f64),
                    arch: texts(p, "arch").map(CpuArch),
                    flags: texts(p, "cpu_flags"),
                },
                mem: MemRequest {
                    capacity: number(p, "memory_mib").unwrap_or_default(),
                    require_ecc: flag(p, "require_ecc"),
                },
                pci: None,
                misc: text(p, "os").map(|os| MiscRequest {
                    os_distribution: Some(os),
                }),
            },
            volumes,
            authentication: match (texts(p, "ssh_keys"), texts(p, "ssh_key_ids")) {
                (None, None) => None,
                (ssh_keys, ssh_key_ids) => Some(VmAuthentication {
                    ssh_key: None,
                    ssh_keys,
                    ssh_key_ids,
                }),
            },
            vm_name: text(p, "name").unwrap_or_default(),
        },
        provider: text(p, "provider_name"),
        continent: text(p, "continent"),
        region: text(p, "region"),
        labels: labels(p),
        networks: ids(p, "networks")?,
        volumes: ids(p, "attached_volumes")?,
        image: text(p, "image_id")
            .map(|s| super::parse_id(&s))
            .transpose()?,
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
pub fn check_power_state(p: &Json) -> Res<()> {
    match text(p, "power_state").as_deref() {
        None | Some("running" | "stopped") => Ok(()),
        Some(other) => Err(Failure::msg(
            format!("power_state must be running or stopped, got {other:?}"),
            "",
        )
        .at(vec![Step::Attr("power_state".into())])),
    }
}

/// meson's default count of automatic backups kept.
const DEFAULT_KEEP: u32 = 7;

/// `backup_window`, when given, is `HH-HH` (UTC hours); `backup_keep` 1 to
/// 31.
pub fn check_backups(p: &Json) -> Res<()> {
    let hour = |h: &str| h.len() == 2 && h.parse::<u8>().is_ok_and(|h| h < 24);
    if let Some(w) = text(p, "backup_window")
        && !w.split_once('-').is_some_and(|(a, b)| hour(a) && hour(b))
    {
        return Err(Failure::msg(
            format!("backup_window must be HH-HH, UTC hours 00 to 23, got {w:?}"),
            "e.g. \"22-02\": a backup starting between 22:00 and 02:00 UTC",
        )
        .at(vec![Step::Attr("backup_window".into())]));
    }
    if let Some(k) = p.get("backup_keep").and_then(Json::as_f64)
        && !(k.fract() == 0.0 && (1.0..=31.0).contains(&k))
    {
        return Err(Failure::msg(
            format!("backup_keep must be a whole number from 1 to 31, got {k}"),
            "",
        )
        .at(vec![Step::Attr("backup_keep".into())]));
    }
    Ok(())
}

/// Turns the VM's automatic backups on (or changes their policy) as `p`
/// says: its window (meson's choice when unknown) and count.
async fn enable_backups(c: &Client, id: Uuid, p: &Json) -> Res<()> {
    let req = meson_client::types::backup::BackupPolicyRequest {
        window: text(p, "backup_window"),
        keep: number_u32(p, "backup_keep"),
    };
    c.vm_enable_backups(id, &req).await.map_err(err)?;
    Ok(())
}

pub async fn create(c: &Client, p: &Json, t: Duration, notes: &mut super::Notes) -> Res<Json> {
    check_power_state(p)?;
    check_backups(p)?;
    let r = c.vm_create(&request(p)?).await.map_err(err)?;
    notes.extend(r.warnings);
    let mut actions = vec![r.action.id];
    actions.extend(r.next_actions.iter().map(|a| a.id));
    let id = r.vm.id;
    wait(c, &actions, t, field)
        .await
        .map_err(|f| f.created(id))?;
    if text(p, "power_state").as_deref() == Some("stopped") {
        power(c, id, "stopped", t)
            .await
            .map_err(|f| f.created(id))?;
    }
    if flag(p, "backups") == Some(true) {
        enable_backups(c, id, p).await.map_err(|f| f.created(id))?;
    }
    Ok(to_json(&c.vm_get(r.vm.id).await.map_err(err)?, p))
}

pub async fn read(c: &Client, state: &Json) -> Res<Option<Json>> {
    match c.vm_get(id(state)?).await {
        Ok(vm) if vm.status == "deleting" => Ok(None),
        Ok(vm) => Ok(Some(to_json(&vm, state))),
        Err(e) if e.code() == Some("not_found") => Ok(None),
        Err(e) => Err(err(e)),
    }
}

pub async fn update(c: &Client, prior: &Json, p: &Json, t: Duration) -> Res<Json> {
    let id = id(prior)?;
    check_backups(p)?;
    if let Some(req) = super::rename_relabel(prior, p) {
        c.vm_update(id, &req).await.map_err(err)?;
    }
    if changed(prior, p, "cores") || changed(prior, p, "memory_mib") {
        let req = meson_client::types::vm::VmResizeRequest {
            cores: changed(prior, p, "cores")
                .then(|| number_u32(p, "cores"))
                .flatten(),
            memory_mib: changed(prior, p, "memory_mib")
                .then(|| number(p, "memory_mib"))
                .flatten(),
            // Running now: stopped for the change, started again after (a
            // change to `stopped` in the same plan follows).
            stop: Some(true),
        };
        let a = c.vm_resize(id, &req).await.map_err(err)?;
        wait(c, &[a.id], t, field).await?;
    }
    if changed(prior, p, "volume") {
        grow_volumes(c, id, prior, p, t).await?;
    }
    if changed(prior, p, "networks") {
        renetwork(c, id, prior, p, t).await?;
    }
    let (had, want) = (
        flag(prior, "backups") == Some(true),
        flag(p, "backups") == Some(true),
    );
    if want && (!had || changed(prior, p, "backup_window") || changed(prior, p, "backup_keep")) {
        enable_backups(c, id, p).await?;
    } else if had && !want {
        c.vm_disable_backups(id).await.map_err(err)?;
    }
    if changed(prior, p, "power_state")
        && let Some(to) = text(p, "power_state")
    {
        power(c, id, &to, t).await?;
    }
    Ok(to_json(&c.vm_get(id).await.map_err(err)?, p))
}

/// Grows the data volumes whose planned size differs from the state's
/// (meson refuses a smaller one, naming `size`).
async fn grow_volumes(c: &Client, id: Uuid, prior: &Json, p: &Json, t: Duration) -> Res<()> {
    let sizes = |j: &Json| -> Vec<(String, Option<u64>)> {
        j.get("volume")
            .and_then(Json::as_array)
            .map(|l| {
                l.iter()
                    .map(|v| (text(v, "name").unwrap_or_default(), v["size"].as_u64()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let had = sizes(prior);
    let vm = c.vm_get(id).await.map_err(err)?;
    for (i, (name, size)) in sizes(p).into_iter().enumerate() {
        let Some(size) = size else { continue };
        if had.iter().any(|(n, s)| *n == name && *s == Some(size)) {
            continue;
        }
        let Some(v) = vm
            .volumes
            .iter()
            .find(|v| v.kind == "data" && !v.standalone && v.name == name)
        else {
            continue;
        };
        let size = u32::try_from(size).unwrap_or(u32::MAX);
        let a = c.volume_resize(v.id, size).await.map_err(|e| {
            Failure::from_client(e, |_| None).at(vec![
                Step::Attr("volume".into()),
                Step::Index(i as i64),
                Step::Attr("size".into()),
            ])
        })?;
        wait(c, &[a.id], t, field).await?;
    }
    Ok(())
}

/// Brings the VM's NICs to the planned list, in order: the NICs from the
/// first place where the VM's order (without the dropped networks) and the
/// plan's part are detached, then the plan's from there attached in order.
/// A network kept in place keeps its NIC and address.
async fn renetwork(c: &Client, id: Uuid, prior: &Json, p: &Json, t: Duration) -> Res<()> {
    let had = ids(prior, "networks")?.unwrap_or_default();
    let want = ids(p, "networks")?.unwrap_or_default();
    let kept: Vec<Uuid> = had.iter().copied().filter(|n| want.contains(n)).collect();
    let same = kept.iter().zip(&want).take_while(|(a, b)| a == b).count();
    let detach = had.iter().filter(|n| !kept[..same].contains(n));
    for &n in detach {
        let a = c.vm_detach_network(id, n).await.map_err(err)?;
        wait(c, &[a.id], t, field).await?;
    }
    for &n in &want[same..] {
        let a = c.vm_attach_network(id, n).await.map_err(err)?;
        wait(c, &[a.id], t, field).await?;
    }
    Ok(())
}

pub async fn delete(c: &Client, prior: &Json, t: Duration) -> Res<()> {
    let a = c.vm_delete(id(prior)?).await.map_err(err)?;
    wait(c, &[a.id], t, field).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_backup_window_is_hh_hh_and_a_count_1_to_31() {
        for ok in [
            json!({}),
            json!({"backup_window": "22-02", "backup_keep": 7}),
            json!({"backup_window": "00-23", "backup_keep": 31}),
            json!({"backup_keep": 1}),
        ] {
            assert!(check_backups(&ok).is_ok(), "{ok}");
        }
        for (bad, attr) in [
            (json!({"backup_window": "24-02"}), "backup_window"),
            (json!({"backup_window": "2-4"}), "backup_window"),
            (json!({"backup_window": "22:02"}), "backup_window"),
            (json!({"backup_keep": 0}), "backup_keep"),
            (json!({"backup_keep": 32}), "backup_keep"),
            (json!({"backup_keep": 2.5}), "backup_keep"),
        ] {
            let f = check_backups(&bad).expect_err(&bad.to_string());
            assert_eq!(f.path, Some(vec![Step::Attr(attr.into())]), "{bad}");
        }
    }

    #[test]
    fn meson_s_backup_fields_are_the_backup_attributes() {
        assert_eq!(
            field("window"),
            Some(vec![Step::Attr("backup_window".into())])
        );
        assert_eq!(field("keep"), Some(vec![Step::Attr("backup_keep".into())]));
    }
}
