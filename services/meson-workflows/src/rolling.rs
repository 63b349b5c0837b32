//! Rolling replacement of a cluster's nodes, shared by upgrades and
//! credential rotations: every node of a group (the control plane, or one
//! pool) in turn gets a new node of the same role and pool, and goes.
//!
//! - **Surge** (the default, `max_surge` 1 / `max_unavailable` 0): the new
//!   node is up and has phoned home before the old one is taken away
//!   ([`nodes::replace_node`]); the group never has fewer ready nodes than
//!   it should.
//! - **Remove first** (`max_unavailable` > 0): the old node is taken away
//!   before the new one is brought up, freeing its share of a host for it
//!   (the new node's row, and with meson's IPAM its address, is written
//!   first, so that a retry finds it).
//!
//! A group rolls up to `max_surge + max_unavailable` nodes at once, at most
//! `max_surge` of them surging: Cluster API's MachineDeployment rule. The
//! control plane always rolls one node at a time, surging (etcd keeps its
//! quorum: one member joins before one leaves).
//!
//! Every replacement is recorded as an item of its step
//! ([`StepCtx::fan_out`], keyed by the old node's id) and finds, on a
//! retry, the replacement it made before (`nodes.replaces`): a worker that
//! dies mid-roll is resumed where it stopped.
//!
//! Forward-only, like Cluster API: a node replaced stays replaced when the
//! roll fails later. What the undo takes back is a replacement cut short:
//! one whose old node is still there is removed (the group is as it was),
//! one whose old node is already gone (remove first) is taken off AtomOS
//! and left in `creation_error` for a replace or auto-repair to redo.

use crate::Env;
use crate::nodes;
use meson_core::cluster::{Cluster, Node};
use meson_core::{ClusterId, Error, NodeId};
use meson_jobs::{StepCtx, StepResult};
use tokio::sync::Semaphore;

/// How one node is replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The new node is up before the old one goes.
    Surge,
    /// The old node goes before the new one comes up.
    RemoveFirst,
}

/// The live node `id`, or `None` once it is gone.
async fn live(env: &Env, id: NodeId) -> StepResult<Option<Node>> {
    match meson_db::clusters::node(&env.pool, id).await {
        Ok(n) => Ok(Some(n)),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The replacement of `old` at `version`, written now if there is none yet.
async fn ensure_replacement(
    env: &Env,
    cluster: &Cluster,
    old: &Node,
    version: &str,
) -> StepResult<Node> {
    if let Some(n) = meson_db::clusters::replacement_of(&env.pool, old.id).await? {
        return Ok(n);
    }
    let pools = meson_db::clusters::pools(&env.pool, cluster.id).await?;
    let pool = old.pool.and_then(|p| pools.iter().find(|x| x.id == p));
    let specs = match pool {
        Some(p) => p.spec.specs,
        None => cluster.spec.control_plane.specs,
    };
    // New nodes take the cluster's version: give it the target's.
    let mut at = cluster.clone();
    at.kubernetes_version = version.to_owned();
    let mut tx = meson_db::begin(&env.pool).await?;
    let n = meson_db::clusters::add_node(&mut tx, &at, pool, &specs).await?;
    meson_db::clusters::set_replaces(&mut *tx, n.id, old.id).await?;
    meson_db::commit(tx).await?;
    Ok(n)
}

/// Brings a replacement up and waits for it to phone home.
async fn bring_up(env: &Env, cluster: &Cluster, node: &Node) -> StepResult<()> {
    if node.phoned_home.is_none() {
        nodes::provision_node(env, cluster, node, false).await?;
        nodes::wait_phoned_home(env, node.id).await?;
    }
    Ok(())
}

/// Replaces node `old` (which may be gone already: a retry) with a node at
/// `version`. Returns the replacement, or `None` when `old` is gone and has
/// none (removed by other means: nothing to do).
pub async fn roll_one(
    env: &Env,
    cluster: &Cluster,
    old: NodeId,
    version: &str,
    mode: Mode,
) -> StepResult<Option<NodeId>> {
    let existing = meson_db::clusters::replacement_of(&env.pool, old).await?;
    let Some(old) = live(env, old).await? else {
        // Removed first (or done, and the item not recorded): finish it.
        return match existing {
            Some(new) => {
                bring_up(env, cluster, &new).await?;
                Ok(Some(new.id))
            }
            None => Ok(None),
        };
    };
    // A replacement at another version was left by another action cut
    // short; its old node is still here, so it never took over.
    if let Some(stale) = existing.filter(|n| n.kubernetes_version != version) {
        tracing::info!(node = %stale.name, "removing a replacement of another version");
        nodes::remove_node(env, &stale).await?;
    }
    let new = match mode {
        Mode::Surge => nodes::replace_node(env, cluster, &old, version).await?,
        Mode::RemoveFirst => {
            let new = ensure_replacement(env, cluster, &old, version).await?;
            nodes::remove_node(env, &old).await?;
            bring_up(env, cluster, &new).await?;
            new
        }
    };
    tracing::info!(cluster = %cluster.id, old = %old.name, new = %new.name, version, "node rolled");
    Ok(Some(new.id))
}

/// Rolls the nodes `olds` of one group within step `cx`: up to
/// `max_surge + max_unavailable` at once, at most `max_surge` surging.
pub async fn roll_group<P, S: meson_jobs::Step>(
    env: &Env,
    cx: &StepCtx<'_, P, S>,
    cluster: &Cluster,
    olds: &[NodeId],
    version: &str,
    max_surge: u32,
    max_unavailable: u32,
) -> StepResult<()> {
    let surge = Semaphore::new(max_surge as usize);
    let limit = (max_surge + max_unavailable).max(1) as usize;
    let items = olds.iter().map(|id| (id.to_string(), *id)).collect();
    let surge = &surge;
    cx.fan_out(items, limit, |old| async move {
        // Held until this node is done: at most `max_surge` extra nodes.
        let permit = surge.try_acquire().ok();
        let mode = if permit.is_some() {
            Mode::Surge
        } else {
            Mode::RemoveFirst
        };
        let out = roll_one(env, cluster, old, version, mode).await;
        drop(permit);
        out
    })
    .await?;
    Ok(())
}

/// The undo of a roll step: takes back every replacement of the cluster
/// that never came up (see the module documentation).
pub async fn undo_half_made(env: &Env, cluster: ClusterId, why: &str) -> StepResult<()> {
    for h in meson_db::cluster_upgrades::half_made_replacements(&env.pool, cluster).await? {
        let Some(node) = live(env, h.node).await? else {
            continue;
        };
        if h.old_live {
            tracing::info!(node = %node.name, "removing a replacement that never took over");
            nodes::remove_node(env, &node).await?;
        } else {
            nodes::fail_node(env, &node, why).await?;
        }
    }
    Ok(())
}
