//! Bearer JWT authentication: who is calling, for which tenant, with which role.
//!
//! One algorithm is pinned by configuration (HS256 with a shared secret, or
//! RS256 / ES256 / EdDSA with a JWKS read from a file or a URL); a token that
//! names any other algorithm is refused before a key is even looked up, which
//! is what defeats `alg: none` and the HS256-with-the-public-key confusion.
//! Every refusal is the same `unauthorized` to the caller; the reason is
//! logged at info level (never the token).

use crate::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, KeyOperations, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use meson_core::{Error, TenantId};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads its tenant's resources.
    Viewer,
    /// Also creates, changes and deletes them.
    Editor,
    /// A tenant's own administrator: an editor who also reads its tenant's
    /// audit log. Never reaches another tenant.
    Owner,
    /// Elemento's operator, across tenants: quotas, targets, every tenant's
    /// audit log. Never for a tenant's users.
    Admin,
}

impl Role {
    /// The name used in tokens' roles claim.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Editor => "editor",
            Role::Owner => "owner",
            Role::Admin => "admin",
        }
    }

    /// Case-insensitive; `None` for a name meson does not know.
    fn from_claim(name: &str) -> Option<Role> {
        [Role::Viewer, Role::Editor, Role::Owner, Role::Admin]
            .into_iter()
            .find(|r| r.as_str().eq_ignore_ascii_case(name))
    }
}

/// The authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub tenant: TenantId,
    pub subject: String,
    pub role: Role,
}

impl Principal {
    /// Fails with `forbidden` unless the caller has at least `role`.
    pub fn require(&self, role: Role) -> Result<(), Error> {
        if self.role >= role {
            Ok(())
        } else {
            Err(Error::Forbidden {
                message: format!("this needs the {role:?} role").to_lowercase(),
            })
        }
    }
}

pub const AUDIENCE: &str = "meson";

/// Shortest HS256 secret accepted by [`Auth::new`] (RFC 7518 §3.2: at least
/// the hash's size).
pub const MIN_SECRET_LEN: usize = 32;

/// At most one refetch per this period is triggered by tokens naming an
/// unknown `kid`, so a flood of junk kids cannot hammer the identity provider.
pub const UNKNOWN_KID_REFETCH_INTERVAL: Duration = Duration::from_secs(30);

/// Timeout of one JWKS request.
const JWKS_FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// A key set is a few kilobytes; anything far larger is not one.
const MAX_JWKS_BYTES: usize = 1024 * 1024;
/// Real tokens are well under this; parsing bigger ones is only work for an attacker.
const MAX_TOKEN_BYTES: usize = 16 * 1024;
const MAX_TENANT_LEN: usize = 128;
const MAX_LEEWAY: Duration = Duration::from_secs(3600);
const MAX_SUBJECT_LEN: usize = 255;

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
fn redact_url(url: &str) -> String {
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

    fn check(&self) -> Result<(), AuthConfigError> {
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
struct KeySet {
    by_kid: HashMap<String, DecodingKey>,
    /// Keys without a `kid`: usable only when they are the whole set.
    unnamed: Vec<DecodingKey>,
}

enum Lookup<'a> {
    Found(&'a DecodingKey),
    UnknownKid,
    /// The token has no `kid` and the set has more than one key.
    Ambiguous,
}

impl KeySet {
    fn secret(secret: &[u8]) -> Self {
        KeySet {
            by_kid: HashMap::new(),
            unnamed: vec![DecodingKey::from_secret(secret)],
        }
    }

    fn len(&self) -> usize {
        self.by_kid.len() + self.unnamed.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lookup(&self, kid: Option<&str>) -> Lookup<'_> {
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

    fn kids(&self) -> Vec<&str> {
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

/// Verifies bearer tokens (and, with HS256, issues them for dev mode and
/// tests). Cheap to clone.
#[derive(Clone)]
pub struct Auth {
    inner: Arc<AuthInner>,
}

struct AuthInner {
    cfg: AuthConfig,
    validation: Validation,
    /// Only for HS256: asymmetric keys are held by the identity provider.
    encoding: Option<EncodingKey>,
    keys: RwLock<Arc<KeySet>>,
    /// For a JWKS URL.
    http: Option<reqwest::Client>,
    /// When a token's unknown kid last triggered a refetch. Held across the
    /// refetch, so concurrent misses wait for it instead of starting their own.
    last_miss_refetch: tokio::sync::Mutex<Option<Instant>>,
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cfg = &self.inner.cfg;
        let keys = self.key_set();
        f.debug_struct("Auth")
            .field("algorithm", &cfg.algorithm)
            .field("keys", &cfg.keys)
            .field("issuer", &cfg.issuer)
            .field("audience", &cfg.audience)
            .field("kids", &keys.kids())
            .field("key_count", &keys.len())
            .finish_non_exhaustive()
    }
}

impl Auth {
    /// Checks `cfg` and loads its keys once (a JWKS that cannot be read, does
    /// not parse, or has no key usable with the pinned algorithm is an error).
    pub async fn new(cfg: AuthConfig) -> Result<Self, AuthConfigError> {
        cfg.check()?;
        let http = match &cfg.keys {
            KeySource::JwksUrl(_) => Some(http_client().map_err(|e| AuthConfigError::Jwks {
                from: cfg.keys.describe(),
                source: JwksError::Fetch(e),
            })?),
            _ => None,
        };
        let keys = load(&cfg, http.as_ref())
            .await
            .map_err(|source| AuthConfigError::Jwks {
                from: cfg.keys.describe(),
                source,
            })?;
        tracing::info!(
            algorithm = ?cfg.algorithm,
            keys = %cfg.keys.describe(),
            kids = ?keys.kids(),
            "bearer token verification ready"
        );
        Ok(Self::assemble(cfg, keys, http))
    }

    /// HS256 with a shared secret and the default settings (dev mode, tests).
    /// Infallible, so it cannot refuse a short secret: it only warns. Prefer
    /// [`Auth::new`] for anything configured by an operator.
    pub fn hs256(secret: &[u8], issuer: &str) -> Self {
        if secret.len() < MIN_SECRET_LEN {
            tracing::warn!(
                len = secret.len(),
                "the HS256 secret is shorter than {MIN_SECRET_LEN} bytes"
            );
        }
        let cfg = AuthConfig::hs256(secret, issuer);
        Self::assemble(cfg, KeySet::secret(secret), None)
    }

    fn assemble(cfg: AuthConfig, keys: KeySet, http: Option<reqwest::Client>) -> Self {
        let mut validation = Validation::new(cfg.algorithm);
        validation.set_issuer(&[&cfg.issuer]);
        validation.set_audience(&[&cfg.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.leeway = cfg.leeway.as_secs();
        let encoding = match &cfg.keys {
            KeySource::Secret(s) if cfg.algorithm == Algorithm::HS256 => {
                Some(EncodingKey::from_secret(s))
            }
            _ => None,
        };
        Auth {
            inner: Arc::new(AuthInner {
                cfg,
                validation,
                encoding,
                keys: RwLock::new(Arc::new(keys)),
                http,
                last_miss_refetch: tokio::sync::Mutex::new(None),
            }),
        }
    }

    pub fn config(&self) -> &AuthConfig {
        &self.inner.cfg
    }

    /// Issues a token (dev mode and tests). Only an HS256 verifier holds a
    /// signing key: any other returns an empty string, which nothing accepts.
    pub fn issue(&self, tenant: &str, subject: &str, role: Role, ttl: chrono::Duration) -> String {
        let Some(encoding) = &self.inner.encoding else {
            tracing::warn!("only an HS256 verifier can issue tokens");
            return String::new();
        };
        let cfg = &self.inner.cfg;
        let now = chrono::Utc::now().timestamp();
        let mut claims = Map::new();
        claims.insert("sub".to_owned(), subject.into());
        claims.insert(cfg.tenant_claim.clone(), tenant.into());
        claims.insert(cfg.roles_claim.clone(), vec![role.as_str()].into());
        claims.insert("iss".to_owned(), cfg.issuer.clone().into());
        claims.insert("aud".to_owned(), cfg.audience.clone().into());
        claims.insert("exp".to_owned(), (now + ttl.num_seconds()).into());
        claims.insert("iat".to_owned(), now.into());
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, encoding).unwrap_or_default()
    }

    /// Verifies a bearer token. Every refusal is `Error::Unauthorized`; why
    /// is logged, never returned.
    pub async fn verify(&self, token: &str) -> Result<Principal, Error> {
        self.check(token).await.map_err(|reason| {
            tracing::info!(%reason, "rejected bearer token");
            Error::Unauthorized
        })
    }

    async fn check(&self, token: &str) -> Result<Principal, String> {
        let cfg = &self.inner.cfg;
        if token.len() > MAX_TOKEN_BYTES {
            return Err(format!("token longer than {MAX_TOKEN_BYTES} bytes"));
        }
        // `alg: none` and algorithms jsonwebtoken does not know fail here.
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| format!("unreadable header: {e}"))?;
        if header.alg != cfg.algorithm {
            return Err(format!(
                "algorithm {:?}, only {:?} is accepted",
                header.alg, cfg.algorithm
            ));
        }
        // meson trusts only the keys it was configured with: a token that
        // names where to find its own key is refused whatever it names.
        for (name, present) in [
            ("jku", header.jku.is_some()),
            ("x5u", header.x5u.is_some()),
            ("jwk", header.jwk.is_some()),
            ("x5c", header.x5c.is_some()),
        ] {
            if present {
                return Err(format!(
                    "the header names a key of its own ({name}); only the configured keys count"
                ));
            }
        }
        let kid = header.kid.as_deref();
        if let (KeySource::Secret(_), Some(kid)) = (&cfg.keys, kid) {
            return Err(format!("unknown kid {kid:?}: the HS256 secret has no kid"));
        }
        let keys = self.key_for(kid).await?;
        let key = match keys.lookup(kid) {
            Lookup::Found(key) => key,
            Lookup::UnknownKid => return Err(format!("unknown kid {kid:?}")),
            Lookup::Ambiguous => {
                return Err(format!("no kid, and the key set has {} keys", keys.len()));
            }
        };
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, key, &self.inner.validation)
            .map_err(|e| format!("{e} (kid {kid:?})"))?;
        self.principal(&data.claims)
    }

    /// The key set to look `kid` up in: the current one, or, for a kid it
    /// does not know, the one after a rate-limited refetch of the JWKS.
    async fn key_for(&self, kid: Option<&str>) -> Result<Arc<KeySet>, String> {
        let keys = self.key_set();
        if !matches!(keys.lookup(kid), Lookup::UnknownKid)
            || matches!(self.inner.cfg.keys, KeySource::Secret(_))
        {
            return Ok(keys);
        }
        let mut last = self.inner.last_miss_refetch.lock().await;
        // Another request may have refetched while this one waited.
        let keys = self.key_set();
        if !matches!(keys.lookup(kid), Lookup::UnknownKid) {
            return Ok(keys);
        }
        if last.is_some_and(|at| at.elapsed() < UNKNOWN_KID_REFETCH_INTERVAL) {
            return Err(format!(
                "unknown kid {kid:?} (the JWKS was refetched less than {}s ago)",
                UNKNOWN_KID_REFETCH_INTERVAL.as_secs()
            ));
        }
        *last = Some(Instant::now());
        tracing::info!(?kid, "unknown kid: refetching the JWKS");
        if let Err(e) = self.refresh().await {
            tracing::warn!(error = %DisplayChain(&e), "JWKS refetch failed; keeping the old keys");
        }
        Ok(self.key_set())
    }

    fn key_set(&self) -> Arc<KeySet> {
        // A poisoned lock still holds a complete key set: swaps are one assignment.
        match self.inner.keys.read() {
            Ok(keys) => Arc::clone(&keys),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Re-reads the JWKS now. On failure (unreadable, unparsable, no usable
    /// key) the keys in force are kept and the error returned. Nothing to do
    /// for a shared secret.
    pub async fn refresh(&self) -> Result<(), AuthConfigError> {
        let cfg = &self.inner.cfg;
        if matches!(cfg.keys, KeySource::Secret(_)) {
            return Ok(());
        }
        let fresh = load(cfg, self.inner.http.as_ref())
            .await
            .map_err(|source| AuthConfigError::Jwks {
                from: cfg.keys.describe(),
                source,
            })?;
        let fresh = Arc::new(fresh);
        let old = {
            let mut guard = match self.inner.keys.write() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            std::mem::replace(&mut *guard, Arc::clone(&fresh))
        };
        let (before, after) = (old.kids(), fresh.kids());
        if before == after {
            tracing::debug!(kids = ?after, "JWKS refreshed, unchanged");
        } else {
            tracing::info!(before = ?before, after = ?after, "JWKS refreshed: key ids changed");
        }
        Ok(())
    }

    /// Re-reads the JWKS every `refresh` period until `stop` turns true (or
    /// its sender is dropped, or every `Auth` clone is). A failed refresh
    /// keeps the old keys and logs a warning. Returns at once for a secret.
    pub fn spawn_refresh(
        &self,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        let weak: Weak<AuthInner> = Arc::downgrade(&self.inner);
        let period = self.inner.cfg.refresh;
        let secret = matches!(self.inner.cfg.keys, KeySource::Secret(_));
        tokio::spawn(async move {
            if secret {
                return;
            }
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // The first tick is immediate, and the keys were just loaded.
            tick.tick().await;
            loop {
                if *stop.borrow_and_update() {
                    return;
                }
                tokio::select! {
                    _ = tick.tick() => {}
                    changed = stop.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        continue;
                    }
                }
                let Some(inner) = weak.upgrade() else { return };
                let auth = Auth { inner };
                if let Err(e) = auth.refresh().await {
                    tracing::warn!(error = %DisplayChain(&e), "JWKS refresh failed; keeping the old keys");
                }
            }
        })
    }

    /// The principal named by verified claims, or why there is none.
    fn principal(&self, claims: &Map<String, Value>) -> Result<Principal, String> {
        let cfg = &self.inner.cfg;
        // jsonwebtoken accepts an array of issuers; a token has one.
        if !matches!(claims.get("iss"), Some(Value::String(_))) {
            return Err("iss is not a string".to_owned());
        }
        // jsonwebtoken skips an `nbf` it cannot read as a number; refuse it.
        if claims.get("nbf").is_some_and(|v| !v.is_number()) {
            return Err("nbf is not a number".to_owned());
        }
        let subject = match claims.get("sub") {
            Some(Value::String(s))
                if !s.is_empty()
                    && s.chars().count() <= MAX_SUBJECT_LEN
                    && !s.chars().any(char::is_control) =>
            {
                s.clone()
            }
            _ => {
                return Err(format!(
                    "sub is not a string of 1 to {MAX_SUBJECT_LEN} printable characters"
                ));
            }
        };
        let tenant = match claims.get(&cfg.tenant_claim) {
            Some(Value::String(t)) if valid_tenant(t) => t.clone(),
            Some(_) => {
                return Err(format!(
                    "claim {:?} is not a valid tenant id",
                    cfg.tenant_claim
                ));
            }
            None => return Err(format!("claim {:?} is missing", cfg.tenant_claim)),
        };
        let names: Vec<&str> = match claims.get(&cfg.roles_claim) {
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
            Some(_) => {
                return Err(format!(
                    "claim {:?} is not a list of roles",
                    cfg.roles_claim
                ));
            }
            None => return Err(format!("claim {:?} is missing", cfg.roles_claim)),
        };
        let role = names
            .iter()
            .filter_map(|n| Role::from_claim(n))
            .max()
            .ok_or_else(|| format!("claim {:?} names no known role", cfg.roles_claim))?;
        Ok(Principal {
            tenant: TenantId(tenant),
            subject,
            role,
        })
    }
}

/// 1 to 128 characters from `[A-Za-z0-9._:@-]`: the tenant id ends up in a
/// PostgreSQL setting, and `*` must never be a tenant.
fn valid_tenant(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= MAX_TENANT_LEN
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'@' | b'-'))
}

/// Reads and filters the key set `cfg` names.
async fn load(cfg: &AuthConfig, http: Option<&reqwest::Client>) -> Result<KeySet, JwksError> {
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

fn http_client() -> Result<reqwest::Client, reqwest::Error> {
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

/// An error and its causes on one line, for logs.
struct DisplayChain<'a>(&'a (dyn std::error::Error + 'static));

impl fmt::Display for DisplayChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(e) = source {
            write!(f, ": {e}")?;
            source = e.source();
        }
        Ok(())
    }
}

/// The caller, as the guard (`http::guard`) authenticated it before the
/// handler runs. A handler reached without the guard refuses.
impl<S: Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<Principal>().cloned().ok_or_else(|| {
            tracing::error!(path = %parts.uri.path(),
                "refused: a handler that needs a caller was reached without the guard");
            ApiError(Error::Unauthorized)
        })
    }
}

/// Minting tokens with keys the caller holds (tests, including other crates'
/// end-to-end tests; `services/meson-api/tests/fixtures/` has RS256, ES256
/// and EdDSA test keys and their JWKs).
pub mod testing {
    use super::{AUDIENCE, Algorithm, EncodingKey, Header};

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
}

#[cfg(test)]
mod tests {
    use super::testing::{claims, sign};
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD as B64};
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const ISS: &str = "https://idp.example.test/realms/meson";
    const SECRET: &[u8] = b"an-hs256-test-secret-of-32-bytes";
    const OTHER_SECRET: &[u8] = b"another-hs256-secret-of-32-bytes";
    const RSA_KEY: &str = include_str!("../tests/fixtures/rsa-test-key.pem");
    const RSA_PUB: &str = include_str!("../tests/fixtures/rsa-test-pub.pem");
    const RSA_JWK: &str = include_str!("../tests/fixtures/rsa-test-jwk.json");
    const EC_KEY: &str = include_str!("../tests/fixtures/ec-p256-test-key.pem");
    const EC_PUB: &str = include_str!("../tests/fixtures/ec-p256-test-pub.pem");
    const EC_JWK: &str = include_str!("../tests/fixtures/ec-p256-test-jwk.json");
    const ED_KEY: &str = include_str!("../tests/fixtures/ed25519-test-key.pem");
    const ED_PUB: &str = include_str!("../tests/fixtures/ed25519-test-pub.pem");
    const ED_JWK: &str = include_str!("../tests/fixtures/ed25519-test-jwk.json");
    /// The three public JWKs above in one set: each pinned algorithm must
    /// pick its own key out of it.
    const JWKS_ALL: &str = include_str!("../tests/fixtures/test-jwks.json");

    const ALGS: [Algorithm; 4] = [
        Algorithm::HS256,
        Algorithm::RS256,
        Algorithm::ES256,
        Algorithm::EdDSA,
    ];

    fn now() -> i64 {
        chrono::Utc::now().timestamp()
    }

    fn good() -> Value {
        claims(
            ISS,
            "acme",
            "alice",
            &["editor"],
            chrono::Duration::minutes(5),
        )
    }

    fn with(mut c: Value, key: &str, v: Value) -> Value {
        c[key] = v;
        c
    }

    fn without(mut c: Value, key: &str) -> Value {
        c.as_object_mut().unwrap().remove(key);
        c
    }

    /// A token assembled by hand: any header, any signature.
    fn raw_token(header: &Value, claims: &Value, signature: &str) -> String {
        format!(
            "{}.{}.{signature}",
            B64.encode(header.to_string()),
            B64.encode(claims.to_string())
        )
    }

    fn jwk(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    fn jwks(keys: &[Value]) -> String {
        json!({ "keys": keys }).to_string()
    }

    fn pem_der(pem: &str) -> Vec<u8> {
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        STANDARD.decode(body).unwrap()
    }

    /// A fresh key pair (rcgen makes ECDSA P-256 and Ed25519, not RSA).
    fn fresh_key(alg: Algorithm, kid: &str) -> (EncodingKey, Value) {
        match alg {
            Algorithm::ES256 => {
                let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
                let raw = kp.public_key_raw(); // 0x04 || x || y
                let key = EncodingKey::from_ec_pem(kp.serialize_pem().as_bytes()).unwrap();
                let jwk = json!({"kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256",
                    "kid": kid, "x": B64.encode(&raw[1..33]), "y": B64.encode(&raw[33..65])});
                (key, jwk)
            }
            Algorithm::EdDSA => {
                let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
                let key = EncodingKey::from_ed_pem(kp.serialize_pem().as_bytes()).unwrap();
                let jwk = json!({"kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA",
                    "kid": kid, "x": B64.encode(kp.public_key_raw())});
                (key, jwk)
            }
            other => panic!("no fresh keys for {other:?}"),
        }
    }

    fn fixture_key(alg: Algorithm) -> EncodingKey {
        match alg {
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => {
                EncodingKey::from_secret(SECRET)
            }
            Algorithm::RS256 | Algorithm::RS384 | Algorithm::RS512 | Algorithm::PS256 => {
                EncodingKey::from_rsa_pem(RSA_KEY.as_bytes()).unwrap()
            }
            Algorithm::ES256 => EncodingKey::from_ec_pem(EC_KEY.as_bytes()).unwrap(),
            Algorithm::EdDSA => EncodingKey::from_ed_pem(ED_KEY.as_bytes()).unwrap(),
            other => panic!("no fixture key for {other:?}"),
        }
    }

    fn fixture_kid(alg: Algorithm) -> Option<&'static str> {
        match alg {
            Algorithm::RS256 => Some("rsa-test"),
            Algorithm::ES256 => Some("ec-test"),
            Algorithm::EdDSA => Some("ed25519-test"),
            _ => None,
        }
    }

    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Self {
            let dir = std::env::temp_dir().join(format!("meson-auth-{}", uuid::Uuid::new_v4()));
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        fn write(&self, name: &str, contents: &str) -> PathBuf {
            let path = self.0.join(name);
            std::fs::write(&path, contents).unwrap();
            path
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// One pinned algorithm: its verifier and the key that signs for it.
    struct Case {
        alg: Algorithm,
        auth: Auth,
        key: EncodingKey,
        kid: Option<&'static str>,
        _dir: Option<TempDir>,
    }

    impl Case {
        fn token(&self, claims: &Value) -> String {
            sign(self.alg, &self.key, self.kid, claims)
        }

        async fn accepts(&self, token: &str, why: &str) -> Principal {
            match self.auth.verify(token).await {
                Ok(p) => p,
                Err(e) => panic!("{:?}: {why}: refused ({e})", self.alg),
            }
        }

        async fn refuses(&self, token: &str, why: &str) {
            let r = self.auth.verify(token).await;
            assert!(
                matches!(r, Err(Error::Unauthorized)),
                "{:?}: {why}: got {r:?}",
                self.alg
            );
        }
    }

    async fn jwks_file_auth(
        cfg: impl FnOnce(PathBuf) -> AuthConfig,
        jwks: &str,
    ) -> (Auth, TempDir) {
        let dir = TempDir::new();
        let path = dir.write("jwks.json", jwks);
        let auth = Auth::new(cfg(path)).await.unwrap();
        (auth, dir)
    }

    fn file_cfg(alg: Algorithm) -> impl FnOnce(PathBuf) -> AuthConfig {
        move |path| AuthConfig::new(alg, KeySource::JwksFile(path), ISS)
    }

    async fn case(alg: Algorithm) -> Case {
        if alg == Algorithm::HS256 {
            return Case {
                alg,
                auth: Auth::new(AuthConfig::hs256(SECRET, ISS)).await.unwrap(),
                key: fixture_key(alg),
                kid: None,
                _dir: None,
            };
        }
        let (auth, dir) = jwks_file_auth(file_cfg(alg), JWKS_ALL).await;
        Case {
            alg,
            auth,
            key: fixture_key(alg),
            kid: fixture_kid(alg),
            _dir: Some(dir),
        }
    }

    async fn cases() -> Vec<Case> {
        let mut all = Vec::new();
        for alg in ALGS {
            all.push(case(alg).await);
        }
        all
    }

    #[tokio::test]
    async fn accepts_a_valid_token_with_each_algorithm() {
        for c in cases().await {
            let p = c.accepts(&c.token(&good()), "valid token").await;
            assert_eq!(p.tenant.as_str(), "acme");
            assert_eq!(p.subject, "alice");
            assert_eq!(p.role, Role::Editor);
            // The set holds one key usable with the pinned algorithm, so a
            // token need not name it.
            let no_kid = sign(c.alg, &c.key, None, &good());
            c.accepts(&no_kid, "no kid, one usable key").await;
        }
    }

    #[tokio::test]
    async fn refuses_alg_none() {
        for c in cases().await {
            let valid = c.token(&good());
            let valid_sig = valid.rsplit('.').next().unwrap();
            for alg in ["none", "None", "NONE", ""] {
                let mut header = json!({"alg": alg, "typ": "JWT"});
                if let Some(kid) = c.kid {
                    header["kid"] = kid.into();
                }
                c.refuses(&raw_token(&header, &good(), ""), "alg none, no signature")
                    .await;
                c.refuses(
                    &raw_token(&header, &good(), valid_sig),
                    "alg none, a signature",
                )
                .await;
            }
            c.refuses(&raw_token(&json!({"typ": "JWT"}), &good(), ""), "no alg")
                .await;
            c.accepts(&valid, "the same claims, properly signed").await;
        }
    }

    #[tokio::test]
    async fn refuses_any_algorithm_but_the_pinned_one() {
        let signers = [
            Algorithm::HS256,
            Algorithm::HS384,
            Algorithm::HS512,
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::ES256,
            Algorithm::EdDSA,
        ];
        for c in cases().await {
            for alg in signers.into_iter().filter(|a| *a != c.alg) {
                let token = sign(alg, &fixture_key(alg), c.kid, &good());
                c.refuses(&token, &format!("signed with {alg:?}")).await;
            }
            c.accepts(&c.token(&good()), "the pinned algorithm").await;
        }
    }

    /// The classic confusion: the verifier's public key is public, so an
    /// attacker HMACs a token with its bytes and names HS256, hoping the
    /// verifier feeds "its key" to whatever algorithm the token names.
    #[tokio::test]
    async fn refuses_hs256_signed_with_the_public_key() {
        for (alg, public_pem, jwk_text) in [
            (Algorithm::RS256, RSA_PUB, RSA_JWK),
            (Algorithm::ES256, EC_PUB, EC_JWK),
            (Algorithm::EdDSA, ED_PUB, ED_JWK),
        ] {
            let c = case(alg).await;
            let j = jwk(jwk_text);
            let mut secrets: Vec<Vec<u8>> = vec![
                public_pem.as_bytes().to_vec(),
                public_pem.trim_end().as_bytes().to_vec(),
                pem_der(public_pem),
                jwk_text.as_bytes().to_vec(),
                j.to_string().into_bytes(),
            ];
            for component in ["n", "x"] {
                if let Some(v) = j[component].as_str() {
                    secrets.push(v.as_bytes().to_vec());
                    secrets.push(B64.decode(v).unwrap());
                }
            }
            for secret in secrets {
                let forged = sign(
                    Algorithm::HS256,
                    &EncodingKey::from_secret(&secret),
                    None,
                    &with(good(), "roles", json!(["admin"])),
                );
                // The forgery is a well-made HS256 token for that secret...
                Auth::hs256(&secret, ISS).verify(&forged).await.unwrap();
                // ...and worthless here, with the key's kid or without.
                c.refuses(&forged, "HS256 keyed with the public key").await;
                let named = sign(
                    Algorithm::HS256,
                    &EncodingKey::from_secret(&secret),
                    c.kid,
                    &with(good(), "roles", json!(["admin"])),
                );
                c.refuses(&named, "HS256 keyed with the public key, with its kid")
                    .await;
            }
            c.accepts(&c.token(&good()), "a genuine token").await;
        }
    }

    #[tokio::test]
    async fn refuses_a_bad_signature() {
        for c in cases().await {
            let valid = c.token(&good());
            let parts: Vec<&str> = valid.split('.').collect();
            let escalated = B64.encode(with(good(), "roles", json!(["admin"])).to_string());
            let swapped = format!("{}.{escalated}.{}", parts[0], parts[2]);
            c.refuses(&swapped, "payload changed after signing").await;
            let mut sig = parts[2].to_owned();
            let first = if sig.starts_with('A') { "B" } else { "A" };
            sig.replace_range(0..1, first);
            c.refuses(
                &format!("{}.{}.{sig}", parts[0], parts[1]),
                "signature altered",
            )
            .await;
            c.refuses(&format!("{}.{}.", parts[0], parts[1]), "signature removed")
                .await;
            c.refuses(&format!("{}.{}", parts[0], parts[1]), "two parts")
                .await;
            c.refuses("not.a.jwt", "garbage").await;
            c.refuses("", "empty").await;
            let other_key = match c.alg {
                Algorithm::HS256 => Some(EncodingKey::from_secret(OTHER_SECRET)),
                Algorithm::ES256 | Algorithm::EdDSA => Some(fresh_key(c.alg, "x").0),
                _ => None, // rcgen cannot make a second RSA key; the cases above cover RS256
            };
            if let Some(other) = other_key {
                c.refuses(
                    &sign(c.alg, &other, c.kid, &good()),
                    "another key, same kid",
                )
                .await;
            }
            c.accepts(&valid, "the untouched token").await;
        }
    }

    #[tokio::test]
    async fn refuses_an_unknown_kid() {
        for c in cases().await.into_iter().filter(|c| c.kid.is_some()) {
            let token = sign(c.alg, &c.key, Some("who-is-this"), &good());
            c.refuses(&token, "unknown kid").await;
            c.accepts(&c.token(&good()), "the known kid").await;
        }
    }

    #[tokio::test]
    async fn refuses_a_token_without_kid_when_the_set_has_several_keys() {
        for alg in [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA] {
            let second = match alg {
                // The same RSA key under a second kid: still two keys.
                Algorithm::RS256 => with(jwk(RSA_JWK), "kid", json!("rsa-second")),
                _ => fresh_key(alg, "second").1,
            };
            let first = match alg {
                Algorithm::RS256 => RSA_JWK,
                Algorithm::ES256 => EC_JWK,
                _ => ED_JWK,
            };
            let (auth, dir) = jwks_file_auth(file_cfg(alg), &jwks(&[jwk(first), second])).await;
            let c = Case {
                alg,
                auth,
                key: fixture_key(alg),
                kid: fixture_kid(alg),
                _dir: Some(dir),
            };
            c.refuses(&sign(alg, &c.key, None, &good()), "no kid among two keys")
                .await;
            c.accepts(&c.token(&good()), "the same token naming its kid")
                .await;
        }
    }

    #[tokio::test]
    async fn refuses_an_expired_token() {
        for c in cases().await {
            c.refuses(
                &c.token(&with(good(), "exp", json!(now() - 120))),
                "expired",
            )
            .await;
            c.refuses(&c.token(&with(good(), "exp", json!(0))), "expired long ago")
                .await;
            c.accepts(
                &c.token(&with(good(), "exp", json!(now() - 10))),
                "expired within the 30 s leeway",
            )
            .await;
        }
    }

    #[tokio::test]
    async fn refuses_a_token_not_yet_valid() {
        for c in cases().await {
            c.refuses(
                &c.token(&with(good(), "nbf", json!(now() + 120))),
                "nbf ahead",
            )
            .await;
            c.refuses(
                &c.token(&with(good(), "nbf", json!("now"))),
                "nbf not a number",
            )
            .await;
            c.accepts(
                &c.token(&with(good(), "nbf", json!(now() + 10))),
                "nbf within the 30 s leeway",
            )
            .await;
            c.accepts(
                &c.token(&with(good(), "nbf", json!(now() - 10))),
                "nbf passed",
            )
            .await;
        }
    }

    #[tokio::test]
    async fn refuses_a_wrong_issuer() {
        for c in cases().await {
            for iss in [
                json!("https://evil.example.test"),
                json!(format!("{ISS}/")),
                json!(""),
                json!([ISS]),
                json!(42),
            ] {
                c.refuses(
                    &c.token(&with(good(), "iss", iss.clone())),
                    &format!("iss {iss}"),
                )
                .await;
            }
            c.accepts(&c.token(&good()), "the right issuer").await;
        }
    }

    #[tokio::test]
    async fn checks_the_audience() {
        for c in cases().await {
            for aud in [
                json!("other"),
                json!("MESON"),
                json!(["other"]),
                json!([]),
                json!(7),
            ] {
                c.refuses(
                    &c.token(&with(good(), "aud", aud.clone())),
                    &format!("aud {aud}"),
                )
                .await;
            }
            c.accepts(
                &c.token(&with(good(), "aud", json!(["other", AUDIENCE]))),
                "aud array",
            )
            .await;
            c.accepts(
                &c.token(&with(good(), "aud", json!(AUDIENCE))),
                "aud string",
            )
            .await;
        }
    }

    #[tokio::test]
    async fn refuses_a_missing_claim() {
        for c in cases().await {
            for claim in ["exp", "iss", "aud", "sub", "tenant", "roles"] {
                c.refuses(&c.token(&without(good(), claim)), &format!("no {claim}"))
                    .await;
                c.refuses(
                    &c.token(&with(good(), claim, Value::Null)),
                    &format!("{claim} null"),
                )
                .await;
            }
            c.refuses(
                &c.token(&with(good(), "exp", json!("tomorrow"))),
                "exp a string",
            )
            .await;
            c.accepts(&c.token(&without(good(), "iat")), "iat is optional")
                .await;
        }
    }

    #[tokio::test]
    async fn a_token_naming_its_own_key_or_an_unknown_kid_is_refused() {
        for c in cases().await {
            let claims = good();
            for (name, value) in [
                ("jku", json!("https://attacker.example.test/jwks.json")),
                ("x5u", json!("https://attacker.example.test/cert.pem")),
                ("jwk", json!({"kty": "oct", "k": "c2VjcmV0"})),
                ("x5c", json!(["MIIB"])),
            ] {
                let mut header = Header::new(c.alg);
                header.kid = c.kid.map(str::to_owned);
                let mut h = serde_json::to_value(&header).unwrap();
                h[name] = value;
                let unsigned = format!(
                    "{}.{}",
                    B64.encode(h.to_string()),
                    B64.encode(claims.to_string())
                );
                let sig = jsonwebtoken::crypto::sign(unsigned.as_bytes(), &c.key, c.alg).unwrap();
                c.refuses(&format!("{unsigned}.{sig}"), name).await;
            }
        }
        // Under HS256 the secret has no kid: a token naming one is refused.
        let c = case(Algorithm::HS256).await;
        c.accepts(&c.token(&good()), "no kid").await;
        c.refuses(
            &sign(Algorithm::HS256, &c.key, Some("other-key"), &good()),
            "an unknown kid",
        )
        .await;
    }

    #[tokio::test]
    async fn reads_the_roles_claim() {
        for c in cases().await {
            for (roles, want) in [
                (json!(["viewer"]), Role::Viewer),
                (json!(["Viewer", "ADMIN"]), Role::Admin),
                (
                    json!(["editor", "superuser", "offline_access"]),
                    Role::Editor,
                ),
                (json!([7, "admin", null]), Role::Admin),
            ] {
                let p = c
                    .accepts(
                        &c.token(&with(good(), "roles", roles.clone())),
                        &format!("{roles}"),
                    )
                    .await;
                assert_eq!(p.role, want, "{:?}: roles {roles}", c.alg);
            }
            for roles in [
                json!([]),
                json!(["root"]),
                json!(""),
                json!("root god"),
                json!(42),
                json!({"admin": true}),
                json!([["admin"]]),
                // A string is no list of roles, however it is spaced.
                json!("admin"),
                json!("viewer editor"),
                json!("  admin  "),
            ] {
                c.refuses(
                    &c.token(&with(good(), "roles", roles.clone())),
                    &format!("{roles}"),
                )
                .await;
            }
        }
    }

    #[tokio::test]
    async fn checks_the_tenant_claim() {
        for c in cases().await {
            let longest = "t".repeat(128);
            for tenant in ["acme", "a.b_c:d@e-f", "Z9", longest.as_str()] {
                let p = c
                    .accepts(&c.token(&with(good(), "tenant", json!(tenant))), tenant)
                    .await;
                assert_eq!(p.tenant.as_str(), tenant);
            }
            for tenant in [
                json!(""),
                json!("*"),
                json!("acme*"),
                json!("acme corp"),
                json!("acme';DROP"),
                json!("acme\n"),
                json!("tenant,other"),
                json!("ac%me"),
                json!("é"),
                json!("t".repeat(129)),
                json!(42),
                json!(["acme"]),
            ] {
                c.refuses(
                    &c.token(&with(good(), "tenant", tenant.clone())),
                    &format!("{tenant}"),
                )
                .await;
            }
        }
    }

    #[tokio::test]
    async fn checks_the_subject_claim() {
        for c in cases().await {
            let longest = "s".repeat(255);
            c.accepts(&c.token(&with(good(), "sub", json!(longest))), "255 chars")
                .await;
            c.accepts(
                &c.token(&with(good(), "sub", json!("élodie@example"))),
                "unicode",
            )
            .await;
            for sub in [
                json!(""),
                json!("s".repeat(256)),
                json!(42),
                json!("a\u{0}b"),
            ] {
                c.refuses(
                    &c.token(&with(good(), "sub", sub.clone())),
                    &format!("sub {sub}"),
                )
                .await;
            }
        }
    }

    #[tokio::test]
    async fn claim_names_and_audience_are_configurable() {
        let cfg = AuthConfig {
            tenant_claim: "https://meson/org".to_owned(),
            roles_claim: "groups".to_owned(),
            audience: "meson-prod".to_owned(),
            ..AuthConfig::hs256(SECRET, ISS)
        };
        let auth = Auth::new(cfg).await.unwrap();
        let key = EncodingKey::from_secret(SECRET);
        let custom = json!({"iss": ISS, "aud": "meson-prod", "sub": "bob", "exp": now() + 60,
            "https://meson/org": "acme", "groups": ["admin"]});
        let p = auth
            .verify(&sign(Algorithm::HS256, &key, None, &custom))
            .await
            .unwrap();
        assert_eq!((p.tenant.as_str(), p.role), ("acme", Role::Admin));
        let default_names = with(good(), "aud", json!("meson-prod"));
        assert!(
            auth.verify(&sign(Algorithm::HS256, &key, None, &default_names))
                .await
                .is_err(),
            "the default claim names are not read"
        );
        let default_aud = with(custom, "aud", json!(AUDIENCE));
        assert!(
            auth.verify(&sign(Algorithm::HS256, &key, None, &default_aud))
                .await
                .is_err(),
            "the default audience is not accepted"
        );
        // `issue` writes the configured names.
        let issued = auth.issue("t1", "carol", Role::Viewer, chrono::Duration::minutes(1));
        assert_eq!(auth.verify(&issued).await.unwrap().subject, "carol");
    }

    #[tokio::test]
    async fn issue_round_trip() {
        let auth = Auth::hs256(SECRET, "meson-test");
        let t = auth.issue("t1", "alice", Role::Editor, chrono::Duration::minutes(5));
        let p = auth.verify(&t).await.unwrap();
        assert_eq!(p.tenant.as_str(), "t1");
        assert_eq!(p.role, Role::Editor);
        assert!(p.require(Role::Editor).is_ok());
        assert!(p.require(Role::Admin).is_err());

        let other = Auth::hs256(OTHER_SECRET, "meson-test");
        assert!(other.verify(&t).await.is_err(), "bad signature accepted");
        let elsewhere = Auth::hs256(SECRET, "someone-else");
        assert!(elsewhere.verify(&t).await.is_err(), "wrong issuer accepted");
        let expired = auth.issue("t1", "alice", Role::Editor, chrono::Duration::minutes(-5));
        assert!(
            auth.verify(&expired).await.is_err(),
            "expired token accepted"
        );
        assert!(auth.verify("not.a.jwt").await.is_err());
        // `Auth::new` with the same settings accepts what `Auth::hs256` issued.
        let same = Auth::new(AuthConfig::hs256(SECRET, "meson-test"))
            .await
            .unwrap();
        assert_eq!(same.verify(&t).await.unwrap(), p);

        // Only a shared secret can sign.
        let rs = case(Algorithm::RS256).await;
        assert_eq!(
            rs.auth
                .issue("t1", "a", Role::Admin, chrono::Duration::minutes(1)),
            ""
        );
        assert!(rs.auth.verify("").await.is_err());
    }

    #[tokio::test]
    async fn refuses_bad_configurations() {
        async fn err(cfg: AuthConfig) -> AuthConfigError {
            match Auth::new(cfg).await {
                Ok(a) => panic!("accepted: {a:?}"),
                Err(e) => e,
            }
        }
        fn chain(e: &AuthConfigError) -> String {
            DisplayChain(e).to_string()
        }
        let dir = TempDir::new();
        let all = dir.write("all.json", JWKS_ALL);
        let file = |alg| AuthConfig::new(alg, KeySource::JwksFile(all.clone()), ISS);

        for alg in [
            Algorithm::HS384,
            Algorithm::HS512,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::ES384,
        ] {
            let e = err(file(alg)).await;
            assert!(
                matches!(e, AuthConfigError::UnsupportedAlgorithm(a) if a == alg),
                "{e}"
            );
        }
        let e = err(AuthConfig::hs256(&SECRET[..31], ISS)).await;
        assert!(
            matches!(e, AuthConfigError::SecretTooShort { len: 31 }),
            "{e}"
        );
        let e = err(AuthConfig::new(
            Algorithm::RS256,
            KeySource::Secret(SECRET.to_vec()),
            ISS,
        ))
        .await;
        assert!(
            matches!(e, AuthConfigError::KeySourceMismatch { .. }),
            "{e}"
        );
        let e = err(file(Algorithm::HS256)).await;
        assert!(
            matches!(e, AuthConfigError::KeySourceMismatch { .. }),
            "{e}"
        );
        for url in [
            "ftp://idp.test/jwks",
            "not a url",
            "file:///etc/jwks.json",
            "http://",
        ] {
            let e = err(AuthConfig::new(
                Algorithm::RS256,
                KeySource::JwksUrl(url.to_owned()),
                ISS,
            ))
            .await;
            assert!(matches!(e, AuthConfigError::Invalid(_)), "{url}: {e}");
        }
        for broken in [
            AuthConfig {
                issuer: String::new(),
                ..file(Algorithm::RS256)
            },
            AuthConfig {
                audience: String::new(),
                ..file(Algorithm::RS256)
            },
            AuthConfig {
                tenant_claim: "roles".to_owned(),
                ..file(Algorithm::RS256)
            },
            AuthConfig {
                refresh: Duration::ZERO,
                ..file(Algorithm::RS256)
            },
            AuthConfig {
                leeway: Duration::from_secs(86_400),
                ..file(Algorithm::RS256)
            },
        ] {
            let e = err(broken).await;
            assert!(matches!(e, AuthConfigError::Invalid(_)), "{e}");
        }

        // Key sets that cannot be read, do not parse, or hold no usable key.
        let missing = dir.0.join("missing.json");
        let e = err(AuthConfig::new(
            Algorithm::RS256,
            KeySource::JwksFile(missing),
            ISS,
        ))
        .await;
        assert!(
            matches!(
                &e,
                AuthConfigError::Jwks {
                    source: JwksError::Read(_),
                    ..
                }
            ),
            "{e}"
        );
        assert!(chain(&e).contains("missing.json"), "{}", chain(&e));
        let jwks_file = |name: &str, text: &str, alg| {
            AuthConfig::new(alg, KeySource::JwksFile(dir.write(name, text)), ISS)
        };
        for (i, text) in ["{not json", r#"{"keys": 1}"#, "[]", ""]
            .into_iter()
            .enumerate()
        {
            let e = err(jwks_file(&format!("bad{i}.json"), text, Algorithm::ES256)).await;
            assert!(
                matches!(
                    &e,
                    AuthConfigError::Jwks {
                        source: JwksError::Parse(_),
                        ..
                    }
                ),
                "{e}"
            );
        }
        let enc = with(jwk(RSA_JWK), "use", json!("enc"));
        let rs512 = with(jwk(RSA_JWK), "alg", json!("RS512"));
        let no_verify = with(jwk(RSA_JWK), "key_ops", json!(["encrypt"]));
        let p384 = json!({"kty": "EC", "crv": "P-384", "kid": "p384",
            "x": B64.encode([1u8; 48]), "y": B64.encode([2u8; 48])});
        let ec_without_alg = without(jwk(EC_JWK), "alg");
        for (alg, keys) in [
            (Algorithm::RS256, vec![jwk(EC_JWK), jwk(ED_JWK)]),
            (Algorithm::RS256, vec![enc, rs512, no_verify]),
            (Algorithm::ES256, vec![p384, jwk(RSA_JWK), jwk(ED_JWK)]),
            (Algorithm::EdDSA, vec![ec_without_alg.clone()]),
            (Algorithm::ES256, vec![]),
        ] {
            let e = err(jwks_file("unusable.json", &jwks(&keys), alg)).await;
            assert!(
                matches!(&e, AuthConfigError::Jwks { source: JwksError::NoUsableKey(a), .. } if *a == alg),
                "{e}"
            );
            assert!(
                chain(&e).contains(&format!("no key usable with {alg:?}")),
                "{}",
                chain(&e)
            );
        }
        // A key without `alg` is fine when its type fits; a key jsonwebtoken
        // cannot represent is skipped, not fatal.
        let odd = json!({"kty": "EC", "crv": "secp256k1", "kid": "odd", "x": "AA", "y": "AA"});
        let enc_kw = json!({"kty": "oct", "alg": "A256KW", "use": "enc", "k": "AAAA"});
        let ok = Auth::new(jwks_file(
            "mixed.json",
            &jwks(&[odd, enc_kw, ec_without_alg]),
            Algorithm::ES256,
        ))
        .await
        .unwrap();
        let token = sign(
            Algorithm::ES256,
            &fixture_key(Algorithm::ES256),
            Some("ec-test"),
            &good(),
        );
        ok.verify(&token).await.unwrap();
    }

    #[tokio::test]
    async fn debug_output_has_no_secrets() {
        let cfg = AuthConfig::hs256(SECRET, ISS);
        let auth = Auth::new(cfg.clone()).await.unwrap();
        let secret_text = std::str::from_utf8(SECRET).unwrap();
        let secret_bytes = format!("{:?}", SECRET.to_vec());
        let secret_inner = &secret_bytes[1..secret_bytes.len() - 1];
        for shown in [
            format!("{cfg:?}"),
            format!("{auth:?}"),
            format!("{:#?}", auth.config()),
        ] {
            assert!(!shown.contains(secret_text), "{shown}");
            assert!(!shown.contains(&secret_bytes[..20]), "{shown}");
            assert!(!shown.contains(secret_inner), "{shown}");
            assert!(shown.contains("32 bytes redacted"), "{shown}");
        }
        let url = KeySource::JwksUrl("https://user:hunter2@idp.test/jwks?token=s3cret".to_owned());
        for shown in [format!("{url:?}"), url.describe()] {
            assert!(
                !shown.contains("hunter2") && !shown.contains("s3cret"),
                "{shown}"
            );
            assert!(shown.contains("idp.test/jwks"), "{shown}");
        }
    }

    #[tokio::test]
    async fn jwks_file_rotation() {
        let alg = Algorithm::EdDSA;
        let (key_a, jwk_a) = (fixture_key(alg), jwk(ED_JWK));
        let (key_b, jwk_b) = fresh_key(alg, "ed-b");
        let dir = TempDir::new();
        let path = dir.write("jwks.json", &jwks(std::slice::from_ref(&jwk_a)));
        let auth = Auth::new(AuthConfig::new(alg, KeySource::JwksFile(path), ISS))
            .await
            .unwrap();
        let token_a = sign(alg, &key_a, Some("ed25519-test"), &good());
        let token_b = sign(alg, &key_b, Some("ed-b"), &good());
        auth.verify(&token_a).await.unwrap();
        assert!(
            auth.verify(&token_b).await.is_err(),
            "B is not published yet"
        );

        // Both published (a rotation's overlap), then only B.
        dir.write("jwks.json", &jwks(&[jwk_a, jwk_b.clone()]));
        auth.refresh().await.unwrap();
        auth.verify(&token_a).await.unwrap();
        auth.verify(&token_b).await.unwrap();
        dir.write("jwks.json", &jwks(&[jwk_b]));
        auth.refresh().await.unwrap();
        auth.verify(&token_b).await.unwrap();
        assert!(auth.verify(&token_a).await.is_err(), "A was withdrawn");

        // A failed refresh keeps the keys in force.
        for broken in ["{oops", &jwks(&[jwk(RSA_JWK)])] {
            dir.write("jwks.json", broken);
            assert!(auth.refresh().await.is_err());
            auth.verify(&token_b).await.unwrap();
        }
        std::fs::remove_file(dir.0.join("jwks.json")).unwrap();
        assert!(auth.refresh().await.is_err());
        auth.verify(&token_b).await.unwrap();
    }

    #[tokio::test]
    async fn spawn_refresh_reloads_periodically_and_stops() {
        let alg = Algorithm::ES256;
        let (key_b, jwk_b) = fresh_key(alg, "ec-b");
        let dir = TempDir::new();
        let path = dir.write("jwks.json", &jwks(&[jwk(EC_JWK)]));
        let cfg = AuthConfig {
            refresh: Duration::from_millis(20),
            ..AuthConfig::new(alg, KeySource::JwksFile(path), ISS)
        };
        let auth = Auth::new(cfg).await.unwrap();
        let token_b = sign(alg, &key_b, Some("ec-b"), &good());
        // Spend the unknown-kid refetch, so only the periodic task can find B.
        assert!(auth.verify(&token_b).await.is_err());

        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let task = auth.spawn_refresh(stop_rx);
        dir.write("jwks.json", &jwks(&[jwk(EC_JWK), jwk_b]));
        let deadline = Instant::now() + Duration::from_secs(10);
        while auth.verify(&token_b).await.is_err() {
            assert!(Instant::now() < deadline, "the refresh task never loaded B");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop_tx.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the refresh task did not stop")
            .unwrap();

        // With a secret there is nothing to refresh: the task ends at once.
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let task = Auth::hs256(SECRET, ISS).spawn_refresh(rx);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
    }

    /// A tiny identity provider serving a JWKS and counting the requests.
    #[derive(Clone)]
    struct Idp {
        doc: Arc<std::sync::Mutex<(u16, String)>>,
        hits: Arc<AtomicUsize>,
    }

    impl Idp {
        async fn start(keys: &[Value]) -> (Idp, String) {
            use axum::extract::State;
            let idp = Idp {
                doc: Arc::new(std::sync::Mutex::new((200, jwks(keys)))),
                hits: Arc::new(AtomicUsize::new(0)),
            };
            let app = axum::Router::new()
                .route(
                    "/jwks",
                    axum::routing::get(|State(idp): State<Idp>| async move {
                        idp.hits.fetch_add(1, Ordering::SeqCst);
                        let (status, body) = idp.doc.lock().unwrap().clone();
                        (
                            axum::http::StatusCode::from_u16(status).unwrap(),
                            [(axum::http::header::CONTENT_TYPE, "application/json")],
                            body,
                        )
                    }),
                )
                .with_state(idp.clone());
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
            (idp, format!("http://{addr}/jwks"))
        }

        fn serve(&self, status: u16, body: String) {
            *self.doc.lock().unwrap() = (status, body);
        }

        fn hits(&self) -> usize {
            self.hits.load(Ordering::SeqCst)
        }
    }

    fn url_cfg(alg: Algorithm, url: &str) -> AuthConfig {
        AuthConfig::new(alg, KeySource::JwksUrl(url.to_owned()), ISS)
    }

    #[tokio::test]
    async fn jwks_url_unknown_kid_refetches_at_most_once_per_30s() {
        let alg = Algorithm::ES256;
        let (idp, url) = Idp::start(&[jwk(EC_JWK)]).await;
        let auth = Auth::new(url_cfg(alg, &url)).await.unwrap();
        assert_eq!(idp.hits(), 1, "loaded once at start");
        let token_a = sign(alg, &fixture_key(alg), Some("ec-test"), &good());
        auth.verify(&token_a).await.unwrap();
        assert_eq!(idp.hits(), 1, "a known kid needs no fetch");

        // The IdP publishes B; a token naming B triggers a refetch that finds it.
        let (key_b, jwk_b) = fresh_key(alg, "ec-b");
        idp.serve(200, jwks(&[jwk(EC_JWK), jwk_b.clone()]));
        let token_b = sign(alg, &key_b, Some("ec-b"), &good());
        auth.verify(&token_b).await.unwrap();
        assert_eq!(idp.hits(), 2, "one refetch for the unknown kid");
        auth.verify(&token_b).await.unwrap();
        assert_eq!(idp.hits(), 2);

        // Within 30 s another unknown kid is refused without asking the IdP,
        // even though the IdP has meanwhile published it.
        let (key_c, jwk_c) = fresh_key(alg, "ec-c");
        idp.serve(200, jwks(&[jwk(EC_JWK), jwk_b, jwk_c]));
        let token_c = sign(alg, &key_c, Some("ec-c"), &good());
        assert!(matches!(
            auth.verify(&token_c).await,
            Err(Error::Unauthorized)
        ));
        let junk = sign(alg, &key_c, Some("junk"), &good());
        assert!(auth.verify(&junk).await.is_err());
        assert_eq!(idp.hits(), 2, "no second refetch within 30 s");

        // The periodic refresh is not rate limited and picks C up.
        auth.refresh().await.unwrap();
        assert_eq!(idp.hits(), 3);
        auth.verify(&token_c).await.unwrap();
        auth.verify(&token_a).await.unwrap();
    }

    #[tokio::test]
    async fn jwks_url_a_flood_of_unknown_kids_fetches_once() {
        let alg = Algorithm::EdDSA;
        let (idp, url) = Idp::start(&[jwk(ED_JWK)]).await;
        let auth = Auth::new(url_cfg(alg, &url)).await.unwrap();
        let key = fixture_key(alg);
        let mut tasks = Vec::new();
        for i in 0..50 {
            let token = sign(alg, &key, Some(&format!("junk-{i}")), &good());
            let auth = auth.clone();
            tasks.push(tokio::spawn(async move { auth.verify(&token).await }));
        }
        for t in tasks {
            assert!(matches!(t.await.unwrap(), Err(Error::Unauthorized)));
        }
        assert_eq!(
            idp.hits(),
            2,
            "one load at start, one refetch for the whole flood"
        );
        auth.verify(&sign(alg, &key, Some("ed25519-test"), &good()))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn jwks_url_failures() {
        let alg = Algorithm::RS256;
        let (idp, url) = Idp::start(&[jwk(RSA_JWK)]).await;

        // At start: an error status, a body that is no JWKS, no usable key.
        idp.serve(500, "oops".to_owned());
        let e = Auth::new(url_cfg(alg, &url)).await.unwrap_err();
        assert!(
            matches!(
                &e,
                AuthConfigError::Jwks {
                    source: JwksError::Status(500),
                    ..
                }
            ),
            "{e}"
        );
        idp.serve(200, "<html>login</html>".to_owned());
        let e = Auth::new(url_cfg(alg, &url)).await.unwrap_err();
        assert!(
            matches!(
                &e,
                AuthConfigError::Jwks {
                    source: JwksError::Parse(_),
                    ..
                }
            ),
            "{e}"
        );
        idp.serve(200, jwks(&[jwk(EC_JWK)]));
        let e = Auth::new(url_cfg(alg, &url)).await.unwrap_err();
        assert!(
            matches!(
                &e,
                AuthConfigError::Jwks {
                    source: JwksError::NoUsableKey(_),
                    ..
                }
            ),
            "{e}"
        );
        // Nobody listening; and the credentials in the URL never show.
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let e = Auth::new(url_cfg(
            alg,
            &format!("http://u:hunter2@{closed}/jwks?key=s3cret"),
        ))
        .await
        .unwrap_err();
        assert!(
            matches!(
                &e,
                AuthConfigError::Jwks {
                    source: JwksError::Fetch(_),
                    ..
                }
            ),
            "{e}"
        );
        let shown = format!("{} / {e:?}", DisplayChain(&e));
        assert!(
            !shown.contains("hunter2") && !shown.contains("s3cret"),
            "{shown}"
        );

        // Once running, a failed refresh keeps the old keys.
        idp.serve(200, jwks(&[jwk(RSA_JWK)]));
        let auth = Auth::new(url_cfg(alg, &url)).await.unwrap();
        let token = sign(alg, &fixture_key(alg), Some("rsa-test"), &good());
        auth.verify(&token).await.unwrap();
        for (status, body) in [(503, String::new()), (200, "{}".to_owned())] {
            idp.serve(status, body);
            assert!(auth.refresh().await.is_err());
            auth.verify(&token).await.unwrap();
        }
    }
}
