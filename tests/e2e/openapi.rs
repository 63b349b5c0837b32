//! The OpenAPI document and Swagger UI, served over HTTP.

use crate::harness::Meson;
use reqwest::StatusCode;
use serde_json::Value;

#[tokio::test]
async fn openapi_json_is_the_checked_in_document() {
    let m = Meson::start().await;
    // No token needed: the document is public.
    let res = m
        .http
        .get(format!("{}/openapi.json", m.base))
        .send()
        .await
        .expect("GET /openapi.json");
    assert_eq!(res.status(), StatusCode::OK);
    let content_type = res.headers()[reqwest::header::CONTENT_TYPE]
        .to_str()
        .expect("content type")
        .to_owned();
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
    let served: Value = res.json().await.expect("json document");

    assert_eq!(served["openapi"], "3.1.0");
    for path in ["/v1/vms", "/v1/vms/{id}", "/v1/actions/{id}", "/v1/quotes"] {
        assert!(served["paths"][path].is_object(), "{path} is documented");
    }
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../openapi/meson.json");
    let checked_in: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("openapi/meson.json"))
            .expect("checked-in json");
    assert!(
        served == checked_in,
        "GET /openapi.json differs from openapi/meson.json; regenerate it with \
         `MESON_WRITE_OPENAPI=1 cargo test -p meson-api openapi`"
    );
    m.stop().await;
}

#[tokio::test]
async fn docs_serve_swagger_ui_on_the_document() {
    let m = Meson::start().await;
    let res = m
        .http
        .get(format!("{}/docs", m.base))
        .send()
        .await
        .expect("GET /docs");
    assert_eq!(res.status(), StatusCode::OK, "{}", res.url());
    let content_type = res.headers()[reqwest::header::CONTENT_TYPE]
        .to_str()
        .expect("content type")
        .to_owned();
    assert!(content_type.starts_with("text/html"), "{content_type}");
    let html = res.text().await.expect("html");
    assert!(html.contains("swagger-ui"), "{html}");

    // The page's initializer points Swagger UI at our document; its assets
    // are served from the binary (vendored at build time).
    let init = m
        .http
        .get(format!("{}/docs/swagger-initializer.js", m.base))
        .send()
        .await
        .expect("initializer");
    assert_eq!(init.status(), StatusCode::OK);
    assert!(init.text().await.expect("js").contains("/openapi.json"));
    let bundle = m
        .http
        .get(format!("{}/docs/swagger-ui-bundle.js", m.base))
        .send()
        .await
        .expect("bundle");
    assert_eq!(bundle.status(), StatusCode::OK);
    assert!(bundle.bytes().await.expect("js").len() > 100_000);
    m.stop().await;
}

#[tokio::test]
async fn the_root_is_an_index_of_the_server_that_needs_no_token() {
    let m = Meson::start().await;
    // No token.
    let res = m
        .http
        .get(format!("{}/", m.base))
        .send()
        .await
        .expect("GET /");
    assert_eq!(res.status(), StatusCode::OK);
    let index: Value = res.json().await.expect("json");
    assert_eq!(index["name"], "meson");
    assert!(
        index["version"].as_str().is_some_and(|v| !v.is_empty()),
        "{index}"
    );
    assert_eq!(index["links"]["api"], "/v1");
    // Every other link answers, without a token.
    for key in ["docs", "openapi", "healthz", "readyz", "metrics"] {
        let path = index["links"][key].as_str().expect(key);
        let res = m
            .http
            .get(format!("{}{path}", m.base))
            .send()
            .await
            .expect("sent");
        assert_eq!(res.status(), StatusCode::OK, "{key}: {path}");
    }
    // It is documented, as the other operations' endpoints are, public.
    let doc: Value = m
        .http
        .get(format!("{}/openapi.json", m.base))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    let op = &doc["paths"]["/"]["get"];
    assert_eq!(op["operationId"], "index", "{op}");
    assert_eq!(op["security"], serde_json::json!([{}]), "{op}");
    // Only GET (and HEAD).
    let res = m
        .http
        .post(format!("{}/", m.base))
        .send()
        .await
        .expect("sent");
    assert_eq!(res.status(), StatusCode::METHOD_NOT_ALLOWED);
    m.stop().await;
}
