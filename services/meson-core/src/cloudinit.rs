//! cloud-init documents for a VM's NoCloud ISO (user-data and meta-data).
//!
//! Values are written as JSON strings, which are valid YAML double-quoted
//! scalars: a hostname or key can never break out of its field.

use crate::id::VmId;
use crate::ssh::SshKey;

/// What a VM's cloud-init needs to know.
#[derive(Clone, Debug)]
pub struct VmCloudInit<'a> {
    pub vm_id: VmId,
    pub hostname: &'a str,
    pub ssh_keys: &'a [SshKey],
    /// Where the guest posts when cloud-init finishes, if anywhere.
    pub phone_home_url: Option<&'a str>,
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
        };
        let ud = ci.user_data();
        assert!(ud.starts_with("#cloud-config\n"));
        assert!(ud.contains("hostname: \"web-1\""));
        assert!(ud.contains("ssh-ed25519 "));
        assert!(ud.contains("phone_home:"));
        assert!(ci.meta_data().contains("local-hostname: \"web-1\""));
    }
}
