//! Deserializers for the quirks meson's lenient request reader accepts
//! (meson-core `parse.rs`): a boolean as a JSON boolean, the string
//! `"true"`/`"false"` in any case, or 0/1; an integer as an integral float
//! (`4096.0`). Typed requests read them so that whatever meson accepts
//! deserializes; they always serialize the canonical form (a JSON boolean,
//! an integer). Range checks stay meson's.

use serde::Deserialize;
use serde::de::{self, Deserializer, Unexpected};

/// What a boolean may be written as, for error messages.
pub const BOOLEAN: &str = "a boolean (true/false, \"True\"/\"False\" or 0/1)";

/// The one rule for booleans as clients send them: a JSON boolean, the
/// string `"true"`/`"false"` in any case, or 0/1. meson-core's request
/// reader and the typed requests both apply it.
pub fn boolean(v: &serde_json::Value) -> Option<bool> {
    use serde_json::Value;
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) if s.eq_ignore_ascii_case("true") => Some(true),
        Value::String(s) if s.eq_ignore_ascii_case("false") => Some(false),
        // Any JSON form of the numbers 1 and 0 (`1.0`, `1e0`), as for integers.
        Value::Number(n) if n.as_f64() == Some(1.0) => Some(true),
        Value::Number(n) if n.as_f64() == Some(0.0) => Some(false),
        _ => None,
    }
}

fn to_bool<E: de::Error>(v: serde_json::Value) -> Result<bool, E> {
    boolean(&v).ok_or_else(|| {
        let got = match &v {
            serde_json::Value::String(s) => Unexpected::Str(s),
            _ => Unexpected::Other("another value"),
        };
        E::invalid_value(got, &BOOLEAN)
    })
}

/// An optional lenient boolean; `null` is absent.
pub fn opt_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => to_bool(v).map(Some),
    }
}

/// An integer, also written as an integral float.
#[derive(Deserialize)]
#[serde(untagged)]
enum AnyInt {
    Int(i64),
    Float(f64),
}

fn to_int<T: TryFrom<i64>, E: de::Error>(v: AnyInt) -> Result<T, E> {
    let n = match v {
        AnyInt::Int(n) => n,
        AnyInt::Float(f) if f.fract() == 0.0 && f.abs() < 9e15 => f as i64,
        AnyInt::Float(f) => return Err(E::invalid_value(Unexpected::Float(f), &"an integer")),
    };
    T::try_from(n).map_err(|_| E::invalid_value(Unexpected::Signed(n), &"an integer in range"))
}

/// A required lenient integer.
pub fn int<'de, D: Deserializer<'de>, T: TryFrom<i64>>(d: D) -> Result<T, D::Error> {
    to_int(AnyInt::deserialize(d)?)
}

/// An optional lenient integer; `null` is absent.
pub fn opt_int<'de, D: Deserializer<'de>, T: TryFrom<i64>>(d: D) -> Result<Option<T>, D::Error> {
    Option::<AnyInt>::deserialize(d)?.map(to_int).transpose()
}

/// A field whose `null` means something (a quota back to its default):
/// present, even as `null`, is `Some`; absent is `None` (with `default`).
pub fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// A request read from JSON that does not fit its type: the field's JSON
/// path (`specs.req.cpu.numberOfCores`, empty for the body) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreadable {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Reads a typed request from JSON (a client's payload, a translation),
/// naming the field that does not fit. Only types: ranges, names and the
/// rest are meson's to check.
pub fn from_value<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<T, Unreadable> {
    serde_path_to_error::deserialize(v).map_err(|e| Unreadable {
        path: match e.path().to_string() {
            p if p == "." => String::new(),
            p => p,
        },
        message: e.into_inner().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Deserialize)]
    struct B {
        #[serde(default, deserialize_with = "opt_bool")]
        b: Option<bool>,
        #[serde(default, deserialize_with = "opt_int")]
        n: Option<u32>,
    }

    fn b(v: serde_json::Value) -> Result<(Option<bool>, Option<u32>), serde_json::Error> {
        serde_json::from_value::<B>(v).map(|x| (x.b, x.n))
    }

    #[test]
    fn reads_what_meson_reads() {
        assert_eq!(b(json!({"b": "True"})).unwrap().0, Some(true));
        assert_eq!(b(json!({"b": "FALSE"})).unwrap().0, Some(false));
        assert_eq!(b(json!({"b": 1})).unwrap().0, Some(true));
        assert_eq!(b(json!({"b": 0})).unwrap().0, Some(false));
        assert_eq!(b(json!({"b": 1.0})).unwrap().0, Some(true));
        assert_eq!(b(json!({"b": -0.0})).unwrap().0, Some(false));
        assert!(b(json!({"b": 0.5})).is_err());
        assert_eq!(b(json!({"b": null})).unwrap().0, None);
        assert_eq!(b(json!({})).unwrap().0, None);
        assert!(b(json!({"b": "yes"})).is_err());
        assert!(b(json!({"b": 2})).is_err());
        assert_eq!(b(json!({"n": 4096.0})).unwrap().1, Some(4096));
        assert!(b(json!({"n": 0.5})).is_err());
        assert!(b(json!({"n": -1})).is_err());
        assert!(b(json!({"n": "2"})).is_err());
    }
}
