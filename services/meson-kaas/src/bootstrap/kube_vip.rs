//! kube-vip, the static pod on every control-plane node that holds the API
//! VIP (ARP, leader election through a Lease).

use super::{ClusterBootstrap, paths};
use crate::text::q;
use std::fmt::Write as _;

/// kube-vip, the static pod that holds the API VIP (ARP, leader election).
pub const KUBE_VIP_IMAGE: &str = "ghcr.io/kube-vip/kube-vip:v0.8.9";

/// The `/etc/hosts` of the kube-vip pod (see [`kube_vip_manifest`]).
pub(super) const KUBE_VIP_HOSTS: &str =
    "127.0.0.1 localhost kubernetes\n::1 localhost ip6-localhost\n";

/// The placeholder the bootstrap script replaces with the VIP's interface.
pub(super) const VIP_INTERFACE_PLACEHOLDER: &str = "__MESON_VIP_INTERFACE__";

/// The kube-vip static pod for a control-plane node (ARP mode, control
/// plane only, leader election through a Lease), reading its kubeconfig
/// from `kubeconfig` on the host. kube-vip talks to the local API server as
/// `kubernetes:<port>`, so the pod gets an `/etc/hosts` mapping that name to
/// 127.0.0.1 (a file mount rather than `hostAliases`, which some 1.29 and
/// 1.30 patches ignore in static pods). `vip_cidr` and `vip_subnet` are both
/// set: kube-vip renamed the first to the second.
pub fn kube_vip_manifest(cluster: &ClusterBootstrap<'_>, kubeconfig: &str) -> String {
    let vip = cluster.endpoint.ip().to_string();
    let port = cluster.endpoint.port().to_string();
    let env = [
        ("vip_arp", "true"),
        ("port", port.as_str()),
        ("vip_interface", VIP_INTERFACE_PLACEHOLDER),
        ("vip_cidr", "32"),
        ("vip_subnet", "32"),
        ("dns_mode", "first"),
        ("cp_enable", "true"),
        ("cp_namespace", "kube-system"),
        ("svc_enable", "false"),
        ("vip_leaderelection", "true"),
        ("vip_leasename", "plndr-cp-lock"),
        ("vip_leaseduration", "5"),
        ("vip_renewdeadline", "3"),
        ("vip_retryperiod", "1"),
        ("address", vip.as_str()),
    ];
    let mut out = String::from(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube-vip\n  namespace: kube-system\n\
         spec:\n  hostNetwork: true\n  priorityClassName: system-node-critical\n  containers:\n\
         \x20   - name: kube-vip\n",
    );
    let _ = writeln!(out, "      image: {}", q(KUBE_VIP_IMAGE));
    out.push_str("      imagePullPolicy: IfNotPresent\n      args: [\"manager\"]\n      env:\n");
    out.push_str(
        "        - name: vip_nodename\n          valueFrom:\n            fieldRef:\n              fieldPath: spec.nodeName\n",
    );
    for (name, value) in env {
        let _ = writeln!(
            out,
            "        - name: {}\n          value: {}",
            q(name),
            q(value)
        );
    }
    out.push_str(
        "      securityContext:\n        capabilities:\n          add: [\"NET_ADMIN\", \"NET_RAW\"]\n\
         \x20     volumeMounts:\n\
         \x20       - name: kubeconfig\n          mountPath: /etc/kubernetes/admin.conf\n\
         \x20       - name: hosts\n          mountPath: /etc/hosts\n          readOnly: true\n\
         \x20 volumes:\n    - name: kubeconfig\n      hostPath:\n",
    );
    let _ = writeln!(out, "        path: {}\n        type: File", q(kubeconfig));
    let _ = writeln!(
        out,
        "    - name: hosts\n      hostPath:\n        path: {}\n        type: File",
        q(paths::KUBE_VIP_HOSTS)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::fixtures::*;
    use crate::bootstrap::*;
    use serde_yaml_ng::Value;

    fn kube_vip(ud: &str) -> Value {
        yaml(content(&yaml(ud), paths::KUBE_VIP_TEMPLATE))
    }

    fn env<'a>(pod: &'a Value, name: &str) -> Option<&'a str> {
        pod["spec"]["containers"][0]["env"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|e| e["name"].as_str() == Some(name))
            .and_then(|e| e["value"].as_str())
    }

    #[test]
    fn kube_vip_holds_the_vip_by_arp_with_the_right_kubeconfig() {
        let c = v131();
        let init = kube_vip(&render(&c, NodeRole::InitControlPlane));
        assert_eq!(str_at(&init, &["kind"]), "Pod");
        assert_eq!(str_at(&init, &["metadata", "namespace"]), "kube-system");
        assert_eq!(init["spec"]["hostNetwork"].as_bool(), Some(true));
        let container = &init["spec"]["containers"][0];
        assert_eq!(container["image"].as_str(), Some(KUBE_VIP_IMAGE));
        assert_eq!(env(&init, "address"), Some("192.168.1.250"));
        assert_eq!(env(&init, "port"), Some("6443"));
        assert_eq!(env(&init, "vip_arp"), Some("true"));
        assert_eq!(env(&init, "cp_enable"), Some("true"));
        assert_eq!(env(&init, "vip_leaderelection"), Some("true"));
        assert_eq!(env(&init, "vip_interface"), Some(VIP_INTERFACE_PLACEHOLDER));
        let caps = strings(&container["securityContext"]["capabilities"]["add"], &[]);
        assert_eq!(caps, ["NET_ADMIN", "NET_RAW"]);
        let mounts = strings(&container["volumeMounts"], &["mountPath"]);
        assert_eq!(mounts, ["/etc/kubernetes/admin.conf", "/etc/hosts"]);
        let host_path = |pod: &Value, i: usize| -> String {
            str_at(&pod["spec"]["volumes"][i], &["hostPath", "path"]).to_owned()
        };
        // 1.29+: the init node starts kube-vip on super-admin.conf, then reverts.
        assert_eq!(host_path(&init, 0), "/etc/kubernetes/super-admin.conf");
        assert_eq!(host_path(&init, 1), paths::KUBE_VIP_HOSTS);
        let s = script(&render(&c, NodeRole::InitControlPlane));
        assert!(s.contains("KUBE_VIP_REVERT_SUPER_ADMIN='yes'\n"));
        assert!(s.contains(
            "s#path: \"/etc/kubernetes/super-admin.conf\"#path: \"/etc/kubernetes/admin.conf\"#"
        ));
        // The sed the script runs finds the placeholder.
        assert!(s.contains(&format!("s/{VIP_INTERFACE_PLACEHOLDER}/$iface/")));

        let join = kube_vip(&render(&c, NodeRole::JoinControlPlane));
        assert_eq!(host_path(&join, 0), "/etc/kubernetes/admin.conf");
        assert!(
            script(&render(&c, NodeRole::JoinControlPlane))
                .contains("KUBE_VIP_REVERT_SUPER_ADMIN='no'\n")
        );

        // 1.28 has no super-admin.conf.
        let old = cluster(KubeVersion::new(1, 28, 15), Cni::Calico);
        let init = kube_vip(&render(&old, NodeRole::InitControlPlane));
        assert_eq!(host_path(&init, 0), "/etc/kubernetes/admin.conf");

        let hosts = content(
            &yaml(&render(&c, NodeRole::InitControlPlane)),
            paths::KUBE_VIP_HOSTS,
        )
        .to_owned();
        assert!(hosts.starts_with("127.0.0.1 localhost kubernetes\n"));
    }
}
