//! Kubernetes nodes: the cluster's secrets, each node's cloud-init, where a
//! node goes, and bringing one up or down. Shared by the cluster workflows.

use crate::Env;
use crate::placement::{Offer, StepFailure, survey_reserved};
use crate::provision;
use meson_core::Code;
use meson_core::cluster::{API_PORT, Cluster, Node, NodeRole, NodeStatus};
use meson_core::kaas::NodeSpecs;
use meson_core::vm::{Vm, VmStatus};
use meson_core::volume::VolumeStatus;
use meson_core::{ActionId, ClusterId, NodeId, TargetId, TenantId};
use meson_jobs::{StepError, StepResult};
use meson_kaas::{ClusterBootstrap, ClusterSecrets, NodeBootstrap};
use serde::{Deserialize, Serialize};
use std::net::SocketAddrV4;

/// Associated data binding sealed secrets to their cluster.
fn kaas_error(e: meson_kaas::KaasError) -> StepError {
    StepError::internal(format!("cluster secrets: {e}"))
}

/// Makes the cluster's CAs, keys and token once; later calls keep them.
pub async fn ensure_secrets(env: &Env, cluster: &Cluster) -> StepResult<()> {
    if meson_db::clusters::secrets(&env.pool, cluster.id)
        .await?
        .is_some()
    {
        return Ok(());
    }
    let secrets = ClusterSecrets::generate(&cluster.name).map_err(kaas_error)?;
    let sealed = meson_kaas::sealed::seal_secrets(&env.config.secrets_key, cluster.id, &secrets)
        .map_err(kaas_error)?;
    // Two racing attempts: the first write wins and both use it.
    meson_db::clusters::set_secrets(&env.pool, cluster.id, &sealed, true).await?;
    Ok(())
}

/// The cluster's secrets, opened with the configured key.
pub async fn open_secrets(
    env: &Env,
    pool: &meson_db::PgPool,
    cluster: ClusterId,
) -> StepResult<ClusterSecrets> {
    let sealed = meson_db::clusters::secrets(pool, cluster)
        .await?
        .ok_or_else(|| StepError::internal("the cluster has no secrets yet"))?;
    meson_kaas::sealed::open_secrets(&env.config.secrets_key, cluster, &sealed).map_err(kaas_error)
}

/// The phone-home URL of a node, with its secret.
fn phone_home_url(env: &Env, cluster: ClusterId, node: NodeId, secret: &str) -> String {
    format!(
        "{}/v1/clusters/{cluster}/nodes/{node}/phone-home?token={secret}",
        env.config.public_url.trim_end_matches('/')
    )
}

/// The cloud-init files of a node: kubeadm user-data for its role, the
/// meta-data, and the network-config of its static address. A fresh
/// phone-home secret is made (and its hash stored) on every render: only
/// the ISO written last can phone home.
pub async fn cloudinit_files(
    env: &Env,
    cluster: &Cluster,
    node: &Node,
    vm: &Vm,
    init: bool,
) -> StepResult<Vec<(&'static str, String)>> {
    let secrets = open_secrets(env, &env.pool, cluster.id).await?;
    let endpoint = cluster
        .endpoint
        .ok_or_else(|| StepError::internal("the cluster has no endpoint"))?;
    let shared = ClusterBootstrap {
        name: cluster.name.clone(),
        id: cluster.id,
        kubernetes_version: node.kubernetes_version.parse().map_err(|e| {
            StepError::internal(format!("node version {}: {e}", node.kubernetes_version))
        })?,
        endpoint: SocketAddrV4::new(endpoint, API_PORT),
        pod_cidr: cluster.spec.pod_cidr,
        service_cidr: cluster.spec.service_cidr,
        cni: cluster.spec.cni,
        token_ttl: meson_kaas::bootstrap::DEFAULT_TOKEN_TTL,
        secrets: &secrets,
    };
    let pool = match node.pool {
        Some(p) => meson_db::clusters::pools(&env.pool, cluster.id)
            .await?
            .into_iter()
            .find(|x| x.id == p),
        None => None,
    };
    let role = match (node.role, init) {
        (NodeRole::ControlPlane, true) => meson_kaas::NodeRole::InitControlPlane,
        (NodeRole::ControlPlane, false) => meson_kaas::NodeRole::JoinControlPlane,
        (NodeRole::Worker, _) => meson_kaas::NodeRole::Worker,
    };
    let nics = provision::static_nics(env, vm).await?;
    let secret = random_secret();
    meson_db::clusters::set_phone_home_hash(
        &env.pool,
        node.id,
        &meson_kaas::sealed::phone_home_hash(&secret),
    )
    .await?;
    let bootstrap = NodeBootstrap {
        name: node.name.clone(),
        role,
        node_ip: nics.first().map(|n| n.address),
        labels: pool
            .as_ref()
            .map(meson_kaas::sealed::node_labels)
            .unwrap_or_default(),
        taints: pool.map(|p| p.spec.taints).unwrap_or_default(),
        ssh_authorized_keys: vm.spec.ssh_keys.clone(),
        phone_home_url: phone_home_url(env, cluster.id, node.id, &secret),
        provider_id: Some(format!("elemento://{}", vm.id)),
        replaces: meson_db::clusters::replaced_name(&env.pool, node.id).await?,
    };
    let user_data = meson_kaas::user_data(&shared, &bootstrap).map_err(kaas_error)?;
    let ci = meson_core::cloudinit::VmCloudInit {
        vm_id: vm.id,
        hostname: &node.name,
        ssh_keys: &vm.spec.ssh_keys,
        phone_home_url: None,
        static_nics: &nics,
    };
    let mut files = vec![("user-data", user_data), ("meta-data", ci.meta_data())];
    if let Some(nc) = ci.network_config() {
        files.push(("network-config", nc));
    }
    Ok(files)
}

fn random_secret() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Picks a host for a node among those in the cluster's region (none of
/// `exclude`: hosts that refused it): of the hosts that fit it, with the
/// capacity reserved by placements in flight, those holding the fewest
/// other nodes of the same group (control plane, or the same pool), the
/// cheapest of them; the first of that order that still fits under its
/// host lock ([`crate::placement::claim`]). The choice is made under a
/// per-cluster lock, so nodes placed at the same time (a create's
/// fan-out) see where the others went and spread too; when only one host
/// fits, the group shares it.
pub async fn place_node(
    env: &Env,
    cluster: &Cluster,
    node: &Node,
    vm: &Vm,
    exclude: &[TargetId],
) -> StepResult<()> {
    if vm.placement.is_some() {
        return Ok(());
    }
    let targets = region_targets(env, cluster, exclude).await?;
    let reserved = meson_db::reservations::pending(&env.pool, vm.id).await?;
    let s = survey_reserved(targets.clone(), &vm.spec, &reserved)
        .await
        .map_err(|e| e.step_error())?;
    let mut tx = meson_db::begin(&env.pool).await?;
    meson_db::node_health::lock_placement(&mut tx, cluster.id).await?;
    let used = meson_db::node_health::group_hosts(&mut tx, cluster.id, node.pool, node.id).await?;
    // Offers come cheapest first and the sort is stable: the fewest
    // siblings first, the cheapest of them first.
    let mut order: Vec<Offer> = s.offers().to_vec();
    order.sort_by_key(|o| used.iter().filter(|t| **t == o.placement.target_id).count());
    let Some(chosen) = crate::placement::claim(&mut tx, vm, &order, &targets, &reserved).await?
    else {
        return Err(crate::placement::all_taken(&vm.spec, &s).step_error());
    };
    meson_db::commit(tx).await?;
    tracing::info!(node = %node.name, host = %chosen.host, "placed node");
    Ok(())
}

/// Places the nodes of `nodes` not placed yet, one node group (the control
/// plane, or a pool) at a time, each with one decision for all its nodes:
/// one survey of the cluster's region, then, under the cluster's placement
/// lock, the group spread as [`place_node`] would place its nodes one by
/// one ([`crate::placement::claim_group`]), in one transaction. A node left
/// out (its hosts filled up meanwhile, or one did not answer) is left to
/// [`place_node`], which places it alone or says why it cannot be.
pub async fn place_nodes(env: &Env, cluster: &Cluster, nodes: &[Node]) -> StepResult<()> {
    let mut groups: Vec<(Option<meson_core::PoolId>, Vec<&Node>)> = Vec::new();
    for n in nodes {
        match groups.iter_mut().find(|(p, _)| *p == n.pool) {
            Some((_, members)) => members.push(n),
            None => groups.push((n.pool, vec![n])),
        }
    }
    for (pool, members) in groups {
        let ids: Vec<meson_core::VmId> = members.iter().map(|n| n.vm).collect();
        let vms: Vec<Vm> = meson_db::vms::get_many(&env.pool, &ids)
            .await?
            .into_iter()
            .filter(|v| v.placement.is_none())
            .collect();
        let Some(first) = vms.first() else {
            continue;
        };
        if vms.iter().any(|v| !v.spec.places_like(&first.spec)) {
            // Not one size after all (never from the API): one at a time.
            continue;
        }
        let targets = region_targets(env, cluster, &[]).await?;
        let s = crate::placement::survey(targets.clone(), &first.spec)
            .await
            .map_err(|e| e.step_error())?;
        let mut tx = meson_db::begin(&env.pool).await?;
        meson_db::node_health::lock_placement(&mut tx, cluster.id).await?;
        // The group's members not placed yet have no host: none counts.
        let used =
            meson_db::node_health::group_hosts(&mut tx, cluster.id, pool, members[0].id).await?;
        let placed =
            crate::placement::claim_group(&mut tx, &vms, s.offers(), &targets, &used).await?;
        meson_db::commit(tx).await?;
        tracing::info!(cluster = %cluster.id, group = ?pool, nodes = vms.len(),
            placed = placed.len(), "placed a node group");
    }
    Ok(())
}

/// The enabled targets (none of `exclude`) in the cluster's region: where
/// its nodes already are, else the cheapest region that fits the whole
/// cluster.
async fn region_targets(
    env: &Env,
    cluster: &Cluster,
    exclude: &[TargetId],
) -> StepResult<Vec<(meson_core::target::Target, atomos_driver::AtomosClient)>> {
    let region = cluster_region(env, cluster).await?;
    Ok(crate::placement::candidates(env, exclude)
        .await?
        .into_iter()
        .filter(|(t, _)| {
            region
                .as_ref()
                .is_none_or(|(p, r)| &t.provider == p && &t.region == r)
        })
        .collect())
}

/// The (provider, region) every node of the cluster lives in: where its
/// nodes already are, else the cheapest region that fits the whole cluster.
async fn cluster_region(env: &Env, cluster: &Cluster) -> StepResult<Option<(String, String)>> {
    let all = meson_db::clusters::nodes(&env.pool, cluster.id).await?;
    let vms =
        meson_db::vms::get_many(&env.pool, &all.iter().map(|n| n.vm).collect::<Vec<_>>()).await?;
    if let Some(p) = vms.iter().find_map(|v| v.placement.as_ref()) {
        return Ok(Some((p.provider.clone(), p.region.clone())));
    }
    let targets = meson_db::targets::list(&env.pool).await?;
    let s = crate::cluster_placement::survey_cluster(targets, &cluster.spec)
        .await
        .map_err(|e| StepError::fatal(e.code(), e.public_message()))?;
    Ok(s.offers
        .first()
        .map(|o| (o.provider.clone(), o.region.clone())))
}

/// How many of a cluster's nodes are brought up (or taken down) at once:
/// all of them, a cluster's every pool at its largest. A node in flight
/// mostly waits for its VM to boot; what AtomOS sees at once is bounded by
/// the driver (`concurrency` requests per target), and the boot polls of
/// one host share one listing per poll ([`crate::atomos::Atomos::vms_since`]),
/// so a wider fan-out asks no more of a host at a time and lets a cluster
/// wait for about one boot rather than one per wave: at 128, a cluster of
/// three pools of 100 workers waited for three boots of its workers.
pub(crate) const NODE_CONCURRENCY: usize =
    meson_core::kaas::MAX_POOLS * meson_core::kaas::MAX_NODES_PER_POOL as usize + 3;

/// Brings a node's VM up: placed, on the cluster network, booted with its
/// kubeadm cloud-init, running. The node is then `not_ready` until it
/// phones home.
pub async fn provision_node(
    env: &Env,
    cluster: &Cluster,
    node: &Node,
    init: bool,
) -> StepResult<()> {
    let vm = meson_db::vms::get_any(&env.pool, node.vm).await?;
    place_node(env, cluster, node, &vm, &[]).await?;
    let vm = meson_db::vms::get_any(&env.pool, node.vm).await?;
    // Its networks are made on the host when it registers.
    provision::ensure_boot_volume(env, &vm).await?;
    // A node already registered keeps the ISO it booted with (re-rendering
    // would change its phone-home secret under it).
    let c = provision::client(env, &vm).await?;
    let target = vm
        .placement
        .as_ref()
        .ok_or_else(|| StepError::internal("the node's VM has no placement"))?
        .target_id;
    if env
        .atomos
        .vm_by_name(target, &c, &vm.atomos_name)
        .await
        .map_err(crate::atomos::step_error)?
        .is_none()
    {
        let files = cloudinit_files(env, cluster, node, &vm, init).await?;
        provision::ensure_cloudinit_volume(env, &vm, files).await?;
    }
    provision::register_placed(
        env,
        vm.id,
        &NodeVm {
            cluster,
            node,
            init,
        },
    )
    .await?;
    let vm = meson_db::vms::get_any(&env.pool, node.vm).await?;
    provision::wait_running(env, &vm).await?;
    meson_db::clusters::node_booted(&env.pool, node.id).await?;
    Ok(())
}

/// Takes a node's VM off AtomOS (rows stay).
pub async fn teardown_node(env: &Env, node: &Node) -> StepResult<()> {
    let vm = meson_db::vms::get_including_deleted(&env.pool, node.vm).await?;
    provision::teardown(env, &vm).await
}

/// Ends a node that will not come up (its workflow unwinds): taken off
/// AtomOS, unplaced (its reservation released), its VM and volumes `error`,
/// the node `creation_error` with `why` (or the reason it already had for
/// being `creation_error`, which says more). The rows stay, final, until
/// the node (or its cluster) is deleted or replaced.
pub async fn fail_node(env: &Env, node: &Node, why: &str) -> StepResult<()> {
    let why = match (&node.status, &node.error_message) {
        (NodeStatus::CreationError, Some(own)) => own.as_str(),
        _ => why,
    };
    teardown_node(env, node).await?;
    provision::unplace(env, node.vm).await?;
    meson_db::vms::set_runtime(&env.pool, node.vm, VmStatus::Error, None, None).await?;
    meson_db::volumes::set_status_for_vm(&env.pool, node.vm, VolumeStatus::Error).await?;
    meson_db::clusters::set_node_status(&env.pool, node.id, NodeStatus::CreationError, Some(why))
        .await?;
    Ok(())
}

/// The node sizes of a cluster's group, for messages.
pub fn describe(specs: &NodeSpecs) -> String {
    format!(
        "{} vCPU, {} MiB, {} GB",
        specs.cpu, specs.ram_mib, specs.storage_gb
    )
}

/// Waits (bounded by the node-ready timeout) until a node phoned home.
pub async fn wait_phoned_home(env: &Env, node: NodeId) -> StepResult<()> {
    let deadline = tokio::time::Instant::now() + env.config.node_ready_timeout;
    loop {
        let n = meson_db::clusters::node(&env.pool, node).await?;
        if n.phoned_home.is_some() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            meson_db::clusters::set_node_status(
                &env.pool,
                node,
                NodeStatus::CreationError,
                Some("the node did not report its kubelet up in time"),
            )
            .await?;
            return Err(StepError::fatal(
                Code::Timeout,
                format!(
                    "node {} did not come up within {} s",
                    n.name,
                    env.config.node_ready_timeout.as_secs()
                ),
            ));
        }
        tokio::time::sleep(env.config.poll_interval).await;
    }
}

/// Takes a node off AtomOS and forgets it: its row and its VM's are marked
/// deleted and its address is free again.
pub async fn remove_node(env: &Env, node: &Node) -> StepResult<()> {
    teardown_node(env, node).await?;
    let mut tx = meson_db::begin(&env.pool).await?;
    meson_db::clusters::mark_node_deleted(&mut *tx, node.id).await?;
    meson_db::vms::mark_deleted(&mut tx, node.vm).await?;
    meson_db::commit(tx).await?;
    Ok(())
}

/// Replaces `old` with a new node of the same role and pool at `version`
/// (surge: the new one is up and has phoned home before the old one goes).
/// Idempotent: a retry finds the replacement it made before. Returns the
/// new node.
pub async fn replace_node(
    env: &Env,
    cluster: &Cluster,
    old: &Node,
    version: &str,
) -> StepResult<Node> {
    let new = match meson_db::clusters::replacement_of(&env.pool, old.id).await? {
        Some(n) => n,
        None => {
            let pools = meson_db::clusters::pools(&env.pool, cluster.id).await?;
            let pool = old.pool.and_then(|p| pools.iter().find(|x| x.id == p));
            let specs = match pool {
                Some(p) => p.spec.specs,
                None => cluster.spec.control_plane.specs,
            };
            let mut tx = meson_db::begin(&env.pool).await?;
            let n = meson_db::clusters::add_node_as(
                &mut tx,
                cluster,
                pool,
                &specs,
                version,
                Some(old.id),
            )
            .await?;
            meson_db::commit(tx).await?;
            n
        }
    };
    provision_node(env, cluster, &new, false).await?;
    wait_phoned_home(env, new.id).await?;
    remove_node(env, old).await?;
    Ok(meson_db::clusters::node(&env.pool, new.id).await?)
}

/// A cluster's node as the owner of its VM: placed among its group's
/// hosts, with the kubeadm cloud-init of its role.
pub struct NodeVm<'a> {
    pub cluster: &'a Cluster,
    pub node: &'a Node,
    /// Whether it initialises the cluster (the first control-plane node).
    pub init: bool,
}

impl provision::Owner for NodeVm<'_> {
    async fn place(&self, env: &Env, vm: &Vm, exclude: &[TargetId]) -> StepResult<()> {
        place_node(env, self.cluster, self.node, vm, exclude).await
    }

    async fn cloudinit_files(&self, env: &Env, vm: &Vm) -> StepResult<Vec<(&'static str, String)>> {
        cloudinit_files(env, self.cluster, self.node, vm, self.init).await
    }
}

/// Parameters of every node workflow.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeParams {
    pub cluster_id: ClusterId,
    pub node_id: NodeId,
}

/// Enqueues a node workflow in the caller's transaction, under the
/// cluster's concurrency key.
pub async fn enqueue_for_node<W: meson_jobs::Workflow<Params = NodeParams>>(
    tx: &mut meson_db::Tx<'_>,
    params: &NodeParams,
    action: ActionId,
    tenant: &TenantId,
    max_attempts: i32,
) -> Result<meson_jobs::Enqueued, meson_core::Error> {
    meson_jobs::enqueue::<W>(
        tx,
        params,
        meson_jobs::EnqueueOpts {
            action: Some(action),
            tenant: Some(tenant.to_string()),
            concurrency_key: Some(crate::keys::cluster(params.cluster_id)),
            max_attempts,
            ..meson_jobs::EnqueueOpts::default()
        },
    )
    .await
}

/// The live node, which must belong to the cluster.
pub(crate) async fn live_node(env: &Env, params: &NodeParams) -> StepResult<Node> {
    let node = meson_db::clusters::node(&env.pool, params.node_id).await?;
    if node.cluster != params.cluster_id {
        return Err(StepError::fatal(
            Code::NotFound,
            format!("node {} is not in this cluster", node.id),
        ));
    }
    Ok(node)
}
