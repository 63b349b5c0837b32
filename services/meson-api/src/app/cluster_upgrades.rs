//! Cluster upgrades and credential rotation: the `upgrade_cluster` and
//! `rotate_credentials` actions.

use super::{App, new_action};
use crate::auth::Principal;
use meson_core::action::{Action, Command, ResourceType};
use meson_core::kaas::UpgradeRequest;
use meson_core::kubernetes::{self, KubeVersion};
use meson_core::parse::Warning;
use meson_core::{ClusterId, Error, Result};
use meson_workflows::cluster_upgrade::{self, UpgradeParams};

fn not_running(status: &str, what: &str) -> Error {
    Error::Conflict {
        message: format!("the cluster is {status}; {what} needs it running"),
    }
}

impl App {
    /// Starts a rolling upgrade of a running cluster to a later patch of
    /// its minor or a patch of the next minor (`invalid_input` on
    /// `kubernetes_version` otherwise), `locked` while another action runs
    /// on it, `conflict` when it is not `running`.
    pub async fn cluster_upgrade(
        &self,
        p: &Principal,
        id: ClusterId,
        body: &serde_json::Value,
    ) -> Result<(Action, Vec<Warning>)> {
        let (req, mut warnings) = UpgradeRequest::parse(body)?;
        let cluster = meson_db::clusters::get(&self.pool, &p.tenant, id).await?;
        let from: KubeVersion = cluster.kubernetes_version.parse().map_err(|e| {
            Error::internal(format!(
                "cluster version {}: {e}",
                cluster.kubernetes_version
            ))
        })?;
        let resolved = kubernetes::resolve_upgrade(&from, &req.version)
            .map_err(|m| Error::invalid("kubernetes_version", m))?;
        let to = resolved.release.version;
        warnings.extend(
            resolved
                .warnings(&req.version, kubernetes::today())
                .into_iter()
                .map(|message| Warning {
                    field: "kubernetes_version".to_owned(),
                    message,
                }),
        );
        // Without DHCP every replacement takes an address before the node
        // it replaces frees its own.
        let subnet = &cluster.spec.nodes_subnet;
        if !subnet.dhcp {
            let nodes = meson_db::clusters::nodes(&self.pool, id).await?.len() as u64;
            // The API endpoint holds one address.
            let free = subnet.capacity().saturating_sub(nodes + 1);
            let at_once = u64::from(req.max_surge + req.max_unavailable).max(1);
            if free == 0 {
                return Err(Error::Conflict {
                    message: "the nodes' subnet has no free address for a replacement node"
                        .to_owned(),
                });
            }
            if at_once > free {
                return Err(Error::invalid(
                    "max_surge",
                    format!(
                        "replacing {at_once} nodes at once needs {at_once} free addresses in \
                         the nodes' subnet; it has {free}"
                    ),
                ));
            }
        }
        let action = new_action(
            p,
            Command::UpgradeCluster,
            vec![(ResourceType::Cluster, id.0)],
        );
        let params = UpgradeParams {
            cluster_id: id,
            kubernetes_version: to.to_string(),
            max_surge: req.max_surge,
            max_unavailable: req.max_unavailable,
        };
        let mut tx = meson_db::begin(&self.pool).await?;
        meson_db::actions::insert(&mut tx, &action).await?;
        cluster_upgrade::enqueue(&mut tx, &params, action.id, &p.tenant)
            .await?
            .or_locked("cluster", id)?;
        // Under the cluster's lock now: still running, at the version checked?
        if !meson_db::cluster_upgrades::begin_update(
            &mut tx,
            id,
            Some(&cluster.kubernetes_version),
            None,
        )
        .await?
        {
            let now = meson_db::clusters::get(&mut *tx, &p.tenant, id).await?;
            if now.kubernetes_version != cluster.kubernetes_version {
                return Err(Error::Conflict {
                    message: format!(
                        "the cluster now runs Kubernetes {}; check the upgrade again",
                        now.kubernetes_version
                    ),
                });
            }
            return Err(not_running(now.status.as_str(), "an upgrade"));
        }
        meson_db::commit(tx).await?;
        tracing::info!(cluster = %id, action = %action.id, from = %from, to = %to,
            max_surge = req.max_surge, max_unavailable = req.max_unavailable,
            "cluster upgrade accepted");
        Ok((action, warnings))
    }

    /// Starts rotating a running cluster's credentials (a new admin CA for
    /// kubeconfigs, a new bootstrap token; every control-plane node
    /// replaced): `locked` while another action runs on it, `conflict`
    /// when it is not `running`.
    pub async fn cluster_rotate_credentials(&self, p: &Principal, id: ClusterId) -> Result<Action> {
        // Whoever may hold the cluster may cut others off it.
        meson_db::clusters::get(&self.pool, &p.tenant, id).await?;
        let action = new_action(
            p,
            Command::RotateCredentials,
            vec![(ResourceType::Cluster, id.0)],
        );
        let mut tx = meson_db::begin(&self.pool).await?;
        meson_db::actions::insert(&mut tx, &action).await?;
        meson_workflows::cluster_rotate_credentials::enqueue(&mut tx, id, action.id, &p.tenant)
            .await?
            .or_locked("cluster", id)?;
        if !meson_db::cluster_upgrades::begin_update(&mut tx, id, None, None).await? {
            let now = meson_db::clusters::get(&mut *tx, &p.tenant, id).await?;
            return Err(not_running(now.status.as_str(), "a credentials rotation"));
        }
        meson_db::commit(tx).await?;
        tracing::info!(cluster = %id, action = %action.id, "credentials rotation accepted");
        Ok(action)
    }
}
