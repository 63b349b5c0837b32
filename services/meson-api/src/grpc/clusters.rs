//! `meson.v1.ClusterService`: clusters, their pools and nodes.

use super::{
    Svc, action_call, action_on, answer, convert, id, note_action, note_resource, principal,
};
use crate::app::{ListQuery, NodeAction, PoolView};
use crate::views;
use meson_core::Error;
use meson_core::cluster::ClusterStatus;
use meson_proto::meson::v1 as pb;
use tonic::{Request, Response, Status};

fn pool(v: &PoolView) -> pb::Pool {
    convert::pool(views::pool(&v.pool, &v.nodes))
}

impl Svc {
    /// `ReplaceNode` and `RebootNode`.
    async fn node_action(
        &self,
        req: Request<pb::NodeActionRequest>,
        op: NodeAction,
    ) -> Result<Response<pb::Action>, Status> {
        action_call(&req, |p, req| async move {
            let cluster_id = id("id", &req.get_ref().id)?;
            let node_id: meson_core::NodeId = id("node", &req.get_ref().node)?;
            note_resource(req, "node", node_id);
            self.0
                .app
                .cluster_node_action(&p, cluster_id, node_id, op)
                .await
        })
        .await
    }
}

#[tonic::async_trait]
impl pb::cluster_service_server::ClusterService for Svc {
    async fn create_cluster(
        &self,
        req: Request<pb::CreateClusterRequest>,
    ) -> Result<Response<pb::CreateClusterResponse>, Status> {
        let p = principal(&req)?;
        let body = convert::cluster_create(req.get_ref());
        answer(self.0.app.cluster_create(&p, &body).await.map(|c| {
            note_resource(&req, "cluster", c.view.cluster.id);
            note_action(&req, &c.action);
            pb::CreateClusterResponse {
                cluster: Some(convert::cluster(views::cluster(&c.view))),
                action: Some(convert::action(views::action(&c.action))),
                warnings: convert::warnings(&c.warnings),
            }
        }))
    }

    async fn get_cluster(
        &self,
        req: Request<pb::GetClusterRequest>,
    ) -> Result<Response<pb::Cluster>, Status> {
        let p = principal(&req)?;
        let r = async {
            let v = self
                .0
                .app
                .cluster_get(&p, id("id", &req.get_ref().id)?)
                .await?;
            Ok(convert::cluster(views::cluster(&v)))
        };
        answer(r.await)
    }

    async fn list_clusters(
        &self,
        req: Request<pb::ListClustersRequest>,
    ) -> Result<Response<pb::ListClustersResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let pairs = convert::list_query(req.get_ref().options.as_ref());
            let q = ListQuery::parse(&pairs, |v| ClusterStatus::parse(v).is_some())?;
            let clusters = self.0.app.cluster_list(&p, &q).await?;
            Ok(pb::ListClustersResponse {
                clusters: clusters
                    .items
                    .iter()
                    .map(|c| convert::cluster(views::cluster(c)))
                    .collect(),
                pagination: Some(convert::pagination(clusters.pagination())),
            })
        };
        answer(r.await)
    }

    /// The REST answer's warnings have no place in `Cluster`: they are
    /// dropped.
    async fn update_cluster(
        &self,
        req: Request<pb::UpdateClusterRequest>,
    ) -> Result<Response<pb::Cluster>, Status> {
        let p = principal(&req)?;
        let r = async {
            let cluster_id = id("id", &req.get_ref().id)?;
            note_resource(&req, "cluster", cluster_id);
            let body = convert::cluster_update(req.get_ref());
            let (v, _warnings) = self.0.app.cluster_update(&p, cluster_id, &body).await?;
            Ok(convert::cluster(views::cluster(&v)))
        };
        answer(r.await)
    }

    async fn delete_cluster(
        &self,
        req: Request<pb::DeleteClusterRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        action_on(&req, "cluster", &req.get_ref().id, |p, id| async move {
            self.0.app.cluster_delete(&p, id).await
        })
        .await
    }

    async fn list_cluster_actions(
        &self,
        req: Request<pb::ResourceActionsRequest>,
    ) -> Result<Response<pb::ResourceActionsResponse>, Status> {
        self.resource_actions(&req, meson_core::action::ResourceType::Cluster)
            .await
    }

    async fn list_nodes(
        &self,
        req: Request<pb::ListNodesRequest>,
    ) -> Result<Response<pb::ListNodesResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let v = self
                .0
                .app
                .cluster_get(&p, id("id", &req.get_ref().id)?)
                .await?;
            Ok(pb::ListNodesResponse {
                nodes: views::nodes(&v).into_iter().map(convert::node).collect(),
            })
        };
        answer(r.await)
    }

    /// `expiry_seconds` 0 is the REST default (a day).
    async fn get_kubeconfig(
        &self,
        req: Request<pb::GetKubeconfigRequest>,
    ) -> Result<Response<pb::Kubeconfig>, Status> {
        let p = principal(&req)?;
        let r = async {
            let m = req.get_ref();
            let cluster_id = id("id", &m.id)?;
            note_resource(&req, "cluster", cluster_id);
            let expiry = (m.expiry_seconds != 0).then_some(m.expiry_seconds);
            let kubeconfig = self
                .0
                .app
                .cluster_kubeconfig(&p, cluster_id, expiry)
                .await?;
            Ok(pb::Kubeconfig { kubeconfig })
        };
        answer(r.await)
    }

    /// The REST answer's warnings have no place in `Action`: they are
    /// dropped.
    async fn upgrade_cluster(
        &self,
        req: Request<pb::UpgradeClusterRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        let p = principal(&req)?;
        let r = async {
            let cluster_id = id("id", &req.get_ref().id)?;
            note_resource(&req, "cluster", cluster_id);
            let body = convert::cluster_upgrade(req.get_ref());
            let (a, _warnings) = self.0.app.cluster_upgrade(&p, cluster_id, &body).await?;
            note_action(&req, &a);
            Ok(convert::action(views::action(&a)))
        };
        answer(r.await)
    }

    async fn rotate_credentials(
        &self,
        req: Request<pb::RotateCredentialsRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        action_on(&req, "cluster", &req.get_ref().id, |p, id| async move {
            self.0.app.cluster_rotate_credentials(&p, id).await
        })
        .await
    }

    async fn create_pool(
        &self,
        req: Request<pb::CreatePoolRequest>,
    ) -> Result<Response<pb::CreatePoolResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let cluster_id = id("id", &req.get_ref().id)?;
            // As the REST route's audit entry: the cluster the pool joins.
            note_resource(&req, "cluster", cluster_id);
            let body = req
                .get_ref()
                .pool
                .as_ref()
                .map(convert::pool_create)
                .unwrap_or_else(|| serde_json::json!({}));
            let c = self.0.app.pool_create(&p, cluster_id, &body).await?;
            let action = c
                .action
                .as_ref()
                .ok_or_else(|| Error::internal("a pool create without its action"))?;
            note_action(&req, action);
            Ok(pb::CreatePoolResponse {
                pool: Some(pool(&c.view)),
                action: Some(convert::action(views::action(action))),
                warnings: convert::warnings(&c.warnings),
            })
        };
        answer(r.await)
    }

    async fn get_pool(
        &self,
        req: Request<pb::GetPoolRequest>,
    ) -> Result<Response<pb::Pool>, Status> {
        let p = principal(&req)?;
        let r = async {
            let m = req.get_ref();
            let v = self
                .0
                .app
                .pool_get(&p, id("id", &m.id)?, id("pool_id", &m.pool_id)?)
                .await?;
            Ok(pool(&v))
        };
        answer(r.await)
    }

    async fn list_pools(
        &self,
        req: Request<pb::ListPoolsRequest>,
    ) -> Result<Response<pb::ListPoolsResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let pools = self
                .0
                .app
                .pool_list(&p, id("id", &req.get_ref().id)?)
                .await?;
            Ok(pb::ListPoolsResponse {
                pools: pools.iter().map(pool).collect(),
            })
        };
        answer(r.await)
    }

    async fn update_pool(
        &self,
        req: Request<pb::UpdatePoolRequest>,
    ) -> Result<Response<pb::UpdatePoolResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let m = req.get_ref();
            let cluster_id = id("id", &m.id)?;
            let pool_id: meson_core::PoolId = id("pool_id", &m.pool_id)?;
            note_resource(&req, "node_pool", pool_id);
            let body = convert::pool_update(m);
            let c = self
                .0
                .app
                .pool_update(&p, cluster_id, pool_id, &body)
                .await?;
            if let Some(a) = &c.action {
                note_action(&req, a);
            }
            Ok(pb::UpdatePoolResponse {
                pool: Some(pool(&c.view)),
                action: c.action.as_ref().map(|a| convert::action(views::action(a))),
                warnings: convert::warnings(&c.warnings),
            })
        };
        answer(r.await)
    }

    async fn delete_pool(
        &self,
        req: Request<pb::DeletePoolRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        action_call(&req, |p, req| async move {
            let m = req.get_ref();
            let cluster_id = id("id", &m.id)?;
            let pool_id: meson_core::PoolId = id("pool_id", &m.pool_id)?;
            note_resource(req, "node_pool", pool_id);
            self.0.app.pool_delete(&p, cluster_id, pool_id).await
        })
        .await
    }

    async fn replace_node(
        &self,
        req: Request<pb::NodeActionRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        self.node_action(req, NodeAction::Replace).await
    }

    async fn reboot_node(
        &self,
        req: Request<pb::NodeActionRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        self.node_action(req, NodeAction::Reboot).await
    }
}
