//! `meson_network`: a private network VMs attach to.

use super::{Json, flag, id, labels, labels_json, obj, text, wait};
use crate::diag::{Failure, Res, map_field};
use crate::schema::{Attr, Block, Step, timeouts_block};
use crate::value::Ty;
use meson_client::Client;
use meson_client::types::network::{Network, NetworkCreateRequest};
use std::time::Duration;

pub fn block() -> Block {
    Block {
        description: "A private network. Its name and labels change in place; its addresses \
                      replace it.",
        attrs: vec![
            Attr::computed("id", Ty::Str, "The network's id."),
            Attr::required("name", Ty::Str, "The network's name (in place).").tracked(),
            Attr::required("cidr", Ty::Str, "The network, `192.168.1.0/24`.")
                .force_new()
                .tracked(),
            Attr::defaulted(
                "dhcp",
                Ty::Bool,
                "Whether meson's DHCP hands out addresses (default true).",
            )
            .force_new()
            .tracked(),
            Attr::defaulted(
                "gateway",
                Ty::Str,
                "The gateway (default: the first usable address).",
            )
            .force_new()
            .tracked(),
            Attr::defaulted("start_address", Ty::Str, "The first address handed out.")
                .force_new()
                .tracked(),
            Attr::defaulted("last_address", Ty::Str, "The last address handed out.")
                .force_new()
                .tracked(),
            Attr::optional("labels", Ty::map(Ty::Str), "Labels (in place).").tracked(),
            Attr::computed("status", Ty::Str, "`available` or `deleting`.").volatile(),
        ],
        blocks: vec![timeouts_block()],
    }
}

pub fn field(f: &str) -> Option<Vec<Step>> {
    map_field(
        &[
            ("name", &["name"]),
            ("cidr", &["cidr"]),
            ("dhcp", &["dhcp"]),
            ("gateway", &["gateway"]),
            ("dhcp_range.start", &["start_address"]),
            ("dhcp_range.last", &["last_address"]),
            ("start_address", &["start_address"]),
            ("last_address", &["last_address"]),
            ("labels", &["labels"]),
        ],
        f,
    )
}

fn to_json(n: &Network) -> Json {
    obj([
        ("id", Json::from(n.id.to_string())),
        ("name", Json::from(n.name.clone())),
        ("cidr", Json::from(n.cidr.clone())),
        ("dhcp", Json::from(n.dhcp)),
        ("gateway", Json::from(n.gateway.clone())),
        ("start_address", Json::from(n.range.start.clone())),
        ("last_address", Json::from(n.range.last.clone())),
        ("labels", labels_json(&n.labels)),
        ("status", Json::from(n.status.clone())),
    ])
}

fn err(e: meson_client::Error) -> Failure {
    Failure::from_client(e, field)
}

pub async fn create(c: &Client, p: &Json) -> Res<Json> {
    let req = NetworkCreateRequest {
        name: text(p, "name").unwrap_or_default(),
        cidr: text(p, "cidr").unwrap_or_default(),
        dhcp: flag(p, "dhcp"),
        gateway: text(p, "gateway"),
        start_address: text(p, "start_address"),
        last_address: text(p, "last_address"),
        labels: labels(p),
        ..NetworkCreateRequest::default()
    };
    let n = c.network_create(&req).await.map_err(err)?;
    Ok(to_json(&n))
}

pub async fn read(c: &Client, state: &Json) -> Res<Option<Json>> {
    match c.network_get(id(state)?).await {
        Ok(n) => Ok(Some(to_json(&n))),
        Err(e) if e.code() == Some("not_found") => Ok(None),
        Err(e) => Err(err(e)),
    }
}

pub async fn update(c: &Client, prior: &Json, p: &Json) -> Res<Json> {
    let id = id(prior)?;
    if let Some(req) = super::rename_relabel(prior, p) {
        c.network_update(id, &req).await.map_err(err)?;
    }
    Ok(to_json(&c.network_get(id).await.map_err(err)?))
}

pub async fn delete(c: &Client, prior: &Json, t: Duration) -> Res<()> {
    let a = c.network_delete(id(prior)?).await.map_err(err)?;
    wait(c, &[a.id], t, field).await
}
