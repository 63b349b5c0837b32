//! Port forwards: a public port of a network's VM's host relayed to the VM.

use super::{App, new_action};
use crate::auth::Principal;
use meson_core::action::{Action, Command, ResourceType};
use meson_core::parse::Warning;
use meson_core::port_forward::{
    MAX_PER_NETWORK, PortForward, PortForwardCreate, PortForwardStatus,
};
use meson_core::{Error, NetworkId, PortForwardId, Result};
use meson_db::port_forwards::Of;
use meson_workflows::port_forward;

pub struct PortForwardCreated {
    pub port_forward: PortForward,
    pub action: Action,
    pub warnings: Vec<Warning>,
}

impl App {
    /// A network's live forwards, oldest first (the network must be the
    /// tenant's).
    pub async fn port_forward_list(
        &self,
        p: &Principal,
        network: NetworkId,
    ) -> Result<Vec<PortForward>> {
        meson_db::networks::get(&self.pool, &p.tenant, network).await?;
        meson_db::port_forwards::list(&self.pool, Of::Network(network)).await
    }

    pub async fn port_forward_get(
        &self,
        p: &Principal,
        network: NetworkId,
        id: PortForwardId,
    ) -> Result<PortForward> {
        meson_db::port_forwards::get(&self.pool, &p.tenant, network, id).await
    }

    /// Forwards a public port of the VM's host to one of the VM's ports:
    /// the VM must be on the network, placed, and running or off; the port
    /// free on that host (among every tenant's forwards, and none of the
    /// host's AtomOS daemons'). In one transaction, under the VM's key: the
    /// forward (`creating`, holding its port), the action and its job.
    pub async fn port_forward_create(
        &self,
        p: &Principal,
        network: NetworkId,
        body: &serde_json::Value,
    ) -> Result<PortForwardCreated> {
        let req = PortForwardCreate::parse(body)?;
        let mut tx = meson_db::begin(&self.pool).await?;
        meson_db::networks::get(&mut *tx, &p.tenant, network).await?;
        let vm = match meson_db::vms::get(&mut *tx, &p.tenant, req.vm).await {
            Err(Error::NotFound { .. }) => return Err(Error::invalid("vm", "no such VM")),
            other => other?,
        };
        let id = PortForwardId::new();
        let action = new_action(
            p,
            Command::CreatePortForward,
            vec![
                (ResourceType::PortForward, id.0),
                (ResourceType::Vm, vm.id.0),
                (ResourceType::Network, network.0),
            ],
        );
        meson_db::actions::insert(&mut tx, &action).await?;
        let params = port_forward::Params {
            forward_id: id,
            vm_id: vm.id,
        };
        port_forward::enqueue(&mut tx, &params, true, action.id, &p.tenant)
            .await?
            .or_locked("vm", vm.id)?;
        // Checked with the VM's key held: nothing else changes it now.
        super::vms::live_on_host(&vm, "forwarded to")?;
        let nics = meson_db::networks::attachments_of(&mut *tx, &[vm.id]).await?;
        if !nics.iter().any(|n| n.network_id == network) {
            return Err(Error::invalid(
                "vm",
                format!("the VM is not on network {network}: attach it first"),
            ));
        }
        let at = vm
            .placement
            .as_ref()
            .ok_or_else(|| Error::internal("a live VM has no placement"))?;
        let target = meson_db::targets::get(&self.own, at.target_id).await?;
        let daemons = [
            ("compute", target.compute_port),
            ("storage", target.storage_port),
            ("network", target.network_port),
            ("authentication", target.auth_port),
        ];
        if let Some((daemon, _)) = daemons.iter().find(|(_, port)| *port == req.public_port) {
            return Err(Error::invalid(
                "public_port",
                format!(
                    "port {} is host {}'s AtomOS {daemon} daemon's",
                    req.public_port, target.name
                ),
            ));
        }
        let on_network = meson_db::port_forwards::list(&mut *tx, Of::Network(network)).await?;
        if on_network.len() >= MAX_PER_NETWORK {
            return Err(Error::Conflict {
                message: format!(
                    "network {network} has {} port forwards, the most it carries",
                    on_network.len()
                ),
            });
        }
        let forward = PortForward {
            id,
            tenant: p.tenant.clone(),
            network_id: network,
            vm_id: vm.id,
            protocol: req.protocol,
            public_port: req.public_port,
            private_port: req.private_port,
            status: PortForwardStatus::Creating,
            target_id: target.id,
            host: target.name.clone(),
            public_ip: target.host.clone(),
            error_message: None,
            created: chrono::Utc::now(),
        };
        meson_db::port_forwards::insert(&mut tx, &forward).await?;
        meson_db::commit(tx).await?;
        tracing::info!(forward = %id, vm = %vm.id, network = %network, host = %target.name,
            port = req.public_port, action = %action.id, "port forward accepted");
        Ok(PortForwardCreated {
            port_forward: forward,
            action,
            warnings: req.warnings,
        })
    }

    /// Starts removing a forward; `locked` while another action runs on its
    /// VM (its own create included).
    pub async fn port_forward_delete(
        &self,
        p: &Principal,
        network: NetworkId,
        id: PortForwardId,
    ) -> Result<Action> {
        let mut tx = meson_db::begin(&self.pool).await?;
        let forward = meson_db::port_forwards::get(&mut *tx, &p.tenant, network, id).await?;
        let action = new_action(
            p,
            Command::DeletePortForward,
            vec![
                (ResourceType::PortForward, id.0),
                (ResourceType::Vm, forward.vm_id.0),
                (ResourceType::Network, network.0),
            ],
        );
        meson_db::actions::insert(&mut tx, &action).await?;
        let params = port_forward::Params {
            forward_id: id,
            vm_id: forward.vm_id,
        };
        port_forward::enqueue(&mut tx, &params, false, action.id, &p.tenant)
            .await?
            .or_locked("vm", forward.vm_id)?;
        meson_db::port_forwards::set_status(
            &mut *tx,
            id,
            &[PortForwardStatus::Active, PortForwardStatus::Error],
            PortForwardStatus::Deleting,
            None,
        )
        .await?;
        meson_db::commit(tx).await?;
        tracing::info!(forward = %id, action = %action.id, "port forward delete accepted");
        Ok(action)
    }
}
