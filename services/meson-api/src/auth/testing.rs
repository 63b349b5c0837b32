//! Minting tokens with keys the caller holds (tests, including other crates'
//! end-to-end tests; `services/meson-api/tests/fixtures/` has RS256, ES256
//! and EdDSA test keys and their JWKs).

use super::AUDIENCE;
use jsonwebtoken::{Algorithm, EncodingKey, Header};

/// Signs `claims` with `key` under `alg`, with `kid` in the header.
///
/// # Panics
///
/// If `key` cannot sign `alg` (a test bug, not a verification outcome).
pub fn sign(
    alg: Algorithm,
    key: &EncodingKey,
    kid: Option<&str>,
    claims: &serde_json::Value,
) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    match jsonwebtoken::encode(&header, claims, key) {
        Ok(token) => token,
        Err(e) => panic!("testing::sign: cannot sign {alg:?} with this key: {e}"),
    }
}

/// The claims of a valid meson token: `iss`, `aud` = [`AUDIENCE`], `sub`,
/// `tenant`, `roles`, `iat` now and `exp` after `ttl`.
pub fn claims(
    issuer: &str,
    tenant: &str,
    subject: &str,
    roles: &[&str],
    ttl: chrono::Duration,
) -> serde_json::Value {
    let now = chrono::Utc::now().timestamp();
    serde_json::json!({
        "iss": issuer,
        "aud": AUDIENCE,
        "sub": subject,
        "tenant": tenant,
        "roles": roles,
        "iat": now,
        "exp": now + ttl.num_seconds(),
    })
}
