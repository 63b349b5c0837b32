//! The catalogue and quotes.

use super::meta::{price, warning};
use meson_proto::meson::v1 as pb;
use meson_types as wire;

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
