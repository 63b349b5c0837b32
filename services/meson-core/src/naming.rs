//! Names meson gives things on AtomOS.
//!
//! AtomOS keeps no labels and `register` returns no id, so ownership is
//! encoded in names: a crashed step finds what it created by name instead of
//! creating a second one. Names match AtomOS's `^[a-zA-Z0-9-]+$`.

use crate::id::VmId;

/// Checks a name AtomOS can hold: `^[a-zA-Z0-9-]+$`, at most `max` characters,
/// not starting or ending with `-` (it doubles as the guest's hostname).
pub fn check_atomos_name(name: &str, max: usize) -> Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    if name.len() > max {
        return Err(format!("must be at most {max} characters"));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(
            "may contain only letters, digits and '-' (AtomOS names: ^[a-zA-Z0-9-]+$)".into(),
        );
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err("must not start or end with '-'".into());
    }
    Ok(())
}

/// The VM's name on AtomOS: `vm-<id without dashes>`.
pub fn vm_atomos_name(id: VmId) -> String {
    format!("vm-{}", id.0.simple())
}

/// A Kubernetes node's VM name on AtomOS: its cluster, its role (`cp` or
/// `w`) and the VM's id, so an operator reading AtomOS knows what it is.
/// Its volumes keep the VM's prefix ([`vm_volume_prefix`]).
pub fn node_atomos_name(cluster: crate::ClusterId, control_plane: bool, vm: VmId) -> String {
    let c = cluster.0.simple().to_string();
    let role = if control_plane { "cp" } else { "w" };
    format!("k{}-{role}-{}", &c[..12], vm.0.simple())
}

/// A private network's name on AtomOS (the same on every host it is made on).
pub fn network_atomos_name(id: crate::NetworkId) -> String {
    format!("net-{}", id.0.simple())
}

/// Prefix shared by every volume a VM owns on AtomOS.
pub fn vm_volume_prefix(id: VmId) -> String {
    format!("{}-", vm_atomos_name(id))
}

pub fn vm_boot_volume_name(id: VmId) -> String {
    format!("{}boot", vm_volume_prefix(id))
}

/// A rebuilt VM's new boot volume: the boot volume's name and the new
/// volume's last 12 hex digits, its random part (ids are UUIDv7: the first
/// digits are a time), as the old one is still there while it is made.
pub fn vm_rebuilt_boot_volume_name(id: VmId, volume: crate::VolumeId) -> String {
    let hex = volume.0.simple().to_string();
    format!("{}-{}", vm_boot_volume_name(id), &hex[hex.len() - 12..])
}

pub fn vm_cloudinit_volume_name(id: VmId) -> String {
    format!("{}cloudinit", vm_volume_prefix(id))
}

pub fn vm_data_volume_name(id: VmId, index: usize) -> String {
    format!("{}data{index}", vm_volume_prefix(id))
}

/// A standalone volume's name on AtomOS: `vol-<id without dashes>` (never
/// a VM's prefix, so a VM's teardown cannot take it).
pub fn volume_atomos_name(id: crate::VolumeId) -> String {
    format!("vol-{}", id.0.simple())
}

/// An image's name on AtomOS: `img-<id without dashes>` (never a VM's or
/// a standalone volume's prefix).
pub fn image_atomos_name(id: crate::ImageId) -> String {
    format!("img-{}", id.0.simple())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_are_valid_atomos_names() {
        let id = VmId::new();
        for n in [
            vm_atomos_name(id),
            vm_boot_volume_name(id),
            vm_data_volume_name(id, 3),
        ] {
            check_atomos_name(&n, 63).unwrap();
            assert!(n.starts_with(&vm_atomos_name(id)));
        }
    }

    #[test]
    fn rejects_bad_names() {
        assert!(check_atomos_name("my_vm", 63).is_err());
        assert!(check_atomos_name("-x", 63).is_err());
        assert!(check_atomos_name("", 63).is_err());
        assert!(check_atomos_name("ok-name-1", 63).is_ok());
    }
}
