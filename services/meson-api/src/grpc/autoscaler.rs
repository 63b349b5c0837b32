//! The cluster-autoscaler's `externalgrpc` CloudProvider service.
//!
//! Served on its own mutual-TLS endpoint ([`serve`]): the client
//! certificate meson issued to a cluster's autoscaler says which cluster it
//! scales (and only its current certificate works). Node groups are the
//! cluster's pools with `autoscale: true`; resizing runs the same scale
//! workflow, under the same quotas and locks, as a PATCH of the pool, and is
//! recorded in the audit log as the autoscaler's. Pools that do not
//! autoscale are `NotFound` node groups; sizes past a group's bounds are
//! `InvalidArgument`; pricing pods and node group options are
//! `Unimplemented` (optional upstream).

use super::status::{http_status_of, status_of};
use crate::app::autoscaler::{AutoscalerCaller, GroupNode};
use crate::gate::{Audit, CallInfo};
use crate::state::AppState;
use meson_core::Error;
use meson_core::action::Action;
use meson_core::cluster::{NodePool, NodeStatus};
use meson_proto::externalgrpc as pb;
use meson_proto::k8s_core as k8s;
use prost::Message;
use std::collections::HashMap;
use std::future::Future;
use tonic::{Request, Response, Status};

/// The service; every call first proves who it is with its certificate.
#[derive(Clone)]
pub struct CloudProvider(pub AppState);

type Answer<T> = Result<Response<T>, Status>;

impl CloudProvider {
    /// The cluster whose autoscaler calls: from the client certificate the
    /// TLS handshake verified against meson's autoscaler CA.
    async fn caller<T>(&self, req: &Request<T>) -> Result<AutoscalerCaller, Status> {
        let refused = || Status::unauthenticated("a client certificate meson issued is required");
        let Some(certs) = req.peer_certs() else {
            tracing::info!("refused an autoscaler call without a client certificate");
            return Err(refused());
        };
        let Some(id) = certs
            .first()
            .and_then(|c| meson_kaas::autoscaler_pki::identity(c.as_ref()))
        else {
            tracing::info!(
                "refused an autoscaler call: its certificate names no cluster of meson's"
            );
            return Err(refused());
        };
        match self.0.app.autoscaler_caller(&id).await {
            Ok(c) => Ok(c),
            Err(Error::Unauthorized) => {
                tracing::info!(cluster = %id.cluster, serial = %id.serial,
                    "refused an autoscaler certificate that is not its cluster's current one");
                Err(refused())
            }
            Err(e) => Err(status_of(&e)),
        }
    }

    /// A resize, audited as the autoscaler's `operation` on the group.
    async fn resize<F>(
        &self,
        c: &AutoscalerCaller,
        method: &str,
        operation: &str,
        group: &NodePool,
        f: F,
    ) -> Result<(), Status>
    where
        F: Future<Output = Result<Option<Action>, Error>>,
    {
        let mut audit = Audit::start(
            &c.principal,
            operation,
            CallInfo {
                method: "GRPC".into(),
                path: format!(
                    "/clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider/{method}"
                ),
                resource: Some(("node_pool".into(), group.id.to_string())),
                correlation_id: uuid::Uuid::new_v4().to_string(),
                organization: None,
            },
        );
        let res = self.0.app.as_autoscaler(c, f).await;
        let status = res.as_ref().err().map(status_of);
        if let Ok(Some(a)) = &res {
            audit.entry.action_id = Some(a.id.0);
        }
        let code = status.as_ref().map_or(tonic::Code::Ok, Status::code);
        audit.record(&self.0, http_status_of(code)).await;
        status.map_or(Ok(()), Err)
    }

    async fn group(&self, c: &AutoscalerCaller, id: &str) -> Result<NodePool, Status> {
        self.0
            .app
            .as_autoscaler(c, self.0.app.autoscaler_group(c, id))
            .await
            .map_err(|e| status_of(&e))
    }
}

fn node_group(p: &NodePool) -> pb::NodeGroup {
    pb::NodeGroup {
        id: p.id.to_string(),
        min_size: i32::try_from(p.spec.min_nodes).unwrap_or(i32::MAX),
        max_size: i32::try_from(p.spec.max_nodes).unwrap_or(i32::MAX),
        debug: format!(
            "pool {} ({} desired, {}..{})",
            p.spec.name, p.spec.desired_nodes, p.spec.min_nodes, p.spec.max_nodes
        ),
    }
}

fn instance(n: &GroupNode) -> pb::Instance {
    use pb::instance_status::InstanceState;
    let (state, error) = match n.node.status {
        NodeStatus::Creating => (InstanceState::InstanceCreating, None),
        NodeStatus::Ready | NodeStatus::NotReady => (InstanceState::InstanceRunning, None),
        NodeStatus::Deleting => (InstanceState::InstanceDeleting, None),
        // Left for the autoscaler to delete; out of resources is the
        // common cause (placement found no host, AtomOS refused).
        NodeStatus::CreationError => (
            InstanceState::InstanceCreating,
            Some(pb::InstanceErrorInfo {
                error_code: "creation_error".into(),
                error_message: n.node.error_message.clone().unwrap_or_default(),
                instance_error_class: 1,
            }),
        ),
    };
    pb::Instance {
        id: n.provider_id.clone(),
        status: Some(pb::InstanceStatus {
            instance_state: state as i32,
            error_info: error,
        }),
    }
}

/// A template node of `pool`: as a node of it registers (the labels its
/// kubelet sets, the pool's taints), with the pool's size as capacity.
pub fn template_node(pool: &NodePool) -> k8s::Node {
    let s = &pool.spec.specs;
    let name = format!("template-{}", pool.spec.name);
    let mut labels: HashMap<String, String> =
        meson_kaas::sealed::node_labels(pool).into_iter().collect();
    labels.insert("kubernetes.io/os".into(), "linux".into());
    labels.insert("kubernetes.io/arch".into(), "amd64".into());
    labels.insert("kubernetes.io/hostname".into(), name.clone());
    let q = |v: String| k8s::Quantity { string: Some(v) };
    let mut capacity = HashMap::from([
        ("cpu".to_owned(), q(s.cpu.to_string())),
        ("memory".to_owned(), q(format!("{}Mi", s.ram_mib))),
        (
            "ephemeral-storage".to_owned(),
            q(format!("{}G", s.storage_gb)),
        ),
        ("pods".to_owned(), q("110".into())),
    ]);
    if s.gpu > 0 {
        capacity.insert("nvidia.com/gpu".into(), q(s.gpu.to_string()));
    }
    k8s::Node {
        metadata: Some(k8s::ObjectMeta {
            name: Some(name),
            labels,
            annotations: HashMap::new(),
        }),
        spec: Some(k8s::NodeSpec {
            provider_id: None,
            unschedulable: Some(false),
            taints: pool
                .spec
                .taints
                .iter()
                .map(|t| k8s::Taint {
                    key: Some(t.key.clone()),
                    value: Some(t.value.clone()).filter(|v| !v.is_empty()),
                    effect: Some(t.effect.as_str().to_owned()),
                })
                .collect(),
        }),
        status: Some(k8s::NodeStatus {
            allocatable: capacity.clone(),
            capacity,
            conditions: vec![k8s::NodeCondition {
                r#type: Some("Ready".into()),
                status: Some("True".into()),
                reason: Some("KubeletReady".into()),
                message: None,
            }],
        }),
    }
}

#[tonic::async_trait]
impl pb::cloud_provider_server::CloudProvider for CloudProvider {
    async fn node_groups(
        &self,
        req: Request<pb::NodeGroupsRequest>,
    ) -> Answer<pb::NodeGroupsResponse> {
        let c = self.caller(&req).await?;
        let groups = self
            .0
            .app
            .as_autoscaler(&c, self.0.app.autoscaler_groups(&c))
            .await
            .map_err(|e| status_of(&e))?;
        Ok(Response::new(pb::NodeGroupsResponse {
            node_groups: groups.iter().map(node_group).collect(),
        }))
    }

    async fn node_group_for_node(
        &self,
        req: Request<pb::NodeGroupForNodeRequest>,
    ) -> Answer<pb::NodeGroupForNodeResponse> {
        let c = self.caller(&req).await?;
        let provider_id = req
            .get_ref()
            .node
            .as_ref()
            .map(|n| n.provider_id.clone())
            .unwrap_or_default();
        let group = self
            .0
            .app
            .as_autoscaler(&c, self.0.app.autoscaler_group_for_node(&c, &provider_id))
            .await
            .map_err(|e| status_of(&e))?;
        Ok(Response::new(pb::NodeGroupForNodeResponse {
            // An empty id: a node the autoscaler leaves alone.
            node_group: Some(group.as_ref().map(node_group).unwrap_or_default()),
        }))
    }

    async fn pricing_node_price(
        &self,
        req: Request<pb::PricingNodePriceRequest>,
    ) -> Answer<pb::PricingNodePriceResponse> {
        let c = self.caller(&req).await?;
        let r = req.get_ref();
        let secs = |t: &Option<prost_types::Timestamp>| t.as_ref().map_or(0, |t| t.seconds);
        let hours = (secs(&r.end_timestamp) - secs(&r.start_timestamp)) as f64 / 3600.0;
        let provider_id = r
            .node
            .as_ref()
            .map(|n| n.provider_id.clone())
            .unwrap_or_default();
        let price = self
            .0
            .app
            .as_autoscaler(
                &c,
                self.0.app.autoscaler_node_price(&c, &provider_id, hours),
            )
            .await
            .map_err(|e| status_of(&e))?;
        Ok(Response::new(pb::PricingNodePriceResponse { price }))
    }

    async fn pricing_pod_price(
        &self,
        req: Request<pb::PricingPodPriceRequest>,
    ) -> Answer<pb::PricingPodPriceResponse> {
        self.caller(&req).await?;
        Err(Status::unimplemented("meson prices nodes, not pods"))
    }

    async fn gpu_label(&self, req: Request<pb::GpuLabelRequest>) -> Answer<pb::GpuLabelResponse> {
        self.caller(&req).await?;
        Ok(Response::new(pb::GpuLabelResponse {
            label: meson_kaas::sealed::GPU_LABEL.into(),
        }))
    }

    async fn get_available_gpu_types(
        &self,
        req: Request<pb::GetAvailableGpuTypesRequest>,
    ) -> Answer<pb::GetAvailableGpuTypesResponse> {
        self.caller(&req).await?;
        let (vendor, model) = meson_core::kaas::NODE_GPU_MODEL;
        Ok(Response::new(pb::GetAvailableGpuTypesResponse {
            gpu_types: HashMap::from([(format!("{vendor}-{model}"), prost_types::Any::default())]),
        }))
    }

    async fn cleanup(&self, req: Request<pb::CleanupRequest>) -> Answer<pb::CleanupResponse> {
        self.caller(&req).await?;
        Ok(Response::new(pb::CleanupResponse {}))
    }

    async fn refresh(&self, req: Request<pb::RefreshRequest>) -> Answer<pb::RefreshResponse> {
        self.caller(&req).await?;
        Ok(Response::new(pb::RefreshResponse {}))
    }

    async fn node_group_target_size(
        &self,
        req: Request<pb::NodeGroupTargetSizeRequest>,
    ) -> Answer<pb::NodeGroupTargetSizeResponse> {
        let c = self.caller(&req).await?;
        let g = self.group(&c, &req.get_ref().id).await?;
        Ok(Response::new(pb::NodeGroupTargetSizeResponse {
            target_size: i32::try_from(g.spec.desired_nodes).unwrap_or(i32::MAX),
        }))
    }

    async fn node_group_increase_size(
        &self,
        req: Request<pb::NodeGroupIncreaseSizeRequest>,
    ) -> Answer<pb::NodeGroupIncreaseSizeResponse> {
        let c = self.caller(&req).await?;
        let g = self.group(&c, &req.get_ref().id).await?;
        let f = self.0.app.autoscaler_increase(&c, &g, req.get_ref().delta);
        self.resize(&c, "NodeGroupIncreaseSize", "cluster_pool_update", &g, f)
            .await?;
        Ok(Response::new(pb::NodeGroupIncreaseSizeResponse {}))
    }

    async fn node_group_delete_nodes(
        &self,
        req: Request<pb::NodeGroupDeleteNodesRequest>,
    ) -> Answer<pb::NodeGroupDeleteNodesResponse> {
        let c = self.caller(&req).await?;
        let g = self.group(&c, &req.get_ref().id).await?;
        let ids: Vec<String> = req
            .get_ref()
            .nodes
            .iter()
            .map(|n| n.provider_id.clone())
            .collect();
        let f = self.0.app.autoscaler_delete_nodes(&c, &g, &ids);
        self.resize(
            &c,
            "NodeGroupDeleteNodes",
            "cluster_pool_delete_nodes",
            &g,
            f,
        )
        .await?;
        Ok(Response::new(pb::NodeGroupDeleteNodesResponse {}))
    }

    async fn node_group_decrease_target_size(
        &self,
        req: Request<pb::NodeGroupDecreaseTargetSizeRequest>,
    ) -> Answer<pb::NodeGroupDecreaseTargetSizeResponse> {
        let c = self.caller(&req).await?;
        let g = self.group(&c, &req.get_ref().id).await?;
        let f = self
            .0
            .app
            .autoscaler_decrease_target(&c, &g, req.get_ref().delta);
        self.resize(
            &c,
            "NodeGroupDecreaseTargetSize",
            "cluster_pool_update",
            &g,
            f,
        )
        .await?;
        Ok(Response::new(pb::NodeGroupDecreaseTargetSizeResponse {}))
    }

    async fn node_group_nodes(
        &self,
        req: Request<pb::NodeGroupNodesRequest>,
    ) -> Answer<pb::NodeGroupNodesResponse> {
        let c = self.caller(&req).await?;
        let g = self.group(&c, &req.get_ref().id).await?;
        let nodes = self
            .0
            .app
            .as_autoscaler(&c, self.0.app.autoscaler_nodes(&c, &g))
            .await
            .map_err(|e| status_of(&e))?;
        Ok(Response::new(pb::NodeGroupNodesResponse {
            instances: nodes.iter().map(instance).collect(),
        }))
    }

    async fn node_group_template_node_info(
        &self,
        req: Request<pb::NodeGroupTemplateNodeInfoRequest>,
    ) -> Answer<pb::NodeGroupTemplateNodeInfoResponse> {
        let c = self.caller(&req).await?;
        let g = self.group(&c, &req.get_ref().id).await?;
        let node = template_node(&g);
        Ok(Response::new(pb::NodeGroupTemplateNodeInfoResponse {
            node_bytes: node.encode_to_vec(),
            node_info: Some(node),
            resource_slice_bytes: Vec::new(),
        }))
    }

    async fn node_group_get_options(
        &self,
        req: Request<pb::NodeGroupAutoscalingOptionsRequest>,
    ) -> Answer<pb::NodeGroupAutoscalingOptionsResponse> {
        self.caller(&req).await?;
        Err(Status::unimplemented(
            "node groups use the autoscaler's default options",
        ))
    }
}

/// The autoscaler endpoint's routes: the service, health and reflection.
pub fn routes(state: &AppState) -> tonic::service::Routes {
    let (_reporter, health) = tonic_health::server::health_reporter();
    let routes = tonic::service::Routes::new(health).add_service(
        pb::cloud_provider_server::CloudProviderServer::new(CloudProvider(state.clone())),
    );
    super::with_reflection(routes, meson_proto::EXTERNALGRPC_DESCRIPTOR_SET)
}
