//! The clusters' autoscalers: their credentials, and what the
//! cluster-autoscaler's `externalgrpc` calls do. A node group is a pool
//! with `autoscale: true`, bounded by its `min_nodes` and `max_nodes`; its
//! size changes run the same scale workflow as a PATCH of the pool.

use super::App;
use crate::auth::{Principal, Role};
use meson_core::action::Action;
use meson_core::cluster::{Node, NodePool, NodeStatus};
use meson_core::{ClusterId, Error, NodeId, PoolId, Result, TenantId, VmId};
use meson_kaas::autoscaler_pki::{AutoscalerCa, AutoscalerIdentity};
use serde_json::json;
use std::time::Duration;

/// The name of the autoscaler CA among meson's service secrets.
const CA_SECRET: &str = "autoscaler-ca";

/// How long an autoscaler's client certificate is valid.
pub const CREDENTIAL_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);

/// Where autoscalers reach meson's `externalgrpc` endpoint (`host:port`).
#[derive(Clone, Debug)]
pub struct AutoscalerEndpoint {
    pub address: String,
}

/// What an autoscaler needs to call meson: the upstream autoscaler's cloud
/// config (`--cloud-provider=externalgrpc --cloud-config=<file>`) and the
/// three PEM files it names.
#[derive(Clone, Debug)]
pub struct AutoscalerCredentials {
    pub address: String,
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
    pub expires: chrono::DateTime<chrono::Utc>,
}

/// An authenticated autoscaler: the cluster it scales, acting as a member
/// of the cluster's tenant.
#[derive(Clone, Debug)]
pub struct AutoscalerCaller {
    pub cluster: ClusterId,
    pub principal: Principal,
}

/// A node group's node with its VM.
#[derive(Clone, Debug)]
pub struct GroupNode {
    pub node: Node,
    pub provider_id: String,
}

impl App {
    /// Runs `f`, one of the autoscaler's calls into this layer, in the
    /// calling cluster's tenant scope (the database's row-level security
    /// sees only that tenant's rows), as the gate does for every other call.
    pub async fn as_autoscaler<F: std::future::Future>(
        &self,
        c: &AutoscalerCaller,
        f: F,
    ) -> F::Output {
        meson_db::scope::run(
            meson_db::scope::Scope::Tenant(c.principal.tenant.clone()),
            f,
        )
        .await
    }

    /// meson's autoscaler CA, made (and sealed with the secrets key) on
    /// first use; replicas racing to make it agree on one.
    pub async fn autoscaler_ca(&self) -> Result<AutoscalerCa> {
        let key = self
            .secrets_key
            .as_ref()
            .ok_or_else(|| Error::internal("no secrets key configured"))?;
        let aad = CA_SECRET.as_bytes();
        let sealed = match meson_db::service_secrets::get(&self.pool, CA_SECRET).await? {
            Some(s) => s,
            None => {
                let ca = AutoscalerCa::generate()
                    .map_err(|e| Error::internal_from("making the autoscaler CA", e))?;
                let sealed = meson_kaas::secretbox::seal_json(key, &ca, aad)
                    .map_err(|e| Error::internal_from("sealing the autoscaler CA", e))?;
                meson_db::service_secrets::get_or_insert(&self.pool, CA_SECRET, &sealed).await?
            }
        };
        meson_kaas::secretbox::open_json(key, &sealed, aad)
            .map_err(|e| Error::internal_from("opening the autoscaler CA", e))
    }

    /// Issues a new credential for the cluster's autoscaler; the one before
    /// stops working.
    pub async fn autoscaler_credentials(
        &self,
        p: &Principal,
        cluster: ClusterId,
    ) -> Result<AutoscalerCredentials> {
        let endpoint = self.autoscaler.as_ref().ok_or_else(|| Error::Unavailable {
            message: "this deployment serves no autoscaler endpoint".into(),
        })?;
        meson_db::clusters::get(&self.pool, &p.tenant, cluster).await?;
        let ca = self.autoscaler_ca().await?;
        let (cert, serial) = ca
            .client_credential(cluster.0, CREDENTIAL_VALIDITY)
            .map_err(|e| Error::internal_from("signing an autoscaler certificate", e))?;
        meson_db::clusters::set_autoscaler_serial(&self.pool, cluster, &serial).await?;
        tracing::info!(%cluster, %serial, by = %p.subject, "autoscaler credential issued");
        Ok(AutoscalerCredentials {
            address: endpoint.address.clone(),
            ca_pem: ca.ca.cert_pem.clone(),
            cert_pem: cert.cert_pem.clone(),
            key_pem: cert.key_pem.clone(),
            expires: chrono::Utc::now()
                + chrono::Duration::from_std(CREDENTIAL_VALIDITY).unwrap_or_default(),
        })
    }

    /// The caller a client certificate names, if it is its cluster's
    /// current one and the cluster lives.
    pub async fn autoscaler_caller(&self, id: &AutoscalerIdentity) -> Result<AutoscalerCaller> {
        let cluster = ClusterId(id.cluster);
        let tenant = meson_db::scope::system(meson_db::clusters::autoscaler_tenant(
            &self.pool, cluster, &id.serial,
        ))
        .await?
        .ok_or(Error::Unauthorized)?;
        Ok(AutoscalerCaller {
            cluster,
            principal: autoscaler_principal(tenant, cluster),
        })
    }

    /// The cluster's node groups: its pools with `autoscale: true`.
    pub async fn autoscaler_groups(&self, c: &AutoscalerCaller) -> Result<Vec<NodePool>> {
        Ok(meson_db::clusters::pools(&self.pool, c.cluster)
            .await?
            .into_iter()
            .filter(|p| p.spec.autoscale)
            .collect())
    }

    /// A node group, or `not_found` (no such pool, or one that does not
    /// autoscale).
    pub async fn autoscaler_group(&self, c: &AutoscalerCaller, id: &str) -> Result<NodePool> {
        let missing = || Error::not_found("node group", id);
        let pool_id: PoolId = id.parse().map_err(|_| missing())?;
        self.autoscaler_groups(c)
            .await?
            .into_iter()
            .find(|p| p.id == pool_id)
            .ok_or_else(missing)
    }

    /// The group of the node whose provider id is `elemento://<vm id>`, if
    /// it is in an autoscaled pool of this cluster.
    pub async fn autoscaler_group_for_node(
        &self,
        c: &AutoscalerCaller,
        provider_id: &str,
    ) -> Result<Option<NodePool>> {
        let Some(vm) = parse_provider_id(provider_id) else {
            return Ok(None);
        };
        let nodes = meson_db::clusters::nodes(&self.pool, c.cluster).await?;
        let Some(pool) = nodes.iter().find(|n| n.vm == vm).and_then(|n| n.pool) else {
            return Ok(None);
        };
        Ok(self
            .autoscaler_groups(c)
            .await?
            .into_iter()
            .find(|p| p.id == pool))
    }

    /// A group's nodes (those being deleted too: the autoscaler tracks them).
    pub async fn autoscaler_nodes(
        &self,
        c: &AutoscalerCaller,
        group: &NodePool,
    ) -> Result<Vec<GroupNode>> {
        Ok(meson_db::clusters::nodes(&self.pool, c.cluster)
            .await?
            .into_iter()
            .filter(|n| n.pool == Some(group.id))
            .map(|node| GroupNode {
                provider_id: provider_id(node.vm),
                node,
            })
            .collect())
    }

    /// Grows a group by `delta` nodes, up to its `max_nodes`.
    pub async fn autoscaler_increase(
        &self,
        c: &AutoscalerCaller,
        group: &NodePool,
        delta: i32,
    ) -> Result<Option<Action>> {
        let delta = u32::try_from(delta)
            .ok()
            .filter(|d| *d > 0)
            .ok_or_else(|| Error::invalid("delta", "must be positive"))?;
        let target = group.spec.desired_nodes.saturating_add(delta);
        if target > group.spec.max_nodes {
            return Err(Error::invalid(
                "delta",
                format!(
                    "size increase too large: {} + {delta} is over the group's max_nodes {}",
                    group.spec.desired_nodes, group.spec.max_nodes
                ),
            ));
        }
        self.autoscaler_resize(c, group, target).await
    }

    /// Shrinks a group's target by `-delta` without deleting a node that
    /// joined the cluster: only nodes still being made can go this way.
    pub async fn autoscaler_decrease_target(
        &self,
        c: &AutoscalerCaller,
        group: &NodePool,
        delta: i32,
    ) -> Result<Option<Action>> {
        let by = u32::try_from(delta.checked_neg().unwrap_or(0))
            .ok()
            .filter(|d| *d > 0)
            .ok_or_else(|| Error::invalid("delta", "must be negative"))?;
        let target = group
            .spec
            .desired_nodes
            .checked_sub(by)
            .filter(|t| *t >= group.spec.min_nodes)
            .ok_or_else(|| {
                Error::invalid(
                    "delta",
                    format!(
                        "size decrease too large: {} - {by} is under the group's min_nodes {}",
                        group.spec.desired_nodes, group.spec.min_nodes
                    ),
                )
            })?;
        let joined = self
            .autoscaler_nodes(c, group)
            .await?
            .iter()
            .filter(|n| matches!(n.node.status, NodeStatus::Ready | NodeStatus::NotReady))
            .count();
        if (target as usize) < joined {
            return Err(Error::Conflict {
                message: format!(
                    "the group has {joined} nodes that joined the cluster; a target of {target} \
                     would delete some (use NodeGroupDeleteNodes)"
                ),
            });
        }
        self.autoscaler_resize(c, group, target).await
    }

    async fn autoscaler_resize(
        &self,
        c: &AutoscalerCaller,
        group: &NodePool,
        target: u32,
    ) -> Result<Option<Action>> {
        let changed = self
            .pool_update(
                &c.principal,
                c.cluster,
                group.id,
                &json!({"desired_nodes": target}),
            )
            .await?;
        Ok(changed.action)
    }

    /// Deletes the named nodes of a group (and lowers its target as much).
    pub async fn autoscaler_delete_nodes(
        &self,
        c: &AutoscalerCaller,
        group: &NodePool,
        provider_ids: &[String],
    ) -> Result<Option<Action>> {
        let nodes = self.autoscaler_nodes(c, group).await?;
        let victims = provider_ids
            .iter()
            .map(|id| {
                nodes
                    .iter()
                    .find(|n| &n.provider_id == id)
                    .map(|n| n.node.id)
                    .ok_or_else(|| {
                        Error::invalid("nodes", format!("{id} is not a node of group {}", group.id))
                    })
            })
            .collect::<Result<Vec<NodeId>>>()?;
        let changed = self
            .pool_delete_nodes(&c.principal, c.cluster, group.id, &victims)
            .await?;
        Ok(changed.action)
    }

    /// What a new node of a group looks like: the cluster's view, for its
    /// region and the pool's size, labels and taints.
    pub async fn autoscaler_cluster(
        &self,
        c: &AutoscalerCaller,
    ) -> Result<crate::app::ClusterView> {
        self.cluster_get(&c.principal, c.cluster).await
    }

    /// The price of running the node `provider_id` for `hours`.
    pub async fn autoscaler_node_price(
        &self,
        c: &AutoscalerCaller,
        provider_id: &str,
        hours: f64,
    ) -> Result<f64> {
        let vm =
            parse_provider_id(provider_id).ok_or_else(|| Error::not_found("node", provider_id))?;
        let view = self.autoscaler_cluster(c).await?;
        let vm = view
            .vms
            .iter()
            .find(|v| v.id == vm)
            .ok_or_else(|| Error::not_found("node", provider_id))?;
        let hourly = vm
            .placement
            .as_ref()
            .map(|p| p.price_hourly)
            .ok_or_else(|| Error::Unavailable {
                message: "the node is not placed yet".into(),
            })?;
        Ok(hourly * hours.max(0.0))
    }
}

/// Who an autoscaler acts as: an editor of its cluster's tenant, named so in
/// the audit log and on the actions it starts.
fn autoscaler_principal(tenant: TenantId, cluster: ClusterId) -> Principal {
    Principal {
        tenant,
        subject: format!("cluster-autoscaler:{cluster}"),
        role: Role::Editor,
        email: None,
    }
}

pub fn provider_id(vm: VmId) -> String {
    format!("elemento://{vm}")
}

fn parse_provider_id(s: &str) -> Option<VmId> {
    s.strip_prefix("elemento://")?.parse().ok()
}

/// The cloud config of the upstream autoscaler's `externalgrpc` provider.
pub fn cloud_config(address: &str, dir: &str) -> String {
    format!(
        "address: \"{address}\"\ncacert: \"{dir}/ca.crt\"\ncert: \"{dir}/tls.crt\"\nkey: \"{dir}/tls.key\"\n"
    )
}
