//! Domain → wire conversions, in one place.

use crate::app::VmParts;
use meson_core::action::Action;
use meson_core::vm::Vm;
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

/// A VM with its volumes and NICs (pass the parts of a whole page; this
/// VM's are picked out).
pub fn vm(vm: &Vm, parts: &VmParts) -> wire::Vm {
    let volumes = &parts.volumes;
    let s = &vm.spec;
    wire::Vm {
        id: vm.id.0,
        name: vm.name.clone(),
        status: vm.status.as_str().to_owned(),
        error_message: vm.error_message.clone(),
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
            image: s.image.map(|id| id.0),
            backup: s.backup.map(|id| id.0),
        },
        volumes: volumes
            .iter()
            .filter(|v| v.vm_id == Some(vm.id) || v.attached_to == Some(vm.id))
            .map(|v| wire::VmVolume {
                id: v.id.0,
                name: v.name.clone(),
                size: v.size_gb,
                kind: v.kind.as_str().to_owned(),
                standalone: v.standalone(),
            })
            .collect(),
        private_net: parts
            .nics
            .iter()
            .filter(|n| n.vm_id == vm.id)
            .map(|n| wire::network::PrivateNet {
                network: n.network_id.0,
                ip: n.address.map(|a| a.to_string()),
                mac_address: n.mac.clone(),
            })
            .collect(),
        backups: vm.backup_policy.as_ref().map(backup_policy),
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

/// A network with the VMs attached to it.
pub fn network(
    n: &meson_core::network::Network,
    vms: &[meson_core::VmId],
) -> wire::network::Network {
    wire::network::Network {
        id: n.id.0,
        name: n.name.clone(),
        status: n.status.as_str().to_owned(),
        labels: n.labels.clone(),
        created: n.created,
        cidr: n.subnet.cidr.to_string(),
        gateway: n.subnet.gateway.to_string(),
        dhcp: n.subnet.dhcp,
        range: wire::network::AddressRange {
            start: n.subnet.range.start.to_string(),
            last: n.subnet.range.last.to_string(),
        },
        vms: vms.iter().map(|v| v.0).collect(),
    }
}

fn node_specs(s: &meson_core::kaas::NodeSpecs) -> wire::cluster::NodeSpecs {
    wire::cluster::NodeSpecs {
        cpu: s.cpu,
        ram: s.ram_mib,
        storage: s.storage_gb,
        gpu: s.gpu,
    }
}

/// A node pool; `nodes` may hold other pools' nodes too (its own are
/// counted, all but those being deleted).
pub fn pool(
    p: &meson_core::cluster::NodePool,
    nodes: &[meson_core::cluster::Node],
) -> wire::cluster::Pool {
    wire::cluster::Pool {
        id: p.id.0,
        name: p.spec.name.clone(),
        autoscale: p.spec.autoscale,
        min_nodes: p.spec.min_nodes,
        max_nodes: p.spec.max_nodes,
        desired_nodes: p.spec.desired_nodes,
        current_nodes: nodes
            .iter()
            .filter(|n| n.pool == Some(p.id))
            .filter(|n| n.status != meson_core::cluster::NodeStatus::Deleting)
            .count() as u32,
        specs: node_specs(&p.spec.specs),
        billing: p.spec.billing.as_str().to_owned(),
        labels: p.spec.labels.clone(),
        taints: p.spec.taints.iter().map(ToString::to_string).collect(),
    }
}

/// A cluster with its pools; placement and price come from its nodes' VMs.
pub fn cluster(v: &crate::app::ClusterView) -> wire::cluster::Cluster {
    let c = &v.cluster;
    let placed: Vec<&meson_core::vm::Placement> = v
        .vms
        .iter()
        .filter_map(|vm| vm.placement.as_ref())
        .collect();
    let price = placed.first().map(|first| wire::Price {
        hourly: placed.iter().map(|p| p.price_hourly).sum::<f64>(),
        monthly: placed.iter().map(|p| p.price_monthly).sum::<f64>(),
        currency: first.currency.clone(),
    });
    wire::cluster::Cluster {
        id: c.id.0,
        name: c.name.clone(),
        status: c.status.as_str().to_owned(),
        error_message: c.error_message.clone(),
        kubernetes_version: c.kubernetes_version.clone(),
        update_policy: c.spec.update_policy.as_str().to_owned(),
        provider: placed
            .first()
            .map(|p| p.provider.clone())
            .or_else(|| c.spec.provider.clone()),
        region: placed
            .first()
            .map(|p| p.region.clone())
            .or_else(|| c.spec.region.clone()),
        network: wire::cluster::ClusterNetwork {
            cidr: c.spec.nodes_subnet.cidr.to_string(),
            dhcp: c.spec.nodes_subnet.dhcp,
            range: wire::network::AddressRange {
                start: c.spec.nodes_subnet.range.start.to_string(),
                last: c.spec.nodes_subnet.range.last.to_string(),
            },
        },
        control_plane: wire::cluster::ControlPlane {
            endpoint: c.server_url(),
            nodes: c.spec.control_plane.nodes,
            specs: node_specs(&c.spec.control_plane.specs),
        },
        pools: v.pools.iter().map(|p| pool(p, &v.nodes)).collect(),
        cni: c.spec.cni.as_str().to_owned(),
        pod_cidr: c.spec.pod_cidr.to_string(),
        service_cidr: c.spec.service_cidr.to_string(),
        labels: c.labels.clone(),
        created: c.created,
        price,
    }
}

/// A cluster's nodes, with their VMs' address and host.
pub fn nodes(v: &crate::app::ClusterView) -> Vec<wire::cluster::Node> {
    v.nodes
        .iter()
        .map(|n| {
            let vm = v.vms.iter().find(|vm| vm.id == n.vm);
            wire::cluster::Node {
                id: n.id.0,
                name: n.name.clone(),
                role: n.role.as_str().to_owned(),
                pool: n.pool.map(|p| p.0),
                status: n.status.as_str().to_owned(),
                error_message: n.error_message.clone(),
                kubernetes_version: n.kubernetes_version.clone(),
                ip: vm.and_then(|vm| vm.ipv4).map(|ip| ip.to_string()),
                host: vm
                    .and_then(|vm| vm.placement.as_ref())
                    .map(|p| p.host.clone()),
                provider_id: format!("elemento://{}", n.vm),
                created: n.created,
            }
        })
        .collect()
}

/// A tenant's quotas, one entry per resource.
pub fn quota(v: &crate::app::QuotaView) -> wire::admin::Quota {
    wire::admin::Quota {
        tenant: v.tenant.to_string(),
        plan: v.plan.clone(),
        limits: v
            .quotas
            .entries()
            .into_iter()
            .zip(v.usage.entries())
            .zip(v.overrides.entries())
            .map(
                |(((name, quota), (_, current)), (_, set))| wire::admin::QuotaLimit {
                    name: name.to_owned(),
                    quota,
                    current,
                    default: set.is_none(),
                },
            )
            .collect(),
    }
}

/// A plan with its quotas in force (`quotas`: the plan's over the
/// deployment's defaults).
pub fn plan(
    p: &meson_core::quota::Plan,
    quotas: &meson_core::quota::Resources,
) -> wire::admin::Plan {
    wire::admin::Plan {
        name: p.name.clone(),
        description: p.description.clone(),
        quotas: quotas
            .entries()
            .into_iter()
            .zip(p.quotas.entries())
            .map(|((name, quota), (_, set))| wire::admin::PlanQuota {
                name: name.to_owned(),
                quota,
                default: set.is_none(),
            })
            .collect(),
    }
}

pub fn target(t: &meson_core::target::Target) -> wire::admin::Target {
    wire::admin::Target {
        id: t.id.0,
        name: t.name.clone(),
        host: t.host.clone(),
        compute_port: t.compute_port,
        storage_port: t.storage_port,
        network_port: t.network_port,
        auth_port: t.auth_port,
        provider: t.provider.clone(),
        region: t.region.clone(),
        continent: t.continent.clone(),
        enabled: t.enabled,
    }
}

pub fn audit_entry(e: &meson_core::audit::AuditEntry) -> wire::admin::AuditEntry {
    wire::admin::AuditEntry {
        id: e.id,
        time: e.at,
        tenant: e.tenant.clone(),
        subject: e.subject.clone(),
        role: e.role.clone(),
        operation: e.operation.clone(),
        method: e.method.clone(),
        path: e.path.clone(),
        resource_type: e.resource_type.clone(),
        resource_id: e.resource_id.clone(),
        action_id: e.action_id,
        status: e.status,
        correlation_id: e.correlation_id.clone(),
    }
}

pub fn flavor(f: &meson_core::flavor::Flavor) -> wire::catalog::Flavor {
    wire::catalog::Flavor {
        name: f.name.to_owned(),
        description: f.description.to_owned(),
        vcpus: f.vcpus,
        memory_mib: f.memory_mib,
        gpus: f.gpus,
        gpu_model: f.gpu_model.map(str::to_owned),
        cpu_flags: f.flags.iter().map(|x| (*x).to_owned()).collect(),
    }
}

/// The providers of `targets` (sorted by provider and region), each with
/// its continents and regions and the hosts of each region.
pub fn providers(targets: Vec<meson_core::target::Target>) -> Vec<wire::catalog::Provider> {
    let mut providers: Vec<wire::catalog::Provider> = Vec::new();
    for t in targets {
        if providers.last().is_none_or(|p| p.name != t.provider) {
            providers.push(wire::catalog::Provider {
                name: t.provider.clone(),
                continents: vec![],
                regions: vec![],
            });
        }
        let Some(p) = providers.last_mut() else {
            continue;
        };
        if !p.continents.contains(&t.continent) {
            p.continents.push(t.continent.clone());
        }
        match p.regions.iter_mut().find(|r| r.name == t.region) {
            Some(r) => r.hosts += 1,
            None => p.regions.push(wire::catalog::Region {
                name: t.region,
                continent: t.continent,
                hosts: 1,
            }),
        }
    }
    providers
}

/// A catalogue release as the API shows it on `today`.
pub fn kubernetes_version(
    r: &meson_core::kubernetes::Release,
    today: chrono::NaiveDate,
) -> wire::catalog::KubernetesVersion {
    wire::catalog::KubernetesVersion {
        version: r.version.to_string(),
        minor: r.version.minor_line(),
        default: r.is_default(today),
        deprecated: r.is_deprecated(today),
        released: r.released.to_string(),
        end_of_life: r.end_of_life.to_string(),
        upgradable_to: meson_core::kubernetes::upgradable_to(&r.version)
            .iter()
            .map(|u| u.version.to_string())
            .collect(),
    }
}

/// A VM's price on one host.
pub fn quote(o: &meson_placement::Offer) -> wire::quote::Quote {
    let p = &o.placement;
    wire::quote::Quote {
        provider: p.provider.clone(),
        region: p.region.clone(),
        continent: o.continent.clone(),
        host: p.host.clone(),
        price: wire::Price {
            hourly: p.price_hourly,
            monthly: p.price_monthly,
            currency: p.currency.clone(),
        },
    }
}

fn price(hourly: f64, monthly: f64, currency: &str) -> wire::Price {
    wire::Price {
        hourly,
        monthly,
        currency: currency.to_owned(),
    }
}

fn group_quote(g: &meson_placement::cluster::GroupOffer) -> wire::quote::NodeGroupQuote {
    let p = &g.offer.placement;
    let (hourly, monthly) = g.price(g.group.nodes);
    let s = &g.group.specs;
    wire::quote::NodeGroupQuote {
        name: g.group.name.clone(),
        nodes: g.group.nodes,
        max_nodes: g.group.max_nodes,
        specs: wire::quote::NodeSpecs {
            cpu: s.cpu,
            ram: s.ram_mib,
            storage: s.storage_gb,
            gpu: s.gpu,
        },
        host: p.host.clone(),
        node_price: price(p.price_hourly, p.price_monthly, &p.currency),
        price: price(hourly, monthly, &p.currency),
    }
}

/// A cluster's price in one region: the control plane and each pool.
pub fn cluster_quote(o: &meson_placement::cluster::ClusterOffer) -> wire::quote::ClusterQuote {
    let mut groups = o.groups.iter().map(group_quote);
    let control_plane = groups
        .next()
        .unwrap_or_else(|| wire::quote::NodeGroupQuote {
            name: meson_placement::cluster::CONTROL_PLANE.to_owned(),
            nodes: 0,
            max_nodes: 0,
            specs: wire::quote::NodeSpecs {
                cpu: 0,
                ram: 0,
                storage: 0,
                gpu: 0,
            },
            host: String::new(),
            node_price: price(0.0, 0.0, &o.currency),
            price: price(0.0, 0.0, &o.currency),
        });
    wire::quote::ClusterQuote {
        provider: o.provider.clone(),
        region: o.region.clone(),
        continent: o.continent.clone(),
        control_plane,
        pools: groups.collect(),
        price: price(o.hourly, o.monthly, &o.currency),
        max_price: price(o.max_hourly, o.max_monthly, &o.currency),
    }
}

pub fn console(c: &meson_core::console::Console) -> wire::console::Console {
    wire::console::Console {
        id: c.id.0,
        vm: c.vm_id.0,
        status: c.status.as_str().to_owned(),
        requested_by: c.subject.clone(),
        created: c.created,
        expires: c.expires,
        opened: c.opened,
        closed: c.closed,
        close_reason: c.close_reason.clone(),
        bytes_in: c.bytes_in,
        bytes_out: c.bytes_out,
    }
}

pub fn backup_policy(p: &meson_core::backup::BackupPolicy) -> wire::backup::BackupPolicy {
    wire::backup::BackupPolicy {
        window: p.window(),
        keep: p.keep,
    }
}

pub fn backup(b: &meson_core::backup::Backup) -> wire::backup::Backup {
    wire::backup::Backup {
        id: b.id.0,
        name: b.name.clone(),
        vm: b.vm_id.0,
        vm_name: b.vm_name.clone(),
        kind: b.kind.as_str().to_owned(),
        status: b.status.as_str().to_owned(),
        size: b.size_gb,
        volumes: b
            .volumes
            .iter()
            .map(|v| wire::backup::BackupVolume {
                volume: v.volume.map(|id| id.0),
                kind: if v.standalone {
                    "standalone".to_owned()
                } else {
                    v.kind.as_str().to_owned()
                },
                size: v.size_gb,
            })
            .collect(),
        host: b.host.clone(),
        provider: b.provider.clone(),
        region: b.region.clone(),
        labels: b.labels.clone(),
        error: b.error_message.clone(),
        created: b.created,
        expires: b.expires,
    }
}

pub fn volume(v: &meson_core::volume::Volume) -> wire::volume::Volume {
    wire::volume::Volume {
        id: v.id.0,
        name: v.name.clone(),
        kind: v.kind.as_str().to_owned(),
        size: v.size_gb,
        status: v.status.as_str().to_owned(),
        vm: v.vm_id.map(|id| id.0),
        standalone: v.standalone(),
        attached_to: v.attached_to.map(|id| id.0),
        labels: v.labels.clone(),
        bootable: v.bootable,
        readonly: v.readonly,
        host: v.placement.as_ref().map(|p| p.host.clone()),
        provider: v.placement.as_ref().map(|p| p.provider.clone()),
        region: v.placement.as_ref().map(|p| p.region.clone()),
        created: v.created,
    }
}

pub fn member(m: &meson_core::member::Member) -> wire::member::Member {
    wire::member::Member {
        subject: m.subject.clone(),
        email: m.email.clone(),
        role: m.role.clone(),
        added_by: m.added_by.clone(),
        created: m.created,
        updated: m.updated,
        limits: wire::member::MemberLimits {
            vms: m.limits.vms,
            vcpus: m.limits.vcpus,
            ram_mib: m.limits.ram_mib,
        },
    }
}

pub fn invitation(i: &meson_core::member::Invitation) -> wire::member::Invitation {
    wire::member::Invitation {
        id: i.id.0,
        organization: i.tenant.to_string(),
        email: i.email.clone(),
        role: i.role.clone(),
        status: i.status(chrono::Utc::now()).as_str().to_owned(),
        invited_by: i.invited_by.clone(),
        created: i.created,
        expires: i.expires,
        accepted: i.accepted,
        accepted_by: i.accepted_by.clone(),
        revoked: i.revoked,
        revoked_by: i.revoked_by.clone(),
    }
}

pub fn organization(n: &meson_db::organizations::Node) -> wire::organization::Organization {
    wire::organization::Organization {
        id: n.org.id.to_string(),
        name: n.org.name.clone(),
        parent: n.org.parent.as_ref().map(ToString::to_string),
        quotas: n.org.parent.is_some().then(|| {
            n.quotas
                .entries()
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.unwrap_or(0)))
                .collect()
        }),
        depth: n.depth,
        created_by: n.org.created_by.clone(),
        created: n.org.created,
    }
}

pub fn orphan(o: &meson_core::orphan::Orphan) -> wire::admin::Orphan {
    use meson_core::orphan::Decision;
    wire::admin::Orphan {
        id: o.id.0,
        target_id: o.target_id.0,
        host: o.host.clone(),
        atomos_id: o.atomos_id.clone(),
        atomos_name: o.atomos_name.clone(),
        vm_id: o.owner.as_ref().map(|w| w.vm.0),
        tenant_tag: o.owner.as_ref().and_then(|w| w.tenant_tag.clone()),
        tenant: o.tenant.as_ref().map(|t| t.to_string()),
        cluster: o
            .owner
            .as_ref()
            .and_then(|w| w.cluster_prefix.as_ref().map(|(c, _)| c.clone())),
        state: o.state.clone(),
        vcpus: o.vcpus,
        ram_mib: o.ram_mib,
        ipv4: o.ipv4,
        volumes: o
            .volumes
            .iter()
            .map(|v| wire::admin::OrphanVolume {
                atomos_id: v.atomos_id.clone(),
                name: v.name.clone(),
                size_gb: v.size_gb,
                bootable: v.bootable,
                readonly: v.readonly,
                cloudinit: v.cloudinit,
            })
            .collect(),
        reason: o.reason.clone(),
        decision: o.decision.as_ref().map(|d| d.as_str().to_owned()),
        adopt_tenant: match &o.decision {
            Some(Decision::Adopt { tenant, .. }) => Some(tenant.to_string()),
            _ => None,
        },
        decided_by: o.decided_by.clone(),
        decided_at: o.decided_at,
        error_message: o.error_message.clone(),
        first_seen: o.first_seen,
        last_seen: o.last_seen,
    }
}
