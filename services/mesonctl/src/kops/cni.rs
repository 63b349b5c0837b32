//! `--networking` as meson's `cni`.

use super::Report;
use super::args::Given;

/// kOps' default CNI (`--networking`).
pub const KOPS_DEFAULT_CNI: &str = "cilium";

/// The CNI meson runs for `--networking`.
pub(super) fn cni(given: Option<&Given>, reports: &mut Vec<Report>) -> &'static str {
    let Some(g) = given else {
        return KOPS_DEFAULT_CNI;
    };
    let mut report = |m: String| {
        reports.push(Report {
            flag: g.written.clone(),
            message: m,
        })
    };
    match g.value.trim().to_ascii_lowercase().as_str() {
        "calico" => "calico",
        "cilium" => "cilium",
        "flannel" | "flannel-vxlan" => "flannel",
        "cilium-etcd" => {
            report("meson runs Cilium with its own (CRD) store, not etcd: using cilium".into());
            "cilium"
        }
        "flannel-udp" => {
            report("meson runs flannel's VXLAN backend, not UDP: using flannel".into());
            "flannel"
        }
        "canal" => {
            report(
                "canal (Calico policy over flannel) is not offered: using calico, which does both"
                    .into(),
            );
            "calico"
        }
        other => {
            report(format!(
                "{other:?} is not offered by meson (calico, cilium or flannel): using \
                 {KOPS_DEFAULT_CNI}, kOps' default"
            ));
            KOPS_DEFAULT_CNI
        }
    }
}
