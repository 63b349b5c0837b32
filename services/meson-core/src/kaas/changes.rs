//! What a client asks to change in a cluster it has: its labels and update
//! policy (a PATCH), or a rolling upgrade (the version, and how many nodes
//! are replaced at a time).

use super::UpdatePolicy;
use crate::labels::Labels;
use crate::parse::{Parser, Warning};
use crate::{Error, Result};
use serde_json::Value;

/// `PATCH /v1/clusters/{id}`: absent fields keep their value.
#[derive(Debug, Default, PartialEq)]
pub struct ClusterUpdate {
    pub labels: Option<Labels>,
    pub update_policy: Option<UpdatePolicy>,
}

impl ClusterUpdate {
    /// `{"labels", "update_policy"}`, every bad field named; unknown
    /// fields are warnings.
    pub fn parse(body: &Value) -> Result<(ClusterUpdate, Vec<Warning>)> {
        let mut parser = Parser::default();
        let mut root = parser.body(body)?;
        let labels = match root.get("labels") {
            (path, Some(v)) => crate::labels::parse(&path, v, &mut parser.errors),
            (_, None) => None,
        };
        let update_policy =
            parser
                .string(&mut root, "update_policy", false)
                .and_then(|(path, s)| match UpdatePolicy::parse(s) {
                    Some(u) => Some(u),
                    None => {
                        parser.errors.add(
                            path,
                            "must be NEVER_UPDATE (or MANUAL), PATCH_UPDATE or ALWAYS_UPDATE",
                        );
                        None
                    }
                });
        parser.done(root);
        let Parser { errors, warnings } = parser;
        errors.finish((
            ClusterUpdate {
                labels,
                update_policy,
            },
            warnings,
        ))
    }
}

/// Nodes added beyond the pool's size while it is replaced, by default.
pub const DEFAULT_MAX_SURGE: u32 = 1;
/// Nodes of a pool out of service at once while it is replaced, by default.
pub const DEFAULT_MAX_UNAVAILABLE: u32 = 0;
/// The largest `max_surge` or `max_unavailable` accepted.
pub const MAX_ROLLOUT: u32 = 10;

/// What `POST /v1/clusters/{id}/actions/upgrade` asked for.
#[derive(Debug, PartialEq)]
pub struct UpgradeRequest {
    /// As the client wrote it (`1.30`, `v1.30.14`...).
    pub version: String,
    pub max_surge: u32,
    pub max_unavailable: u32,
}

impl UpgradeRequest {
    /// The body, every bad field named; unknown fields are warnings.
    pub fn parse(body: &Value) -> Result<(UpgradeRequest, Vec<Warning>)> {
        let mut parser = Parser::default();
        let mut root = parser.body(body)?;
        let version = parser
            .string(&mut root, "kubernetes_version", true)
            .map(|(_, s)| s.to_owned());
        let range = 0..=i64::from(MAX_ROLLOUT);
        let max_surge = parser.int(&mut root, "max_surge", range.clone(), false);
        let max_unavailable = parser.int(&mut root, "max_unavailable", range, false);
        parser.done(root);
        let Parser { errors, warnings } = parser;
        errors.finish(())?;
        // In range: checked above.
        let as_u32 = |n: Option<i64>, default: u32| {
            n.map_or(default, |n| u32::try_from(n).unwrap_or(default))
        };
        let req = UpgradeRequest {
            version: version.unwrap_or_default(),
            max_surge: as_u32(max_surge, DEFAULT_MAX_SURGE),
            max_unavailable: as_u32(max_unavailable, DEFAULT_MAX_UNAVAILABLE),
        };
        if req.max_surge == 0 && req.max_unavailable == 0 {
            return Err(Error::invalid(
                "max_surge",
                "max_surge and max_unavailable cannot both be 0: nothing could be replaced",
            ));
        }
        Ok((req, warnings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(e: &Error) -> String {
        match e {
            Error::InvalidInput { fields } => fields[0].name.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn upgrade_requests_default_to_surge_one_and_name_bad_fields() {
        let (r, w) = UpgradeRequest::parse(&json!({"kubernetes_version": "1.30"})).unwrap();
        assert_eq!(
            (r.version.as_str(), r.max_surge, r.max_unavailable),
            ("1.30", 1, 0)
        );
        assert!(w.is_empty());
        let (r, w) = UpgradeRequest::parse(
            &json!({"kubernetes_version": "1.30.4", "max_surge": 0, "max_unavailable": 2, "x": 1}),
        )
        .unwrap();
        assert_eq!((r.max_surge, r.max_unavailable), (0, 2));
        assert_eq!(w[0].field, "x");
        for (body, name) in [
            (json!({}), "kubernetes_version"),
            (json!({"kubernetes_version": 1.3}), "kubernetes_version"),
            (
                json!({"kubernetes_version": "1.30", "max_surge": -1}),
                "max_surge",
            ),
            (
                json!({"kubernetes_version": "1.30", "max_surge": 11}),
                "max_surge",
            ),
            (
                json!({"kubernetes_version": "1.30", "max_unavailable": "1"}),
                "max_unavailable",
            ),
            (
                json!({"kubernetes_version": "1.30", "max_surge": 0, "max_unavailable": 0}),
                "max_surge",
            ),
        ] {
            let e = UpgradeRequest::parse(&body)
                .err()
                .unwrap_or_else(|| panic!("{body} accepted"));
            assert_eq!(field(&e), name, "{body}");
        }
        assert!(UpgradeRequest::parse(&json!([1])).is_err());
    }
}
