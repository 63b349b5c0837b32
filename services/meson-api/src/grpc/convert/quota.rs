//! Quotas and plans: answers, and a tenant's quota update and a plan as the
//! REST bodies (`app::quotas` reads them, as it reads REST's: the rules
//! are there).

use meson_core::Error;
use meson_proto::meson::v1 as pb;
use meson_types::admin as wire;
use serde_json::{Map, Value};
use std::collections::HashMap;

pub fn quota(q: wire::Quota) -> pb::Quota {
    pb::Quota {
        tenant: q.tenant,
        plan: q.plan,
        limits: q
            .limits
            .into_iter()
            .map(|l| pb::QuotaLimit {
                name: l.name,
                quota: l.quota,
                current: l.current,
                default: l.default,
            })
            .collect(),
    }
}

pub fn plan(p: wire::Plan) -> pb::Plan {
    pb::Plan {
        name: p.name,
        description: p.description,
        quotas: p
            .quotas
            .into_iter()
            .map(|q| pb::PlanQuota {
                name: q.name,
                quota: q.quota,
                default: q.default,
            })
            .collect(),
    }
}

/// Quotas by name as a JSON object: every one set, 0 included.
fn amounts(quotas: &HashMap<String, i64>) -> Map<String, Value> {
    quotas
        .iter()
        .map(|(name, n)| (name.clone(), Value::from(*n)))
        .collect()
}

/// An `UpdateTenantQuotaRequest` as the REST body of
/// `PATCH /v1/tenants/{tenant}/quotas`: `quotas` are numbers, `reset` is
/// `null`, and `plan` is sent when set (empty: `null`, on no plan). A name
/// both set and reset is refused (`reset`): REST cannot say both.
pub fn quota_update(r: &pb::UpdateTenantQuotaRequest) -> Result<Value, Error> {
    let mut body = amounts(&r.quotas);
    for name in &r.reset {
        if name == "plan" || name == "quotas" {
            return Err(Error::invalid(
                "reset",
                format!("{name} is not a quota (a plan is set with `plan`)"),
            ));
        }
        if body
            .insert(name.clone(), Value::Null)
            .is_some_and(|v| !v.is_null())
        {
            return Err(Error::invalid(
                "reset",
                format!("{name} is also in quotas: set it or reset it"),
            ));
        }
    }
    if let Some(plan) = &r.plan {
        let plan = if plan.is_empty() {
            Value::Null
        } else {
            plan.as_str().into()
        };
        body.insert("plan".to_owned(), plan);
    }
    Ok(Value::Object(body))
}

/// A `PutPlanRequest` as the REST body of `PUT /v1/admin/plans/{name}`:
/// an empty description or no quotas is absent (the REST defaults).
pub fn plan_put(r: &pb::PutPlanRequest) -> Value {
    let mut body = Map::new();
    if !r.description.is_empty() {
        body.insert("description".to_owned(), r.description.as_str().into());
    }
    if !r.quotas.is_empty() {
        body.insert("quotas".to_owned(), Value::Object(amounts(&r.quotas)));
    }
    Value::Object(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use meson_core::quota::{self, QuotaOverrides};
    use serde_json::json;

    use crate::grpc::convert::rejected;

    #[test]
    fn a_quota_update_is_the_rest_one() {
        let r = pb::UpdateTenantQuotaRequest {
            tenant: "dev".into(),
            quotas: HashMap::from([("vms".into(), 20), ("clusters".into(), 0)]),
            reset: vec!["nodes".into()],
            plan: Some("pro".into()),
        };
        assert_eq!(
            quota_update(&r).unwrap(),
            json!({"vms": 20, "clusters": 0, "nodes": null, "plan": "pro"})
        );
        // No plan: on none; `default` goes as it is (the app reads it).
        for (plan, sent) in [("", Value::Null), ("default", json!("default"))] {
            let r = pb::UpdateTenantQuotaRequest {
                plan: Some(plan.into()),
                ..Default::default()
            };
            assert_eq!(quota_update(&r).unwrap(), json!({"plan": sent}));
        }
        // Nothing set: nothing changes.
        assert_eq!(
            quota_update(&pb::UpdateTenantQuotaRequest::default()).unwrap(),
            json!({})
        );
        // Set and reset at once; a bad amount and an unknown name are the
        // REST parser's to name.
        let both = pb::UpdateTenantQuotaRequest {
            quotas: HashMap::from([("vms".into(), 1)]),
            reset: vec!["vms".into()],
            ..Default::default()
        };
        assert_eq!(rejected(quota_update(&both)), ["reset"]);
        let bad = pb::UpdateTenantQuotaRequest {
            quotas: HashMap::from([("vms".into(), -1), ("cpus".into(), 1)]),
            ..Default::default()
        };
        let body = quota_update(&bad).unwrap();
        assert_eq!(
            rejected(QuotaOverrides::default().patch(&body)),
            ["cpus", "vms"]
        );
    }

    #[test]
    fn a_plan_is_the_rest_one() {
        let r = pb::PutPlanRequest {
            name: "small".into(),
            description: "Try it out".into(),
            quotas: HashMap::from([("vms".into(), 1), ("clusters".into(), 0)]),
        };
        let body = plan_put(&r);
        assert_eq!(
            body,
            json!({"description": "Try it out", "quotas": {"vms": 1, "clusters": 0}})
        );
        let (description, quotas) = quota::parse_plan(&body).unwrap();
        assert_eq!(description, "Try it out");
        assert_eq!((quotas.vms, quotas.clusters), (Some(1), Some(0)));
        assert_eq!(plan_put(&pb::PutPlanRequest::default()), json!({}));
        let bad = pb::PutPlanRequest {
            quotas: HashMap::from([("vms".into(), -1)]),
            ..Default::default()
        };
        assert_eq!(rejected(quota::parse_plan(&plan_put(&bad))), ["quotas.vms"]);
    }
}
