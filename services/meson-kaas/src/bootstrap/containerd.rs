//! containerd's configuration: the CRI plugin with the systemd cgroup driver
//! and the pause image kubeadm expects.

use crate::text::q;
use meson_core::kubernetes::KubeVersion;

/// containerd's CRI socket.
pub const CRI_SOCKET: &str = "unix:///run/containerd/containerd.sock";

/// The pause image kubeadm expects for `v` (containerd's sandbox image):
/// kubeadm's `PauseVersion`, 3.10.1 from 1.34, 3.10 from 1.31, 3.9 before.
fn pause_image(v: &KubeVersion) -> &'static str {
    if v.minor >= 34 {
        "registry.k8s.io/pause:3.10.1"
    } else if v.minor >= 31 {
        "registry.k8s.io/pause:3.10"
    } else {
        "registry.k8s.io/pause:3.9"
    }
}

/// `/etc/containerd/config.toml` for a node of Kubernetes `v`.
pub(super) fn containerd_config(v: &KubeVersion) -> String {
    format!(
        "# Written by meson: containerd's CRI plugin with the systemd cgroup driver,\n\
         # matching the kubelet's cgroupDriver.\n\
         version = 2\n\
         \n\
         [plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = {}\n\
         \n\
         [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n\
         \n\
         [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n",
        q(pause_image(v))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::fixtures::*;
    use crate::bootstrap::{NodeRole, paths};

    #[test]
    fn the_sandbox_image_is_the_pause_kubeadm_expects() {
        let c = cluster(KubeVersion::new(1, 30, 14), meson_core::kaas::Cni::Flannel);
        let doc = yaml(&render(&c, NodeRole::Worker));
        assert!(content(&doc, paths::CONTAINERD_CONFIG).contains("pause:3.9\""));
        // kubeadm's pause from 1.31, then from 1.34.
        for (v, pause) in [
            (KubeVersion::new(1, 31, 10), "pause:3.10\""),
            (KubeVersion::new(1, 33, 10), "pause:3.10\""),
            (KubeVersion::new(1, 34, 9), "pause:3.10.1\""),
        ] {
            let containerd = containerd_config(&v);
            assert!(containerd.contains(pause), "{v}: {containerd}");
        }
    }
}
