//! A path-tracking reader over `serde_json::Value` for inbound payloads.
//!
//! Real clients send booleans as `"True"`/`"False"` strings or 0/1, and we
//! must name *every* bad field (not serde's first error) and report unknown
//! fields as warnings. So request parsing walks the JSON tree itself, keeping
//! the dotted path of every value it reads.

use crate::error::FieldErrors;
use meson_types::lenient::Integer;
use serde::Serialize;
use serde_json::{Map, Value};
use std::ops::RangeInclusive;

/// A non-fatal remark about a request, returned in the response's `warnings`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Warning {
    pub field: String,
    pub message: String,
}

/// Collects errors and warnings while a payload is read.
#[derive(Debug, Default)]
pub struct Parser {
    pub errors: FieldErrors,
    pub warnings: Vec<Warning>,
}

/// An object being read; remembers which keys were consumed so the rest can
/// be reported as unknown.
pub struct Obj<'a> {
    path: String,
    map: &'a Map<String, Value>,
    known: Vec<&'static str>,
}

/// Parses a JSON text into a `Value` like `serde_json::from_str`, but an
/// object naming a key twice is an error naming the key (serde_json keeps
/// the last one silently, so two clients could read one body two ways).
pub fn json_value(text: &str) -> Result<Value, serde_json::Error> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_str(text);
    let value = StrictValue.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Builds a `Value`, refusing duplicate keys.
struct StrictValue;

impl<'de> serde::de::DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        serde::de::DeserializeSeed::deserialize(StrictValue, d)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(StrictValue)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!(
                    "duplicate key \"{key}\""
                )));
            }
            let value = map.next_value_seed(StrictValue)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// The fields a reader looks at, recorded while [`keys::recorded`] runs:
/// how a test holds a request's reader to its typed definition in
/// meson-types (the same fields, no more, no fewer).
#[cfg(feature = "testing")]
pub mod keys {
    use std::cell::RefCell;
    use std::collections::BTreeSet;

    thread_local! {
        static READ: RefCell<Option<BTreeSet<String>>> = const { RefCell::new(None) };
    }

    /// What `f` returns, and the paths of the fields it looked at (an
    /// array's items as `[]`: `specs.volumes[].name`). A recording within
    /// it keeps its own: what it saw is not in this one's.
    pub fn recorded<T>(f: impl FnOnce() -> T) -> (T, BTreeSet<String>) {
        let outer = READ.with(|r| r.replace(Some(BTreeSet::new())));
        let out = f();
        let read = READ.with(|r| r.replace(outer)).unwrap_or_default();
        (out, read)
    }

    /// Notes that the field at `path` was looked at.
    pub(crate) fn read(path: &str) {
        READ.with(|r| {
            if let Some(read) = r.borrow_mut().as_mut() {
                read.insert(items_as_brackets(path));
            }
        });
    }

    /// `a[0].b[12]` as `a[].b[]`.
    fn items_as_brackets(path: &str) -> String {
        let mut out = String::with_capacity(path.len());
        let mut in_index = false;
        for c in path.chars() {
            match c {
                '[' => {
                    in_index = true;
                    out.push('[');
                }
                ']' => {
                    in_index = false;
                    out.push(']');
                }
                _ if in_index => {}
                c => out.push(c),
            }
        }
        out
    }
}

pub fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// JSON type name for error messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl<'a> Obj<'a> {
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Looks a key up and marks it as known. `null` counts as absent.
    pub fn get(&mut self, key: &'static str) -> (String, Option<&'a Value>) {
        self.known.push(key);
        let v = self.map.get(key).filter(|v| !v.is_null());
        let path = join(&self.path, key);
        #[cfg(feature = "testing")]
        keys::read(&path);
        (path, v)
    }

    /// Marks keys as known without reading them (accepted aliases, ignored fields).
    pub fn accept(&mut self, keys: &[&'static str]) {
        self.known.extend_from_slice(keys);
        #[cfg(feature = "testing")]
        for key in keys {
            keys::read(&join(&self.path, key));
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = &'a String> {
        self.map.keys()
    }
}

impl Parser {
    /// The top-level value must be an object.
    pub fn root<'a>(&mut self, v: &'a Value) -> Option<Obj<'a>> {
        self.object_at(String::new(), v)
    }

    /// A request body's top-level object, or the error that it is not one.
    pub fn body<'a>(&mut self, v: &'a Value) -> crate::Result<Obj<'a>> {
        self.root(v).ok_or_else(|| {
            std::mem::take(&mut self.errors)
                .into_error()
                .unwrap_or_else(|| crate::Error::invalid("(body)", "must be an object"))
        })
    }

    fn object_at<'a>(&mut self, path: String, v: &'a Value) -> Option<Obj<'a>> {
        match v {
            Value::Object(map) => Some(Obj {
                path,
                map,
                known: Vec::new(),
            }),
            other => {
                let name = if path.is_empty() {
                    "(body)".to_owned()
                } else {
                    path
                };
                self.errors
                    .add(name, format!("must be an object, got {}", kind(other)));
                None
            }
        }
    }

    /// Reports the keys of `obj` that were never read.
    pub fn done(&mut self, obj: Obj<'_>) {
        for key in obj.map.keys() {
            if !obj.known.iter().any(|k| k == key) {
                self.warnings.push(Warning {
                    field: join(&obj.path, key),
                    message: "unknown field, ignored".to_owned(),
                });
            }
        }
    }

    pub fn missing(&mut self, path: String) {
        self.errors.add(path, "is required");
    }

    pub fn object<'a>(
        &mut self,
        o: &mut Obj<'a>,
        key: &'static str,
        required: bool,
    ) -> Option<Obj<'a>> {
        match o.get(key) {
            (path, Some(v)) => self.object_at(path, v),
            (path, None) => {
                if required {
                    self.missing(path);
                }
                None
            }
        }
    }

    /// Accepts JSON booleans, the strings "true"/"false" in any case, and 0/1.
    pub fn bool(&mut self, o: &mut Obj<'_>, key: &'static str) -> Option<bool> {
        let (path, v) = o.get(key);
        let v = v?;
        let parsed = meson_types::lenient::boolean(v);
        if parsed.is_none() {
            self.errors.add(
                path,
                format!("must be {}, got {}", meson_types::lenient::BOOLEAN, kind(v)),
            );
        }
        parsed
    }

    /// An integer within `range`; integral floats such as `4096.0` are accepted.
    pub fn int(
        &mut self,
        o: &mut Obj<'_>,
        key: &'static str,
        range: RangeInclusive<i64>,
        required: bool,
    ) -> Option<i64> {
        let (path, v) = o.get(key);
        let Some(v) = v else {
            if required {
                self.missing(path);
            }
            return None;
        };
        self.int_value(path, v, range)
    }

    pub fn int_value(
        &mut self,
        path: String,
        v: &Value,
        range: RangeInclusive<i64>,
    ) -> Option<i64> {
        let out_of_range = |n: &dyn std::fmt::Display| {
            format!(
                "must be between {} and {}, got {n}",
                range.start(),
                range.end()
            )
        };
        match meson_types::lenient::integer(v) {
            Integer::Value(n) if range.contains(&n) => Some(n),
            Integer::Value(n) => {
                self.errors.add(path, out_of_range(&n));
                None
            }
            Integer::TooLarge => {
                self.errors.add(path, out_of_range(&v));
                None
            }
            Integer::Fraction => {
                self.errors
                    .add(path, format!("must be an integer, got the fraction {v}"));
                None
            }
            Integer::NotANumber => {
                self.errors
                    .add(path, format!("must be an integer, got {}", kind(v)));
                None
            }
        }
    }

    /// A finite number within `range` (inclusive).
    pub fn float(
        &mut self,
        o: &mut Obj<'_>,
        key: &'static str,
        range: RangeInclusive<f64>,
    ) -> Option<f64> {
        let (path, v) = o.get(key);
        let v = v?;
        match v.as_f64() {
            Some(f) if f.is_finite() && range.contains(&f) => Some(f),
            Some(f) => {
                self.errors.add(
                    path,
                    format!(
                        "must be between {} and {}, got {f}",
                        range.start(),
                        range.end()
                    ),
                );
                None
            }
            None => {
                self.errors
                    .add(path, format!("must be a number, got {}", kind(v)));
                None
            }
        }
    }

    pub fn string<'a>(
        &mut self,
        o: &mut Obj<'a>,
        key: &'static str,
        required: bool,
    ) -> Option<(String, &'a str)> {
        let (path, v) = o.get(key);
        match v {
            Some(Value::String(s)) => Some((path, s.as_str())),
            Some(other) => {
                self.errors
                    .add(path, format!("must be a string, got {}", kind(other)));
                None
            }
            None => {
                if required {
                    self.missing(path);
                }
                None
            }
        }
    }

    /// A resource id (a UUID) at `key`, `what` naming the resource in the
    /// error: `Some(None)` when absent (and not required), `None` when
    /// malformed or missing (named).
    pub fn id<T: std::str::FromStr>(
        &mut self,
        o: &mut Obj<'_>,
        key: &'static str,
        what: &str,
        required: bool,
    ) -> Option<Option<T>> {
        let path = join(o.path(), key);
        match self.string(o, key, required) {
            None if required || self.errors.has(&path) => None,
            None => Some(None),
            Some((path, s)) => match s.parse::<T>() {
                Ok(id) => Some(Some(id)),
                Err(_) => {
                    self.errors.add(path, format!("must be {what} id (a UUID)"));
                    None
                }
            },
        }
    }

    /// A name AtomOS can hold, at most `max_len` long.
    pub fn atomos_name(
        &mut self,
        o: &mut Obj<'_>,
        key: &'static str,
        required: bool,
        max_len: usize,
    ) -> Option<String> {
        let (path, name) = self.string(o, key, required)?;
        match crate::naming::check_atomos_name(name, max_len) {
            Ok(()) => Some(name.to_owned()),
            Err(m) => {
                self.errors.add(path, m);
                None
            }
        }
    }

    /// An array's items with their paths (`volumes[0]`).
    pub fn array<'a>(
        &mut self,
        o: &mut Obj<'a>,
        key: &'static str,
        max_len: usize,
    ) -> Option<Vec<(String, &'a Value)>> {
        let (path, v) = o.get(key);
        match v? {
            Value::Array(items) if items.len() > max_len => {
                self.errors
                    .add(path, format!("must have at most {max_len} items"));
                None
            }
            Value::Array(items) => Some(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (format!("{path}[{i}]"), v))
                    .collect(),
            ),
            other => {
                self.errors
                    .add(path, format!("must be an array, got {}", kind(other)));
                None
            }
        }
    }

    /// An object nested in an array.
    pub fn item_object<'a>(&mut self, path: String, v: &'a Value) -> Option<Obj<'a>> {
        self.object_at(path, v)
    }

    /// An array of strings.
    pub fn strings(
        &mut self,
        o: &mut Obj<'_>,
        key: &'static str,
        max_len: usize,
    ) -> Option<Vec<String>> {
        let items = self.array(o, key, max_len)?;
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (path, v) in items {
            match v {
                Value::String(s) => out.push(s.clone()),
                other => {
                    self.errors
                        .add(path, format!("must be a string, got {}", kind(other)));
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn json_value_refuses_a_key_named_twice_and_reads_the_rest_as_serde_json() {
        let e = super::json_value(r#"{"a": 1, "b": {"c": 2, "c": 3}}"#).unwrap_err();
        assert!(e.to_string().contains("duplicate key \"c\""), "{e}");
        let text = r#"{"a": [1, -2, 3.5, "x", null, true, {"b": {}}], "c": 18446744073709551615}"#;
        assert_eq!(
            super::json_value(text).unwrap(),
            serde_json::from_str::<serde_json::Value>(text).unwrap()
        );
        assert!(super::json_value(r#"{"a": 1} x"#).is_err());
        // The same key in two objects is no duplicate.
        assert!(super::json_value(r#"[{"a": 1}, {"a": 2}]"#).is_ok());
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn lenient_booleans() {
        let v = json!({"a": "True", "b": "false", "c": 1, "d": false, "e": "yes", "f": 2});
        let mut p = Parser::default();
        let mut o = p.root(&v).unwrap();
        assert_eq!(p.bool(&mut o, "a"), Some(true));
        assert_eq!(p.bool(&mut o, "b"), Some(false));
        assert_eq!(p.bool(&mut o, "c"), Some(true));
        assert_eq!(p.bool(&mut o, "d"), Some(false));
        assert_eq!(p.bool(&mut o, "e"), None);
        assert_eq!(p.bool(&mut o, "f"), None);
        assert!(p.errors.has("e") && p.errors.has("f"));
    }

    #[test]
    fn unknown_fields_become_warnings() {
        let v = json!({"x": 1, "mystery": 2});
        let mut p = Parser::default();
        let mut o = p.root(&v).unwrap();
        p.int(&mut o, "x", 0..=5, true);
        p.done(o);
        assert_eq!(p.warnings.len(), 1);
        assert_eq!(p.warnings[0].field, "mystery");
    }

    #[test]
    fn integers_reject_strings_and_out_of_range() {
        let v = json!({"a": "2", "b": 4096.0, "c": 99, "d": 1.5});
        let mut p = Parser::default();
        let mut o = p.root(&v).unwrap();
        assert_eq!(p.int(&mut o, "a", 0..=10, true), None);
        assert_eq!(p.int(&mut o, "b", 0..=10000, true), Some(4096));
        assert_eq!(p.int(&mut o, "c", 0..=10, true), None);
        assert_eq!(p.int(&mut o, "d", 0..=10, true), None);
        assert_eq!(p.int(&mut o, "missing", 0..=10, true), None);
        assert!(p.errors.has("missing"));
    }

    #[test]
    fn huge_numbers_are_out_of_range_not_wrongly_typed() {
        let v = json!({"a": u64::MAX, "b": 1e300, "c": 2.5e20, "e": 8.0});
        let mut p = Parser::default();
        let mut o = p.root(&v).unwrap();
        for key in ["a", "b", "c"] {
            assert_eq!(p.int(&mut o, key, 1..=10, true), None);
        }
        assert_eq!(p.int(&mut o, "e", 1..=10, true), Some(8));
        let Some(crate::Error::InvalidInput { fields }) = p.errors.into_error() else {
            panic!("expected errors")
        };
        assert_eq!(fields.len(), 3);
        assert!(
            fields
                .iter()
                .all(|f| f.messages[0].starts_with("must be between 1 and 10")),
            "{fields:?}"
        );
    }
}
