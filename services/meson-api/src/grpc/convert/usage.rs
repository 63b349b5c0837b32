//! Metering: usage, statements and prices as answers; a usage query and a
//! price request as the REST ones. Amounts and quantities stay the REST
//! decimal strings.

use super::json::Obj;
use super::meta::timestamp;
use crate::app::usage::UsageQuery;
use meson_core::Error;
use meson_proto::meson::v1 as pb;
use meson_types::usage as wire;
use serde_json::Value;

pub fn usage(u: wire::Usage) -> pb::Usage {
    pb::Usage {
        from: Some(timestamp(u.from)),
        to: Some(timestamp(u.to)),
        group_by: u.group_by,
        lines: u.lines.into_iter().map(usage_line).collect(),
        totals: u
            .totals
            .into_iter()
            .map(|m| pb::Money {
                currency: m.currency,
                amount: m.amount,
            })
            .collect(),
    }
}

fn usage_line(l: wire::UsageLine) -> pb::UsageLine {
    pb::UsageLine {
        tenant: l.tenant,
        meter: l.meter.as_str().to_owned(),
        unit: l.unit,
        group: l.group,
        name: l.name,
        cluster_id: l.cluster_id.map(|c| c.to_string()),
        quantity: l.quantity,
        cost: l.cost,
        currency: l.currency,
    }
}

pub fn statement(s: wire::Statement) -> pb::Statement {
    pb::Statement {
        id: s.id,
        tenant: s.tenant,
        status: match s.status {
            wire::StatementStatus::Open => "open",
            wire::StatementStatus::Closed => "closed",
        }
        .to_owned(),
        period_start: Some(timestamp(s.period_start)),
        period_end: Some(timestamp(s.period_end)),
        currency: s.currency,
        total: s.total,
        closed: s.closed.map(timestamp),
        lines: s
            .lines
            .into_iter()
            .flatten()
            .map(|l| pb::StatementLine {
                meter: l.meter.as_str().to_owned(),
                resource_id: l.resource_id.to_string(),
                resource_name: l.resource_name,
                cluster_id: l.cluster_id.map(|c| c.to_string()),
                unit: l.unit,
                quantity: l.quantity,
                cost: l.cost,
            })
            .collect(),
    }
}

pub fn price_entry(p: wire::PriceEntry) -> pb::PriceEntry {
    pb::PriceEntry {
        meter: p.meter.as_str().to_owned(),
        provider: p.provider,
        unit: p.unit,
        unit_price: p.unit_price,
        currency: p.currency,
        effective_from: Some(timestamp(p.effective_from)),
        until: p.until.map(timestamp),
    }
}

/// An empty field is an absent one (the REST default applies).
fn set(s: &str) -> Option<&str> {
    Some(s).filter(|s| !s.is_empty())
}

/// `GetUsageRequest` read as the REST query is (`UsageQuery::parse`).
pub fn usage_query(r: &pb::GetUsageRequest) -> Result<UsageQuery, Error> {
    UsageQuery::parse(set(&r.from), set(&r.to), set(&r.group_by), set(&r.tenant))
}

/// A request's `tenant`: empty is none named.
pub fn named_tenant(t: &str) -> Option<&str> {
    set(t)
}

/// A `CreatePriceRequest` as the REST body of `POST /v1/admin/prices`: an
/// empty field is absent (a missing meter, price or currency is named; no
/// provider is `*`, no `effective_from` is now).
pub fn price_create(r: &pb::CreatePriceRequest) -> Value {
    Obj::new()
        .str("meter", &r.meter)
        .str("provider", &r.provider)
        .str("unit_price", &r.unit_price)
        .str("currency", &r.currency)
        .str("effective_from", &r.effective_from)
        .value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use meson_db::usage::GroupBy;
    use serde_json::json;

    #[test]
    fn a_price_request_is_the_rest_one() {
        let r = pb::CreatePriceRequest {
            meter: "volume".into(),
            provider: String::new(),
            unit_price: "0.00007".into(),
            currency: "EUR".into(),
            effective_from: "2027-01-01T00:00:00Z".into(),
        };
        assert_eq!(
            price_create(&r),
            json!({"meter": "volume", "unit_price": "0.00007", "currency": "EUR",
                   "effective_from": "2027-01-01T00:00:00Z"})
        );
        assert_eq!(price_create(&pb::CreatePriceRequest::default()), json!({}));
    }

    #[test]
    fn a_usage_query_is_the_rest_one() {
        assert_eq!(
            usage_query(&pb::GetUsageRequest::default()).unwrap(),
            UsageQuery::default()
        );
        let q = usage_query(&pb::GetUsageRequest {
            from: "2026-11-01T00:00:00Z".into(),
            to: String::new(),
            group_by: "label:team".into(),
            tenant: "acme".into(),
        })
        .unwrap();
        assert_eq!(q.group_by, Some(GroupBy::Label("team".into())));
        assert_eq!(q.tenant.as_deref(), Some("acme"));
        assert!(q.from.is_some() && q.to.is_none());
        for (r, field) in [
            (
                pb::GetUsageRequest {
                    from: "yesterday".into(),
                    ..Default::default()
                },
                "from",
            ),
            (
                pb::GetUsageRequest {
                    to: "2026-13-01".into(),
                    ..Default::default()
                },
                "to",
            ),
            (
                pb::GetUsageRequest {
                    group_by: "week".into(),
                    ..Default::default()
                },
                "group_by",
            ),
        ] {
            match usage_query(&r) {
                Err(Error::InvalidInput { fields }) => assert_eq!(fields[0].name, field),
                other => panic!("{r:?}: expected invalid_input, got {other:?}"),
            }
        }
    }
}
