//! The body of a `PATCH` on a named, labelled resource: `{"name", "labels"}`.

use crate::labels::{self, Labels};
use crate::parse::{Parser, Warning};
use serde_json::Value;

/// What a `PATCH` changes; `None` leaves a field as it is.
#[derive(Clone, Debug, PartialEq)]
pub struct NameLabels {
    pub name: Option<String>,
    /// Replaces every label when given.
    pub labels: Option<Labels>,
    pub warnings: Vec<Warning>,
}

impl NameLabels {
    /// Parses the body; a name must be one AtomOS can hold, at most
    /// `max_name_len` long. Unknown fields become warnings.
    pub fn parse(body: &Value, max_name_len: usize) -> crate::Result<NameLabels> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let name = p.atomos_name(&mut root, "name", false, max_name_len);
        let labels = match root.get("labels") {
            (path, Some(v)) => labels::parse(&path, v, &mut p.errors),
            (_, None) => None,
        };
        p.done(root);
        let Parser { errors, warnings } = p;
        errors.finish(NameLabels {
            name,
            labels,
            warnings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn name_labels_and_unknown_fields() {
        let p = NameLabels::parse(
            &json!({"name": "web-2", "labels": {"env": "prod"}, "x": 1}),
            63,
        )
        .unwrap();
        assert_eq!(p.name.as_deref(), Some("web-2"));
        assert_eq!(
            p.labels.unwrap().get("env").map(String::as_str),
            Some("prod")
        );
        assert_eq!(p.warnings[0].field, "x");
        let empty = NameLabels::parse(&json!({}), 63).unwrap();
        assert_eq!((empty.name, empty.labels), (None, None));
    }

    #[test]
    fn bad_fields_are_named() {
        let err = NameLabels::parse(&json!({"name": "a b", "labels": {"": "x"}}), 63).unwrap_err();
        let crate::Error::InvalidInput { fields } = err else {
            panic!("{err:?}")
        };
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        assert!(names.contains(&"name"), "{names:?}");
        assert!(names.iter().any(|n| n.starts_with("labels")), "{names:?}");
        assert!(NameLabels::parse(&json!([1]), 63).is_err());
    }
}
