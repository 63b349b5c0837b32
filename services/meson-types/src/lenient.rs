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

/// How a JSON value reads as an integer: the one rule for integers as
/// clients send them, which meson-core's request reader and the typed
/// requests both apply. Any JSON number without a fraction is an integer
/// (`4096`, `4096.0`, `4.096e3`), within f64's exact integers when written
/// as a float.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Integer {
    Value(i64),
    /// A number with a fractional part.
    Fraction,
    /// An integral number beyond what meson counts in.
    TooLarge,
    /// Not a number at all.
    NotANumber,
}

pub fn integer(v: &serde_json::Value) -> Integer {
    let serde_json::Value::Number(num) = v else {
        return Integer::NotANumber;
    };
    if let Some(n) = num.as_i64() {
        return Integer::Value(n);
    }
    // Beyond i64 (a u64 or a float): integral floats within f64's exact
    // integers are fine, anything else integral is simply too large.
    match num.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 9e15 => Integer::Value(f as i64),
        Some(f) if f.fract() == 0.0 || num.is_u64() => Integer::TooLarge,
        _ => Integer::Fraction,
    }
}

fn to_int<T: TryFrom<i64>, E: de::Error>(v: serde_json::Value) -> Result<T, E> {
    let n = match integer(&v) {
        Integer::Value(n) => n,
        Integer::Fraction => {
            return Err(E::invalid_value(
                Unexpected::Float(v.as_f64().unwrap_or(f64::NAN)),
                &"an integer",
            ));
        }
        Integer::TooLarge => {
            return Err(E::invalid_value(
                Unexpected::Other("a number too large"),
                &"an integer in range",
            ));
        }
        Integer::NotANumber => {
            let got = match &v {
                serde_json::Value::String(s) => Unexpected::Str(s),
                serde_json::Value::Bool(b) => Unexpected::Bool(*b),
                serde_json::Value::Null => Unexpected::Unit,
                serde_json::Value::Array(_) => Unexpected::Seq,
                _ => Unexpected::Map,
            };
            return Err(E::invalid_type(got, &"an integer"));
        }
    };
    T::try_from(n).map_err(|_| E::invalid_value(Unexpected::Signed(n), &"an integer in range"))
}

/// A required lenient integer.
pub fn int<'de, D: Deserializer<'de>, T: TryFrom<i64>>(d: D) -> Result<T, D::Error> {
    to_int(serde_json::Value::deserialize(d)?)
}

/// An optional lenient integer; `null` is absent.
pub fn opt_int<'de, D: Deserializer<'de>, T: TryFrom<i64>>(d: D) -> Result<Option<T>, D::Error> {
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => to_int(v).map(Some),
    }
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
    fn one_integer_rule() {
        use serde_json::json;
        for (v, want) in [
            (json!(4096), Integer::Value(4096)),
            (json!(4096.0), Integer::Value(4096)),
            (json!(-3), Integer::Value(-3)),
            (json!(1.5), Integer::Fraction),
            (json!(u64::MAX), Integer::TooLarge),
            (json!(1e300), Integer::TooLarge),
            (json!("4096"), Integer::NotANumber),
            (json!(true), Integer::NotANumber),
            (json!(null), Integer::NotANumber),
        ] {
            assert_eq!(integer(&v), want, "{v}");
        }
        // The typed requests apply it: a string is refused in serde's words
        // about integers, not about an untagged enum.
        let e = serde_json::from_value::<I>(json!({"n": "lots"})).unwrap_err();
        assert!(e.to_string().contains("expected an integer"), "{e}");
        assert_eq!(
            serde_json::from_value::<I>(json!({"n": 7.0})).unwrap().n,
            Some(7)
        );
    }

    #[derive(Debug, serde::Deserialize)]
    struct I {
        #[serde(default, deserialize_with = "opt_int")]
        n: Option<u32>,
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
