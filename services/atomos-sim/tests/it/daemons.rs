//! Each port serves its own daemon: health, version, and 404 for another daemon's paths.

use crate::common::{client_with, opts, sim};
use atomos_driver::{AtomosClient, ErrorKind, Ports};
use std::time::Duration;

#[tokio::test]
async fn wrong_daemon_port_is_404() {
    let sim = sim(Duration::from_millis(50)).await;
    let target = sim.host("small").unwrap().target().clone();
    let http = reqwest::Client::new();
    let storage_path_on_compute = format!(
        "http://{}:{}/api/v1.0/client/volume/accessible",
        target.host, target.ports.compute
    );
    let resp = http.get(storage_path_on_compute).send().await.unwrap();
    assert_eq!(resp.status(), 404);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["detail"], "Not Found");

    // A client whose compute port points at the storage daemon gets NotFound.
    let mut crossed = target.clone();
    crossed.ports = Ports {
        compute: target.ports.storage,
        ..target.ports
    };
    let c = AtomosClient::new(crossed, opts()).unwrap();
    let err = c.vms().await.unwrap_err();
    assert_eq!((err.kind, err.status), (ErrorKind::NotFound, Some(404)));
    // The right port still answers.
    client_with(&sim, "small", opts()).vms().await.unwrap();
}

#[tokio::test]
async fn every_daemon_answers_health_and_version() {
    let sim = sim(Duration::from_millis(50)).await;
    let t = sim.host("gpu").unwrap().target().clone();
    let http = reqwest::Client::new();
    for (port, greeting) in [
        (t.ports.compute, "Matcher"),
        (t.ports.storage, "Storage"),
        (t.ports.network, "Network"),
        (t.ports.auth, "Authenticator"),
    ] {
        let text = http
            .get(format!("http://{}:{port}/", t.host))
            .send()
            .await
            .unwrap();
        assert_eq!(text.status(), 200);
        assert!(text.text().await.unwrap().contains(greeting));
        let version = http
            .get(format!("http://{}:{port}/version", t.host))
            .send()
            .await
            .unwrap();
        assert_eq!(version.status(), 200);
    }
}

#[tokio::test]
async fn malformed_requests_get_400_with_detail() {
    let sim = sim(Duration::from_millis(50)).await;
    let t = sim.host("small").unwrap().target().clone();
    let http = reqwest::Client::new();
    for (port, path) in [
        (t.ports.compute, "/api/v1.0/client/vm/register"),
        (t.ports.compute, "/api/v1.0/client/vm/canallocate"),
        (t.ports.storage, "/api/v1.0/client/volume/create"),
        (t.ports.network, "/api/v1.0/client/network/create"),
        (t.ports.auth, "/api/v1/authenticate/login"),
    ] {
        // The last body has a wrongly typed field for each route.
        let wrong_types = r#"{"slots": "many", "name": 5, "network_name": 5, "username": 5}"#;
        for body in ["", "{", "[1,2]", wrong_types] {
            let resp = http
                .post(format!("http://{}:{port}{path}", t.host))
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 400, "{path} {body:?}");
            let detail: serde_json::Value = resp.json().await.unwrap();
            assert!(detail["detail"].is_string(), "{path} {body:?}");
        }
    }
    // Wrong method: FastAPI-style 405.
    let resp = http
        .get(format!(
            "http://{}:{}/api/v1.0/client/vm/register",
            t.host, t.ports.compute
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
}

#[tokio::test]
async fn login_refuses_empty_credentials_and_logout_ends_the_session() {
    let sim = sim(Duration::from_millis(50)).await;
    let c = client_with(&sim, "small", opts());
    assert!(
        c.auth_status().await.unwrap().authenticated,
        "daemons start logged in"
    );
    assert!(!c.login("", "").await.unwrap());
    let t = c.target();
    reqwest::Client::new()
        .post(format!(
            "http://{}:{}/api/v1/authenticate/logout",
            t.host, t.ports.auth
        ))
        .send()
        .await
        .unwrap();
    assert!(!c.auth_status().await.unwrap().authenticated);
    assert!(c.login("bob", "pw").await.unwrap());
    assert_eq!(
        c.auth_status().await.unwrap().username.as_deref(),
        Some("bob")
    );
}

#[tokio::test]
async fn shutdown_stops_every_daemon() {
    let sim = sim(Duration::from_millis(50)).await;
    let c = client_with(
        &sim,
        "small",
        atomos_driver::ClientOptions {
            retries: 0,
            ..opts()
        },
    );
    c.vms().await.unwrap();
    sim.clone().shutdown().await;
    let err = c.vms().await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(c.volumes().await.unwrap_err().is_transient());
}
