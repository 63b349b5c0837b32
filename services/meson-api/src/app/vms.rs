//! Virtual machines: create, read, list, delete.

use super::list::Paged;
use super::{App, ListQuery, new_action};
use crate::auth::Principal;
use meson_core::action::{Action, Command, ResourceType};
use meson_core::naming;
use meson_core::network::Attachment;
use meson_core::parse::Warning;
use meson_core::vm::{
    RebuildSource, Vm, VmCreate, VmMigrate, VmNetworkChange, VmRebuild, VmResize, VmStatus,
};
use meson_core::volume::Volume;
use meson_core::{Error, Result, VmId};
use meson_db::port_forwards::Of;
use meson_types::vm::PowerCommand;
use meson_workflows::vm_power::{PowerOff, PowerOn, Reboot};
use meson_workflows::{
    vm_create, vm_delete, vm_migrate, vm_network, vm_power, vm_rebuild, vm_resize,
};

/// What a VM view shows besides the VM row: its volumes and NICs (for one
/// VM, or for every VM of a page).
#[derive(Clone, Debug, Default)]
pub struct VmParts {
    /// The volumes the VMs own, then the standalone volumes attached to them.
    pub volumes: Vec<Volume>,
    pub nics: Vec<Attachment>,
}

impl VmParts {
    /// The parts of `ids`, read on one connection.
    pub async fn load(conn: &mut meson_db::PgConnection, ids: &[VmId]) -> Result<VmParts> {
        let mut volumes = meson_db::volumes::list_for_vms(&mut *conn, ids).await?;
        volumes.extend(meson_db::volumes::attached_to_vms(&mut *conn, ids).await?);
        Ok(VmParts {
            volumes,
            nics: meson_db::networks::attachments_of(&mut *conn, ids).await?,
        })
    }
}

pub struct VmCreated {
    pub vm: Vm,
    pub parts: VmParts,
    pub action: Action,
    pub warnings: Vec<Warning>,
}

pub struct VmPage {
    pub vms: Paged<Vm>,
    pub parts: VmParts,
}

impl App {
    /// Validates the request and, in one transaction, writes the VM, its
    /// volumes, the action, the workflow's job and the call's audit entry
    /// (when its transport offered it). A VM without networks or attached
    /// volumes takes two round trips: the hosts, then one statement that
    /// checks the quotas and writes everything ([`meson_db::vms::create`]).
    pub async fn vm_create(&self, p: &Principal, body: &serde_json::Value) -> Result<VmCreated> {
        // Boxed: its state (the VM, its volumes, its action, and what an
        // earlier attempt may have made) would make every caller's future
        // large.
        Box::pin(self.vm_create_unboxed(p, body)).await
    }

    /// Adds the keys the request names among those the tenant keeps
    /// (`/v1/ssh-keys`) to the VM's, once each; a key not kept is refused,
    /// its field named.
    async fn add_kept_ssh_keys(&self, p: &Principal, req: &mut VmCreate) -> Result<()> {
        let mut missing = meson_core::error::FieldErrors::default();
        for (path, id_or_name) in std::mem::take(&mut req.kept_ssh_keys) {
            match meson_db::ssh_keys::find(&self.pool, &p.tenant, &id_or_name).await? {
                Some(kept) => {
                    let fingerprint = kept.fingerprint.as_str();
                    if !req
                        .spec
                        .ssh_keys
                        .iter()
                        .any(|k| k.fingerprint() == fingerprint)
                    {
                        req.spec.ssh_keys.push(kept.key);
                    }
                }
                None => missing.add(
                    path,
                    format!("no SSH key {id_or_name:?} is kept (/v1/ssh-keys)"),
                ),
            }
        }
        missing.finish(())
    }

    async fn vm_create_unboxed(
        &self,
        p: &Principal,
        body: &serde_json::Value,
    ) -> Result<VmCreated> {
        // The hosts are no tenant's rows: the unscoped pool reads them.
        let targets = meson_db::targets::list(&self.own).await?;
        let mut req = VmCreate::parse_placed(body, &targets)?;
        self.add_kept_ssh_keys(p, &mut req).await?;
        let image = req.spec.image;
        if let Some(image) = image {
            let found = match meson_db::images::get(&self.pool, &p.tenant, image).await {
                Err(Error::NotFound { .. }) => {
                    return Err(Error::invalid("image", "no such image"));
                }
                other => other?,
            };
            // The copy has the image's size; a larger flavour disk grows it.
            req.spec.boot_volume_gb = req.spec.boot_volume_gb.max(found.size_gb);
        }

        let id = VmId::new();
        let (vm, volumes) = Vm::new_with_volumes(
            &p.tenant,
            id,
            req.spec,
            req.labels,
            naming::vm_atomos_name(id, &p.tenant),
        );
        let mut resources = vec![(ResourceType::Vm, id.0)];
        resources.extend(volumes.iter().map(|v| (ResourceType::Volume, v.id.0)));
        resources.extend(req.volumes.iter().map(|v| (ResourceType::Volume, v.0)));
        // Named, so that deleting the image waits for the copy (423).
        resources.extend(image.map(|i| (ResourceType::Image, i.0)));
        let action = new_action(p, Command::CreateVm, resources);
        let offer = super::audit::take_offer();
        let audit = offer
            .as_ref()
            .map(|o| o.entry("vm", id.to_string(), action.id.0));
        // A later attempt of the request answers with what the first one
        // made, if it made it (it wrote its audit entry with it): found
        // before writing, or when the write fails because an earlier
        // attempt's statement was finished by the server after its
        // connection broke.
        let (vm, parts, action) = match self.vm_created_before(p, id, action.id).await? {
            Some(found) => found,
            None => match self
                .vm_write(
                    p,
                    &req.networks,
                    &req.volumes,
                    &targets,
                    image,
                    &vm,
                    volumes,
                    &action,
                    audit.as_ref(),
                )
                .await
            {
                Ok((volumes, nics)) => {
                    tracing::info!(vm = %id, action = %action.id, tenant = %p.tenant,
                        "vm create accepted");
                    (vm, VmParts { volumes, nics }, action)
                }
                Err(e) if meson_core::id::replaying() && !matches!(e, Error::Outage { .. }) => {
                    self.vm_created_before(p, id, action.id).await?.ok_or(e)?
                }
                Err(e) => return Err(e),
            },
        };
        if let Some(o) = offer {
            o.written();
        }
        Ok(VmCreated {
            vm,
            parts,
            action,
            warnings: req.warnings,
        })
    }

    /// On a request's later attempt (`meson_core::id::replaying`): the VM
    /// and create action an earlier attempt wrote under these ids, if it
    /// did (both are written in one transaction).
    async fn vm_created_before(
        &self,
        p: &Principal,
        id: VmId,
        action: meson_core::ActionId,
    ) -> Result<Option<(Vm, VmParts, Action)>> {
        let Some(action) = self.action_started_before(p, action).await? else {
            return Ok(None);
        };
        let (vm, parts) = self.vm_get(p, id).await?;
        Ok(Some((vm, parts, action)))
    }

    /// Writes a new VM (see [`App::vm_create`]): its volumes and NICs.
    #[allow(clippy::too_many_arguments)]
    async fn vm_write(
        &self,
        p: &Principal,
        networks: &[meson_core::NetworkId],
        attach: &[meson_core::VolumeId],
        targets: &[meson_core::target::Target],
        image: Option<meson_core::ImageId>,
        vm: &Vm,
        volumes: Vec<Volume>,
        action: &Action,
        audit: Option<&meson_core::audit::AuditEntry>,
    ) -> Result<(Vec<Volume>, Vec<Attachment>)> {
        let id = vm.id;
        Ok(
            if networks.is_empty() && attach.is_empty() && image.is_none() {
                let job = vm_create::job(id, action.id, &p.tenant)?;
                let created = meson_db::vms::create(
                    &self.own,
                    &meson_db::vms::NewVm {
                        vm,
                        volumes: &volumes,
                        action,
                        job: &job,
                        audit,
                        defaults: self.quotas,
                        created_by: &p.subject,
                    },
                )
                .await?;
                match created {
                    meson_db::vms::Created::OverQuota {
                        overrides,
                        usage,
                        over,
                    } => self.over_quota(&p.tenant, &overrides, &usage, &over)?,
                    meson_db::vms::Created::OverMemberLimit { limits, held, over } => {
                        tracing::info!(member = %p.subject, ?over, "member limit exceeded");
                        return Err(meson_core::member::exceeded(&limits, &held, &over));
                    }
                    meson_db::vms::Created::Written(_) => {}
                }
                (volumes, Vec::new())
            } else {
                let mut tx = meson_db::begin(&self.pool).await?;
                let held = self.hold_usage(&mut tx, &p.tenant).await?;
                let member = self.hold_member(&mut tx, p).await?;
                meson_db::vms::insert_with_volumes(&mut tx, vm, &volumes).await?;
                let nics =
                    meson_db::networks::attach_networks(&mut tx, &p.tenant, id, networks, false)
                        .await?;
                let attached = super::volumes::attach_new_vm(
                    &mut tx, &p.tenant, id, &vm.spec, targets, attach,
                )
                .await?;
                if let Some(image) = image {
                    image_for_new_vm(&mut tx, &p.tenant, image, &vm.spec, targets, &attached)
                        .await?;
                }
                meson_db::actions::insert(&mut tx, action).await?;
                vm_create::enqueue(&mut tx, id, action.id, &p.tenant)
                    .await?
                    .of_new("VM")?;
                if let Some(entry) = audit {
                    meson_db::audit::insert(&mut *tx, entry).await?;
                }
                self.within_quotas(&mut tx, &p.tenant, &held).await?;
                self.within_member_limits(&mut tx, p, id, member).await?;
                meson_db::commit(tx).await?;
                let mut volumes = volumes;
                volumes.extend(attached);
                (volumes, nics)
            },
        )
    }

    /// A VM with its volumes and NICs, in one statement.
    pub async fn vm_get(&self, p: &Principal, id: VmId) -> Result<(Vm, VmParts)> {
        let (vm, volumes, nics) = meson_db::vms::get_with_parts(&self.own, &p.tenant, id).await?;
        Ok((vm, VmParts { volumes, nics }))
    }

    /// A page of VMs with their parts, read on one connection.
    pub async fn vm_list(&self, p: &Principal, q: &ListQuery) -> Result<VmPage> {
        let mut conn = meson_db::acquire(&self.pool).await?;
        let bound = q.bound("vms", &p.tenant)?;
        let vms =
            super::list::page::<Vm>(&mut conn, &p.tenant, &q.page, bound, &q.filter()).await?;
        let ids: Vec<VmId> = vms.items.iter().map(|v| v.id).collect();
        Ok(VmPage {
            parts: VmParts::load(&mut conn, &ids).await?,
            vms,
        })
    }

    /// Starts deleting a VM; `locked` while another action runs on it.
    pub async fn vm_delete(&self, p: &Principal, id: VmId) -> Result<Action> {
        // Its id first: a later attempt of the request (see
        // `meson_core::id::replaying`) answers with the action the first
        // one started, if it did, even once the VM is gone.
        let action = new_action(p, Command::DeleteVm, vec![(ResourceType::Vm, id.0)]);
        if let Some(started) = self.action_started_before(p, action.id).await? {
            return Ok(started);
        }
        let written = async {
            meson_db::vms::get(&self.pool, &p.tenant, id).await?;
            let mut tx = meson_db::begin(&self.pool).await?;
            meson_db::actions::insert(&mut tx, &action).await?;
            vm_delete::enqueue(&mut tx, id, action.id, &p.tenant)
                .await?
                .or_locked("vm", id)?;
            meson_db::vms::set_status(&mut *tx, id, VmStatus::Deleting).await?;
            meson_db::commit(tx).await
        }
        .await;
        match written {
            Ok(()) => {}
            // Started meanwhile by an earlier attempt whose statements the
            // server finished after its connection broke.
            Err(e) if !matches!(e, Error::Outage { .. }) => {
                return self.action_started_before(p, action.id).await?.ok_or(e);
            }
            Err(e) => return Err(e),
        }
        tracing::info!(vm = %id, action = %action.id, "vm delete accepted");
        Ok(action)
    }

    /// On a request's later attempt (`meson_core::id::replaying`): the
    /// action an earlier attempt started under this id, if it did.
    async fn action_started_before(
        &self,
        p: &Principal,
        id: meson_core::ActionId,
    ) -> Result<Option<Action>> {
        if !meson_core::id::replaying() {
            return Ok(None);
        }
        match meson_db::actions::get(&self.pool, Some(&p.tenant), id).await {
            Ok(a) => {
                tracing::info!(action = %id, "action found started by an earlier attempt");
                Ok(Some(a))
            }
            Err(Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Starts a power action on a running or stopped VM; `locked` while
    /// another action runs on it, `conflict` while it is not placed or failed.
    pub async fn vm_power(&self, p: &Principal, id: VmId, op: PowerCommand) -> Result<Action> {
        let vm = meson_db::vms::get(&self.pool, &p.tenant, id).await?;
        let command = match op {
            PowerCommand::Poweron => Command::StartVm,
            PowerCommand::Poweroff => Command::StopVm,
            PowerCommand::Reboot => Command::RebootVm,
        };
        let action = new_action(p, command, vec![(ResourceType::Vm, vm.id.0)]);
        let mut tx = meson_db::begin(&self.pool).await?;
        meson_db::actions::insert(&mut tx, &action).await?;
        let queued = match op {
            PowerCommand::Poweron => {
                vm_power::enqueue::<PowerOn>(&mut tx, id, action.id, &p.tenant).await?
            }
            PowerCommand::Poweroff => {
                vm_power::enqueue::<PowerOff>(&mut tx, id, action.id, &p.tenant).await?
            }
            PowerCommand::Reboot => {
                vm_power::enqueue::<Reboot>(&mut tx, id, action.id, &p.tenant).await?
            }
        };
        queued.or_locked("vm", id)?;
        // Checked after taking the lock: no other action can change it now.
        if !matches!(vm.status, VmStatus::Running | VmStatus::Off) || vm.placement.is_none() {
            return Err(Error::Conflict {
                message: format!(
                    "the vm is {}; power actions need it running or off",
                    vm.status.as_str()
                ),
            });
        }
        meson_db::commit(tx).await?;
        tracing::info!(vm = %id, action = %action.id, ?op, "vm power action accepted");
        Ok(action)
    }

    /// Starts resizing a VM (cores, memory). AtomOS changes a VM's size
    /// while it is off: a running VM is a `conflict` unless the request
    /// says `stop` (stopped, resized, started again). The new size is
    /// recorded and counted against the quotas at once, like a create's.
    pub async fn vm_resize(
        &self,
        p: &Principal,
        id: VmId,
        body: &serde_json::Value,
    ) -> Result<(Action, Vec<Warning>)> {
        let req = VmResize::parse(body)?;
        let mut tx = meson_db::begin(&self.pool).await?;
        let held = self.hold_usage(&mut tx, &p.tenant).await?;
        let vm = meson_db::vms::get(&mut *tx, &p.tenant, id).await?;
        let action = new_action(p, Command::ResizeVm, vec![(ResourceType::Vm, id.0)]);
        meson_db::actions::insert(&mut tx, &action).await?;
        let from = vm_resize::Size::of(&vm);
        let spec = req.apply(&vm.spec);
        let params = vm_resize::Params {
            vm_id: id,
            from,
            to: vm_resize::Size {
                cores: spec.cpu.cores,
                memory_mib: spec.memory_mib,
            },
            restart: vm.status == VmStatus::Running,
        };
        vm_resize::enqueue(&mut tx, &params, action.id, &p.tenant)
            .await?
            .or_locked("vm", id)?;
        // Checked after taking the lock: no other action can change it now.
        match (vm.status, vm.placement.is_some(), req.stop) {
            (VmStatus::Off, true, _) | (VmStatus::Running, true, true) => {}
            (VmStatus::Running, true, false) => {
                return Err(Error::Conflict {
                    message: "the VM is running, and AtomOS resizes a VM that is off: power it \
                              off first, or send \"stop\": true to have meson stop it, resize \
                              it and start it again"
                        .into(),
                });
            }
            (status, ..) => {
                return Err(Error::Conflict {
                    message: format!(
                        "the VM is {}; only a VM that is running or off can be resized",
                        status.as_str()
                    ),
                });
            }
        }
        meson_db::vms::set_spec(&mut *tx, id, &spec).await?;
        self.within_quotas(&mut tx, &p.tenant, &held).await?;
        meson_db::commit(tx).await?;
        tracing::info!(vm = %id, action = %action.id, ?from, to = ?params.to, "vm resize accepted");
        Ok((action, req.warnings))
    }

    /// Starts rebuilding a VM from an image or a distribution: a new boot
    /// volume in place of the old one (the VM keeps its id, address,
    /// cloud-init and data volumes; a running VM is stopped for the swap
    /// and started again). The new boot volume's row and the VM's new spec
    /// are written at once; a larger boot volume counts at once too.
    pub async fn vm_rebuild(
        &self,
        p: &Principal,
        id: VmId,
        body: &serde_json::Value,
    ) -> Result<(Action, Vec<Warning>)> {
        let req = VmRebuild::parse(body)?;
        let mut tx = meson_db::begin(&self.pool).await?;
        let held = self.hold_usage(&mut tx, &p.tenant).await?;
        let vm = meson_db::vms::get(&mut *tx, &p.tenant, id).await?;
        let mut resources = vec![(ResourceType::Vm, id.0)];
        let mut spec = vm.spec.clone();
        match &req.source {
            RebuildSource::Os(os) => {
                spec.os = os.clone();
                spec.image = None;
            }
            RebuildSource::Image(image) => {
                let i = match meson_db::images::lock(&mut tx, &p.tenant, *image).await {
                    Err(Error::NotFound { .. }) => {
                        return Err(Error::invalid("image", "no such image"));
                    }
                    other => other?,
                };
                if i.status != meson_core::image::ImageStatus::Available {
                    return Err(Error::invalid(
                        "image",
                        format!(
                            "the image is {}; only an available image can be copied",
                            i.status.as_str()
                        ),
                    ));
                }
                if let (Some(at), Some(here)) = (&i.placement, &vm.placement)
                    && at.target_id != here.target_id
                {
                    return Err(Error::invalid(
                        "image",
                        format!(
                            "the image is on host {}, the VM on host {}: a VM is rebuilt from \
                             an image of its own host",
                            at.host, here.host
                        ),
                    ));
                }
                spec.image = Some(*image);
                spec.boot_volume_gb = spec.boot_volume_gb.max(i.size_gb);
                resources.push((ResourceType::Image, image.0));
            }
        }
        let parts = meson_db::volumes::list_for_vms(&mut *tx, &[id]).await?;
        let old = parts
            .iter()
            .find(|v| v.vm_id == Some(id) && v.kind == meson_core::volume::VolumeKind::Boot)
            .ok_or_else(|| Error::Conflict {
                message: "the VM has no boot volume to replace".into(),
            })?;
        let mut new = old.clone();
        new.id = meson_core::VolumeId::new();
        new.atomos_name = naming::vm_rebuilt_boot_volume_name(id, new.id);
        new.atomos_id = None;
        new.size_gb = spec.boot_volume_gb;
        new.status = meson_core::volume::VolumeStatus::Creating;
        new.created = chrono::Utc::now();
        resources.push((ResourceType::Volume, new.id.0));
        let action = new_action(p, Command::RebuildVm, resources);
        meson_db::actions::insert(&mut tx, &action).await?;
        let params = vm_rebuild::Params {
            vm_id: id,
            old_boot: old.id,
            new_boot: new.id,
            restart: vm.status == VmStatus::Running,
            from: vm.spec.clone(),
        };
        vm_rebuild::enqueue(&mut tx, &params, action.id, &p.tenant)
            .await?
            .or_locked("vm", id)?;
        // Checked after taking the lock: no other action can change it now.
        if !matches!(vm.status, VmStatus::Running | VmStatus::Off) || vm.placement.is_none() {
            return Err(Error::Conflict {
                message: format!(
                    "the VM is {}; only a VM that is running or off can be rebuilt",
                    vm.status.as_str()
                ),
            });
        }
        meson_db::volumes::insert(&mut tx, &new).await?;
        meson_db::vms::set_spec(&mut *tx, id, &spec).await?;
        self.within_quotas(&mut tx, &p.tenant, &held).await?;
        meson_db::commit(tx).await?;
        tracing::info!(vm = %id, action = %action.id, "vm rebuild accepted");
        Ok((action, req.warnings))
    }

    /// Starts migrating a VM to another host of its provider (`host`, or
    /// the cheapest other one with room), its volumes with it; a running VM
    /// is stopped for the move and started again on the new host.
    pub async fn vm_migrate(
        &self,
        p: &Principal,
        id: VmId,
        body: &serde_json::Value,
    ) -> Result<(Action, Vec<Warning>)> {
        let req = VmMigrate::parse(body)?;
        let targets = meson_db::targets::list(&self.own).await?;
        let mut tx = meson_db::begin(&self.pool).await?;
        let vm = meson_db::vms::get(&mut *tx, &p.tenant, id).await?;
        let attached = meson_db::volumes::attached_to_vms(&mut *tx, &[id]).await?;
        let mut resources = vec![(ResourceType::Vm, id.0)];
        resources.extend(attached.iter().map(|v| (ResourceType::Volume, v.id.0)));
        let action = new_action(p, Command::MigrateVm, resources);
        meson_db::actions::insert(&mut tx, &action).await?;
        let params = vm_migrate::Params {
            vm_id: id,
            host: req.host.clone(),
            restart: vm.status == VmStatus::Running,
        };
        vm_migrate::enqueue(&mut tx, &params, action.id, &p.tenant)
            .await?
            .or_locked("vm", id)?;
        // Checked after taking the lock: no other action can change it now.
        let (Some(from), VmStatus::Running | VmStatus::Off) = (&vm.placement, vm.status) else {
            return Err(Error::Conflict {
                message: format!(
                    "the VM is {}; only a placed VM that is running or off can be migrated",
                    vm.status.as_str()
                ),
            });
        };
        if let Some(host) = &req.host {
            super::destination(&targets, host, from.target_id, &from.provider, "VM")?;
        }
        let forwards = meson_db::port_forwards::list(&mut *tx, Of::Vm(id)).await?;
        if let Some(f) = forwards.first() {
            return Err(Error::Conflict {
                message: format!(
                    "the VM has {} port forward(s) on host {}'s public address ({}:{} first): \
                     moving it would change their address; delete them, migrate, and forward again",
                    forwards.len(),
                    from.host,
                    f.public_ip,
                    f.public_port
                ),
            });
        }
        for v in &attached {
            let key = meson_workflows::keys::volume(v.id);
            if let Some(blocking) = meson_db::jobs::live_on_key(&mut *tx, &key).await? {
                return Err(Error::Locked {
                    kind: "volume",
                    id: v.id.to_string(),
                    action_id: blocking.map(|a| a.0).unwrap_or_default(),
                });
            }
        }
        meson_db::commit(tx).await?;
        tracing::info!(vm = %id, action = %action.id, host = ?req.host, "vm migrate accepted");
        Ok((action, req.warnings))
    }

    /// Starts attaching a running or off VM to one of the tenant's private
    /// networks: the NIC (its MAC, and its address on a network without
    /// DHCP) is recorded at once, so the address is the VM's while the
    /// host plugs it in.
    pub async fn vm_attach_network(
        &self,
        p: &Principal,
        id: VmId,
        body: &serde_json::Value,
    ) -> Result<(Action, Vec<Warning>)> {
        let (mut tx, action, req, nics) = self
            .network_change(p, id, body, Command::AttachNetwork)
            .await?;
        if nics.iter().any(|n| n.network_id == req.network) {
            return Err(Error::Conflict {
                message: format!("the VM is on network {} already", req.network),
            });
        }
        if nics.len() >= meson_core::vm::MAX_NETWORKS {
            return Err(Error::Conflict {
                message: format!(
                    "the VM is on {} private networks, the most it can join",
                    nics.len()
                ),
            });
        }
        let position = nics.iter().map(|n| n.position + 1).max().unwrap_or(0);
        meson_db::networks::attach_network(
            &mut tx,
            &p.tenant,
            id,
            req.network,
            position,
            "network",
            false,
        )
        .await?;
        meson_db::commit(tx).await?;
        tracing::info!(vm = %id, network = %req.network, action = %action.id,
            "vm network attach accepted");
        Ok((action, req.warnings))
    }

    /// Starts taking a running or off VM off one of its private networks;
    /// the NIC (and its address) stays the VM's until the host has
    /// unplugged it.
    pub async fn vm_detach_network(
        &self,
        p: &Principal,
        id: VmId,
        body: &serde_json::Value,
    ) -> Result<(Action, Vec<Warning>)> {
        let (mut tx, action, req, nics) = self
            .network_change(p, id, body, Command::DetachNetwork)
            .await?;
        if !nics.iter().any(|n| n.network_id == req.network) {
            return Err(Error::invalid(
                "network",
                format!("the VM is not on network {}", req.network),
            ));
        }
        let forwarded = meson_db::port_forwards::list(&mut *tx, Of::Vm(id)).await?;
        if let Some(f) = forwarded.iter().find(|f| f.network_id == req.network) {
            return Err(Error::Conflict {
                message: format!(
                    "port forward {} ({}/{}) reaches the VM through network {}: delete it first",
                    f.id,
                    f.public_port,
                    f.protocol.as_str(),
                    req.network
                ),
            });
        }
        meson_db::commit(tx).await?;
        tracing::info!(vm = %id, network = %req.network, action = %action.id,
            "vm network detach accepted");
        Ok((action, req.warnings))
    }

    /// What a network attach and detach share, in one transaction: the
    /// request read, the action recorded and its job enqueued under the
    /// VM's key, then (with the key held, so nothing else changes it) the
    /// VM checked placed and running or off. Answers them with the VM's
    /// NICs; the caller commits.
    async fn network_change(
        &self,
        p: &Principal,
        id: VmId,
        body: &serde_json::Value,
        command: Command,
    ) -> Result<(
        meson_db::Tx<'static>,
        Action,
        VmNetworkChange,
        Vec<Attachment>,
    )> {
        let req = VmNetworkChange::parse(body)?;
        let mut tx = meson_db::begin(&self.pool).await?;
        let vm = meson_db::vms::get(&mut *tx, &p.tenant, id).await?;
        let action = new_action(
            p,
            command,
            vec![
                (ResourceType::Vm, id.0),
                (ResourceType::Network, req.network.0),
            ],
        );
        meson_db::actions::insert(&mut tx, &action).await?;
        let params = vm_network::Params {
            vm_id: id,
            network_id: req.network,
        };
        let attach = command == Command::AttachNetwork;
        vm_network::enqueue(&mut tx, &params, attach, action.id, &p.tenant)
            .await?
            .or_locked("vm", id)?;
        live_on_host(
            &vm,
            if attach {
                "attached to a network"
            } else {
                "detached from a network"
            },
        )?;
        let nics = meson_db::networks::attachments_of(&mut *tx, &[id]).await?;
        Ok((tx, action, req, nics))
    }

    /// Renames a VM and/or replaces its labels (`{"name", "labels"}`); the
    /// name on AtomOS is id-based, so nothing there changes.
    pub async fn vm_update(
        &self,
        p: &Principal,
        id: VmId,
        body: &serde_json::Value,
    ) -> Result<((Vm, VmParts), Vec<Warning>)> {
        let renamed = meson_db::vms::RENAMED;
        let warnings = self
            .rename::<Vm>(&p.tenant, id.0, body, meson_core::vm::MAX_NAME_LEN, renamed)
            .await?;
        Ok((self.vm_get(p, id).await?, warnings))
    }
}

/// Checks, in a VM create's transaction, the image its boot volume is
/// copied from: the tenant's, `available` (locked, so a delete waits for
/// this create and then sees its running action), on a host the VM's
/// provider/continent/region allow, and the host of the volumes it
/// attaches, if any.
async fn image_for_new_vm(
    tx: &mut meson_db::Tx<'_>,
    tenant: &meson_core::TenantId,
    id: meson_core::ImageId,
    spec: &meson_core::vm::VmSpec,
    targets: &[meson_core::target::Target],
    attached: &[meson_core::volume::Volume],
) -> Result<()> {
    let image = match meson_db::images::lock(tx, tenant, id).await {
        Err(Error::NotFound { .. }) => return Err(Error::invalid("image", "no such image")),
        other => other?,
    };
    if image.status != meson_core::image::ImageStatus::Available {
        return Err(Error::invalid(
            "image",
            format!(
                "the image is {}; only an available image can be copied",
                image.status.as_str()
            ),
        ));
    }
    let at = image
        .placement
        .as_ref()
        .ok_or_else(|| Error::internal("an available image has no placement"))?;
    let meets = targets
        .iter()
        .find(|t| t.id == at.target_id)
        .is_some_and(|t| t.meets([&spec.provider, &spec.continent, &spec.region]));
    if !meets {
        return Err(Error::invalid(
            "image",
            format!(
                "the image is on host {} (provider {}, region {}), which the VM's \
                 provider/continent/region exclude",
                at.host, at.provider, at.region
            ),
        ));
    }
    if let Some(v) = attached.first()
        && let Some(vp) = &v.placement
        && vp.target_id != at.target_id
    {
        return Err(Error::invalid(
            "image",
            format!(
                "the image is on host {}, volume {} on host {}: a VM's image and volumes \
                 must share its host",
                at.host, v.name, vp.host
            ),
        ));
    }
    Ok(())
}

/// A VM that is placed and running or off; else a `409` saying what it is
/// and that only such a VM can be `what`.
pub(crate) fn live_on_host(vm: &Vm, what: &str) -> Result<()> {
    match (&vm.placement, vm.status) {
        (Some(_), VmStatus::Running | VmStatus::Off) => Ok(()),
        _ => Err(Error::Conflict {
            message: format!(
                "the VM is {}; only a placed VM that is running or off can be {what}",
                vm.status.as_str()
            ),
        }),
    }
}
