//! What every resource's messages share: times, labels, prices, warnings,
//! pages, and a list's options as the REST list's query.

use super::json::Obj;
use meson_proto::meson::v1 as pb;
use meson_types as wire;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};

pub fn timestamp(t: chrono::DateTime<chrono::Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

pub fn map(m: &BTreeMap<String, String>) -> HashMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

pub fn warning(w: wire::Warning) -> pb::Warning {
    pb::Warning {
        field: w.field,
        message: w.message,
    }
}

pub fn warnings(w: &[meson_core::parse::Warning]) -> Vec<pb::Warning> {
    w.iter().map(crate::views::warning).map(warning).collect()
}

pub fn price(p: wire::Price) -> pb::Price {
    pb::Price {
        hourly: p.hourly,
        monthly: p.monthly,
        currency: p.currency,
    }
}

/// `meta.pagination`.
pub fn pagination(p: wire::Pagination) -> pb::Pagination {
    pb::Pagination {
        page: p.page,
        per_page: p.per_page,
        previous_page: p.previous_page,
        next_page: p.next_page,
        last_page: p.last_page.unwrap_or(1),
        total_entries: p.total_entries.unwrap_or(0),
        next_cursor: p.next_cursor,
    }
}

/// A PATCH of a name and/or labels.
pub fn name_labels(name: &Option<String>, labels: &Option<pb::Labels>) -> Value {
    Obj::new()
        .opt("name", name.clone())
        .opt("labels", labels.as_ref().map(|l| json!(l.labels)))
        .value()
}

/// `ListOptions` as the REST list's query pairs.
pub fn list_query(o: Option<&pb::ListOptions>) -> Vec<(String, String)> {
    let mut q = Vec::new();
    let Some(o) = o else { return q };
    page_query(o.page.as_ref(), &mut q);
    if !o.name.is_empty() {
        q.push(("name".into(), o.name.clone()));
    }
    for s in &o.status {
        q.push(("status".into(), s.clone()));
    }
    if !o.label_selector.is_empty() {
        q.push(("label_selector".into(), o.label_selector.clone()));
    }
    for s in &o.sort {
        q.push(("sort".into(), s.clone()));
    }
    q
}

/// `PageRequest` as `page`, `cursor` and `per_page` query pairs.
pub fn page_query(p: Option<&pb::PageRequest>, q: &mut Vec<(String, String)>) {
    if let Some(p) = p {
        if p.page != 0 {
            q.push(("page".into(), p.page.to_string()));
        }
        if !p.cursor.is_empty() {
            q.push(("cursor".into(), p.cursor.clone()));
        }
        if p.per_page != 0 {
            q.push(("per_page".into(), p.per_page.to_string()));
        }
    }
}
