//! Kubernetes clusters, their node pools and nodes.

use crate::{DbResult, ListFilter, Tx, corrupt};
use chrono::{DateTime, Utc};
use meson_core::cluster::{Cluster, ClusterStatus, Node, NodePool, NodeRole, NodeStatus};
use meson_core::kaas::{KaasSpec, PoolSpec};
use meson_core::labels::Labels;
use meson_core::{ClusterId, Error, NetworkId, NodeId, PoolId, TenantId, VmId};
use serde_json::Value;
use sqlx::PgPool;
use std::net::Ipv4Addr;
use uuid::Uuid;

#[derive(sqlx::FromRow)]
pub struct ClusterRow {
    id: Uuid,
    tenant_id: String,
    name: String,
    status: String,
    labels: Value,
    spec: Value,
    kubernetes_version: String,
    network_id: Option<Uuid>,
    endpoint: Option<String>,
    error_message: Option<String>,
    created_at: DateTime<Utc>,
}

impl TryFrom<ClusterRow> for Cluster {
    type Error = Error;
    fn try_from(r: ClusterRow) -> Result<Self, Error> {
        Ok(Cluster {
            id: ClusterId(r.id),
            tenant: TenantId(r.tenant_id),
            name: r.name,
            status: ClusterStatus::parse(&r.status)
                .ok_or_else(|| corrupt("cluster status", &r.status))?,
            labels: serde_json::from_value::<Labels>(r.labels)
                .map_err(|e| Error::internal_from("decoding cluster labels", e))?,
            spec: serde_json::from_value::<KaasSpec>(r.spec)
                .map_err(|e| Error::internal_from("decoding cluster spec", e))?,
            kubernetes_version: r.kubernetes_version,
            network: NetworkId(
                r.network_id
                    .ok_or_else(|| corrupt("cluster network", "null"))?,
            ),
            endpoint: r
                .endpoint
                .as_deref()
                .map(|s| s.parse::<Ipv4Addr>().map_err(|_| corrupt("endpoint", s)))
                .transpose()?,
            error_message: r.error_message,
            created: r.created_at,
        })
    }
}

fn json<T: serde::Serialize>(what: &'static str, v: &T) -> Result<Value, Error> {
    serde_json::to_value(v).map_err(|e| Error::internal_from(what, e))
}

/// Writes a new cluster (its network must be written first, in the same
/// transaction, and pointed at it with [`crate::networks`]).
pub async fn insert(tx: &mut Tx<'_>, c: &Cluster) -> Result<(), Error> {
    let res = sqlx::query!(
        r#"insert into clusters (id, tenant_id, name, status, labels, spec, kubernetes_version,
                                 update_policy, endpoint, created_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9::text::inet, $10)"#,
        c.id.0,
        c.tenant.as_str(),
        c.name,
        c.status.as_str(),
        json("labels", &c.labels)?,
        json("spec", &c.spec)?,
        c.kubernetes_version,
        c.spec.update_policy.as_str(),
        c.endpoint.map(|ip| ip.to_string()),
        c.created,
    )
    .execute(&mut **tx)
    .await;
    crate::unique_violation(res, "clusters_tenant_name", "cluster", "req.name")?
        .map(|_| ())
        .ctx("inserting a cluster")
}

/// A tenant's live cluster.
pub async fn get(
    db: impl sqlx::PgExecutor<'_>,
    tenant: &TenantId,
    id: ClusterId,
) -> Result<Cluster, Error> {
    get_with(db, Some(tenant), id, false).await
}

/// Any tenant's live cluster (for workers).
pub async fn get_any(db: impl sqlx::PgExecutor<'_>, id: ClusterId) -> Result<Cluster, Error> {
    get_with(db, None, id, false).await
}

/// Any tenant's cluster even if it was deleted: a delete workflow resumed
/// after its last step must still find what it deleted.
pub async fn get_including_deleted(
    db: impl sqlx::PgExecutor<'_>,
    id: ClusterId,
) -> Result<Cluster, Error> {
    get_with(db, None, id, true).await
}

/// A cluster of `tenant` (None: any tenant's), deleted ones too when
/// `include_deleted`.
async fn get_with(
    db: impl sqlx::PgExecutor<'_>,
    tenant: Option<&TenantId>,
    id: ClusterId,
    include_deleted: bool,
) -> Result<Cluster, Error> {
    sqlx::query_as!(
        ClusterRow,
        r#"select c.id, c.tenant_id, c.name, c.status, c.labels, c.spec, c.kubernetes_version,
                  n.id as "network_id?", host(c.endpoint) as "endpoint?", c.error_message,
                  c.created_at
           from clusters c left join networks n on n.cluster_id = c.id
           where c.id = $1 and ($2::text is null or c.tenant_id = $2)
             and ($3 or c.deleted_at is null)"#,
        id.0,
        tenant.map(TenantId::as_str),
        include_deleted,
    )
    .fetch_optional(db)
    .await
    .ctx("fetching a cluster")?
    .ok_or_else(|| Error::not_found("cluster", id))?
    .try_into()
}

/// What a cluster list draws from.
impl crate::Listable for Cluster {
    type Row = ClusterRow;
    type Filter = ListFilter;
    const SOURCE: crate::Source = crate::Source {
        table: "clusters",
        only: "",
        columns: "c.id, c.tenant_id, c.name, c.status, c.labels, c.spec, c.kubernetes_version, \
              n.id as network_id, host(c.endpoint) as endpoint, c.error_message, c.created_at",
        joins: "join clusters c on c.id = page.id left join networks n on n.cluster_id = c.id",
        usage: Some("clusters"),
        listing: "listing clusters",
        counting: "counting clusters",
    };
}

/// Replaces a cluster's labels and/or update policy.
pub async fn update(
    pool: &PgPool,
    tenant: &TenantId,
    id: ClusterId,
    labels: Option<&Labels>,
    spec: Option<&KaasSpec>,
) -> Result<(), Error> {
    let labels = labels.map(|l| json("labels", l)).transpose()?;
    let policy = spec.map(|s| s.update_policy.as_str());
    let spec = spec.map(|s| json("spec", s)).transpose()?;
    let r = sqlx::query!(
        r#"update clusters set labels = coalesce($3, labels), spec = coalesce($4, spec),
                               update_policy = coalesce($5, update_policy)
           where id = $1 and tenant_id = $2 and deleted_at is null"#,
        id.0,
        tenant.as_str(),
        labels,
        spec,
        policy,
    )
    .execute(pool)
    .await
    .ctx("updating a cluster")?;
    if r.rows_affected() == 0 {
        return Err(Error::not_found("cluster", id));
    }
    Ok(())
}

/// Sets the status; `error_message` replaces the current one (None clears it).
pub async fn set_status(
    db: impl sqlx::PgExecutor<'_>,
    id: ClusterId,
    status: ClusterStatus,
    error_message: Option<&str>,
) -> Result<(), Error> {
    sqlx::query!(
        "update clusters set status = $2, error_message = $3 where id = $1",
        id.0,
        status.as_str(),
        error_message,
    )
    .execute(db)
    .await
    .ctx("updating cluster status")?;
    Ok(())
}

pub async fn set_version(
    db: impl sqlx::PgExecutor<'_>,
    id: ClusterId,
    version: &str,
) -> Result<(), Error> {
    sqlx::query!(
        "update clusters set kubernetes_version = $2 where id = $1",
        id.0,
        version
    )
    .execute(db)
    .await
    .ctx("updating cluster version")?;
    Ok(())
}

/// The sealed secrets, if generated yet.
pub async fn secrets(pool: &PgPool, id: ClusterId) -> Result<Option<Vec<u8>>, Error> {
    sqlx::query_scalar!("select secrets from clusters where id = $1", id.0)
        .fetch_optional(pool)
        .await
        .ctx("fetching cluster secrets")?
        .ok_or_else(|| Error::not_found("cluster", id))
}

/// Stores sealed secrets unless some are there already (`only_if_absent`);
/// returns whether they were written.
pub async fn set_secrets(
    pool: &PgPool,
    id: ClusterId,
    sealed: &[u8],
    only_if_absent: bool,
) -> Result<bool, Error> {
    let r = sqlx::query!(
        "update clusters set secrets = $2 where id = $1 and (not $3 or secrets is null)",
        id.0,
        sealed,
        only_if_absent,
    )
    .execute(pool)
    .await
    .ctx("storing cluster secrets")?;
    Ok(r.rows_affected() == 1)
}

/// Marks the cluster deleted (the row stays for the record; its secrets go).
pub async fn mark_deleted(db: impl sqlx::PgExecutor<'_>, id: ClusterId) -> Result<(), Error> {
    sqlx::query!(
        "update clusters set deleted_at = now(), status = 'deleting', secrets = null
         where id = $1 and deleted_at is null",
        id.0
    )
    .execute(db)
    .await
    .ctx("deleting a cluster")?;
    Ok(())
}

// ---- Node pools. ----

struct PoolRow {
    id: Uuid,
    cluster_id: Uuid,
    spec: Value,
    autoscale: bool,
    min_nodes: i32,
    max_nodes: i32,
    desired_nodes: i32,
    created_at: DateTime<Utc>,
}

impl TryFrom<PoolRow> for NodePool {
    type Error = Error;
    fn try_from(r: PoolRow) -> Result<Self, Error> {
        let mut spec = serde_json::from_value::<PoolSpec>(r.spec)
            .map_err(|e| Error::internal_from("decoding pool spec", e))?;
        // The columns are the truth for what PATCH changes.
        let count = |n: i32| u32::try_from(n).map_err(|_| corrupt("node count", n));
        spec.autoscale = r.autoscale;
        spec.min_nodes = count(r.min_nodes)?;
        spec.max_nodes = count(r.max_nodes)?;
        spec.desired_nodes = count(r.desired_nodes)?;
        Ok(NodePool {
            id: PoolId(r.id),
            cluster: ClusterId(r.cluster_id),
            spec,
            created: r.created_at,
        })
    }
}

pub async fn insert_pool(tx: &mut Tx<'_>, p: &NodePool) -> Result<(), Error> {
    let res = sqlx::query!(
        r#"insert into node_pools (id, cluster_id, name, spec, autoscale, min_nodes, max_nodes,
                                   desired_nodes, created_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9)"#,
        p.id.0,
        p.cluster.0,
        p.spec.name,
        json("pool spec", &p.spec)?,
        p.spec.autoscale,
        p.spec.min_nodes as i32,
        p.spec.max_nodes as i32,
        p.spec.desired_nodes as i32,
        p.created,
    )
    .execute(&mut **tx)
    .await;
    crate::unique_violation(res, "node_pools_cluster_name", "node pool", "name")?
        .map(|_| ())
        .ctx("inserting a node pool")
}

/// A cluster's live pools, oldest first.
pub async fn pools(
    db: impl sqlx::PgExecutor<'_>,
    cluster: ClusterId,
) -> Result<Vec<NodePool>, Error> {
    pools_of(db, &[cluster]).await
}

/// The live pools of several clusters, each cluster's in creation order.
pub async fn pools_of(
    db: impl sqlx::PgExecutor<'_>,
    clusters: &[ClusterId],
) -> Result<Vec<NodePool>, Error> {
    let ids: Vec<Uuid> = clusters.iter().map(|c| c.0).collect();
    let rows = sqlx::query_as!(
        PoolRow,
        r#"select id, cluster_id, spec, autoscale, min_nodes, max_nodes, desired_nodes, created_at
           from node_pools where cluster_id = any($1) and deleted_at is null
           order by created_at, id"#,
        &ids
    )
    .fetch_all(db)
    .await
    .ctx("listing node pools")?;
    rows.into_iter().map(NodePool::try_from).collect()
}

pub async fn mark_pool_deleted(db: impl sqlx::PgExecutor<'_>, id: PoolId) -> Result<(), Error> {
    sqlx::query!(
        "update node_pools set deleted_at = now() where id = $1 and deleted_at is null",
        id.0
    )
    .execute(db)
    .await
    .ctx("deleting a node pool")?;
    Ok(())
}

// ---- Nodes. ----

struct NodeRow {
    id: Uuid,
    cluster_id: Uuid,
    pool_id: Option<Uuid>,
    role: String,
    vm_id: Uuid,
    name: String,
    status: String,
    error_message: Option<String>,
    kubernetes_version: String,
    phoned_home_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
}

impl TryFrom<NodeRow> for Node {
    type Error = Error;
    fn try_from(r: NodeRow) -> Result<Self, Error> {
        Ok(Node {
            id: NodeId(r.id),
            cluster: ClusterId(r.cluster_id),
            pool: r.pool_id.map(PoolId),
            role: NodeRole::parse(&r.role).ok_or_else(|| corrupt("node role", &r.role))?,
            vm: VmId(r.vm_id),
            name: r.name,
            status: NodeStatus::parse(&r.status)
                .ok_or_else(|| corrupt("node status", &r.status))?,
            error_message: r.error_message,
            kubernetes_version: r.kubernetes_version,
            phoned_home: r.phoned_home_at,
            created: r.created_at,
        })
    }
}

/// Writes a node (its VM row first, in the same transaction).
pub async fn insert_node(tx: &mut Tx<'_>, n: &Node) -> Result<(), Error> {
    sqlx::query!(
        r#"insert into nodes (id, cluster_id, pool_id, role, vm_id, name, status,
                              kubernetes_version, created_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9)"#,
        n.id.0,
        n.cluster.0,
        n.pool.map(|p| p.0),
        n.role.as_str(),
        n.vm.0,
        n.name,
        n.status.as_str(),
        n.kubernetes_version,
        n.created,
    )
    .execute(&mut **tx)
    .await
    .ctx("inserting a node")?;
    sqlx::query!(
        "update vms set cluster_id = $2 where id = $1",
        n.vm.0,
        n.cluster.0
    )
    .execute(&mut **tx)
    .await
    .ctx("tying a vm to its cluster")?;
    Ok(())
}

/// A cluster's live nodes: control plane first, then by pool and age.
pub async fn nodes(db: impl sqlx::PgExecutor<'_>, cluster: ClusterId) -> Result<Vec<Node>, Error> {
    nodes_of(db, &[cluster]).await
}

/// The live nodes of several clusters, each cluster's in [`nodes`]' order.
pub async fn nodes_of(
    db: impl sqlx::PgExecutor<'_>,
    clusters: &[ClusterId],
) -> Result<Vec<Node>, Error> {
    let ids: Vec<Uuid> = clusters.iter().map(|c| c.0).collect();
    let rows = sqlx::query_as!(
        NodeRow,
        r#"select id, cluster_id, pool_id, role, vm_id, name, status, error_message,
                  kubernetes_version, phoned_home_at, created_at
           from nodes where cluster_id = any($1) and deleted_at is null
           order by role, pool_id nulls first, created_at, id"#,
        &ids
    )
    .fetch_all(db)
    .await
    .ctx("listing nodes")?;
    rows.into_iter().map(Node::try_from).collect()
}

pub async fn node(db: impl sqlx::PgExecutor<'_>, id: NodeId) -> Result<Node, Error> {
    sqlx::query_as!(
        NodeRow,
        r#"select id, cluster_id, pool_id, role, vm_id, name, status, error_message,
                  kubernetes_version, phoned_home_at, created_at
           from nodes where id = $1 and deleted_at is null"#,
        id.0
    )
    .fetch_optional(db)
    .await
    .ctx("fetching a node")?
    .ok_or_else(|| Error::not_found("node", id))?
    .try_into()
}

/// Marks `node` as the replacement of `old`.
pub async fn set_replaces(
    db: impl sqlx::PgExecutor<'_>,
    node: NodeId,
    old: NodeId,
) -> Result<(), Error> {
    sqlx::query!(
        "update nodes set replaces = $2 where id = $1",
        node.0,
        old.0
    )
    .execute(db)
    .await
    .ctx("recording a replacement")?;
    Ok(())
}

/// The live node made to replace `old`, if any.
pub async fn replacement_of(pool: &PgPool, old: NodeId) -> Result<Option<Node>, Error> {
    sqlx::query_as!(
        NodeRow,
        r#"select id, cluster_id, pool_id, role, vm_id, name, status, error_message,
                  kubernetes_version, phoned_home_at, created_at
           from nodes where replaces = $1 and deleted_at is null"#,
        old.0
    )
    .fetch_optional(pool)
    .await
    .ctx("finding a replacement")?
    .map(Node::try_from)
    .transpose()
}

/// The name of the node `node` replaces, if it replaces one.
pub async fn replaced_name(pool: &PgPool, node: NodeId) -> Result<Option<String>, Error> {
    sqlx::query_scalar!(
        "select o.name from nodes n join nodes o on o.id = n.replaces where n.id = $1",
        node.0
    )
    .fetch_optional(pool)
    .await
    .ctx("finding the replaced node")
}

/// Sets the hash of the secret the node's cloud-init will phone home with.
pub async fn set_phone_home_hash(pool: &PgPool, id: NodeId, hash: &[u8]) -> Result<(), Error> {
    sqlx::query!(
        "update nodes set phone_home_hash = $2 where id = $1",
        id.0,
        hash
    )
    .execute(pool)
    .await
    .ctx("storing a phone-home hash")?;
    Ok(())
}

/// A node's VM runs: `creating` becomes `not_ready` (a node that already
/// phoned home stays `ready`).
pub async fn node_booted(pool: &PgPool, id: NodeId) -> Result<(), Error> {
    sqlx::query!(
        "update nodes set status = 'not_ready' where id = $1 and status = 'creating'",
        id.0
    )
    .execute(pool)
    .await
    .ctx("recording a node's boot")?;
    Ok(())
}

pub async fn set_node_status(
    db: impl sqlx::PgExecutor<'_>,
    id: NodeId,
    status: NodeStatus,
    error_message: Option<&str>,
) -> Result<(), Error> {
    sqlx::query!(
        "update nodes set status = $2, error_message = $3 where id = $1",
        id.0,
        status.as_str(),
        error_message,
    )
    .execute(db)
    .await
    .ctx("updating node status")?;
    Ok(())
}

/// Records a node's phone-home if `secret_hash` is its own: the node is
/// `ready`. False when no live node of that cluster has that id and secret.
pub async fn phoned_home(
    pool: &PgPool,
    cluster: ClusterId,
    node: NodeId,
    secret_hash: &[u8],
) -> Result<bool, Error> {
    let r = sqlx::query!(
        r#"update nodes set phoned_home_at = coalesce(phoned_home_at, now()),
                            status = case when status in ('creating', 'not_ready') then 'ready'
                                          else status end,
                            error_message = null
           where id = $1 and cluster_id = $2 and phone_home_hash = $3 and deleted_at is null"#,
        node.0,
        cluster.0,
        secret_hash,
    )
    .execute(pool)
    .await
    .ctx("recording a phone-home")?;
    Ok(r.rows_affected() == 1)
}

pub async fn mark_node_deleted(db: impl sqlx::PgExecutor<'_>, id: NodeId) -> Result<(), Error> {
    sqlx::query!(
        "update nodes set deleted_at = now(), status = 'deleting' where id = $1 and deleted_at is null",
        id.0
    )
    .execute(db)
    .await
    .ctx("deleting a node")?;
    Ok(())
}

/// Makes `serial` the cluster's only valid autoscaler certificate.
pub async fn set_autoscaler_serial(
    db: impl sqlx::PgExecutor<'_>,
    id: ClusterId,
    serial: &str,
) -> Result<(), Error> {
    sqlx::query!(
        "update clusters set autoscaler_serial = $2 where id = $1 and deleted_at is null",
        id.0,
        serial
    )
    .execute(db)
    .await
    .ctx("storing a cluster's autoscaler certificate")?;
    Ok(())
}

/// The tenant of a live cluster whose current autoscaler certificate has
/// `serial`; `None` for any other cluster or certificate.
pub async fn autoscaler_tenant(
    db: impl sqlx::PgExecutor<'_>,
    id: ClusterId,
    serial: &str,
) -> Result<Option<TenantId>, Error> {
    Ok(sqlx::query_scalar!(
        "select tenant_id from clusters
         where id = $1 and deleted_at is null and autoscaler_serial = $2",
        id.0,
        serial
    )
    .fetch_optional(db)
    .await
    .ctx("checking an autoscaler certificate")?
    .map(TenantId))
}

/// Live clusters and nodes by status, for metrics (every tenant's: call in
/// the system scope).
pub async fn status_counts(
    pool: &PgPool,
) -> Result<(Vec<(String, i64)>, Vec<(String, i64)>), Error> {
    let clusters = sqlx::query!(
        r#"select status, count(*) as "n!" from clusters where deleted_at is null group by status"#
    )
    .fetch_all(pool)
    .await
    .ctx("counting clusters")?
    .into_iter()
    .map(|r| (r.status, r.n))
    .collect();
    let nodes = sqlx::query!(
        r#"select status, count(*) as "n!" from nodes where deleted_at is null group by status"#
    )
    .fetch_all(pool)
    .await
    .ctx("counting nodes")?
    .into_iter()
    .map(|r| (r.status, r.n))
    .collect();
    Ok((clusters, nodes))
}

/// Writes one node of `cluster`: its VM (sized by `specs`, on the cluster's
/// network, addressed by IPAM when the network has no DHCP) and its row.
pub async fn add_node(
    tx: &mut Tx<'_>,
    cluster: &Cluster,
    pool: Option<&NodePool>,
    specs: &meson_core::kaas::NodeSpecs,
) -> meson_core::Result<Node> {
    add_node_as(tx, cluster, pool, specs, &cluster.kubernetes_version, None).await
}

/// [`add_node`] at `version`, optionally as the replacement of another node.
pub async fn add_node_as(
    tx: &mut Tx<'_>,
    cluster: &Cluster,
    pool: Option<&NodePool>,
    specs: &meson_core::kaas::NodeSpecs,
    version: &str,
    replaces: Option<NodeId>,
) -> meson_core::Result<Node> {
    let id = NodeId::new();
    let name =
        meson_core::cluster::node_name(&cluster.name, pool.map(|x| x.spec.name.as_str()), id);
    let vm_id = VmId::new();
    let role = if pool.is_some() {
        NodeRole::Worker
    } else {
        NodeRole::ControlPlane
    };
    let (vm, volumes) = meson_core::vm::Vm::new_with_volumes(
        &cluster.tenant,
        vm_id,
        cluster.spec.node_vm_spec(&name, specs),
        Labels::new(),
        meson_core::naming::node_atomos_name(
            cluster.id,
            role == NodeRole::ControlPlane,
            vm_id,
            &cluster.tenant,
        ),
    );
    crate::vms::insert_with_volumes(tx, &vm, &volumes).await?;
    crate::networks::attach_networks(tx, &cluster.tenant, vm_id, &[cluster.network], true).await?;
    let node = Node {
        id,
        cluster: cluster.id,
        pool: pool.map(|x| x.id),
        role,
        vm: vm_id,
        name,
        status: NodeStatus::Creating,
        error_message: None,
        kubernetes_version: version.to_owned(),
        phoned_home: None,
        created: chrono::Utc::now(),
    };
    insert_node(tx, &node).await?;
    if let Some(old) = replaces {
        set_replaces(&mut **tx, node.id, old).await?;
    }
    Ok(node)
}
