//! Placement of a cluster: each node size (the control plane's, each pool's)
//! surveyed on the candidate targets, and the offers combined per region.
//!
//! A cluster's nodes share one private network (`nodes_subnet`), so every
//! node of a cluster is placed in one provider region; within it each node
//! group goes to the host offering its size cheapest. A region is a
//! candidate when every group fits there. Capacity is checked per node
//! (AtomOS's `canallocate` answers for one VM), not for the group as a whole.

use crate::{Offer, interactive_clients, survey};
use atomos_driver::AtomosClient;
use meson_core::kaas::{KaasSpec, NodeSpecs};
use meson_core::target::Target;
use meson_core::vm::VmSpec;
use meson_core::{Error, Result};
use std::collections::BTreeMap;

/// The name the control plane's node group goes by.
pub const CONTROL_PLANE: &str = "control-plane";

/// Nodes of one size that a cluster needs: its control plane, or a pool.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeGroup {
    /// The pool's name, or [`CONTROL_PLANE`].
    pub name: String,
    /// Where the group comes from in the request, for messages (`req.nodepool[0]`).
    pub path: String,
    /// Nodes at the pool's `desired_nodes` (the control plane's nodes).
    pub nodes: u32,
    /// Nodes at the pool's `max_nodes`.
    pub max_nodes: u32,
    pub specs: NodeSpecs,
}

/// The control plane first, then the pools in request order.
pub fn node_groups(spec: &KaasSpec) -> Vec<NodeGroup> {
    let cp = &spec.control_plane;
    let mut groups = vec![NodeGroup {
        name: CONTROL_PLANE.to_owned(),
        path: "req.control_plane".to_owned(),
        nodes: cp.nodes,
        max_nodes: cp.nodes,
        specs: cp.specs,
    }];
    groups.extend(spec.pools.iter().enumerate().map(|(i, p)| NodeGroup {
        name: p.name.clone(),
        path: format!("req.nodepool[{i}]"),
        nodes: p.desired_nodes,
        max_nodes: p.max_nodes,
        specs: p.specs,
    }));
    groups
}

/// One group's nodes in a region: the host offering them cheapest.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupOffer {
    pub group: NodeGroup,
    /// The price of one node there.
    pub offer: Offer,
}

impl GroupOffer {
    /// `(hourly, monthly)` for `nodes` nodes.
    pub fn price(&self, nodes: u32) -> (f64, f64) {
        let p = &self.offer.placement;
        (
            money(p.price_hourly * f64::from(nodes)),
            money(p.price_monthly * f64::from(nodes)),
        )
    }
}

/// A region that can host the whole cluster, and what it would cost.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterOffer {
    pub provider: String,
    pub region: String,
    pub continent: String,
    /// One per node group, in [`node_groups`] order (control plane first).
    pub groups: Vec<GroupOffer>,
    /// Every group at its `nodes`.
    pub hourly: f64,
    pub monthly: f64,
    /// Every group at its `max_nodes`.
    pub max_hourly: f64,
    pub max_monthly: f64,
    pub currency: String,
}

/// The regions that can host a cluster, cheapest first (never empty).
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterSurvey {
    pub offers: Vec<ClusterOffer>,
    /// The most targets that did not answer in any one size's survey.
    pub unanswered: usize,
}

/// Sums of prices are rounded to a millionth, so that 3 × 0.1 is 0.3.
fn money(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// Surveys the enabled `targets` for every node size of `spec` (each
/// distinct size once, in parallel) and combines the offers per region.
/// `resource_unavailable` names the node group that fits nowhere, or says
/// that no single region fits them all.
pub async fn survey_cluster(targets: Vec<Target>, spec: &KaasSpec) -> Result<ClusterSurvey> {
    let candidates = interactive_clients(targets)?;
    let groups = node_groups(spec);
    let mut sizes: Vec<NodeSpecs> = Vec::new();
    for g in &groups {
        if !sizes.contains(&g.specs) {
            sizes.push(g.specs);
        }
    }
    let vms: Vec<VmSpec> = sizes
        .iter()
        .map(|s| spec.node_vm_spec(&spec.name, s))
        .collect();
    let surveys = futures::future::join_all(vms.iter().map(|vm| {
        let c: Vec<(Target, AtomosClient)> = candidates.clone();
        survey(c, vm)
    }))
    .await;

    let mut by_size = Vec::with_capacity(sizes.len());
    let mut unanswered = 0;
    for (size, result) in sizes.iter().zip(surveys) {
        match result {
            Ok(s) => {
                unanswered = unanswered.max(s.unanswered);
                by_size.push((*size, s.into_offers()));
            }
            Err(e) => {
                let err: Error = e.into();
                let Error::InsufficientCapacity { reason } = err else {
                    return Err(err);
                };
                let who: Vec<String> = groups
                    .iter()
                    .filter(|g| &g.specs == size)
                    .map(describe)
                    .collect();
                return Err(Error::InsufficientCapacity {
                    reason: format!("{} fits nowhere: {reason}", who.join(" and ")),
                });
            }
        }
    }
    let offers_of = |g: &NodeGroup| -> &[Offer] {
        by_size
            .iter()
            .find(|(s, _)| s == &g.specs)
            .map_or(&[], |(_, o)| o.as_slice())
    };
    let offers = combine(&groups, offers_of);
    if offers.is_empty() {
        let regions = |g: &NodeGroup| {
            let mut r: Vec<String> = offers_of(g)
                .iter()
                .map(|o| format!("{}/{}", o.placement.provider, o.placement.region))
                .collect();
            r.sort();
            r.dedup();
            format!("{} fits in {}", describe(g), r.join(", "))
        };
        return Err(Error::InsufficientCapacity {
            reason: format!(
                "no single region can host every node of cluster '{}' (its nodes share one private network): {}",
                spec.name,
                groups.iter().map(regions).collect::<Vec<_>>().join("; ")
            ),
        });
    }
    Ok(ClusterSurvey { offers, unanswered })
}

fn describe(g: &NodeGroup) -> String {
    if g.name == CONTROL_PLANE {
        format!("the control plane ({})", g.path)
    } else {
        format!("node pool '{}' ({})", g.name, g.path)
    }
}

/// The regions where every group has an offer (in the control plane's
/// currency), each group at its cheapest host there; cheapest region first.
pub fn combine<'a>(
    groups: &[NodeGroup],
    offers_of: impl Fn(&NodeGroup) -> &'a [Offer],
) -> Vec<ClusterOffer> {
    // (provider, region) -> continent, in a stable order.
    let mut regions: BTreeMap<(String, String), String> = BTreeMap::new();
    if let Some(first) = groups.first() {
        for o in offers_of(first) {
            let p = &o.placement;
            regions
                .entry((p.provider.clone(), p.region.clone()))
                .or_insert_with(|| o.continent.clone());
        }
    }
    let mut out = Vec::new();
    'regions: for ((provider, region), continent) in regions {
        let mut chosen = Vec::with_capacity(groups.len());
        let mut currency: Option<String> = None;
        for g in groups {
            // Offers come cheapest first: the first one here is the one.
            let best = offers_of(g).iter().find(|o| {
                let p = &o.placement;
                p.provider == provider
                    && p.region == region
                    && currency.as_ref().is_none_or(|c| c == &p.currency)
            });
            let Some(best) = best else {
                continue 'regions;
            };
            currency.get_or_insert_with(|| best.placement.currency.clone());
            chosen.push(GroupOffer {
                group: g.clone(),
                offer: best.clone(),
            });
        }
        let sum = |f: &dyn Fn(&GroupOffer) -> f64| money(chosen.iter().map(f).sum());
        out.push(ClusterOffer {
            hourly: sum(&|g| g.price(g.group.nodes).0),
            monthly: sum(&|g| g.price(g.group.nodes).1),
            max_hourly: sum(&|g| g.price(g.group.max_nodes).0),
            max_monthly: sum(&|g| g.price(g.group.max_nodes).1),
            currency: currency.unwrap_or_else(|| "EUR".to_owned()),
            provider,
            region,
            continent,
            groups: chosen,
        });
    }
    out.sort_by(|a, b| {
        a.hourly
            .total_cmp(&b.hourly)
            .then_with(|| (&a.provider, &a.region).cmp(&(&b.provider, &b.region)))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use meson_core::vm::Placement;

    fn offer(host: &str, provider: &str, region: &str, hourly: f64) -> Offer {
        Offer {
            placement: Placement {
                target_id: meson_core::TargetId::new(),
                host: host.into(),
                provider: provider.into(),
                region: region.into(),
                price_hourly: hourly,
                price_monthly: hourly * 730.0,
                currency: "EUR".into(),
            },
            continent: "europe".into(),
        }
    }

    fn group(name: &str, nodes: u32, max_nodes: u32, cpu: u32) -> NodeGroup {
        NodeGroup {
            name: name.into(),
            path: format!("req.{name}"),
            nodes,
            max_nodes,
            specs: NodeSpecs {
                cpu,
                ram_mib: 4096,
                storage_gb: 40,
                gpu: 0,
            },
        }
    }

    #[test]
    fn regions_where_every_group_fits_cheapest_host_each_cheapest_region_first() {
        let cp = group(CONTROL_PLANE, 1, 1, 4);
        let pool = group("web", 3, 5, 2);
        let cp_offers = vec![
            offer("a-1", "aruba", "it", 0.1),
            offer("o-1", "ovh", "fr", 0.2),
            offer("o-2", "ovh", "fr", 0.3),
            offer("i-1", "ionos", "de", 0.05),
        ];
        let pool_offers = vec![
            offer("o-2", "ovh", "fr", 0.05),
            offer("a-1", "aruba", "it", 0.1),
            offer("o-1", "ovh", "fr", 0.1),
        ];
        let groups = [cp.clone(), pool.clone()];
        let offers = combine(&groups, |g| {
            if g.name == CONTROL_PLANE {
                &cp_offers
            } else {
                &pool_offers
            }
        });
        // ionos has no host for the pool.
        assert_eq!(offers.len(), 2);
        let ovh = &offers[0];
        assert_eq!((ovh.provider.as_str(), ovh.region.as_str()), ("ovh", "fr"));
        assert_eq!(ovh.groups[0].offer.placement.host, "o-1");
        assert_eq!(ovh.groups[1].offer.placement.host, "o-2");
        // 0.2 + 3 × 0.05; at max 0.2 + 5 × 0.05.
        assert_eq!(ovh.hourly, 0.35);
        assert_eq!(ovh.max_hourly, 0.45);
        let aruba = &offers[1];
        assert_eq!(aruba.hourly, 0.4);
        assert_eq!(aruba.monthly, money(0.4 * 730.0));
    }

    #[test]
    fn no_common_region_means_no_offer() {
        let cp_offers = vec![offer("a-1", "aruba", "it", 0.1)];
        let pool_offers = vec![offer("o-1", "ovh", "fr", 0.1)];
        let groups = [group(CONTROL_PLANE, 1, 1, 4), group("web", 1, 1, 2)];
        let offers = combine(&groups, |g| {
            if g.name == CONTROL_PLANE {
                &cp_offers
            } else {
                &pool_offers
            }
        });
        assert!(offers.is_empty());
    }
}
