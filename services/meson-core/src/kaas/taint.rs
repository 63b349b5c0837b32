//! Node taints, `key=value:Effect`.

use crate::labels;
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }

    /// Any case.
    pub fn parse(s: &str) -> Option<Self> {
        [
            TaintEffect::NoSchedule,
            TaintEffect::PreferNoSchedule,
            TaintEffect::NoExecute,
        ]
        .into_iter()
        .find(|e| e.as_str().eq_ignore_ascii_case(s.trim()))
    }
}

/// A node taint, `key=value:Effect` (the value may be empty).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: TaintEffect,
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect.as_str())
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect.as_str())
        }
    }
}

impl Taint {
    /// Parses `key=value:Effect` or `key:Effect`.
    pub fn parse(s: &str) -> Result<Taint, String> {
        const SYNTAX: &str = "must be key=value:Effect or key:Effect, Effect one of NoSchedule, PreferNoSchedule, NoExecute";
        let Some((kv, effect)) = s.trim().rsplit_once(':') else {
            return Err(SYNTAX.to_owned());
        };
        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
        Taint::new(key, value, effect)
    }

    /// Checks the parts of a taint.
    pub fn new(key: &str, value: &str, effect: &str) -> Result<Taint, String> {
        let Some(effect) = TaintEffect::parse(effect) else {
            return Err(format!(
                "unknown taint effect '{effect}'; one of NoSchedule, PreferNoSchedule, NoExecute"
            ));
        };
        if !labels::valid_key(key) {
            return Err(format!(
                "invalid taint key '{key}': [prefix/]name, name up to 63 alphanumerics, '-', '_' or '.'"
            ));
        }
        if !labels::valid_value(value) {
            return Err(format!(
                "invalid taint value '{value}': up to 63 alphanumerics, '-', '_' or '.'"
            ));
        }
        Ok(Taint {
            key: key.to_owned(),
            value: value.to_owned(),
            effect,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taints_parse_and_print() {
        let t = Taint::parse("dedicated=gpu:NoSchedule").unwrap();
        assert_eq!(t.key, "dedicated");
        assert_eq!(t.value, "gpu");
        assert_eq!(t.to_string(), "dedicated=gpu:NoSchedule");
        assert_eq!(Taint::parse("example.com/x:noschedule").unwrap().value, "");
        assert!(Taint::parse("bad key=x:NoSchedule").is_err());
        assert!(Taint::parse("k=bad value:NoSchedule").is_err());
        assert!(Taint::parse("k=v").is_err());
    }
}
