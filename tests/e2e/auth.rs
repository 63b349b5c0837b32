//! Bearer tokens over real HTTP: every refusal is the same bare
//! `unauthorized`, for each algorithm meson can pin; roles gate operations.

use crate::harness::{Meson, seed_vm};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jsonwebtoken::{Algorithm, EncodingKey};
use meson_api::auth::testing::{claims, sign};
use meson_api::auth::{AuthConfig, KeySource};
use meson_db::testing::TestDatabase;
use mesond::server::{ApiServer, ApiSettings};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::path::PathBuf;

const ISSUER: &str = "https://idp.example.test/realms/meson";
const SECRET: &[u8] = b"an-hs256-e2e-secret-of-32-bytes!";

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../services/meson-api/tests/fixtures")
        .join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).expect("fixture")
}

/// One algorithm meson can pin, with the key that signs for it.
struct Signer {
    alg: Algorithm,
    key: EncodingKey,
    kid: Option<&'static str>,
    /// The verification key's bytes as an attacker could find them (the
    /// public key's PEM; for HS256, a key of another algorithm).
    public_pem: String,
    config: AuthConfig,
}

fn signers() -> Vec<Signer> {
    let jwks = KeySource::JwksFile(fixture("test-jwks.json"));
    let asym = |alg, key: EncodingKey, kid, public: &str| Signer {
        alg,
        key,
        kid: Some(kid),
        public_pem: read(public),
        config: AuthConfig::new(alg, jwks.clone(), ISSUER),
    };
    vec![
        Signer {
            alg: Algorithm::HS256,
            key: EncodingKey::from_secret(SECRET),
            kid: None,
            public_pem: read("rsa-test-pub.pem"),
            config: AuthConfig::new(Algorithm::HS256, KeySource::Secret(SECRET.to_vec()), ISSUER),
        },
        asym(
            Algorithm::RS256,
            EncodingKey::from_rsa_pem(read("rsa-test-key.pem").as_bytes()).unwrap(),
            "rsa-test",
            "rsa-test-pub.pem",
        ),
        asym(
            Algorithm::ES256,
            EncodingKey::from_ec_pem(read("ec-p256-test-key.pem").as_bytes()).unwrap(),
            "ec-test",
            "ec-p256-test-pub.pem",
        ),
        asym(
            Algorithm::EdDSA,
            EncodingKey::from_ed_pem(read("ed25519-test-key.pem").as_bytes()).unwrap(),
            "ed25519-test",
            "ed25519-test-pub.pem",
        ),
    ]
}

/// The REST API alone, verifying tokens as `config` says.
struct Api {
    base: String,
    http: reqwest::Client,
    server: ApiServer,
    _db: TestDatabase,
}

impl Api {
    async fn start(config: AuthConfig) -> Api {
        let db = TestDatabase::new().await;
        let auth = meson_api::Auth::new(config).await.expect("auth config");
        let server = ApiServer::start(
            "127.0.0.1:0".parse().unwrap(),
            db.api_pool(),
            ApiSettings::new(auth),
        )
        .await
        .expect("api");
        Api {
            base: format!("http://{}", server.addr),
            http: reqwest::Client::new(),
            server,
            _db: db,
        }
    }

    /// `GET /v1/vms` with this `Authorization` header (none: without one).
    async fn list(
        &self,
        authorization: Option<&str>,
    ) -> (StatusCode, reqwest::header::HeaderMap, String) {
        let mut req = self.http.get(format!("{}/v1/vms", self.base));
        if let Some(a) = authorization {
            req = req.header("authorization", a);
        }
        let res = req.send().await.unwrap();
        let (status, headers) = (res.status(), res.headers().clone());
        (status, headers, res.text().await.unwrap())
    }
}

fn unsigned(header: &Value, claims: &Value) -> String {
    format!(
        "{}.{}.",
        B64.encode(header.to_string()),
        B64.encode(claims.to_string())
    )
}

/// Every way a token can be wrong, named.
fn bad_tokens(s: &Signer) -> Vec<(String, String)> {
    let good = claims(
        ISSUER,
        "acme",
        "alice",
        &["editor"],
        chrono::Duration::minutes(5),
    );
    let signed = |c: &Value| sign(s.alg, &s.key, s.kid, c);
    let without = |field: &str| {
        let mut c = good.clone();
        c.as_object_mut().unwrap().remove(field);
        signed(&c)
    };
    let with = |field: &str, v: Value| {
        let mut c = good.clone();
        c[field] = v;
        signed(&c)
    };
    let now = chrono::Utc::now().timestamp();
    let valid = signed(&good);
    let (head, rest) = valid.split_once('.').unwrap();
    let (payload, signature) = rest.split_once('.').unwrap();
    let mut flipped = signature.as_bytes().to_vec();
    flipped[4] = if flipped[4] == b'A' { b'B' } else { b'A' };
    let escalated = with("roles", json!(["admin"]));
    let escalated_payload = escalated.split('.').nth(1).unwrap();
    let mut out = vec![
        (
            "alg none".into(),
            unsigned(&json!({"alg": "none", "typ": "JWT"}), &good),
        ),
        ("alg None, signature kept".into(), {
            let t = unsigned(&json!({"alg": "None"}), &good);
            format!("{t}{signature}")
        }),
        (
            "another algorithm keyed with the verification key's bytes".into(),
            sign(
                if s.alg == Algorithm::HS256 {
                    Algorithm::HS384
                } else {
                    Algorithm::HS256
                },
                &EncodingKey::from_secret(s.public_pem.as_bytes()),
                s.kid,
                &good,
            ),
        ),
        (
            "a bad signature".into(),
            format!("{head}.{payload}.{}", String::from_utf8(flipped).unwrap()),
        ),
        (
            "a payload swapped under a valid signature".into(),
            format!("{head}.{escalated_payload}.{signature}"),
        ),
        ("expired".into(), with("exp", json!(now - 600))),
        ("not yet valid".into(), with("nbf", json!(now + 600))),
        (
            "another issuer".into(),
            with("iss", json!("https://evil.example.test")),
        ),
        ("another audience".into(), with("aud", json!("kubernetes"))),
        ("a tenant of '*'".into(), with("tenant", json!("*"))),
        ("no known role".into(), with("roles", json!(["root"]))),
        ("garbage".into(), "not.a.jwt".into()),
    ];
    for claim in ["exp", "iss", "aud", "sub", "tenant", "roles"] {
        out.push((format!("no {claim}"), without(claim)));
    }
    if let Some(kid) = s.kid {
        out.push((
            "an unknown kid".into(),
            sign(s.alg, &s.key, Some(&format!("{kid}-retired")), &good),
        ));
    }
    out
}

#[tokio::test]
async fn every_bad_token_gets_the_same_bare_unauthorized_with_each_algorithm() {
    for s in signers() {
        let api = Api::start(s.config.clone()).await;
        let good = sign(
            s.alg,
            &s.key,
            s.kid,
            &claims(
                ISSUER,
                "acme",
                "alice",
                &["viewer"],
                chrono::Duration::minutes(5),
            ),
        );
        let (status, headers, body) = api.list(Some(&format!("Bearer {good}"))).await;
        assert_eq!(status, StatusCode::OK, "{:?}: {body}", s.alg);
        assert!(headers.contains_key("ratelimit-remaining"));

        let mut cases = bad_tokens(&s)
            .into_iter()
            .map(|(what, t)| (what, Some(format!("Bearer {t}"))))
            .collect::<Vec<_>>();
        cases.push(("no Authorization header".into(), None));
        cases.push(("another scheme".into(), Some(format!("Basic {good}"))));
        cases.push(("an empty bearer".into(), Some("Bearer ".into())));
        for (what, header) in cases {
            let (status, headers, body) = api.list(header.as_deref()).await;
            assert_eq!(
                status,
                StatusCode::UNAUTHORIZED,
                "{:?}, {what}: {body}",
                s.alg
            );
            // The same answer whatever was wrong: nothing on the wire says why.
            let body: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(
                body,
                json!({"error": {"code": "unauthorized", "message": "unauthorized",
                    "details": {}}}),
                "{:?}, {what}",
                s.alg
            );
            assert_eq!(headers["www-authenticate"], "Bearer realm=\"meson\"");
            assert!(!headers.contains_key("ratelimit-remaining"), "{what}");
        }
        api.server.shutdown().await;
    }
}

#[tokio::test]
async fn roles_gate_operations_from_one_table() {
    let m = Meson::start().await;
    let viewer = m.token("dev", "vera", meson_api::Role::Viewer);
    let editor = m.token("dev", "ed", meson_api::Role::Editor);
    use reqwest::Method;

    // Viewers read; they cannot create, change, delete or fetch credentials.
    assert_eq!(
        m.call(Method::GET, "/v1/vms", &viewer, None).await.status,
        StatusCode::OK
    );
    assert_eq!(
        m.call(Method::GET, "/v1/quotas", &viewer, None)
            .await
            .status,
        StatusCode::OK
    );
    let r = m
        .call(Method::POST, "/v1/vms", &viewer, Some(&seed_vm()))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "forbidden");
    let r = m
        .call(
            Method::POST,
            "/v1/networks",
            &viewer,
            Some(&json!({"name": "n", "cidr": "10.9.0.0/24"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let any = uuid::Uuid::new_v4();
    for (method, path) in [
        (Method::DELETE, format!("/v1/vms/{any}")),
        (Method::PATCH, format!("/v1/vms/{any}")),
        (Method::GET, format!("/v1/clusters/{any}/kubeconfig")),
    ] {
        let body = (method == Method::PATCH).then(|| json!({"name": "x"}));
        let r = m.call(method.clone(), &path, &viewer, body.as_ref()).await;
        // Refused before anything is looked up: not even a 404.
        assert_eq!(
            r.status,
            StatusCode::FORBIDDEN,
            "{method} {path}: {}",
            r.body
        );
    }

    // Editors work on their tenant; only admins reach the operator routes.
    let r = m
        .call(Method::POST, "/v1/vms", &editor, Some(&seed_vm()))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    for (method, path, body) in [
        (Method::GET, "/v1/audit", None),
        (Method::GET, "/v1/targets", None),
        (Method::POST, "/v1/targets", Some(json!({"name": "x"}))),
        (Method::GET, "/v1/tenants/dev/quotas", None),
        (
            Method::PATCH,
            "/v1/tenants/dev/quotas",
            Some(json!({"vms": 1000})),
        ),
    ] {
        for token in [&viewer, &editor] {
            let r = m.call(method.clone(), path, token, body.as_ref()).await;
            assert_eq!(
                r.status,
                StatusCode::FORBIDDEN,
                "{method} {path}: {}",
                r.body
            );
        }
        let r = m.call(method.clone(), path, &m.token, body.as_ref()).await;
        assert_ne!(
            r.status,
            StatusCode::FORBIDDEN,
            "admin {method} {path}: {}",
            r.body
        );
    }
    m.stop().await;
}
