//! A cluster's node pools: list, read, add one, change its size and
//! bounds, delete one.
//!
//! Every change is checked in one transaction holding the cluster's pool
//! lock (two requests never both pass a check only one of them may), and the
//! action it starts is enqueued under the cluster's concurrency key: while
//! another action runs on the cluster the answer is `locked`, naming it.
//! The cluster is `updating` until the action ends (`running` again, or
//! `error` with the reason).

use super::{App, new_action};
use crate::auth::Principal;
use meson_core::action::{Action, Command, ResourceType};
use meson_core::cluster::{Cluster, ClusterStatus, Node, NodePool, NodeRole, NodeStatus};
use meson_core::error::LimitExceeded;
use meson_core::kaas::{MAX_POOLS, PoolPatch, PoolSpec};
use meson_core::parse::Warning;
use meson_core::{ClusterId, Error, NodeId, PoolId, Result};
use meson_jobs::Workflow;
use meson_workflows::node_pool_create::NodePoolCreate;
use meson_workflows::node_pool_delete::NodePoolDelete;
use meson_workflows::node_pool_scale::NodePoolScale;
use meson_workflows::node_pools::{self, PoolParams};

/// A pool with its nodes.
pub struct PoolView {
    pub pool: NodePool,
    /// The pool's live nodes.
    pub nodes: Vec<Node>,
}

/// A pool after a change, and the action the change started, if any.
pub struct PoolChanged {
    pub view: PoolView,
    pub action: Option<Action>,
    pub warnings: Vec<Warning>,
}

/// Pool changes need a cluster whose control plane came up: a cluster
/// whose create failed has nothing for new nodes to join.
fn require_control_plane(cluster: &Cluster, nodes: &[Node]) -> Result<()> {
    let up = nodes.iter().any(|n| {
        n.role == NodeRole::ControlPlane
            && n.phoned_home.is_some()
            && !matches!(n.status, NodeStatus::CreationError | NodeStatus::Deleting)
    });
    if up {
        Ok(())
    } else {
        Err(Error::Conflict {
            message: format!(
                "cluster {} has no control plane up (it is {}); its pools can change once it runs",
                cluster.name,
                cluster.status.as_str()
            ),
        })
    }
}

/// Without DHCP the network must hold every node at its maximum with
/// `pools` (the pools as they would be) plus the API endpoint.
fn check_capacity<'a>(cluster: &Cluster, pools: impl Iterator<Item = &'a PoolSpec>) -> Result<()> {
    let at_max = u64::from(cluster.spec.control_plane.nodes)
        + pools.map(|p| u64::from(p.max_nodes)).sum::<u64>();
    meson_core::cluster::check_address_capacity(&cluster.spec.nodes_subnet, at_max).map_err(|m| {
        Error::invalid(
            "max_nodes",
            format!("the cluster network {} {m}", cluster.spec.nodes_subnet.cidr),
        )
    })
}

/// A cluster needs a worker: some pool with nodes, or one that autoscales
/// (the rule of the KaaS request).
fn has_workers<'a>(mut pools: impl Iterator<Item = &'a PoolSpec>) -> bool {
    pools.any(|p| p.autoscale || p.desired_nodes > 0)
}

impl App {
    /// Begins a transaction holding the lock on a tenant's cluster's pools
    /// (a pool change serializes on it) and reads the cluster and its pools.
    async fn lock_pools(
        &self,
        p: &Principal,
        cluster_id: ClusterId,
    ) -> Result<(meson_db::Tx<'static>, Cluster, Vec<NodePool>)> {
        let mut tx = meson_db::begin(&self.pool).await?;
        meson_db::node_pools::lock_cluster(&mut tx, cluster_id).await?;
        let cluster = meson_db::clusters::get(&mut *tx, &p.tenant, cluster_id).await?;
        let pools = meson_db::clusters::pools(&mut *tx, cluster_id).await?;
        Ok((tx, cluster, pools))
    }

    async fn pool_view(&self, pool: NodePool) -> Result<PoolView> {
        let nodes = meson_db::clusters::nodes(&self.pool, pool.cluster)
            .await?
            .into_iter()
            .filter(|n| n.pool == Some(pool.id))
            .collect();
        Ok(PoolView { pool, nodes })
    }

    /// A cluster's pools, oldest first.
    pub async fn pool_list(&self, p: &Principal, cluster: ClusterId) -> Result<Vec<PoolView>> {
        meson_db::clusters::get(&self.pool, &p.tenant, cluster).await?;
        let pools = meson_db::clusters::pools(&self.pool, cluster).await?;
        let nodes = meson_db::clusters::nodes(&self.pool, cluster).await?;
        Ok(pools
            .into_iter()
            .map(|pool| PoolView {
                nodes: nodes
                    .iter()
                    .filter(|n| n.pool == Some(pool.id))
                    .cloned()
                    .collect(),
                pool,
            })
            .collect())
    }

    pub async fn pool_get(
        &self,
        p: &Principal,
        cluster: ClusterId,
        id: PoolId,
    ) -> Result<PoolView> {
        meson_db::clusters::get(&self.pool, &p.tenant, cluster).await?;
        let pool = meson_db::node_pools::get(&self.pool, cluster, id).await?;
        self.pool_view(pool).await
    }

    /// Enqueues a pool workflow with its action, in `tx`; the cluster is
    /// `updating` from then on. `locked` while another action runs on the
    /// cluster, `conflict` when its control plane is not up.
    async fn start_pool_action<W: Workflow<Params = PoolParams>>(
        &self,
        tx: &mut meson_db::Tx<'_>,
        p: &Principal,
        cluster: &Cluster,
        pool: PoolId,
        command: Command,
    ) -> Result<Action> {
        let action = new_action(
            p,
            command,
            vec![
                (ResourceType::Cluster, cluster.id.0),
                (ResourceType::NodePool, pool.0),
            ],
        );
        meson_db::actions::insert(tx, &action).await?;
        node_pools::enqueue::<W>(tx, cluster.id, pool, action.id, &p.tenant)
            .await?
            .or_locked("cluster", cluster.id)?;
        require_control_plane(
            cluster,
            &meson_db::clusters::nodes(&mut **tx, cluster.id).await?,
        )?;
        meson_db::clusters::set_status(&mut **tx, cluster.id, ClusterStatus::Updating, None)
            .await?;
        Ok(action)
    }

    /// Adds a pool (one item of the KaaS request's `nodepool`, fields named
    /// from the root); its `create_node_pool` action brings up its nodes.
    pub async fn pool_create(
        &self,
        p: &Principal,
        cluster_id: ClusterId,
        body: &serde_json::Value,
    ) -> Result<PoolChanged> {
        // A deadlock with the workflow of a change that runs on the cluster
        // aborts this transaction: once again, it meets that change's lock.
        meson_db::retry_deadlocks(|| self.pool_create_once(p, cluster_id, body)).await
    }

    async fn pool_create_once(
        &self,
        p: &Principal,
        cluster_id: ClusterId,
        body: &serde_json::Value,
    ) -> Result<PoolChanged> {
        let (spec, warnings) = PoolSpec::parse(body)?;
        let (mut tx, cluster, pools) = self.lock_pools(p, cluster_id).await?;
        if pools.iter().any(|x| x.spec.name == spec.name) {
            return Err(Error::AlreadyExists {
                kind: "node pool",
                field: "pool_name".to_owned(),
            });
        }
        if pools.len() >= MAX_POOLS {
            return Err(Error::QuotaExceeded {
                limits: vec![LimitExceeded {
                    name: "node_pools".to_owned(),
                    quota: MAX_POOLS as i64,
                    current: pools.len() as i64,
                }],
            });
        }
        check_capacity(
            &cluster,
            pools.iter().map(|x| &x.spec).chain(std::iter::once(&spec)),
        )?;
        let held = self.hold_usage(&mut tx, &p.tenant).await?;
        let pool = NodePool {
            id: PoolId::new(),
            cluster: cluster_id,
            spec,
            created: chrono::Utc::now(),
        };
        meson_db::clusters::insert_pool(&mut tx, &pool).await?;
        self.within_quotas(&mut tx, &p.tenant, &held).await?;
        let action = self
            .start_pool_action::<NodePoolCreate>(
                &mut tx,
                p,
                &cluster,
                pool.id,
                Command::CreateNodePool,
            )
            .await?;
        meson_db::commit(tx).await?;
        tracing::info!(cluster = %cluster_id, pool = %pool.id, action = %action.id, "node pool create accepted");
        Ok(PoolChanged {
            view: PoolView {
                pool,
                nodes: Vec::new(),
            },
            action: Some(action),
            warnings,
        })
    }

    /// Changes a pool's `desired_nodes`, `min_nodes`, `max_nodes` and
    /// `autoscale`. A `desired_nodes` given that differs from the pool's
    /// node count now starts `scale_node_pool`; anything else is stored
    /// and answered at once.
    pub async fn pool_update(
        &self,
        p: &Principal,
        cluster_id: ClusterId,
        id: PoolId,
        body: &serde_json::Value,
    ) -> Result<PoolChanged> {
        // A deadlock with the workflow of a change that runs on the cluster
        // aborts this transaction: once again, it meets that change's lock.
        meson_db::retry_deadlocks(|| self.pool_update_once(p, cluster_id, id, body)).await
    }

    async fn pool_update_once(
        &self,
        p: &Principal,
        cluster_id: ClusterId,
        id: PoolId,
        body: &serde_json::Value,
    ) -> Result<PoolChanged> {
        let (patch, warnings) = PoolPatch::parse(body)?;
        let (mut tx, cluster, pools) = self.lock_pools(p, cluster_id).await?;
        let current = pools
            .iter()
            .find(|x| x.id == id)
            .ok_or_else(|| Error::not_found("node pool", id))?;
        let spec = patch.apply(&current.spec)?;
        let others = || pools.iter().filter(|x| x.id != id).map(|x| &x.spec);
        if !has_workers(others().chain(std::iter::once(&spec))) {
            return Err(Error::invalid(
                if patch.desired.is_some() {
                    "desired_nodes"
                } else {
                    "autoscale"
                },
                "the cluster needs a worker node: keep desired_nodes of at least 1 in some \
                 pool, or autoscale",
            ));
        }
        if spec.max_nodes > current.spec.max_nodes {
            check_capacity(&cluster, others().chain(std::iter::once(&spec)))?;
        }
        let nodes_now = meson_db::clusters::nodes(&mut *tx, cluster_id)
            .await?
            .iter()
            .filter(|n| n.pool == Some(id) && n.status != NodeStatus::Deleting)
            .count();
        let scale = patch.desired.is_some()
            && (spec.desired_nodes != current.spec.desired_nodes
                || nodes_now != spec.desired_nodes as usize);
        let pool = NodePool {
            spec,
            ..current.clone()
        };
        if pool == *current && !scale {
            // Nothing changes.
            drop(tx);
            return Ok(PoolChanged {
                view: self.pool_view(pool).await?,
                action: None,
                warnings,
            });
        }
        // Only a pool that grows can take its tenant over a quota.
        let held = if pool.spec.desired_nodes > current.spec.desired_nodes {
            Some(self.hold_usage(&mut tx, &p.tenant).await?)
        } else {
            None
        };
        meson_db::node_pools::set_counts(&mut tx, &pool).await?;
        if let Some(held) = held {
            self.within_quotas(&mut tx, &p.tenant, &held).await?;
        }
        let action = if scale {
            Some(
                self.start_pool_action::<NodePoolScale>(
                    &mut tx,
                    p,
                    &cluster,
                    id,
                    Command::ScaleNodePool,
                )
                .await?,
            )
        } else {
            None
        };
        meson_db::commit(tx).await?;
        tracing::info!(cluster = %cluster_id, pool = %id, desired = pool.spec.desired_nodes,
            action = ?action.as_ref().map(|a| a.id), "node pool updated");
        Ok(PoolChanged {
            view: self.pool_view(pool).await?,
            action,
            warnings,
        })
    }

    /// Removes these nodes of a pool and lowers its `desired_nodes` by as
    /// many, in one `scale_node_pool` action (the nodes, marked `deleting`
    /// here, are the ones its shrink takes first): how the
    /// cluster-autoscaler scales down, and `POST
    /// /v1/clusters/{id}/pools/{pool_id}/actions/delete-nodes`. Refused
    /// below `min_nodes`, for nodes of another pool, and for nodes already
    /// going.
    pub async fn pool_delete_nodes(
        &self,
        p: &Principal,
        cluster_id: ClusterId,
        id: PoolId,
        victims: &[NodeId],
    ) -> Result<PoolChanged> {
        // A deadlock with the workflow of a change that runs on the cluster
        // aborts this transaction: once again, it meets that change's lock.
        meson_db::retry_deadlocks(|| self.pool_delete_nodes_once(p, cluster_id, id, victims)).await
    }

    async fn pool_delete_nodes_once(
        &self,
        p: &Principal,
        cluster_id: ClusterId,
        id: PoolId,
        victims: &[NodeId],
    ) -> Result<PoolChanged> {
        if victims.is_empty() {
            return Err(Error::invalid("nodes", "name at least one node"));
        }
        let (mut tx, cluster, pools) = self.lock_pools(p, cluster_id).await?;
        let current = pools
            .iter()
            .find(|x| x.id == id)
            .ok_or_else(|| Error::not_found("node pool", id))?;
        let nodes = meson_db::clusters::nodes(&mut *tx, cluster_id).await?;
        let mut chosen: Vec<&Node> = Vec::new();
        for v in victims {
            let node = nodes
                .iter()
                .find(|n| n.id == *v && n.pool == Some(id))
                .ok_or_else(|| {
                    Error::invalid("nodes", format!("node {v} is not in node pool {id}"))
                })?;
            if node.status == NodeStatus::Deleting {
                return Err(Error::Conflict {
                    message: format!("node {} is already being deleted", node.name),
                });
            }
            if !chosen.iter().any(|c| c.id == node.id) {
                chosen.push(node);
            }
        }
        let count = u32::try_from(chosen.len()).unwrap_or(u32::MAX);
        let desired = current
            .spec
            .desired_nodes
            .checked_sub(count)
            .filter(|d| *d >= current.spec.min_nodes);
        let Some(desired) = desired else {
            return Err(Error::invalid(
                "nodes",
                format!(
                    "removing {count} node(s) would take the pool below min_nodes ({})",
                    current.spec.min_nodes
                ),
            ));
        };
        let mut pool = current.clone();
        pool.spec.desired_nodes = desired;
        if !has_workers(
            pools
                .iter()
                .filter(|x| x.id != id)
                .map(|x| &x.spec)
                .chain(std::iter::once(&pool.spec)),
        ) {
            return Err(Error::invalid(
                "nodes",
                "the cluster needs a worker node: keep one in some pool, or autoscale",
            ));
        }
        meson_db::node_pools::set_counts(&mut tx, &pool).await?;
        let action = self
            .start_pool_action::<NodePoolScale>(&mut tx, p, &cluster, id, Command::ScaleNodePool)
            .await?;
        for n in &chosen {
            meson_db::clusters::set_node_status(&mut *tx, n.id, NodeStatus::Deleting, None).await?;
        }
        meson_db::commit(tx).await?;
        tracing::info!(cluster = %cluster_id, pool = %id, nodes = ?victims, desired,
            action = %action.id, "node pool nodes delete accepted");
        Ok(PoolChanged {
            view: self.pool_view(pool).await?,
            action: Some(action),
            warnings: Vec::new(),
        })
    }

    /// Starts deleting a pool (`delete_node_pool`): `conflict` for the
    /// cluster's last pool, or when no other pool has (or may autoscale to)
    /// a node.
    pub async fn pool_delete(
        &self,
        p: &Principal,
        cluster_id: ClusterId,
        id: PoolId,
    ) -> Result<Action> {
        // A deadlock with the workflow of a change that runs on the cluster
        // aborts this transaction: once again, it meets that change's lock.
        meson_db::retry_deadlocks(|| self.pool_delete_once(p, cluster_id, id)).await
    }

    async fn pool_delete_once(
        &self,
        p: &Principal,
        cluster_id: ClusterId,
        id: PoolId,
    ) -> Result<Action> {
        let (mut tx, cluster, pools) = self.lock_pools(p, cluster_id).await?;
        let pool = pools
            .iter()
            .find(|x| x.id == id)
            .ok_or_else(|| Error::not_found("node pool", id))?;
        if pools.len() == 1 {
            return Err(Error::Conflict {
                message: format!(
                    "{} is the cluster's last pool: add another pool first, or delete the cluster",
                    pool.spec.name
                ),
            });
        }
        if !has_workers(pools.iter().filter(|x| x.id != id).map(|x| &x.spec)) {
            return Err(Error::Conflict {
                message: format!(
                    "without {} the cluster would have no worker node: give another pool \
                     desired_nodes of at least 1 (or autoscale) first",
                    pool.spec.name
                ),
            });
        }
        let action = self
            .start_pool_action::<NodePoolDelete>(&mut tx, p, &cluster, id, Command::DeleteNodePool)
            .await?;
        meson_db::commit(tx).await?;
        tracing::info!(cluster = %cluster_id, pool = %id, action = %action.id, "node pool delete accepted");
        Ok(action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(min: u32, desired: u32, max: u32) -> PoolSpec {
        let (s, _) = PoolSpec::parse(&json!({
            "pool_name": "p", "min_nodes": min, "desired_nodes": desired, "max_nodes": max
        }))
        .unwrap();
        s
    }

    #[test]
    fn a_cluster_keeps_a_worker() {
        let none = spec(0, 0, 2);
        let mut auto = none.clone();
        auto.autoscale = true;
        assert!(!has_workers([&none, &none].into_iter()));
        assert!(has_workers([&none, &auto].into_iter()));
        assert!(has_workers([&spec(1, 1, 1)].into_iter()));
    }
}
