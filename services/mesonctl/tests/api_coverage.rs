//! Every operation of meson's REST API is reached by a mesonctl command.
//! Each command line below runs against a server that records what it is
//! asked; the requests are matched to the operations of
//! `openapi/meson.json`. An operation added to the API with no mesonctl
//! command to reach it fails this test.

use axum::extract::Request;
use axum::response::IntoResponse;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const A: &str = "0190f5f2-0000-7000-8000-00000000000a";
const B: &str = "0190f5f2-0000-7000-8000-00000000000b";
const C: &str = "0190f5f2-0000-7000-8000-00000000000c";

/// Operations no person calls from a terminal, and why.
const NOT_FOR_THE_CLI: &[(&str, &str)] = &[
    (
        "node_phone_home",
        "called by a cluster's nodes, with the secret meson gave each",
    ),
    (
        "kaas_create",
        "an alias of cluster_create (POST /v1/clusters), for clients that post to /v1/kaas",
    ),
];

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Every command line that reaches the API, with ids (no lookup by name)
/// and without waiting.
fn commands() -> Vec<Vec<String>> {
    let vm = root().join("examples/vm.json").display().to_string();
    let kaas = root().join("examples/kaas.json").display().to_string();
    let lines: Vec<String> = vec![
        format!("vm create -f {vm} --no-wait"),
        "vm list --status running --sort name".into(),
        format!("vm get {A}"),
        format!("vm update {A} --name x"),
        format!("vm delete {A} --no-wait"),
        format!("vm reboot {A} --no-wait"),
        format!("vm resize {A} --cores 2 --no-wait"),
        format!("vm rebuild {A} --os Debian --no-wait"),
        format!("vm migrate {A} --no-wait"),
        format!("vm attach-network {A} {B} --no-wait"),
        format!("vm detach-network {A} {B} --no-wait"),
        format!("vm backup {A} --name x --no-wait"),
        format!("vm backups {A}"),
        format!("vm restore {A} --backup {B} --into new --no-wait"),
        format!("vm enable-backups {A} --window 22-02 --keep 7"),
        format!("vm disable-backups {A}"),
        // `vm console` without --url-only relays a VNC viewer's connection
        // to the console's WebSocket (`console_connect`): run on its own
        // below, with a viewer.
        format!("vm console {A} --url-only"),
        "console list --status open --limit 5".into(),
        format!("console list --vm {A}"),
        format!("console get {A}"),
        format!("console delete {A}"),
        "token create ci --role viewer --expires-in 90d".into(),
        "token list --revoked".into(),
        format!("token get {A}"),
        format!("token revoke {A}"),
        "member list".into(),
        "member get auth0|a".into(),
        "member add auth0|a --role viewer --email a@example.com".into(),
        "member set-role auth0|a editor".into(),
        "member remove auth0|a".into(),
        "member leave".into(),
        "membership list".into(),
        "invitation list".into(),
        format!("invitation get {A}"),
        "invitation create b@example.com --role viewer --expires-in 7d".into(),
        format!("invitation revoke {A}"),
        "invitation accept mesoninv_x".into(),
        "organization list".into(),
        "organization get acme.a".into(),
        "organization create --name a --vms 1 --vcpus 2 --ram-mib 2048".into(),
        "organization set-quotas acme.a --vms 2".into(),
        "organization delete acme.a".into(),
        "usage --from 2026-11-01 --group-by label:team --tenant acme".into(),
        "usage --group-by day --csv".into(),
        "statement list --tenant acme".into(),
        "statement get current --csv".into(),
        format!("statement get {A}"),
        "price list".into(),
        "price create --meter volume --unit-price 0.00007 --currency EUR --effective-from 2027-01-01"
            .into(),
        format!("action list vm {A}"),
        "volume create --name x --size 1 --no-wait".into(),
        "volume list".into(),
        format!("volume get {A}"),
        format!("volume update {A} --name y"),
        format!("volume delete {A} --no-wait"),
        format!("volume attach {A} --vm {A} --no-wait"),
        format!("volume detach {A} --no-wait"),
        format!("volume resize {A} --size 9 --no-wait"),
        format!("volume move {A} --host ionos-las-1 --no-wait"),
        format!("action list volume {A}"),
        "image import --name x --from http://127.0.0.1:9/x.img --no-wait".into(),
        format!("image create --vm {A} --name x --no-wait"),
        "image list".into(),
        format!("image get {A}"),
        format!("image update {A} --name y"),
        format!("image delete {A} --no-wait"),
        format!("action list image {A}"),
        "ssh-key create --name x --public-key x".into(),
        "ssh-key list".into(),
        format!("ssh-key get {A}"),
        format!("ssh-key update {A} --name y"),
        format!("ssh-key delete {A}"),
        "network create --name n --cidr 10.0.0.0/24".into(),
        "network list".into(),
        format!("network get {A}"),
        format!("network update {A} --name m"),
        format!("network delete {A} --no-wait"),
        format!("action list network {A}"),
        format!("port-forward create {A} --vm {B} --public-port 2222 --private-port 22 --no-wait"),
        format!("port-forward list {A}"),
        format!("port-forward get {A} {B}"),
        format!("port-forward delete {A} {B} --no-wait"),
        "backup list --status available".into(),
        format!("backup list --vm {A}"),
        format!("backup get {A}"),
        format!("backup update {A} --name y"),
        format!("backup delete {A} --no-wait"),
        format!("action list backup {A}"),
        format!("cluster create -f {kaas} --no-wait"),
        "cluster list".into(),
        format!("cluster get {A}"),
        format!("cluster update {A} -l team=core"),
        format!("cluster delete {A} --no-wait"),
        format!("cluster upgrade {A} --version 1.35 --no-wait"),
        format!("cluster rotate-credentials {A} --no-wait"),
        format!("cluster autoscaler-credentials {A}"),
        format!("action list cluster {A}"),
        format!("kubeconfig get {A}"),
        format!("pool list {A}"),
        format!("pool get {A} {B}"),
        format!("pool create {A} --name p --no-wait"),
        format!("pool scale {A} {B} --nodes 2 --no-wait"),
        format!("pool delete {A} {B} --no-wait"),
        format!("pool delete-nodes {A} {B} {C} --no-wait"),
        format!("node list {A}"),
        format!("node reboot {A} {C} --no-wait"),
        format!("node replace {A} {C} --no-wait"),
        format!("action get {A}"),
        format!("action get {A} {B}"),
        "flavor list".into(),
        "provider list".into(),
        "kubernetes versions".into(),
        format!("quote -f {vm}"),
        "quota get".into(),
        "tenant quota get acme".into(),
        "tenant quota set acme --vms 1".into(),
        "tenant quota set acme --plan small".into(),
        "plan list".into(),
        "plan get small".into(),
        "plan put small --description x --vms 1 --clusters 0".into(),
        "plan delete small".into(),
        "target list".into(),
        format!("target get {A}"),
        "target create --name t --host h --provider p --region r --continent c".into(),
        format!("target update {A} --enabled true"),
        format!("target drain {A} --no-wait"),
        format!("target undrain {A}"),
        "orphan list".into(),
        format!("orphan get {A}"),
        format!("orphan adopt {A} --tenant acme --name web"),
        format!("orphan delete {A}"),
        "audit list".into(),
        "status".into(),
        "metrics".into(),
    ];
    lines
        .iter()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// An action as meson answers it: `running`, so `action watch` follows its
/// stream.
fn running_action() -> Value {
    json!({"id": A, "command": "create_vm", "status": "running", "progress": 0,
           "started": "2026-01-01T00:00:00Z", "finished": null, "resources": [],
           "error": null})
}

/// A console as meson answers its request: its WebSocket is the
/// recorder's, at `host`.
fn console_requested(host: &str) -> Value {
    json!({
        "console": {"id": A, "vm": A, "status": "requested", "requested_by": "t",
            "created": "2026-01-01T00:00:00Z", "expires": "2026-01-01T00:01:00Z",
            "opened": null, "closed": null, "close_reason": null,
            "bytes_in": 0, "bytes_out": 0},
        "wss_url": format!("ws://{host}/v1/consoles/{A}/websocket?token=t"),
        "password": "h7Rk2pQz",
    })
}

/// Answers what the commands need to go on (the index, health, a running
/// action, a console requested), `404 not_found` to everything else, and
/// records every request.
async fn recorder(seen: Arc<Mutex<Vec<(String, String)>>>) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = l.local_addr().unwrap().to_string();
    let url = format!("http://{host}");
    let app = axum::Router::new().fallback(move |req: Request| {
        let seen = seen.clone();
        let host = host.clone();
        async move {
            let (method, path) = (req.method().to_string(), req.uri().path().to_owned());
            seen.lock().unwrap().push((method.clone(), path.clone()));
            let ok = |v: Value| axum::Json(v).into_response();
            match (method.as_str(), path.as_str()) {
                ("GET", "/") => ok(json!({"name": "meson", "version": "0", "links": {
                    "docs": "/docs", "openapi": "/openapi.json", "api": "/v1",
                    "healthz": "/healthz", "readyz": "/readyz", "metrics": "/metrics"}})),
                ("GET", "/healthz") => ok(json!({"status": "ok"})),
                ("GET", "/readyz") => ok(json!({"status": "ready"})),
                ("GET", p) if p.starts_with("/v1/actions/") && p != "/v1/actions/stream" => {
                    ok(json!({"action": running_action()}))
                }
                ("POST", p) if p.ends_with("/actions/request-console") => (
                    axum::http::StatusCode::CREATED,
                    axum::Json(console_requested(&host)),
                )
                    .into_response(),
                _ => (
                    axum::http::StatusCode::NOT_FOUND,
                    axum::Json(json!({"error": {"code": "not_found",
                        "message": "recorded", "details": {}}})),
                )
                    .into_response(),
            }
        }
    });
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    url
}

/// The operation of `method path`: the document's path template that
/// matches it with the fewest parameters.
fn operation(doc: &Value, method: &str, path: &str) -> Option<String> {
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    let mut best: Option<(usize, String)> = None;
    for (template, item) in doc["paths"].as_object().unwrap() {
        let t: Vec<&str> = template.trim_end_matches('/').split('/').collect();
        if t.len() != segments.len()
            || !t
                .iter()
                .zip(&segments)
                .all(|(t, s)| t.starts_with('{') || t == s)
        {
            continue;
        }
        let Some(id) = item[method.to_ascii_lowercase()]["operationId"].as_str() else {
            continue;
        };
        let params = t.iter().filter(|s| s.starts_with('{')).count();
        if best.as_ref().is_none_or(|(p, _)| params < *p) {
            best = Some((params, id.to_owned()));
        }
    }
    best.map(|(_, id)| id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_of_the_api_has_a_mesonctl_command() {
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("openapi/meson.json")).unwrap())
            .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let url = recorder(seen.clone()).await;
    let dir = std::env::temp_dir();
    let mut reached = BTreeSet::new();
    for args in commands() {
        seen.lock().unwrap().clear();
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mesonctl"));
        cmd.args(["--url", &url, "--token", "t"])
            .args(&args)
            .current_dir(&dir)
            .env("HOME", &dir)
            .env_remove("MESON_URL")
            .env_remove("MESON_TOKEN")
            .env_remove("MESON_ORGANIZATION")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("mesonctl runs");
        let _ = tokio::time::timeout(Duration::from_secs(20), child.wait()).await;
        let sent = seen.lock().unwrap().clone();
        assert!(
            !sent.is_empty(),
            "`mesonctl {}` sent nothing",
            args.join(" ")
        );
        for (method, path) in sent {
            let op = operation(&doc, &method, &path)
                .unwrap_or_else(|| panic!("{method} {path} is no operation of the API"));
            reached.insert(op);
        }
    }
    // `action watch` follows a running action's stream; it waits until
    // killed (the action never ends here).
    seen.lock().unwrap().clear();
    let mut watch = tokio::process::Command::new(env!("CARGO_BIN_EXE_mesonctl"))
        .args(["--url", &url, "--token", "t", "action", "watch", A])
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("mesonctl runs");
    for _ in 0..200 {
        if seen
            .lock()
            .unwrap()
            .iter()
            .any(|(_, p)| p == "/v1/actions/stream")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = watch.kill().await;
    for (method, path) in seen.lock().unwrap().iter() {
        if let Some(op) = operation(&doc, method, path) {
            reached.insert(op);
        }
    }
    // `vm console` requests a console, says where a VNC viewer connects,
    // and dials the console's WebSocket when one does (the recorder refuses
    // it: the command ends).
    seen.lock().unwrap().clear();
    let mut console = tokio::process::Command::new(env!("CARGO_BIN_EXE_mesonctl"))
        .args(["--url", &url, "--token", "t", "vm", "console", A])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("mesonctl runs");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(
        console.stdout.take().expect("stdout"),
    ));
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("`mesonctl vm console` says where to connect")
        .expect("stdout")
        .expect("a line");
    let address = line
        .strip_prefix("VNC viewer: ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    let viewer = tokio::net::TcpStream::connect(address)
        .await
        .unwrap_or_else(|e| panic!("connect to {address}: {e}"));
    let _ = tokio::time::timeout(Duration::from_secs(20), console.wait()).await;
    drop(viewer);
    let _ = console.kill().await;
    for (method, path) in seen.lock().unwrap().iter() {
        let op = operation(&doc, method, path)
            .unwrap_or_else(|| panic!("{method} {path} is no operation of the API"));
        reached.insert(op);
    }

    let mut missing = Vec::new();
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            let Some(id) = op["operationId"].as_str() else {
                continue;
            };
            if !reached.contains(id) && !NOT_FOR_THE_CLI.iter().any(|(n, _)| *n == id) {
                missing.push(id.to_owned());
            }
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "operations no mesonctl command reaches: {missing:?}"
    );
    for (op, why) in NOT_FOR_THE_CLI {
        assert!(!reached.contains(*op), "{op} is reached after all ({why})");
    }
}
