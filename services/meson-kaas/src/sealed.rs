//! What the API and the workflows share about a cluster's secrets and
//! nodes: the secrets sealed to their cluster (as stored), the stored hash
//! of a node's phone-home secret, and the Kubernetes labels of a pool's
//! nodes. Here, below both, so the API needs no workflow code for them.

use crate::{ClusterSecrets, KaasError, SecretKey};
use meson_core::ClusterId;
use meson_core::cluster::NodePool;
use sha2::{Digest, Sha256};

/// What a cluster's sealed secrets are bound to: its id.
fn aad(cluster: ClusterId) -> Vec<u8> {
    format!("meson cluster secrets {cluster}").into_bytes()
}

/// Seals `secrets` for storage, bound to `cluster`.
pub fn seal_secrets(
    key: &SecretKey,
    cluster: ClusterId,
    secrets: &ClusterSecrets,
) -> Result<Vec<u8>, KaasError> {
    crate::secretbox::seal_json(key, secrets, &aad(cluster))
}

/// Opens `cluster`'s stored secrets.
pub fn open_secrets(
    key: &SecretKey,
    cluster: ClusterId,
    sealed: &[u8],
) -> Result<ClusterSecrets, KaasError> {
    crate::secretbox::open_json(key, sealed, &aad(cluster))
}

/// The hash stored for a phone-home secret.
pub fn phone_home_hash(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// The label marking a node with GPUs, with the GPU's vendor and model.
pub const GPU_LABEL: &str = "meson.elemento.cloud/gpu";

/// The Kubernetes labels of a pool's nodes: the pool's own, and
/// [`GPU_LABEL`] when its nodes have GPUs.
pub fn node_labels(pool: &NodePool) -> meson_core::labels::Labels {
    let mut labels = pool.spec.labels.clone();
    if pool.spec.specs.gpu > 0 {
        let (vendor, model) = meson_core::kaas::NODE_GPU_MODEL;
        labels.insert(GPU_LABEL.to_owned(), format!("{vendor}-{model}"));
    }
    labels
}
