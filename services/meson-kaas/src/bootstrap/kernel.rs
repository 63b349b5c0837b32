//! The kernel settings containerd and the pod network need: the modules
//! loaded at boot and the bridge and forwarding sysctls.

/// `/etc/modules-load.d/meson-kubernetes.conf`.
pub(super) const MODULES: &str = "overlay\nbr_netfilter\n";
/// `/etc/sysctl.d/99-meson-kubernetes.conf`.
pub(super) const SYSCTL: &str = "net.bridge.bridge-nf-call-iptables = 1\n\
                                 net.bridge.bridge-nf-call-ip6tables = 1\n\
                                 net.ipv4.ip_forward = 1\n";
