//! More of [`super::convert`]: volumes, networks, clusters, pools, nodes,
//! the catalogue and quotes, both ways, by the same rules (answers from the
//! REST wire types; requests as the REST request's JSON, a zero value
//! standing for an absent field).

use super::convert::{Obj, map, price, timestamp, warning};
use meson_proto::meson::v1 as pb;
use meson_types as wire;
use serde_json::{Value, json};

pub fn volume(v: wire::volume::Volume) -> pb::Volume {
    pb::Volume {
        id: v.id.to_string(),
        name: v.name,
        kind: v.kind,
        size: v.size,
        status: v.status,
        vm: v.vm.map(|id| id.to_string()),
        standalone: v.standalone,
        attached_to: v.attached_to.map(|id| id.to_string()),
        labels: map(&v.labels),
        bootable: v.bootable,
        readonly: v.readonly,
        host: v.host,
        provider: v.provider,
        region: v.region,
        created: Some(timestamp(v.created)),
    }
}

/// A `CreateVolumeRequest` as the REST body of `POST /v1/volumes`.
pub fn volume_create(r: &pb::CreateVolumeRequest) -> Value {
    Obj::new()
        .str("name", &r.name)
        .num("size", r.size)
        .labels("labels", &r.labels)
        .str("provider", &r.provider)
        .str("continent", &r.continent)
        .str("region", &r.region)
        .flag("bootable", r.bootable)
        .flag("readonly", r.readonly)
        .value()
}

fn range(r: wire::network::AddressRange) -> pb::AddressRange {
    pb::AddressRange {
        start: r.start,
        last: r.last,
    }
}

pub fn network(n: wire::network::Network) -> pb::Network {
    pb::Network {
        id: n.id.to_string(),
        name: n.name,
        status: n.status,
        labels: map(&n.labels),
        created: Some(timestamp(n.created)),
        cidr: n.cidr,
        gateway: n.gateway,
        dhcp: n.dhcp,
        range: Some(range(n.range)),
        vms: n.vms.iter().map(ToString::to_string).collect(),
    }
}

fn node_specs(s: wire::cluster::NodeSpecs) -> pb::NodeSpecs {
    pb::NodeSpecs {
        cpu: s.cpu,
        ram: s.ram,
        storage: s.storage,
        gpu: s.gpu,
    }
}

pub fn pool(p: wire::cluster::Pool) -> pb::Pool {
    pb::Pool {
        id: p.id.to_string(),
        name: p.name,
        autoscale: p.autoscale,
        min_nodes: p.min_nodes,
        max_nodes: p.max_nodes,
        desired_nodes: p.desired_nodes,
        current_nodes: p.current_nodes,
        specs: Some(node_specs(p.specs)),
        billing: p.billing,
        labels: map(&p.labels),
        taints: p.taints,
    }
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

pub fn flavor(f: wire::catalog::Flavor) -> pb::Flavor {
    pb::Flavor {
        name: f.name,
        description: f.description,
        vcpus: f.vcpus,
        memory_mib: f.memory_mib,
        gpus: f.gpus,
        gpu_model: f.gpu_model,
        cpu_flags: f.cpu_flags,
    }
}

pub fn provider(p: wire::catalog::Provider) -> pb::Provider {
    pb::Provider {
        name: p.name,
        continents: p.continents,
        regions: p
            .regions
            .into_iter()
            .map(|r| pb::Region {
                name: r.name,
                continent: r.continent,
                hosts: r.hosts,
            })
            .collect(),
    }
}

pub fn kubernetes_version(v: wire::catalog::KubernetesVersion) -> pb::KubernetesVersion {
    pb::KubernetesVersion {
        version: v.version,
        minor: v.minor,
        default: v.default,
        deprecated: v.deprecated,
        released: v.released,
        end_of_life: v.end_of_life,
        upgradable_to: v.upgradable_to,
    }
}

pub fn quote(q: wire::quote::Quote) -> pb::Quote {
    pb::Quote {
        provider: q.provider,
        region: q.region,
        continent: q.continent,
        host: q.host,
        price: Some(price(q.price)),
    }
}

pub fn vm_quotes(q: wire::quote::QuoteResponse) -> pb::VmQuotes {
    pb::VmQuotes {
        quotes: q.quotes.into_iter().map(quote).collect(),
        cheapest: Some(quote(q.cheapest)),
        warnings: q.warnings.into_iter().map(warning).collect(),
    }
}

fn group_quote(g: wire::quote::NodeGroupQuote) -> pb::NodeGroupQuote {
    pb::NodeGroupQuote {
        name: g.name,
        nodes: g.nodes,
        max_nodes: g.max_nodes,
        specs: Some(pb::NodeSpecs {
            cpu: g.specs.cpu,
            ram: g.specs.ram,
            storage: g.specs.storage,
            gpu: g.specs.gpu,
        }),
        host: g.host,
        node_price: Some(price(g.node_price)),
        price: Some(price(g.price)),
    }
}

pub fn cluster_quote(q: wire::quote::ClusterQuote) -> pb::ClusterQuote {
    pb::ClusterQuote {
        provider: q.provider,
        region: q.region,
        continent: q.continent,
        control_plane: Some(group_quote(q.control_plane)),
        pools: q.pools.into_iter().map(group_quote).collect(),
        price: Some(price(q.price)),
        max_price: Some(price(q.max_price)),
    }
}

pub fn cluster_quotes(q: wire::quote::KaasQuoteResponse) -> pb::ClusterQuotes {
    pb::ClusterQuotes {
        placements: q.placements.into_iter().map(cluster_quote).collect(),
        cheapest: Some(cluster_quote(q.cheapest)),
        warnings: q.warnings.into_iter().map(warning).collect(),
    }
}

/// `CreateNetworkRequest` as the REST network request.
pub fn network_create(r: &pb::CreateNetworkRequest) -> Value {
    let dhcp_range = r
        .dhcp_range
        .as_ref()
        .map(|d| Obj::new().str("start", &d.start).str("last", &d.last));
    Obj::new()
        .str("name", &r.name)
        .str("cidr", &r.cidr)
        .opt("dhcp", r.dhcp)
        .str("gateway", &r.gateway)
        .obj("dhcp_range", dhcp_range)
        .labels("labels", &r.labels)
        .value()
}

fn node_specs_request(s: &pb::NodeSpecs) -> Obj {
    Obj::new()
        .num("cpu", s.cpu)
        .num("ram", s.ram as f64)
        .num("storage", s.storage)
        .num("gpu", s.gpu)
}

/// A `NodePoolRequest` as the REST pool: an item of `req.nodepool`, or the
/// body of `POST /v1/clusters/{id}/pools`.
pub fn pool_create(p: &pb::NodePoolRequest) -> Value {
    Obj::new()
        .str("pool_name", &p.pool_name)
        .flag("autoscale", p.autoscale)
        .opt("min_nodes", p.min_nodes)
        .opt("max_nodes", p.max_nodes)
        .opt("desired_nodes", p.desired_nodes)
        .obj("specs", p.specs.as_ref().map(node_specs_request))
        .str("billing", &p.billing)
        .labels("labels", &p.labels)
        .list("taints", &p.taints)
        .value()
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

/// `UpdatePoolRequest` as the REST PATCH: only the fields set.
pub fn pool_update(r: &pb::UpdatePoolRequest) -> Value {
    Obj::new()
        .opt("desired_nodes", r.desired_nodes)
        .opt("min_nodes", r.min_nodes)
        .opt("max_nodes", r.max_nodes)
        .opt("autoscale", r.autoscale)
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn typed_patches_and_bodies_are_the_rest_ones() {
        let n = pb::CreateNetworkRequest {
            name: "db".into(),
            cidr: "192.168.10.0/24".into(),
            dhcp: Some(false),
            dhcp_range: Some(pb::AddressRange {
                start: "192.168.10.10".into(),
                last: "192.168.10.20".into(),
            }),
            ..Default::default()
        };
        assert_eq!(
            network_create(&n),
            json!({"name": "db", "cidr": "192.168.10.0/24", "dhcp": false,
                "dhcp_range": {"start": "192.168.10.10", "last": "192.168.10.20"}})
        );
        let p = pb::UpdatePoolRequest {
            desired_nodes: Some(0),
            autoscale: Some(false),
            ..Default::default()
        };
        assert_eq!(
            pool_update(&p),
            json!({"desired_nodes": 0, "autoscale": false})
        );
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
