//! OpenSSH public keys: the validation of a key line (the key is injected
//! into cloud-init, so a broken one would silently lock the user out of
//! their VM), its fingerprint, and the keys a tenant keeps at meson
//! ([`StoredKey`], `/v1/ssh-keys`).

use crate::TenantId;
use crate::labels::{self, Labels};
use crate::parse::{Parser, Warning};
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

crate::id::uuid_id!(
    /// A public SSH key a tenant keeps at meson.
    SshKeyId
);

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

    /// `SHA256:` and the unpadded base64 of the key blob's SHA-256, as
    /// `ssh-keygen -l` prints it: the same key has the same fingerprint
    /// whatever its comment.
    pub fn fingerprint(&self) -> String {
        let blob = self
            .0
            .split_whitespace()
            .nth(1)
            .and_then(|data| base64::engine::general_purpose::STANDARD.decode(data).ok())
            .unwrap_or_default();
        format!(
            "SHA256:{}",
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(Sha256::digest(&blob))
        )
    }
}

/// The longest name of a kept key.
pub const MAX_NAME_LEN: usize = 63;

/// A public key a tenant keeps at meson, to name at a VM's create.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredKey {
    pub id: SshKeyId,
    pub tenant: TenantId,
    pub name: String,
    pub key: SshKey,
    pub fingerprint: String,
    pub labels: Labels,
    pub created: chrono::DateTime<chrono::Utc>,
}

/// `POST /v1/ssh-keys`, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyCreate {
    pub name: String,
    pub key: SshKey,
    pub labels: Labels,
}

impl KeyCreate {
    /// `{"name", "public_key", "labels"?}`: every bad field named, unknown
    /// ones as warnings.
    pub fn parse(body: &Value) -> crate::Result<(KeyCreate, Vec<Warning>)> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let name = p.atomos_name(&mut root, "name", true, MAX_NAME_LEN);
        let key = match p.string(&mut root, "public_key", true) {
            Some((path, line)) => match SshKey::parse(line) {
                Ok(k) => Some(k),
                Err(m) => {
                    p.errors.add(path, m);
                    None
                }
            },
            None => None,
        };
        let labels = match root.get("labels") {
            (path, Some(v)) => labels::parse(&path, v, &mut p.errors),
            (_, None) => Some(Labels::new()),
        };
        p.done(root);
        let Parser { errors, warnings } = p;
        match (name, key, labels) {
            (Some(name), Some(key), Some(labels)) if errors.is_empty() => {
                Ok((KeyCreate { name, key, labels }, warnings))
            }
            _ => Err(errors.into_error().unwrap_or_else(|| {
                crate::Error::internal("an SSH key request failed without a reason")
            })),
        }
    }

    /// The key to keep, for `tenant`.
    pub fn stored(self, tenant: &TenantId) -> StoredKey {
        StoredKey {
            id: SshKeyId::new(),
            tenant: tenant.clone(),
            name: self.name,
            fingerprint: self.key.fingerprint(),
            key: self.key,
            labels: self.labels,
            created: chrono::Utc::now(),
        }
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

    #[test]
    fn fingerprints_as_ssh_keygen() {
        // What `ssh-keygen -lf` prints for ED25519.
        let key = SshKey::parse(ED25519).unwrap();
        assert_eq!(
            key.fingerprint(),
            "SHA256:OF4+PTi46SqM4YEL6aCsZVNUMnfavEYUU51S/DgawKI"
        );
        let recommented = SshKey::parse(&ED25519.replace("user@host", "other")).unwrap();
        assert_eq!(recommented.fingerprint(), key.fingerprint());
    }

    #[test]
    fn a_key_request_names_every_bad_field() {
        let (req, warnings) = KeyCreate::parse(&serde_json::json!({
            "name": "laptop", "public_key": format!("  {ED25519}\n"), "color": "red"
        }))
        .unwrap();
        assert_eq!(req.name, "laptop");
        assert_eq!(req.key.as_str(), ED25519);
        assert!(req.labels.is_empty());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let names = |body| match KeyCreate::parse(&body) {
            Err(crate::Error::InvalidInput { fields }) => {
                fields.into_iter().map(|f| f.name).collect::<Vec<_>>()
            }
            other => panic!("{other:?}"),
        };
        let bad = names(serde_json::json!({
            "name": "a b", "public_key": "ssh-rsa AAAA...", "labels": {"": "x"}
        }));
        assert!(bad.contains(&"name".to_owned()), "{bad:?}");
        assert!(bad.contains(&"public_key".to_owned()), "{bad:?}");
        assert!(bad.iter().any(|f| f.starts_with("labels")), "{bad:?}");
        assert_eq!(
            names(serde_json::json!({})),
            ["name".to_owned(), "public_key".to_owned()]
        );
    }
}
