//! A web page plays the attacker against `mesond dev`, with real HTTP: its
//! Elemento gateway (logged in as the dev tenant, as a developer's machine
//! runs it) and its REST API. What a browser would send for a page of
//! another site (a "simple" `text/plain` POST, a rebound DNS name, an
//! `<img>` login, a cross-site logout) is refused, and nothing is created
//! or changed; the same calls from a program, from the listener's own
//! pages and from an allowed origin still work.

#[path = "../../../tests/e2e/harness.rs"]
#[allow(dead_code)]
mod harness;

use harness::Meson;
use meson_elemento::Daemon;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// The origin configured as allowed (Electros' pages, in this test).
const ELECTROS: &str = "http://electros.localhost:5173";
const EVIL: &str = "http://evil.example";

async fn dev() -> Meson {
    Meson::start_with(|o| {
        o.elemento = Some(meson_elemento::Config {
            allowed_origins: vec![ELECTROS.to_owned()],
            ..meson_elemento::Config::new("http://set-by-dev").any_ports()
        });
    })
    .await
}

struct Sent {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    text: String,
}

impl Sent {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }
}

/// One request, headers exactly as given (`host` included).
async fn send(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<(&str, &str)>,
) -> Sent {
    let mut req = reqwest::Client::new().request(method, url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if let Some((content_type, text)) = body {
        req = req
            .header("content-type", content_type)
            .body(text.to_owned());
    }
    let res = req.send().await.expect("request sent");
    Sent {
        status: res.status(),
        headers: res.headers().clone(),
        text: res.text().await.unwrap_or_default(),
    }
}

fn daemon_url(m: &Meson, d: Daemon, path: &str) -> String {
    let gw = m.dev().elemento.as_ref().expect("the gateway runs");
    format!(
        "http://{}{}{path}",
        gw.addr(d).expect("listening"),
        d.base()
    )
}

fn daemon_host(m: &Meson, d: Daemon) -> String {
    let gw = m.dev().elemento.as_ref().expect("the gateway runs");
    gw.addr(d).expect("listening").to_string()
}

/// The volumes of tenant `dev`, through the API.
async fn volumes(m: &Meson) -> Vec<Value> {
    m.get("/v1/volumes").await.body["volumes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Who the gateway's process session is.
async fn session_user(m: &Meson) -> Value {
    send(
        Method::GET,
        &daemon_url(m, Daemon::Auth, "/status"),
        &[],
        None,
    )
    .await
    .json()["username"]
        .clone()
}

#[tokio::test]
async fn no_page_of_another_site_drives_the_gateway() {
    let m = dev().await;
    assert_eq!(session_user(&m).await, "dev", "the dev token's session");
    let create = daemon_url(&m, Daemon::Storage, "/create");
    let volume = r#"{"name":"pwned","size":1,"private":true,"shareable":false,"bootable":false,"readonly":false}"#;

    // A simple request (no preflight): text/plain with a JSON body.
    for headers in [
        vec![("origin", EVIL)],
        vec![("origin", EVIL), ("sec-fetch-site", "cross-site")],
        vec![("sec-fetch-site", "cross-site")],
        vec![("origin", "null")],
        // Another page on the same machine is another origin all the same.
        vec![("origin", "http://127.0.0.1:9")],
    ] {
        let r = send(
            Method::POST,
            &create,
            &headers,
            Some(("text/plain;charset=UTF-8", volume)),
        )
        .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{headers:?}: {}", r.text);
        assert!(!r.headers.contains_key("access-control-allow-origin"));
        // With the right type it is refused all the same.
        let r = send(
            Method::POST,
            &create,
            &headers,
            Some(("application/json", volume)),
        )
        .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{headers:?}: {}", r.text);
    }
    // A program that sends JSON as text is told so.
    let r = send(Method::POST, &create, &[], Some(("text/plain", volume))).await;
    assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{}", r.text);
    assert!(
        r.json()["detail"]
            .as_str()
            .unwrap()
            .contains("application/json")
    );
    assert!(volumes(&m).await.is_empty(), "nothing was created");

    // Every method is refused to another site's page: reads too (the
    // session is ambient), and credentials above all.
    let creds = daemon_url(
        &m,
        Daemon::Service,
        "/kaas/credentials/0190f5f2-0000-7000-8000-000000000000",
    );
    for url in [daemon_url(&m, Daemon::Compute, "/status"), creds.clone()] {
        let r = send(Method::GET, &url, &[("origin", EVIL)], None).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{url}: {}", r.text);
        let r = send(Method::GET, &url, &[("sec-fetch-site", "cross-site")], None).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{url}: {}", r.text);
    }

    // DNS rebinding: the page's own name reaches 127.0.0.1; every listener
    // refuses it before routing, reads included.
    for d in Daemon::ALL {
        let host = daemon_host(&m, d);
        let port = host.rsplit(':').next().unwrap();
        let rebound = format!("evil.example:{port}");
        let r = send(
            Method::GET,
            &daemon_url(&m, d, "/"),
            &[("host", &rebound)],
            None,
        )
        .await;
        assert_eq!(r.status, StatusCode::MISDIRECTED_REQUEST, "{}", d.name());
        assert!(
            r.json()["detail"]
                .as_str()
                .unwrap()
                .contains("evil.example")
        );
    }
    let port = daemon_host(&m, Daemon::Service);
    let port = port.rsplit(':').next().unwrap();
    let r = send(
        Method::GET,
        &creds,
        &[("host", &format!("attacker.example:{port}"))],
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::MISDIRECTED_REQUEST, "{}", r.text);
    let r = send(
        Method::POST,
        &create,
        &[("host", "evil.example")],
        Some(("application/json", volume)),
    )
    .await;
    assert_eq!(r.status, StatusCode::MISDIRECTED_REQUEST, "{}", r.text);
    assert!(volumes(&m).await.is_empty(), "nothing was created");

    // Login CSRF: an <img> logging the process session in as mallory.
    let mallory = m.token("mallory", "mallory", meson_api::Role::Editor);
    let login = daemon_url(&m, Daemon::Auth, "/login");
    let csrf = format!("{login}?username=mallory&password={mallory}");
    let r = send(
        Method::GET,
        &csrf,
        &[
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-dest", "image"),
        ],
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    // Even from no site at all, a GET never swaps the session.
    let r = send(Method::GET, &csrf, &[], None).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text);
    assert_eq!(r.json()["authenticated"], false);
    assert!(r.headers.get("set-cookie").is_none());
    assert_eq!(session_user(&m).await, "dev", "the session is the user's");
    // Nor does a POST from another site's page.
    let r = send(
        Method::POST,
        &login,
        &[("origin", EVIL)],
        Some((
            "application/json",
            &json!({"username": "mallory", "password": mallory}).to_string(),
        )),
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    assert_eq!(session_user(&m).await, "dev");
    // The user's next volume lands in the user's tenant.
    let r = send(
        Method::POST,
        &create,
        &[],
        Some(("application/json", volume)),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let mine = volumes(&m).await;
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(mine[0]["name"], "pwned");
    let theirs = m.call(Method::GET, "/v1/volumes", &mallory, None).await;
    assert_eq!(
        theirs.body["volumes"],
        json!([]),
        "nothing in mallory's tenant"
    );

    // GET /login re-validates the session it is the session of.
    let again = format!("{login}?username=dev&password={}", m.token);
    let r = send(Method::GET, &again, &[], None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json()["authenticated"], true);

    // A cross-site logout: refused, the user stays logged in.
    let logout = daemon_url(&m, Daemon::Auth, "/logout");
    for headers in [
        vec![("origin", EVIL)],
        vec![("sec-fetch-site", "cross-site")],
    ] {
        let r = send(Method::POST, &logout, &headers, None).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{headers:?}: {}", r.text);
    }
    assert_eq!(session_user(&m).await, "dev");

    // The listener's own pages and Electros' may.
    let own = format!("http://{}", daemon_host(&m, Daemon::Storage));
    let r = send(
        Method::POST,
        &daemon_url(&m, Daemon::Storage, "/cancreate"),
        &[("origin", &own), ("sec-fetch-site", "same-origin")],
        Some(("application/json", r#"{"size":1}"#)),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let preflight = send(
        Method::OPTIONS,
        &create,
        &[
            ("origin", ELECTROS),
            ("access-control-request-method", "POST"),
            ("access-control-request-headers", "content-type"),
        ],
        None,
    )
    .await;
    assert_eq!(preflight.status, StatusCode::NO_CONTENT);
    assert_eq!(preflight.headers["access-control-allow-origin"], ELECTROS);
    assert_eq!(
        preflight.headers["access-control-allow-credentials"],
        "true"
    );
    let r = send(
        Method::GET,
        &daemon_url(&m, Daemon::Storage, "/accessible"),
        &[("origin", ELECTROS), ("sec-fetch-site", "cross-site")],
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.headers["access-control-allow-origin"], ELECTROS);
    // Any other origin's preflight is refused, with no grant.
    let r = send(
        Method::OPTIONS,
        &create,
        &[("origin", EVIL), ("access-control-request-method", "POST")],
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert!(!r.headers.contains_key("access-control-allow-origin"));

    // A body declared larger than the daemons take: refused on its
    // headers, without waiting for the body (raw TCP: no client sends this).
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let host = daemon_host(&m, Daemon::Storage);
        let mut tcp = tokio::net::TcpStream::connect(&host).await.unwrap();
        let head = format!(
            "POST {}/create HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Content-Length: 10485760\r\n\r\n",
            Daemon::Storage.base()
        );
        tcp.write_all(head.as_bytes()).await.unwrap();
        let mut answer = vec![0u8; 4096];
        let n = tcp.read(&mut answer).await.unwrap();
        let answer = String::from_utf8_lossy(&answer[..n]);
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    }

    // elemento-cli's logout (no Origin, no body) still works.
    let r = send(Method::POST, &logout, &[], None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(session_user(&m).await, Value::Null);
    m.stop().await;
}

#[tokio::test]
async fn no_page_of_another_site_changes_anything_through_the_api() {
    let m = dev().await;
    let url = |path: &str| format!("{}{path}", m.base);
    let auth = format!("Bearer {}", m.token);
    let network = r#"{"name":"pwned","cidr":"10.9.0.0/24"}"#;

    for headers in [
        vec![("origin", EVIL)],
        vec![("sec-fetch-site", "cross-site")],
        vec![("origin", EVIL), ("authorization", auth.as_str())],
    ] {
        let r = send(
            Method::POST,
            &url("/v1/networks"),
            &headers,
            Some(("text/plain", network)),
        )
        .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{headers:?}: {}", r.text);
        assert_eq!(r.json()["error"]["code"], "forbidden");
        assert!(r.headers.contains_key("x-correlation-id"));
    }
    // A program with the wrong type is told the right one.
    let r = send(
        Method::POST,
        &url("/v1/networks"),
        &[("authorization", &auth)],
        Some(("text/plain", network)),
    )
    .await;
    assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{}", r.text);

    // Rebinding: refused before anything runs, reads and unauthenticated
    // routes included.
    let port = m.base.rsplit(':').next().unwrap().to_owned();
    for path in ["/", "/v1/vms", "/metrics", "/openapi.json"] {
        let r = send(
            Method::GET,
            &url(path),
            &[
                ("host", &format!("evil.example:{port}")),
                ("authorization", &auth),
            ],
            None,
        )
        .await;
        assert_eq!(
            r.status,
            StatusCode::MISDIRECTED_REQUEST,
            "{path}: {}",
            r.text
        );
        assert_eq!(r.json()["error"]["code"], "forbidden", "{path}");
    }

    // A credential is not handed to another site's page, even on a GET
    // (and the refusal is audited).
    let kubeconfig = url("/v1/clusters/0190f5f2-0000-7000-8000-000000000000/kubeconfig");
    let r = send(
        Method::GET,
        &kubeconfig,
        &[("origin", EVIL), ("authorization", &auth)],
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    let r = send(Method::GET, &kubeconfig, &[("authorization", &auth)], None).await;
    assert_eq!(
        r.status,
        StatusCode::NOT_FOUND,
        "a program gets the answer: {}",
        r.text
    );
    let audit = m.get("/v1/audit?operation=cluster_kubeconfig").await;
    let statuses: Vec<&Value> = audit.body["audit_entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["status"])
        .collect();
    assert!(statuses.contains(&&json!(403)), "{}", audit.body);

    // Reads from anywhere answer, but only allowed origins may read them.
    let r = send(
        Method::GET,
        &url("/v1/networks"),
        &[("origin", EVIL), ("authorization", &auth)],
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(!r.headers.contains_key("access-control-allow-origin"));
    assert_eq!(
        m.get("/v1/networks").await.body["networks"],
        json!([]),
        "nothing was created"
    );

    // Its own pages (Swagger UI at /docs) may change things.
    let r = send(
        Method::POST,
        &url("/v1/networks"),
        &[
            ("origin", &m.base),
            ("sec-fetch-site", "same-origin"),
            ("authorization", &auth),
        ],
        Some(("application/json", network)),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    m.stop().await;
}

#[tokio::test]
async fn no_get_of_any_daemon_changes_anything() {
    // Whatever a GET carries (login credentials, a body, every parameter a
    // daemon reads), no catalogued GET route opens a session or writes
    // anything: meson audits every change, and its log stays empty but for
    // the credential reads.
    let m = dev().await;
    let mallory = m.token("mallory", "mallory", meson_api::Role::Editor);
    let id = "0190f5f2-0000-7000-8000-000000000000";
    let query = format!(
        "?username=mallory&password={mallory}&name=x&size=1&vm_uid={id}&volume_id={id}\
         &network_uid={id}&service_uuid={id}&local_index={id}"
    );
    let body = json!({"username": "mallory", "password": mallory, "name": "x", "size": 1,
        "vm_uid": id, "volume_id": id, "network_uid": id, "service_uuid": id,
        "specs": [], "req": {"name": "x"}})
    .to_string();
    let mut routes = 0;
    for (d, method, path) in meson_elemento::catalog::ROUTES {
        if *method != "GET" {
            continue;
        }
        let path = path
            .replace("{service}", "kaas")
            .replace("{file}", "supported_providers")
            .split('/')
            .map(|seg| if seg.starts_with('{') { id } else { seg })
            .collect::<Vec<_>>()
            .join("/");
        let gw = m.dev().elemento.as_ref().unwrap();
        let url = format!("http://{}{path}{query}", gw.addr(*d).unwrap());
        send(Method::GET, &url, &[], None).await;
        send(Method::GET, &url, &[], Some(("application/json", &body))).await;
        routes += 1;
    }
    assert!(routes > 50, "{routes} GET routes");
    assert_eq!(session_user(&m).await, "dev");
    let audit = m.get("/v1/audit").await;
    let changes: Vec<&Value> = audit.body["audit_entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["operation"] != "cluster_kubeconfig")
        .collect();
    assert!(changes.is_empty(), "{changes:?}");
    for list in ["/v1/vms", "/v1/volumes", "/v1/networks", "/v1/clusters"] {
        let r = m.get(list).await;
        let key = list.trim_start_matches("/v1/");
        assert_eq!(r.body[key], json!([]), "{list}");
        let r = m.call(Method::GET, list, &mallory, None).await;
        assert_eq!(r.body[key], json!([]), "mallory's {list}");
    }
    m.stop().await;
}
