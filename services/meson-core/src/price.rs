//! The price list's entries as operators add them: per meter (a VM's
//! price is its host's quote, not the list's) and provider, from a time on.

use crate::error::{Error, FieldError, Result};
use crate::parse::Parser;
use chrono::{DateTime, Utc};
use meson_types::usage::Meter;
use serde_json::Value;

/// A price to add to the price list (`POST /v1/admin/prices`), validated.
#[derive(Debug, PartialEq)]
pub struct PriceCreate {
    pub meter: Meter,
    pub provider: String,
    pub unit_price: String,
    pub currency: String,
    pub effective_from: Option<DateTime<Utc>>,
}

impl PriceCreate {
    /// Every bad field is named; a VM's price is its host's quote, never
    /// the list's.
    pub fn parse(body: &Value) -> Result<PriceCreate> {
        if !body.is_object() {
            return Err(Error::Json {
                message: "the body must be a JSON object".into(),
            });
        }
        // Fields are looked up through the shared reader (`null` is absent).
        let mut reader = Parser::default();
        let mut obj = reader.body(body)?;
        let mut bad: Vec<FieldError> = Vec::new();
        let mut fail = |name: &str, message: &str| {
            bad.push(FieldError {
                name: name.to_owned(),
                messages: vec![message.to_owned()],
            })
        };
        let meter = match obj
            .get("meter")
            .1
            .and_then(Value::as_str)
            .and_then(Meter::parse)
        {
            Some(m) if m != Meter::Vm => Some(m),
            _ => {
                fail(
                    "meter",
                    "must be volume, cluster, image or backup (a VM's price is its host's quote)",
                );
                None
            }
        };
        let provider = match obj.get("provider").1 {
            None => "*".to_owned(),
            Some(Value::String(s)) if (1..=64).contains(&s.len()) && !s.contains('\0') => s.clone(),
            Some(_) => {
                fail(
                    "provider",
                    "must be a provider's name (1 to 64 characters) or *",
                );
                String::new()
            }
        };
        let unit_price = match obj.get("unit_price").1 {
            Some(Value::String(s)) => decimal(s),
            Some(Value::Number(n)) => decimal(&n.to_string()),
            _ => None,
        };
        if unit_price.is_none() {
            fail(
                "unit_price",
                "must be a decimal of at least 0 with at most 12 decimal places, like \"0.00007\"",
            );
        }
        let currency = match obj.get("currency").1.and_then(Value::as_str) {
            Some(c) if c.len() == 3 && c.bytes().all(|b| b.is_ascii_uppercase()) => c.to_owned(),
            _ => {
                fail("currency", "must be three capital letters, like EUR");
                String::new()
            }
        };
        let effective_from = match obj.get("effective_from").1 {
            None => None,
            Some(Value::String(s)) => {
                match DateTime::parse_from_rfc3339(s.trim()).map(|t| t.to_utc()) {
                    Ok(t) => Some(t),
                    Err(_) => {
                        fail("effective_from", "must be an RFC 3339 time");
                        None
                    }
                }
            }
            Some(_) => {
                fail("effective_from", "must be an RFC 3339 time");
                None
            }
        };
        match (meter, unit_price) {
            (Some(meter), Some(unit_price)) if bad.is_empty() => Ok(PriceCreate {
                meter,
                provider,
                unit_price,
                currency,
                effective_from,
            }),
            _ => Err(Error::InvalidInput { fields: bad }),
        }
    }
}

/// `s` as a non-negative decimal of at most 12 places and 20 digits.
fn decimal(s: &str) -> Option<String> {
    let s = s.trim();
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let ok = !int.is_empty()
        && int.len() <= 8
        && frac.len() <= 12
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit())
        && !(s.contains('.') && frac.is_empty());
    ok.then(|| s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decimals_are_plain_and_bounded() {
        assert_eq!(decimal("0.00007"), Some("0.00007".into()));
        assert_eq!(decimal("12"), Some("12".into()));
        for bad in [
            "",
            "-1",
            "1e-5",
            "1.",
            ".5",
            "0.0000000000001",
            "NaN",
            "123456789",
        ] {
            assert_eq!(decimal(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_price_names_each_bad_field() {
        let e = PriceCreate::parse(&json!({"meter": "vm", "unit_price": -1, "currency": "eur",
                                         "effective_from": "soon"}))
        .unwrap_err();
        let Error::InvalidInput { fields } = e else {
            panic!("{e:?}")
        };
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["meter", "unit_price", "currency", "effective_from"]);
        let ok = PriceCreate::parse(&json!({"meter": "volume", "unit_price": "0.0001",
                                          "currency": "EUR"}))
        .unwrap();
        assert_eq!(ok.provider, "*");
        assert_eq!(ok.unit_price, "0.0001");
    }
}
