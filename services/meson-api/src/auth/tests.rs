//! The verifier end to end: tokens of every pinned algorithm, keys from
//! secrets, files and URLs, and every way a token is refused.

use super::testing::{claims, sign};
use super::verify::DisplayChain;
use super::*;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD as B64};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use meson_core::Error;
use serde_json::Value;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const ISS: &str = "https://idp.example.test/realms/meson";
const SECRET: &[u8] = b"an-hs256-test-secret-of-32-bytes";
const OTHER_SECRET: &[u8] = b"another-hs256-secret-of-32-bytes";
const RSA_KEY: &str = include_str!("../../tests/fixtures/rsa-test-key.pem");
const RSA_PUB: &str = include_str!("../../tests/fixtures/rsa-test-pub.pem");
const RSA_JWK: &str = include_str!("../../tests/fixtures/rsa-test-jwk.json");
const EC_KEY: &str = include_str!("../../tests/fixtures/ec-p256-test-key.pem");
const EC_PUB: &str = include_str!("../../tests/fixtures/ec-p256-test-pub.pem");
const EC_JWK: &str = include_str!("../../tests/fixtures/ec-p256-test-jwk.json");
const ED_KEY: &str = include_str!("../../tests/fixtures/ed25519-test-key.pem");
const ED_PUB: &str = include_str!("../../tests/fixtures/ed25519-test-pub.pem");
const ED_JWK: &str = include_str!("../../tests/fixtures/ed25519-test-jwk.json");
/// The three public JWKs above in one set: each pinned algorithm must
/// pick its own key out of it.
const JWKS_ALL: &str = include_str!("../../tests/fixtures/test-jwks.json");

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

/// The JWK set error behind a failure to load keys.
fn jwks_source(e: &AuthConfigError) -> &JwksError {
    match e {
        AuthConfigError::Jwks { source, .. } => source,
        other => panic!("not a key set error: {other}"),
    }
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
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => EncodingKey::from_secret(SECRET),
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

    /// A token of the good claims with `claim` set to `value`.
    fn token_with(&self, claim: &str, value: Value) -> String {
        self.token(&with(good(), claim, value))
    }

    /// Refuses the good claims with `claim` set to each of `values`.
    async fn refuses_each(&self, claim: &str, values: impl IntoIterator<Item = Value>) {
        for value in values {
            let why = format!("{claim} {value}");
            self.refuses(&self.token_with(claim, value), &why).await;
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

async fn jwks_file_auth(cfg: impl FnOnce(PathBuf) -> AuthConfig, jwks: &str) -> (Auth, TempDir) {
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
        c.refuses(&c.token_with("exp", json!(now() - 120)), "expired")
            .await;
        c.refuses(&c.token_with("exp", json!(0)), "expired long ago")
            .await;
        c.accepts(
            &c.token_with("exp", json!(now() - 10)),
            "expired within the 30 s leeway",
        )
        .await;
    }
}

#[tokio::test]
async fn refuses_a_token_not_yet_valid() {
    for c in cases().await {
        c.refuses(&c.token_with("nbf", json!(now() + 120)), "nbf ahead")
            .await;
        c.refuses(&c.token_with("nbf", json!("now")), "nbf not a number")
            .await;
        c.accepts(
            &c.token_with("nbf", json!(now() + 10)),
            "nbf within the 30 s leeway",
        )
        .await;
        c.accepts(&c.token_with("nbf", json!(now() - 10)), "nbf passed")
            .await;
    }
}

#[tokio::test]
async fn refuses_a_wrong_issuer() {
    for c in cases().await {
        c.refuses_each(
            "iss",
            [
                json!("https://evil.example.test"),
                json!(format!("{ISS}/")),
                json!(""),
                json!([ISS]),
                json!(42),
            ],
        )
        .await;
        c.accepts(&c.token(&good()), "the right issuer").await;
    }
}

#[tokio::test]
async fn checks_the_audience() {
    for c in cases().await {
        c.refuses_each(
            "aud",
            [
                json!("other"),
                json!("MESON"),
                json!(["other"]),
                json!([]),
                json!(7),
            ],
        )
        .await;
        c.accepts(
            &c.token_with("aud", json!(["other", AUDIENCE])),
            "aud array",
        )
        .await;
        c.accepts(&c.token_with("aud", json!(AUDIENCE)), "aud string")
            .await;
    }
}

#[tokio::test]
async fn refuses_a_missing_claim() {
    for c in cases().await {
        for claim in ["exp", "iss", "aud", "sub", "tenant", "roles"] {
            c.refuses(&c.token(&without(good(), claim)), &format!("no {claim}"))
                .await;
            c.refuses(&c.token_with(claim, Value::Null), &format!("{claim} null"))
                .await;
        }
        c.refuses(&c.token_with("exp", json!("tomorrow")), "exp a string")
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
async fn a_token_with_critical_extensions_is_refused() {
    // RFC 7515 §4.1.11: a recipient that does not understand an extension
    // named in `crit` must refuse the token; meson understands none.
    for c in cases().await {
        let signed = |extra: Option<(&str, Value)>| {
            let mut header = Header::new(c.alg);
            header.kid = c.kid.map(str::to_owned);
            let mut h = serde_json::to_value(&header).unwrap();
            if let Some((name, value)) = extra {
                h[name] = value;
            }
            let unsigned = format!(
                "{}.{}",
                B64.encode(h.to_string()),
                B64.encode(good().to_string())
            );
            let sig = jsonwebtoken::crypto::sign(unsigned.as_bytes(), &c.key, c.alg).unwrap();
            format!("{unsigned}.{sig}")
        };
        c.accepts(&signed(None), "no crit").await;
        // An unknown header member that is not critical is ignored.
        c.accepts(&signed(Some(("x-trace", json!("1")))), "a plain extension")
            .await;
        for crit in [json!(["exp"]), json!(["b64"]), json!([]), json!("exp")] {
            c.refuses(
                &signed(Some(("crit", crit.clone()))),
                &format!("crit {crit}"),
            )
            .await;
        }
    }
}

#[tokio::test]
async fn reads_the_roles_claim() {
    for c in cases().await {
        for (roles, want) in [
            (json!(["viewer"]), Role::Viewer),
            // Roles are exact words: these two name none.
            (json!(["viewer", "ADMIN", "Owner"]), Role::Viewer),
            (json!(["Viewer", "admin"]), Role::Admin),
            (
                json!(["editor", "superuser", "offline_access"]),
                Role::Editor,
            ),
            (json!([7, "admin", null]), Role::Admin),
        ] {
            let p = c
                .accepts(&c.token_with("roles", roles.clone()), &format!("{roles}"))
                .await;
            assert_eq!(p.role, want, "{:?}: roles {roles}", c.alg);
        }
        c.refuses_each(
            "roles",
            [
                json!([]),
                json!(["root"]),
                json!(["ADMIN"]),
                json!(["Editor", "VIEWER"]),
                json!(""),
                json!("root god"),
                json!(42),
                json!({"admin": true}),
                json!([["admin"]]),
                // A string is no list of roles, however it is spaced.
                json!("admin"),
                json!("viewer editor"),
                json!("  admin  "),
            ],
        )
        .await;
    }
}

#[tokio::test]
async fn checks_the_tenant_claim() {
    for c in cases().await {
        let longest = "t".repeat(128);
        for tenant in ["acme", "a.b_c:d@e-f", "Z9", longest.as_str()] {
            let p = c
                .accepts(&c.token_with("tenant", json!(tenant)), tenant)
                .await;
            assert_eq!(p.tenant.as_str(), tenant);
        }
        c.refuses_each(
            "tenant",
            [
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
            ],
        )
        .await;
    }
}

#[tokio::test]
async fn checks_the_subject_claim() {
    for c in cases().await {
        let longest = "s".repeat(255);
        c.accepts(&c.token_with("sub", json!(longest)), "255 chars")
            .await;
        c.accepts(&c.token_with("sub", json!("élodie@example")), "unicode")
            .await;
        c.refuses_each(
            "sub",
            [
                json!(""),
                json!("s".repeat(256)),
                json!(42),
                json!("a\u{0}b"),
            ],
        )
        .await;
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
    assert!(matches!(jwks_source(&e), JwksError::Read(_)), "{e}");
    assert!(chain(&e).contains("missing.json"), "{}", chain(&e));
    let jwks_file = |name: &str, text: &str, alg| {
        AuthConfig::new(alg, KeySource::JwksFile(dir.write(name, text)), ISS)
    };
    for (i, text) in ["{not json", r#"{"keys": 1}"#, "[]", ""]
        .into_iter()
        .enumerate()
    {
        let e = err(jwks_file(&format!("bad{i}.json"), text, Algorithm::ES256)).await;
        assert!(matches!(jwks_source(&e), JwksError::Parse(_)), "{e}");
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
    assert!(matches!(jwks_source(&e), JwksError::Status(500)), "{e}");
    idp.serve(200, "<html>login</html>".to_owned());
    let e = Auth::new(url_cfg(alg, &url)).await.unwrap_err();
    assert!(matches!(jwks_source(&e), JwksError::Parse(_)), "{e}");
    idp.serve(200, jwks(&[jwk(EC_JWK)]));
    let e = Auth::new(url_cfg(alg, &url)).await.unwrap_err();
    assert!(matches!(jwks_source(&e), JwksError::NoUsableKey(_)), "{e}");
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
    assert!(matches!(jwks_source(&e), JwksError::Fetch(_)), "{e}");
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
