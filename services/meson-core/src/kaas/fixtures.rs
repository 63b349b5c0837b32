//! What the parser's tests share: the canonical payload, a way to change
//! it, and the fields a refusal names.

use super::KaasCreate;
use crate::Error;
use chrono::NaiveDate;
use serde_json::Value;
use std::net::Ipv4Addr;

/// The day these tests run on: dates decide the default version and
/// which are past end of life.
pub fn today() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 11, 25).unwrap()
}

/// The canonical KaaS payload (docs/payloads.md), exactly as clients send it.
pub fn seed() -> Value {
    serde_json::from_str(
        r#"{"req":{"name":"test8","metadata":{},
  "nodepool":[{"autoscale":false,"desired_nodes":3,"max_nodes":3,"min_nodes":3,
    "specs":{"cpu":2,"ram":4096,"storage":40,"gpu":0},
    "billing":"HOURLY","pool_name":"1poolname"}],
  "nodes_subnet":{"dhcp":"True","subnet_netmask":"192.168.1.0/24",
    "start_address":"192.168.1.0","last_address":"192.168.1.24"},
  "update_policy":"NEVER_UPDATE","kubernetes_version":"1.29.2"},
 "provider":"arubacloud"}"#,
    )
    .unwrap()
}

/// The fields an `invalid_input` error names, sorted.
pub fn fields(e: Error) -> Vec<String> {
    match e {
        Error::InvalidInput { fields } => {
            let mut v: Vec<String> = fields.into_iter().map(|f| f.name).collect();
            v.sort();
            v
        }
        other => panic!("expected invalid_input, got {other:?}"),
    }
}

/// The fields the refusal of `v` names.
pub fn refused(v: &Value) -> Vec<String> {
    fields(KaasCreate::parse(v, today()).unwrap_err())
}

/// The canonical payload changed by `f`.
pub fn with(f: impl FnOnce(&mut Value)) -> Value {
    let mut v = seed();
    f(&mut v);
    v
}

pub fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// Each payload is refused naming exactly its fields; every case that is
/// not is reported at once.
pub fn assert_refusals(cases: Vec<(Value, &[&str])>) {
    let mut failures = Vec::new();
    for (i, (v, want)) in cases.iter().enumerate() {
        let got = match KaasCreate::parse(v, today()) {
            Ok(_) => vec!["(accepted)".to_owned()],
            Err(e) => fields(e),
        };
        let mut want: Vec<String> = want.iter().map(|s| (*s).to_owned()).collect();
        want.sort();
        if got != want {
            failures.push(format!("case {i}: want {want:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
