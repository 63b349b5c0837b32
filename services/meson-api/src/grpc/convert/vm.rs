//! VMs: answers, and `CreateVmRequest` as the REST request.

use super::json::Obj;
use super::meta::{map, price, timestamp};
use meson_proto::meson::v1 as pb;
use meson_types as wire;
use serde_json::Value;

pub fn vm(v: wire::Vm) -> pb::Vm {
    let s = v.specs;
    pb::Vm {
        id: v.id.to_string(),
        name: v.name,
        status: v.status,
        error_message: v.error_message,
        labels: map(&v.labels),
        created: Some(timestamp(v.created)),
        provider: v.provider,
        region: v.region,
        host: v.host,
        ipv4: v.ipv4,
        specs: Some(pb::VmSpecs {
            vcpus: s.vcpus,
            cores: s.cores,
            threads_per_core: s.threads_per_core,
            smt: s.smt,
            min_frequency_ghz: s.min_frequency_ghz,
            arch: s.arch,
            flags: s.flags,
            memory_mib: s.memory_mib,
            require_ecc: s.require_ecc,
            pci_devices: s
                .pci_devices
                .into_iter()
                .map(|d| pb::PciDevice {
                    vendor: d.vendor,
                    model: d.model,
                    quantity: d.quantity,
                })
                .collect(),
            os_distribution: s.os_distribution,
            os_version: s.os_version,
            ssh_keys: s.ssh_keys,
            requested_provider: s.requested_provider,
            requested_continent: s.requested_continent,
            requested_region: s.requested_region,
            image: s.image.map(|id| id.to_string()),
            backup: s.backup.map(|id| id.to_string()),
        }),
        volumes: v
            .volumes
            .into_iter()
            .map(|x| pb::VmVolume {
                id: x.id.to_string(),
                name: x.name,
                size: x.size,
                kind: x.kind,
                standalone: x.standalone,
            })
            .collect(),
        private_net: v
            .private_net
            .into_iter()
            .map(|n| pb::PrivateNet {
                network: n.network.to_string(),
                ip: n.ip,
                mac_address: n.mac_address,
            })
            .collect(),
        price: v.price.map(price),
        backups: v.backups.map(super::backup_policy),
    }
}

/// `CreateVmRequest` as the REST VM request.
pub fn vm_create(r: &pb::CreateVmRequest) -> Value {
    let specs = r.specs.as_ref().map(|s| {
        let req = s.req.as_ref().map(|q| {
            let cpu = q.cpu.as_ref().map(|c| {
                Obj::new()
                    .flag("smtEnabled", c.smt_enabled)
                    .num("numberOfCores", c.number_of_cores)
                    .num("numberOfThreads", c.number_of_threads)
                    .num("min_frequency", c.min_frequency)
                    .list("arch", &c.arch)
                    .list("flags", &c.flags)
            });
            let mem = q.mem.as_ref().map(|m| {
                Obj::new()
                    .num("capacity", m.capacity as f64)
                    .flag("requireECC", m.require_ecc)
            });
            let pci = (!q.pci_devices.is_empty()).then(|| {
                let devices = q
                    .pci_devices
                    .iter()
                    .map(|d| {
                        Obj::new()
                            .str("vendor", &d.vendor)
                            .str("model", &d.model)
                            .num("quantity", d.quantity)
                    })
                    .collect();
                Obj::new().objs("devices", devices)
            });
            Obj::new()
                .obj("cpu", cpu)
                .obj("mem", mem)
                .obj("pci", pci)
                .obj(
                    "misc",
                    Some(Obj::new().str("osDistribution", &q.os_distribution)),
                )
        });
        let volumes = s
            .volumes
            .iter()
            .map(|v| {
                Obj::new()
                    .str("name", &v.name)
                    .num("size", v.size)
                    .opt("private", v.private)
                    .flag("shareable", v.shareable)
                    .flag("bootable", v.bootable)
                    .flag("readonly", v.readonly)
            })
            .collect();
        let auth = s.authentication.as_ref().map(|a| {
            Obj::new()
                .list("ssh-keys", &a.ssh_keys)
                .list("ssh-key-ids", &a.ssh_key_ids)
        });
        Obj::new()
            .obj("req", req)
            .objs("volumes", volumes)
            .obj("authentication", auth)
            .str("vm_name", &s.vm_name)
    });
    Obj::new()
        .obj("specs", specs)
        .str("provider", &r.provider)
        .str("continent", &r.continent)
        .str("region", &r.region)
        .labels("labels", &r.labels)
        .list("networks", &r.networks)
        .list("volumes", &r.volumes)
        .str("image", &r.image)
        .value()
}

/// A `MigrateVmRequest` as the REST body of its migrate action.
pub fn vm_migrate(r: &pb::MigrateVmRequest) -> Value {
    Obj::new().str("host", &r.host).value()
}

/// A `VmNetworkRequest` as the REST body of its attach or detach action.
pub fn vm_network(r: &pb::VmNetworkRequest) -> Value {
    Obj::new().str("network", &r.network).value()
}

/// A `RebuildVmRequest` as the REST body of its rebuild action.
pub fn vm_rebuild(r: &pb::RebuildVmRequest) -> Value {
    Obj::new().str("image", &r.image).str("os", &r.os).value()
}

/// A `ResizeVmRequest` as the REST body of its resize action.
pub fn vm_resize(r: &pb::ResizeVmRequest) -> Value {
    Obj::new()
        .opt("cores", r.cores)
        .opt("memory_mib", r.memory_mib)
        .flag("stop", r.stop)
        .value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_typed_vm_request_is_the_rest_one() {
        let r = pb::CreateVmRequest {
            specs: Some(pb::VmRequestSpecs {
                req: Some(pb::VmRequirements {
                    cpu: Some(pb::CpuRequest {
                        number_of_cores: 2,
                        arch: vec!["X86_64".into()],
                        ..Default::default()
                    }),
                    mem: Some(pb::MemRequest {
                        capacity: 4096,
                        require_ecc: false,
                    }),
                    pci_devices: vec![],
                    os_distribution: "Debian".into(),
                }),
                volumes: vec![pb::VolumeRequest {
                    name: "data".into(),
                    size: 30,
                    private: Some(false),
                    ..Default::default()
                }],
                authentication: Some(pb::VmAuthentication {
                    ssh_keys: vec!["ssh-ed25519 AAAA x".into()],
                    ..Default::default()
                }),
                vm_name: "web".into(),
            }),
            provider: "ionos".into(),
            ..Default::default()
        };
        assert_eq!(
            vm_create(&r),
            json!({"specs": {"req": {"cpu": {"numberOfCores": 2, "arch": ["X86_64"]},
                "mem": {"capacity": 4096}, "misc": {"osDistribution": "Debian"}},
                "volumes": [{"name": "data", "size": 30, "private": false}],
                "authentication": {"ssh-keys": ["ssh-ed25519 AAAA x"]},
                "vm_name": "web"}, "provider": "ionos"})
        );
        // Nothing set: the parser names what is missing.
        assert_eq!(vm_create(&pb::CreateVmRequest::default()), json!({}));
    }
}
