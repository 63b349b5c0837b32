//! API tokens issued by meson: a tenant's automation authenticates with a
//! secret meson made, shown once and stored as its hash, with a role no
//! higher than its creator's, until it is revoked or expires.

use crate::id::{TenantId, TokenId};
use crate::parse::{Parser, Warning};
use chrono::{DateTime, Utc};
use rand::Rng;
use rand::distributions::Alphanumeric;
use serde_json::Value;
use std::ops::RangeInclusive;

/// Every secret starts with this: a bearer token that does is one of
/// meson's, looked up in its database; any other is a JWT.
pub const SECRET_PREFIX: &str = "meson_";
/// Random characters after the prefix (letters and digits: 238 bits).
const SECRET_RANDOM: usize = 40;
/// Characters of the secret shown afterwards to tell tokens apart.
pub const SHOWN_PREFIX_LEN: usize = SECRET_PREFIX.len() + 6;
/// The roles a token may have (a tenant's: never an operator's).
pub const ROLES: [&str; 3] = ["viewer", "editor", "owner"];
pub const MAX_NAME_LEN: usize = 64;
/// `expires_in`, seconds: a minute to two years.
pub const EXPIRES_IN: RangeInclusive<i64> = 60..=2 * 366 * 86_400;

/// A token as stored (never its secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiToken {
    pub id: TokenId,
    pub tenant: TenantId,
    pub name: String,
    /// One of [`ROLES`].
    pub role: String,
    /// The secret's first [`SHOWN_PREFIX_LEN`] characters.
    pub prefix: String,
    pub created_by: String,
    pub created: DateTime<Utc>,
    pub expires: Option<DateTime<Utc>>,
    pub revoked: Option<DateTime<Utc>>,
    pub revoked_by: Option<String>,
    pub last_used: Option<DateTime<Utc>>,
}

/// A token's create request, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenCreate {
    pub name: String,
    pub role: String,
    /// Seconds from now; `None`: it never expires.
    pub expires_in: Option<i64>,
}

impl TokenCreate {
    /// `{"name", "role", "expires_in"?}`: every bad field named, unknown
    /// ones as warnings.
    pub fn parse(body: &Value) -> crate::Result<(TokenCreate, Vec<Warning>)> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let name = match p.string(&mut root, "name", true) {
            Some((path, n)) => {
                let n = n.trim();
                if n.is_empty()
                    || n.chars().count() > MAX_NAME_LEN
                    || n.chars().any(char::is_control)
                {
                    p.errors.add(
                        path,
                        format!("must be 1 to {MAX_NAME_LEN} characters, no control characters"),
                    );
                    None
                } else {
                    Some(n.to_owned())
                }
            }
            None => None,
        };
        let role = match p.string(&mut root, "role", true) {
            Some((path, r)) if !ROLES.contains(&r) => {
                p.errors
                    .add(path, format!("must be viewer, editor or owner, got {r:?}"));
                None
            }
            Some((_, r)) => Some(r.to_owned()),
            None => None,
        };
        let expires_in = match root.get("expires_in") {
            (_, None | Some(Value::Null)) => Some(None),
            (path, Some(v)) => p.int_value(path, v, EXPIRES_IN).map(Some),
        };
        p.done(root);
        let Parser { errors, warnings } = p;
        match (name, role, expires_in) {
            (Some(name), Some(role), Some(expires_in)) if errors.is_empty() => Ok((
                TokenCreate {
                    name,
                    role,
                    expires_in,
                },
                warnings,
            )),
            _ => Err(errors.into_error().unwrap_or_else(|| {
                crate::Error::internal("a token request failed without a reason")
            })),
        }
    }
}

/// A fresh secret: [`SECRET_PREFIX`] and 40 random letters and digits.
pub fn new_secret() -> String {
    let random: String = rand::thread_rng()
        .sample_iter(&Alphanumeric)
        .take(SECRET_RANDOM)
        .map(char::from)
        .collect();
    format!("{SECRET_PREFIX}{random}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rejected(body: Value) -> Vec<String> {
        match TokenCreate::parse(&body) {
            Err(crate::Error::InvalidInput { fields }) => {
                let mut names: Vec<String> = fields.into_iter().map(|f| f.name).collect();
                names.sort();
                names
            }
            other => panic!("{body}: {other:?}"),
        }
    }

    #[test]
    fn requests_are_read_with_every_bad_field_named() {
        let (t, w) = TokenCreate::parse(&json!({"name": " ci ", "role": "editor",
            "expires_in": 3600, "colour": "red"}))
        .unwrap();
        assert_eq!(
            t,
            TokenCreate {
                name: "ci".into(),
                role: "editor".into(),
                expires_in: Some(3600)
            }
        );
        assert_eq!(w[0].field, "colour");
        let (t, _) =
            TokenCreate::parse(&json!({"name": "x", "role": "viewer", "expires_in": null}))
                .unwrap();
        assert_eq!(t.expires_in, None);
        assert_eq!(rejected(json!({})), ["name", "role"]);
        assert_eq!(
            rejected(json!({"name": "", "role": "admin", "expires_in": 5})),
            ["expires_in", "name", "role"]
        );
        assert_eq!(
            rejected(json!({"name": "x".repeat(65), "role": "owner", "expires_in": "soon"})),
            ["expires_in", "name"]
        );
    }

    #[test]
    fn secrets_carry_the_prefix_and_differ() {
        let (a, b) = (new_secret(), new_secret());
        assert!(a.starts_with(SECRET_PREFIX) && a.len() == SECRET_PREFIX.len() + 40);
        assert_ne!(a, b);
    }
}
