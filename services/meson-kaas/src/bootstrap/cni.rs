//! The pinned CNI releases the first control-plane node installs.

use meson_core::kaas::Cni;

/// A pinned CNI release: what the first control-plane node installs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CniRelease {
    pub cni: Cni,
    pub version: &'static str,
    /// The manifest applied (Calico, Flannel) or the CLI that installs it
    /// (Cilium: `cilium install --version <version> --set ipam.mode=kubernetes`).
    pub url: &'static str,
}

/// The CNI release installed for `cni`.
///
/// - Calico 3.29.3: `calico.yaml` with `CALICO_IPV4POOL_CIDR` uncommented and
///   set to the pod CIDR.
/// - Flannel 0.26.7: `kube-flannel.yml` with `net-conf.json`'s `Network` set
///   to the pod CIDR.
/// - Cilium 1.17.6 through cilium-cli 0.16.24 (checksum checked), IPAM mode
///   `kubernetes` so pods get addresses from each node's `podCIDR`, which the
///   controller manager carves out of the pod CIDR.
///
/// The pod CIDR substitution is checked: a manifest whose layout changed
/// fails the bootstrap instead of silently using the CNI's default range.
pub fn cni_release(cni: Cni) -> CniRelease {
    match cni {
        Cni::Calico => CniRelease {
            cni,
            version: "v3.29.3",
            url: "https://raw.githubusercontent.com/projectcalico/calico/v3.29.3/manifests/calico.yaml",
        },
        Cni::Flannel => CniRelease {
            cni,
            version: "v0.26.7",
            url: "https://github.com/flannel-io/flannel/releases/download/v0.26.7/kube-flannel.yml",
        },
        Cni::Cilium => CniRelease {
            cni,
            version: "1.17.6",
            url: "https://github.com/cilium/cilium-cli/releases/download/v0.16.24/",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::fixtures::*;
    use crate::bootstrap::*;

    #[test]
    fn each_cni_is_pinned_and_gets_the_pod_cidr() {
        for cni in [Cni::Calico, Cni::Flannel, Cni::Cilium] {
            let mut c = cluster(KubeVersion::new(1, 31, 10), cni);
            c.pod_cidr = "10.32.0.0/12".parse().unwrap();
            let s = script(&render(&c, NodeRole::InitControlPlane));
            let release = cni_release(cni);
            assert!(s.contains(&format!("CNI='{}'\n", cni.as_str())));
            assert!(s.contains(&format!("CNI_URL='{}'\n", release.url)));
            assert!(s.contains(&format!("CNI_VERSION='{}'\n", release.version)));
            assert!(s.contains("POD_CIDR='10.32.0.0/12'\n"));
            assert!(release.url.starts_with("https://"));
            assert!(
                release
                    .url
                    .contains(release.version.trim_start_matches('v'))
                    || cni == Cni::Cilium
            );
        }
        let s = script(&render(&v131(), NodeRole::InitControlPlane));
        assert!(s.contains("CALICO_IPV4POOL_CIDR"));
        assert!(s.contains("--set ipam.mode=kubernetes"));
        assert!(s.contains("sha256sum --check"));
    }
}
