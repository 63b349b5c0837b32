//! Volumes: read and list every volume; create, rename/relabel and delete
//! standalone ones; attach standalone volumes to a VM being created.

use super::list::Paged;
use super::{App, VolumeQuery, new_action};
use crate::auth::Principal;
use meson_core::action::{Action, Command, ResourceType};
use meson_core::parse::Warning;
use meson_core::target::Target;
use meson_core::vm::VmSpec;
use meson_core::vm::VmStatus;
use meson_core::volume::{
    MAX_VOLUME_NAME_LEN, Volume, VolumeAttach, VolumeCreate, VolumeKind, VolumeMove, VolumeResize,
    VolumeStatus,
};
use meson_core::{Error, Result, TenantId, VmId, VolumeId};
use meson_workflows::{volume_attach, volume_create, volume_delete, volume_move, volume_resize};

pub struct VolumeCreated {
    pub volume: Volume,
    pub action: Action,
    pub warnings: Vec<Warning>,
}

impl App {
    pub async fn volume_get(&self, p: &Principal, id: VolumeId) -> Result<Volume> {
        meson_db::volumes::get(&self.pool, &p.tenant, id).await
    }

    pub async fn volume_list(&self, p: &Principal, q: &VolumeQuery) -> Result<Paged<Volume>> {
        self.page(&p.tenant, &q.page, q.bound(&p.tenant)?, &q.filter)
            .await
    }

    /// Validates the request and, in one transaction, checks the storage
    /// quota and writes the volume, the action and its `volume_create` job.
    pub async fn volume_create(
        &self,
        p: &Principal,
        body: &serde_json::Value,
    ) -> Result<VolumeCreated> {
        let req = VolumeCreate::parse(body, &meson_db::targets::list(&self.pool).await?)?;
        let volume = Volume::new_standalone(&p.tenant, &req);
        let action = new_action(
            p,
            Command::CreateVolume,
            vec![(ResourceType::Volume, volume.id.0)],
        );
        let mut tx = meson_db::begin(&self.pool).await?;
        let held = self.hold_usage(&mut tx, &p.tenant).await?;
        meson_db::volumes::insert(&mut tx, &volume).await?;
        self.within_quotas(&mut tx, &p.tenant, &held).await?;
        meson_db::actions::insert(&mut tx, &action).await?;
        let params = volume_create::Params {
            volume_id: volume.id,
            provider: req.provider,
            continent: req.continent,
            region: req.region,
        };
        volume_create::enqueue(&mut tx, &params, action.id, &p.tenant)
            .await?
            .of_new("volume")?;
        meson_db::commit(tx).await?;
        tracing::info!(volume = %volume.id, action = %action.id, tenant = %p.tenant, "volume create accepted");
        Ok(VolumeCreated {
            volume,
            action,
            warnings: req.warnings,
        })
    }

    /// Renames a standalone volume and/or replaces its labels; a VM's own
    /// volumes are named by the VM's request.
    pub async fn volume_update(
        &self,
        p: &Principal,
        id: VolumeId,
        body: &serde_json::Value,
    ) -> Result<(Volume, Vec<Warning>)> {
        let renamed = meson_db::volumes::RENAMED;
        let warnings = match self
            .rename::<Volume>(&p.tenant, id.0, body, MAX_VOLUME_NAME_LEN, renamed)
            .await
        {
            // Not renamed: no such volume, or a VM's own.
            Err(e) if e.code() == "not_found" => {
                return Err(self.volume_get(p, id).await?.vm_id.map_or(e, owned_by));
            }
            r => r?,
        };
        Ok((self.volume_get(p, id).await?, warnings))
    }

    /// Starts deleting a standalone volume: `locked` while another action
    /// runs on it, `conflict` while a VM has it attached (or for a VM's own
    /// volume, which goes with its VM).
    pub async fn volume_delete(&self, p: &Principal, id: VolumeId) -> Result<Action> {
        if let Some(vm) = self.volume_get(p, id).await?.vm_id {
            return Err(owned_by(vm));
        }
        let mut tx = meson_db::begin(&self.pool).await?;
        // Locked: a VM create attaching it waits, then sees it deleting.
        let v = meson_db::volumes::lock_standalone(&mut tx, &p.tenant, id).await?;
        let action = new_action(p, Command::DeleteVolume, vec![(ResourceType::Volume, id.0)]);
        meson_db::actions::insert(&mut tx, &action).await?;
        volume_delete::enqueue(&mut tx, id, action.id, &p.tenant)
            .await?
            .or_locked("volume", id)?;
        if let Some(vm) = v.attached_to {
            return Err(Error::Conflict {
                message: format!(
                    "the volume is attached to VM {vm}; delete the VM first (the volume stays)"
                ),
            });
        }
        meson_db::volumes::set_status(&mut *tx, id, VolumeStatus::Deleting).await?;
        meson_db::commit(tx).await?;
        tracing::info!(volume = %id, action = %action.id, "volume delete accepted");
        Ok(action)
    }
}

impl App {
    /// Starts attaching a standalone volume to a living VM of the tenant
    /// (running or off) on the volume's host; the attachment is recorded
    /// at once, so no other VM or delete takes the volume meanwhile. A VM
    /// of another tenant is `not_found`, like a missing one.
    pub async fn volume_attach(
        &self,
        p: &Principal,
        id: VolumeId,
        body: &serde_json::Value,
    ) -> Result<(Action, Vec<Warning>)> {
        let req = VolumeAttach::parse(body)?;
        if let Some(vm) = self.volume_get(p, id).await?.vm_id {
            return Err(owned_by(vm));
        }
        let (vm, parts) = self.vm_get(p, req.vm).await?;
        let mut tx = meson_db::begin(&self.pool).await?;
        let v = meson_db::volumes::lock_standalone(&mut tx, &p.tenant, id).await?;
        match v.attached_to {
            Some(to) if to == vm.id => {
                return Err(Error::Conflict {
                    message: format!("the volume is already attached to VM {to}"),
                });
            }
            Some(to) => {
                return Err(Error::Conflict {
                    message: format!(
                        "the volume is attached to VM {to}; detach it first \
                         (POST /v1/volumes/{id}/actions/detach)"
                    ),
                });
            }
            None => {}
        }
        if v.status != VolumeStatus::Available {
            return Err(Error::Conflict {
                message: format!(
                    "the volume is {}; only an available volume can be attached",
                    v.status.as_str()
                ),
            });
        }
        idle(&mut tx, id).await?;
        let (Some(at), VmStatus::Running | VmStatus::Off) = (&vm.placement, vm.status) else {
            return Err(Error::Conflict {
                message: format!(
                    "the VM is {}: a volume can be attached to a placed VM that is running or off",
                    vm.status.as_str()
                ),
            });
        };
        let here = v
            .placement
            .as_ref()
            .ok_or_else(|| Error::internal("an available volume has no placement"))?;
        if here.target_id != at.target_id {
            let hint = if here.provider == at.provider {
                format!(
                    "; migrate the VM there first (POST /v1/vms/{}/actions/migrate \
                     {{\"host\": \"{}\"}})",
                    vm.id, here.host
                )
            } else {
                String::new()
            };
            return Err(Error::invalid(
                "vm",
                format!(
                    "the volume is on host {}, the VM on host {}: AtomOS attaches a volume \
                     to VMs of its own host only{hint}",
                    here.host, at.host
                ),
            ));
        }
        let attached = parts
            .volumes
            .iter()
            .filter(|o| o.attached_to == Some(vm.id))
            .count();
        if attached >= meson_core::vm::MAX_ATTACHED_VOLUMES {
            return Err(Error::Conflict {
                message: format!(
                    "the VM has {attached} standalone volumes attached, the most it can have"
                ),
            });
        }
        meson_db::volumes::attach(&mut tx, id, vm.id).await?;
        let action = new_action(
            p,
            Command::AttachVolume,
            vec![(ResourceType::Volume, id.0), (ResourceType::Vm, vm.id.0)],
        );
        meson_db::actions::insert(&mut tx, &action).await?;
        let params = volume_attach::Params {
            volume_id: id,
            vm_id: vm.id,
        };
        volume_attach::enqueue_attach(&mut tx, &params, action.id, &p.tenant)
            .await?
            .or_locked("vm", vm.id)?;
        meson_db::commit(tx).await?;
        tracing::info!(volume = %id, vm = %vm.id, action = %action.id, "volume attach accepted");
        Ok((action, req.warnings))
    }

    /// Starts detaching a standalone volume from its VM; it stays
    /// `attached` until its host has let it go, then is `available`.
    pub async fn volume_detach(&self, p: &Principal, id: VolumeId) -> Result<Action> {
        if let Some(vm) = self.volume_get(p, id).await?.vm_id {
            return Err(owned_by(vm));
        }
        let mut tx = meson_db::begin(&self.pool).await?;
        let v = meson_db::volumes::lock_standalone(&mut tx, &p.tenant, id).await?;
        let Some(vm) = v.attached_to else {
            return Err(Error::Conflict {
                message: "the volume is not attached to a VM".into(),
            });
        };
        let action = new_action(
            p,
            Command::DetachVolume,
            vec![(ResourceType::Volume, id.0), (ResourceType::Vm, vm.0)],
        );
        meson_db::actions::insert(&mut tx, &action).await?;
        let params = volume_attach::Params {
            volume_id: id,
            vm_id: vm,
        };
        volume_attach::enqueue_detach(&mut tx, &params, action.id, &p.tenant)
            .await?
            .or_locked("vm", vm)?;
        meson_db::commit(tx).await?;
        tracing::info!(volume = %id, %vm, action = %action.id, "volume detach accepted");
        Ok(action)
    }

    /// Starts growing a standalone volume (attached or not). The new size
    /// is recorded and counted against `storage_gb` at once, in the same
    /// transaction as the quota check.
    pub async fn volume_resize(
        &self,
        p: &Principal,
        id: VolumeId,
        body: &serde_json::Value,
    ) -> Result<(Action, Vec<Warning>)> {
        let req = VolumeResize::parse(body)?;
        if let Some(vm) = self.volume_get(p, id).await?.vm_id {
            return self.vm_volume_resize(p, vm, id, req).await;
        }
        let mut tx = meson_db::begin(&self.pool).await?;
        let held = self.hold_usage(&mut tx, &p.tenant).await?;
        let v = meson_db::volumes::lock_standalone(&mut tx, &p.tenant, id).await?;
        if !matches!(v.status, VolumeStatus::Available | VolumeStatus::Attached) {
            return Err(Error::Conflict {
                message: format!(
                    "the volume is {}; only an available or attached volume can be resized",
                    v.status.as_str()
                ),
            });
        }
        req.check_grows(v.size_gb)?;
        // Its VM's actions move or copy it (a migration): they go first.
        if let Some(vm) = v.attached_to
            && let Some(blocking) =
                meson_db::jobs::live_on_key(&mut *tx, &meson_workflows::keys::vm(vm)).await?
        {
            return Err(Error::Locked {
                kind: "vm",
                id: vm.to_string(),
                action_id: blocking.map(|a| a.0).unwrap_or_default(),
            });
        }
        meson_db::volumes::set_size(&mut *tx, id, req.size_gb).await?;
        self.within_quotas(&mut tx, &p.tenant, &held).await?;
        let action = new_action(p, Command::ResizeVolume, vec![(ResourceType::Volume, id.0)]);
        meson_db::actions::insert(&mut tx, &action).await?;
        let params = volume_resize::Params {
            volume_id: id,
            from_gb: v.size_gb,
            to_gb: req.size_gb,
        };
        volume_resize::enqueue(&mut tx, &params, None, action.id, &p.tenant)
            .await?
            .or_locked("volume", id)?;
        meson_db::commit(tx).await?;
        tracing::info!(volume = %id, from = v.size_gb, to = req.size_gb, action = %action.id, "volume resize accepted");
        Ok((action, req.warnings))
    }

    /// Grows one of a VM's own data volumes (the VM running or off), as
    /// one of the VM's actions: it runs alone with the VM's others (a
    /// migration copies it, a delete destroys it), and the VM's spec
    /// records the new size with the volume.
    async fn vm_volume_resize(
        &self,
        p: &Principal,
        vm: VmId,
        id: VolumeId,
        req: VolumeResize,
    ) -> Result<(Action, Vec<Warning>)> {
        let mut tx = meson_db::begin(&self.pool).await?;
        let held = self.hold_usage(&mut tx, &p.tenant).await?;
        let owner = meson_db::vms::get(&mut *tx, &p.tenant, vm).await?;
        let action = new_action(
            p,
            Command::ResizeVolume,
            vec![(ResourceType::Volume, id.0), (ResourceType::Vm, vm.0)],
        );
        meson_db::actions::insert(&mut tx, &action).await?;
        let v = meson_db::volumes::get(&mut *tx, &p.tenant, id).await?;
        let params = volume_resize::Params {
            volume_id: id,
            from_gb: v.size_gb,
            to_gb: req.size_gb,
        };
        volume_resize::enqueue(&mut tx, &params, Some(vm), action.id, &p.tenant)
            .await?
            .or_locked("vm", vm)?;
        // Checked with the VM's key held: no other action changes it now.
        if v.kind != VolumeKind::Data {
            return Err(Error::Conflict {
                message: format!(
                    "this is VM {vm}'s {} volume; of a VM's own volumes only its data volumes \
                     can be resized",
                    v.kind.as_str()
                ),
            });
        }
        if !matches!(owner.status, VmStatus::Running | VmStatus::Off) || owner.placement.is_none() {
            return Err(Error::Conflict {
                message: format!(
                    "VM {vm} is {}; its volumes can be resized while it is running or off",
                    owner.status.as_str()
                ),
            });
        }
        req.check_grows(v.size_gb)?;
        meson_db::volumes::set_size(&mut *tx, id, req.size_gb).await?;
        self.within_quotas(&mut tx, &p.tenant, &held).await?;
        meson_db::commit(tx).await?;
        tracing::info!(volume = %id, %vm, from = v.size_gb, to = req.size_gb, action = %action.id,
            "vm volume resize accepted");
        Ok((action, req.warnings))
    }

    /// Starts moving a free standalone volume to another host of its
    /// provider (`host`); it stays `available`, and no attach, resize or
    /// delete of it starts until the move ends.
    pub async fn volume_move(
        &self,
        p: &Principal,
        id: VolumeId,
        body: &serde_json::Value,
    ) -> Result<(Action, Vec<Warning>)> {
        let req = VolumeMove::parse(body)?;
        if let Some(vm) = self.volume_get(p, id).await?.vm_id {
            return Err(owned_by(vm));
        }
        let targets = meson_db::targets::list(&self.pool).await?;
        let mut tx = meson_db::begin(&self.pool).await?;
        let v = meson_db::volumes::lock_standalone(&mut tx, &p.tenant, id).await?;
        if let Some(vm) = v.attached_to {
            return Err(Error::Conflict {
                message: format!(
                    "the volume is attached to VM {vm}: it moves with its VM \
                     (POST /v1/vms/{vm}/actions/migrate), or detach it first"
                ),
            });
        }
        if v.status != VolumeStatus::Available {
            return Err(Error::Conflict {
                message: format!(
                    "the volume is {}; only an available volume can be moved",
                    v.status.as_str()
                ),
            });
        }
        let from = v
            .placement
            .clone()
            .ok_or_else(|| Error::internal("an available volume has no placement"))?;
        let t = super::destination(
            &targets,
            &req.host,
            from.target_id,
            &from.provider,
            "volume",
        )?;
        let to = meson_core::volume::VolumePlacement {
            target_id: t.id,
            host: t.name.clone(),
            provider: t.provider.clone(),
            region: t.region.clone(),
        };
        let action = new_action(p, Command::MoveVolume, vec![(ResourceType::Volume, id.0)]);
        meson_db::actions::insert(&mut tx, &action).await?;
        let params = volume_move::Params {
            volume_id: id,
            from,
            to,
        };
        volume_move::enqueue(&mut tx, &params, action.id, &p.tenant)
            .await?
            .or_locked("volume", id)?;
        meson_db::commit(tx).await?;
        tracing::info!(volume = %id, to = %req.host, action = %action.id, "volume move accepted");
        Ok((action, req.warnings))
    }
}

/// The volume is not being moved; else `423` naming the move.
async fn idle(tx: &mut meson_db::Tx<'_>, id: VolumeId) -> Result<()> {
    let key = meson_workflows::keys::volume(id);
    match meson_db::jobs::live_on_key_of_kind(&mut **tx, &key, volume_move::KIND).await? {
        Some(blocking) => Err(Error::Locked {
            kind: "volume",
            id: id.to_string(),
            action_id: blocking.map(|a| a.0).unwrap_or_default(),
        }),
        None => Ok(()),
    }
}

fn owned_by(vm: VmId) -> Error {
    Error::Conflict {
        message: format!(
            "this volume belongs to VM {vm} and goes with it; only standalone volumes \
             (POST /v1/volumes) can be changed or deleted on their own"
        ),
    }
}

/// Attaches a VM being created to standalone volumes, in its create
/// transaction: each must be the tenant's and `available`, and they must
/// share one host that meets the VM's provider/continent/region (they pin
/// its placement there). Rows are locked in id order, so two creates naming
/// the same volumes cannot deadlock; the second sees them attached. Returns
/// the volumes as attached, in request order.
pub(crate) async fn attach_new_vm(
    tx: &mut meson_db::Tx<'_>,
    tenant: &TenantId,
    vm: VmId,
    spec: &VmSpec,
    targets: &[Target],
    ids: &[VolumeId],
) -> Result<Vec<Volume>> {
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by_key(|&i| ids[i].0);
    let mut locked: Vec<(usize, Volume)> = Vec::with_capacity(ids.len());
    for i in order {
        let field = format!("volumes[{i}]");
        let v = match meson_db::volumes::lock_standalone(tx, tenant, ids[i]).await {
            Err(Error::NotFound { .. }) => {
                return Err(Error::invalid(field, "no such standalone volume"));
            }
            other => other?,
        };
        if let Some(other) = v.attached_to {
            return Err(Error::invalid(
                field,
                format!("the volume is attached to VM {other}"),
            ));
        }
        if v.status != VolumeStatus::Available {
            return Err(Error::invalid(
                field,
                format!(
                    "the volume is {}; only an available volume can be attached",
                    v.status.as_str()
                ),
            ));
        }
        idle(tx, v.id).await?;
        locked.push((i, v));
    }
    locked.sort_by_key(|(i, _)| *i);
    let mut first: Option<(&str, &meson_core::volume::VolumePlacement)> = None;
    for (i, v) in &locked {
        let field = format!("volumes[{i}]");
        let placement = v
            .placement
            .as_ref()
            .ok_or_else(|| Error::internal("an available volume has no placement"))?;
        if let Some((name, p)) = first {
            if p.target_id != placement.target_id {
                return Err(Error::invalid(
                    field,
                    format!(
                        "the volume is on host {}, volume {name} on host {}: a VM's volumes \
                         must share its host",
                        placement.host, p.host
                    ),
                ));
            }
        } else {
            first = Some((&v.name, placement));
            let meets = targets
                .iter()
                .find(|t| t.id == placement.target_id)
                .is_some_and(|t| t.meets([&spec.provider, &spec.continent, &spec.region]));
            if !meets {
                return Err(Error::invalid(
                    field,
                    format!(
                        "the volume is on host {} (provider {}, region {}), which the VM's \
                         provider/continent/region exclude",
                        placement.host, placement.provider, placement.region
                    ),
                ));
            }
        }
    }
    let mut out = Vec::with_capacity(locked.len());
    for (_, mut v) in locked {
        meson_db::volumes::attach(tx, v.id, vm).await?;
        v.status = VolumeStatus::Attached;
        v.attached_to = Some(vm);
        out.push(v);
    }
    Ok(out)
}
