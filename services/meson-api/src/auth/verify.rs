//! Verifying bearer tokens against the keys in force, and keeping a
//! JWKS fresh.

use jsonwebtoken::{Algorithm, EncodingKey, Header, Validation};
use meson_core::{Error, TenantId};
use serde_json::{Map, Value};
use std::fmt;
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use super::jwks::{KeySet, Lookup, http_client, load};
use super::{AuthConfig, AuthConfigError, JwksError, KeySource, MIN_SECRET_LEN, Principal, Role};

/// At most one refetch per this period is triggered by tokens naming an
/// unknown `kid`, so a flood of junk kids cannot hammer the identity provider.
pub const UNKNOWN_KID_REFETCH_INTERVAL: Duration = Duration::from_secs(30);

/// Real tokens are well under this; parsing bigger ones is only work for an attacker.
const MAX_TOKEN_BYTES: usize = 16 * 1024;
const MAX_SUBJECT_LEN: usize = 255;

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

/// The `crit` member of a token's header, if it has one (jsonwebtoken's
/// header type drops members it does not know).
fn critical_extensions(token: &str) -> Option<Value> {
    use base64::Engine;
    let header = token.split('.').next()?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice::<Map<String, Value>>(&bytes)
        .ok()?
        .remove("crit")
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
        self.issue_with_email(tenant, subject, role, None, ttl)
    }

    /// [`Auth::issue`], with `email` as the subject's verified address.
    pub fn issue_with_email(
        &self,
        tenant: &str,
        subject: &str,
        role: Role,
        email: Option<&str>,
        ttl: chrono::Duration,
    ) -> String {
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
        if let Some(email) = email {
            claims.insert("email".to_owned(), email.into());
            claims.insert("email_verified".to_owned(), true.into());
        }
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
        // RFC 7515 §4.1.11: extensions the recipient must understand, or
        // refuse the token. meson understands none.
        if let Some(crit) = critical_extensions(token) {
            return Err(format!(
                "the header names critical extensions meson does not understand (crit: {crit})"
            ));
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
            Some(Value::String(t)) if TenantId::valid(t) => t.clone(),
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
        // An address the identity provider says it verified, or none: an
        // unverified one proves nothing about who holds the token.
        let email = match (claims.get("email"), claims.get("email_verified")) {
            (Some(Value::String(e)), Some(Value::Bool(true))) => meson_core::member::parse_email(e),
            _ => None,
        };
        Ok(Principal {
            tenant: TenantId(tenant),
            subject,
            role,
            email,
        })
    }
}

/// An error and its causes on one line, for logs.
pub(super) struct DisplayChain<'a>(pub(super) &'a (dyn std::error::Error + 'static));

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
