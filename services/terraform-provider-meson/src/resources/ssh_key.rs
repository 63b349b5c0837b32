//! `meson_ssh_key`: a public SSH key kept at meson.

use super::{Json, id, labels, labels_json, obj, text};
use crate::diag::{Failure, Res, map_field};
use crate::schema::{Attr, Block, Step};
use crate::value::Ty;
use meson_client::Client;
use meson_client::types::ssh_key::{SshKey, SshKeyCreateRequest};

pub fn block() -> Block {
    Block {
        description: "A public SSH key kept at meson. Its name and labels change in place; \
                      another key replaces it.",
        attrs: vec![
            Attr::computed("id", Ty::Str, "The key's id."),
            Attr::required(
                "name",
                Ty::Str,
                "The key's name, unique among the tenant's (in place).",
            )
            .tracked(),
            Attr::required(
                "public_key",
                Ty::Str,
                "The OpenSSH public key line, e.g. `file(\"~/.ssh/id_ed25519.pub\")` (a \
                 trailing newline is no change).",
            )
            .force_new()
            .tracked(),
            Attr::optional("labels", Ty::map(Ty::Str), "Labels (in place).").tracked(),
            Attr::computed(
                "fingerprint",
                Ty::Str,
                "`SHA256:...`, as `ssh-keygen -l` prints it.",
            ),
        ],
        blocks: vec![],
    }
}

pub fn field(f: &str) -> Option<Vec<Step>> {
    map_field(
        &[
            ("name", &["name"]),
            ("public_key", &["public_key"]),
            ("labels", &["labels"]),
        ],
        f,
    )
}

/// meson's view of `k`; the key line as the configuration wrote it
/// (`given`) when meson kept the same line, only trimmed.
fn to_json(k: &SshKey, given: Option<String>) -> Json {
    let public_key = given
        .filter(|g| g.trim() == k.public_key)
        .unwrap_or_else(|| k.public_key.clone());
    obj([
        ("id", Json::from(k.id.to_string())),
        ("name", Json::from(k.name.clone())),
        ("public_key", Json::from(public_key)),
        ("labels", labels_json(&k.labels)),
        ("fingerprint", Json::from(k.fingerprint.clone())),
    ])
}

fn err(e: meson_client::Error) -> Failure {
    Failure::from_client(e, field)
}

pub async fn create(c: &Client, p: &Json) -> Res<Json> {
    let req = SshKeyCreateRequest {
        name: text(p, "name").unwrap_or_default(),
        public_key: text(p, "public_key").unwrap_or_default(),
        labels: labels(p),
    };
    let k = c.ssh_key_create(&req).await.map_err(err)?;
    Ok(to_json(&k, text(p, "public_key")))
}

pub async fn read(c: &Client, state: &Json) -> Res<Option<Json>> {
    match c.ssh_key_get(id(state)?).await {
        Ok(k) => Ok(Some(to_json(&k, text(state, "public_key")))),
        Err(e) if e.code() == Some("not_found") => Ok(None),
        Err(e) => Err(err(e)),
    }
}

pub async fn update(c: &Client, prior: &Json, p: &Json) -> Res<Json> {
    let id = id(prior)?;
    if let Some(req) = super::rename_relabel(prior, p) {
        c.ssh_key_update(id, &req).await.map_err(err)?;
    }
    let k = c.ssh_key_get(id).await.map_err(err)?;
    Ok(to_json(&k, text(p, "public_key")))
}

pub async fn delete(c: &Client, prior: &Json) -> Res<()> {
    c.ssh_key_delete(id(prior)?).await.map_err(err)
}
