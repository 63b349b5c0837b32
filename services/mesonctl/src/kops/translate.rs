//! A `kops create cluster` line as meson's KaaS request: each field read
//! by its own module, the request put together here.

use super::args::{Parsed, parse_args};
use super::cidr::{nodes_network, nodes_subnet, pod_service_cidrs};
use super::cni::cni;
use super::counts::counts;
use super::flags::report_ignored;
use super::labels::labels;
use super::lexer::shell_words;
use super::name::names;
use super::node_size::{NodeSize, node_sizes};
use super::placement::placement;
use super::{Catalog, Report, Translation};
use meson_types::kaas::{ControlPlaneRequest, KaasCreateRequest, KaasRequestSpec, NodePoolRequest};
use serde_json::{Map, Value, json};

/// The pool the translated nodes form (kOps' instance group is `nodes-<zone>`).
pub const POOL_NAME: &str = "nodes";

/// Translates the words of a `kops create cluster` command line (with or
/// without the leading `kops create cluster`; one word holding the whole
/// line is split as a shell would).
pub fn translate(args: &[String], catalog: &Catalog) -> Result<Translation, String> {
    let words = command_words(args)?;
    let mut reports = Vec::new();
    let p = parse_args(&words, &mut reports)?;
    report_ignored(&p, &mut reports)?;
    let (name, kops_name) = names(&p, &mut reports)?;
    report_other_cloud(&p, &mut reports);
    let (nodes, control_planes) = counts(&p, &mut reports)?;
    let (worker, control_plane) = node_sizes(&p, &mut reports)?;
    let subnet = nodes_network(p.list("network-cidr"), &mut reports);
    let cni = cni(p.last("networking"), &mut reports);
    let place = placement(
        p.list("zones"),
        p.list("control-plane-zones"),
        catalog,
        &mut reports,
    );
    let labels = labels(p.last("cloud-labels"), &mut reports);
    let kubernetes_version = kubernetes_version(&p, &mut reports);

    let (pod_cidr, service_cidr) = pod_service_cidrs(&subnet);
    let (mut region, mut continent) = (None, None);
    match place {
        Some(("region", r)) => region = Some(r),
        Some((_, c)) => continent = Some(c),
        None => {}
    }
    let request = KaasCreateRequest {
        req: KaasRequestSpec {
            name,
            metadata: Some(metadata(&kops_name, &worker, &control_plane)),
            nodepool: vec![NodePoolRequest {
                pool_name: POOL_NAME.into(),
                autoscale: Some(false),
                min_nodes: Some(nodes),
                max_nodes: Some(nodes),
                desired_nodes: Some(nodes),
                specs: Some(worker.specs.into()),
                billing: Some("HOURLY".into()),
                ..NodePoolRequest::default()
            }],
            nodes_subnet: nodes_subnet(subnet),
            update_policy: Some("NEVER_UPDATE".into()),
            kubernetes_version,
            control_plane: Some(ControlPlaneRequest {
                nodes: Some(control_planes),
                specs: Some(control_plane.specs.into()),
            }),
            pod_cidr: pod_cidr.map(str::to_owned),
            service_cidr: service_cidr.map(str::to_owned),
            cni: Some(cni.into()),
            labels: None,
        },
        provider: None,
        continent,
        region,
        labels: (!labels.is_empty()).then_some(labels),
    };
    sort_reports(&mut reports, &words);
    let pretty = serde_json::to_string_pretty(&request).map_err(|e| e.to_string())?;
    Ok(Translation {
        request,
        pretty,
        reports,
    })
}

/// The flags' words: `kops create cluster` taken off, a single word
/// holding a whole line split.
fn command_words(args: &[String]) -> Result<Vec<String>, String> {
    let words: Vec<String> = match args {
        [one] if one.trim().contains(char::is_whitespace) => shell_words(one)?,
        _ => args.to_vec(),
    };
    let skip = match words.as_slice() {
        [kops, c, k, ..] if kops == "kops" && c == "create" && k == "cluster" => 3,
        [kops, ..] if kops == "kops" => {
            return Err("only `kops create cluster` command lines are translated".into());
        }
        [c, k, ..] if c == "create" && k == "cluster" => 2,
        _ => 0,
    };
    Ok(words[skip..].to_vec())
}

/// `--cloud` other than meson, and an authorization other than RBAC
/// (kubeadm's clusters are RBAC).
fn report_other_cloud(p: &Parsed, reports: &mut Vec<Report>) {
    if let Some(g) = p.last("cloud") {
        let cloud = g.value.trim().to_ascii_lowercase();
        if cloud != "elemento" && cloud != "meson" {
            reports.push(Report {
                flag: g.written.clone(),
                message: format!(
                    "{cloud:?} ignored: meson is the cloud (the nodes run on the AtomOS hosts \
                     it places them on)"
                ),
            });
        }
    }
    if let Some(g) = p.last("authorization")
        && !g.value.trim().eq_ignore_ascii_case("rbac")
    {
        reports.push(Report {
            flag: g.written.clone(),
            message: format!("{:?} ignored: meson's clusters use RBAC", g.value),
        });
    }
}

/// `--kubernetes-version`, unless it is a URL (a build of kOps' own).
fn kubernetes_version(p: &Parsed, reports: &mut Vec<Report>) -> Option<String> {
    let g = p.last("kubernetes-version")?;
    let v = g.value.trim();
    if v.contains("://") {
        reports.push(Report {
            flag: g.written.clone(),
            message: format!(
                "{v:?}: meson installs released versions only (GET \
                 /v1/kubernetes-versions): using its default"
            ),
        });
        return None;
    }
    (!v.is_empty()).then(|| v.to_owned())
}

/// `{"kops": {name, node_size, control_plane_size}}`: what was asked for.
fn metadata(kops_name: &str, worker: &NodeSize, control_plane: &NodeSize) -> Value {
    let mut kops = Map::new();
    kops.insert("name".into(), json!(kops_name));
    if !worker.note.is_empty() {
        kops.insert("node_size".into(), Value::Object(worker.note.clone()));
    }
    if !control_plane.note.is_empty() {
        kops.insert(
            "control_plane_size".into(),
            Value::Object(control_plane.note.clone()),
        );
    }
    json!({ "kops": kops })
}

/// Reports in the order their flags appear on the command line.
fn sort_reports(reports: &mut [Report], words: &[String]) {
    let at = |flag: &str| {
        words
            .iter()
            .position(|w| {
                w == flag
                    || w.strip_prefix(flag).is_some_and(|rest| {
                        rest.starts_with('=') || (flag.len() == 2 && !flag.starts_with("--"))
                    })
            })
            .unwrap_or(usize::MAX)
    };
    reports.sort_by_key(|r| at(&r.flag));
}
