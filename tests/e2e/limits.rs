//! Rate limits per tenant (a larger budget for action polling), limits on
//! one request (body, JSON depth, headers, time), and CORS for the
//! dashboard's origin: over real HTTP.

use crate::harness::{Meson, seed_vm};
use meson_api::ratelimit::RateLimitConfig;
use reqwest::{Method, StatusCode};
use serde_json::json;
use std::time::Duration;

fn header(r: &crate::harness::Reply, name: &str) -> u64 {
    r.headers
        .get(name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", r.headers))
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_tenant_over_its_rate_limit_gets_429_and_polling_has_its_own_budget() {
    let m = Meson::start_with(|o| {
        o.api.rate_limits = RateLimitConfig {
            api_per_minute: 4,
            polling_per_minute: 10,
        };
    })
    .await;
    // Every answer says what is left, errors included.
    let a = m.get("/v1/vms").await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(
        (
            header(&a, "ratelimit-limit"),
            header(&a, "ratelimit-remaining")
        ),
        (4, 3)
    );
    assert!(
        (1..=15).contains(&header(&a, "ratelimit-reset")),
        "{:?}",
        a.headers
    );
    let r = m.get(&format!("/v1/vms/{}", uuid::Uuid::new_v4())).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(header(&r, "ratelimit-remaining"), 2);
    let r = m.post("/v1/vms", &json!({})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(header(&r, "ratelimit-remaining"), 1);
    let r = m.get("/v1/flavors").await;
    assert_eq!(header(&r, "ratelimit-remaining"), 0);

    let r = m.get("/v1/vms").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "rate_limit_exceeded");
    let retry = header(&r, "retry-after");
    // One request comes back every 15 s.
    assert!((1..=15).contains(&retry), "{retry}");
    assert_eq!(r.body["error"]["details"]["retry_after"], retry);
    assert_eq!(header(&r, "ratelimit-remaining"), 0);
    assert!(header(&r, "ratelimit-reset") >= 45);
    assert!(r.headers.contains_key("x-correlation-id"));

    // Reading actions draws on the polling budget, untouched so far.
    let r = m
        .get(&format!("/v1/actions?id={}", uuid::Uuid::new_v4()))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        (
            header(&r, "ratelimit-limit"),
            header(&r, "ratelimit-remaining")
        ),
        (10, 9)
    );
    for left in (0..9).rev() {
        let r = m
            .get(&format!("/v1/actions/{}", uuid::Uuid::new_v4()))
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        assert_eq!(header(&r, "ratelimit-remaining"), left);
    }
    let r = m
        .get(&format!("/v1/actions/{}", uuid::Uuid::new_v4()))
        .await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);

    // Another tenant has budgets of its own.
    let other = m.token("other", "olga", meson_api::Role::Viewer);
    let r = m.call(Method::GET, "/v1/vms", &other, None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(header(&r, "ratelimit-remaining"), 3);
    // Operations endpoints are not limited.
    let r = m
        .http
        .get(format!("{}/healthz", m.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    m.stop().await;
}

#[tokio::test]
async fn oversized_deep_or_slow_requests_get_clear_errors() {
    let m = Meson::start_with(|o| {
        o.api.limits.body_bytes = 64 * 1024;
        o.api.limits.header_bytes = 4096;
        o.api.limits.json_depth = 8;
    })
    .await;
    // A body over the limit.
    let mut vm = seed_vm();
    vm["labels"] = json!({"blob": "x".repeat(70 * 1024)});
    let r = m.post("/v1/vms", &vm).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "payload_too_large");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("65536")
    );
    // A body declared over the limit is refused on its headers: the answer
    // does not wait for a body that never comes (it used to wait out the
    // request timeout and answer 504). Raw TCP: no client would send this.
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = m.base.trim_start_matches("http://");
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "POST /v1/vms HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: 10485760\r\n\r\n",
            m.token
        );
        tcp.write_all(head.as_bytes()).await.unwrap();
        let mut answer = vec![0u8; 4096];
        let n = tcp.read(&mut answer).await.unwrap();
        let answer = String::from_utf8_lossy(&answer[..n]);
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
        assert!(answer.contains("payload_too_large"), "{answer}");
    }
    // A body that is not sent as JSON, or says nothing of its type: 415.
    let body = serde_json::to_vec(&seed_vm()).unwrap();
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let mut req = m
            .http
            .post(format!("{}/v1/vms", m.base))
            .bearer_auth(&m.token)
            .body(body.clone());
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        let r = req.send().await.unwrap();
        assert_eq!(
            r.status(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{content_type:?}"
        );
        let b: serde_json::Value = r.json().await.unwrap();
        assert_eq!(b["error"]["code"], "unsupported_media_type", "{b}");
    }
    // JSON with parameters, or a +json type, is JSON.
    let r = m
        .http
        .post(format!("{}/v1/vms", m.base))
        .bearer_auth(&m.token)
        .header("content-type", "application/json; charset=utf-8")
        .body(r#"{"specs": 1}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // A key named twice is refused, naming it, not read one way or the other.
    let r = m
        .http
        .post(format!("{}/v1/vms", m.base))
        .bearer_auth(&m.token)
        .header("content-type", "application/json")
        .body(r#"{"provider": "ovh", "specs": {}, "provider": "ionos"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let b: serde_json::Value = r.json().await.unwrap();
    assert_eq!(b["error"]["code"], "json_error", "{b}");
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap()
            .contains("duplicate key \"provider\""),
        "{b}"
    );
    // Nesting deeper than allowed, however small.
    let mut vm = seed_vm();
    vm["labels"] = json!({"a": [[[[[[[[1]]]]]]]]});
    let r = m.post("/v1/vms", &vm).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "json_error");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deeper than 8")
    );
    // Headers over the limit: 431, the error envelope, a correlation id.
    let r = m
        .http
        .get(format!("{}/v1/vms", m.base))
        .bearer_auth(&m.token)
        .header("x-padding", "p".repeat(5000))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    assert!(r.headers().contains_key("x-correlation-id"));
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_input");
    assert_eq!(body["error"]["details"]["fields"][0]["name"], "(headers)");
    // Nothing was written by any of them.
    assert_eq!(
        m.get("/v1/vms").await.body["meta"]["pagination"]["total_entries"],
        0
    );
    m.stop().await;

    // A request that outlives the timeout answers 504 `timeout`: the VM
    // table is locked underneath, so the list cannot finish in time.
    let m = Meson::start_with(|o| o.api.limits.timeout = Duration::from_millis(200)).await;
    let mut lock = m.database().begin().await.unwrap();
    meson_db::testing::lock_vms(&mut lock).await.unwrap();
    let r = m.get("/v1/vms").await;
    assert_eq!(r.status, StatusCode::GATEWAY_TIMEOUT, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "timeout");
    lock.rollback().await.unwrap();
    // Once the lock is gone the same request answers.
    assert_eq!(m.get("/v1/vms").await.status, StatusCode::OK);
    m.stop().await;
}

#[tokio::test]
async fn the_dashboards_origin_may_call_the_api_from_a_browser() {
    let m = Meson::start_with(|o| {
        o.api.cors_origins =
            meson_edge::Edge::parse_origins(&["https://electros.example.test".into()]).unwrap();
    })
    .await;
    let preflight = |origin: &'static str| {
        m.http
            .request(Method::OPTIONS, format!("{}/v1/vms", m.base))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization, content-type, idempotency-key",
            )
            .send()
    };
    let r = preflight("https://electros.example.test").await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let h = r.headers();
    assert_eq!(
        h["access-control-allow-origin"],
        "https://electros.example.test"
    );
    let methods = h["access-control-allow-methods"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        methods.contains("POST") && methods.contains("PATCH"),
        "{methods}"
    );
    let allowed = h["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    assert!(
        allowed.contains("authorization")
            && allowed.contains("idempotency-key")
            && allowed.contains("meson-organization"),
        "{allowed}"
    );

    // An actual call exposes the headers a client needs.
    let r = m
        .http
        .get(format!("{}/v1/vms", m.base))
        .bearer_auth(&m.token)
        .header("origin", "https://electros.example.test")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://electros.example.test"
    );
    let exposed = r.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    for name in [
        "x-correlation-id",
        "ratelimit-remaining",
        "retry-after",
        "link",
    ] {
        assert!(exposed.contains(name), "{name} not in {exposed}");
    }

    // Any other origin gets no CORS headers: the browser keeps the answer.
    let r = preflight("https://evil.example.test").await.unwrap();
    assert!(!r.headers().contains_key("access-control-allow-origin"));
    let r = m
        .http
        .get(format!("{}/v1/vms", m.base))
        .bearer_auth(&m.token)
        .header("origin", "https://evil.example.test")
        .send()
        .await
        .unwrap();
    assert!(!r.headers().contains_key("access-control-allow-origin"));
    m.stop().await;
}
