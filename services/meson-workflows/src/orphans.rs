//! The reconciler's look for orphans ([`meson_core::orphan`]): every
//! host's VMs that no row of meson's names, after a database restore or
//! made outside meson. Those whose names carry a tenant meson knows are
//! adopted back into it; the rest are recorded for an operator, whose
//! decision (adopt into a tenant, delete from the host) the next pass
//! carries out. A host that does not answer is left alone, and nothing is
//! deleted without that decision.

use crate::Env;
use crate::atomos::{destroy_volume, unregister_by_name};
use atomos_driver::{AtomosClient, VmState};
use meson_core::orphan::{Decision, Orphan, OrphanVolume};
use meson_core::target::Target;
use meson_core::vm::{CpuSpec, DataVolumeSpec, Vm, VmSpec, VmStatus};
use meson_core::volume::{Volume, VolumeKind, VolumeStatus};
use meson_core::{TenantId, VmId, VolumeId};
use meson_db::orphans::Seen;
use std::collections::BTreeMap;

/// What a pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// VMs adopted into their tenants (by their names or by decision).
    pub adopted: usize,
    /// Orphans deleted from their hosts by decision.
    pub deleted: usize,
    /// Orphans left for an operator.
    pub held: usize,
}

/// One pass over every target, enabled or not (a drained host still runs
/// VMs).
pub async fn tick(env: &Env) -> meson_core::Result<Pass> {
    let mut pass = Pass::default();
    let mut tenants: Option<BTreeMap<String, Vec<TenantId>>> = None;
    for target in meson_db::targets::list(&env.pool).await? {
        let Ok(c) = env.atomos.client(target.id).await else {
            continue;
        };
        let Ok(listed) = c.vms().await else {
            tracing::debug!(target = %target.name, "orphans: host did not answer");
            continue;
        };
        let names: Vec<String> = listed.iter().map(|v| v.name.clone()).collect();
        let unclaimed = meson_db::orphans::unclaimed(&env.pool, &names).await?;
        let mut seen = Vec::new();
        if !unclaimed.is_empty() {
            let Ok(storage) = c.volumes().await else {
                continue;
            };
            let storage_names: Vec<String> = storage.iter().map(|v| v.name.clone()).collect();
            let free = meson_db::orphans::unclaimed_volumes(&env.pool, &storage_names).await?;
            if tenants.is_none() {
                tenants = Some(by_tag(meson_db::orphans::known_tenants(&env.pool).await?));
            }
            let tenants = tenants.as_ref().expect("just read");
            for vm in listed.iter().filter(|v| unclaimed.contains(&v.name)) {
                let owner = meson_core::naming::parse_vm_atomos_name(&vm.name);
                let tenant = owner
                    .as_ref()
                    .and_then(|o| o.tenant_tag.as_ref())
                    .and_then(|tag| tenants.get(tag))
                    .and_then(|t| (t.len() == 1).then(|| t[0].clone()));
                let reason = Orphan::held_because(owner.as_ref(), tenant.as_ref())
                    .unwrap_or_else(|| "adopted by the next pass".into());
                seen.push(Seen {
                    atomos_id: vm.id.clone(),
                    atomos_name: vm.name.clone(),
                    tenant,
                    state: state_word(&vm.state),
                    vcpus: vm.slots,
                    ram_mib: vm.ram_mib,
                    ipv4: vm.ipv4,
                    volumes: storage
                        .iter()
                        .filter(|s| vm.volume_ids.contains(&s.id) && free.contains(&s.name))
                        .map(|s| OrphanVolume {
                            atomos_id: s.id.clone(),
                            name: s.name.clone(),
                            size_gb: s.size_gb,
                            bootable: s.bootable,
                            readonly: s.readonly,
                            cloudinit: s.cloudinit,
                        })
                        .collect(),
                    reason,
                });
            }
        }
        let orphans = meson_db::orphans::observe(&env.pool, target.id, &seen).await?;
        for o in orphans {
            match settle(env, &target, &c, &o).await {
                Ok(Settled::Adopted) => pass.adopted += 1,
                Ok(Settled::Deleted) => pass.deleted += 1,
                Ok(Settled::Held) => pass.held += 1,
                Err(message) => {
                    tracing::warn!(orphan = %o.id, host = %o.host, error = %message,
                        "orphans: a decision could not be carried out; tried again next pass");
                    meson_db::orphans::failed(&env.pool, o.id, &message).await?;
                    pass.held += 1;
                }
            }
        }
    }
    if pass != Pass::default() {
        tracing::info!(?pass, "orphans: pass done");
    }
    metrics::gauge!("meson_orphans").set(pass.held as f64);
    Ok(pass)
}

/// Tenants by tag (a tag two known tenants share names neither).
fn by_tag(tenants: Vec<TenantId>) -> BTreeMap<String, Vec<TenantId>> {
    let mut out: BTreeMap<String, Vec<TenantId>> = BTreeMap::new();
    for t in tenants {
        out.entry(meson_core::naming::tenant_tag(&t))
            .or_default()
            .push(t);
    }
    out
}

fn state_word(s: &VmState) -> String {
    match s {
        VmState::Unknown(w) => w.clone(),
        other => serde_json::to_value(other)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
    }
}

enum Settled {
    Adopted,
    Deleted,
    Held,
}

/// Carries out what is decided for `o` (by an operator, or by its name).
async fn settle(
    env: &Env,
    target: &Target,
    c: &AtomosClient,
    o: &Orphan,
) -> Result<Settled, String> {
    let adopt_into = match (&o.decision, &o.tenant) {
        (Some(Decision::Delete), _) => {
            unregister_by_name(c, &o.atomos_name)
                .await
                .map_err(|e| e.to_string())?;
            for v in &o.volumes {
                destroy_volume(c, &v.atomos_id)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            meson_db::orphans::forget(&env.pool, o.id)
                .await
                .map_err(|e| e.to_string())?;
            tracing::warn!(orphan = %o.id, host = %o.host, name = %o.atomos_name,
                by = o.decided_by.as_deref().unwrap_or_default(), "orphans: deleted from its host");
            return Ok(Settled::Deleted);
        }
        (Some(Decision::Adopt { tenant, name }), _) => (tenant.clone(), name.clone()),
        (None, Some(tenant)) if o.owner.as_ref().is_some_and(|w| w.cluster_prefix.is_none()) => {
            (tenant.clone(), None)
        }
        (None, _) => return Ok(Settled::Held),
    };
    let (tenant, name) = adopt_into;
    let id = o.vm_id();
    let id = if meson_db::orphans::vm_exists(&env.pool, id)
        .await
        .map_err(|e| e.to_string())?
    {
        VmId::new()
    } else {
        id
    };
    let (vm, volumes) = adopted(o, target, c, &tenant, id, name).await;
    let done = meson_db::orphans::adopt(&env.pool, o.id, &vm, &volumes)
        .await
        .map_err(|e| e.public_message())?;
    if done {
        tracing::warn!(orphan = %o.id, vm = %vm.id, tenant = %tenant, host = %o.host,
            name = %o.atomos_name, "orphans: adopted into its tenant");
        metrics::counter!("meson_orphans_adopted_total").increment(1);
    }
    Ok(Settled::Adopted)
}

/// The rows an adopted orphan becomes: what its host reports (size,
/// state, address, volumes) and what its name says; what AtomOS does not
/// keep (the image it was made from, SSH keys) is unknown.
async fn adopted(
    o: &Orphan,
    target: &Target,
    c: &AtomosClient,
    tenant: &TenantId,
    id: VmId,
    name: Option<String>,
) -> (Vm, Vec<Volume>) {
    let boot = o.volumes.iter().find(|v| v.bootable && !v.cloudinit);
    let gb = |v: &OrphanVolume| v.size_gb.ceil().max(1.0) as u32;
    let name = name.unwrap_or_else(|| o.atomos_name.clone());
    let spec = VmSpec {
        name: name.clone(),
        cpu: CpuSpec {
            cores: o.vcpus.max(1),
            threads_per_core: 1,
            smt: false,
            min_frequency_ghz: None,
            archs: Vec::new(),
            flags: Vec::new(),
        },
        memory_mib: o.ram_mib,
        require_ecc: false,
        pci: Vec::new(),
        os: meson_core::os::OsImage {
            distribution: "unknown".into(),
            family: String::new(),
            flavour: String::new(),
            version: String::new(),
            image_url: String::new(),
        },
        boot_volume_gb: boot.map_or(1, gb),
        volumes: o
            .volumes
            .iter()
            .filter(|v| !v.bootable && !v.cloudinit)
            .map(|v| DataVolumeSpec {
                name: v.name.clone(),
                size_gb: gb(v),
                private: true,
                shareable: false,
                bootable: false,
                readonly: v.readonly,
            })
            .collect(),
        ssh_keys: Vec::new(),
        provider: None,
        continent: None,
        region: None,
        image: None,
        backup: None,
    };
    let placement = crate::placement::quoted(target, c, &spec).await;
    let now = chrono::Utc::now();
    let status = match o.state.as_str() {
        "running" | "starting" => VmStatus::Running,
        _ => VmStatus::Off,
    };
    let vm = Vm {
        id,
        tenant: tenant.clone(),
        name,
        status,
        labels: Default::default(),
        atomos_name: o.atomos_name.clone(),
        atomos_id: Some(o.atomos_id.clone()),
        placement: Some(placement),
        ipv4: o.ipv4,
        created: now,
        error_message: None,
        backup_policy: None,
        spec,
    };
    let volumes = o
        .volumes
        .iter()
        .map(|v| {
            let kind = if v.cloudinit {
                VolumeKind::Cloudinit
            } else if v.bootable {
                VolumeKind::Boot
            } else {
                VolumeKind::Data
            };
            Volume {
                id: VolumeId::new(),
                tenant: tenant.clone(),
                vm_id: Some(id),
                name: match kind {
                    VolumeKind::Boot => "boot".into(),
                    VolumeKind::Cloudinit => "cloudinit".into(),
                    VolumeKind::Data => v.name.clone(),
                },
                kind,
                size_gb: gb(v),
                atomos_name: v.name.clone(),
                atomos_id: Some(v.atomos_id.clone()),
                status: VolumeStatus::Available,
                labels: Default::default(),
                bootable: v.bootable,
                readonly: v.readonly,
                placement: None,
                attached_to: None,
                created: now,
            }
        })
        .collect();
    (vm, volumes)
}
