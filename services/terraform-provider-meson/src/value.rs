//! Terraform's values on the wire: MessagePack shaped by a cty type, where
//! an extension of type 0 is a value not known until apply.
//!
//! The provider reads them into [`V`], compares and plans on it, and hands
//! resources plain JSON ([`V::to_json`]): by then every value is known.

use std::collections::BTreeMap;

/// A cty type, as schemas declare it and values are encoded by.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    Str,
    Num,
    Bool,
    List(Box<Ty>),
    Map(Box<Ty>),
    /// Attributes by name (every one present in an encoded value).
    Obj(Vec<(String, Ty)>),
}

impl Ty {
    pub fn list(t: Ty) -> Ty {
        Ty::List(Box::new(t))
    }

    pub fn map(t: Ty) -> Ty {
        Ty::Map(Box::new(t))
    }

    /// The type as the schema's `type` field spells it (cty's JSON).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        match self {
            Ty::Str => json!("string"),
            Ty::Num => json!("number"),
            Ty::Bool => json!("bool"),
            Ty::List(t) => json!(["list", t.to_json()]),
            Ty::Map(t) => json!(["map", t.to_json()]),
            Ty::Obj(attrs) => {
                let m: serde_json::Map<String, serde_json::Value> = attrs
                    .iter()
                    .map(|(k, t)| (k.clone(), t.to_json()))
                    .collect();
                json!(["object", m])
            }
        }
    }
}

/// A value: null, unknown (until apply), or known.
#[derive(Clone, Debug, PartialEq)]
pub enum V {
    Null,
    Unknown,
    Bool(bool),
    Num(f64),
    Str(String),
    List(Vec<V>),
    /// Objects and maps alike.
    Obj(BTreeMap<String, V>),
}

/// cty's extension code for an unknown value.
const UNKNOWN_EXT: i8 = 0;

impl V {
    pub fn is_null(&self) -> bool {
        matches!(self, V::Null)
    }

    /// The attribute `name` of an object (null when absent or not an object).
    pub fn get(&self, name: &str) -> &V {
        match self {
            V::Obj(m) => m.get(name).unwrap_or(&V::Null),
            _ => &V::Null,
        }
    }

    /// Element `i` of a list (null when absent).
    pub fn at(&self, i: usize) -> &V {
        match self {
            V::List(l) => l.get(i).unwrap_or(&V::Null),
            _ => &V::Null,
        }
    }

    /// Whether an unknown value is anywhere in it.
    pub fn has_unknown(&self) -> bool {
        match self {
            V::Unknown => true,
            V::List(l) => l.iter().any(V::has_unknown),
            V::Obj(m) => m.values().any(V::has_unknown),
            _ => false,
        }
    }

    /// Decodes MessagePack as Terraform sends it.
    pub fn from_msgpack(bytes: &[u8]) -> Result<V, String> {
        if bytes.is_empty() {
            return Ok(V::Null);
        }
        let mut r = bytes;
        let v = rmpv::decode::read_value(&mut r).map_err(|e| format!("bad msgpack: {e}"))?;
        Ok(V::from_rmpv(v))
    }

    fn from_rmpv(v: rmpv::Value) -> V {
        use rmpv::Value as R;
        match v {
            R::Nil => V::Null,
            R::Boolean(b) => V::Bool(b),
            R::Integer(i) => V::Num(i.as_f64().unwrap_or_default()),
            R::F32(f) => V::Num(f64::from(f)),
            R::F64(f) => V::Num(f),
            R::String(s) => V::Str(s.into_str().unwrap_or_default()),
            R::Binary(b) => V::Str(String::from_utf8_lossy(&b).into_owned()),
            R::Array(a) => V::List(a.into_iter().map(V::from_rmpv).collect()),
            R::Map(m) => V::Obj(
                m.into_iter()
                    .map(|(k, v)| {
                        let k = match k {
                            R::String(s) => s.into_str().unwrap_or_default(),
                            other => other.to_string(),
                        };
                        (k, V::from_rmpv(v))
                    })
                    .collect(),
            ),
            R::Ext(UNKNOWN_EXT, _) => V::Unknown,
            // Other extensions (refined unknowns among them) are unknown too.
            R::Ext(..) => V::Unknown,
        }
    }

    /// Encodes as MessagePack of type `ty` (objects get every attribute of
    /// the type, null when absent).
    pub fn to_msgpack(&self, ty: &Ty) -> Vec<u8> {
        let mut out = Vec::new();
        // Writing to a Vec cannot fail.
        let _ = rmpv::encode::write_value(&mut out, &self.to_rmpv(ty));
        out
    }

    fn to_rmpv(&self, ty: &Ty) -> rmpv::Value {
        use rmpv::Value as R;
        match (self, ty) {
            (V::Null, _) => R::Nil,
            (V::Unknown, _) => R::Ext(UNKNOWN_EXT, vec![0]),
            (_, Ty::Obj(attrs)) => R::Map(
                attrs
                    .iter()
                    .map(|(k, t)| (R::from(k.as_str()), self.get(k).to_rmpv(t)))
                    .collect(),
            ),
            (V::Obj(m), Ty::Map(t)) => R::Map(
                m.iter()
                    .map(|(k, v)| (R::from(k.as_str()), v.to_rmpv(t)))
                    .collect(),
            ),
            (V::List(l), Ty::List(t)) => R::Array(l.iter().map(|v| v.to_rmpv(t)).collect()),
            (V::Bool(b), _) => R::Boolean(*b),
            (V::Num(n), _) => {
                if n.fract() == 0.0 && n.abs() < 9.0e15 {
                    R::from(*n as i64)
                } else {
                    R::F64(*n)
                }
            }
            (V::Str(s), Ty::Num) => s.parse::<f64>().map_or(R::Nil, |n| V::Num(n).to_rmpv(ty)),
            (V::Str(s), _) => R::from(s.as_str()),
            // A shape that does not fit the type: null rather than a value
            // Terraform would refuse.
            _ => R::Nil,
        }
    }

    /// Plain JSON of a known value (unknown reads as null).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as Json;
        match self {
            V::Null | V::Unknown => Json::Null,
            V::Bool(b) => Json::Bool(*b),
            V::Num(n) => {
                if n.fract() == 0.0 && n.abs() < 9.0e15 {
                    Json::from(*n as i64)
                } else {
                    serde_json::Number::from_f64(*n).map_or(Json::Null, Json::Number)
                }
            }
            V::Str(s) => Json::String(s.clone()),
            V::List(l) => Json::Array(l.iter().map(V::to_json).collect()),
            V::Obj(m) => Json::Object(m.iter().map(|(k, v)| (k.clone(), v.to_json())).collect()),
        }
    }

    /// From plain JSON (as resources and raw states write it).
    pub fn from_json(j: &serde_json::Value) -> V {
        use serde_json::Value as Json;
        match j {
            Json::Null => V::Null,
            Json::Bool(b) => V::Bool(*b),
            Json::Number(n) => V::Num(n.as_f64().unwrap_or_default()),
            Json::String(s) => V::Str(s.clone()),
            Json::Array(a) => V::List(a.iter().map(V::from_json).collect()),
            Json::Object(m) => V::Obj(
                m.iter()
                    .map(|(k, v)| (k.clone(), V::from_json(v)))
                    .collect(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msgpack_round_trip_keeps_unknowns_nulls_and_numbers() {
        let ty = Ty::Obj(vec![
            ("id".into(), Ty::Str),
            ("n".into(), Ty::Num),
            ("f".into(), Ty::Num),
            ("labels".into(), Ty::map(Ty::Str)),
            ("keys".into(), Ty::list(Ty::Str)),
            ("absent".into(), Ty::Bool),
        ]);
        let mut m = BTreeMap::new();
        m.insert("id".into(), V::Unknown);
        m.insert("n".into(), V::Num(4096.0));
        m.insert("f".into(), V::Num(1.5));
        m.insert(
            "labels".into(),
            V::Obj([("env".to_owned(), V::Str("prod".into()))].into()),
        );
        m.insert("keys".into(), V::List(vec![V::Str("a".into())]));
        let v = V::Obj(m);
        let back = V::from_msgpack(&v.to_msgpack(&ty)).unwrap();
        assert_eq!(back.get("id"), &V::Unknown);
        assert_eq!(back.get("n"), &V::Num(4096.0));
        assert_eq!(back.get("f"), &V::Num(1.5));
        assert_eq!(back.get("labels").get("env"), &V::Str("prod".into()));
        assert_eq!(back.get("keys").at(0), &V::Str("a".into()));
        // Every attribute of the type is present, null when absent.
        match &back {
            V::Obj(m) => assert_eq!(m.get("absent"), Some(&V::Null)),
            other => panic!("{other:?}"),
        }
        assert!(back.has_unknown());
        assert_eq!(
            ty.to_json(),
            serde_json::json!(["object", {"id": "string", "n": "number", "f": "number",
                "labels": ["map", "string"], "keys": ["list", "string"], "absent": "bool"}])
        );
    }
}
