//! Names meson gives things on AtomOS.
//!
//! AtomOS keeps no labels and `register` returns no id, so ownership is
//! encoded in names: a crashed step finds what it created by name instead of
//! creating a second one. Names match AtomOS's `^[a-zA-Z0-9-]+$`.

use crate::id::{TenantId, VmId};

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

/// The VM's name on AtomOS: `vm-<id without dashes>-t<tenant tag>`, so
/// that a host's inventory says whose each VM is even when meson's own
/// records of it are lost (a database restored from backup).
pub fn vm_atomos_name(id: VmId, tenant: &TenantId) -> String {
    format!("vm-{}-t{}", id.0.simple(), tenant_tag(tenant))
}

/// A Kubernetes node's VM name on AtomOS: its cluster, its role (`cp` or
/// `w`), the VM's id and its tenant's tag, so an operator reading AtomOS
/// knows what it is (at most 63 characters, a hostname's limit). Its
/// volumes keep the VM's prefix ([`vm_volume_prefix`]).
pub fn node_atomos_name(
    cluster: crate::ClusterId,
    control_plane: bool,
    vm: VmId,
    tenant: &TenantId,
) -> String {
    let c = cluster.0.simple().to_string();
    let role = if control_plane { "cp" } else { "w" };
    format!(
        "k{}-{role}-{}-t{}",
        &c[..12],
        vm.0.simple(),
        tenant_tag(tenant)
    )
}

/// How many hex digits of a tenant's digest its tag keeps (48 bits: a
/// chance of one in 2^48 that two tenants share a tag).
pub const TENANT_TAG_DIGITS: usize = 12;

/// A tenant's tag in the names meson gives VMs on AtomOS: the first
/// [`TENANT_TAG_DIGITS`] hex digits of the SHA-256 of its id. AtomOS keeps
/// no labels and a VM's name is its guest's hostname (63 characters), too
/// short for any tenant id; the tag names the tenant among those meson
/// knows, which is what adopting a VM back after a restore needs.
pub fn tenant_tag(tenant: &TenantId) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(tenant.as_str().as_bytes());
    let mut hex = String::with_capacity(TENANT_TAG_DIGITS);
    for b in digest.iter().take(TENANT_TAG_DIGITS / 2) {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

/// Whose a VM on AtomOS is, as its name says: what [`vm_atomos_name`] and
/// [`node_atomos_name`] wrote (the tag is missing from names meson gave
/// before it wrote tags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmOwner {
    pub vm: VmId,
    /// The tenant's tag ([`tenant_tag`]).
    pub tenant_tag: Option<String>,
    /// A Kubernetes node's: the first 12 hex digits of its cluster's id,
    /// and whether it is a control-plane node.
    pub cluster_prefix: Option<(String, bool)>,
}

/// Reads a VM's name on AtomOS; `None` for a name meson did not give.
pub fn parse_vm_atomos_name(name: &str) -> Option<VmOwner> {
    let is_hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    let (cluster_prefix, rest) = if let Some(rest) = name.strip_prefix("vm-") {
        (None, rest)
    } else {
        let rest = name.strip_prefix('k')?;
        let (cluster, rest) = rest.split_once('-')?;
        let (role, rest) = rest.split_once('-')?;
        if !is_hex(cluster, 12) || !matches!(role, "cp" | "w") {
            return None;
        }
        (Some((cluster.to_owned(), role == "cp")), rest)
    };
    let (id, tag) = match rest.split_once('-') {
        Some((id, tag)) => {
            let tag = tag.strip_prefix('t')?;
            if !is_hex(tag, TENANT_TAG_DIGITS) {
                return None;
            }
            (id, Some(tag.to_owned()))
        }
        None => (rest, None),
    };
    if !is_hex(id, 32) {
        return None;
    }
    let vm = VmId(uuid::Uuid::parse_str(id).ok()?);
    Some(VmOwner {
        vm,
        tenant_tag: tag,
        cluster_prefix,
    })
}

/// A private network's name on AtomOS (the same on every host it is made on).
pub fn network_atomos_name(id: crate::NetworkId) -> String {
    format!("net-{}", id.0.simple())
}

/// Prefix shared by every volume a VM owns on AtomOS.
pub fn vm_volume_prefix(id: VmId) -> String {
    format!("vm-{}-", id.0.simple())
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
        let tenant = TenantId("a tenant whose id is long: 0123456789abcdef0123456789".into());
        for n in [
            vm_atomos_name(id, &tenant),
            node_atomos_name(crate::ClusterId::new(), true, id, &tenant),
            vm_boot_volume_name(id),
            vm_data_volume_name(id, 3),
        ] {
            check_atomos_name(&n, 63).unwrap();
            assert!(n.contains(&id.0.simple().to_string()));
        }
        assert!(vm_boot_volume_name(id).starts_with(&vm_volume_prefix(id)));
    }

    #[test]
    fn a_name_says_whose_the_vm_is() {
        let id = VmId::new();
        let cluster = crate::ClusterId::new();
        let tenant = TenantId("acme".into());
        let tag = Some(tenant_tag(&tenant));
        assert_eq!(tag.as_deref().map(str::len), Some(TENANT_TAG_DIGITS));
        assert_ne!(tag, Some(tenant_tag(&TenantId("acme2".into()))));
        let owner = parse_vm_atomos_name(&vm_atomos_name(id, &tenant)).unwrap();
        assert_eq!(
            (owner.vm, owner.tenant_tag.clone(), owner.cluster_prefix),
            (id, tag.clone(), None)
        );
        let node = parse_vm_atomos_name(&node_atomos_name(cluster, false, id, &tenant)).unwrap();
        assert_eq!(node.vm, id);
        assert_eq!(node.tenant_tag, tag);
        let c = cluster.0.simple().to_string();
        assert_eq!(node.cluster_prefix, Some((c[..12].to_owned(), false)));
        // Names from before tags, and names meson never gave.
        let old = parse_vm_atomos_name(&format!("vm-{}", id.0.simple())).unwrap();
        assert_eq!((old.vm, old.tenant_tag), (id, None));
        for foreign in [
            "web-1",
            "vm-",
            "vm-1234",
            &format!("vm-{}-xyz", id.0.simple()),
            &format!("k{}-db-{}", &c[..12], id.0.simple()),
            &vm_boot_volume_name(id),
        ] {
            assert_eq!(parse_vm_atomos_name(foreign), None, "{foreign}");
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
