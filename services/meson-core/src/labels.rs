//! Labels: user key/value metadata on every resource, with Kubernetes' rules.

use crate::error::FieldErrors;
use std::collections::BTreeMap;

pub type Labels = BTreeMap<String, String>;

const MAX_LABELS: usize = 64;

fn valid_name(s: &str, allow_empty: bool) -> bool {
    if s.is_empty() {
        return allow_empty;
    }
    let b = s.as_bytes();
    s.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn valid_prefix(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 253
        && p.split('.').all(|l| {
            let b = l.as_bytes();
            !l.is_empty()
                && l.len() <= 63
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// Checks one label key.
pub fn valid_key(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => valid_prefix(prefix) && valid_name(name, false),
        None => valid_name(key, false),
    }
}

/// Checks one label value (may be empty).
pub fn valid_value(value: &str) -> bool {
    valid_name(value, true)
}

/// Validates a labels object found at `path`, recording every bad entry.
pub fn parse(path: &str, v: &serde_json::Value, errors: &mut FieldErrors) -> Option<Labels> {
    let serde_json::Value::Object(map) = v else {
        errors.add(path, "must be an object of string keys to string values");
        return None;
    };
    if map.len() > MAX_LABELS {
        errors.add(path, format!("must have at most {MAX_LABELS} labels"));
        return None;
    }
    let mut out = Labels::new();
    let mut ok = true;
    for (k, v) in map {
        let p = format!("{path}.{k}");
        if !valid_key(k) {
            errors.add(&p, "invalid label key: [prefix/]name, name up to 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric");
            ok = false;
        } else if k.starts_with("meson.elemento.cloud/") {
            errors.add(&p, "the prefix meson.elemento.cloud/ is reserved");
            ok = false;
        }
        match v.as_str() {
            Some(s) if valid_name(s, true) => {
                out.insert(k.clone(), s.to_owned());
            }
            _ => {
                errors.add(&p, "invalid label value: up to 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric");
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_and_values() {
        assert!(valid_key("env"));
        assert!(valid_key("example.com/tier"));
        assert!(!valid_key("-env"));
        assert!(!valid_key("Bad_Prefix/x"));
        let mut e = FieldErrors::default();
        assert!(parse("labels", &json!({"env": "prod", "empty": ""}), &mut e).is_some());
        assert!(parse("labels", &json!({"env": 3}), &mut e).is_none());
        assert!(e.has("labels.env"));
    }
}
