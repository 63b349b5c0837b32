//! Private networks: create, read, list, rename/relabel, delete when unused,
//! and attaching a new VM to its networks (with meson's IPAM).

use super::list::Paged;
use super::{App, ListQuery, new_action};
use crate::auth::Principal;
use meson_core::action::{Action, Command, ResourceType};
use meson_core::network::{MAX_NETWORK_NAME_LEN, Network, NetworkCreate, NetworkStatus};
use meson_core::parse::Warning;
use meson_core::{Error, NetworkId, Result, VmId};
use meson_workflows::network_delete;

impl App {
    /// Validates and stores a network. Nothing is made on AtomOS yet: a
    /// network exists on a host from the first VM placed there with it.
    pub async fn network_create(
        &self,
        p: &Principal,
        body: &serde_json::Value,
    ) -> Result<(Network, Vec<Warning>)> {
        let req = NetworkCreate::parse(body)?;
        let network = Network {
            id: NetworkId::new(),
            tenant: p.tenant.clone(),
            name: req.name,
            status: NetworkStatus::Available,
            labels: req.labels,
            subnet: req.subnet,
            created: chrono::Utc::now(),
        };
        let mut tx = meson_db::begin(&self.pool).await?;
        meson_db::networks::insert(&mut tx, &network).await?;
        meson_db::commit(tx).await?;
        tracing::info!(network = %network.id, tenant = %p.tenant, "network created");
        Ok((network, req.warnings))
    }

    /// A network and the VMs attached to it.
    pub async fn network_get(&self, p: &Principal, id: NetworkId) -> Result<(Network, Vec<VmId>)> {
        let network = meson_db::networks::get(&self.pool, &p.tenant, id).await?;
        let vms = meson_db::networks::vms_on(&self.pool, id).await?;
        Ok((network, vms))
    }

    /// A page of networks, each with its VMs, and the total.
    pub async fn network_list(
        &self,
        p: &Principal,
        q: &ListQuery,
    ) -> Result<Paged<(Network, Vec<VmId>)>> {
        self.page(
            &p.tenant,
            &q.page,
            q.bound("networks", &p.tenant)?,
            &q.filter(),
        )
        .await
    }

    /// Renames a network and/or replaces its labels.
    pub async fn network_update(
        &self,
        p: &Principal,
        id: NetworkId,
        body: &serde_json::Value,
    ) -> Result<((Network, Vec<VmId>), Vec<Warning>)> {
        let renamed = meson_db::networks::RENAMED;
        let warnings = self
            .rename::<(Network, Vec<VmId>)>(&p.tenant, id.0, body, MAX_NETWORK_NAME_LEN, renamed)
            .await?;
        Ok((self.network_get(p, id).await?, warnings))
    }

    /// Starts removing an unused network from every host it was made on.
    /// `conflict` while VMs are attached; `locked` while it is being deleted.
    pub async fn network_delete(&self, p: &Principal, id: NetworkId) -> Result<Action> {
        let mut tx = meson_db::begin(&self.pool).await?;
        // Locked: a VM create attaching to it waits, or sees it deleting.
        meson_db::networks::lock(&mut tx, &p.tenant, id, false).await?;
        let vms = meson_db::networks::vms_on(&mut *tx, id).await?;
        if !vms.is_empty() {
            let ids: Vec<String> = vms.iter().map(ToString::to_string).collect();
            return Err(Error::Conflict {
                message: format!(
                    "the network is in use by {} VM(s): {}; delete them or their attachment first",
                    vms.len(),
                    ids.join(", ")
                ),
            });
        }
        let action = new_action(
            p,
            Command::DeleteNetwork,
            vec![(ResourceType::Network, id.0)],
        );
        meson_db::actions::insert(&mut tx, &action).await?;
        network_delete::enqueue(&mut tx, id, action.id, &p.tenant)
            .await?
            .or_locked("network", id)?;
        meson_db::networks::set_status(&mut *tx, id, NetworkStatus::Deleting).await?;
        meson_db::commit(tx).await?;
        tracing::info!(network = %id, action = %action.id, "network delete accepted");
        Ok(action)
    }
}
