//! The concurrency keys, one per resource: the queue admits one live job
//! per key, so every workflow that changes a resource's world runs alone
//! (a VM's create, power and delete; a cluster's create, scale, upgrade,
//! node repairs and delete; ...). Every workflow takes its key from here.

use meson_core::{ClusterId, ImageId, NetworkId, VmId, VolumeId};

/// Serializes every mutation of one VM.
pub fn vm(id: VmId) -> String {
    format!("vm:{id}")
}

/// Serializes every mutation of one standalone volume.
pub fn volume(id: VolumeId) -> String {
    format!("volume:{id}")
}

/// Serializes every mutation of one network.
pub fn network(id: NetworkId) -> String {
    format!("network:{id}")
}

/// Serializes every mutation of one cluster: its pools and nodes included.
pub fn cluster(id: ClusterId) -> String {
    format!("cluster:{id}")
}

/// Serializes every mutation of one image (an import's create, a delete; a
/// snapshot's create holds its VM's key).
pub fn image(id: ImageId) -> String {
    format!("image:{id}")
}

/// Serializes every mutation of one backup (its delete; its create holds
/// its VM's key).
pub fn backup(id: meson_core::BackupId) -> String {
    format!("backup:{id}")
}
