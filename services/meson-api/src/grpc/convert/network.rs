//! Networks: answers, and `CreateNetworkRequest` as the REST request.

use super::json::Obj;
use super::meta::{map, timestamp};
use meson_proto::meson::v1 as pb;
use meson_types as wire;
use serde_json::Value;

pub(super) fn range(r: wire::network::AddressRange) -> pb::AddressRange {
    pb::AddressRange {
        start: r.start,
        last: r.last,
    }
}

pub fn network(n: wire::network::Network) -> pb::Network {
    pb::Network {
        id: n.id.to_string(),
        name: n.name,
        status: n.status,
        labels: map(&n.labels),
        created: Some(timestamp(n.created)),
        cidr: n.cidr,
        gateway: n.gateway,
        dhcp: n.dhcp,
        range: Some(range(n.range)),
        vms: n.vms.iter().map(ToString::to_string).collect(),
    }
}

/// `CreateNetworkRequest` as the REST network request.
pub fn network_create(r: &pb::CreateNetworkRequest) -> Value {
    let dhcp_range = r
        .dhcp_range
        .as_ref()
        .map(|d| Obj::new().str("start", &d.start).str("last", &d.last));
    Obj::new()
        .str("name", &r.name)
        .str("cidr", &r.cidr)
        .opt("dhcp", r.dhcp)
        .str("gateway", &r.gateway)
        .obj("dhcp_range", dhcp_range)
        .labels("labels", &r.labels)
        .value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_typed_network_request_is_the_rest_one() {
        let n = pb::CreateNetworkRequest {
            name: "db".into(),
            cidr: "192.168.10.0/24".into(),
            dhcp: Some(false),
            dhcp_range: Some(pb::AddressRange {
                start: "192.168.10.10".into(),
                last: "192.168.10.20".into(),
            }),
            ..Default::default()
        };
        assert_eq!(
            network_create(&n),
            json!({"name": "db", "cidr": "192.168.10.0/24", "dhcp": false,
                "dhcp_range": {"start": "192.168.10.10", "last": "192.168.10.20"}})
        );
    }
}
