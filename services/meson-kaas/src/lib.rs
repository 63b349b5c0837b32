//! meson's Kubernetes machinery, as pure functions the cluster workflows call:
//! no SQL, no HTTP, no AtomOS.
//!
//! - [`secretbox`]: secrets at rest, sealed with XChaCha20-Poly1305 under a
//!   32-byte key from configuration (`version || nonce || ciphertext`).
//! - [`pki`]: a cluster's secrets ([`ClusterSecrets`]): the cluster, front-proxy
//!   and etcd CAs, the service-account key pair, the kubeadm bootstrap token
//!   and certificate key; `--discovery-token-ca-cert-hash`; admin kubeconfigs
//!   signed by the cluster's own admin CA, and the rotation of that CA and
//!   of the bootstrap token.
//! - [`bootstrap`]: a node's cloud-init user-data: containerd and the kubeadm
//!   packages of the cluster's version, the kubeadm configuration for
//!   `init`, `join --control-plane` or `join`, kube-vip for the API VIP, the
//!   CNI on the first node, and a power-off on any failure so that a broken
//!   node never phones home.

pub mod autoscaler_pki;
pub mod bootstrap;
mod error;
pub mod pki;
pub mod sealed;
pub mod secretbox;
mod text;

pub use bootstrap::{ClusterBootstrap, NodeBootstrap, NodeRole, user_data};
pub use error::KaasError;
pub use pki::{BootstrapToken, CertAndKey, ClusterSecrets, KeyPairPem, admin_kubeconfig};
pub use secretbox::{SecretKey, open, seal};

/// The crate's result type.
pub type Result<T, E = KaasError> = std::result::Result<T, E>;
