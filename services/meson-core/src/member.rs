//! Organisations' members and invitations: an identity provider's subject
//! holding a role in an organisation (a tenant, same id), added by a
//! manager or owner, or by accepting an invitation sent to its email.

use crate::id::{InvitationId, TenantId};
use crate::parse::{Parser, Warning};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::ops::RangeInclusive;

/// A member's roles, lowest first: viewers read, editors also change,
/// managers also manage the members and invitations below owner, owners
/// everything of their organisation's.
pub const ROLES: [&str; 4] = ["viewer", "editor", "manager", "owner"];
/// The identity provider's subject: as a JWT's `sub` may be.
pub const MAX_SUBJECT_LEN: usize = 255;
pub const MAX_EMAIL_LEN: usize = 254;
/// `expires_in` of an invitation, seconds: an hour to 30 days; 7 days
/// when omitted.
pub const INVITATION_EXPIRES_IN: RangeInclusive<i64> = 3_600..=30 * 86_400;
pub const INVITATION_DEFAULT_EXPIRES_IN: i64 = 7 * 86_400;

/// A member, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub tenant: TenantId,
    pub subject: String,
    pub email: Option<String>,
    /// One of [`ROLES`].
    pub role: String,
    pub added_by: String,
    pub created: DateTime<Utc>,
    pub updated: DateTime<Utc>,
    pub limits: MemberLimits,
}

/// What a member may hold of its organisation's, of its own VMs (those it
/// created): `None`, no limit of its own (the organisation's quotas).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemberLimits {
    pub vms: Option<i64>,
    pub vcpus: Option<i64>,
    pub ram_mib: Option<i64>,
}

/// The names of a member's limits, in the order the database keeps them.
pub const LIMITS: [&str; 3] = ["vms", "vcpus", "ram_mib"];

/// The refusal of a VM that takes its creator over `over` of its member
/// limits (`limits`, holding `held`): `resource_limit_exceeded`, each
/// named `member.<limit>`.
pub fn exceeded(limits: &[i64; 3], held: &[i64; 3], over: &[&str]) -> crate::Error {
    crate::Error::QuotaExceeded {
        limits: LIMITS
            .iter()
            .zip(limits.iter().zip(held))
            .filter(|(name, _)| over.contains(name))
            .map(|(name, (quota, current))| crate::error::LimitExceeded {
                name: format!("member.{name}"),
                quota: *quota,
                current: *current,
            })
            .collect(),
    }
}

/// Where an invitation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvitationStatus {
    Pending,
    Accepted,
    Revoked,
    Expired,
}

impl InvitationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            InvitationStatus::Pending => "pending",
            InvitationStatus::Accepted => "accepted",
            InvitationStatus::Revoked => "revoked",
            InvitationStatus::Expired => "expired",
        }
    }
}

/// An invitation, as stored (never its secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invitation {
    pub id: InvitationId,
    pub tenant: TenantId,
    pub email: String,
    pub role: String,
    pub invited_by: String,
    pub created: DateTime<Utc>,
    pub expires: DateTime<Utc>,
    pub accepted: Option<DateTime<Utc>>,
    pub accepted_by: Option<String>,
    pub revoked: Option<DateTime<Utc>>,
    pub revoked_by: Option<String>,
}

impl Invitation {
    /// Its status at `now`.
    pub fn status(&self, now: DateTime<Utc>) -> InvitationStatus {
        if self.accepted.is_some() {
            InvitationStatus::Accepted
        } else if self.revoked.is_some() {
            InvitationStatus::Revoked
        } else if self.expires <= now {
            InvitationStatus::Expired
        } else {
            InvitationStatus::Pending
        }
    }
}

/// `POST /v1/members`: `{"subject", "role", "email"?}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberCreate {
    pub subject: String,
    pub role: String,
    pub email: Option<String>,
}

/// `PATCH /v1/members/{subject}`: `{"role"?, "limits"?: {"vms"?, "vcpus"?,
/// "ram_mib"?}}`, at least one of them; a limit `null` lifts it, one not
/// named stays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberUpdate {
    pub role: Option<String>,
    pub limits: LimitsPatch,
}

/// Limits to change: `Some(None)` lifts one, `None` leaves it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitsPatch {
    pub vms: Option<Option<i64>>,
    pub vcpus: Option<Option<i64>>,
    pub ram_mib: Option<Option<i64>>,
}

/// `POST /v1/invitations`: `{"email", "role", "expires_in"?}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvitationCreate {
    pub email: String,
    pub role: String,
    /// Seconds from now.
    pub expires_in: i64,
}

/// `POST /v1/invitations/accept`: `{"token"}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvitationAccept {
    pub token: String,
}

/// A subject as an identity provider names one: 1 to 255 printable
/// characters.
pub fn valid_subject(s: &str) -> bool {
    !s.is_empty() && s.chars().count() <= MAX_SUBJECT_LEN && !s.chars().any(char::is_control)
}

/// An email address, normalised to lower case: one `@` between a local
/// part and a domain with a dot, no spaces or control characters, at most
/// 254 characters. (Whether it reaches anyone is the identity provider's
/// to verify: an invitation is accepted only with a verified address.)
pub fn parse_email(s: &str) -> Option<String> {
    let s = s.trim();
    let (local, domain) = s.split_once('@')?;
    let ok = s.len() <= MAX_EMAIL_LEN
        && !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !domain.contains('@')
        && !s.chars().any(|c| c.is_whitespace() || c.is_control());
    ok.then(|| s.to_lowercase())
}

fn role(p: &mut Parser, root: &mut crate::parse::Obj<'_>) -> Option<String> {
    match p.string(root, "role", true) {
        Some((_, r)) if ROLES.contains(&r) => Some(r.to_owned()),
        Some((path, r)) => {
            p.errors.add(
                path,
                format!("must be viewer, editor, manager or owner, got {r:?}"),
            );
            None
        }
        None => None,
    }
}

/// `Some(None)`: absent (and not required); `None`: bad or missing, named.
fn email(
    p: &mut Parser,
    root: &mut crate::parse::Obj<'_>,
    required: bool,
) -> Option<Option<String>> {
    let (path, e) = match root.get("email") {
        (path, None) if required => {
            p.missing(path);
            return None;
        }
        (_, None) => return Some(None),
        (path, Some(Value::String(e))) => (path, e),
        (path, Some(_)) => {
            p.errors.add(path, "must be a string");
            return None;
        }
    };
    let parsed = parse_email(e);
    if parsed.is_none() {
        p.errors.add(
            path,
            format!("must be an email address of at most {MAX_EMAIL_LEN} characters"),
        );
    }
    parsed.map(Some)
}

/// What a parse ends with: the request, or every bad field.
fn finish<T>(p: Parser, req: Option<T>, what: &str) -> crate::Result<(T, Vec<Warning>)> {
    let Parser { errors, warnings } = p;
    match req {
        Some(r) if errors.is_empty() => Ok((r, warnings)),
        _ => Err(errors
            .into_error()
            .unwrap_or_else(|| crate::Error::internal(format!("{what} failed without a reason")))),
    }
}

impl MemberCreate {
    pub fn parse(body: &Value) -> crate::Result<(MemberCreate, Vec<Warning>)> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let subject = match p.string(&mut root, "subject", true) {
            Some((_, s)) if valid_subject(s) => Some(s.to_owned()),
            Some((path, _)) => {
                p.errors.add(
                    path,
                    format!("must be 1 to {MAX_SUBJECT_LEN} characters, no control characters"),
                );
                None
            }
            None => None,
        };
        let role = role(&mut p, &mut root);
        let email = email(&mut p, &mut root, false);
        p.done(root);
        let req = match (subject, role, email) {
            (Some(subject), Some(role), Some(email)) => Some(MemberCreate {
                subject,
                role,
                email,
            }),
            _ => None,
        };
        finish(p, req, "a member request")
    }
}

impl MemberUpdate {
    pub fn parse(body: &Value) -> crate::Result<(MemberUpdate, Vec<Warning>)> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let role = match root.get("role") {
            (_, None) => Some(None),
            (_, Some(_)) => role(&mut p, &mut root).map(Some),
        };
        let mut limits = LimitsPatch::default();
        let mut named = false;
        if let (path, Some(v)) = root.get("limits") {
            match v.as_object() {
                None => p.errors.add(path, "must be an object of limits"),
                Some(map) => {
                    for (k, v) in map {
                        let field = format!("{path}.{k}");
                        let value = match v {
                            Value::Null => Some(None),
                            v => match v.as_i64().filter(|n| *n >= 0) {
                                Some(n) => Some(Some(n)),
                                None => {
                                    p.errors
                                        .add(field, "must be a non-negative integer or null");
                                    continue;
                                }
                            },
                        };
                        match k.as_str() {
                            "vms" => limits.vms = value,
                            "vcpus" => limits.vcpus = value,
                            "ram_mib" => limits.ram_mib = value,
                            _ => {
                                p.errors.add(
                                    field,
                                    format!("unknown limit (known: {})", LIMITS.join(", ")),
                                );
                                continue;
                            }
                        }
                        named = true;
                    }
                }
            }
        }
        if matches!(role, Some(None)) && !named && p.errors.is_empty() {
            p.errors.add("role", "is required, unless limits are given");
        }
        p.done(root);
        finish(
            p,
            role.map(|role| MemberUpdate { role, limits }),
            "a member update",
        )
    }
}

impl InvitationCreate {
    pub fn parse(body: &Value) -> crate::Result<(InvitationCreate, Vec<Warning>)> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let email = email(&mut p, &mut root, true).flatten();
        let role = role(&mut p, &mut root);
        let expires_in = match root.get("expires_in") {
            (_, None) => Some(INVITATION_DEFAULT_EXPIRES_IN),
            (path, Some(v)) => p.int_value(path, v, INVITATION_EXPIRES_IN),
        };
        p.done(root);
        let req = match (email, role, expires_in) {
            (Some(email), Some(role), Some(expires_in)) => Some(InvitationCreate {
                email,
                role,
                expires_in,
            }),
            _ => None,
        };
        finish(p, req, "an invitation")
    }
}

impl InvitationAccept {
    pub fn parse(body: &Value) -> crate::Result<(InvitationAccept, Vec<Warning>)> {
        let mut p = Parser::default();
        let mut root = p.body(body)?;
        let token = match p.string(&mut root, "token", true) {
            Some((_, t)) if t.starts_with(INVITATION_PREFIX) && t.len() < 128 => Some(t.to_owned()),
            Some((path, _)) => {
                p.errors.add(
                    path,
                    format!("must be an invitation's token ({INVITATION_PREFIX}...)"),
                );
                None
            }
            None => None,
        };
        p.done(root);
        finish(
            p,
            token.map(|token| InvitationAccept { token }),
            "an acceptance",
        )
    }
}

/// Every invitation's token starts with this (so that it is never taken
/// for an API token, `meson_...`, and is refused as a bearer token).
pub const INVITATION_PREFIX: &str = "mesoninv_";

/// A fresh invitation token: [`INVITATION_PREFIX`] and 40 random letters
/// and digits.
pub fn new_invitation_token() -> String {
    let secret = crate::token::new_secret();
    format!(
        "{INVITATION_PREFIX}{}",
        &secret[crate::token::SECRET_PREFIX.len()..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rejected(r: crate::Result<impl std::fmt::Debug>) -> Vec<String> {
        match r {
            Err(crate::Error::InvalidInput { fields }) => {
                let mut names: Vec<String> = fields.into_iter().map(|f| f.name).collect();
                names.sort();
                names
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn members_are_read_with_every_bad_field_named() {
        let (m, w) = MemberCreate::parse(&json!({"subject": "auth0|42", "role": "editor",
            "email": " Ann@Example.ORG ", "colour": 1}))
        .unwrap();
        assert_eq!(
            m,
            MemberCreate {
                subject: "auth0|42".into(),
                role: "editor".into(),
                email: Some("ann@example.org".into())
            }
        );
        assert_eq!(w[0].field, "colour");
        let (m, _) = MemberCreate::parse(&json!({"subject": "s", "role": "owner"})).unwrap();
        assert_eq!(m.email, None);
        assert_eq!(
            rejected(MemberCreate::parse(
                &json!({"subject": "", "role": "admin", "email": "nope"})
            )),
            ["email", "role", "subject"]
        );
        assert_eq!(
            rejected(MemberCreate::parse(&json!({"subject": "a\u{0}b"}))),
            ["role", "subject"]
        );
        assert_eq!(rejected(MemberUpdate::parse(&json!({}))), ["role"]);
        assert_eq!(
            MemberUpdate::parse(&json!({"role": "manager"})).unwrap().0,
            MemberUpdate {
                role: Some("manager".into()),
                limits: LimitsPatch::default(),
            }
        );
        let (u, _) = MemberUpdate::parse(&json!({"limits": {"vms": 2, "ram_mib": null}})).unwrap();
        assert_eq!(
            (u.role, u.limits.vms, u.limits.vcpus, u.limits.ram_mib),
            (None, Some(Some(2)), None, Some(None))
        );
        assert_eq!(
            rejected(MemberUpdate::parse(
                &json!({"role": "god", "limits": {"vms": -1, "gpus": 1}})
            )),
            ["limits.gpus", "limits.vms", "role"]
        );
        assert!(MemberCreate::parse(&json!([])).is_err());
    }

    #[test]
    fn invitations_are_read_with_every_bad_field_named() {
        let (i, _) =
            InvitationCreate::parse(&json!({"email": "bob@example.com", "role": "viewer"}))
                .unwrap();
        assert_eq!(i.expires_in, INVITATION_DEFAULT_EXPIRES_IN);
        assert_eq!(
            rejected(InvitationCreate::parse(
                &json!({"email": "a@b", "role": "god", "expires_in": 5})
            )),
            ["email", "expires_in", "role"]
        );
        assert_eq!(
            rejected(InvitationAccept::parse(&json!({"token": "meson_abc"}))),
            ["token"]
        );
        let t = new_invitation_token();
        assert!(t.starts_with(INVITATION_PREFIX) && t.len() == INVITATION_PREFIX.len() + 40);
        assert_eq!(
            InvitationAccept::parse(&json!({"token": t}))
                .unwrap()
                .0
                .token,
            t
        );
    }

    #[test]
    fn emails() {
        assert_eq!(parse_email("A.B+c@Ex.io").as_deref(), Some("a.b+c@ex.io"));
        for bad in [
            "", "@x.io", "a@", "a@io", "a b@x.io", "a@x.io.", "a@@x.io", "a@.x",
        ] {
            assert_eq!(parse_email(bad), None, "{bad}");
        }
        assert!(parse_email(&format!("{}@x.io", "a".repeat(250))).is_none());
    }

    #[test]
    fn invitation_status() {
        let now = Utc::now();
        let mut i = Invitation {
            id: InvitationId::new(),
            tenant: TenantId("t".into()),
            email: "a@x.io".into(),
            role: "viewer".into(),
            invited_by: "s".into(),
            created: now,
            expires: now + chrono::Duration::hours(1),
            accepted: None,
            accepted_by: None,
            revoked: None,
            revoked_by: None,
        };
        assert_eq!(i.status(now), InvitationStatus::Pending);
        assert_eq!(
            i.status(now + chrono::Duration::hours(2)),
            InvitationStatus::Expired
        );
        i.accepted = Some(now);
        assert_eq!(
            i.status(now + chrono::Duration::hours(2)),
            InvitationStatus::Accepted
        );
    }
}
