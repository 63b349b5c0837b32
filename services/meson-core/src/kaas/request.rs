//! The create-cluster request: the payload's top level (placement, labels,
//! `req`) and, inside `req`, the name and metadata; every other section of
//! `req` is read by its own module.

use super::control_plane::parse_control_plane;
use super::networks::{Networks, parse_cni, parse_networks};
use super::pools::parse_pools;
use super::version::{parse_kubernetes_version, parse_update_policy};
use super::{KaasCreate, KaasSpec, MAX_METADATA_BYTES, NODE_DISTRIBUTION, check_cluster_name};
use crate::labels::{self, Labels};
use crate::os::OsImage;
use crate::parse::{Obj, Parser, join};
use crate::target::Target;
use crate::vm::parse_place;
use chrono::NaiveDate;
use serde_json::{Map, Value};

impl KaasCreate {
    /// Parses and validates the KaaS payload (docs/payloads.md), naming every
    /// bad field. `today` picks the default Kubernetes version and which
    /// are past end of life ([`crate::kubernetes::today`] in production).
    pub fn parse(body: &Value, today: NaiveDate) -> crate::Result<KaasCreate> {
        Self::parse_inner(body, None, today)
    }

    /// [`KaasCreate::parse`], plus the provider/continent/region constraints
    /// checked against `targets`, named together with every other bad field.
    pub fn parse_placed(
        body: &Value,
        targets: &[Target],
        today: NaiveDate,
    ) -> crate::Result<KaasCreate> {
        Self::parse_inner(body, Some(targets), today)
    }

    fn parse_inner(
        body: &Value,
        targets: Option<&[Target]>,
        today: NaiveDate,
    ) -> crate::Result<KaasCreate> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;

        let provider = parse_place(&mut p, &mut root, "provider");
        let continent = parse_place(&mut p, &mut root, "continent");
        let region = parse_place(&mut p, &mut root, "region");
        if let Some(targets) = targets {
            crate::vm::constraint_errors(targets, [&provider, &continent, &region], &mut p.errors);
        }
        let root_labels = match root.get("labels") {
            (path, Some(v)) => Some(labels::parse(&path, v, &mut p.errors)),
            (_, None) => None,
        };

        let mut spec = None;
        let mut req_labels = None;
        if let Some(mut req) = p.object(&mut root, "req", true) {
            req_labels = match req.get("labels") {
                (path, Some(_)) if root_labels.is_some() => {
                    p.errors.add(
                        path,
                        "give the cluster's labels once, here or at the top level",
                    );
                    Some(None)
                }
                (path, Some(v)) => Some(labels::parse(&path, v, &mut p.errors)),
                (_, None) => None,
            };
            spec = parse_req(&mut p, &mut req, [provider, continent, region], today);
            p.done(req);
        }
        p.done(root);

        let labels = match (root_labels, req_labels) {
            (Some(l), _) | (None, Some(l)) => l,
            (None, None) => Some(Labels::new()),
        };
        let Parser { errors, warnings } = p;
        match (spec, labels) {
            (Some(spec), Some(labels)) if errors.is_empty() => Ok(KaasCreate {
                spec,
                labels,
                warnings,
            }),
            _ => Err(errors
                .into_error()
                .unwrap_or_else(|| crate::Error::invalid("(body)", "invalid request"))),
        }
    }
}

/// Everything inside `req`.
fn parse_req(
    p: &mut Parser,
    req: &mut Obj<'_>,
    [provider, continent, region]: [Option<String>; 3],
    today: NaiveDate,
) -> Option<KaasSpec> {
    let name = p
        .string(req, "name", true)
        .and_then(|(path, s)| check_cluster_name(&mut p.errors, &path, s).then(|| s.to_owned()));

    let metadata = match req.get("metadata") {
        (_, None) => Some(Map::new()),
        (path, Some(Value::Object(m))) => {
            if serde_json::to_string(m).map_or(usize::MAX, |s| s.len()) > MAX_METADATA_BYTES {
                p.errors.add(
                    path,
                    format!("must be at most {MAX_METADATA_BYTES} bytes of JSON"),
                );
                None
            } else {
                Some(m.clone())
            }
        }
        (path, Some(_)) => {
            p.errors.add(path, "must be an object");
            None
        }
    };

    let version = parse_kubernetes_version(p, req, today);
    let update_policy = parse_update_policy(p, req);
    let cni = parse_cni(p, req);
    let control_plane = parse_control_plane(p, req);
    let pools = parse_pools(p, req);
    let nodes_max = match (&control_plane, &pools) {
        (Some(cp), Some(pools)) => Some(cp.nodes + pools.iter().map(|p| p.max_nodes).sum::<u32>()),
        _ => None,
    };
    let Networks {
        nodes_subnet,
        pod_cidr,
        service_cidr,
    } = parse_networks(p, req, nodes_max);

    let node_os = OsImage::lookup(NODE_DISTRIBUTION);
    if node_os.is_none() {
        p.errors
            .add(req.path(), format!("no node image for {NODE_DISTRIBUTION}"));
    }

    Some(KaasSpec {
        name: name?,
        metadata: metadata?,
        kubernetes_version: version?,
        update_policy: update_policy?,
        control_plane: control_plane?,
        pools: pools?,
        nodes_subnet: nodes_subnet?,
        pod_cidr: pod_cidr?,
        service_cidr: service_cidr?,
        cni: cni?,
        node_os: node_os?,
        provider,
        continent,
        region,
    })
}

/// An optional string field naming one of an enum's values (any case).
pub(super) fn enum_field<T>(
    p: &mut Parser,
    o: &mut Obj<'_>,
    key: &'static str,
    default: T,
    parse: fn(&str) -> Option<T>,
    choices: &str,
) -> Option<T> {
    match p.string(o, key, false) {
        Some((path, s)) => parse(s).or_else(|| {
            p.errors
                .add(path, format!("must be one of {choices}, got '{s}'"));
            None
        }),
        None if p.errors.has(&join(o.path(), key)) => None,
        None => Some(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kaas::fixtures::*;
    use crate::kaas::*;
    use crate::kubernetes::{self, KubeVersion};
    use serde_json::json;

    #[test]
    fn the_seed_payload_is_accepted_as_written() {
        let k = KaasCreate::parse(&seed(), today()).unwrap();
        let s = &k.spec;
        assert_eq!(s.name, "test8");
        assert_eq!(s.kubernetes_version, KubeVersion::new(1, 29, 2));
        assert_eq!(s.update_policy, UpdatePolicy::NeverUpdate);
        assert_eq!(s.provider.as_deref(), Some("arubacloud"));
        assert_eq!(s.pools.len(), 1);
        let pool = &s.pools[0];
        assert_eq!(pool.name, "1poolname");
        assert_eq!(
            (pool.min_nodes, pool.max_nodes, pool.desired_nodes),
            (3, 3, 3)
        );
        assert!(!pool.autoscale);
        assert_eq!(
            pool.specs,
            NodeSpecs {
                cpu: 2,
                ram_mib: 4096,
                storage_gb: 40,
                gpu: 0
            }
        );
        assert_eq!(pool.billing, Billing::Hourly);
        assert!(s.nodes_subnet.dhcp);
        assert_eq!(s.nodes_subnet.cidr.to_string(), "192.168.1.0/24");
        assert_eq!(s.nodes_subnet.range.start, ip("192.168.1.1"));
        assert_eq!(s.nodes_subnet.range.last, ip("192.168.1.24"));
        assert_eq!(s.nodes_subnet.gateway, ip("192.168.1.1"));
        assert_eq!(
            s.control_plane,
            ControlPlaneSpec {
                nodes: 1,
                specs: DEFAULT_CONTROL_PLANE_SPECS
            }
        );
        assert_eq!(s.pod_cidr.to_string(), DEFAULT_POD_CIDR);
        assert_eq!(s.service_cidr.to_string(), DEFAULT_SERVICE_CIDR);
        assert_eq!(s.cni, Cni::Calico);
        assert!(k.labels.is_empty());
        assert_eq!((s.desired_nodes(), s.max_nodes()), (4, 4));
        // Two remarks: the network address was clamped off, and 1.29 is past end of life.
        let w: Vec<(&str, &str)> = k
            .warnings
            .iter()
            .map(|w| (w.field.as_str(), w.message.as_str()))
            .collect();
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(w[0].0, "req.kubernetes_version");
        assert!(w[0].1.contains("end of life"), "{w:?}");
        assert_eq!(w[1].0, "req.nodes_subnet.start_address");
        assert!(w[1].1.contains("starts at 192.168.1.1"), "{w:?}");
    }

    #[test]
    fn quirks_booleans_cases_aliases_and_defaults() {
        let v = with(|v| {
            v["req"]["nodes_subnet"]["dhcp"] = json!("FALSE");
            v["req"]["nodepool"][0]["autoscale"] = json!("tRUE");
            v["req"]["nodepool"][0]["min_nodes"] = json!(1);
            v["req"]["nodepool"][0]["billing"] = json!("monthly");
            v["req"]["update_policy"] = json!("manual");
            v["req"]["kubernetes_version"] = json!("v1.30");
            v["req"]["cni"] = json!("Cilium");
            v.as_object_mut().unwrap().remove("provider");
        });
        let k = KaasCreate::parse(&v, today()).unwrap();
        let s = &k.spec;
        assert!(!s.nodes_subnet.dhcp);
        assert!(s.pools[0].autoscale);
        assert_eq!(s.pools[0].min_nodes, 1);
        assert_eq!(s.pools[0].billing, Billing::Monthly);
        assert_eq!(s.update_policy, UpdatePolicy::NeverUpdate);
        assert_eq!(s.kubernetes_version, KubeVersion::new(1, 30, 14));
        assert_eq!(s.cni, Cni::Cilium);
        assert_eq!(s.provider, None);
        assert!(
            k.warnings
                .iter()
                .any(|w| w.field == "req.kubernetes_version" && w.message.contains("1.30.14"))
        );

        // JSON booleans, and everything optional left out.
        let v = json!({"req": {"name": "c", "nodepool": [{"pool_name": "p", "desired_nodes": 2}],
            "nodes_subnet": {"dhcp": true, "subnet_netmask": "10.0.0.0/24"}}});
        let k = KaasCreate::parse(&v, today()).unwrap();
        let s = &k.spec;
        assert_eq!(
            s.kubernetes_version,
            kubernetes::default_release(today()).version
        );
        assert_eq!((s.pools[0].min_nodes, s.pools[0].max_nodes), (2, 2));
        assert_eq!(s.pools[0].specs, DEFAULT_NODE_SPECS);
        assert_eq!(s.nodes_subnet.range.start, ip("10.0.0.1"));
        assert_eq!(s.nodes_subnet.range.last, ip("10.0.0.254"));
        assert!(k.warnings.is_empty(), "{:?}", k.warnings);

        // desired defaults to min, max to the larger.
        let v = json!({"req": {"name": "c", "nodepool": [{"pool_name": "p", "min_nodes": 0, "max_nodes": 5, "autoscale": 1}],
            "nodes_subnet": {"subnet_netmask": "10.0.0.0/24"}}});
        let pool = &KaasCreate::parse(&v, today()).unwrap().spec.pools[0];
        assert_eq!(
            (pool.min_nodes, pool.desired_nodes, pool.max_nodes),
            (0, 0, 5)
        );
    }

    #[test]
    fn extras_control_plane_networks_labels_and_taints() {
        let v = with(|v| {
            v["req"]["control_plane"] = json!({"nodes": 3, "specs": {"cpu": 8, "ram": 16384}});
            v["req"]["pod_cidr"] = json!("172.20.0.0/16");
            v["req"]["service_cidr"] = json!("172.21.0.0/16");
            v["req"]["labels"] = json!({"team": "infra"});
            v["req"]["nodepool"][0]["labels"] = json!({"example.com/tier": "web"});
            v["req"]["nodepool"][0]["taints"] = json!(["dedicated=gpu:NoSchedule", "spot:noexecute", {"key": "a", "effect": "PreferNoSchedule"}]);
        });
        let k = KaasCreate::parse(&v, today()).unwrap();
        let s = &k.spec;
        assert_eq!(s.control_plane.nodes, 3);
        assert_eq!(
            s.control_plane.specs,
            NodeSpecs {
                cpu: 8,
                ram_mib: 16384,
                storage_gb: 40,
                gpu: 0
            }
        );
        assert_eq!(s.pod_cidr.to_string(), "172.20.0.0/16");
        assert_eq!(k.labels["team"], "infra");
        assert_eq!(s.pools[0].labels["example.com/tier"], "web");
        let taints: Vec<String> = s.pools[0].taints.iter().map(|t| t.to_string()).collect();
        assert_eq!(
            taints,
            [
                "dedicated=gpu:NoSchedule",
                "spot:NoExecute",
                "a:PreferNoSchedule"
            ]
        );
        assert_eq!(s.max_nodes(), 6);

        // Labels at the top level, as for a VM.
        let v = with(|v| v["labels"] = json!({"env": "prod"}));
        assert_eq!(
            KaasCreate::parse(&v, today()).unwrap().labels["env"],
            "prod"
        );
    }

    #[test]
    fn unknown_fields_warn() {
        let v = with(|v| {
            v["colour"] = json!("blue");
            v["req"]["nodepool"][0]["specs"]["turbo"] = json!(true);
            v["req"]["nodes_subnet"]["vlan"] = json!(7);
        });
        let k = KaasCreate::parse(&v, today()).unwrap();
        let w: Vec<&str> = k.warnings.iter().map(|w| w.field.as_str()).collect();
        for f in [
            "colour",
            "req.nodepool[0].specs.turbo",
            "req.nodes_subnet.vlan",
        ] {
            assert!(w.contains(&f), "{f} not in {w:?}");
        }
    }

    #[test]
    fn every_bad_field_is_named_at_once() {
        let v = with(|v| {
            v["req"]["name"] = json!("bad name");
            v["req"]["nodepool"][0]["min_nodes"] = json!(5);
            v["req"]["nodepool"][0]["specs"]["ram"] = json!("4 GiB");
            v["req"]["nodes_subnet"]["last_address"] = json!("192.168.9.9");
            v["req"]["kubernetes_version"] = json!("1.99.0");
            v["req"]["update_policy"] = json!(3);
        });
        assert_eq!(
            refused(&v),
            [
                "req.kubernetes_version",
                "req.name",
                "req.nodepool[0].min_nodes",
                "req.nodepool[0].specs.ram",
                "req.nodes_subnet.last_address",
                "req.update_policy",
            ]
        );
    }

    #[test]
    fn placement_constraints_are_checked_against_targets() {
        let t = Target {
            id: crate::TargetId::new(),
            name: "a".into(),
            host: "127.0.0.1".into(),
            compute_port: 1,
            storage_port: 2,
            network_port: 3,
            auth_port: 4,
            provider: "arubacloud".into(),
            region: "it-ar".into(),
            continent: "europe".into(),
            enabled: true,
        };
        KaasCreate::parse_placed(&seed(), std::slice::from_ref(&t), today()).unwrap();
        let v = with(|v| {
            v["provider"] = json!("ovh");
            v["req"]["name"] = json!("x_y");
        });
        assert_eq!(
            fields(KaasCreate::parse_placed(&v, &[t], today()).unwrap_err()),
            ["provider", "req.name"]
        );
    }

    #[test]
    fn each_bad_request_field_is_named() {
        assert_refusals(vec![
            (with(|v| v["req"]["name"] = json!("Test8")), &["req.name"]),
            (with(|v| v["req"]["name"] = json!("a_b")), &["req.name"]),
            (
                with(|v| v["req"]["name"] = json!("c".repeat(33))),
                &["req.name"],
            ),
            (with(|v| v["req"]["name"] = json!("-x")), &["req.name"]),
            (
                with(|v| {
                    v["req"].as_object_mut().unwrap().remove("name");
                }),
                &["req.name"],
            ),
            (
                with(|v| v["req"]["metadata"] = json!([])),
                &["req.metadata"],
            ),
            (
                with(|v| v["req"]["labels"] = json!({"env": 1})),
                &["req.labels.env"],
            ),
            (
                with(|v| {
                    v["labels"] = json!({});
                    v["req"]["labels"] = json!({});
                }),
                &["req.labels"],
            ),
            (
                with(|v| v["provider"] = json!("Not A Cloud")),
                &["provider"],
            ),
            (with(|v| v["req"] = json!("x")), &["req"]),
            (
                with(|v| {
                    v.as_object_mut().unwrap().remove("req");
                }),
                &["req"],
            ),
            (json!([]), &["(body)"]),
        ]);
    }
}
