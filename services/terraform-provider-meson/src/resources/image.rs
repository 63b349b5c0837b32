//! `meson_image`: an image imported from a URL, or made from a VM's boot
//! volume.

use super::{Json, id, labels, labels_json, number_u32, obj, text, wait};
use crate::diag::{Failure, Res, map_field};
use crate::schema::{Attr, Block, Step, timeouts_block};
use crate::value::Ty;
use meson_client::Client;
use meson_client::types::image::{Image, ImageImportRequest, ImageSnapshotRequest};
use std::time::Duration;

pub fn block() -> Block {
    Block {
        description: "An image: imported from `url`, or a crash-consistent copy of the boot \
                      volume of the VM `vm_id` (give one of them). Its name and labels \
                      change in place; anything else replaces it.",
        attrs: vec![
            Attr::computed("id", Ty::Str, "The image's id."),
            Attr::required("name", Ty::Str, "The image's name (in place).").tracked(),
            Attr::optional(
                "url",
                Ty::Str,
                "An http(s) URL of a qcow2 or raw disk image to import.",
            )
            .force_new()
            .tracked(),
            Attr::optional(
                "checksum",
                Ty::Str,
                "The file's sha256: the import fails when the download differs.",
            )
            .force_new()
            .tracked(),
            Attr::optional("vm_id", Ty::Str, "The VM whose boot volume to copy.")
                .force_new()
                .tracked(),
            Attr::defaulted(
                "size",
                Ty::Num,
                "GB: an import's size (default 10), a copy's boot volume's.",
            )
            .force_new()
            .tracked(),
            Attr::optional(
                "provider_name",
                Ty::Str,
                "Place an import with this provider.",
            )
            .force_new()
            .tracked(),
            Attr::optional("region", Ty::Str, "Place an import in this region.")
                .force_new()
                .tracked(),
            Attr::optional("labels", Ty::map(Ty::Str), "Labels (in place).").tracked(),
            Attr::computed("status", Ty::Str, "`available`, `deleting` or `error`.").volatile(),
            Attr::computed("sha256", Ty::Str, "The sha256 of an import's bytes."),
            Attr::computed("host", Ty::Str, "The AtomOS host it lives on."),
        ],
        blocks: vec![timeouts_block()],
    }
}

pub fn field(f: &str) -> Option<Vec<Step>> {
    map_field(
        &[
            ("name", &["name"]),
            ("url", &["url"]),
            ("checksum", &["checksum"]),
            ("size", &["size"]),
            ("provider", &["provider_name"]),
            ("region", &["region"]),
            ("labels", &["labels"]),
        ],
        f,
    )
}

fn to_json(i: &Image, prior: &Json) -> Json {
    let keep = |k: &str| prior.get(k).cloned().unwrap_or(Json::Null);
    obj([
        ("id", Json::from(i.id.to_string())),
        ("name", Json::from(i.name.clone())),
        ("url", i.source.url.clone().map_or(Json::Null, Json::from)),
        ("checksum", keep("checksum")),
        (
            "vm_id",
            i.source
                .vm
                .map_or(Json::Null, |v| Json::from(v.to_string())),
        ),
        ("size", Json::from(i.size)),
        ("provider_name", keep("provider_name")),
        ("region", keep("region")),
        ("labels", labels_json(&i.labels)),
        ("status", Json::from(i.status.clone())),
        ("sha256", i.sha256.clone().map_or(Json::Null, Json::from)),
        ("host", i.host.clone().map_or(Json::Null, Json::from)),
    ])
}

fn err(e: meson_client::Error) -> Failure {
    Failure::from_client(e, field)
}

pub async fn create(c: &Client, p: &Json, t: Duration) -> Res<Json> {
    let created = match (text(p, "vm_id"), text(p, "url")) {
        (Some(_), Some(_)) | (None, None) => {
            return Err(Failure::msg(
                "give one of url and vm_id",
                "an image is imported from a URL or copied from a VM, not both",
            ));
        }
        (Some(vm), None) => {
            let vm = super::parse_id(&vm)?;
            let req = ImageSnapshotRequest {
                name: text(p, "name").unwrap_or_default(),
                labels: labels(p),
            };
            c.vm_create_image(vm, &req).await.map_err(err)?
        }
        (None, Some(url)) => {
            let req = ImageImportRequest {
                name: text(p, "name").unwrap_or_default(),
                url,
                checksum: text(p, "checksum"),
                size: number_u32(p, "size"),
                labels: labels(p),
                provider: text(p, "provider_name"),
                region: text(p, "region"),
                continent: None,
            };
            c.image_import(&req).await.map_err(err)?
        }
    };
    wait(c, &[created.action.id], t, field).await?;
    Ok(to_json(
        &c.image_get(created.image.id).await.map_err(err)?,
        p,
    ))
}

pub async fn read(c: &Client, state: &Json) -> Res<Option<Json>> {
    match c.image_get(id(state)?).await {
        Ok(i) => Ok(Some(to_json(&i, state))),
        Err(e) if e.code() == Some("not_found") => Ok(None),
        Err(e) => Err(err(e)),
    }
}

pub async fn update(c: &Client, prior: &Json, p: &Json) -> Res<Json> {
    let id = id(prior)?;
    if let Some(req) = super::rename_relabel(prior, p) {
        c.image_update(id, &req).await.map_err(err)?;
    }
    Ok(to_json(&c.image_get(id).await.map_err(err)?, p))
}

pub async fn delete(c: &Client, prior: &Json, t: Duration) -> Res<()> {
    let a = c.image_delete(id(prior)?).await.map_err(err)?;
    wait(c, &[a.id], t, field).await
}
