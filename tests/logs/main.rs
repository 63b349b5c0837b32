//! Secrets never reach the logs: a whole cluster's life (create, kubeconfig,
//! delete) with every log line of the process captured at TRACE level, then
//! searched for the cluster's private keys, bootstrap token, phone-home
//! secrets, meson's sealing key, the bearer token and its signing secret,
//! and an autoscaler credential's key. Its own test binary: it installs the
//! process-wide log subscriber.

#[path = "../e2e/harness.rs"]
#[allow(dead_code)]
mod harness;

use harness::{Meson, seed_kaas};
use reqwest::StatusCode;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

/// Every value after `marker` up to the end of its token in `text`.
fn values_after<'a>(text: &'a str, marker: &str) -> Vec<&'a str> {
    text.match_indices(marker)
        .map(|(i, _)| {
            let rest = &text[i + marker.len()..];
            let end = rest
                .find(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '&')
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|v| v.len() >= 16)
        .collect()
}

/// Every log line of the process, at TRACE level: one subscriber for all
/// the tests of this binary.
fn captured() -> Captured {
    static LOGS: OnceLock<Captured> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Captured::default();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(logs.clone())
            .with_ansi(false)
            .init();
        logs
    })
    .clone()
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_unauthorized_answer_logs_why() {
    let logs = captured();
    let m = Meson::start().await;
    let mut bare = None;
    for (authorization, why) in [
        (None, "no Authorization header"),
        (Some("Basic ZGV2OmRldg=="), "scheme is not Bearer"),
        (Some("Bearer"), "is not `Bearer <token>`"),
        (Some("Bearer not-a-jwt"), "unreadable header"),
    ] {
        // A path of its own, to find its lines.
        let path = format!("/v1/vms/{}", uuid::Uuid::new_v4());
        let mut req = m.http.get(format!("{}{path}", m.base));
        if let Some(a) = authorization {
            req = req.header("authorization", a);
        }
        let r = req.send().await.expect("sent");
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{authorization:?}");
        // The answer says nothing of why: the same for every caller.
        let body = r.text().await.expect("a body");
        let bare = bare.get_or_insert_with(|| body.clone());
        assert_eq!(&body, bare, "{authorization:?}");
        assert!(!body.contains(why), "{body}");
        let text = logs.text();
        let lines: Vec<&str> = text.lines().filter(|l| l.contains(&path)).collect();
        assert!(
            lines
                .iter()
                .any(|l| l.contains(why) && l.contains(" INFO ")),
            "{authorization:?}: no INFO line says {why:?} among {lines:#?}"
        );
    }
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clusters_secrets_never_reach_the_logs() {
    let logs = captured();

    let m = Meson::start().await;
    let id = m.running_cluster(&seed_kaas()).await;
    let r = m.get(&format!("/v1/clusters/{id}/kubeconfig")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let kubeconfig = r.body.as_str().unwrap().to_owned();

    // The secrets, as the nodes received them.
    let user_data: Vec<String> = m
        .sim()
        .hosts()
        .iter()
        .flat_map(|h| h.inventory().volumes)
        .flat_map(|v| v.files)
        .filter(|f| f.name == "user-data")
        .map(|f| f.content)
        .collect();
    assert_eq!(user_data.len(), 4, "one per node");
    let mut secrets: Vec<String> = Vec::new();
    for ud in &user_data {
        // Private keys: their base64 lines (the PEM headers are no secret).
        for block in ud.split("PRIVATE KEY-----").skip(1).step_by(2) {
            secrets.extend(
                block
                    .split(['\n', '"', '\\'])
                    .map(|l| l.trim().trim_start_matches('n'))
                    .filter(|l| l.len() >= 40)
                    .map(str::to_owned),
            );
        }
        secrets.extend(values_after(ud, "token=").into_iter().map(str::to_owned));
        secrets.extend(values_after(ud, "--token ").into_iter().map(str::to_owned));
        secrets.extend(values_after(ud, "token: ").into_iter().map(str::to_owned));
    }
    secrets.extend(
        values_after(&kubeconfig, "client-key-data: ")
            .into_iter()
            .map(str::to_owned),
    );
    let key = std::fs::read_to_string(m.data_dir().join("secrets-key")).expect("dev sealing key");
    secrets.push(key.trim().to_owned());
    assert!(
        secrets
            .iter()
            .any(|s| s.contains("token=") || s.len() >= 40),
        "found the secrets to look for: {secrets:?}"
    );
    assert!(secrets.len() >= 6, "{secrets:?}");
    // The bearer token and the secret it is signed with; the autoscaler's
    // private key.
    secrets.push(m.token.clone());
    secrets.push(m.token.rsplit('.').next().unwrap().to_owned());
    let jwt = std::fs::read_to_string(m.data_dir().join("jwt-secret")).expect("dev jwt secret");
    secrets.push(jwt.trim().to_owned());
    let r = m
        .post(
            &format!("/v1/clusters/{id}/autoscaler-credentials"),
            &serde_json::json!({}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    secrets.extend(
        r.body["credentials"]["key"]
            .as_str()
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("-----") && l.len() >= 40)
            .map(str::to_owned),
    );

    let r = m.delete(&format!("/v1/clusters/{id}")).await;
    assert_eq!(r.status, StatusCode::OK);
    m.wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    m.stop().await;

    let text = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(
        text.contains("node phoned home") && text.lines().count() > 100,
        "the logs were captured ({} lines)",
        text.lines().count()
    );
    for s in &secrets {
        let s = s.trim_matches(|c: char| c == '"' || c == ',');
        let line = text.lines().find(|l| l.contains(s));
        assert!(line.is_none(), "a secret reached the logs: {s} in {line:?}");
    }
}
