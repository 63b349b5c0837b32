//! `--cloud-labels` as the cluster's labels.

use super::Report;
use super::args::Given;
use meson_types::requests::Labels;

/// `Owner=John,Team=Core` as labels; invalid ones reported.
pub(super) fn labels(given: Option<&Given>, reports: &mut Vec<Report>) -> Labels {
    let mut out = Labels::new();
    let Some(g) = given else {
        return out;
    };
    let valid = |s: &str| {
        s.len() <= 63
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && s.chars().next().is_none_or(|c| c.is_ascii_alphanumeric())
            && s.chars().last().is_none_or(|c| c.is_ascii_alphanumeric())
    };
    let mut bad = Vec::new();
    for pair in g.value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (k, v) = (k.trim(), v.trim());
        if !k.is_empty() && valid(k) && valid(v) {
            out.insert(k.to_owned(), v.to_owned());
        } else {
            bad.push(pair.to_owned());
        }
    }
    if !bad.is_empty() {
        reports.push(Report {
            flag: g.written.clone(),
            message: format!(
                "not valid meson labels (Kubernetes' rules: at most 63 of [A-Za-z0-9-_.], \
                 starting and ending alphanumeric), left out: {bad:?}"
            ),
        });
    }
    out
}
