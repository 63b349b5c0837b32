//! Domain → wire conversions, in one place.

use meson_core::action::Action;
use meson_core::vm::Vm;
use meson_core::volume::Volume;
use meson_types as wire;

pub fn action(a: &Action) -> wire::Action {
    wire::Action {
        id: a.id.0,
        command: a.command.clone(),
        status: a.status.as_str().to_owned(),
        progress: a.progress,
        started: a.started,
        finished: a.finished,
        resources: a
            .resources
            .iter()
            .map(|(t, id)| wire::ActionResource {
                id: *id,
                kind: t.as_str().to_owned(),
            })
            .collect(),
        error: a.error.as_ref().map(|e| wire::ActionError {
            code: e.code.clone(),
            message: e.message.clone(),
        }),
    }
}

/// A VM with its volumes (pass all volumes of a page; this one's are picked out).
pub fn vm(vm: &Vm, volumes: &[Volume]) -> wire::Vm {
    let s = &vm.spec;
    wire::Vm {
        id: vm.id.0,
        name: vm.name.clone(),
        status: vm.status.as_str().to_owned(),
        labels: vm.labels.clone(),
        created: vm.created,
        provider: vm.placement.as_ref().map(|p| p.provider.clone()),
        region: vm.placement.as_ref().map(|p| p.region.clone()),
        host: vm.placement.as_ref().map(|p| p.host.clone()),
        ipv4: vm.ipv4.map(|a| a.to_string()),
        specs: wire::VmSpecs {
            vcpus: s.cpu.vcpus(),
            cores: s.cpu.cores,
            threads_per_core: s.cpu.threads_per_core,
            smt: s.cpu.smt,
            min_frequency_ghz: s.cpu.min_frequency_ghz,
            arch: s.cpu.archs.clone(),
            flags: s.cpu.flags.clone(),
            memory_mib: s.memory_mib,
            require_ecc: s.require_ecc,
            pci_devices: s
                .pci
                .iter()
                .map(|p| wire::vm::PciDevice {
                    vendor: p.vendor.clone(),
                    model: p.model.clone(),
                    quantity: p.quantity,
                })
                .collect(),
            os_distribution: s.os.distribution.clone(),
            os_version: s.os.version.clone(),
            ssh_keys: s.ssh_keys.iter().map(|k| k.as_str().to_owned()).collect(),
            requested_provider: s.provider.clone(),
            requested_continent: s.continent.clone(),
            requested_region: s.region.clone(),
        },
        volumes: volumes
            .iter()
            .filter(|v| v.vm_id == Some(vm.id))
            .map(|v| wire::VmVolume {
                id: v.id.0,
                name: v.name.clone(),
                size: v.size_gb,
                kind: v.kind.as_str().to_owned(),
            })
            .collect(),
        price: vm.placement.as_ref().map(|p| wire::Price {
            hourly: p.price_hourly,
            monthly: p.price_monthly,
            currency: p.currency.clone(),
        }),
    }
}

pub fn warning(w: &meson_core::parse::Warning) -> wire::Warning {
    wire::Warning {
        field: w.field.clone(),
        message: w.message.clone(),
    }
}
