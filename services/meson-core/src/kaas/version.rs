//! `req.kubernetes_version` and `req.update_policy`: which Kubernetes the
//! cluster runs and when meson moves it on.

use super::UpdatePolicy;
use super::request::enum_field;
use crate::kubernetes::{self, KubeVersion};
use crate::parse::{Obj, Parser, Warning, join};
use chrono::NaiveDate;

/// `kubernetes_version`: a supported release (a bare minor takes its latest
/// patch), or the default of `today` when left out; end of life warns.
pub(super) fn parse_kubernetes_version(
    p: &mut Parser,
    req: &mut Obj<'_>,
    today: NaiveDate,
) -> Option<KubeVersion> {
    match p.string(req, "kubernetes_version", false) {
        None if p.errors.has(&join(req.path(), "kubernetes_version")) => None,
        None => Some(kubernetes::default_release(today).version),
        Some((path, s)) => match kubernetes::resolve(s) {
            Ok(r) => {
                for message in r.warnings(s, today) {
                    p.warnings.push(Warning {
                        field: path.clone(),
                        message,
                    });
                }
                Some(r.release.version)
            }
            Err(m) => {
                p.errors.add(path, m);
                None
            }
        },
    }
}

/// `update_policy`, `NEVER_UPDATE` when left out.
pub(super) fn parse_update_policy(p: &mut Parser, req: &mut Obj<'_>) -> Option<UpdatePolicy> {
    enum_field(
        p,
        req,
        "update_policy",
        UpdatePolicy::NeverUpdate,
        UpdatePolicy::parse,
        "NEVER_UPDATE (or MANUAL), PATCH_UPDATE or ALWAYS_UPDATE",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use crate::kaas::fixtures::*;
    use crate::kaas::*;
    use serde_json::json;

    #[test]
    fn the_version_default_and_end_of_life_follow_the_date() {
        let day = |s: &str| s.parse::<NaiveDate>().unwrap();
        let eol = |k: &KaasCreate| {
            k.warnings
                .iter()
                .any(|w| w.field == "req.kubernetes_version" && w.message.contains("end of life"))
        };
        // The canonical payload's 1.29.2: fine in 2024, past end of life now.
        assert!(!eol(&KaasCreate::parse(&seed(), day("2024-06-01")).unwrap()));
        let k = KaasCreate::parse(&seed(), today()).unwrap();
        assert_eq!(k.spec.kubernetes_version, KubeVersion::new(1, 29, 2));
        assert!(eol(&k));
        // No version: the day's default.
        let without = with(|v| {
            v["req"]
                .as_object_mut()
                .unwrap()
                .remove("kubernetes_version");
        });
        let version = |d: &str| {
            KaasCreate::parse(&without, day(d))
                .unwrap()
                .spec
                .kubernetes_version
                .to_string()
        };
        assert_eq!(version("2025-08-01"), "1.32.13");
        assert_eq!(version("2026-11-25"), "1.36.4");
        // A bare minor: its latest patch, said so.
        let k = KaasCreate::parse(
            &with(|v| v["req"]["kubernetes_version"] = json!("1.34")),
            day("2026-01-01"),
        )
        .unwrap();
        assert_eq!(k.spec.kubernetes_version, KubeVersion::new(1, 34, 9));
        assert!(!eol(&k));
        // Unknown: refused on the field, with what is allowed.
        let e = KaasCreate::parse(
            &with(|v| v["req"]["kubernetes_version"] = json!("1.34.77")),
            today(),
        )
        .unwrap_err();
        let Error::InvalidInput { fields } = e else {
            panic!("{e:?}")
        };
        assert_eq!(fields.len(), 1, "{fields:?}");
        assert_eq!(fields[0].name, "req.kubernetes_version");
        let m = &fields[0].messages[0];
        assert!(
            m.contains("1.34.77 is not supported") && m.contains("1.29.2") && m.contains("1.36.4"),
            "{m}"
        );
    }

    #[test]
    fn each_bad_version_field_is_named() {
        assert_refusals(vec![
            (
                with(|v| v["req"]["update_policy"] = json!("SOMETIMES")),
                &["req.update_policy"],
            ),
            (
                with(|v| v["req"]["kubernetes_version"] = json!("1.26.0")),
                &["req.kubernetes_version"],
            ),
            (
                with(|v| v["req"]["kubernetes_version"] = json!("latest")),
                &["req.kubernetes_version"],
            ),
            (
                with(|v| v["req"]["kubernetes_version"] = json!(1.29)),
                &["req.kubernetes_version"],
            ),
        ]);
    }
}
