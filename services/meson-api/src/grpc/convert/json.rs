//! The REST request's JSON, built from a message: only the fields set.

use serde_json::{Map, Value, json};
use std::collections::HashMap;

/// A JSON object of the fields that are set (non-empty, non-zero).
pub struct Obj(Map<String, Value>);

impl Obj {
    pub fn new() -> Obj {
        Obj(Map::new())
    }

    pub fn str(mut self, key: &str, v: &str) -> Obj {
        if !v.is_empty() {
            self.0.insert(key.to_owned(), v.into());
        }
        self
    }

    pub fn num(mut self, key: &str, v: impl Into<f64> + Copy) -> Obj {
        let f: f64 = v.into();
        if f != 0.0 {
            // Integral numbers as integers: the parser wants those.
            let value = if f.fract() == 0.0 && f.abs() < 9e15 {
                json!(f as i64)
            } else {
                json!(f)
            };
            self.0.insert(key.to_owned(), value);
        }
        self
    }

    pub fn opt<T: Into<Value>>(mut self, key: &str, v: Option<T>) -> Obj {
        if let Some(v) = v {
            self.0.insert(key.to_owned(), v.into());
        }
        self
    }

    pub fn flag(mut self, key: &str, v: bool) -> Obj {
        if v {
            self.0.insert(key.to_owned(), true.into());
        }
        self
    }

    pub fn list(mut self, key: &str, v: &[String]) -> Obj {
        if !v.is_empty() {
            self.0.insert(key.to_owned(), v.into());
        }
        self
    }

    pub fn labels(mut self, key: &str, v: &HashMap<String, String>) -> Obj {
        if !v.is_empty() {
            self.0.insert(key.to_owned(), json!(v));
        }
        self
    }

    pub fn obj(mut self, key: &str, v: Option<Obj>) -> Obj {
        if let Some(o) = v.filter(|o| !o.0.is_empty()) {
            self.0.insert(key.to_owned(), Value::Object(o.0));
        }
        self
    }

    pub fn objs(mut self, key: &str, v: Vec<Obj>) -> Obj {
        if !v.is_empty() {
            let items = v.into_iter().map(|o| Value::Object(o.0)).collect();
            self.0.insert(key.to_owned(), Value::Array(items));
        }
        self
    }

    pub fn value(self) -> Value {
        Value::Object(self.0)
    }
}
