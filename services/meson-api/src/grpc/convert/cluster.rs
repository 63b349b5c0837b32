//! Clusters and their nodes: answers, and requests as the REST ones.

use super::json::Obj;
use super::meta::{map, price, timestamp};
use super::pool::{pool, pool_create};
use meson_proto::meson::v1 as pb;
use meson_types as wire;
use serde_json::{Value, json};

pub(super) fn node_specs(s: wire::cluster::NodeSpecs) -> pb::NodeSpecs {
    pb::NodeSpecs {
        cpu: s.cpu,
        ram: s.ram,
        storage: s.storage,
        gpu: s.gpu,
    }
}

pub(super) fn node_specs_request(s: &pb::NodeSpecs) -> Obj {
    Obj::new()
        .num("cpu", s.cpu)
        .num("ram", s.ram as f64)
        .num("storage", s.storage)
        .num("gpu", s.gpu)
}

pub fn cluster(c: wire::cluster::Cluster) -> pb::Cluster {
    pb::Cluster {
        id: c.id.to_string(),
        name: c.name,
        status: c.status,
        error_message: c.error_message,
        kubernetes_version: c.kubernetes_version,
        update_policy: c.update_policy,
        provider: c.provider,
        region: c.region,
        network: Some(pb::ClusterNetwork {
            cidr: c.network.cidr,
            dhcp: c.network.dhcp,
            range: Some(range(c.network.range)),
        }),
        control_plane: Some(pb::ControlPlane {
            endpoint: c.control_plane.endpoint,
            nodes: c.control_plane.nodes,
            specs: Some(node_specs(c.control_plane.specs)),
        }),
        pools: c.pools.into_iter().map(pool).collect(),
        cni: c.cni,
        pod_cidr: c.pod_cidr,
        service_cidr: c.service_cidr,
        labels: map(&c.labels),
        created: Some(timestamp(c.created)),
        price: c.price.map(price),
    }
}

pub fn node(n: wire::cluster::Node) -> pb::Node {
    pb::Node {
        id: n.id.to_string(),
        name: n.name,
        role: n.role,
        pool: n.pool.map(|p| p.to_string()),
        status: n.status,
        error_message: n.error_message,
        kubernetes_version: n.kubernetes_version,
        ip: n.ip,
        host: n.host,
        provider_id: n.provider_id,
        created: Some(timestamp(n.created)),
    }
}

/// `CreateClusterRequest` as the KaaS payload (`{"req": {...}, "provider",
/// ...}`). A `req` given, even empty, is sent, so the parser names what it
/// lacks (`req.name`, `req.nodepool`...) rather than `req` itself.
pub fn cluster_create(r: &pb::CreateClusterRequest) -> Value {
    let req = r.req.as_ref().map(|q| {
        let subnet = q.nodes_subnet.as_ref().map(|s| {
            Obj::new()
                .opt("dhcp", s.dhcp)
                .str("subnet_netmask", &s.subnet_netmask)
                .str("start_address", &s.start_address)
                .str("last_address", &s.last_address)
                .str("gateway", &s.gateway)
        });
        let control_plane = q.control_plane.as_ref().map(|c| {
            Obj::new()
                .num("nodes", c.nodes)
                .obj("specs", c.specs.as_ref().map(node_specs_request))
        });
        let mut o = Obj::new()
            .str("name", &q.name)
            .labels("metadata", &q.metadata);
        if !q.nodepool.is_empty() {
            o = o.opt(
                "nodepool",
                Some(Value::Array(q.nodepool.iter().map(pool_create).collect())),
            );
        }
        o.obj("nodes_subnet", subnet)
            .str("update_policy", &q.update_policy)
            .str("kubernetes_version", &q.kubernetes_version)
            .obj("control_plane", control_plane)
            .str("pod_cidr", &q.pod_cidr)
            .str("service_cidr", &q.service_cidr)
            .str("cni", &q.cni)
            .value()
    });
    Obj::new()
        .opt("req", req)
        .str("provider", &r.provider)
        .str("continent", &r.continent)
        .str("region", &r.region)
        .labels("labels", &r.labels)
        .value()
}

/// `UpdateClusterRequest` as the REST PATCH (`{labels, update_policy}`).
pub fn cluster_update(r: &pb::UpdateClusterRequest) -> Value {
    Obj::new()
        .opt("labels", r.labels.as_ref().map(|l| json!(l.labels)))
        .opt("update_policy", r.update_policy.clone())
        .value()
}

/// `UpgradeClusterRequest` as the REST upgrade body.
pub fn cluster_upgrade(r: &pb::UpgradeClusterRequest) -> Value {
    Obj::new()
        .str("kubernetes_version", &r.kubernetes_version)
        .opt("max_surge", r.max_surge)
        .opt("max_unavailable", r.max_unavailable)
        .value()
}

/// A network's address range, as `meson.v1` has it.
pub fn range(r: wire::network::AddressRange) -> pb::AddressRange {
    pb::AddressRange {
        start: r.start,
        last: r.last,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn specs(cpu: u32, ram: u64, storage: u32) -> Option<pb::NodeSpecs> {
        Some(pb::NodeSpecs {
            cpu,
            ram,
            storage,
            gpu: 0,
        })
    }

    #[test]
    fn a_typed_kaas_request_is_the_rest_one() {
        let r = pb::CreateClusterRequest {
            req: Some(pb::KaasRequestSpec {
                name: "test8".into(),
                metadata: [("team".to_owned(), "a".to_owned())].into(),
                nodepool: vec![pb::NodePoolRequest {
                    pool_name: "1poolname".into(),
                    autoscale: false,
                    min_nodes: Some(0),
                    max_nodes: Some(3),
                    desired_nodes: Some(1),
                    specs: specs(2, 4096, 40),
                    billing: "HOURLY".into(),
                    labels: Default::default(),
                    taints: vec!["dedicated=gpu:NoSchedule".into()],
                }],
                nodes_subnet: Some(pb::NodesSubnet {
                    dhcp: Some(true),
                    subnet_netmask: "192.168.1.0/24".into(),
                    start_address: "192.168.1.0".into(),
                    last_address: "192.168.1.24".into(),
                    gateway: String::new(),
                }),
                update_policy: "NEVER_UPDATE".into(),
                kubernetes_version: "1.29.2".into(),
                control_plane: Some(pb::ControlPlaneRequest {
                    nodes: 1,
                    specs: specs(4, 0, 0),
                }),
                ..Default::default()
            }),
            provider: "arubacloud".into(),
            ..Default::default()
        };
        assert_eq!(
            cluster_create(&r),
            json!({"req": {"name": "test8", "metadata": {"team": "a"},
                "nodepool": [{"pool_name": "1poolname", "min_nodes": 0, "max_nodes": 3,
                    "desired_nodes": 1, "specs": {"cpu": 2, "ram": 4096, "storage": 40},
                    "billing": "HOURLY", "taints": ["dedicated=gpu:NoSchedule"]}],
                "nodes_subnet": {"dhcp": true, "subnet_netmask": "192.168.1.0/24",
                    "start_address": "192.168.1.0", "last_address": "192.168.1.24"},
                "update_policy": "NEVER_UPDATE", "kubernetes_version": "1.29.2",
                "control_plane": {"nodes": 1, "specs": {"cpu": 4}}},
                "provider": "arubacloud"})
        );
        // An empty req is still sent: the parser names its fields.
        let empty = pb::CreateClusterRequest {
            req: Some(pb::KaasRequestSpec::default()),
            ..Default::default()
        };
        assert_eq!(cluster_create(&empty), json!({"req": {}}));
        assert_eq!(
            cluster_create(&pb::CreateClusterRequest::default()),
            json!({})
        );
    }

    #[test]
    fn typed_cluster_patches_are_the_rest_ones() {
        let u = pb::UpgradeClusterRequest {
            kubernetes_version: "1.30".into(),
            max_surge: Some(2),
            ..Default::default()
        };
        assert_eq!(
            cluster_upgrade(&u),
            json!({"kubernetes_version": "1.30", "max_surge": 2})
        );
        let c = pb::UpdateClusterRequest {
            labels: Some(pb::Labels::default()),
            update_policy: Some("PATCH_UPDATE".into()),
            ..Default::default()
        };
        assert_eq!(
            cluster_update(&c),
            json!({"labels": {}, "update_policy": "PATCH_UPDATE"})
        );
    }
}
