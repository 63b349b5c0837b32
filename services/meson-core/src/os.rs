//! Operating systems meson can boot, with the cloud image each one starts from.

use serde::{Deserialize, Serialize};

/// An OS a VM can run, as AtomOS names it (`os_family`/`os_flavour`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsImage {
    /// Canonical name shown to users, e.g. `debian`.
    pub distribution: String,
    pub family: String,
    pub flavour: String,
    pub version: String,
    /// The qcow2 cloud image the boot volume is cloned from.
    pub image_url: String,
}

struct Known {
    names: &'static [&'static str],
    flavour: &'static str,
    version: &'static str,
    url: &'static str,
}

const KNOWN: &[Known] = &[
    Known {
        names: &["debian", "debian12", "debian-12"],
        flavour: "debian",
        version: "12",
        url: "https://cloud.debian.org/images/cloud/bookworm/latest/debian-12-genericcloud-amd64.qcow2",
    },
    Known {
        names: &["ubuntu", "ubuntu24.04", "ubuntu-24.04", "ubuntu-24-04"],
        flavour: "ubuntu",
        version: "24.04",
        url: "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img",
    },
    Known {
        names: &["ubuntu22.04", "ubuntu-22.04", "ubuntu-22-04"],
        flavour: "ubuntu",
        version: "22.04",
        url: "https://cloud-images.ubuntu.com/jammy/current/jammy-server-cloudimg-amd64.img",
    },
    Known {
        names: &["almalinux", "almalinux9", "alma"],
        flavour: "almalinux",
        version: "9",
        url: "https://repo.almalinux.org/almalinux/9/cloud/x86_64/images/AlmaLinux-9-GenericCloud-latest.x86_64.qcow2",
    },
    Known {
        names: &["rocky", "rockylinux", "rocky9"],
        flavour: "rocky",
        version: "9",
        url: "https://dl.rockylinux.org/pub/rocky/9/images/x86_64/Rocky-9-GenericCloud-Base.latest.x86_64.qcow2",
    },
    Known {
        names: &["fedora", "fedora41"],
        flavour: "fedora",
        version: "41",
        url: "https://download.fedoraproject.org/pub/fedora/linux/releases/41/Cloud/x86_64/images/Fedora-Cloud-Base-Generic-41-1.4.x86_64.qcow2",
    },
];

/// The distribution used when a request names none.
pub const DEFAULT_DISTRIBUTION: &str = "ubuntu";

impl OsImage {
    /// Looks a distribution up by name, ignoring case, spaces and a leading "linux".
    pub fn lookup(name: &str) -> Option<OsImage> {
        let norm: String = name
            .trim()
            .to_ascii_lowercase()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        KNOWN
            .iter()
            .find(|k| k.names.contains(&norm.as_str()))
            .map(|k| OsImage {
                distribution: k.names[0].to_owned(),
                family: "linux".to_owned(),
                flavour: k.flavour.to_owned(),
                version: k.version.to_owned(),
                image_url: k.url.to_owned(),
            })
    }

    pub fn supported() -> Vec<&'static str> {
        KNOWN.iter().map(|k| k.names[0]).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_is_forgiving() {
        assert_eq!(OsImage::lookup("Debian").unwrap().flavour, "debian");
        assert_eq!(OsImage::lookup(" Ubuntu 22.04 ").unwrap().version, "22.04");
        assert!(OsImage::lookup("TempleOS").is_none());
    }
}
