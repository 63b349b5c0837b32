//! How bearer tokens are verified: the configuration and its checks.

use jsonwebtoken::Algorithm;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::JwksError;

pub const AUDIENCE: &str = "meson";

/// Shortest HS256 secret accepted by [`Auth::new`] (RFC 7518 §3.2: at least
/// the hash's size).
pub const MIN_SECRET_LEN: usize = 32;

const MAX_LEEWAY: Duration = Duration::from_secs(3600);

/// Where the verification keys come from.
#[derive(Clone)]
pub enum KeySource {
    /// The HS256 shared secret (at least [`MIN_SECRET_LEN`] bytes).
    Secret(Vec<u8>),
    /// A JWK set in a file, re-read every `refresh`.
    JwksFile(PathBuf),
    /// A JWK set served over http(s), re-fetched every `refresh`.
    JwksUrl(String),
}

impl KeySource {
    /// Where the keys come from, fit for logs and errors: no secret, and a
    /// URL without its credentials or query string.
    pub fn describe(&self) -> String {
        match self {
            KeySource::Secret(s) => format!("the HS256 secret ({} bytes)", s.len()),
            KeySource::JwksFile(p) => format!("JWKS file {}", p.display()),
            KeySource::JwksUrl(u) => format!("JWKS URL {}", redact_url(u)),
        }
    }
}

impl fmt::Debug for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySource::Secret(s) => write!(f, "Secret(<{} bytes redacted>)", s.len()),
            KeySource::JwksFile(p) => f.debug_tuple("JwksFile").field(p).finish(),
            KeySource::JwksUrl(u) => f.debug_tuple("JwksUrl").field(&redact_url(u)).finish(),
        }
    }
}

/// Drops user info and the query string, which may carry credentials.
pub(super) fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let had_query = u.query().is_some();
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            if had_query {
                format!("{u}?<redacted>")
            } else {
                u.to_string()
            }
        }
        Err(_) => "<unparsable URL>".to_owned(),
    }
}

/// How bearer tokens are verified.
#[derive(Clone, Debug)]
pub struct AuthConfig {
    /// The only algorithm accepted: HS256, RS256, ES256 or EdDSA.
    pub algorithm: Algorithm,
    pub keys: KeySource,
    /// Required `iss`.
    pub issuer: String,
    /// Required in `aud` (a string, or an array containing it).
    pub audience: String,
    /// Clock skew allowed on `exp` and `nbf` (whole seconds).
    pub leeway: Duration,
    /// How often [`Auth::spawn_refresh`] re-reads a JWKS.
    pub refresh: Duration,
    /// The claim holding the tenant id.
    pub tenant_claim: String,
    /// The claim holding the roles: an array of strings.
    pub roles_claim: String,
}

impl AuthConfig {
    /// A configuration with the defaults: audience [`AUDIENCE`], 30 s leeway,
    /// JWKS refreshed every 5 minutes, claims `tenant` and `roles`.
    pub fn new(algorithm: Algorithm, keys: KeySource, issuer: impl Into<String>) -> Self {
        AuthConfig {
            algorithm,
            keys,
            issuer: issuer.into(),
            audience: AUDIENCE.to_owned(),
            leeway: Duration::from_secs(30),
            refresh: Duration::from_secs(300),
            tenant_claim: "tenant".to_owned(),
            roles_claim: "roles".to_owned(),
        }
    }

    /// HS256 with a shared secret, and the defaults of [`AuthConfig::new`].
    pub fn hs256(secret: &[u8], issuer: &str) -> Self {
        Self::new(Algorithm::HS256, KeySource::Secret(secret.to_vec()), issuer)
    }

    pub(super) fn check(&self) -> Result<(), AuthConfigError> {
        use Algorithm::*;
        if !matches!(self.algorithm, HS256 | RS256 | ES256 | EdDSA) {
            return Err(AuthConfigError::UnsupportedAlgorithm(self.algorithm));
        }
        match (&self.keys, self.algorithm) {
            (KeySource::Secret(s), HS256) if s.len() < MIN_SECRET_LEN => {
                return Err(AuthConfigError::SecretTooShort { len: s.len() });
            }
            (KeySource::Secret(_), HS256) => {}
            (_, HS256) => {
                return Err(AuthConfigError::KeySourceMismatch {
                    algorithm: HS256,
                    needs: "a shared secret",
                });
            }
            (KeySource::Secret(_), algorithm) => {
                return Err(AuthConfigError::KeySourceMismatch {
                    algorithm,
                    needs: "a JWKS file or URL",
                });
            }
            (KeySource::JwksUrl(url), _) => {
                let ok = reqwest::Url::parse(url).is_ok_and(|u| {
                    matches!(u.scheme(), "http" | "https") && u.host_str().is_some()
                });
                if !ok {
                    return Err(AuthConfigError::Invalid(format!(
                        "the JWKS URL {} is not an http(s) URL",
                        redact_url(url)
                    )));
                }
            }
            (KeySource::JwksFile(_), _) => {}
        }
        for (name, value) in [
            ("issuer", &self.issuer),
            ("audience", &self.audience),
            ("tenant claim", &self.tenant_claim),
            ("roles claim", &self.roles_claim),
        ] {
            if value.is_empty() {
                return Err(AuthConfigError::Invalid(format!("the {name} is empty")));
            }
        }
        if self.tenant_claim == self.roles_claim {
            return Err(AuthConfigError::Invalid(
                "the tenant and roles claims must differ".to_owned(),
            ));
        }
        // Beyond clock skew, a leeway only stretches tokens' lifetimes.
        if self.leeway > MAX_LEEWAY {
            return Err(AuthConfigError::Invalid(format!(
                "the leeway is over {}s",
                MAX_LEEWAY.as_secs()
            )));
        }
        if self.refresh.is_zero() {
            return Err(AuthConfigError::Invalid(
                "the JWKS refresh period is zero".to_owned(),
            ));
        }
        Ok(())
    }
}

/// Why an [`AuthConfig`] cannot be used, or a key set cannot be (re)loaded.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    #[error("JWT algorithm {0:?} is not accepted: use HS256, RS256, ES256 or EdDSA")]
    UnsupportedAlgorithm(Algorithm),
    #[error("JWT algorithm {algorithm:?} needs {needs}")]
    KeySourceMismatch {
        algorithm: Algorithm,
        needs: &'static str,
    },
    #[error("the HS256 secret is {len} bytes long; it needs at least {MIN_SECRET_LEN}")]
    SecretTooShort { len: usize },
    #[error("invalid auth configuration: {0}")]
    Invalid(String),
    #[error("cannot load the keys from {from}")]
    Jwks {
        from: String,
        #[source]
        source: JwksError,
    },
}
