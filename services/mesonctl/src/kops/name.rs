//! The cluster's name: `--name` or the positional argument, made a meson
//! cluster name.

use super::Report;
use super::args::Parsed;

const MAX_CLUSTER_NAME: usize = 32;

/// A meson cluster name (a DNS label of at most 32 characters) from a kOps
/// one (`demo.k8s.local`).
pub fn cluster_name(kops: &str) -> String {
    let lower = kops.trim().to_ascii_lowercase();
    let base = lower.strip_suffix(".k8s.local").unwrap_or(&lower);
    let mut out = String::new();
    for c in base.chars() {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
    }
    out.truncate(MAX_CLUSTER_NAME);
    out.trim_end_matches('-').to_owned()
}

/// The meson name and the kOps name as given.
pub(super) fn names(p: &Parsed, reports: &mut Vec<Report>) -> Result<(String, String), String> {
    let (written, kops_name) = match (p.last("name"), p.positional.as_slice()) {
        (Some(g), rest) => {
            if !rest.is_empty() {
                reports.push(Report {
                    flag: g.written.clone(),
                    message: format!("also given as an argument, {:?}: ignored", rest),
                });
            }
            (g.written.clone(), g.value.clone())
        }
        (None, [one]) => ("(cluster name)".to_owned(), one.clone()),
        (None, []) => {
            return Err(
                "no cluster name: give --name (kops create cluster --name=NAME ...)".into(),
            );
        }
        (None, many) => return Err(format!("unexpected arguments {many:?}")),
    };
    let name = cluster_name(&kops_name);
    if name.is_empty() {
        return Err(format!(
            "{written}: {kops_name:?} leaves no usable cluster name"
        ));
    }
    if name != kops_name {
        reports.push(Report {
            flag: written,
            message: format!(
                "{kops_name:?} is not a meson cluster name (a DNS label: a-z, 0-9 and '-', at \
                 most {MAX_CLUSTER_NAME} characters): using {name:?}"
            ),
        });
    }
    Ok((name, kops_name))
}
