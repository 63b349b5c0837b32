//! Port forwards: answers, and the create request as the REST body.

use super::json::Obj;
use super::meta::timestamp;
use meson_proto::meson::v1 as pb;
use meson_types as wire;
use serde_json::Value;

pub fn port_forward(f: wire::port_forward::PortForward) -> pb::PortForward {
    pb::PortForward {
        id: f.id.to_string(),
        network: f.network.to_string(),
        vm: f.vm.to_string(),
        protocol: f.protocol,
        public_ip: f.public_ip,
        public_port: u32::from(f.public_port),
        private_port: u32::from(f.private_port),
        status: f.status,
        host: f.host,
        error: f.error,
        created: Some(timestamp(f.created)),
    }
}

/// A `CreatePortForwardRequest` as the REST body of
/// `POST /v1/networks/{id}/port-forwards`: empty fields and zero ports are
/// absent (and named as missing).
pub fn port_forward_create(r: &pb::CreatePortForwardRequest) -> Value {
    Obj::new()
        .str("protocol", &r.protocol)
        .num("public_port", r.public_port)
        .str("vm", &r.vm)
        .num("private_port", r.private_port)
        .value()
}
