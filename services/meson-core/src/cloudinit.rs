//! cloud-init documents for a VM's NoCloud ISO (user-data, meta-data and,
//! for NICs on networks without DHCP, network-config).
//!
//! Values are written as JSON strings, which are valid YAML double-quoted
//! scalars: a hostname or key can never break out of its field.

use crate::id::VmId;
use crate::ssh::SshKey;
use std::net::Ipv4Addr;

/// A NIC whose address meson's IPAM handed out (a network without DHCP),
/// matched in the guest by its MAC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaticNic {
    pub mac: String,
    pub address: Ipv4Addr,
    pub prefix: u8,
}

/// What a VM's cloud-init needs to know.
#[derive(Clone, Debug)]
pub struct VmCloudInit<'a> {
    pub vm_id: VmId,
    pub hostname: &'a str,
    pub ssh_keys: &'a [SshKey],
    /// Where the guest posts when cloud-init finishes, if anywhere.
    pub phone_home_url: Option<&'a str>,
    /// NICs to configure statically; the others use DHCP.
    pub static_nics: &'a [StaticNic],
}

fn q(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

impl VmCloudInit<'_> {
    pub fn user_data(&self) -> String {
        let mut out = String::from("#cloud-config\n");
        out += &format!("hostname: {}\n", q(self.hostname));
        out += "preserve_hostname: false\n";
        out += "ssh_pwauth: false\n";
        out += "users:\n  - default\n  - name: \"elemento\"\n    shell: \"/bin/bash\"\n";
        out += "    sudo: \"ALL=(ALL) NOPASSWD:ALL\"\n    lock_passwd: true\n";
        if !self.ssh_keys.is_empty() {
            out += "    ssh_authorized_keys:\n";
            for k in self.ssh_keys {
                out += &format!("      - {}\n", q(k.as_str()));
            }
        }
        if let Some(url) = self.phone_home_url {
            out += &format!(
                "phone_home:\n  url: {}\n  post: [\"instance_id\", \"hostname\"]\n  tries: 10\n",
                q(url)
            );
        }
        out
    }

    /// The NoCloud `network-config` (version 2), when some NIC is static.
    /// No gateway or default route: a private network is not the way out.
    pub fn network_config(&self) -> Option<String> {
        if self.static_nics.is_empty() {
            return None;
        }
        let mut out = String::from("version: 2\nethernets:\n");
        for (i, nic) in self.static_nics.iter().enumerate() {
            out += &format!(
                "  net{i}:\n    match:\n      macaddress: {}\n    set-name: {}\n    dhcp4: false\n    addresses: [{}]\n",
                q(&nic.mac.to_ascii_lowercase()),
                q(&format!("net{i}")),
                q(&format!("{}/{}", nic.address, nic.prefix)),
            );
        }
        Some(out)
    }

    /// The files of the cloud-init volume, in upload order.
    pub fn files(&self) -> Vec<(&'static str, String)> {
        let mut files = vec![
            ("user-data", self.user_data()),
            ("meta-data", self.meta_data()),
        ];
        if let Some(nc) = self.network_config() {
            files.push(("network-config", nc));
        }
        files
    }

    pub fn meta_data(&self) -> String {
        format!(
            "instance-id: {}\nlocal-hostname: {}\n",
            q(&self.vm_id.to_string()),
            q(self.hostname)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_keys_and_hostname_quoted() {
        let keys = vec![SshKey::parse(crate::vm::tests::KEY).unwrap()];
        let ci = VmCloudInit {
            vm_id: VmId::new(),
            hostname: "web-1",
            ssh_keys: &keys,
            phone_home_url: Some("http://127.0.0.1:8080/v1/vms/x/phone-home"),
            static_nics: &[],
        };
        let ud = ci.user_data();
        assert!(ud.starts_with("#cloud-config\n"));
        assert!(ud.contains("hostname: \"web-1\""));
        assert!(ud.contains("ssh-ed25519 "));
        assert!(ud.contains("phone_home:"));
        assert!(ci.meta_data().contains("local-hostname: \"web-1\""));
        assert_eq!(ci.network_config(), None);
        assert_eq!(ci.files().len(), 2);
    }

    #[test]
    fn static_nics_get_a_network_config_matched_by_mac() {
        let nics = [StaticNic {
            mac: "52:54:00:AB:CD:EF".into(),
            address: Ipv4Addr::new(192, 168, 1, 7),
            prefix: 24,
        }];
        let ci = VmCloudInit {
            vm_id: VmId::new(),
            hostname: "db",
            ssh_keys: &[],
            phone_home_url: None,
            static_nics: &nics,
        };
        let nc = ci.network_config().unwrap();
        assert_eq!(
            nc,
            "version: 2\nethernets:\n  net0:\n    match:\n      macaddress: \"52:54:00:ab:cd:ef\"\n    \
             set-name: \"net0\"\n    dhcp4: false\n    addresses: [\"192.168.1.7/24\"]\n"
        );
        let files = ci.files();
        assert_eq!(files.last().unwrap().0, "network-config");
    }
}
