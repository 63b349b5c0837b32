//! The compute daemon's host status (`GET /host/status`, Electros'
//! dashboard gauges) and playbook path, over meson.
//!
//! AtomOS answered for its one host: every VM on it, its cores, slots,
//! RAM and volumes. meson shows a tenant its own VMs and volumes, never its
//! hosts' capacity nor other tenants' VMs: so the status is the caller's
//! tenant's share of meson's hosts, from its lists of VMs and volumes, and
//! its capacity is its quota (`total_slots_count` its `vcpus` quota, the
//! percentage of it allocated). What meson does not expose (physical cores,
//! RAM in use inside the VMs, host bridges, display ports) is `null` or
//! empty. `hosts` adds which of meson's hosts the VMs run on.
//!
//! meson runs no playbooks: `GET /process_playbook/path` has none.

use crate::catalog::Daemon;
use crate::error::{DResult, Detail};
use crate::routes::{AppState, Authed};
use axum::{Json, Router};
use meson_client::VolumeFilter;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The routes served, `(method, path)`.
pub fn served() -> Vec<(&'static str, String)> {
    let b = Daemon::Compute.base();
    ["/host/status", "/process_playbook/path"]
        .into_iter()
        .map(|p| ("GET", format!("{b}{p}")))
        .collect()
}

pub fn routes() -> Router<AppState> {
    use axum::routing::get;
    let b = Daemon::Compute.base();
    Router::new()
        .route(&format!("{b}/host/status"), get(host_status))
        .route(
            &format!("{b}/process_playbook/path"),
            get(|_: Authed| async { Json(json!({"path": null, "playbooks": []})) }),
        )
}

/// What the tenant's VMs hold on one host.
#[derive(Default)]
struct HostShare {
    provider: Option<String>,
    region: Option<String>,
    vms: u64,
    vcpus: u64,
    ram_mib: u64,
}

/// The OS family of a meson OS distribution (`ubuntu`, `windows-2022`).
fn os_family(distribution: &str) -> &'static str {
    if distribution.to_ascii_lowercase().starts_with("windows") {
        "windows"
    } else {
        "linux"
    }
}

/// `part` of `whole`, in whole percent (0 of nothing).
fn percent(part: u64, whole: i64) -> u64 {
    match u64::try_from(whole) {
        Ok(w) if w > 0 => (part * 100 + w / 2) / w,
        _ => 0,
    }
}

/// `GET /host/status`: the caller's tenant's VMs and volumes on meson's
/// hosts, in the AtomOS host status's keys.
async fn host_status(a: Authed) -> DResult<Json<Value>> {
    let filter = VolumeFilter::default();
    let (vms, volumes, quota) = tokio::try_join!(
        a.meson.vm_list_all(),
        a.meson.volume_list_all(&filter),
        a.meson.quotas(),
    )
    .map_err(Detail::meson)?;
    let quota_of = |name: &str| {
        quota
            .limits
            .iter()
            .find(|l| l.name == name)
            .map(|l| l.quota)
    };
    let slots: u64 = vms.iter().map(|v| u64::from(v.specs.vcpus)).sum();
    let cores: u64 = vms.iter().map(|v| u64::from(v.specs.cores)).sum();
    let ram: u64 = vms.iter().map(|v| v.specs.memory_mib).sum();
    let storage: u64 = volumes.iter().map(|v| u64::from(v.size)).sum();
    let nics: usize = vms.iter().map(|v| v.private_net.len()).sum();

    // family -> flavour -> VMs
    let mut families: BTreeMap<&str, BTreeMap<String, u64>> = BTreeMap::new();
    for v in &vms {
        let d = v.specs.os_distribution.to_lowercase();
        *families
            .entry(os_family(&d))
            .or_default()
            .entry(d)
            .or_default() += 1;
    }
    let os_families: serde_json::Map<String, Value> = families
        .into_iter()
        .map(|(family, flavours)| {
            let count: u64 = flavours.values().sum();
            let flavours: Vec<Value> = flavours
                .into_iter()
                .map(|(name, count)| json!({"name": name, "count": count}))
                .collect();
            (
                family.to_owned(),
                json!({"count": count, "flavours": flavours}),
            )
        })
        .collect();

    let storages: Vec<Value> = volumes
        .iter()
        .map(|v| {
            json!({
                "volume_id": v.id,
                "name": v.name,
                "sizeGB": v.size.to_string(),
                "format": "qcow2",
                "bus": "virtio",
                "vm_uuids": v.attached_to.or(v.vm).into_iter().collect::<Vec<_>>(),
            })
        })
        .collect();

    let mut hosts: BTreeMap<&str, HostShare> = BTreeMap::new();
    for v in &vms {
        let Some(h) = &v.host else { continue };
        let e = hosts.entry(h).or_insert_with(|| HostShare {
            provider: v.provider.clone(),
            region: v.region.clone(),
            ..HostShare::default()
        });
        e.vms += 1;
        e.vcpus += u64::from(v.specs.vcpus);
        e.ram_mib += v.specs.memory_mib;
    }
    let hosts: Vec<Value> = hosts
        .into_iter()
        .map(|(host, h)| {
            json!({"host": host, "provider": h.provider, "region": h.region,
                   "vm_count": h.vms, "slots": h.vcpus, "ram_mib": h.ram_mib})
        })
        .collect();

    let slot_quota = quota_of("vcpus");
    Ok(Json(json!({
        "vm_count": vms.len(),
        "client_id_count": usize::from(!vms.is_empty()),
        "allocated_slots_count": slots,
        "allocated_cores_count": cores,
        "total_slots_count": slot_quota,
        "slot_allocation_percentage": percent(slots, slot_quota.unwrap_or(0)),
        "total_cores_count": null,
        "core_allocation_percentage": null,
        "core_provisioning": [],
        "total_allocated_ram_mib": ram,
        "total_ram_mib": quota_of("ram_mib"),
        "total_used_ram_mib": null,
        "total_allocated_storage_size_gb": storage,
        "total_storage_size_gb": quota_of("storage_gb"),
        "storage_count": storages.len(),
        "storages": storages,
        "os_families": os_families,
        "nic_count": nics,
        "bridge_interfaces": [],
        "direct_interfaces": [],
        // meson's consoles are VNC, relayed over its own URL, not a port.
        "dom_displays": {"ports": [], "protocols": ["vnc"]},
        "hosts": hosts,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_and_percentages() {
        assert_eq!(os_family("Ubuntu"), "linux");
        assert_eq!(os_family("windows-2022"), "windows");
        assert_eq!(percent(3, 4), 75);
        assert_eq!(percent(1, 3), 33);
        assert_eq!(percent(2, 3), 67);
        assert_eq!(percent(5, 0), 0);
        assert_eq!(percent(5, -1), 0);
    }
}
