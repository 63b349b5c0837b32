//! Kubernetes clusters: create (the KaaS payload), read, list, relabel,
//! delete, the admin kubeconfig, and the nodes' phone-home.

use super::list::Paged;
use super::{App, ListQuery, new_action};
use crate::auth::Principal;
use meson_core::action::{Action, Command, ResourceType};
use meson_core::cluster::{Cluster, ClusterStatus, Node, NodePool};
use meson_core::kaas::{ClusterUpdate, KaasCreate};
use meson_core::labels::Labels;
use meson_core::network::{Network, NetworkStatus, Subnet};
use meson_core::parse::Warning;
use meson_core::{ClusterId, Error, NetworkId, NodeId, PoolId, Result, VmId};
use meson_workflows::{cluster_create, cluster_delete};
use std::net::Ipv4Addr;
use std::time::Duration;

/// A cluster with everything its view shows.
pub struct ClusterView {
    pub cluster: Cluster,
    pub pools: Vec<NodePool>,
    pub nodes: Vec<Node>,
    /// Where the nodes' VMs run (placement, address, price).
    pub vms: Vec<meson_core::vm::VmLocation>,
}

pub struct ClusterCreated {
    pub view: ClusterView,
    pub action: Action,
    pub warnings: Vec<Warning>,
}

/// Longest admin kubeconfig lifetime: a year.
pub const MAX_KUBECONFIG_SECONDS: u64 = 365 * 24 * 3600;
/// Default admin kubeconfig lifetime: a day.
pub const DEFAULT_KUBECONFIG_SECONDS: u64 = 24 * 3600;

/// The API endpoint's address: with meson's IPAM the lowest free address,
/// with DHCP the highest usable address outside the DHCP range (DHCP never
/// hands it out). `None` when there is none.
fn endpoint_address(subnet: &Subnet) -> Option<Ipv4Addr> {
    if !subnet.dhcp {
        return subnet.next_free(&Default::default());
    }
    let net = subnet.cidr;
    let (first, last) = (u32::from(net.network()) + 1, u32::from(net.broadcast()) - 1);
    (first..=last)
        .rev()
        .map(Ipv4Addr::from)
        .find(|ip| !subnet.range.contains(*ip) && *ip != subnet.gateway)
}

impl App {
    /// Validates a KaaS payload and, in one transaction, writes the cluster,
    /// its network (with the endpoint's address reserved), its pools, one VM
    /// and node per node, the action and the workflow's job.
    pub async fn cluster_create(
        &self,
        p: &Principal,
        body: &serde_json::Value,
    ) -> Result<ClusterCreated> {
        let req = KaasCreate::parse_placed(
            body,
            &meson_db::targets::list(&self.pool).await?,
            meson_core::kubernetes::today(),
        )?;
        let spec = req.spec;
        let subnet = spec.nodes_subnet.clone();
        let endpoint = check_network(&spec)?;
        let now = chrono::Utc::now();
        let id = ClusterId::new();
        let network = Network {
            id: NetworkId::new(),
            tenant: p.tenant.clone(),
            name: spec.name.clone(),
            status: NetworkStatus::Available,
            labels: Labels::new(),
            subnet,
            created: now,
        };
        let cluster = Cluster {
            id,
            tenant: p.tenant.clone(),
            name: spec.name.clone(),
            status: ClusterStatus::Creating,
            labels: req.labels,
            kubernetes_version: spec.kubernetes_version.to_string(),
            network: network.id,
            endpoint: Some(endpoint),
            error_message: None,
            created: now,
            spec,
        };
        let pools: Vec<NodePool> = cluster
            .spec
            .pools
            .iter()
            .map(|s| NodePool {
                id: PoolId::new(),
                cluster: id,
                spec: s.clone(),
                created: now,
            })
            .collect();
        let action = new_action(
            p,
            Command::CreateCluster,
            vec![(ResourceType::Cluster, id.0)],
        );

        let mut tx = meson_db::begin(&self.pool).await?;
        let held = self.hold_usage(&mut tx, &p.tenant).await?;
        meson_db::clusters::insert(&mut tx, &cluster).await?;
        meson_db::networks::insert(&mut tx, &network).await?;
        meson_db::networks::set_cluster(&mut tx, network.id, id).await?;
        meson_db::networks::reserve(&mut tx, network.id, endpoint, "api-endpoint").await?;
        let cp = cluster.spec.control_plane;
        for _ in 0..cp.nodes {
            meson_db::clusters::add_node(&mut tx, &cluster, None, &cp.specs).await?;
        }
        for pool in &pools {
            meson_db::clusters::insert_pool(&mut tx, pool).await?;
            for _ in 0..pool.spec.desired_nodes {
                meson_db::clusters::add_node(&mut tx, &cluster, Some(pool), &pool.spec.specs)
                    .await?;
            }
        }
        meson_db::actions::insert(&mut tx, &action).await?;
        cluster_create::enqueue(&mut tx, id, action.id, &p.tenant)
            .await?
            .of_new("cluster")?;
        self.within_quotas(&mut tx, &p.tenant, &held).await?;
        meson_db::commit(tx).await?;
        tracing::info!(cluster = %id, action = %action.id, tenant = %p.tenant, "cluster create accepted");
        Ok(ClusterCreated {
            view: self.cluster_view(cluster).await?,
            action,
            warnings: req.warnings,
        })
    }

    async fn cluster_view(&self, cluster: Cluster) -> Result<ClusterView> {
        let mut conn = meson_db::acquire(&self.pool).await?;
        let mut views = cluster_views(&mut conn, vec![cluster]).await?;
        views
            .pop()
            .ok_or_else(|| Error::internal("a cluster without its view"))
    }

    pub async fn cluster_get(&self, p: &Principal, id: ClusterId) -> Result<ClusterView> {
        let mut conn = meson_db::acquire(&self.pool).await?;
        let cluster = meson_db::clusters::get(&mut *conn, &p.tenant, id).await?;
        let mut views = cluster_views(&mut conn, vec![cluster]).await?;
        views
            .pop()
            .ok_or_else(|| Error::internal("a cluster without its view"))
    }

    pub async fn cluster_list(&self, p: &Principal, q: &ListQuery) -> Result<Paged<ClusterView>> {
        let mut conn = meson_db::acquire(&self.pool).await?;
        let bound = q.bound("clusters", &p.tenant)?;
        let mut listed =
            super::list::page::<Cluster>(&mut conn, &p.tenant, &q.page, bound, &q.filter()).await?;
        let clusters = std::mem::take(&mut listed.items);
        let views = cluster_views(&mut conn, clusters).await?;
        Ok(listed.with(views))
    }

    /// Replaces a cluster's labels and/or its update policy
    /// (`{"labels", "update_policy"}`).
    pub async fn cluster_update(
        &self,
        p: &Principal,
        id: ClusterId,
        body: &serde_json::Value,
    ) -> Result<(ClusterView, Vec<Warning>)> {
        let (
            ClusterUpdate {
                labels,
                update_policy: policy,
            },
            warnings,
        ) = ClusterUpdate::parse(body)?;
        let mut cluster = meson_db::clusters::get(&self.pool, &p.tenant, id).await?;
        let spec = policy.map(|u| {
            cluster.spec.update_policy = u;
            cluster.spec.clone()
        });
        meson_db::clusters::update(&self.pool, &p.tenant, id, labels.as_ref(), spec.as_ref())
            .await?;
        Ok((self.cluster_get(p, id).await?, warnings))
    }

    /// Starts deleting a cluster; `locked` while another action runs on it.
    pub async fn cluster_delete(&self, p: &Principal, id: ClusterId) -> Result<Action> {
        meson_db::clusters::get(&self.pool, &p.tenant, id).await?;
        let action = new_action(
            p,
            Command::DeleteCluster,
            vec![(ResourceType::Cluster, id.0)],
        );
        let mut tx = meson_db::begin(&self.pool).await?;
        meson_db::actions::insert(&mut tx, &action).await?;
        cluster_delete::enqueue(&mut tx, id, action.id, &p.tenant)
            .await?
            .or_locked("cluster", id)?;
        meson_db::clusters::set_status(&mut *tx, id, ClusterStatus::Deleting, None).await?;
        meson_db::commit(tx).await?;
        tracing::info!(cluster = %id, action = %action.id, "cluster delete accepted");
        Ok(action)
    }

    /// An admin kubeconfig signed by the cluster's admin CA, valid for
    /// `expiry_seconds` (default a day, at most a year). `conflict` until
    /// the cluster's secrets exist.
    pub async fn cluster_kubeconfig(
        &self,
        p: &Principal,
        id: ClusterId,
        expiry_seconds: Option<u64>,
    ) -> Result<String> {
        // Whoever can read it holds the cluster: editors and up.
        let seconds = expiry_seconds.unwrap_or(DEFAULT_KUBECONFIG_SECONDS);
        if !(60..=MAX_KUBECONFIG_SECONDS).contains(&seconds) {
            return Err(Error::invalid(
                "expiry_seconds",
                format!("must be from 60 to {MAX_KUBECONFIG_SECONDS}"),
            ));
        }
        let cluster = meson_db::clusters::get(&self.pool, &p.tenant, id).await?;
        let key = self
            .secrets_key
            .as_ref()
            .ok_or_else(|| Error::internal("no secrets key configured"))?;
        let sealed = meson_db::clusters::secrets(&self.pool, id)
            .await?
            .ok_or_else(|| Error::Conflict {
                message: "the cluster's credentials are not made yet; retry once its create \
                          action has progressed"
                    .to_owned(),
            })?;
        let secrets = meson_kaas::sealed::open_secrets(key, id, &sealed)
            .map_err(|e| Error::internal(format!("opening cluster secrets: {e}")))?;
        let server = cluster
            .server_url()
            .ok_or_else(|| Error::internal("the cluster has no endpoint"))?;
        meson_kaas::admin_kubeconfig(
            &secrets,
            &cluster.name,
            &server,
            Duration::from_secs(seconds),
        )
        .map_err(|e| Error::internal(format!("signing a kubeconfig: {e}")))
    }

    /// A node's phone-home (cloud-init's, once its kubelet is up): no bearer
    /// token, the node's own secret instead. Unknown node, cluster or secret
    /// all answer the same `not_found`.
    pub async fn node_phone_home(
        &self,
        cluster: ClusterId,
        node: NodeId,
        token: &str,
    ) -> Result<()> {
        let hash = meson_kaas::sealed::phone_home_hash(token);
        // The node's tenant is not known before its secret is checked: the
        // lookup runs in the system scope, and the secret is the wall.
        let found = meson_db::scope::system(meson_db::clusters::phoned_home(
            &self.pool, cluster, node, &hash,
        ))
        .await?;
        if found {
            tracing::info!(%cluster, %node, "node phoned home");
            Ok(())
        } else {
            Err(Error::not_found("node", node))
        }
    }
}

/// The cluster network's checks, for a create and a quote alike: room for
/// the API endpoint's address (returned) and for every node at its pool's
/// maximum.
pub(crate) fn check_network(spec: &meson_core::kaas::KaasSpec) -> Result<Ipv4Addr> {
    let subnet = &spec.nodes_subnet;
    let endpoint = endpoint_address(subnet).ok_or_else(|| {
        Error::invalid(
            "req.nodes_subnet",
            "leaves no address for the cluster's API endpoint: with dhcp, keep one usable \
             address outside start_address..last_address",
        )
    })?;
    let needed = u64::from(spec.control_plane.nodes)
        + spec
            .pools
            .iter()
            .map(|p| u64::from(p.max_nodes))
            .sum::<u64>();
    meson_core::cluster::check_address_capacity(subnet, needed)
        .map_err(|m| Error::invalid("req.nodes_subnet", m))?;
    Ok(endpoint)
}

/// Several clusters with their pools, nodes and nodes' VMs, in three
/// queries on one connection however many clusters there are.
async fn cluster_views(
    conn: &mut meson_db::PgConnection,
    clusters: Vec<Cluster>,
) -> Result<Vec<ClusterView>> {
    let ids: Vec<ClusterId> = clusters.iter().map(|c| c.id).collect();
    let mut pools = meson_db::clusters::pools_of(&mut *conn, &ids).await?;
    let mut nodes = meson_db::clusters::nodes_of(&mut *conn, &ids).await?;
    let vm_ids: Vec<VmId> = nodes.iter().map(|n| n.vm).collect();
    let mut vms = meson_db::vms::locations(&mut *conn, &vm_ids).await?;
    Ok(clusters
        .into_iter()
        .map(|cluster| {
            let id = cluster.id;
            let (mine, rest) = pools.drain(..).partition(|p| p.cluster == id);
            pools = rest;
            let (my_nodes, rest): (Vec<Node>, Vec<Node>) =
                nodes.drain(..).partition(|n| n.cluster == id);
            nodes = rest;
            let (my_vms, rest) = vms
                .drain(..)
                .partition(|v| my_nodes.iter().any(|n| n.vm == v.id));
            vms = rest;
            ClusterView {
                cluster,
                pools: mine,
                nodes: my_nodes,
                vms: my_vms,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subnet(dhcp: bool, start: [u8; 4], last: [u8; 4]) -> Subnet {
        Subnet {
            cidr: "192.168.1.0/24".parse().unwrap(),
            gateway: Ipv4Addr::new(192, 168, 1, 1),
            dhcp,
            range: meson_core::network::AddressRange::new(start.into(), last.into()).unwrap(),
        }
    }

    #[test]
    fn the_endpoint_avoids_dhcp_and_takes_the_first_free_address_otherwise() {
        let s = subnet(true, [192, 168, 1, 1], [192, 168, 1, 24]);
        assert_eq!(endpoint_address(&s), Some(Ipv4Addr::new(192, 168, 1, 254)));
        let s = subnet(false, [192, 168, 1, 1], [192, 168, 1, 24]);
        assert_eq!(endpoint_address(&s), Some(Ipv4Addr::new(192, 168, 1, 2)));
        let full = subnet(true, [192, 168, 1, 1], [192, 168, 1, 254]);
        assert_eq!(endpoint_address(&full), None);
    }
}
