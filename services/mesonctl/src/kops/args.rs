//! The words of a `kops create cluster` line parsed against the flag
//! table: each flag with how it was written and its value, and the
//! positional words.

use super::Report;
use super::flags::{Kind, lookup_long, lookup_short};

/// One flag as given: how it was written, and its value.
#[derive(Clone, Debug)]
pub(super) struct Given {
    pub(super) written: String,
    pub(super) value: String,
}

/// The command line, parsed.
#[derive(Default)]
pub(super) struct Parsed {
    /// Canonical flag name -> every occurrence, in order.
    pub(super) flags: Vec<(&'static str, Given)>,
    pub(super) positional: Vec<String>,
}

impl Parsed {
    /// The last occurrence of a single-valued flag (or any of its aliases).
    pub(super) fn last(&self, name: &str) -> Option<&Given> {
        self.flags
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|(_, g)| g)
    }

    /// Every value of a list flag, split at commas, with how the flag was
    /// first written.
    pub(super) fn list(&self, name: &str) -> Option<(String, Vec<String>)> {
        let mut written = None;
        let mut values = Vec::new();
        for (n, g) in &self.flags {
            if *n == name {
                written.get_or_insert_with(|| g.written.clone());
                values.extend(
                    g.value
                        .split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned),
                );
            }
        }
        written.map(|w| (w, values))
    }
}

pub(super) fn parse_bool(written: &str, v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "" | "true" | "t" | "1" => Ok(true),
        "false" | "f" | "0" => Ok(false),
        _ => Err(format!("{written}: expected true or false, got {v:?}")),
    }
}

pub(super) fn parse_args(words: &[String], reports: &mut Vec<Report>) -> Result<Parsed, String> {
    let mut p = Parsed::default();
    let mut i = 0;
    let mut flags_done = false;
    while i < words.len() {
        let w = &words[i];
        i += 1;
        if flags_done || !w.starts_with('-') || w == "-" {
            p.positional.push(w.clone());
            continue;
        }
        if w == "--" {
            flags_done = true;
            continue;
        }
        let (flag, inline, written) = if let Some(long) = w.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (long, None),
            };
            (lookup_long(name), value, format!("--{name}"))
        } else {
            // `-o yaml`, `-oyaml`, `-o=yaml`, `-y`.
            let rest = &w[1..];
            let mut cs = rest.chars();
            let c = cs.next().unwrap_or('-');
            let tail: String = cs.collect();
            let value = if tail.is_empty() {
                None
            } else {
                Some(tail.strip_prefix('=').unwrap_or(&tail).to_owned())
            };
            (lookup_short(c), value, format!("-{c}"))
        };
        let Some(flag) = flag else {
            // An unknown flag: it takes the next word as its value unless
            // that is a flag itself.
            let took = match inline {
                Some(v) => Some(v),
                None if i < words.len() && !words[i].starts_with('-') => {
                    i += 1;
                    Some(words[i - 1].clone())
                }
                None => None,
            };
            reports.push(Report {
                flag: written,
                message: match took {
                    Some(v) => format!(
                        "not a flag of `kops create cluster` (ignored, with its value {v:?})"
                    ),
                    None => "not a flag of `kops create cluster` (ignored)".into(),
                },
            });
            continue;
        };
        let value = match (flag.kind, inline) {
            (_, Some(v)) => v,
            (Kind::Bool, None) => "true".into(),
            (_, None) => {
                if i >= words.len() {
                    return Err(format!("{written} needs a value"));
                }
                i += 1;
                words[i - 1].clone()
            }
        };
        if flag.kind == Kind::Bool {
            parse_bool(&written, &value)?;
        }
        let canonical = flag.alias_of.unwrap_or(flag.name);
        p.flags.push((canonical, Given { written, value }));
    }
    Ok(p)
}

/// A flag's whole-number value.
pub(super) fn parse_number<T: std::str::FromStr>(g: &Given) -> Result<T, String> {
    g.value
        .trim()
        .parse()
        .map_err(|_| format!("{}: expected a whole number, got {:?}", g.written, g.value))
}
