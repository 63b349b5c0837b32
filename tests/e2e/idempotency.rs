//! `Idempotency-Key` on POST: replays, conflicts, tenant scoping, concurrency.

use crate::harness::{Meson, Reply, seed_vm};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// POSTs `body` to `path` as the holder of `token`, with an optional key.
async fn post_with_key(
    m: &Meson,
    token: &str,
    path: &str,
    key: Option<&str>,
    body: &Value,
) -> Reply {
    let mut req = m
        .http
        .post(format!("{}{path}", m.base))
        .bearer_auth(token)
        .json(body);
    if let Some(key) = key {
        req = req.header("Idempotency-Key", key);
    }
    let res = req.send().await.expect("request sent");
    let status = res.status();
    let headers = res.headers().clone();
    let text = res.text().await.expect("body");
    Reply {
        status,
        body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
        headers,
    }
}

fn replayed(r: &Reply) -> bool {
    r.headers
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true")
}

fn named(name: &str) -> Value {
    let mut vm = seed_vm();
    vm["specs"]["vm_name"] = json!(name);
    vm
}

async fn vm_total(m: &Meson, token: &str) -> u64 {
    let r = m
        .http
        .get(format!("{}/v1/vms", m.base))
        .bearer_auth(token)
        .send()
        .await
        .expect("list sent");
    assert_eq!(r.status(), StatusCode::OK);
    let body: Value = r.json().await.expect("list json");
    body["meta"]["pagination"]["total_entries"]
        .as_u64()
        .expect("total_entries")
}

#[tokio::test]
async fn a_retry_replays_the_first_response_and_creates_one_vm() {
    let m = Meson::start().await;
    let key = Some("create-vm-1");

    let first = post_with_key(&m, &m.token, "/v1/vms", key, &seed_vm()).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    assert!(!replayed(&first));
    let action = first.body["action"]["id"].as_str().expect("action id");

    let again = post_with_key(&m, &m.token, "/v1/vms", key, &seed_vm()).await;
    assert_eq!(again.status, StatusCode::CREATED, "{}", again.body);
    assert!(replayed(&again), "{:?}", again.headers);
    assert_eq!(again.body, first.body);
    assert_eq!(
        again.headers.get("content-type"),
        first.headers.get("content-type")
    );
    assert!(again.headers.contains_key("x-correlation-id"));
    assert_eq!(vm_total(&m, &m.token).await, 1);

    let done = m.wait_action(action).await;
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(m.inventory_counts().0, 1);

    // Still the first answer (a running action), not a fresh read.
    let late = post_with_key(&m, &m.token, "/v1/vms", key, &seed_vm()).await;
    assert!(replayed(&late));
    assert_eq!(late.body, first.body);

    // The same key on another request is a client bug: refuse it.
    let other = post_with_key(&m, &m.token, "/v1/vms", key, &named("other")).await;
    assert_eq!(other.status, StatusCode::CONFLICT, "{}", other.body);
    assert_eq!(other.body["error"]["code"], "conflict");
    assert!(
        other.body["error"]["message"]
            .as_str()
            .is_some_and(|s| s.contains("different request")),
        "{}",
        other.body
    );
    assert_eq!(vm_total(&m, &m.token).await, 1);
    assert_eq!(m.inventory_counts().0, 1);
    m.stop().await;
}

#[tokio::test]
async fn client_errors_are_replayed_and_keys_are_per_tenant() {
    let m = Meson::start().await;
    let key = Some("shared-key");
    let mut bad = seed_vm();
    bad["specs"]["req"]["mem"]["capacity"] = json!("lots");

    let first = post_with_key(&m, &m.token, "/v1/vms", key, &bad).await;
    assert_eq!(first.status, StatusCode::BAD_REQUEST, "{}", first.body);
    assert_eq!(first.body["error"]["code"], "invalid_input");
    let again = post_with_key(&m, &m.token, "/v1/vms", key, &bad).await;
    assert_eq!(again.status, StatusCode::BAD_REQUEST);
    assert!(replayed(&again));
    assert_eq!(again.body, first.body);

    // Another tenant's identical key is its own: its request runs.
    let secret = std::fs::read_to_string(m.data_dir().join("jwt-secret")).expect("jwt secret");
    let other = meson_api::Auth::hs256(secret.trim().as_bytes(), "meson-test").issue(
        "other",
        "x",
        meson_api::Role::Admin,
        chrono::Duration::minutes(5),
    );
    let theirs = post_with_key(&m, &other, "/v1/vms", key, &seed_vm()).await;
    assert_eq!(theirs.status, StatusCode::CREATED, "{}", theirs.body);
    assert!(!replayed(&theirs));
    let theirs_again = post_with_key(&m, &other, "/v1/vms", key, &seed_vm()).await;
    assert!(replayed(&theirs_again));
    assert_eq!(theirs_again.body, theirs.body);
    assert_eq!(vm_total(&m, &other).await, 1);
    assert_eq!(vm_total(&m, &m.token).await, 0);
    m.stop().await;
}

#[tokio::test]
async fn malformed_keys_are_invalid_input_and_no_key_changes_nothing() {
    let m = Meson::start().await;
    for key in [String::new(), "k".repeat(300)] {
        let r = post_with_key(&m, &m.token, "/v1/vms", Some(&key), &seed_vm()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
        assert_eq!(r.body["error"]["code"], "invalid_input");
        assert_eq!(
            r.body["error"]["details"]["fields"][0]["name"],
            "Idempotency-Key"
        );
    }
    assert_eq!(vm_total(&m, &m.token).await, 0);

    // Without a key every POST reaches the handler: a repeat is a new request.
    let first = post_with_key(&m, &m.token, "/v1/vms", None, &seed_vm()).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    assert!(!replayed(&first));
    let repeat = post_with_key(&m, &m.token, "/v1/vms", None, &seed_vm()).await;
    assert_eq!(repeat.status, StatusCode::CONFLICT, "{}", repeat.body);
    assert_eq!(repeat.body["error"]["code"], "uniqueness_error");
    assert!(!replayed(&repeat));

    // An invalid token is the handler's business (401), key or not.
    let r = post_with_key(&m, "not-a-token", "/v1/vms", Some("k"), &seed_vm()).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.body);
    m.stop().await;
}

#[tokio::test]
async fn concurrent_retries_create_exactly_one_vm() {
    let m = Meson::start().await;
    let key = Some("concurrent");
    let body = seed_vm();
    let send = || post_with_key(&m, &m.token, "/v1/vms", key, &body);
    let (a, b, c, d, e) = tokio::join!(send(), send(), send(), send(), send());
    let replies = [a, b, c, d, e];

    let originals: Vec<_> = replies
        .iter()
        .filter(|r| r.status == StatusCode::CREATED && !replayed(r))
        .collect();
    assert_eq!(originals.len(), 1, "exactly one request ran");
    let original = &originals[0].body;
    for r in &replies {
        match r.status {
            StatusCode::CREATED => assert_eq!(&r.body, original),
            StatusCode::CONFLICT => assert!(
                r.body["error"]["message"]
                    .as_str()
                    .is_some_and(|s| s.contains("still being processed")),
                "{}",
                r.body
            ),
            other => panic!("unexpected {other}: {}", r.body),
        }
    }
    assert_eq!(vm_total(&m, &m.token).await, 1);
    let done = m
        .wait_action(original["action"]["id"].as_str().expect("action id"))
        .await;
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(m.inventory_counts().0, 1);
    m.stop().await;
}
