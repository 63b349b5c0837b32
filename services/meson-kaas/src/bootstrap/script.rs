//! The bootstrap script, `/usr/local/sbin/meson-bootstrap`: the plain bash
//! of `meson-bootstrap.sh`, given the node's values as single-quoted shell
//! assignments in place of its `@NODE_VALUES@` line.

use super::cni::cni_release;
use super::kubeadm::has_super_admin;
use super::{ClusterBootstrap, NodeBootstrap, NodeRole};
use crate::text::sh;
use meson_core::kubernetes::KubeVersion;
use std::fmt::Write as _;

/// The script, with its [`NODE_VALUES`] line where the values go.
const TEMPLATE: &str = include_str!("meson-bootstrap.sh");
/// The line of [`TEMPLATE`] the node's values replace.
const NODE_VALUES: &str =
    "# @NODE_VALUES@ meson writes the node's values here (see bootstrap/script.rs).\n";

/// The apt version pin for `v`'s kubelet, kubeadm and kubectl.
pub fn package_version(v: &KubeVersion) -> String {
    format!("{v}-*")
}

/// The bootstrap script of a node (see the module documentation).
pub(super) fn bootstrap_script(cluster: &ClusterBootstrap<'_>, node: &NodeBootstrap) -> String {
    let v = &cluster.kubernetes_version;
    let cni = cni_release(cluster.cni);
    let revert = node.role == NodeRole::InitControlPlane && has_super_admin(v);
    let vars = [
        ("ROLE", node.role.script_name().to_owned()),
        ("NODE_NAME", node.name.clone()),
        (
            "NODE_IP",
            node.node_ip.map(|ip| ip.to_string()).unwrap_or_default(),
        ),
        ("VIP", cluster.endpoint.ip().to_string()),
        ("K8S_VERSION", v.to_string()),
        ("K8S_MINOR", format!("v{}", v.minor_line())),
        ("K8S_PACKAGE_VERSION", package_version(v)),
        ("CNI", cluster.cni.as_str().to_owned()),
        ("CNI_VERSION", cni.version.to_owned()),
        ("CNI_URL", cni.url.to_owned()),
        ("POD_CIDR", cluster.pod_cidr.to_string()),
        (
            "KUBE_VIP_REVERT_SUPER_ADMIN",
            if revert { "yes" } else { "no" }.to_owned(),
        ),
        (
            "BOOTSTRAP_TOKEN_REGISTER",
            cluster.secrets.token_to_register().as_str().to_owned(),
        ),
        (
            "BOOTSTRAP_TOKEN_REVOKE",
            cluster.secrets.revoked_token_ids().join(" "),
        ),
        ("TOKEN_TTL", cluster.token_ttl.as_secs().to_string()),
        ("REPLACES", node.replaces.clone().unwrap_or_default()),
    ];
    let mut values = String::new();
    for (name, value) in vars {
        let _ = writeln!(values, "{name}={}", sh(&value));
    }
    TEMPLATE.replacen(NODE_VALUES, &values, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::fixtures::*;
    use crate::bootstrap::*;
    use std::process::Command;

    #[test]
    fn a_replacement_control_plane_node_removes_the_old_one_from_etcd() {
        let c = v131();
        let mut n = node(NodeRole::JoinControlPlane);
        n.replaces = Some("test8-cp-old01".into());
        let s = script(&user_data(&c, &n).unwrap());
        assert_eq!(script_var(&s, "REPLACES"), "test8-cp-old01");
        assert!(s.contains("etcdctl member remove \"$member\""), "{s}");
        assert!(s.contains("kubectl delete node \"$REPLACES\""), "{s}");
        // Without a node to replace the step is skipped (empty REPLACES).
        let plain = script(&render(&c, NodeRole::JoinControlPlane));
        assert_eq!(script_var(&plain, "REPLACES"), "");
        n.replaces = Some("Bad Name".into());
        assert!(user_data(&c, &n).is_err());
    }

    #[test]
    fn the_script_installs_the_pinned_packages_and_runs_kubeadm() {
        let c = v131();
        for role in ROLES {
            let s = script(&render(&c, role));
            assert!(s.starts_with("#!/bin/bash\n"));
            assert!(s.contains("set -Eeuo pipefail"));
            assert!(s.contains("K8S_MINOR='v1.31'\n"), "{s}");
            assert!(s.contains("K8S_PACKAGE_VERSION='1.31.10-*'\n"));
            assert!(s.contains("K8S_VERSION='1.31.10'\n"));
            assert!(s.contains("https://pkgs.k8s.io/core:/stable:/$K8S_MINOR/deb/Release.key"));
            assert!(s.contains("\"kubeadm=$K8S_PACKAGE_VERSION\""));
            assert!(s.contains("apt-mark hold kubelet kubeadm kubectl containerd"));
            assert!(s.contains("swapoff -a"));
            assert!(s.contains("modprobe br_netfilter"));
            assert!(s.contains("http://127.0.0.1:10248/healthz"));
            assert!(s.contains("kubeadm init --config /etc/meson/kubeadm.yaml"));
            assert!(s.contains("kubeadm join --config /etc/meson/kubeadm.yaml"));
            let want_role = match role {
                NodeRole::InitControlPlane => "ROLE='init'\n",
                NodeRole::JoinControlPlane => "ROLE='join-control-plane'\n",
                NodeRole::Worker => "ROLE='worker'\n",
            };
            assert!(s.contains(want_role), "{role:?}");
            assert!(s.contains("VIP='192.168.1.250'\n"));
            assert!(s.contains("POD_CIDR='10.244.0.0/16'\n"));
            // The paths the script uses are the files the user-data writes.
            assert!(s.contains(paths::KUBEADM_CONFIG));
            assert!(s.contains(paths::KUBE_VIP_TEMPLATE));
            assert!(s.contains(paths::SYSCTL));
        }
    }

    /// Every rendered script passes `bash -n` and, where it is installed,
    /// `shellcheck` (CI installs it and sets `MESON_REQUIRE_SHELLCHECK=1`,
    /// which makes its absence a failure).
    #[test]
    fn the_script_is_valid_bash_and_passes_shellcheck() {
        let required = std::env::var("MESON_REQUIRE_SHELLCHECK").is_ok_and(|v| v == "1");
        let shellcheck = match Command::new("shellcheck").arg("--version").output() {
            Ok(_) => true,
            Err(e) => {
                assert!(
                    !required,
                    "MESON_REQUIRE_SHELLCHECK=1 but `shellcheck` cannot run ({e}): \
                     install it with `apt-get install -y shellcheck`"
                );
                eprintln!(
                    "note: `shellcheck` not found ({e}); only `bash -n` checks the bootstrap \
                     script (apt-get install -y shellcheck)"
                );
                false
            }
        };
        let mut replacing = node(NodeRole::JoinControlPlane);
        replacing.replaces = Some("test8-cp-old01".into());
        for (c, n) in [
            (v131(), node(NodeRole::InitControlPlane)),
            (cluster(KubeVersion::new(1, 28, 15), Cni::Cilium), replacing),
            (
                cluster(KubeVersion::new(1, 30, 14), Cni::Flannel),
                node(NodeRole::Worker),
            ),
        ] {
            let s = script(&user_data(&c, &n).unwrap());
            let path = temp_file("script.sh", &s);
            let bash = Command::new("bash").arg("-n").arg(&path).output();
            let lint = shellcheck.then(|| {
                Command::new("shellcheck")
                    .args(["--shell=bash", "--format=gcc"])
                    .arg(&path)
                    .output()
            });
            let _ = std::fs::remove_file(&path);
            let bash = bash.expect("bash runs (it checks the bootstrap script's syntax)");
            assert!(
                bash.status.success(),
                "{:?}: bash -n: {}",
                n.role,
                String::from_utf8_lossy(&bash.stderr)
            );
            if let Some(lint) = lint {
                let lint = lint.expect("shellcheck runs");
                assert!(
                    lint.status.success(),
                    "{:?}: shellcheck:\n{}{}",
                    n.role,
                    String::from_utf8_lossy(&lint.stdout),
                    String::from_utf8_lossy(&lint.stderr)
                );
            }
        }
    }

    #[test]
    fn the_node_values_take_the_place_of_their_line() {
        assert_eq!(TEMPLATE.matches(NODE_VALUES).count(), 1);
        let s = script(&render(&v131(), NodeRole::Worker));
        assert!(!s.contains("@NODE_VALUES@"), "{s}");
        assert!(s.contains("/usr/bin:/sbin:/bin\n\nROLE='worker'\n"), "{s}");
        assert!(s.contains("\nREPLACES=''\n\nlog() {"), "{s}");
    }

    /// Every upper-case variable the script reads without setting it is
    /// one of the node's values (or bash's own).
    #[test]
    fn the_script_is_given_every_value_it_reads() {
        let s = script(&render(&v131(), NodeRole::InitControlPlane));
        let given: Vec<&str> = s
            .lines()
            .filter_map(|l| l.split_once("='").map(|(name, _)| name))
            .collect();
        let set_by_the_script = ["APT", "K", "KUBECONFIG"];
        let bash_own = ["SECONDS", "LINENO", "BASH_COMMAND"];
        let mut missing = Vec::new();
        for (i, _) in TEMPLATE.match_indices('$') {
            let name: String = TEMPLATE[i + 1..]
                .trim_start_matches('{')
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if !name.is_empty()
                && name.starts_with(|c: char| c.is_ascii_uppercase())
                && !given.contains(&name.as_str())
                && !set_by_the_script.contains(&name.as_str())
                && !bash_own.contains(&name.as_str())
            {
                missing.push(name);
            }
        }
        assert!(missing.is_empty(), "read but not given: {missing:?}");
        assert!(
            given.contains(&"REPLACES") && given.len() >= 16,
            "{given:?}"
        );
    }
}
