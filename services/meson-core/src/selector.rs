//! Label selectors, Kubernetes grammar: `k=v`, `k==v`, `k!=v`, `k in (a,b)`,
//! `k notin (a,b)`, `k`, `!k`, joined by `,` (AND).

use crate::error::Error;
use serde::Serialize;

/// One requirement of a selector, in the form the database layer matches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Requirement {
    /// The key is present with one of the values.
    In {
        key: String,
        values: Vec<String>,
    },
    /// The key is absent, or present with none of the values.
    NotIn {
        key: String,
        values: Vec<String>,
    },
    Exists {
        key: String,
    },
    NotExists {
        key: String,
    },
}

fn bad(msg: impl Into<String>) -> Error {
    Error::invalid("label_selector", msg)
}

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Result<Vec<&str>, Error> {
    let (mut depth, mut start, mut out) = (0i32, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err(bad("unbalanced parentheses"));
        }
    }
    if depth != 0 {
        return Err(bad("unbalanced parentheses"));
    }
    out.push(&s[start..]);
    Ok(out)
}

fn key(k: &str) -> Result<String, Error> {
    let k = k.trim();
    if crate::labels::valid_key(k) {
        Ok(k.to_owned())
    } else {
        Err(bad(format!("invalid label key '{k}'")))
    }
}

fn value(v: &str) -> Result<String, Error> {
    let v = v.trim();
    let ok = v.len() <= 63
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(v.to_owned())
    } else {
        Err(bad(format!("invalid label value '{v}'")))
    }
}

fn set(rest: &str) -> Result<Vec<String>, Error> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| bad("a set must be written (a,b,...)"))?;
    let values: Vec<String> = inner.split(',').map(value).collect::<Result<_, _>>()?;
    if values.iter().any(String::is_empty) {
        return Err(bad("empty value in a set"));
    }
    Ok(values)
}

/// Parses a whole selector; the empty string selects everything.
pub fn parse(s: &str) -> Result<Vec<Requirement>, Error> {
    if s.trim().is_empty() {
        return Ok(Vec::new());
    }
    if s.len() > 4096 {
        return Err(bad("longer than 4096 characters"));
    }
    split_top(s)?
        .into_iter()
        .map(|term| {
            let t = term.trim();
            if t.is_empty() {
                return Err(bad("empty requirement"));
            }
            if let Some((k, v)) = t.split_once("!=") {
                return Ok(Requirement::NotIn {
                    key: key(k)?,
                    values: vec![value(v)?],
                });
            }
            if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                return Ok(Requirement::In {
                    key: key(k)?,
                    values: vec![value(v)?],
                });
            }
            if let Some(k) = t.strip_prefix('!') {
                return Ok(Requirement::NotExists { key: key(k)? });
            }
            let mut words = t.splitn(2, char::is_whitespace);
            let k = words.next().unwrap_or_default();
            match words.next().map(str::trim_start) {
                None => Ok(Requirement::Exists { key: key(k)? }),
                Some(rest) if rest.starts_with("notin") => Ok(Requirement::NotIn {
                    key: key(k)?,
                    values: set(&rest[5..])?,
                }),
                Some(rest) if rest.starts_with("in") => Ok(Requirement::In {
                    key: key(k)?,
                    values: set(&rest[2..])?,
                }),
                Some(_) => Err(bad(format!("cannot parse '{t}'"))),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Requirement::*;

    fn kv(k: &str, v: &[&str]) -> (String, Vec<String>) {
        (k.to_owned(), v.iter().map(|s| (*s).to_owned()).collect())
    }

    #[test]
    fn the_whole_grammar() {
        let r = parse("env=prod, tier==web,team!=ops,zone in (a, b),size notin (xl),gpu,!legacy")
            .unwrap();
        let (k1, v1) = kv("env", &["prod"]);
        let (k4, v4) = kv("zone", &["a", "b"]);
        let (k5, v5) = kv("size", &["xl"]);
        assert_eq!(
            r[0],
            In {
                key: k1,
                values: v1
            }
        );
        assert!(matches!(&r[1], In { key, .. } if key == "tier"));
        assert!(matches!(&r[2], NotIn { key, .. } if key == "team"));
        assert_eq!(
            r[3],
            In {
                key: k4,
                values: v4
            }
        );
        assert_eq!(
            r[4],
            NotIn {
                key: k5,
                values: v5
            }
        );
        assert_eq!(r[5], Exists { key: "gpu".into() });
        assert_eq!(
            r[6],
            NotExists {
                key: "legacy".into()
            }
        );
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn rejects_nonsense() {
        for s in [
            "env in (a",
            "env in a,b)",
            "=x",
            "a b c",
            "env=in valid!",
            ",",
            "k in ()",
            "-bad=x",
        ] {
            assert!(parse(s).is_err(), "{s}");
        }
    }
}
