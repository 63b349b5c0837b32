//! `meson_volume`: a standalone data volume, and `meson_volume_attachment`:
//! one attached to a VM of its host.

use super::{Json, flag, id, labels, labels_json, number_u32, obj, parse_id, text, wait};
use crate::diag::{Failure, Res, map_field};
use crate::schema::{Attr, Block, Step, timeouts_block};
use crate::value::Ty;
use meson_client::Client;
use meson_client::types::volume::{Volume, VolumeCreateRequest};
use std::time::Duration;

pub fn block() -> Block {
    Block {
        description: "A standalone data volume on one AtomOS host. Its name, labels and size \
                      change in place (a volume only grows: a smaller size is refused); \
                      anything else replaces it. Attach it with `meson_volume_attachment` or \
                      a VM's `volumes`.",
        attrs: vec![
            Attr::computed("id", Ty::Str, "The volume's id."),
            Attr::required("name", Ty::Str, "The volume's name (in place).").tracked(),
            Attr::required("size", Ty::Num, "GB (in place, grow only).").tracked(),
            Attr::optional("provider_name", Ty::Str, "Place it with this provider.")
                .force_new()
                .tracked(),
            Attr::optional("region", Ty::Str, "Place it in this region.")
                .force_new()
                .tracked(),
            Attr::defaulted("bootable", Ty::Bool, "Passed to AtomOS (default false).")
                .force_new()
                .tracked(),
            Attr::defaulted("readonly", Ty::Bool, "Passed to AtomOS (default false).")
                .force_new()
                .tracked(),
            Attr::optional("labels", Ty::map(Ty::Str), "Labels (in place).").tracked(),
            Attr::computed(
                "status",
                Ty::Str,
                "`available`, `attached`, `deleting` or `error`.",
            )
            .volatile(),
            Attr::computed("attached_to", Ty::Str, "The VM it is attached to, if any.").tracked(),
            Attr::computed("host", Ty::Str, "The AtomOS host it lives on."),
        ],
        blocks: vec![timeouts_block()],
    }
}

pub fn field(f: &str) -> Option<Vec<Step>> {
    map_field(
        &[
            ("name", &["name"]),
            ("size", &["size"]),
            ("provider", &["provider_name"]),
            ("region", &["region"]),
            ("bootable", &["bootable"]),
            ("readonly", &["readonly"]),
            ("labels", &["labels"]),
        ],
        f,
    )
}

fn to_json(v: &Volume, prior: &Json) -> Json {
    let opt = |s: &Option<String>| s.clone().map_or(Json::Null, Json::from);
    // The provider and region as configured: meson reports the host's,
    // which an unconstrained volume's configuration leaves out.
    let kept = |k: &str, got: &Option<String>| match prior.get(k) {
        Some(Json::Null) | None => Json::Null,
        Some(_) => opt(got),
    };
    obj([
        ("id", Json::from(v.id.to_string())),
        ("name", Json::from(v.name.clone())),
        ("size", Json::from(v.size)),
        ("provider_name", kept("provider_name", &v.provider)),
        ("region", kept("region", &v.region)),
        ("bootable", Json::from(v.bootable)),
        ("readonly", Json::from(v.readonly)),
        ("labels", labels_json(&v.labels)),
        ("status", Json::from(v.status.clone())),
        (
            "attached_to",
            v.attached_to
                .map_or(Json::Null, |id| Json::from(id.to_string())),
        ),
        ("host", opt(&v.host)),
    ])
}

fn err(e: meson_client::Error) -> Failure {
    Failure::from_client(e, field)
}

pub async fn create(c: &Client, p: &Json, t: Duration) -> Res<Json> {
    let req = VolumeCreateRequest {
        name: text(p, "name").unwrap_or_default(),
        size: number_u32(p, "size").unwrap_or_default(),
        labels: labels(p),
        provider: text(p, "provider_name"),
        region: text(p, "region"),
        bootable: flag(p, "bootable"),
        readonly: flag(p, "readonly"),
        ..VolumeCreateRequest::default()
    };
    let created = c.volume_create(&req).await.map_err(err)?;
    wait(c, &[created.action.id], t, field).await?;
    Ok(to_json(
        &c.volume_get(created.volume.id).await.map_err(err)?,
        p,
    ))
}

pub async fn read(c: &Client, state: &Json) -> Res<Option<Json>> {
    match c.volume_get(id(state)?).await {
        Ok(v) => Ok(Some(to_json(&v, state))),
        Err(e) if e.code() == Some("not_found") => Ok(None),
        Err(e) => Err(err(e)),
    }
}

pub async fn update(c: &Client, prior: &Json, p: &Json, t: Duration) -> Res<Json> {
    let id = id(prior)?;
    if let Some(req) = super::rename_relabel(prior, p) {
        c.volume_update(id, &req).await.map_err(err)?;
    }
    if super::changed(prior, p, "size") {
        let size = number_u32(p, "size").unwrap_or_default();
        let a = c.volume_resize(id, size).await.map_err(err)?;
        wait(c, &[a.id], t, field).await?;
    }
    Ok(to_json(&c.volume_get(id).await.map_err(err)?, p))
}

pub async fn delete(c: &Client, prior: &Json, t: Duration) -> Res<()> {
    let a = c.volume_delete(id(prior)?).await.map_err(err)?;
    wait(c, &[a.id], t, field).await
}

/// `meson_volume_attachment`.
pub mod attachment {
    use super::*;

    pub fn block() -> Block {
        Block {
            description: "A standalone volume attached to a VM of its host, running or off \
                          (hot-plugged). Changing either replaces the attachment: the volume \
                          is detached, then attached to the new VM.",
            attrs: vec![
                Attr::computed("id", Ty::Str, "The volume's id."),
                Attr::required("volume_id", Ty::Str, "The volume.")
                    .force_new()
                    .tracked(),
                Attr::required("vm_id", Ty::Str, "The VM.")
                    .force_new()
                    .tracked(),
            ],
            blocks: vec![timeouts_block()],
        }
    }

    pub fn field(f: &str) -> Option<Vec<Step>> {
        map_field(&[("vm", &["vm_id"])], f)
    }

    fn err(e: meson_client::Error) -> Failure {
        Failure::from_client(e, field)
    }

    fn to_json(volume: uuid::Uuid, vm: uuid::Uuid) -> Json {
        obj([
            ("id", Json::from(volume.to_string())),
            ("volume_id", Json::from(volume.to_string())),
            ("vm_id", Json::from(vm.to_string())),
        ])
    }

    fn ids(p: &Json) -> Res<(uuid::Uuid, uuid::Uuid)> {
        Ok((
            parse_id(&text(p, "volume_id").unwrap_or_default())?,
            parse_id(&text(p, "vm_id").unwrap_or_default())?,
        ))
    }

    pub async fn create(c: &Client, p: &Json, t: Duration) -> Res<Json> {
        let (volume, vm) = ids(p)?;
        let a = c.volume_attach(volume, vm).await.map_err(err)?;
        wait(c, &[a.id], t, field).await?;
        Ok(to_json(volume, vm))
    }

    /// Gone when the volume is, or is no longer attached to the VM.
    pub async fn read(c: &Client, state: &Json) -> Res<Option<Json>> {
        let volume = parse_id(
            &text(state, "volume_id")
                .or_else(|| text(state, "id"))
                .unwrap_or_default(),
        )?;
        match c.volume_get(volume).await {
            Ok(v) => Ok(v.attached_to.map(|vm| to_json(volume, vm))),
            Err(e) if e.code() == Some("not_found") => Ok(None),
            Err(e) => Err(err(e)),
        }
    }

    pub async fn delete(c: &Client, prior: &Json, t: Duration) -> Res<()> {
        let (volume, vm) = ids(prior)?;
        match c.volume_get(volume).await {
            Ok(v) if v.attached_to == Some(vm) => {}
            Ok(_) => return Ok(()),
            Err(e) => return Err(err(e)),
        }
        let a = c.volume_detach(volume).await.map_err(err)?;
        wait(c, &[a.id], t, field).await
    }
}
