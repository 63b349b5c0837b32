//! Node auto-repair, after Cluster API's MachineHealthCheck. On every
//! reconciler pass each running cluster's nodes are checked against what
//! AtomOS reports; a node is unhealthy when
//!
//! - its VM crashed: AtomOS reports it off although meson did not stop it
//!   (meson still records it running);
//! - its VM vanished: its host answers, and has no VM of that name;
//! - it never phoned home (kubelet up) within the startup timeout, counted
//!   from when its VM started running.
//!
//! An unhealthy node gets an `error_message` saying what is wrong and is
//! replaced by a `repair_node` action (the replace workflow, surge one).
//! A node group (the control plane, or one pool) with more than
//! `max_unhealthy_percent` of its nodes unhealthy at once is left alone:
//! so many failures at once point at a cause a replacement will not fix
//! (a host or network outage), and replacing would only add churn. The
//! cluster's `error_message` says so until the group is healthy enough.
//!
//! A cluster every node of which is unhealthy is `degraded` (not
//! `running`), with a message saying so, until its nodes recover: it is
//! then `running` again. Node replaces and reboots, pool changes and
//! deletes are accepted while degraded; upgrades and credential rotations
//! (which roll every node) wait for `running`.
//!
//! Nothing is decided on uncertainty: a host that does not answer, a VM
//! meson is starting or stopping, or a cluster with an action running is
//! skipped. One repair per cluster at a time (the cluster's concurrency
//! key); a tick racing another worker's tick finds the key taken, or a node
//! already replaced, and does nothing.

use crate::Env;
use crate::node_replace::enqueue_replace;
use crate::nodes::NodeParams;
use atomos_driver::VmState;
use chrono::{DateTime, Utc};
use meson_core::action::{Action, ActionStatus, Command, ResourceType};
use meson_core::cluster::{Cluster, ClusterStatus, Node, NodePool};
use meson_core::vm::{Vm, VmStatus};
use meson_core::{ActionId, ClusterId, NodeId, PoolId, TargetId};
use meson_jobs::Enqueued;
use std::collections::HashMap;
use std::time::Duration;

/// Every node message auto-repair writes starts with this (and only those
/// are cleared when the node is healthy again).
pub const NODE_MESSAGE_PREFIX: &str = "unhealthy: ";
/// Every cluster message auto-repair writes starts with this.
pub const CLUSTER_MESSAGE_PREFIX: &str = "auto-repair paused: ";

/// Auto-repair's settings.
#[derive(Clone, Debug)]
pub struct RepairConfig {
    /// How long a node may run without phoning home
    /// (`MESON_NODE_STARTUP_TIMEOUT_S`, default 600 s).
    pub node_startup_timeout: Duration,
    /// The largest share of a node group that may be unhealthy at once for
    /// auto-repair to act on it (`MESON_REPAIR_MAX_UNHEALTHY_PERCENT`,
    /// default 40).
    pub max_unhealthy_percent: u8,
    /// How long after a failed repair a node is tried again.
    pub retry_after: Duration,
}

impl Default for RepairConfig {
    fn default() -> Self {
        RepairConfig {
            node_startup_timeout: Duration::from_secs(600),
            max_unhealthy_percent: 40,
            retry_after: Duration::from_secs(300),
        }
    }
}

/// What is wrong with a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    Crashed,
    Vanished { host: String },
    NeverPhonedHome { running_for: Duration },
}

impl Problem {
    /// The node's `error_message`.
    pub fn message(&self, cfg: &RepairConfig) -> String {
        let what = match self {
            Problem::Crashed => {
                "its VM crashed: AtomOS reports it off, and meson did not stop it".to_owned()
            }
            Problem::Vanished { host } => {
                format!("its VM vanished: host {host} has no VM of its name")
            }
            Problem::NeverPhonedHome { running_for } => format!(
                "its kubelet has not reported up {} s after its VM started (the startup \
                 timeout is {} s)",
                running_for.as_secs(),
                cfg.node_startup_timeout.as_secs()
            ),
        };
        format!("{NODE_MESSAGE_PREFIX}{what}")
    }
}

/// What AtomOS says about a node's VM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Its host did not answer: nothing is known.
    Unknown,
    /// Its host answered without it.
    Missing,
    State(VmState),
}

/// One node as observed.
#[derive(Clone, Debug)]
pub struct Observed {
    pub node: Node,
    /// meson's record of the node's VM.
    pub vm_status: VmStatus,
    pub host: Option<String>,
    pub seen: Seen,
    pub running_since: Option<DateTime<Utc>>,
}

/// The problem of a node, if it has one. Only a VM meson records as
/// running (placed, booted, not being started or stopped by meson) is
/// judged.
pub fn diagnose(o: &Observed, now: DateTime<Utc>, cfg: &RepairConfig) -> Option<Problem> {
    if o.vm_status != VmStatus::Running {
        return None;
    }
    match &o.seen {
        Seen::Unknown => None,
        Seen::Missing => Some(Problem::Vanished {
            host: o.host.clone().unwrap_or_default(),
        }),
        Seen::State(VmState::Off) => Some(Problem::Crashed),
        Seen::State(VmState::Running) if o.node.phoned_home.is_none() => {
            let running_for = (now - o.running_since?).to_std().unwrap_or_default();
            (running_for >= cfg.node_startup_timeout)
                .then_some(Problem::NeverPhonedHome { running_for })
        }
        Seen::State(_) => None,
    }
}

/// A node group whose share of unhealthy nodes is over the limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub group: Option<PoolId>,
    pub unhealthy: usize,
    pub total: usize,
}

/// The node groups (control plane: `None`, else the pool) with more than
/// `max_percent` of their nodes unhealthy.
pub fn blocked_groups(nodes: &[Node], unhealthy: &[NodeId], max_percent: u8) -> Vec<Blocked> {
    let mut groups: Vec<Blocked> = Vec::new();
    for n in nodes {
        let i = match groups.iter().position(|g| g.group == n.pool) {
            Some(i) => i,
            None => {
                groups.push(Blocked {
                    group: n.pool,
                    unhealthy: 0,
                    total: 0,
                });
                groups.len() - 1
            }
        };
        groups[i].total += 1;
        if unhealthy.contains(&n.id) {
            groups[i].unhealthy += 1;
        }
    }
    groups.retain(|g| g.unhealthy * 100 > usize::from(max_percent) * g.total);
    groups
}

/// The cluster's message for its blocked groups.
fn blocked_message(pools: &[NodePool], blocked: &[Blocked], max_percent: u8) -> String {
    let parts: Vec<String> = blocked
        .iter()
        .map(|b| {
            let who = match b.group {
                None => "the control plane".to_owned(),
                Some(p) => match pools.iter().find(|x| x.id == p) {
                    Some(pool) => format!("pool '{}'", pool.spec.name),
                    None => format!("pool {p}"),
                },
            };
            format!("{} of {} nodes of {who}", b.unhealthy, b.total)
        })
        .collect();
    format!(
        "{CLUSTER_MESSAGE_PREFIX}{} are unhealthy, more than the {max_percent}% that may be \
         repaired at once; they are left as they are until enough of them recover",
        parts.join(" and ")
    )
}

/// Every cluster message saying it is degraded starts with this.
pub const DEGRADED_MESSAGE_PREFIX: &str = "degraded: ";

/// The cluster's message when every one of its nodes is unhealthy (it is
/// then `degraded`, not `running`), else `None`.
fn degraded_message(
    nodes: &[Node],
    problems: &[(Node, Problem)],
    cfg: &RepairConfig,
) -> Option<String> {
    if nodes.is_empty() || problems.len() < nodes.len() {
        return None;
    }
    let first = problems
        .first()
        .map(|(n, p)| format!("{}: {}", n.name, p.message(cfg)))
        .unwrap_or_default();
    Some(format!(
        "{DEGRADED_MESSAGE_PREFIX}all {} nodes are unhealthy ({first}{}); replace them or delete the cluster",
        nodes.len(),
        if problems.len() > 1 { ", ..." } else { "" }
    ))
}

/// One pass over every running cluster: marks unhealthy nodes, and starts
/// at most one repair per cluster. A cluster that cannot be checked is
/// logged and skipped.
pub async fn tick(env: &Env) -> meson_core::Result<()> {
    for id in meson_db::node_health::running_clusters(&env.pool).await? {
        if let Err(e) = check_cluster(env, id).await {
            tracing::warn!(cluster = %id, error = %e, "auto-repair could not check a cluster");
        }
    }
    Ok(())
}

/// Every host's VMs, listed once per cluster check, after its nodes were
/// read: a VM made since that read belongs to a node not judged yet (its
/// VM not recorded running), so it cannot be taken for a vanished one,
/// which a listing kept across clusters could. `None` when the host did not
/// answer.
#[derive(Default)]
struct HostCache(HashMap<TargetId, Option<Vec<atomos_driver::Vm>>>);

impl HostCache {
    async fn vms(&mut self, env: &Env, target: TargetId) -> Option<&[atomos_driver::Vm]> {
        if let std::collections::hash_map::Entry::Vacant(slot) = self.0.entry(target) {
            let listed = match env.atomos.client(target).await {
                Ok(c) => match c.vms().await {
                    Ok(v) => Some(v),
                    Err(e) => {
                        tracing::debug!(%target, error = %e, "auto-repair: host did not answer");
                        None
                    }
                },
                Err(_) => None,
            };
            slot.insert(listed);
        }
        self.0.get(&target).and_then(|v| v.as_deref())
    }
}

/// What one cluster's check did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not running, or an action runs on it: not looked at.
    Skipped,
    Healthy,
    /// Unhealthy nodes, none repaired now (their groups are over the limit,
    /// they failed a repair recently, or another action took the cluster).
    Waiting,
    /// A `repair_node` action started.
    Repairing {
        node: NodeId,
        action: ActionId,
    },
}

/// Checks one cluster's nodes and starts at most one repair.
pub async fn check_cluster(env: &Env, id: ClusterId) -> meson_core::Result<Outcome> {
    let cfg = &env.config.repair;
    // A running action owns its nodes' state (a replace's new node booting,
    // a reboot): judge the cluster when it is done.
    if meson_db::node_health::key_held(&env.pool, &crate::keys::cluster(id)).await? {
        return Ok(Outcome::Skipped);
    }
    let cluster = meson_db::clusters::get_any(&env.pool, id).await?;
    if !matches!(
        cluster.status,
        ClusterStatus::Running | ClusterStatus::Degraded
    ) {
        return Ok(Outcome::Skipped);
    }
    let nodes = meson_db::clusters::nodes(&env.pool, id).await?;
    let vms =
        meson_db::vms::get_many(&env.pool, &nodes.iter().map(|n| n.vm).collect::<Vec<_>>()).await?;
    let since: HashMap<NodeId, Option<DateTime<Utc>>> =
        meson_db::node_health::running_since(&env.pool, id)
            .await?
            .into_iter()
            .collect();
    let now = Utc::now();
    let mut hosts = HostCache::default();
    let mut problems: Vec<(Node, Problem)> = Vec::new();
    for node in &nodes {
        let Some(vm) = vms.iter().find(|v| v.id == node.vm) else {
            continue;
        };
        let o = observe(
            env,
            &mut hosts,
            node,
            vm,
            since.get(&node.id).copied().flatten(),
        )
        .await;
        match diagnose(&o, now, cfg) {
            Some(p) => {
                meson_db::node_health::mark_unhealthy(&env.pool, node.id, &p.message(cfg)).await?;
                problems.push((node.clone(), p));
            }
            None if o.seen != Seen::Unknown => {
                meson_db::node_health::clear_unhealthy(&env.pool, node.id, NODE_MESSAGE_PREFIX)
                    .await?;
            }
            None => {}
        }
    }
    let unhealthy: Vec<NodeId> = problems.iter().map(|(n, _)| n.id).collect();
    let blocked = blocked_groups(&nodes, &unhealthy, cfg.max_unhealthy_percent);
    if let Some(why) = degraded_message(&nodes, &problems, cfg) {
        if meson_db::node_health::set_degraded(&env.pool, id, Some(&why)).await? {
            tracing::warn!(cluster = %id, "every node of the cluster is unhealthy: degraded");
        }
    } else {
        if meson_db::node_health::set_degraded(&env.pool, id, None).await? {
            tracing::info!(cluster = %id, "the cluster's nodes recovered: running again");
        }
        let message = if blocked.is_empty() {
            None
        } else {
            let pools = meson_db::clusters::pools(&env.pool, id).await?;
            Some(blocked_message(&pools, &blocked, cfg.max_unhealthy_percent))
        };
        meson_db::node_health::set_cluster_message(
            &env.pool,
            id,
            CLUSTER_MESSAGE_PREFIX,
            message.as_deref(),
        )
        .await?;
    }
    if problems.is_empty() {
        return Ok(Outcome::Healthy);
    }
    for (node, problem) in &problems {
        if blocked.iter().any(|b| b.group == node.pool) {
            continue;
        }
        let failed =
            meson_db::node_health::last_failure(&env.pool, node.id, Command::RepairNode.as_str())
                .await?;
        if failed.is_some_and(|at| (now - at).to_std().unwrap_or_default() < cfg.retry_after) {
            continue;
        }
        return Ok(match start_repair(env, &cluster, node).await? {
            Some(action) => {
                tracing::info!(cluster = %id, node = %node.name, ?problem, %action,
                    "auto-repair: replacing an unhealthy node");
                Outcome::Repairing {
                    node: node.id,
                    action,
                }
            }
            None => Outcome::Waiting,
        });
    }
    Ok(Outcome::Waiting)
}

async fn observe(
    env: &Env,
    hosts: &mut HostCache,
    node: &Node,
    vm: &Vm,
    running_since: Option<DateTime<Utc>>,
) -> Observed {
    let seen = match &vm.placement {
        None => Seen::Unknown,
        Some(p) => match hosts.vms(env, p.target_id).await {
            None => Seen::Unknown,
            Some(list) => list
                .iter()
                .find(|v| v.name == vm.atomos_name)
                .map_or(Seen::Missing, |v| Seen::State(v.state.clone())),
        },
    };
    Observed {
        node: node.clone(),
        vm_status: if vm.placement.is_some() {
            vm.status
        } else {
            VmStatus::Initializing
        },
        host: vm.placement.as_ref().map(|p| p.host.clone()),
        seen,
        running_since,
    }
}

/// Starts a `repair_node` action (the cluster's tenant's) replacing `node`;
/// `None` when another action holds the cluster.
async fn start_repair(
    env: &Env,
    cluster: &Cluster,
    node: &Node,
) -> meson_core::Result<Option<ActionId>> {
    let action = Action {
        id: ActionId::new(),
        tenant: cluster.tenant.clone(),
        command: Command::RepairNode.as_str().to_owned(),
        status: ActionStatus::Running,
        progress: 0,
        started: Utc::now(),
        finished: None,
        resources: vec![
            (ResourceType::Cluster, cluster.id.0),
            (ResourceType::Node, node.id.0),
        ],
        error: None,
    };
    let params = NodeParams {
        cluster_id: cluster.id,
        node_id: node.id,
    };
    let mut tx = meson_db::begin(&env.pool).await?;
    meson_db::actions::insert(&mut tx, &action).await?;
    match enqueue_replace(&mut tx, &params, action.id, &cluster.tenant).await? {
        // Dropping the transaction takes the action back.
        Enqueued::Locked(_) => Ok(None),
        Enqueued::Job(_) => {
            meson_db::commit(tx).await?;
            Ok(Some(action.id))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meson_core::cluster::{NodeRole, NodeStatus};

    fn node(pool: Option<PoolId>, phoned_home: bool) -> Node {
        Node {
            id: NodeId::new(),
            cluster: ClusterId::new(),
            pool,
            role: if pool.is_some() {
                NodeRole::Worker
            } else {
                NodeRole::ControlPlane
            },
            vm: meson_core::VmId::new(),
            name: "c-x".into(),
            status: NodeStatus::Ready,
            error_message: None,
            kubernetes_version: "1.29.2".into(),
            phoned_home: phoned_home.then(Utc::now),
            created: Utc::now(),
        }
    }

    fn observed(seen: Seen, vm_status: VmStatus, phoned_home: bool, ran_s: i64) -> Observed {
        Observed {
            node: node(None, phoned_home),
            vm_status,
            host: Some("h-1".into()),
            seen,
            running_since: Some(Utc::now() - chrono::Duration::seconds(ran_s)),
        }
    }

    #[test]
    fn crashed_vanished_and_silent_nodes_are_unhealthy_nothing_else() {
        let cfg = RepairConfig::default();
        let now = Utc::now();
        let d = |o: Observed| diagnose(&o, now, &cfg);
        assert_eq!(
            d(observed(
                Seen::State(VmState::Off),
                VmStatus::Running,
                true,
                10
            )),
            Some(Problem::Crashed)
        );
        assert_eq!(
            d(observed(Seen::Missing, VmStatus::Running, true, 10)),
            Some(Problem::Vanished { host: "h-1".into() })
        );
        assert!(matches!(
            d(observed(
                Seen::State(VmState::Running),
                VmStatus::Running,
                false,
                601
            )),
            Some(Problem::NeverPhonedHome { .. })
        ));
        // Within the startup timeout, phoned home, booting, unknown, or a
        // VM meson itself stopped or is (re)starting: left alone.
        for o in [
            observed(Seen::State(VmState::Running), VmStatus::Running, false, 30),
            observed(Seen::State(VmState::Running), VmStatus::Running, true, 6000),
            observed(
                Seen::State(VmState::Starting),
                VmStatus::Running,
                false,
                6000,
            ),
            observed(Seen::Unknown, VmStatus::Running, true, 10),
            observed(Seen::State(VmState::Off), VmStatus::Off, true, 10),
            observed(Seen::State(VmState::Off), VmStatus::Starting, true, 10),
            observed(Seen::Missing, VmStatus::Initializing, false, 0),
        ] {
            assert_eq!(diagnose(&o, now, &cfg), None, "{o:?}");
        }
        let m = Problem::Crashed.message(&cfg);
        assert!(m.starts_with(NODE_MESSAGE_PREFIX), "{m}");
    }

    #[test]
    fn a_group_over_the_share_is_blocked_per_group() {
        let pool = PoolId::new();
        let nodes: Vec<Node> = (0..3)
            .map(|_| node(None, true))
            .chain((0..5).map(|_| node(Some(pool), true)))
            .collect();
        // One of three control-plane nodes (33%) and two of five workers (40%).
        let bad = [nodes[0].id, nodes[3].id, nodes[4].id];
        assert!(blocked_groups(&nodes, &bad, 40).is_empty());
        // Three of five workers (60%) block the pool, not the control plane.
        let bad = [nodes[0].id, nodes[3].id, nodes[4].id, nodes[5].id];
        assert_eq!(
            blocked_groups(&nodes, &bad, 40),
            [Blocked {
                group: Some(pool),
                unhealthy: 3,
                total: 5
            }]
        );
        // A one-node group is over any share below 100%.
        assert_eq!(blocked_groups(&nodes[..1], &[nodes[0].id], 40).len(), 1);
        assert!(blocked_groups(&nodes[..1], &[nodes[0].id], 100).is_empty());
    }
}
