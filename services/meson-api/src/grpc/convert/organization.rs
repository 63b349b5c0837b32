//! Organisations and sub-organisations: answers, and requests as the REST
//! ones.

use super::json::Obj;
use super::meta::timestamp;
use meson_proto::meson::v1 as pb;
use meson_types as wire;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// An organisation: a root's quotas (REST's `null`) are an empty map.
pub fn organization(o: wire::organization::Organization) -> pb::Organization {
    pb::Organization {
        id: o.id,
        name: o.name,
        parent: o.parent,
        quotas: o.quotas.unwrap_or_default().into_iter().collect(),
        depth: o.depth,
        created_by: o.created_by,
        created: Some(timestamp(o.created)),
    }
}

/// Quotas by name as a JSON object, every one named (0 and negative
/// amounts included: the parser names a bad one); none: absent.
fn quotas(q: &HashMap<String, i64>) -> Option<Value> {
    (!q.is_empty()).then(|| {
        Value::Object(
            q.iter()
                .map(|(name, n)| (name.clone(), Value::from(*n)))
                .collect::<Map<String, Value>>(),
        )
    })
}

/// A `CreateOrganizationRequest` as the REST body of `POST
/// /v1/organizations`: an empty name is absent (and named as missing); no
/// quotas, none (the REST default).
pub fn organization_create(r: &pb::CreateOrganizationRequest) -> Value {
    Obj::new()
        .str("name", &r.name)
        .opt("quotas", quotas(&r.quotas))
        .value()
}

/// An `UpdateOrganizationRequest` as the REST body of `PATCH
/// /v1/organizations/{id}`: no quotas is an absent `quotas` (named as
/// missing: there is nothing to change).
pub fn organization_update(r: &pb::UpdateOrganizationRequest) -> Value {
    Obj::new().opt("quotas", quotas(&r.quotas)).value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::convert::rejected;
    use meson_core::organization::{OrgCreate, OrgUpdate};
    use serde_json::json;

    #[test]
    fn organization_requests_are_the_rest_ones() {
        let r = pb::CreateOrganizationRequest {
            name: "platform".into(),
            quotas: HashMap::from([("vms".into(), 3), ("vcpus".into(), 8), ("nodes".into(), 0)]),
        };
        let body = organization_create(&r);
        assert_eq!(
            body,
            json!({"name": "platform", "quotas": {"vms": 3, "vcpus": 8, "nodes": 0}})
        );
        let parsed = OrgCreate::parse(&body).unwrap();
        assert_eq!(parsed.name, "platform");
        assert_eq!(
            (
                parsed.quotas.vms,
                parsed.quotas.vcpus,
                parsed.quotas.ram_mib
            ),
            (3, 8, 0)
        );
        // No quotas: none, as REST's default.
        let bare = pb::CreateOrganizationRequest {
            name: "data".into(),
            ..Default::default()
        };
        assert_eq!(organization_create(&bare), json!({"name": "data"}));
        assert_eq!(
            OrgCreate::parse(&organization_create(&bare))
                .unwrap()
                .quotas
                .vms,
            0
        );

        // Bad fields are named as REST names them.
        let rejected_create =
            |r: &pb::CreateOrganizationRequest| rejected(OrgCreate::parse(&organization_create(r)));
        assert_eq!(
            rejected_create(&pb::CreateOrganizationRequest::default()),
            ["name"]
        );
        let bad = pb::CreateOrganizationRequest {
            name: "Platform".into(),
            quotas: HashMap::from([("vms".into(), -1), ("gpus".into(), 1)]),
        };
        assert_eq!(rejected_create(&bad), ["name", "quotas.gpus", "quotas.vms"]);

        let u = pb::UpdateOrganizationRequest {
            id: "acme.platform".into(),
            quotas: HashMap::from([("vms".into(), 20)]),
        };
        assert_eq!(organization_update(&u), json!({"quotas": {"vms": 20}}));
        let parsed = OrgUpdate::parse(&organization_update(&u)).unwrap();
        assert_eq!((parsed.quotas.vms, parsed.quotas.vcpus), (Some(20), None));
        assert_eq!(
            rejected(OrgUpdate::parse(&organization_update(
                &pb::UpdateOrganizationRequest {
                    id: "acme.platform".into(),
                    ..Default::default()
                }
            ))),
            ["quotas"]
        );
    }

    #[test]
    fn a_root_has_no_quotas_and_a_sub_organisation_every_one() {
        let created = chrono::DateTime::parse_from_rfc3339("2026-11-01T00:00:00Z")
            .unwrap()
            .to_utc();
        let root = wire::organization::Organization {
            id: "acme".into(),
            name: "acme".into(),
            parent: None,
            quotas: None,
            depth: 0,
            created_by: "olga".into(),
            created,
        };
        let pb_root = organization(root.clone());
        assert!(pb_root.quotas.is_empty() && pb_root.parent.is_none());
        assert_eq!(pb_root.created.unwrap().seconds, created.timestamp());
        let sub = wire::organization::Organization {
            id: "acme.platform".into(),
            name: "platform".into(),
            parent: Some("acme".into()),
            quotas: Some(
                meson_core::quota::NAMES
                    .iter()
                    .map(|n| ((*n).to_owned(), 2))
                    .collect(),
            ),
            depth: 1,
            ..root
        };
        let pb_sub = organization(sub);
        assert_eq!(pb_sub.parent.as_deref(), Some("acme"));
        assert_eq!(pb_sub.quotas.len(), meson_core::quota::NAMES.len());
        assert_eq!(pb_sub.quotas["images_gb"], 2);
        assert_eq!(pb_sub.depth, 1);
    }
}
