//! What goes wrong, as Terraform shows it: a diagnostic with meson's error
//! code, its message, the fields it names, and the attribute they are when
//! they map to one.

use crate::proto;
use crate::schema::{Step, path_proto};
use meson_client::Error;

/// A failed call, ready to be a diagnostic.
#[derive(Debug)]
pub struct Failure {
    pub summary: String,
    pub detail: String,
    pub path: Option<Vec<Step>>,
    /// meson's error code, when meson answered one.
    pub code: Option<String>,
    /// What exists in meson despite the failure (a create whose wait
    /// failed): its id, so Terraform keeps it, tainted, to replace or
    /// destroy.
    pub created: Option<Box<serde_json::Value>>,
}

pub type Res<T> = Result<T, Failure>;

/// Maps one of meson's field paths (`specs.req.mem.capacity`) to the
/// attribute it is, if any.
pub type FieldMap = fn(&str) -> Option<Vec<Step>>;

impl Failure {
    pub fn msg(summary: impl Into<String>, detail: impl Into<String>) -> Failure {
        Failure {
            summary: summary.into(),
            detail: detail.into(),
            path: None,
            code: None,
            created: None,
        }
    }

    /// Notes that the resource `id` was created before the failure.
    pub fn created(mut self, id: uuid::Uuid) -> Failure {
        self.created = Some(Box::new(serde_json::json!({"id": id.to_string()})));
        self
    }

    pub fn at(mut self, path: Vec<Step>) -> Failure {
        self.path = Some(path);
        self
    }

    /// An SDK error; `fields` maps the fields meson names to attributes.
    pub fn from_client(e: Error, fields: FieldMap) -> Failure {
        match e {
            Error::Api {
                status,
                code,
                message,
                details,
                correlation_id,
            } => {
                let mut detail = format!("meson answered {status} with the error code `{code}`.");
                let mut path = None;
                for f in details.fields.iter().flatten() {
                    detail.push_str(&format!("\nfield `{}`", f.name));
                    if !f.messages.is_empty() {
                        detail.push_str(&format!(": {}", f.messages.join("; ")));
                    }
                    if path.is_none() {
                        path = fields(&f.name);
                    }
                }
                for l in details.limits.iter().flatten() {
                    detail.push_str(&format!("\nquota: {l:?}"));
                }
                if let Some(a) = details.action_id {
                    detail.push_str(&format!("\nheld by the running action {a}"));
                }
                if let Some(c) = correlation_id {
                    detail.push_str(&format!("\ncorrelation id: {c}"));
                }
                Failure {
                    summary: format!("meson: {message} ({code})"),
                    detail,
                    path,
                    code: Some(code),
                    created: None,
                }
            }
            Error::ActionFailed { action } => {
                let (code, message) = action
                    .error
                    .as_ref()
                    .map_or(("unknown", "unknown error"), |e| {
                        (e.code.as_str(), e.message.as_str())
                    });
                Failure::msg(
                    format!(
                        "meson: the action {} failed: {message} ({code})",
                        action.command
                    ),
                    format!("action {} ended in error with the code `{code}`", action.id),
                )
            }
            Error::Cancelled { running } => Failure::msg(
                "meson: timed out waiting on its actions",
                format!(
                    "still running: {running:?}. They go on in meson; raise this resource's \
                     `timeouts` to wait longer."
                ),
            ),
            other => Failure::msg(format!("meson: {other}"), String::new()),
        }
    }

    pub fn to_proto(&self) -> proto::Diagnostic {
        proto::Diagnostic {
            severity: proto::diagnostic::Severity::Error as i32,
            summary: self.summary.clone(),
            detail: self.detail.clone(),
            attribute: self.path.as_deref().map(path_proto),
        }
    }
}

/// A warning meson answered with a change it made, on the attribute its
/// field is when there is one.
pub fn warning(w: &meson_client::types::Warning, path: Option<Vec<Step>>) -> proto::Diagnostic {
    proto::Diagnostic {
        severity: proto::diagnostic::Severity::Warning as i32,
        summary: w.message.clone(),
        detail: format!("meson's warning on the field `{}`.", w.field),
        attribute: path.as_deref().map(path_proto),
    }
}

/// A field path of meson's as steps: `a.b[2].c` is `a`, `b`, 2, `c`.
pub fn field_steps(field: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    for part in field.split('.') {
        let mut rest = part;
        if let Some(i) = rest.find('[') {
            if i > 0 {
                steps.push(Step::Attr(rest[..i].to_owned()));
            }
            rest = &rest[i..];
            while let Some(stripped) = rest.strip_prefix('[') {
                let end = stripped.find(']').unwrap_or(stripped.len());
                if let Ok(n) = stripped[..end].parse() {
                    steps.push(Step::Index(n));
                }
                rest = stripped.get(end + 1..).unwrap_or("");
            }
        } else if !rest.is_empty() {
            steps.push(Step::Attr(rest.to_owned()));
        }
    }
    steps
}

/// Maps a field by the first prefix of `table` it starts with: the
/// prefix's steps replaced by the attribute's, the rest kept (list indexes,
/// a nested block's attribute).
pub fn map_field(table: &[(&str, &[&str])], field: &str) -> Option<Vec<Step>> {
    let steps = field_steps(field);
    table.iter().find_map(|(prefix, attr)| {
        let p = field_steps(prefix);
        if steps.len() >= p.len() && steps[..p.len()] == p[..] {
            let mut out: Vec<Step> = attr.iter().map(|a| Step::Attr((*a).to_owned())).collect();
            out.extend(steps[p.len()..].iter().cloned());
            Some(out)
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meson_fields_map_to_attribute_paths() {
        let table: &[(&str, &[&str])] = &[
            ("specs.req.mem.capacity", &["memory_mib"]),
            ("specs.volumes", &["volume"]),
            ("req.nodepool[0]", &["default_pool"]),
        ];
        let a = |s: &str| Step::Attr(s.into());
        assert_eq!(
            map_field(table, "specs.req.mem.capacity"),
            Some(vec![a("memory_mib")])
        );
        assert_eq!(
            map_field(table, "specs.volumes[1].size"),
            Some(vec![a("volume"), Step::Index(1), a("size")])
        );
        assert_eq!(
            map_field(table, "req.nodepool[0].min_nodes"),
            Some(vec![a("default_pool"), a("min_nodes")])
        );
        assert_eq!(map_field(table, "provider"), None);
    }
}
