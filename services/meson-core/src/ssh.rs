//! OpenSSH public key validation: the key is injected into cloud-init, so a
//! broken one would silently lock the user out of their VM.

use base64::Engine;
use serde::{Deserialize, Serialize};

/// A validated OpenSSH public key line (`type base64 [comment]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SshKey(String);

const ALLOWED: &[&str] = &[
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

impl SshKey {
    pub fn parse(line: &str) -> Result<Self, String> {
        let line = line.trim();
        if line.len() > 16 * 1024 {
            return Err("is longer than 16 KiB".into());
        }
        if line.contains(['\n', '\r', '\0']) {
            return Err("must be a single line".into());
        }
        let mut parts = line.split_whitespace();
        let (Some(kind), Some(data)) = (parts.next(), parts.next()) else {
            return Err("must look like '<type> <base64 key> [comment]'".into());
        };
        if kind == "ssh-dss" {
            return Err("DSA keys are not supported; use ssh-ed25519 or ssh-rsa".into());
        }
        if !ALLOWED.contains(&kind) {
            return Err(format!(
                "unsupported key type '{kind}'; use one of {}",
                ALLOWED.join(", ")
            ));
        }
        let blob = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|_| "key data is not valid base64".to_owned())?;
        // The blob starts with the key type as an SSH string: u32 length + bytes.
        let embedded = blob
            .get(..4)
            .map(|l| u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize)
            .and_then(|n| blob.get(4..4 + n));
        if embedded != Some(kind.as_bytes()) {
            return Err(format!("key data does not encode a {kind} key"));
        }
        let min = if kind == "ssh-rsa" { 256 } else { 32 };
        if blob.len() < min {
            return Err("key data is too short".into());
        }
        Ok(SshKey(line.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub const ED25519: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMLavtiPfhiG3t6TAxHosXoVh7Pc/lSD8L9SNPyAzp1d user@host";

    #[test]
    fn accepts_real_key() {
        assert!(SshKey::parse(ED25519).is_ok());
    }

    #[test]
    fn rejects_placeholders_and_garbage() {
        assert!(SshKey::parse("ssh-rsa AAAA... user@host").is_err());
        assert!(SshKey::parse("not-a-key").is_err());
        assert!(SshKey::parse("ssh-dss AAAAB3NzaC1kc3M=").is_err());
        // right base64, wrong embedded type
        assert!(SshKey::parse(&ED25519.replace("ssh-ed25519 ", "ssh-rsa ")).is_err());
    }
}
