//! Who is calling.
//!
//! Elemento's clients hold no credential: the daemons keep the login. So,
//! bound to loopback, the gateway keeps ONE session for the process
//! (elemento-cli sends nothing after `auth login`). Bound anywhere else it
//! never does: each request carries the cookie `/login` set, or a bearer
//! token. A bearer token or a cookie always wins over the process session.

use crate::error::Detail;
use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, COOKIE};
use base64::Engine;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::RwLock;

/// The session cookie `/login` sets.
pub const COOKIE_NAME: &str = "meson_session";

/// A logged-in caller: a meson API token and what it says about itself.
#[derive(Clone, Debug)]
pub struct Session {
    pub token: String,
    /// The token's subject (`sub`), checked against the login's username.
    pub username: String,
}

/// The claims of a JWT, read without checking its signature: meson checks
/// it on every call; the gateway only reads the subject and roles to show.
pub fn claims(token: &str) -> Option<serde_json::Map<String, Value>> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    match serde_json::from_slice(&bytes).ok()? {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

/// The roles claim (`roles`: a list, or one space-separated string).
pub fn roles(claims: &serde_json::Map<String, Value>) -> Vec<String> {
    match claims.get("roles") {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
        _ => Vec::new(),
    }
}

pub struct Sessions {
    /// Bound to loopback: the process session is allowed.
    loopback: bool,
    process: RwLock<Option<Session>>,
    by_cookie: RwLock<HashMap<String, Session>>,
}

impl Sessions {
    pub fn new(loopback: bool, initial: Option<Session>) -> Sessions {
        Sessions {
            loopback,
            process: RwLock::new(if loopback { initial } else { None }),
            by_cookie: RwLock::new(HashMap::new()),
        }
    }

    pub fn loopback(&self) -> bool {
        self.loopback
    }

    /// The caller's session: a bearer token, else the cookie's session,
    /// else (loopback only) the process session.
    pub fn find(&self, headers: &HeaderMap) -> Option<Session> {
        if let Some(token) = bearer(headers) {
            let username = claims(&token)
                .and_then(|c| c.get("sub").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_default();
            return Some(Session { token, username });
        }
        if let Some(id) = cookie(headers)
            && let Some(s) = read(&self.by_cookie).get(&id)
        {
            return Some(s.clone());
        }
        if self.loopback {
            return read(&self.process).clone();
        }
        None
    }

    pub fn require(&self, headers: &HeaderMap) -> Result<Session, Detail> {
        self.find(headers).ok_or_else(Detail::unauthenticated)
    }

    /// Stores a login; the new cookie's id.
    pub fn login(&self, session: Session) -> String {
        let id = new_id();
        write(&self.by_cookie).insert(id.clone(), session.clone());
        if self.loopback {
            *write(&self.process) = Some(session);
        }
        id
    }

    /// Forgets the caller's cookie session and (loopback) the process session.
    pub fn logout(&self, headers: &HeaderMap) {
        if let Some(id) = cookie(headers) {
            write(&self.by_cookie).remove(&id);
        }
        if self.loopback {
            *write(&self.process) = None;
        }
    }
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// 256 random bits, hex.
fn new_id() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    let v = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_owned())
}

fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE_NAME)
        .map(|(_, v)| v.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn token(sub: &str) -> String {
        let e = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!(
            "{}.{}.sig",
            e.encode(r#"{"alg":"HS256"}"#),
            e.encode(format!(r#"{{"sub":"{sub}","roles":["admin"]}}"#))
        )
    }

    #[test]
    fn process_session_only_on_loopback() {
        let s = Session {
            token: token("a"),
            username: "a".into(),
        };
        let remote = Sessions::new(false, Some(s.clone()));
        assert!(remote.find(&HeaderMap::new()).is_none());
        let id = remote.login(s.clone());
        assert!(
            remote.find(&HeaderMap::new()).is_none(),
            "no process session"
        );
        let mut h = HeaderMap::new();
        h.insert(
            COOKIE,
            HeaderValue::from_str(&format!("x=1; {COOKIE_NAME}={id}")).unwrap(),
        );
        assert_eq!(remote.find(&h).unwrap().username, "a");
        remote.logout(&h);
        assert!(remote.find(&h).is_none());

        let local = Sessions::new(true, None);
        assert!(local.find(&HeaderMap::new()).is_none());
        local.login(s);
        assert_eq!(local.find(&HeaderMap::new()).unwrap().username, "a");
        let mut b = HeaderMap::new();
        b.insert(
            AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {}", token("b"))).unwrap(),
        );
        assert_eq!(local.find(&b).unwrap().username, "b", "a bearer token wins");
        local.logout(&HeaderMap::new());
        assert!(local.find(&HeaderMap::new()).is_none());
    }

    #[test]
    fn reads_claims() {
        let c = claims(&token("alice")).unwrap();
        assert_eq!(c["sub"], "alice");
        assert_eq!(roles(&c), vec!["admin"]);
        assert!(claims("not-a-jwt").is_none());
    }
}
