//! Images: answers, and requests as the REST ones.

use super::json::Obj;
use super::meta::{map, timestamp};
use meson_proto::meson::v1 as pb;
use meson_types as wire;
use serde_json::Value;

pub fn image(i: wire::image::Image) -> pb::Image {
    pb::Image {
        id: i.id.to_string(),
        name: i.name,
        status: i.status,
        source_type: i.source.kind,
        source_vm: i.source.vm.map(|id| id.to_string()),
        source_url: i.source.url,
        source_checksum: i.source.checksum,
        size: i.size,
        sha256: i.sha256,
        host: i.host,
        provider: i.provider,
        region: i.region,
        labels: map(&i.labels),
        error: i.error,
        created: Some(timestamp(i.created)),
    }
}

/// An `ImportImageRequest` as the REST body of `POST /v1/images`: empty
/// fields and a zero size are absent.
pub fn image_import(r: &pb::ImportImageRequest) -> Value {
    Obj::new()
        .str("name", &r.name)
        .str("url", &r.url)
        .str("checksum", &r.checksum)
        .num("size", r.size)
        .labels("labels", &r.labels)
        .str("provider", &r.provider)
        .str("continent", &r.continent)
        .str("region", &r.region)
        .value()
}

/// A `CreateImageFromVmRequest` as the REST body of
/// `POST /v1/vms/{id}/actions/create-image`.
pub fn image_snapshot(r: &pb::CreateImageFromVmRequest) -> Value {
    Obj::new()
        .str("name", &r.name)
        .labels("labels", &r.labels)
        .value()
}
