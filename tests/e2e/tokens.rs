//! API tokens issued by meson: an owner creates one (its secret shown
//! once), automation authenticates with it at its role, as `token:<id>` in
//! the audit log; revoked or expired, it is refused at the next request.

use crate::harness::{Meson, seed_vm};
use meson_api::Role;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

async fn create(m: &Meson, owner: &str, body: Value) -> (Value, String) {
    let r = m.call(Method::POST, "/v1/tokens", owner, Some(&body)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    (
        r.body["token"].clone(),
        r.body["secret"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn a_token_authenticates_at_its_role_until_revoked_or_expired() {
    let m = Meson::start().await;
    let owner = m.token("dev", "olga", Role::Owner);

    let (token, secret) = create(
        &m,
        &owner,
        json!({"name": "ci", "role": "editor", "expires_in": 3600}),
    )
    .await;
    let id = token["id"].as_str().unwrap().to_owned();
    assert!(
        secret.starts_with("meson_") && secret.len() == 46,
        "{secret}"
    );
    assert_eq!(token["prefix"], &secret[..12]);
    assert_eq!(token["role"], "editor");
    assert_eq!(token["created_by"], "olga");
    assert!(
        token["expires"].is_string() && token["last_used"].is_null(),
        "{token}"
    );

    // The secret authenticates as the tenant, at the token's role.
    let r = m
        .call(Method::POST, "/v1/vms", &secret, Some(&seed_vm()))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let vm = r.body["vm"]["id"].as_str().unwrap().to_owned();
    let r = m.get(&format!("/v1/vms/{vm}")).await;
    assert_eq!(r.status, StatusCode::OK, "the dev tenant's VM: {}", r.body);
    // An editor manages no tokens.
    let r = m.call(Method::GET, "/v1/tokens", &secret, None).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    // Audited as the token.
    let r = m.get("/v1/audit?operation=vm_create").await;
    let entry = r.body["audit_entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["resource_id"] == vm.as_str())
        .cloned()
        .expect("the create's entry");
    assert_eq!(entry["subject"], format!("token:{id}"), "{entry}");
    assert_eq!(entry["role"], "editor");
    // Its use is recorded; its secret is never shown again.
    let r = m
        .call(Method::GET, &format!("/v1/tokens/{id}"), &owner, None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(r.body["token"]["last_used"].is_string(), "{}", r.body);
    assert!(!r.body.to_string().contains(&secret[6..]));
    let r = m.call(Method::GET, "/v1/tokens", &owner, None).await;
    assert!(!r.body.to_string().contains(&secret[6..]));
    assert!(
        r.body["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["id"] == id.as_str()),
        "{}",
        r.body
    );

    // A viewer's token reads and changes nothing.
    let (_, viewer) = create(&m, &owner, json!({"name": "dashboards", "role": "viewer"})).await;
    assert_eq!(
        m.call(Method::GET, "/v1/vms", &viewer, None).await.status,
        StatusCode::OK
    );
    let r = m
        .call(Method::POST, "/v1/vms", &viewer, Some(&seed_vm()))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);

    // Bad requests name every bad field; names are unique among live tokens.
    let r = m
        .call(
            Method::POST,
            "/v1/tokens",
            &owner,
            Some(&json!({"name": "", "role": "admin", "expires_in": 5})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.rejected_fields(), ["expires_in", "name", "role"]);
    let r = m
        .call(
            Method::POST,
            "/v1/tokens",
            &owner,
            Some(&json!({"name": "ci", "role": "viewer"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "uniqueness_error");

    // Revoked: refused at the very next request.
    let r = m
        .call(Method::DELETE, &format!("/v1/tokens/{id}"), &owner, None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(r.body["token"]["revoked"].is_string());
    assert_eq!(r.body["token"]["revoked_by"], "olga");
    let r = m.call(Method::GET, "/v1/vms", &secret, None).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.body);
    assert!(r.headers.get("www-authenticate").is_some());
    let r = m
        .call(Method::DELETE, &format!("/v1/tokens/{id}"), &owner, None)
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    let live = m.call(Method::GET, "/v1/tokens", &owner, None).await;
    assert!(!live.body.to_string().contains(&id));
    let all = m
        .call(Method::GET, "/v1/tokens?revoked=true", &owner, None)
        .await;
    assert!(all.body.to_string().contains(&id));
    // Its name is free again.
    create(&m, &owner, json!({"name": "ci", "role": "viewer"})).await;

    // Expired: refused as well.
    let (t, expiring) = create(
        &m,
        &owner,
        json!({"name": "short", "role": "viewer", "expires_in": 60}),
    )
    .await;
    assert_eq!(
        m.call(Method::GET, "/v1/vms", &expiring, None).await.status,
        StatusCode::OK
    );
    let tid: uuid::Uuid = t["id"].as_str().unwrap().parse().unwrap();
    meson_db::testing::expire_token(m.database(), tid)
        .await
        .unwrap();
    let r = m.call(Method::GET, "/v1/vms", &expiring, None).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.body);

    // A credential is never kept for an Idempotency-Key's replay: a retry
    // with the key is told so, and the secret is nowhere in the answer.
    let keyed = |body: Value| {
        m.http
            .post(format!("{}/v1/tokens", m.base))
            .bearer_auth(&owner)
            .header("idempotency-key", "token-once")
            .json(&body)
    };
    let body = json!({"name": "keyed", "role": "viewer"});
    let first = keyed(body.clone()).send().await.unwrap();
    assert_eq!(first.status(), StatusCode::CREATED);
    let first: Value = first.json().await.unwrap();
    let secret = first["secret"].as_str().unwrap().to_owned();
    let again = keyed(body).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::CONFLICT);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let text = again.text().await.unwrap();
    assert!(
        text.contains("does not keep") && !text.contains(&secret[6..]),
        "{text}"
    );

    // A secret meson never issued; another tenant's owner sees nothing.
    let forged = format!("meson_{}", "A".repeat(40));
    let r = m.call(Method::GET, "/v1/vms", &forged, None).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let other = m.token("other-tenant", "oscar", Role::Owner);
    let r = m
        .call(Method::GET, &format!("/v1/tokens/{id}"), &other, None)
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let r = m
        .call(Method::GET, "/v1/tokens?revoked=true", &other, None)
        .await;
    assert_eq!(r.body["tokens"], json!([]), "{}", r.body);
    let r = m
        .call(
            Method::DELETE,
            &format!("/v1/tokens/{}", t["id"].as_str().unwrap()),
            &other,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    m.stop().await;
}
