//! JWK sets: reading one from a file or a URL, and the keys in it usable
//! with the pinned algorithm.

use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, KeyOperations, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

use super::{AuthConfig, KeySource};

/// Timeout of one JWKS request.
const JWKS_FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// A key set is a few kilobytes; anything far larger is not one.
const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// What went wrong reading a JWK set.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    #[error("cannot read the file")]
    Read(#[source] std::io::Error),
    #[error("cannot fetch it")]
    Fetch(#[source] reqwest::Error),
    #[error("the server answered HTTP {0}")]
    Status(u16),
    #[error("it is larger than {MAX_JWKS_BYTES} bytes")]
    TooLarge,
    #[error("it is not a JWK set")]
    Parse(#[source] serde_json::Error),
    #[error("it has no key usable with {0:?}")]
    NoUsableKey(Algorithm),
}

/// The verification keys in force.
pub(super) struct KeySet {
    by_kid: HashMap<String, DecodingKey>,
    /// Keys without a `kid`: usable only when they are the whole set.
    unnamed: Vec<DecodingKey>,
}

pub(super) enum Lookup<'a> {
    Found(&'a DecodingKey),
    UnknownKid,
    /// The token has no `kid` and the set has more than one key.
    Ambiguous,
}

impl KeySet {
    pub(super) fn secret(secret: &[u8]) -> Self {
        KeySet {
            by_kid: HashMap::new(),
            unnamed: vec![DecodingKey::from_secret(secret)],
        }
    }

    pub(super) fn len(&self) -> usize {
        self.by_kid.len() + self.unnamed.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(super) fn lookup(&self, kid: Option<&str>) -> Lookup<'_> {
        let only = match (
            self.len(),
            self.unnamed.first(),
            self.by_kid.values().next(),
        ) {
            (1, Some(k), _) | (1, None, Some(k)) => Some(k),
            _ => None,
        };
        match kid {
            Some(kid) => match self.by_kid.get(kid) {
                Some(k) => Lookup::Found(k),
                // A lone key without a kid (a shared secret, a one-key JWKS)
                // is the key whatever kid the issuer chose to put in its tokens.
                None => match (only, self.unnamed.len()) {
                    (Some(k), 1) => Lookup::Found(k),
                    _ => Lookup::UnknownKid,
                },
            },
            None => only.map_or(Lookup::Ambiguous, Lookup::Found),
        }
    }

    pub(super) fn kids(&self) -> Vec<&str> {
        let mut kids: Vec<&str> = self.by_kid.keys().map(String::as_str).collect();
        kids.sort_unstable();
        kids
    }

    /// The keys of a JWK set usable with `alg`; the others are skipped (and
    /// logged at debug level): a provider's set often also holds encryption
    /// keys or keys for other algorithms.
    fn from_jwks(body: &[u8], alg: Algorithm) -> Result<Self, JwksError> {
        // Parsed key by key, not as a `JwkSet`, so one key of a type this
        // crate cannot represent does not make the whole set unreadable.
        #[derive(Deserialize)]
        struct RawSet {
            keys: Vec<Value>,
        }
        let raw: RawSet = serde_json::from_slice(body).map_err(JwksError::Parse)?;
        let mut set = KeySet {
            by_kid: HashMap::new(),
            unnamed: Vec::new(),
        };
        for value in raw.keys {
            let jwk = match serde_json::from_value::<Jwk>(value) {
                Ok(jwk) => jwk,
                Err(e) => {
                    tracing::debug!(reason = %e, "skipping an unreadable JWK");
                    continue;
                }
            };
            let kid = jwk.common.key_id.clone();
            let key = match usable_key(&jwk, alg) {
                Ok(key) => key,
                Err(why) => {
                    tracing::debug!(?kid, why, "skipping a JWK");
                    continue;
                }
            };
            match kid {
                Some(kid) if set.by_kid.contains_key(&kid) => {
                    tracing::warn!(kid, "the JWKS has this kid twice; keeping the first");
                }
                Some(kid) => {
                    set.by_kid.insert(kid, key);
                }
                None => set.unnamed.push(key),
            }
        }
        if set.is_empty() {
            return Err(JwksError::NoUsableKey(alg));
        }
        Ok(set)
    }
}

/// The decoding key of `jwk` if it may verify `alg` signatures.
fn usable_key(jwk: &Jwk, alg: Algorithm) -> Result<DecodingKey, &'static str> {
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|u| *u != PublicKeyUse::Signature)
    {
        return Err("its use is not sig");
    }
    if jwk
        .common
        .key_operations
        .as_ref()
        .is_some_and(|ops| !ops.contains(&KeyOperations::Verify))
    {
        return Err("its key_ops lack verify");
    }
    let (key_alg, fits) = match alg {
        Algorithm::RS256 => (
            KeyAlgorithm::RS256,
            matches!(jwk.algorithm, AlgorithmParameters::RSA(_)),
        ),
        Algorithm::ES256 => (
            KeyAlgorithm::ES256,
            matches!(&jwk.algorithm, AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256),
        ),
        Algorithm::EdDSA => (
            KeyAlgorithm::EdDSA,
            matches!(&jwk.algorithm, AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519),
        ),
        // Symmetric keys never come from a JWKS here (see `AuthConfig::check`).
        _ => return Err("the pinned algorithm does not take JWKS keys"),
    };
    if jwk.common.key_algorithm.is_some_and(|a| a != key_alg) {
        return Err("its alg is not the pinned algorithm");
    }
    if !fits {
        return Err("its key type or curve does not fit the pinned algorithm");
    }
    DecodingKey::from_jwk(jwk).map_err(|_| "its key material is invalid")
}

/// Reads and filters the key set `cfg` names.
pub(super) async fn load(
    cfg: &AuthConfig,
    http: Option<&reqwest::Client>,
) -> Result<KeySet, JwksError> {
    let body = match &cfg.keys {
        KeySource::Secret(s) => return Ok(KeySet::secret(s)),
        KeySource::JwksFile(path) => {
            let body = tokio::fs::read(path).await.map_err(JwksError::Read)?;
            if body.len() > MAX_JWKS_BYTES {
                return Err(JwksError::TooLarge);
            }
            body
        }
        KeySource::JwksUrl(url) => match http {
            Some(client) => fetch(client, url).await?,
            None => fetch(&http_client().map_err(JwksError::Fetch)?, url).await?,
        },
    };
    KeySet::from_jwks(&body, cfg.algorithm)
}

pub(super) fn http_client() -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .timeout(JWKS_FETCH_TIMEOUT)
        .user_agent(concat!("meson/", env!("CARGO_PKG_VERSION")))
        .build()
}

async fn fetch(client: &reqwest::Client, url: &str) -> Result<Vec<u8>, JwksError> {
    // `without_url`: the URL may carry credentials, and errors get logged.
    let mut resp = client
        .get(url)
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| JwksError::Fetch(e.without_url()))?;
    if !resp.status().is_success() {
        return Err(JwksError::Status(resp.status().as_u16()));
    }
    if resp
        .content_length()
        .is_some_and(|n| n > MAX_JWKS_BYTES as u64)
    {
        return Err(JwksError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| JwksError::Fetch(e.without_url()))?
    {
        if body.len() + chunk.len() > MAX_JWKS_BYTES {
            return Err(JwksError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
