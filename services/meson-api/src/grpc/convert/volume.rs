//! Volumes: answers, and requests as the REST ones.

use super::json::Obj;
use super::meta::{map, page_query, timestamp};
use meson_proto::meson::v1 as pb;
use meson_types as wire;
use serde_json::Value;

pub fn volume(v: wire::volume::Volume) -> pb::Volume {
    pb::Volume {
        id: v.id.to_string(),
        name: v.name,
        kind: v.kind,
        size: v.size,
        status: v.status,
        vm: v.vm.map(|id| id.to_string()),
        standalone: v.standalone,
        attached_to: v.attached_to.map(|id| id.to_string()),
        labels: map(&v.labels),
        bootable: v.bootable,
        readonly: v.readonly,
        host: v.host,
        provider: v.provider,
        region: v.region,
        created: Some(timestamp(v.created)),
    }
}

/// A `CreateVolumeRequest` as the REST body of `POST /v1/volumes`.
pub fn volume_create(r: &pb::CreateVolumeRequest) -> Value {
    Obj::new()
        .str("name", &r.name)
        .num("size", r.size)
        .labels("labels", &r.labels)
        .str("provider", &r.provider)
        .str("continent", &r.continent)
        .str("region", &r.region)
        .flag("bootable", r.bootable)
        .flag("readonly", r.readonly)
        .value()
}

/// An `AttachVolumeRequest` as the REST body of its attach action.
pub fn volume_attach(r: &pb::AttachVolumeRequest) -> Value {
    Obj::new().str("vm", &r.vm).value()
}

/// A `ResizeVolumeRequest` as the REST body of its resize action.
pub fn volume_resize(r: &pb::ResizeVolumeRequest) -> Value {
    Obj::new().num("size", r.size).value()
}

/// A `MoveVolumeRequest` as the REST body of its move action.
pub fn volume_move(r: &pb::MoveVolumeRequest) -> Value {
    Obj::new().str("host", &r.host).value()
}

/// `ListVolumesRequest` as the REST list's query pairs: an empty field
/// filters nothing.
pub fn volume_list_query(r: &pb::ListVolumesRequest) -> Vec<(String, String)> {
    let mut q = Vec::new();
    page_query(r.page.as_ref(), &mut q);
    if !r.vm.is_empty() {
        q.push(("vm".into(), r.vm.clone()));
    }
    if !r.kind.is_empty() {
        q.push(("kind".into(), r.kind.clone()));
    }
    if let Some(standalone) = r.standalone {
        q.push(("standalone".into(), standalone.to_string()));
    }
    q
}
