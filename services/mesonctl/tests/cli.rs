//! The built `mesonctl` binary, run as a process against a whole meson
//! (API, workers, simulated AtomOS) started in the test, as the e2e
//! harness (tests/e2e/harness.rs) starts it.

#[path = "../../../tests/e2e/harness.rs"]
#[allow(dead_code)]
mod harness;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;

/// A `kops create cluster` line for AWS, kept verbatim (its `us-east-la`
/// typo included).
const SEED_KOPS: &str = "kops create cluster --cloud=aws --networking calico \
    --name=demok8scluster.k8s.local --state=s3://kops-abhi-storage-1 --zones=us-east-la \
    --node-count=1 --node-size=t2.micro --master-size=t2.micro --master-volume-size=8 \
    --node-volume-size=8";

use harness::seed_vm;

/// The canonical KaaS payload (docs/payloads.md) with one node in its pool.
fn seed_kaas_one_node() -> Value {
    let mut kaas = harness::seed_kaas();
    kaas["req"]["nodepool"][0]["desired_nodes"] = 1.into();
    kaas["req"]["nodepool"][0]["min_nodes"] = 1.into();
    kaas
}

/// A whole meson (the e2e harness's) and a scratch directory: the CLI's
/// working directory and HOME.
struct Meson {
    m: harness::Meson,
    dir: PathBuf,
    _scratch: Scratch,
}

/// Removes the scratch directory when the test ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl std::ops::Deref for Meson {
    type Target = harness::Meson;
    fn deref(&self) -> &harness::Meson {
        &self.m
    }
}

impl Meson {
    async fn start() -> Meson {
        let m = harness::Meson::start_with(|o| o.autoscaler = None).await;
        let dir = std::env::temp_dir().join(format!("mesonctl-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(dir.join("home")).expect("scratch dir");
        Meson {
            m,
            _scratch: Scratch(dir.clone()),
            dir,
        }
    }

    /// Writes `body` to a file in the scratch directory.
    fn file(&self, name: &str, body: &Value) -> String {
        let p = self.dir.join(name);
        std::fs::write(&p, serde_json::to_vec_pretty(body).expect("json")).expect("write");
        p.display().to_string()
    }

    /// The CLI with this meson's URL and token given as flags.
    async fn ctl(&self, args: &[&str]) -> Run {
        let mut all = vec!["--url", &self.base, "--token", &self.token];
        all.extend_from_slice(args);
        run(&self.dir, &all, &[]).await
    }

    async fn stop(self) {
        self.m.stop().await;
    }
}

#[derive(Debug)]
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:#?}"))
    }

    #[track_caller]
    fn ok(&self) -> &Self {
        assert_eq!(self.code, Some(0), "{self:#?}");
        self
    }
}

fn command(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_mesonctl"));
    c.args(args)
        .current_dir(dir)
        // Nothing from the developer's own setup.
        .env_remove("MESON_URL")
        .env_remove("MESON_TOKEN")
        .env_remove("MESON_DATA_DIR")
        .env_remove("MESON_ORGANIZATION")
        .env_remove("XDG_CONFIG_HOME")
        .env("HOME", dir.join("home"))
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    c
}

/// The URL of a server on 127.0.0.1 that answers every request with
/// `status` and `body` (JSON when not empty).
async fn answering(status: u16, body: &'static str) -> String {
    let status = axum::http::StatusCode::from_u16(status).expect("a status");
    let app = axum::Router::new().fallback(move || async move {
        (
            status,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// Runs the CLI in `dir` (its HOME is `dir/home`) with `env` added.
async fn run(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = tokio::time::timeout(Duration::from_secs(120), command(dir, args, env).output())
        .await
        .unwrap_or_else(|_| panic!("mesonctl {args:?} still running after 2 minutes"))
        .expect("mesonctl runs");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_created_listed_shown_powered_and_deleted() {
    let m = Meson::start().await;
    let vm_file = m.file("vm.json", &seed_vm());

    // Waits by default; stderr (not a terminal) gets a line per state.
    let r = m.ctl(&["vm", "create", "-f", &vm_file, "-o", "json"]).await;
    r.ok();
    let vm = r.json();
    assert_eq!(vm["status"], "running", "{r:#?}");
    assert_eq!(vm["provider"], "ionos");
    let id = vm["id"].as_str().expect("id").to_owned();
    assert!(r.stderr.contains("create_vm: success 100%"), "{}", r.stderr);

    let r = m.ctl(&["vm", "list", "-o", "json"]).await;
    r.ok();
    let list = r.json();
    assert!(
        list.as_array()
            .expect("array")
            .iter()
            .any(|v| v["id"] == id.as_str()),
        "{list}"
    );
    // Tables show short ids (the last 8 hex digits); `-o wide` whole ones.
    let short = &id[id.len() - 8..];
    let r = m.ctl(&["vm", "list"]).await;
    r.ok();
    assert!(r.stdout.starts_with("ID "), "{r:#?}");
    let row = r
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("{short} ")))
        .unwrap_or_else(|| panic!("no row for {short}: {r:#?}"));
    assert!(row.contains(" test "), "{row}");
    assert!(!r.stdout.contains(&id), "{r:#?}");
    let r = m.ctl(&["vm", "list", "-o", "wide"]).await;
    r.ok();
    assert!(r.stdout.lines().any(|l| l.starts_with(&id)), "{r:#?}");
    // Lists filter and sort as the API does.
    let mut other = seed_vm();
    other["specs"]["vm_name"] = json!("other");
    other["labels"] = json!({"env": "prod"});
    let other_file = m.file("other.json", &other);
    m.ctl(&["vm", "create", "-f", &other_file]).await.ok();
    let names = |r: &Run| -> Vec<String> {
        r.json()
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let r = m
        .ctl(&["vm", "list", "--sort", "name:desc", "-o", "json"])
        .await;
    assert_eq!(names(r.ok()), ["test", "other"]);
    let r = m.ctl(&["vm", "list", "--sort", "name", "-o", "json"]).await;
    assert_eq!(names(r.ok()), ["other", "test"]);
    let r = m.ctl(&["vm", "list", "-l", "env=prod", "-o", "json"]).await;
    assert_eq!(names(r.ok()), ["other"]);
    let r = m.ctl(&["vm", "list", "--name", "test", "-o", "json"]).await;
    assert_eq!(names(r.ok()), ["test"]);
    let r = m
        .ctl(&[
            "vm", "list", "--status", "off", "--status", "error", "-o", "json",
        ])
        .await;
    assert!(names(r.ok()).is_empty(), "{r:#?}");
    let r = m.ctl(&["vm", "list", "--sort", "colour"]).await;
    assert_eq!(r.code, Some(1), "meson refuses the sort key: {r:#?}");
    assert!(r.stderr.contains("sort"), "{r:#?}");
    // Renamed and relabelled.
    let r = m
        .ctl(&[
            "vm", "update", "other", "--name", "other2", "-l", "env=qa", "-o", "json",
        ])
        .await;
    let v = r.ok().json();
    assert_eq!(v["name"], "other2", "{v}");
    assert_eq!(v["labels"], json!({"env": "qa"}));
    // The quota counts them.
    let r = m.ctl(&["quota", "get", "-o", "json"]).await;
    let q = r.ok().json();
    let vms = q["limits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "vms")
        .unwrap_or_else(|| panic!("{q}"))
        .clone();
    assert_eq!(vms["current"], 2, "{q}");
    let r = m.ctl(&["quota", "get"]).await;
    assert!(r.ok().stdout.starts_with("LIMIT"), "{r:#?}");
    m.ctl(&["vm", "delete", "other2"]).await.ok();

    let r = m.ctl(&["vm", "get", &id]).await;
    r.ok();
    let status = r
        .stdout
        .lines()
        .find(|l| l.starts_with("Status:"))
        .unwrap_or_else(|| panic!("{r:#?}"));
    assert!(status.ends_with("running"), "{r:#?}");
    // By name too, and as YAML.
    let r = m.ctl(&["vm", "get", "test", "-o", "yaml"]).await;
    r.ok();
    let y: Value = serde_yaml_ng::from_str(&r.stdout).expect("yaml");
    assert_eq!(y["id"], id.as_str());
    assert_eq!(y["status"], "running");

    // --no-wait returns the running action at once; watch follows it.
    let r = m
        .ctl(&["vm", "poweroff", &id, "--no-wait", "-o", "json"])
        .await;
    r.ok();
    let action = r.json();
    assert_eq!(action["command"], "stop_vm", "{action}");
    assert_eq!(action["status"], "running", "{action}");
    let action_id = action["id"].as_str().expect("id").to_owned();
    let r = m.ctl(&["action", "watch", &action_id, "-o", "json"]).await;
    r.ok();
    assert_eq!(r.json()[0]["status"], "success", "{r:#?}");
    let r = m.ctl(&["action", "get", &action_id]).await;
    r.ok();
    assert!(r.stdout.contains("success"), "{r:#?}");
    let r = m.ctl(&["vm", "poweron", &id]).await;
    r.ok();
    assert!(r.stdout.contains("success"), "{r:#?}");

    let r = m.ctl(&["action", "list", "vm", &id, "-o", "json"]).await;
    r.ok();
    let commands: Vec<String> = r
        .json()
        .as_array()
        .expect("array")
        .iter()
        .map(|a| a["command"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(commands.contains(&"create_vm".to_owned()), "{commands:?}");
    assert!(commands.contains(&"stop_vm".to_owned()), "{commands:?}");
    // As a table: short ids, the VM's too, and lines that fit a terminal.
    let r = m.ctl(&["action", "list", "vm", &id]).await;
    r.ok();
    assert!(r.stdout.starts_with("ID "), "{r:#?}");
    assert!(r.stdout.contains(&format!("vm {short}")), "{r:#?}");
    assert!(!r.stdout.contains(&id), "{r:#?}");
    assert!(
        r.stdout.lines().all(|l| l.chars().count() <= 120),
        "{}",
        r.stdout
    );
    let short_action = &action_id[action_id.len() - 8..];
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with(&format!("{short_action} "))),
        "{r:#?}"
    );
    let r = m.ctl(&["action", "list", "vm", &id, "-o", "wide"]).await;
    r.ok();
    assert!(r.stdout.contains(&format!("vm {id}")), "{r:#?}");
    assert!(r.stdout.contains(&action_id), "{r:#?}");

    // The catalogue.
    let r = m.ctl(&["flavor", "list"]).await;
    r.ok();
    assert!(r.stdout.contains("kripton"), "{r:#?}");
    let r = m.ctl(&["provider", "list", "-o", "json"]).await;
    r.ok();
    assert!(r.json().as_array().expect("array").len() >= 5, "{r:#?}");
    let r = m.ctl(&["quote", "-f", &vm_file]).await;
    r.ok();
    assert!(r.stdout.contains("ionos"), "{r:#?}");

    let r = m.ctl(&["vm", "delete", &id, "-o", "json"]).await;
    r.ok();
    assert_eq!(r.json()["status"], "success", "{r:#?}");
    assert_eq!(r.json()["command"], "delete_vm", "{r:#?}");
    let r = m.ctl(&["vm", "get", &id]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(not_found)"), "{r:#?}");

    // A payload meson refuses: exit 1, the field named.
    let mut bad = seed_vm();
    bad["specs"]["authentication"]["ssh-key"] = json!("ssh-rsa AAAA... user@host");
    let bad_file = m.file("bad.json", &bad);
    let r = m.ctl(&["vm", "create", "-f", &bad_file]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.starts_with("error: "), "{r:#?}");
    assert!(r.stderr.contains("(invalid_input)"), "{r:#?}");
    assert!(r.stderr.contains("specs.authentication.ssh-key"), "{r:#?}");
    assert!(r.stdout.is_empty(), "{r:#?}");

    // Usage errors: clap's, and a file that is not there.
    let r = m.ctl(&["vm", "frobnicate"]).await;
    assert_eq!(r.code, Some(2), "{r:#?}");
    let r = m.ctl(&["vm", "create", "-f", "/nonexistent/vm.json"]).await;
    assert_eq!(r.code, Some(2), "{r:#?}");
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_keys_kept_and_named_at_a_vm_create() {
    const KEY: &str = "ssh-ed25519 \
        AAAAC3NzaC1lZDI1NTE5AAAAIKsXu3gF1dsjgi7AFYsFlujQvUGwiqxtFGIzhDsQrt1p ana@laptop";
    let m = Meson::start().await;
    // A bad key is refused by name.
    let r = m
        .ctl(&[
            "ssh-key",
            "create",
            "--name",
            "bad",
            "--public-key",
            "ssh-rsa AAAA... x",
        ])
        .await;
    assert_ne!(r.code, Some(0), "{r:#?}");
    assert!(r.stderr.contains("public_key"), "{r:#?}");
    // A .pub file as ssh-keygen writes it.
    let pub_file = m.dir.join("id.pub");
    std::fs::write(&pub_file, format!("{KEY}\n")).expect("write");
    let pub_file = pub_file.display().to_string();
    let r = m
        .ctl(&[
            "ssh-key",
            "create",
            "--name",
            "laptop",
            "--public-key-from-file",
            &pub_file,
            "-o",
            "json",
        ])
        .await;
    r.ok();
    let key = r.json();
    assert_eq!(key["public_key"], KEY);
    assert_eq!(
        key["fingerprint"],
        "SHA256:9EiTBMAujmdUnv2I9IKzJMHRAA7jLozr7q50Qj+Sx34"
    );
    let r = m.ctl(&["ssh-key", "list"]).await;
    r.ok();
    assert!(r.stdout.starts_with("ID "), "{r:#?}");
    assert!(r.stdout.contains("laptop"), "{r:#?}");
    m.ctl(&["ssh-key", "update", "laptop", "--name", "ana"])
        .await
        .ok();
    let r = m.ctl(&["ssh-key", "get", "ana", "-o", "json"]).await;
    r.ok();
    assert_eq!(r.json()["id"], key["id"]);

    let vm_file = m.file("vm.json", &seed_vm());
    let r = m
        .ctl(&[
            "vm",
            "create",
            "-f",
            &vm_file,
            "--ssh-key",
            "ana",
            "--no-wait",
            "-o",
            "json",
        ])
        .await;
    r.ok();
    let keys = r.json()["vm"]["specs"]["ssh_keys"].clone();
    assert!(
        keys.as_array().unwrap().iter().any(|k| k == KEY),
        "the kept key beside the payload's: {keys}"
    );
    let r = m
        .ctl(&[
            "vm",
            "create",
            "-f",
            &vm_file,
            "--ssh-key",
            "nobody",
            "--no-wait",
        ])
        .await;
    assert_ne!(r.code, Some(0), "{r:#?}");
    assert!(r.stderr.contains("ssh-key-ids[0]"), "{r:#?}");

    m.ctl(&["ssh-key", "delete", "ana"]).await.ok();
    let r = m.ctl(&["ssh-key", "list", "-o", "json"]).await;
    r.ok();
    assert_eq!(r.json(), json!([]));
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_its_kubeconfig_and_a_translated_kops_line() {
    let m = Meson::start().await;
    let kaas = m.file("kaas.json", &seed_kaas_one_node());
    let r = m
        .ctl(&["cluster", "create", "-f", &kaas, "-o", "json"])
        .await;
    r.ok();
    let cluster = r.json();
    assert_eq!(cluster["status"], "running", "{r:#?}");
    let id = cluster["id"].as_str().expect("id").to_owned();
    assert!(
        r.stderr.contains("create_cluster: success 100%"),
        "{}",
        r.stderr
    );

    let r = m
        .ctl(&["kubeconfig", "get", &id, "--expiry-seconds", "3600"])
        .await;
    r.ok();
    // meson quotes the kubeconfig's strings: `server: "https://..."`.
    assert!(
        r.stdout.contains("server: https://") || r.stdout.contains("server: \"https://"),
        "{r:#?}"
    );
    let kc: Value = serde_yaml_ng::from_str(&r.stdout).expect("kubeconfig is YAML");
    assert_eq!(kc["kind"], "Config", "{kc}");
    let server = kc["clusters"][0]["cluster"]["server"]
        .as_str()
        .unwrap_or_default();
    assert!(server.starts_with("https://"), "{kc}");

    let r = m.ctl(&["cluster", "list"]).await;
    r.ok();
    assert!(r.stdout.contains("test8"), "{r:#?}");
    assert!(r.stdout.contains(&id[id.len() - 8..]), "{r:#?}");
    assert!(!r.stdout.contains(&id), "{r:#?}");
    // No cluster has an error: no ERROR column.
    assert!(!r.stdout.contains("ERROR"), "{r:#?}");
    let r = m.ctl(&["cluster", "get", "test8"]).await;
    r.ok();
    assert!(r.stdout.contains("1poolname"), "{r:#?}");
    // Relabelled, its update policy changed.
    let r = m
        .ctl(&[
            "cluster",
            "update",
            "test8",
            "-l",
            "team=core",
            "--update-policy",
            "PATCH_UPDATE",
            "-o",
            "json",
        ])
        .await;
    let c = r.ok().json();
    assert_eq!(c["labels"], json!({"team": "core"}), "{c}");
    assert_eq!(c["update_policy"], "PATCH_UPDATE", "{c}");
    let r = m
        .ctl(&["cluster", "list", "-l", "team=core", "-o", "json"])
        .await;
    assert_eq!(r.ok().json().as_array().map(Vec::len), Some(1), "{r:#?}");
    let r = m
        .ctl(&["cluster", "update", "test8", "--update-policy", "SOMETIMES"])
        .await;
    assert_eq!(r.code, Some(1), "meson names the field: {r:#?}");
    assert!(r.stderr.contains("update_policy"), "{r:#?}");

    // Scale the pool by name, waiting.
    let r = m
        .ctl(&[
            "pool",
            "scale",
            "test8",
            "1poolname",
            "--nodes",
            "2",
            "-o",
            "json",
        ])
        .await;
    r.ok();
    assert_eq!(r.json()["command"], "scale_node_pool", "{r:#?}");
    assert_eq!(r.json()["status"], "success", "{r:#?}");
    let r = m.ctl(&["cluster", "get", &id, "-o", "json"]).await;
    r.ok();
    assert_eq!(r.json()["pools"][0]["current_nodes"], 2, "{r:#?}");

    // Its nodes: listed, one rebooted, one replaced, one removed from its
    // pool (by name); then the credentials rotated.
    let nodes_path = format!("/v1/clusters/{id}/nodes");
    let r = m.ctl(&["node", "list", "test8"]).await;
    assert!(r.ok().stdout.contains("worker"), "{r:#?}");
    let workers: Vec<Value> = m.get(&nodes_path).await.body["nodes"]
        .as_array()
        .unwrap()
        .clone()
        .into_iter()
        .filter(|n| n["role"] == "worker")
        .collect();
    assert_eq!(workers.len(), 2, "{workers:?}");
    let first = workers[0]["name"].as_str().unwrap().to_owned();
    let r = m
        .ctl(&["node", "reboot", "test8", &first, "-o", "json"])
        .await;
    assert_eq!(r.ok().json()["status"], "success", "{r:#?}");
    let r = m
        .ctl(&["node", "replace", "test8", &first, "-o", "json"])
        .await;
    assert_eq!(r.ok().json()["status"], "success", "{r:#?}");
    let after = m.get(&nodes_path).await.body["nodes"].clone();
    assert!(
        after
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["name"] != first.as_str()),
        "{after}"
    );
    let second = workers[1]["name"].as_str().unwrap().to_owned();
    let r = m
        .ctl(&[
            "pool",
            "delete-nodes",
            "test8",
            "1poolname",
            &second,
            "-o",
            "json",
        ])
        .await;
    assert_eq!(r.ok().json()["status"], "success", "{r:#?}");
    let r = m.ctl(&["cluster", "get", &id, "-o", "json"]).await;
    assert_eq!(r.ok().json()["pools"][0]["current_nodes"], 1, "{r:#?}");
    let r = m
        .ctl(&["cluster", "rotate-credentials", "test8", "-o", "json"])
        .await;
    assert_eq!(r.ok().json()["status"], "success", "{r:#?}");
    // This meson serves no autoscalers' endpoint: refused, saying so.
    let r = m.ctl(&["cluster", "autoscaler-credentials", "test8"]).await;
    assert_eq!(r.code, Some(5), "{r:#?}");
    assert!(r.stderr.contains("serves no autoscaler endpoint"), "{r:#?}");

    // A second pool: added (waiting for its node), listed, shown, removed.
    let r = m
        .ctl(&[
            "pool",
            "create",
            "test8",
            "--name",
            "extra",
            "--nodes",
            "1",
            "--cpu",
            "2",
            "--ram",
            "2048",
            "-l",
            "role=extra",
            "-o",
            "json",
        ])
        .await;
    let p = r.ok().json();
    assert_eq!(p["name"], "extra", "{p}");
    assert_eq!(p["current_nodes"], 1, "{p}");
    assert_eq!(p["labels"], json!({"role": "extra"}), "{p}");
    let r = m.ctl(&["pool", "list", "test8"]).await;
    let out = &r.ok().stdout;
    assert!(out.contains("1poolname") && out.contains("extra"), "{r:#?}");
    let r = m
        .ctl(&["pool", "get", "test8", "extra", "-o", "json"])
        .await;
    assert_eq!(r.ok().json()["id"], p["id"], "{r:#?}");
    m.ctl(&["pool", "delete", "test8", "extra"]).await.ok();
    let r = m.ctl(&["cluster", "get", &id, "-o", "json"]).await;
    assert_eq!(
        r.ok().json()["pools"].as_array().map(Vec::len),
        Some(1),
        "{r:#?}"
    );

    // The seed's kOps command line: a payload meson prices, and every flag
    // it cannot honour named on stderr.
    let words: Vec<&str> = SEED_KOPS.split_whitespace().collect();
    let mut args = vec!["kops", "translate"];
    args.extend(&words);
    let r = m.ctl(&args).await;
    r.ok();
    let payload = r.json();
    assert_eq!(payload["req"]["name"], "demok8scluster");
    assert_eq!(payload["req"]["cni"], "calico");
    for flag in [
        "--cloud",
        "--state",
        "--zones",
        "--name",
        "--master-volume-size",
        "--node-volume-size",
    ] {
        assert!(
            r.stderr.contains(&format!("warning: {flag}: ")),
            "{flag} not reported: {}",
            r.stderr
        );
    }
    assert!(!r.stderr.contains("note:"), "meson was asked: {}", r.stderr);
    let translated = m.file("kops.json", &payload);
    let r = m.ctl(&["quote", "-f", &translated, "-o", "json"]).await;
    r.ok();
    let quote = r.json();
    assert!(
        !quote["placements"]
            .as_array()
            .expect("placements")
            .is_empty(),
        "{quote}"
    );
    assert_eq!(quote["cheapest"]["control_plane"]["specs"]["cpu"], 2);
    // ... and creates: the cluster runs.
    let r = m
        .ctl(&["cluster", "create", "-f", &translated, "-o", "json"])
        .await;
    r.ok();
    assert_eq!(r.json()["name"], "demok8scluster", "{r:#?}");
    assert_eq!(r.json()["status"], "running", "{r:#?}");
    assert_eq!(r.json()["cni"], "calico", "{r:#?}");

    // A cluster in error: the list says why, in a column of its own.
    let why = "the control plane never came up: etcd refused to start on \
        test8-cp-0 after 3 attempts (disk full)";
    meson_db::clusters::set_status(
        &m.dev().pool,
        meson_core::ClusterId(id.parse().expect("uuid")),
        meson_core::cluster::ClusterStatus::Error,
        Some(why),
    )
    .await
    .expect("set_status");
    let r = m.ctl(&["cluster", "list"]).await;
    r.ok();
    let header = r.stdout.lines().next().unwrap_or_default();
    assert!(header.trim_end().ends_with("ERROR"), "{r:#?}");
    let row = |name: &str| -> String {
        r.stdout
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_else(|| panic!("no row {name}: {r:#?}"))
            .to_owned()
    };
    // Long messages are cut in `table`...
    let broken = row("test8");
    assert!(broken.contains(" error "), "{broken}");
    assert!(
        broken.contains("the control plane never came up"),
        "{broken}"
    );
    assert!(
        broken.ends_with('…') && !broken.contains("disk full"),
        "{broken}"
    );
    // ...the others show none.
    assert!(row("demok8scluster").trim_end().ends_with(" -"), "{r:#?}");
    // ...and are whole in `wide`.
    let r = m.ctl(&["cluster", "list", "-o", "wide"]).await;
    r.ok();
    assert!(r.stdout.contains(why), "{r:#?}");
    assert!(r.stdout.contains(&id), "{r:#?}");
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_exit_with_their_codes() {
    let m = Meson::start().await;
    let dir = m.dir.clone();

    // Nothing listens there: exit 5.
    let r = run(
        &dir,
        &["--url", "http://127.0.0.1:9", "--token", "t", "vm", "list"],
        &[],
    )
    .await;
    assert_eq!(r.code, Some(5), "{r:#?}");
    assert!(r.stderr.contains("cannot reach meson"), "{r:#?}");
    // No token anywhere: exit 5, saying what is missing.
    let r = run(&dir, &["vm", "list"], &[]).await;
    assert_eq!(r.code, Some(5), "{r:#?}");
    assert!(r.stderr.contains("no meson token"), "{r:#?}");
    // A token meson refuses: exit 1.
    let r = run(
        &dir,
        &["--url", &m.base, "--token", "nope", "vm", "list"],
        &[],
    )
    .await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(unauthorized)"), "{r:#?}");
    // A server that answers 5xx is not working: exit 5, saying so. A 503
    // `resource_unavailable` is meson's answer to that request: exit 1.
    for (status, body, code, says) in [
        (
            500,
            r#"{"error":{"code":"service_error","message":"database is down"}}"#,
            5,
            "is not working: database is down (service_error, HTTP 500)",
        ),
        (
            503,
            "",
            5,
            "is not working: 503 Service Unavailable (service_error, HTTP 503)",
        ),
        (
            503,
            r#"{"error":{"code":"resource_unavailable","message":"no host has room"}}"#,
            1,
            "error: no host has room (resource_unavailable)",
        ),
    ] {
        let url = answering(status, body).await;
        let r = run(&dir, &["--url", &url, "--token", "t", "vm", "list"], &[]).await;
        assert_eq!(r.code, Some(code), "{status} {body}: {r:#?}");
        assert!(r.stderr.contains(says), "{r:#?}");
        assert!(r.stdout.is_empty(), "{r:#?}");
    }

    // A bad payload is refused in meson's words, field by field, exactly as
    // meson answers it over HTTP (exit 1): mesonctl sends it as written.
    let mut bad = seed_vm();
    bad["specs"]["req"]["mem"]["capacity"] = json!("4096");
    bad["specs"]["req"]["cpu"]["numberOfCores"] = json!(2.5);
    let bad_file = m.file("bad.json", &bad);
    let r = m.ctl(&["vm", "create", "-f", &bad_file]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    let server = m.post("/v1/vms", &bad).await;
    let fields = server.body["error"]["details"]["fields"]
        .as_array()
        .unwrap();
    assert_eq!(fields.len(), 2, "{}", server.body);
    for f in fields {
        let line = format!(
            "  {}: {}",
            f["name"].as_str().unwrap(),
            f["messages"][0].as_str().unwrap()
        );
        assert!(r.stderr.lines().any(|l| l == line), "{line:?} in {r:#?}");
    }
    assert!(
        r.stderr
            .contains("specs.req.mem.capacity: must be an integer, got a string"),
        "{r:#?}"
    );
    // Fields meson does not know come back as its warnings.
    let mut extra = seed_vm();
    extra["specs"]["vm_name"] = json!("extra");
    extra["specs"]["colour"] = json!("blue");
    let extra_file = m.file("extra.json", &extra);
    let r = m
        .ctl(&["vm", "create", "-f", &extra_file, "-o", "json"])
        .await;
    r.ok();
    assert!(r.stderr.contains("specs.colour"), "{r:#?}");
    m.ctl(&["vm", "delete", "extra"]).await.ok();

    // Every VM registration on ionos fails: the action ends in error, exit 3.
    for host in ["ionos-fra-1", "ionos-las-1"] {
        m.fault(
            host,
            &json!({"fail_next": [{"route": "vm/register", "status": 400, "count": 100}]}),
        )
        .await;
    }
    let vm_file = m.file("vm.json", &seed_vm());
    let r = m.ctl(&["vm", "create", "-f", &vm_file]).await;
    assert_eq!(r.code, Some(3), "{r:#?}");
    let line = r
        .stderr
        .lines()
        .find(|l| l.starts_with("error: action "))
        .unwrap_or_else(|| panic!("{r:#?}"));
    assert!(line.contains("(create_vm) failed"), "{line}");
    let action_id = line
        .split_whitespace()
        .nth(2)
        .expect("the action's id")
        .to_owned();
    let r = m.ctl(&["action", "get", &action_id, "-o", "json"]).await;
    r.ok();
    assert_eq!(r.json()["status"], "error", "{r:#?}");
    assert!(
        line.contains(&format!(
            "({})",
            r.json()["error"]["code"].as_str().unwrap_or("?")
        )),
        "{line}"
    );
    // The failed action can be watched too: exit 3 again.
    let r = m.ctl(&["action", "watch", &action_id]).await;
    assert_eq!(r.code, Some(3), "{r:#?}");

    // Slow boots: --no-wait returns at once with the running action, and
    // Ctrl-C while waiting exits 4 naming the action still running.
    for h in m.sim().hosts() {
        h.set_boot_time(Duration::from_secs(60));
    }
    let mut ovh = seed_vm();
    ovh["provider"] = json!("ovh");
    ovh["specs"]["vm_name"] = json!("slow");
    let ovh_file = m.file("ovh.json", &ovh);
    let started = Instant::now();
    let r = m
        .ctl(&["vm", "create", "-f", &ovh_file, "--no-wait", "-o", "json"])
        .await;
    r.ok();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let created = r.json();
    assert_eq!(created["action"]["status"], "running", "{created}");
    assert_eq!(created["vm"]["name"], "slow", "{created}");

    ovh["specs"]["vm_name"] = json!("slower");
    let ovh_file = m.file("ovh2.json", &ovh);
    let mut child = command(
        &dir,
        &[
            "--url", &m.base, "--token", &m.token, "vm", "create", "-f", &ovh_file,
        ],
        &[],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn");
    let mut stderr = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), stderr.next_line())
        .await
        .expect("progress within 30 s")
        .expect("read")
        .expect("a progress line");
    assert!(first.contains("create_vm: running"), "{first}");
    let running = first.split_whitespace().nth(1).expect("id").to_owned();
    let pid = child.id().expect("pid").to_string();
    let kill = tokio::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .await
        .expect("kill");
    assert!(kill.success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("exits after Ctrl-C")
        .expect("wait");
    let mut rest = Vec::new();
    while let Ok(Some(l)) = stderr.next_line().await {
        rest.push(l);
    }
    assert_eq!(status.code(), Some(4), "{rest:?}");
    assert!(
        rest.iter()
            .any(|l| l.starts_with("cancelled") && l.contains(&running)),
        "{rest:?}"
    );
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_and_token_from_the_environment_and_config_files() {
    let m = Meson::start().await;
    let dir = m.dir.clone();

    let r = run(
        &dir,
        &["flavor", "list"],
        &[("MESON_URL", &m.base), ("MESON_TOKEN", &m.token)],
    )
    .await;
    r.ok();
    assert!(r.stdout.contains("neon"), "{r:#?}");

    // ~/.config/meson/config.toml.
    let home_cfg = dir.join("home/.config/meson");
    std::fs::create_dir_all(&home_cfg).expect("mkdir");
    std::fs::write(
        home_cfg.join("config.toml"),
        format!("url = \"{}\"\ntoken = \"{}\"\n", m.base, m.token),
    )
    .expect("write");
    let r = run(&dir, &["provider", "list"], &[]).await;
    r.ok();
    assert!(r.stdout.contains("arubacloud"), "{r:#?}");
    // The environment wins over the file.
    let r = run(&dir, &["provider", "list"], &[("MESON_TOKEN", "bad")]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");

    // $XDG_CONFIG_HOME/meson/config.toml wins over ~/.config.
    let xdg = dir.join("xdg");
    std::fs::create_dir_all(xdg.join("meson")).expect("mkdir");
    std::fs::write(
        xdg.join("meson/config.toml"),
        "url = \"http://127.0.0.1:9\"\n",
    )
    .expect("write");
    let xdg_s = xdg.display().to_string();
    let r = run(&dir, &["flavor", "list"], &[("XDG_CONFIG_HOME", &xdg_s)]).await;
    assert_eq!(r.code, Some(5), "the XDG file's URL is used: {r:#?}");
    std::fs::write(
        xdg.join("meson/config.toml"),
        format!("url = \"{}\"\ntoken = \"{}\"\n", m.base, m.token),
    )
    .expect("write");
    std::fs::remove_file(home_cfg.join("config.toml")).expect("rm");
    let r = run(
        &dir,
        &["vm", "list", "-o", "json"],
        &[("XDG_CONFIG_HOME", &xdg_s)],
    )
    .await;
    r.ok();
    assert_eq!(r.json(), json!([]));

    // mesond dev's URL (dev.json) and token file, through MESON_DATA_DIR.
    let data = m.data_dir().display().to_string();
    let r = run(&dir, &["flavor", "list"], &[("MESON_DATA_DIR", &data)]).await;
    r.ok();
    // ... or found in a parent of the working directory, as git finds .git.
    std::fs::create_dir_all(dir.join(".meson")).expect("mkdir");
    for f in ["dev.json", "dev-token"] {
        std::fs::copy(m.data_dir().join(f), dir.join(".meson").join(f)).expect("copy");
    }
    let deep = dir.join("src/deeper");
    std::fs::create_dir_all(&deep).expect("mkdir");
    let r = run(&deep, &["flavor", "list"], &[]).await;
    r.ok();
    assert!(r.stdout.contains("neon"), "{r:#?}");
    // A dev.json naming another port is followed (nothing listens there).
    let mut server: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(".meson/dev.json")).expect("read"))
            .expect("json");
    server["url"] = "http://127.0.0.1:9".into();
    std::fs::write(dir.join(".meson/dev.json"), server.to_string()).expect("write");
    let r = run(&deep, &["flavor", "list"], &[]).await;
    assert_eq!(r.code, Some(5), "{r:#?}");
    assert!(r.stderr.contains("127.0.0.1:9"), "{r:#?}");
    // A broken config file is reported with its path: exit 5.
    std::fs::write(xdg.join("meson/config.toml"), "url = [\n").expect("write");
    let r = run(&dir, &["flavor", "list"], &[("XDG_CONFIG_HOME", &xdg_s)]).await;
    assert_eq!(r.code, Some(5), "{r:#?}");
    assert!(r.stderr.contains("config.toml"), "{r:#?}");
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_of_a_vm_and_a_vm_from_the_image() {
    let m = Meson::start().await;
    let mut body = harness::seed_vm();
    body["specs"]["vm_name"] = "source".into();
    let file = m.file("source.json", &body);
    m.ctl(&["vm", "create", "-f", &file]).await.ok();
    // Made with progress, listed and shown by name.
    let r = m
        .ctl(&[
            "image", "create", "--vm", "source", "--name", "golden", "-o", "json",
        ])
        .await;
    r.ok();
    assert_eq!(r.json()["status"], "available", "{r:#?}");
    let image = r.json()["id"].as_str().unwrap().to_owned();
    let r = m.ctl(&["image", "list"]).await;
    r.ok();
    assert!(r.stdout.contains("golden"), "{r:#?}");
    // A VM from it, by the image's name.
    body["specs"]["vm_name"] = "copy".into();
    let file = m.file("copy.json", &body);
    let r = m
        .ctl(&[
            "vm", "create", "-f", &file, "--image", "golden", "-o", "json",
        ])
        .await;
    r.ok();
    assert_eq!(r.json()["specs"]["image"], image.as_str(), "{r:#?}");
    assert_eq!(r.json()["status"], "running", "{r:#?}");
    // Resized: refused while running, then stopped for it with --stop.
    let r = m.ctl(&["vm", "resize", "copy", "--cores", "3"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("stop"), "{r:#?}");
    let r = m
        .ctl(&[
            "vm", "resize", "copy", "--cores", "3", "--stop", "-o", "json",
        ])
        .await;
    r.ok();
    assert_eq!(r.json()["specs"]["cores"], 3, "{r:#?}");
    assert_eq!(r.json()["status"], "running", "{r:#?}");
    // Rebuilt from a distribution, then from the image again.
    let r = m
        .ctl(&["vm", "rebuild", "copy", "--os", "Ubuntu", "-o", "json"])
        .await;
    r.ok();
    assert_eq!(r.json()["specs"]["image"], Value::Null, "{r:#?}");
    assert_eq!(r.json()["specs"]["os_distribution"], "ubuntu", "{r:#?}");
    let r = m
        .ctl(&["vm", "rebuild", "copy", "--image", "golden", "-o", "json"])
        .await;
    r.ok();
    assert_eq!(r.json()["specs"]["image"], image.as_str(), "{r:#?}");
    let r = m.ctl(&["vm", "rebuild", "copy"]).await;
    assert_eq!(r.code, Some(2), "a usage error: {r:#?}");
    // Migrated to the other host of its provider, then drained back.
    let r = m.ctl(&["vm", "migrate", "copy", "-o", "json"]).await;
    r.ok();
    let moved_to = r.json()["host"].as_str().unwrap().to_owned();
    assert_ne!(moved_to, "ionos-fra-1", "{r:#?}");
    let r = m.ctl(&["target", "drain", &moved_to]).await;
    r.ok();
    assert!(r.stdout.contains("migrate_vm"), "{r:#?}");
    let r = m.ctl(&["vm", "get", "copy", "-o", "json"]).await;
    r.ok();
    assert_eq!(r.json()["host"], "ionos-fra-1", "{r:#?}");
    m.ctl(&["target", "undrain", &moved_to]).await.ok();
    // Joins a network by name, running, and leaves it.
    m.ctl(&[
        "network",
        "create",
        "--name",
        "late",
        "--cidr",
        "192.168.71.0/24",
        "--no-dhcp",
    ])
    .await
    .ok();
    let r = m
        .ctl(&["vm", "attach-network", "copy", "late", "-o", "json"])
        .await;
    r.ok();
    assert_eq!(r.json()["private_net"][0]["ip"], "192.168.71.2", "{r:#?}");
    assert_eq!(r.json()["status"], "running", "{r:#?}");
    let r = m
        .ctl(&["vm", "detach-network", "copy", "late", "-o", "json"])
        .await;
    r.ok();
    assert_eq!(r.json()["private_net"], json!([]), "{r:#?}");
    m.ctl(&["network", "delete", "late"]).await.ok();
    let r = m
        .ctl(&["vm", "create", "-f", &file, "--image", "no-such-image"])
        .await;
    assert_ne!(r.code, Some(0), "{r:#?}");
    assert!(r.stderr.contains("no-such-image"), "{r:#?}");
    m.ctl(&["image", "delete", "golden"]).await.ok();
    let r = m.ctl(&["image", "list", "-o", "json"]).await;
    r.ok();
    assert_eq!(r.json(), json!([]), "{r:#?}");
    m.stop().await;
}

/// A port nothing listens on now: the simulated hosts listen on loopback
/// for their forwards.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// Whether something listens on `127.0.0.1:port` (binding it fails).
fn listened_on(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_forward_to_a_vm_created_listed_shown_and_deleted() {
    let m = Meson::start().await;
    let r = m
        .ctl(&[
            "network",
            "create",
            "--name",
            "edge",
            "--cidr",
            "192.168.72.0/24",
            "--no-dhcp",
            "-o",
            "json",
        ])
        .await;
    let network = r.ok().json()["id"].as_str().unwrap().to_owned();
    let mut body = harness::seed_vm();
    body["specs"]["vm_name"] = "web".into();
    let file = m.file("web.json", &body);
    let r = m.ctl(&["vm", "create", "-f", &file, "-o", "json"]).await;
    let vm = r.ok().json()["id"].as_str().unwrap().to_owned();
    m.ctl(&["vm", "attach-network", "web", "edge"]).await.ok();

    // Made by names, waiting with progress: active, its port listened on.
    let port = free_port();
    let port_s = port.to_string();
    let r = m
        .ctl(&[
            "port-forward",
            "create",
            "edge",
            "--vm",
            "web",
            "--public-port",
            &port_s,
            "--private-port",
            "22",
            "-o",
            "json",
        ])
        .await;
    r.ok();
    assert!(
        r.stderr.contains("create_port_forward: success 100%"),
        "{r:#?}"
    );
    let f = r.json();
    assert_eq!(f["status"], "active", "{f}");
    assert_eq!(f["protocol"], "tcp", "{f}");
    assert_eq!(f["public_port"], port, "{f}");
    assert_eq!(f["private_port"], 22, "{f}");
    assert_eq!(f["vm"], vm.as_str(), "{f}");
    assert_eq!(f["network"], network.as_str(), "{f}");
    let id = f["id"].as_str().unwrap().to_owned();
    let short = &id[id.len() - 8..];
    let address = format!("{}:{port}", f["public_ip"].as_str().unwrap());
    assert!(listened_on(port), "the host forwards {port}");

    // The port is the host's now: a second forward on it is refused; and
    // the VM cannot leave the network while forwarded to.
    let r = m
        .ctl(&[
            "port-forward",
            "create",
            "edge",
            "--vm",
            "web",
            "--public-port",
            &port_s,
            "--private-port",
            "80",
        ])
        .await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(
        r.stderr.contains("(conflict)") && r.stderr.contains("is taken on host"),
        "{r:#?}"
    );
    let r = m.ctl(&["vm", "detach-network", "web", "edge"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains(&format!("port forward {id}")), "{r:#?}");
    // A port of 0 is a usage error, not meson's.
    let r = m
        .ctl(&[
            "port-forward",
            "create",
            "edge",
            "--vm",
            "web",
            "--public-port",
            "0",
            "--private-port",
            "22",
        ])
        .await;
    assert_eq!(r.code, Some(2), "{r:#?}");

    // Listed: a table with short ids and the public address, and JSON.
    let r = m.ctl(&["port-forward", "list", "edge"]).await;
    r.ok();
    assert!(
        r.stdout
            .starts_with("ID        VM        PROTOCOL  PUBLIC ADDRESS"),
        "{r:#?}"
    );
    let row = r
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("{short} ")))
        .unwrap_or_else(|| panic!("no row for {short}: {r:#?}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells,
        [short, &vm[vm.len() - 8..], "tcp", &address, "22", "active"],
        "{row}"
    );
    let r = m
        .ctl(&["port-forward", "list", &network, "-o", "json"])
        .await;
    let list = r.ok().json();
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(list[0]["id"], id.as_str(), "{list}");

    // Shown by its short id (the network by name), and by whole ids.
    let r = m
        .ctl(&["port-forward", "get", "edge", short, "-o", "json"])
        .await;
    assert_eq!(r.ok().json()["id"], id.as_str(), "{r:#?}");
    let r = m.ctl(&["port-forward", "get", &network, &id]).await;
    r.ok();
    assert!(
        r.stdout.contains(&format!("Public address:  {address}\n")),
        "{r:#?}"
    );
    assert!(r.stdout.contains("Status:          active\n"), "{r:#?}");
    let r = m.ctl(&["port-forward", "get", "edge", "ffffffff"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("no port forward"), "{r:#?}");

    // Deleted, waiting: gone from meson and from the host.
    let r = m
        .ctl(&["port-forward", "delete", "edge", short, "-o", "json"])
        .await;
    r.ok();
    let a = r.json();
    assert_eq!(
        (a["command"].as_str(), a["status"].as_str()),
        (Some("delete_port_forward"), Some("success")),
        "{a}"
    );
    let r = m.ctl(&["port-forward", "list", "edge", "-o", "json"]).await;
    assert_eq!(r.ok().json(), json!([]), "{r:#?}");
    let r = m.ctl(&["port-forward", "get", "edge", &id]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(not_found)"), "{r:#?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while listened_on(port) {
        assert!(Instant::now() < deadline, "{port} still listened on");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The VM may leave the network now.
    m.ctl(&["vm", "detach-network", "web", "edge"]).await.ok();
    m.stop().await;
}

/// A backup window, `HH-HH` (UTC), that the current hour is outside of,
/// so no automatic backup is taken while the test runs.
fn window_away_from_now() -> String {
    use chrono::Timelike;
    let hour = chrono::Utc::now().hour();
    format!("{:02}-{:02}", (hour + 6) % 24, (hour + 8) % 24)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backups_of_a_vm_taken_listed_restored_and_deleted() {
    let m = Meson::start().await;
    let mut body = harness::seed_vm();
    body["specs"]["vm_name"] = "web".into();
    let file = m.file("web.json", &body);
    let r = m.ctl(&["vm", "create", "-f", &file, "-o", "json"]).await;
    let vm = r.ok().json()["id"].as_str().unwrap().to_owned();
    assert_eq!(r.json()["backups"], Value::Null, "{r:#?}");
    let r = m.ctl(&["vm", "get", "web"]).await;
    assert!(
        r.ok().stdout.contains("\nBackups:           off\n"),
        "{r:#?}"
    );

    // The policy: meson's defaults first, then a window and a count; both
    // shown on the VM.
    let r = m.ctl(&["vm", "enable-backups", "web", "-o", "json"]).await;
    let policy = r.ok().json()["backups"].clone();
    assert_eq!(policy["keep"], 7, "{r:#?}");
    let window = policy["window"].as_str().unwrap_or_default();
    assert!(
        window.len() == 5 && window.as_bytes()[2] == b'-',
        "a HH-HH window: {policy}"
    );
    let window = window_away_from_now();
    let r = m
        .ctl(&[
            "vm",
            "enable-backups",
            "web",
            "--window",
            &window,
            "--keep",
            "3",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(
        r.ok().json()["backups"],
        json!({"window": window, "keep": 3}),
        "{r:#?}"
    );
    let r = m.ctl(&["vm", "get", &vm]).await;
    assert!(
        r.ok().stdout.contains(&format!(
            "\nBackups:           daily, window {window} UTC, newest 3 kept\n"
        )),
        "{r:#?}"
    );
    // A count out of 1..=31 is a usage error; a bad window, meson's refusal.
    let r = m.ctl(&["vm", "enable-backups", "web", "--keep", "0"]).await;
    assert_eq!(r.code, Some(2), "{r:#?}");
    let r = m
        .ctl(&["vm", "enable-backups", "web", "--window", "25-02"])
        .await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("window"), "{r:#?}");

    // A backup now, waiting with progress: available, the VM's.
    let r = m
        .ctl(&[
            "vm",
            "backup",
            "web",
            "--name",
            "before-upgrade",
            "-l",
            "env=dev",
            "-o",
            "json",
        ])
        .await;
    r.ok();
    assert!(r.stderr.contains("create_backup: success 100%"), "{r:#?}");
    let b = r.json();
    assert_eq!(b["status"], "available", "{b}");
    assert_eq!(b["kind"], "manual", "{b}");
    assert_eq!(b["vm"], vm.as_str(), "{b}");
    assert_eq!(b["vm_name"], "web", "{b}");
    assert_eq!(b["labels"], json!({"env": "dev"}), "{b}");
    let id = b["id"].as_str().unwrap().to_owned();
    let short = &id[id.len() - 8..];

    // Listed as the VM's, a table with short ids, and JSON.
    let r = m.ctl(&["vm", "backups", "web"]).await;
    r.ok();
    assert!(
        r.stdout
            .starts_with("ID        NAME            VM   KIND    STATUS     SIZE"),
        "{r:#?}"
    );
    let row = r
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("{short} ")))
        .unwrap_or_else(|| panic!("no row for {short}: {r:#?}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells[..5],
        [short, "before-upgrade", "web", "manual", "available"],
        "{row}"
    );
    let r = m
        .ctl(&[
            "backup",
            "list",
            "--vm",
            "web",
            "--name",
            "before-upgrade",
            "-o",
            "json",
        ])
        .await;
    let list = r.ok().json();
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(list[0]["id"], id.as_str(), "{list}");
    let r = m
        .ctl(&["backup", "list", "--status", "error", "-o", "json"])
        .await;
    assert_eq!(r.ok().json(), json!([]), "{r:#?}");
    // Shown by name and by short id; renamed.
    let r = m
        .ctl(&["backup", "get", "before-upgrade", "-o", "json"])
        .await;
    assert_eq!(r.ok().json()["id"], id.as_str(), "{r:#?}");
    let r = m.ctl(&["backup", "get", short]).await;
    r.ok();
    assert!(r.stdout.contains("Status:    available\n"), "{r:#?}");
    assert!(
        r.stdout.contains(&format!("VM:        web ({vm})\n")),
        "{r:#?}"
    );
    let r = m
        .ctl(&["backup", "update", short, "--name", "golden", "-o", "json"])
        .await;
    assert_eq!(r.ok().json()["name"], "golden", "{r:#?}");
    let r = m.ctl(&["backup", "get", "ffffffff"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("no backup"), "{r:#?}");

    // Restored into a new VM, the backup by name: a running VM of its own.
    let r = m
        .ctl(&[
            "vm",
            "restore",
            "web",
            "--backup",
            "golden",
            "--into",
            "new",
            "--name",
            "web-restored",
            "-o",
            "json",
        ])
        .await;
    r.ok();
    let restored = r.json();
    assert_eq!(restored["name"], "web-restored", "{restored}");
    assert_eq!(restored["status"], "running", "{restored}");
    assert_ne!(restored["id"], vm.as_str(), "{restored}");
    assert_eq!(
        restored["host"], b["host"],
        "on the backup's host: {restored}"
    );
    let r = m.ctl(&["vm", "list", "-o", "json"]).await;
    let names: Vec<Value> = r
        .ok()
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].clone())
        .collect();
    assert!(names.contains(&json!("web-restored")), "{names:?}");
    // Restored into the VM itself, the backup by short id: running again.
    let r = m
        .ctl(&["vm", "restore", "web", "--backup", short, "-o", "json"])
        .await;
    r.ok();
    assert_eq!(r.json()["id"], vm.as_str(), "{r:#?}");
    assert_eq!(r.json()["status"], "running", "{r:#?}");

    // Deleted, waiting: gone.
    let r = m.ctl(&["backup", "delete", short, "-o", "json"]).await;
    r.ok();
    let a = r.json();
    assert_eq!(
        (a["command"].as_str(), a["status"].as_str()),
        (Some("delete_backup"), Some("success")),
        "{a}"
    );
    let r = m.ctl(&["backup", "get", &id]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(not_found)"), "{r:#?}");

    // The policy off: the VM says so.
    let r = m.ctl(&["vm", "disable-backups", "web", "-o", "json"]).await;
    assert_eq!(r.ok().json()["backups"], Value::Null, "{r:#?}");
    let r = m.ctl(&["vm", "get", "web"]).await;
    assert!(
        r.ok().stdout.contains("\nBackups:           off\n"),
        "{r:#?}"
    );
    m.stop().await;
}

/// The next `n` bytes a VNC viewer reads from `tcp`, within 20 s.
async fn rfb_read(tcp: &mut tokio::net::TcpStream, n: usize, what: &str) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; n];
    tokio::time::timeout(Duration::from_secs(20), tcp.read_exact(&mut buf))
        .await
        .unwrap_or_else(|_| panic!("no {what} within 20 s"))
        .unwrap_or_else(|e| panic!("reading the {what}: {e}"));
    buf
}

async fn rfb_write(tcp: &mut tokio::net::TcpStream, bytes: &[u8]) {
    use tokio::io::AsyncWriteExt;
    tcp.write_all(bytes).await.expect("write to the bridge");
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_on_a_vm_bridged_to_a_vnc_viewer() {
    let m = Meson::start().await;
    let mut body = harness::seed_vm();
    body["specs"]["vm_name"] = "web".into();
    let file = m.file("web.json", &body);
    let r = m.ctl(&["vm", "create", "-f", &file, "-o", "json"]).await;
    assert_eq!(r.ok().json()["status"], "running", "{r:#?}");
    let vm = r.json()["id"].as_str().unwrap().to_owned();

    // `vm console` listens, says where and the password on one line, and
    // relays the first connection until it closes.
    let mut child = command(
        &m.dir,
        &[
            "--url",
            &m.base,
            "--token",
            &m.token,
            "vm",
            "console",
            "web",
            "--listen",
            "127.0.0.1:0",
        ],
        &[],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("mesonctl runs");
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), stdout.next_line())
        .await
        .expect("a line within a minute")
        .expect("stdout")
        .unwrap_or_else(|| panic!("no line: {:?}", child.try_wait()));
    let words: Vec<&str> = line.split_whitespace().collect();
    assert!(
        words.len() >= 5 && words[..2] == ["VNC", "viewer:"] && words[3] == "password:",
        "{line}"
    );
    assert!(
        line.ends_with("  (connect within 60 s; one connection)"),
        "{line}"
    );
    let (address, password) = (words[2].to_owned(), words[4].to_owned());
    assert!(address.starts_with("127.0.0.1:"), "{line}");
    assert_eq!(password.len(), 8, "{line}");

    // A VNC viewer, as RFB 3.8 has it: VNC authentication with the
    // password, then the VM's screen.
    let mut tcp = tokio::net::TcpStream::connect(&address)
        .await
        .unwrap_or_else(|e| panic!("connect to {address}: {e}"));
    let version = rfb_read(&mut tcp, 12, "protocol version").await;
    assert_eq!(
        version,
        b"RFB 003.008\n",
        "{:?}",
        String::from_utf8_lossy(&version)
    );
    rfb_write(&mut tcp, b"RFB 003.008\n").await;
    let count = rfb_read(&mut tcp, 1, "security type count").await[0];
    let types = rfb_read(&mut tcp, usize::from(count), "security types").await;
    assert_eq!(types, [2], "VNC authentication only");
    rfb_write(&mut tcp, &[2]).await;
    let challenge: [u8; 16] = rfb_read(&mut tcp, 16, "challenge")
        .await
        .try_into()
        .expect("16 bytes");
    let answer = meson_api::console::rfb::vnc_response(&password, &challenge);
    rfb_write(&mut tcp, &answer).await;
    let result = rfb_read(&mut tcp, 4, "security result").await;
    assert_eq!(be_u32(&result), 0, "the password is accepted");
    rfb_write(&mut tcp, &[1]).await; // ClientInit: shared
    let size = rfb_read(&mut tcp, 4, "ServerInit").await;
    let (width, height) = (
        u16::from_be_bytes([size[0], size[1]]),
        u16::from_be_bytes([size[2], size[3]]),
    );
    assert_eq!((width, height), (640, 200), "the simulated screen");
    rfb_read(&mut tcp, 16, "pixel format").await;
    let len = be_u32(&rfb_read(&mut tcp, 4, "name length").await);
    assert!(len > 0 && len < 4096, "name length {len}");
    let name = rfb_read(&mut tcp, len as usize, "name").await;
    assert!(
        !String::from_utf8_lossy(&name).trim().is_empty(),
        "{name:?}"
    );

    // The viewer leaves: the session ends, and with it the command.
    drop(tcp);
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("mesonctl ends within 20 s of the viewer")
        .expect("mesonctl's status");
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        use tokio::io::AsyncReadExt;
        let _ = e.read_to_string(&mut stderr).await;
    }
    assert!(status.success(), "{status:?}: {stderr}");

    // meson has the session closed (its relay records it at once or
    // within a heartbeat).
    let deadline = Instant::now() + Duration::from_secs(15);
    let session = loop {
        let r = m
            .ctl(&["console", "list", "--vm", "web", "-o", "json"])
            .await;
        let list = r.ok().json();
        assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
        if list[0]["status"] == "closed" {
            break list[0].clone();
        }
        assert!(Instant::now() < deadline, "not closed: {list}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(session["vm"], vm.as_str(), "{session}");
    assert!(session["opened"].is_string(), "{session}");
    assert!(session["close_reason"].is_string(), "{session}");
    let id = session["id"].as_str().unwrap().to_owned();
    let short = &id[id.len() - 8..];
    // Listed as a table with short ids; shown by its short id.
    let r = m.ctl(&["console", "list", "--status", "closed"]).await;
    r.ok();
    assert!(
        r.stdout
            .starts_with("ID        VM        STATUS  REQUESTED BY"),
        "{r:#?}"
    );
    let row = r
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("{short} ")))
        .unwrap_or_else(|| panic!("no row for {short}: {r:#?}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[..3], [short, &vm[vm.len() - 8..], "closed"], "{row}");
    let r = m.ctl(&["console", "get", short]).await;
    r.ok();
    assert!(
        r.stdout.contains(&format!("ID:            {id}\n")),
        "{r:#?}"
    );
    assert!(r.stdout.contains("Status:        closed\n"), "{r:#?}");
    // A console serves one connection: it is closed, not deletable.
    let r = m.ctl(&["console", "delete", &id]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(conflict)"), "{r:#?}");

    // --url-only: the WebSocket URL and the password, nothing relayed;
    // deleting that console revokes it.
    let r = m
        .ctl(&["vm", "console", &vm, "--url-only", "-o", "json"])
        .await;
    let answer = r.ok().json();
    let url = answer["wss_url"].as_str().unwrap_or_default();
    assert!(
        url.starts_with("ws://") && url.contains("/websocket?token="),
        "{answer}"
    );
    assert_eq!(
        answer["password"].as_str().map(str::len),
        Some(8),
        "{answer}"
    );
    assert_eq!(answer["console"]["status"], "requested", "{answer}");
    let second = answer["console"]["id"].as_str().unwrap().to_owned();
    assert!(
        url.contains(&format!("/v1/consoles/{second}/websocket")),
        "{answer}"
    );
    let r = m.ctl(&["vm", "console", "web", "--url-only"]).await;
    r.ok();
    assert!(r.stdout.starts_with("URL:       ws://"), "{r:#?}");
    assert!(r.stdout.contains("\nPassword:  "), "{r:#?}");
    let r = m
        .ctl(&[
            "console",
            "delete",
            &second[second.len() - 8..],
            "-o",
            "json",
        ])
        .await;
    let revoked = r.ok().json();
    assert_eq!(revoked["id"], second.as_str(), "{revoked}");
    assert_eq!(revoked["status"], "revoked", "{revoked}");
    let r = m
        .ctl(&[
            "console", "list", "--vm", &vm, "--status", "revoked", "-o", "json",
        ])
        .await;
    let list = r.ok().json();
    assert_eq!(list[0]["id"], second.as_str(), "{list}");
    let r = m
        .ctl(&["console", "list", "--limit", "1", "-o", "json"])
        .await;
    assert_eq!(r.ok().json().as_array().map(Vec::len), Some(1), "{r:#?}");
    let r = m.ctl(&["console", "get", "ffffffff"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("no console"), "{r:#?}");

    // -o json: the line is JSON; a viewer that connects and leaves at once
    // ends the session, and the command, all the same.
    let mut child = command(
        &m.dir,
        &[
            "--url", &m.base, "--token", &m.token, "vm", "console", "web", "-o", "json",
        ],
        &[],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .expect("mesonctl runs");
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), stdout.next_line())
        .await
        .expect("a line within a minute")
        .expect("stdout")
        .expect("a line");
    let said: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(said["console"]["status"], "requested", "{said}");
    assert_eq!(said["console"]["vm"], vm.as_str(), "{said}");
    assert_eq!(said["password"].as_str().map(str::len), Some(8), "{said}");
    let address = said["address"].as_str().unwrap_or_default();
    drop(
        tokio::net::TcpStream::connect(address)
            .await
            .unwrap_or_else(|e| panic!("connect to {address}: {e}")),
    );
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("mesonctl ends within 20 s of the viewer")
        .expect("mesonctl's status");
    assert!(status.success(), "{status:?}");

    // A VM that is off has no screen to show: meson says so.
    m.ctl(&["vm", "poweroff", "web"]).await.ok();
    let r = m.ctl(&["vm", "console", "web"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(
        r.stderr.contains("start it first") && r.stderr.contains("(conflict)"),
        "{r:#?}"
    );
    assert!(r.stdout.is_empty(), "{r:#?}");
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volumes_networks_and_kubernetes_versions() {
    let m = Meson::start().await;

    // A standalone volume: made (waiting for its action), listed, shown,
    // relabelled, deleted; by name throughout.
    let r = m
        .ctl(&[
            "volume", "create", "--name", "data-1", "--size", "5", "-l", "env=dev", "-o", "json",
        ])
        .await;
    r.ok();
    let v = r.json();
    assert_eq!(v["status"], "available", "{v}");
    assert_eq!(v["size"], 5);
    assert_eq!(v["labels"], json!({"env": "dev"}));
    let id = v["id"].as_str().unwrap().to_owned();
    let r = m.ctl(&["volume", "list", "--standalone", "true"]).await;
    r.ok();
    assert!(
        r.stdout.contains("data-1") && r.stdout.contains("5 GB"),
        "{r:#?}"
    );
    assert!(r.stdout.contains(&id[id.len() - 8..]), "short ids: {r:#?}");
    let r = m.ctl(&["volume", "get", "data-1"]).await;
    r.ok();
    assert!(r.stdout.contains(&id), "{r:#?}");
    let r = m
        .ctl(&[
            "volume", "update", "data-1", "--name", "data-2", "-l", "env=prod", "-o", "json",
        ])
        .await;
    r.ok();
    assert_eq!(r.json()["name"], "data-2");
    assert_eq!(r.json()["labels"], json!({"env": "prod"}));
    assert_eq!(
        m.get(&format!("/v1/volumes/{id}")).await.body["volume"]["name"],
        "data-2"
    );
    // A bad label is a usage error (exit 2); a bad size is meson's refusal.
    let r = m
        .ctl(&["volume", "update", "data-2", "-l", "novalue"])
        .await;
    assert_eq!(r.code, Some(2), "{r:#?}");
    let r = m
        .ctl(&["volume", "create", "--name", "huge", "--size", "999999"])
        .await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("size"), "{r:#?}");
    // Attached to a running VM on its host (made attaching a volume of
    // that host), grown, detached; by names, waiting with progress.
    let r = m
        .ctl(&[
            "volume", "create", "--name", "anchor", "--size", "1", "-o", "json",
        ])
        .await;
    r.ok();
    let anchor = r.json()["id"].as_str().unwrap().to_owned();
    let mut body = harness::seed_vm();
    body["specs"]["vm_name"] = "holder".into();
    body.as_object_mut().unwrap().remove("provider");
    body["volumes"] = json!([anchor]);
    let made = m.m.post("/v1/vms", &body).await;
    assert_eq!(made.status, reqwest::StatusCode::CREATED, "{}", made.body);
    m.m.wait_action(made.body["action"]["id"].as_str().unwrap())
        .await;
    let vm = made.body["vm"]["id"].as_str().unwrap().to_owned();
    let r = m
        .ctl(&["volume", "attach", "data-2", "--vm", "holder", "-o", "json"])
        .await;
    r.ok();
    assert_eq!(
        (
            r.json()["status"].as_str(),
            r.json()["attached_to"].as_str()
        ),
        (Some("attached"), Some(vm.as_str())),
        "{r:#?}"
    );
    let r = m
        .ctl(&["volume", "resize", "data-2", "--size", "8", "-o", "json"])
        .await;
    r.ok();
    assert_eq!(r.json()["size"], 8, "{r:#?}");
    let r = m.ctl(&["volume", "resize", "data-2", "--size", "2"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(
        r.stderr.contains("size") && r.stderr.contains("only grow"),
        "{r:#?}"
    );
    let r = m.ctl(&["volume", "detach", "data-2", "-o", "json"]).await;
    r.ok();
    assert_eq!(r.json()["status"], "available", "{r:#?}");
    let r = m.ctl(&["volume", "detach", "data-2"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    m.ctl(&["volume", "delete", "data-2"]).await.ok();
    assert_eq!(
        m.get(&format!("/v1/volumes/{id}")).await.status,
        reqwest::StatusCode::NOT_FOUND
    );

    // A network: made, listed, shown, renamed, deleted.
    let r = m
        .ctl(&[
            "network",
            "create",
            "--name",
            "db",
            "--cidr",
            "192.168.10.0/24",
            "--no-dhcp",
            "-o",
            "json",
        ])
        .await;
    r.ok();
    let n = r.json();
    assert_eq!(n["dhcp"], false, "{n}");
    assert_eq!(n["cidr"], "192.168.10.0/24");
    let r = m.ctl(&["network", "list"]).await;
    r.ok();
    assert!(
        r.stdout.contains("db") && r.stdout.contains("192.168.10.0/24"),
        "{r:#?}"
    );
    let r = m
        .ctl(&["network", "update", "db", "--name", "db2", "-o", "json"])
        .await;
    r.ok();
    assert_eq!(r.json()["name"], "db2");
    m.ctl(&["network", "get", "db2"]).await.ok();
    m.ctl(&["network", "delete", "db2"]).await.ok();
    let left = m.get("/v1/networks").await;
    assert_eq!(left.body["networks"], json!([]), "{}", left.body);

    // The Kubernetes versions, with where each may go.
    let r = m.ctl(&["kubernetes", "versions"]).await;
    r.ok();
    assert!(
        r.stdout.contains("UPGRADES TO") && r.stdout.contains("1.35"),
        "{r:#?}"
    );
    let r = m.ctl(&["kubernetes", "versions", "-o", "json"]).await;
    r.ok();
    assert!(r.json().as_array().is_some_and(|v| v.len() > 5), "{r:#?}");
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_for_bash_zsh_and_fish() {
    let dir = std::env::temp_dir();
    for shell in ["bash", "zsh", "fish"] {
        let r = run(&dir, &["completion", shell], &[]).await;
        assert_eq!(r.code, Some(0), "{r:#?}");
        for word in ["volume", "network", "kubernetes", "cluster"] {
            assert!(r.stdout.contains(word), "{shell}: {word}");
        }
    }
    // Bash completes with it: `mesonctl vol<TAB>`, `mesonctl volume <TAB>`.
    let script = dir.join(format!(
        "mesonctl-completion-{}.bash",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::write(
        &script,
        run(&dir, &["completion", "bash"], &[]).await.stdout,
    )
    .unwrap();
    // As bash calls it: the words so far, the word completed and the one
    // before it.
    let complete = |words: &str, cword: usize| {
        let list: Vec<&str> = words.split(' ').collect();
        let cur = list[cword].trim_matches('\'');
        let prev = list[cword - 1];
        let program = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE='{words}'; \
             COMP_POINT=${{#COMP_LINE}}; _mesonctl mesonctl '{cur}' '{prev}'; \
             echo \"${{COMPREPLY[*]}}\"",
            script.display()
        );
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(program)
            .output()
            .expect("bash runs");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(complete("mesonctl vol", 1), "volume");
    let sub = complete("mesonctl volume ''", 2);
    for word in [
        "create", "list", "get", "update", "delete", "attach", "detach", "resize",
    ] {
        assert!(sub.split_whitespace().any(|w| w == word), "{sub}");
    }
    let _ = std::fs::remove_file(&script);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_targets_tenant_quotas_audit_status_and_metrics() {
    let m = Meson::start().await;

    let r = m.ctl(&["status"]).await;
    let out = &r.ok().stdout;
    assert!(out.contains("Ready:") && out.contains("ready"), "{r:#?}");
    assert!(out.contains("meson"), "{r:#?}");
    let r = m.ctl(&["metrics"]).await;
    assert!(r.ok().stdout.contains("meson_"), "{r:#?}");

    // No VM on any host lacks a record: no orphans.
    let r = m.ctl(&["orphan", "list", "-o", "json"]).await;
    assert_eq!(r.ok().json(), json!([]), "{r:#?}");
    // The AtomOS targets: listed, shown, turned off and on, one added.
    let r = m.ctl(&["target", "list", "-o", "json"]).await;
    let targets = r.ok().json();
    let first = targets[0]["name"].as_str().unwrap().to_owned();
    let r = m
        .ctl(&[
            "target",
            "update",
            &first,
            "--enabled",
            "false",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(r.ok().json()["enabled"], false, "{r:#?}");
    let r = m.ctl(&["target", "get", &first, "-o", "json"]).await;
    assert_eq!(r.ok().json()["enabled"], false, "{r:#?}");
    m.ctl(&["target", "update", &first, "--enabled", "true"])
        .await
        .ok();
    let r = m
        .ctl(&[
            "target",
            "create",
            "--name",
            "spare",
            "--host",
            "127.0.0.1",
            "--provider",
            "ovh",
            "--region",
            "eu-west-gra",
            "--continent",
            "europe",
            "--disabled",
            "-o",
            "json",
        ])
        .await;
    let spare = r.ok().json();
    assert_eq!(spare["enabled"], false, "{spare}");
    let r = m.ctl(&["target", "list", "-o", "json"]).await;
    assert_eq!(
        r.ok().json().as_array().unwrap().len(),
        targets.as_array().unwrap().len() + 1
    );

    // A tenant's quotas: set, and back to the default.
    let r = m
        .ctl(&["tenant", "quota", "set", "acme", "--vms", "7", "-o", "json"])
        .await;
    let q = r.ok().json();
    let vms = |q: &Value| {
        q["limits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == "vms")
            .unwrap()["quota"]
            .clone()
    };
    assert_eq!(vms(&q), 7, "{q}");
    let r = m
        .ctl(&["tenant", "quota", "get", "acme", "-o", "json"])
        .await;
    assert_eq!(vms(&r.ok().json()), 7);
    let r = m
        .ctl(&[
            "tenant", "quota", "set", "acme", "--vms", "default", "-o", "json",
        ])
        .await;
    assert_eq!(vms(&r.ok().json()), 100);
    let r = m
        .ctl(&["tenant", "quota", "set", "acme", "--vms", "lots"])
        .await;
    assert_eq!(r.code, Some(2), "{r:#?}");

    // The audit log has all of it.
    let r = m
        .ctl(&[
            "audit",
            "list",
            "--operation",
            "tenant_quota_update",
            "-o",
            "json",
        ])
        .await;
    let entries = r.ok().json();
    assert_eq!(entries.as_array().map(Vec::len), Some(2), "{entries}");
    let r = m
        .ctl(&["audit", "list", "--operation", "target_update"])
        .await;
    assert!(r.ok().stdout.contains("target_update"), "{r:#?}");
    m.stop().await;
}

/// mesonctl with this meson's URL and `token` as its token.
async fn with_token(m: &Meson, token: &str, args: &[&str]) -> Run {
    let mut all = vec!["--url", &m.base, "--token", token];
    all.extend_from_slice(args);
    run(&m.dir, &all, &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_created_used_by_mesonctl_listed_and_revoked() {
    let m = Meson::start().await;

    // Created: the secret printed this once, with a warning that says so.
    let r = m
        .ctl(&[
            "token",
            "create",
            "ci",
            "--role",
            "editor",
            "--expires-in",
            "90d",
        ])
        .await;
    r.ok();
    let secret = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("Secret:"))
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|| panic!("no secret: {r:#?}"));
    assert!(secret.starts_with("meson_") && secret.len() == 46, "{r:#?}");
    assert!(r.stdout.contains("Role:"), "{r:#?}");
    assert!(
        r.stderr.contains("warning:") && r.stderr.contains("will not be shown again"),
        "{r:#?}"
    );
    // -o json: the whole answer.
    let r = m
        .ctl(&[
            "token",
            "create",
            "dashboards",
            "--role",
            "viewer",
            "-o",
            "json",
        ])
        .await;
    let j = r.ok().json();
    assert!(
        j["secret"]
            .as_str()
            .is_some_and(|s| s.starts_with("meson_")),
        "{j}"
    );
    assert_eq!(j["token"]["role"], "viewer", "{j}");
    assert!(j["token"]["expires"].is_null(), "{j}");

    // The secret authenticates mesonctl as the tenant, at its role: from
    // --token and from MESON_TOKEN.
    let r = with_token(&m, &secret, &["vm", "list"]).await;
    assert!(r.ok().stdout.starts_with("ID"), "{r:#?}");
    let r = run(
        &m.dir,
        &["--url", &m.base, "vm", "list", "-o", "json"],
        &[("MESON_TOKEN", &secret)],
    )
    .await;
    assert!(r.ok().json().is_array(), "{r:#?}");
    let r = with_token(&m, &secret, &["token", "list"]).await;
    assert_eq!(r.code, Some(1), "an editor manages no tokens: {r:#?}");
    assert!(r.stderr.contains("(forbidden)"), "{r:#?}");

    // Listed with its prefix, never its secret; read by its name, its id
    // or the last 8 digits of it the table shows.
    let r = m.ctl(&["token", "list"]).await;
    let table = &r.ok().stdout;
    assert!(
        table
            .lines()
            .next()
            .is_some_and(|h| h.split_whitespace().collect::<Vec<_>>()
                == [
                    "ID", "NAME", "ROLE", "PREFIX", "CREATED", "EXPIRES", "LAST", "USED", "REVOKED"
                ]),
        "{r:#?}"
    );
    assert!(table.contains(&secret[..12]), "{r:#?}");
    assert!(!table.contains(&secret[12..]), "{r:#?}");
    let r = m.ctl(&["token", "list", "-o", "json"]).await;
    let listed = r.ok().json();
    assert!(!listed.to_string().contains(&secret[12..]), "{listed}");
    let token = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "ci")
        .cloned()
        .unwrap_or_else(|| panic!("ci not listed: {listed}"));
    let id = token["id"].as_str().unwrap().to_owned();
    assert_eq!(token["prefix"].as_str(), Some(&secret[..12]), "{token}");
    for by in [id.as_str(), &id[id.len() - 8..], "ci"] {
        let r = m.ctl(&["token", "get", by, "-o", "json"]).await;
        assert_eq!(r.code, Some(0), "{by}: {r:#?}");
        let t = r.json();
        assert_eq!(t["id"].as_str(), Some(id.as_str()), "{by}: {t}");
        assert_eq!(t["role"], "editor", "{t}");
        assert!(t["expires"].is_string(), "{t}");
        assert!(t["last_used"].is_string(), "used by vm list: {t}");
    }
    let r = m.ctl(&["token", "get", &id]).await;
    assert!(r.ok().stdout.contains("Created by:"), "{r:#?}");

    // Revoked: the very next command with it is refused (exit 1), saying
    // why; revoked again, a conflict; listed only with --revoked.
    let ids: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    let start = unique_prefix(&id, &ids);
    let r = m.ctl(&["token", "revoke", &start, "-o", "json"]).await;
    let t = r.ok().json();
    assert!(t["revoked"].is_string(), "{t}");
    assert_eq!(t["revoked_by"], "dev", "{t}");
    let r = with_token(&m, &secret, &["vm", "list"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stdout.is_empty(), "{r:#?}");
    assert!(r.stderr.contains("(unauthorized)"), "{r:#?}");
    assert!(
        r.stderr
            .contains("meson refused the token (from the command line)")
            && r.stderr.contains("revoked"),
        "{r:#?}"
    );
    let r = m.ctl(&["token", "revoke", &id]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(conflict)"), "{r:#?}");
    let r = m.ctl(&["token", "list", "-o", "json"]).await;
    assert!(!r.ok().stdout.contains(&id), "{r:#?}");
    let r = m.ctl(&["token", "list", "--revoked"]).await;
    assert!(r.ok().stdout.contains(&id[id.len() - 8..]), "{r:#?}");
    // A revoked token's name is nobody's: not found (exit 1).
    let r = m.ctl(&["token", "get", "ci"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("no live token named"), "{r:#?}");

    // Bad input: a role that is not a tenant's (exit 2, naming --role),
    // a duration in no unit mesonctl knows, one meson refuses (exit 1,
    // naming expires_in).
    let r = m.ctl(&["token", "create", "x", "--role", "admin"]).await;
    assert_eq!(r.code, Some(2), "{r:#?}");
    assert!(
        r.stderr.contains("--role") && r.stderr.contains("admin"),
        "{r:#?}"
    );
    let r = m
        .ctl(&[
            "token",
            "create",
            "x",
            "--role",
            "viewer",
            "--expires-in",
            "2w",
        ])
        .await;
    assert_eq!(r.code, Some(2), "{r:#?}");
    assert!(r.stderr.contains("not a duration"), "{r:#?}");
    let r = m
        .ctl(&[
            "token",
            "create",
            "x",
            "--role",
            "viewer",
            "--expires-in",
            "30s",
        ])
        .await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(
        r.stderr.contains("(invalid_input)") && r.stderr.contains("expires_in"),
        "{r:#?}"
    );
    m.stop().await;
}

/// mesonctl with this meson's URL and `token`, `input` on its stdin.
async fn with_stdin(m: &Meson, token: &str, args: &[&str], input: &str) -> Run {
    use tokio::io::AsyncWriteExt;
    let mut all = vec!["--url", &m.base, "--token", token];
    all.extend_from_slice(args);
    let mut child = command(&m.dir, &all, &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mesonctl runs");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(input.as_bytes())
        .await
        .expect("write stdin");
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("mesonctl ends")
        .expect("mesonctl runs");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_invitations_and_another_organisation_with_mesonctl() {
    let m = Meson::start().await;
    let owner = m.token("dev", "olga", meson_api::Role::Owner);
    let ann = m.token("ann-co", "auth0|ann", meson_api::Role::Owner);

    // Added, at most the owner's role; a subject is taken as it is spelt.
    let r = with_token(
        &m,
        &owner,
        &[
            "member",
            "add",
            "auth0|ann",
            "--role",
            "editor",
            "--email",
            "ann@example.com",
            "-o",
            "json",
        ],
    )
    .await;
    let j = r.ok().json();
    assert_eq!(
        (&j["subject"], &j["role"], &j["added_by"], &j["email"]),
        (
            &json!("auth0|ann"),
            &json!("editor"),
            &json!("olga"),
            &json!("ann@example.com")
        ),
        "{j}"
    );
    let r = with_token(
        &m,
        &owner,
        &["member", "add", "auth0|ann", "--role", "viewer"],
    )
    .await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(uniqueness_error)"), "{r:#?}");
    let r = with_token(&m, &owner, &["member", "add", "x", "--role", "admin"]).await;
    assert_eq!(r.code, Some(2), "not a member's role: {r:#?}");
    assert!(r.stderr.contains("--role"), "{r:#?}");
    let r = with_token(&m, &owner, &["member", "list"]).await;
    r.ok();
    assert_eq!(
        headers(&r),
        ["SUBJECT", "EMAIL", "ROLE", "ADDED", "BY", "CREATED"],
        "{r:#?}"
    );
    assert!(
        row(&r, "auth0|ann").contains("ann@example.com  editor"),
        "{r:#?}"
    );
    let r = with_token(&m, &owner, &["member", "get", "auth0|ann"]).await;
    assert!(r.ok().stdout.contains("Added by:  olga"), "{r:#?}");
    let r = with_token(
        &m,
        &owner,
        &["member", "set-role", "auth0|ann", "manager", "-o", "json"],
    )
    .await;
    assert_eq!(r.ok().json()["role"], "manager", "{r:#?}");

    // Ann's token names her own organisation; she acts in `dev` with
    // --organization or MESON_ORGANIZATION, at her role there.
    let r = with_token(&m, &ann, &["membership", "list"]).await;
    r.ok();
    assert_eq!(headers(&r), ["ORGANIZATION", "ROLE", "VIA"], "{r:#?}");
    let rows: Vec<Vec<&str>> = r
        .stdout
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [["ann-co", "owner", "token"], ["dev", "manager", "member"]],
        "{r:#?}"
    );
    let r = with_token(&m, &ann, &["membership", "list", "-o", "json"]).await;
    assert_eq!(r.ok().json()["subject"], "auth0|ann", "{r:#?}");
    let r = with_token(&m, &ann, &["member", "list", "-o", "json"]).await;
    assert_eq!(r.ok().json(), json!([]), "her own organisation's: {r:#?}");
    let r = with_token(
        &m,
        &ann,
        &["--organization", "dev", "member", "list", "-o", "json"],
    )
    .await;
    assert_eq!(r.ok().json()[0]["subject"], "auth0|ann", "{r:#?}");
    let r = run(
        &m.dir,
        &[
            "--url", &m.base, "--token", &ann, "member", "list", "-o", "json",
        ],
        &[("MESON_ORGANIZATION", "dev")],
    )
    .await;
    assert_eq!(r.ok().json()[0]["subject"], "auth0|ann", "{r:#?}");
    let vm_file = m.file("vm.json", &seed_vm());
    let r = with_token(
        &m,
        &ann,
        &[
            "--organization",
            "dev",
            "vm",
            "create",
            "-f",
            &vm_file,
            "--no-wait",
            "-o",
            "json",
        ],
    )
    .await;
    let vm = r.ok().json()["vm"]["id"].as_str().unwrap().to_owned();
    let r = m.ctl(&["vm", "get", &vm, "-o", "json"]).await;
    assert_eq!(r.ok().json()["id"], vm.as_str(), "dev's VM: {r:#?}");
    // Nowhere to stand: refused (exit 1), saying where the organisation
    // came from.
    let r = with_token(&m, &ann, &["--organization", "nowhere", "member", "list"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(forbidden)"), "{r:#?}");
    assert!(
        r.stderr
            .contains("acting in organisation nowhere (from the command line)"),
        "{r:#?}"
    );
    let r = run(
        &m.dir,
        &["--url", &m.base, "--token", &ann, "member", "list"],
        &[("MESON_ORGANIZATION", "nowhere")],
    )
    .await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(from the environment)"), "{r:#?}");
    let r = with_token(&m, &ann, &["--organization", "a\nb", "member", "list"]).await;
    assert_eq!(r.code, Some(5), "{r:#?}");
    assert!(r.stderr.contains("Meson-Organization"), "{r:#?}");
    // A manager grants no more than her role.
    let r = with_token(
        &m,
        &ann,
        &[
            "--organization",
            "dev",
            "member",
            "add",
            "auth0|cy",
            "--role",
            "owner",
        ],
    )
    .await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(
        r.stderr.contains("(invalid_input)") && r.stderr.contains("role"),
        "{r:#?}"
    );

    // An invitation made in `dev`: its token printed this once, with a
    // warning that says so.
    let r = with_token(
        &m,
        &ann,
        &[
            "--organization",
            "dev",
            "invitation",
            "create",
            "bob@example.com",
            "--role",
            "editor",
            "--expires-in",
            "2d",
        ],
    )
    .await;
    r.ok();
    assert!(r.stdout.starts_with("Token:"), "{r:#?}");
    assert!(
        r.stdout.contains("mesoninv_") && r.stdout.contains("Organization:  dev"),
        "{r:#?}"
    );
    assert!(
        r.stderr.contains("warning:") && r.stderr.contains("will not be shown again"),
        "{r:#?}"
    );
    let r = with_token(&m, &owner, &["invitation", "list"]).await;
    r.ok();
    assert_eq!(
        headers(&r),
        [
            "ID", "EMAIL", "ROLE", "STATUS", "INVITED", "BY", "CREATED", "EXPIRES"
        ],
        "{r:#?}"
    );
    assert!(
        r.stdout
            .contains("bob@example.com  editor  pending  auth0|ann"),
        "{r:#?}"
    );
    assert!(!r.stdout.contains("mesoninv_"), "{r:#?}");
    // Read by its email (an open one's), its id, or its last 8 digits.
    let r = with_token(
        &m,
        &owner,
        &["invitation", "get", "bob@example.com", "-o", "json"],
    )
    .await;
    let id = r.ok().json()["id"].as_str().unwrap().to_owned();
    for by in [id.as_str(), &id[id.len() - 8..]] {
        let r = with_token(&m, &owner, &["invitation", "get", by, "-o", "json"]).await;
        assert_eq!(r.ok().json()["status"], "pending", "{by}: {r:#?}");
    }
    // Revoked by its email; then it is no open one, and a second revoke is
    // a conflict.
    let r = with_token(
        &m,
        &owner,
        &["invitation", "revoke", "Bob@Example.com", "-o", "json"],
    )
    .await;
    let j = r.ok().json();
    assert_eq!(
        (&j["status"], &j["revoked_by"]),
        (&json!("revoked"), &json!("olga")),
        "{j}"
    );
    let r = with_token(&m, &owner, &["invitation", "revoke", &id]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(conflict)"), "{r:#?}");
    let r = with_token(&m, &owner, &["invitation", "get", "bob@example.com"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("no open invitation"), "{r:#?}");

    // Another, accepted by Bob signed in with that verified address (the
    // token read from stdin); nobody else may accept it.
    let r = with_token(
        &m,
        &owner,
        &[
            "invitation",
            "create",
            "bob@example.com",
            "--role",
            "viewer",
            "-o",
            "json",
        ],
    )
    .await;
    let secret = r.ok().json()["token"].as_str().unwrap().to_owned();
    let r = with_token(&m, &owner, &["invitation", "accept", &secret]).await;
    assert_eq!(r.code, Some(1), "no verified email: {r:#?}");
    assert!(r.stderr.contains("(forbidden)"), "{r:#?}");
    let bob = m.token_with_email(
        "bob-co",
        "auth0|bob",
        meson_api::Role::Owner,
        "bob@example.com",
    );
    let r = with_stdin(
        &m,
        &bob,
        &["invitation", "accept", "-"],
        &format!("{secret}\n"),
    )
    .await;
    r.ok();
    assert!(r.stdout.starts_with("Organization:  dev\n"), "{r:#?}");
    assert!(r.stdout.contains("Subject:       auth0|bob\n"), "{r:#?}");
    assert!(r.stdout.contains("Role:          viewer\n"), "{r:#?}");
    let r = with_token(&m, &bob, &["invitation", "accept", &secret]).await;
    assert_eq!(r.code, Some(1), "accepted once: {r:#?}");
    assert!(r.stderr.contains("(conflict)"), "{r:#?}");

    // Ann leaves `dev` and acts there no more; Bob is removed.
    let r = with_token(
        &m,
        &ann,
        &["--organization", "dev", "member", "leave", "-o", "json"],
    )
    .await;
    assert_eq!(r.ok().json()["subject"], "auth0|ann", "{r:#?}");
    let r = with_token(&m, &ann, &["--organization", "dev", "member", "list"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(forbidden)"), "{r:#?}");
    let r = with_token(&m, &owner, &["member", "remove", "auth0|bob", "-o", "json"]).await;
    assert_eq!(r.ok().json()["subject"], "auth0|bob", "{r:#?}");
    let r = with_token(&m, &owner, &["member", "get", "auth0|bob"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(not_found)"), "{r:#?}");
    let r = with_token(&m, &owner, &["member", "list", "-o", "json"]).await;
    assert_eq!(r.ok().json(), json!([]), "{r:#?}");
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_organisations_with_mesonctl() {
    let m = Meson::start().await;
    let r = m
        .ctl(&[
            "tenant", "quota", "set", "acme", "--vms", "5", "--vcpus", "16", "-o", "json",
        ])
        .await;
    r.ok();
    let olga = m.token("acme", "olga", meson_api::Role::Owner);
    // What `org` holds and may hold of `name`: (current, quota).
    let quota_of = |org: &'static str, name: &'static str| {
        let (m, olga) = (&m, olga.clone());
        async move {
            let r = with_token(
                m,
                &olga,
                &["--organization", org, "quota", "get", "-o", "json"],
            )
            .await;
            let q = r.ok().json();
            let l = q["limits"]
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["name"] == name)
                .cloned()
                .unwrap_or_else(|| panic!("no {name}: {q}"));
            (l["current"].as_i64().unwrap(), l["quota"].as_i64().unwrap())
        }
    };

    // Created with its quotas, those not given none; the carve counts as
    // acme's.
    let r = with_token(
        &m,
        &olga,
        &[
            "organization",
            "create",
            "--name",
            "platform",
            "--vms",
            "3",
            "--vcpus",
            "8",
            "--ram-mib",
            "16384",
            "-o",
            "json",
        ],
    )
    .await;
    let j = r.ok().json();
    assert_eq!(
        (&j["id"], &j["parent"], &j["depth"], &j["created_by"]),
        (
            &json!("acme.platform"),
            &json!("acme"),
            &json!(1),
            &json!("olga")
        ),
        "{j}"
    );
    assert_eq!(
        j["quotas"],
        json!({"vms": 3, "vcpus": 8, "ram_mib": 16384, "storage_gb": 0, "clusters": 0,
            "nodes": 0, "images_gb": 0}),
        "{j}"
    );
    assert_eq!(quota_of("acme", "vms").await, (3, 5));
    // What does not fit is refused, each quota named with its quota.
    let r = with_token(
        &m,
        &olga,
        &[
            "organization",
            "create",
            "--name",
            "data",
            "--vms",
            "3",
            "--vcpus",
            "10",
        ],
    )
    .await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(resource_limit_exceeded)"), "{r:#?}");
    assert!(
        r.stderr.contains("  vms: quota 5") && r.stderr.contains("  vcpus: quota 16"),
        "{r:#?}"
    );
    let r = with_token(&m, &olga, &["organization", "create", "--name", "Data"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(
        r.stderr.contains("(invalid_input)") && r.stderr.contains("  name:"),
        "{r:#?}"
    );
    let r = with_token(&m, &olga, &["organization", "create", "--name", "data"]).await;
    assert!(
        r.ok().stdout.starts_with("ID:          acme.data\n"),
        "{r:#?}"
    );
    // An editor makes none.
    let ed = m.token("acme", "ed", meson_api::Role::Editor);
    let r = with_token(&m, &ed, &["organization", "create", "--name", "mine"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(forbidden)"), "{r:#?}");

    // Listed: acme first, a root with no quotas of its own here, then by
    // id; read by id or by name.
    let r = with_token(&m, &olga, &["organization", "list"]).await;
    r.ok();
    assert_eq!(
        headers(&r),
        [
            "ID",
            "PARENT",
            "VMS",
            "VCPUS",
            "RAM_MIB",
            "STORAGE_GB",
            "CLUSTERS",
            "NODES",
            "IMAGES_GB",
            "CREATED"
        ],
        "{r:#?}"
    );
    let ids: Vec<&str> = r
        .stdout
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(ids, ["acme", "acme.data", "acme.platform"], "{r:#?}");
    let cells: Vec<&str> = row(&r, "acme.platform").split_whitespace().collect();
    assert_eq!(
        cells[..9],
        [
            "acme.platform",
            "acme",
            "3",
            "8",
            "16384",
            "0",
            "0",
            "0",
            "0"
        ],
        "{r:#?}"
    );
    let cells: Vec<&str> = row(&r, "acme").split_whitespace().collect();
    assert_eq!(cells[..3], ["acme", "-", "-"], "{r:#?}");
    for by in ["platform", "acme.platform"] {
        let r = with_token(&m, &olga, &["organization", "get", by]).await;
        r.ok();
        assert!(
            r.stdout.starts_with("ID:          acme.platform\n"),
            "{by}: {r:#?}"
        );
        assert!(r.stdout.contains("\nvms         3\n"), "{by}: {r:#?}");
    }
    let r = with_token(&m, &olga, &["organization", "get", "acme"]).await;
    assert!(
        r.ok()
            .stdout
            .contains("Quotas:      its own (mesonctl quota get)"),
        "{r:#?}"
    );
    let r = with_token(&m, &olga, &["organization", "get", "nope"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(not_found)"), "{r:#?}");

    // A rise past acme's is refused, naming the quota; a cut passes, the
    // others stay; nothing to set is a usage error.
    let r = with_token(
        &m,
        &olga,
        &["organization", "set-quotas", "platform", "--vms", "6"],
    )
    .await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(
        r.stderr.contains("(resource_limit_exceeded)") && r.stderr.contains("  vms: quota 5"),
        "{r:#?}"
    );
    let r = with_token(
        &m,
        &olga,
        &[
            "organization",
            "set-quotas",
            "acme.platform",
            "--vms",
            "2",
            "-o",
            "json",
        ],
    )
    .await;
    let j = r.ok().json();
    assert_eq!(
        (&j["quotas"]["vms"], &j["quotas"]["vcpus"]),
        (&json!(2), &json!(8))
    );
    assert_eq!(quota_of("acme", "vms").await, (2, 5));
    let r = with_token(&m, &olga, &["organization", "set-quotas", "platform"]).await;
    assert_eq!(r.code, Some(2), "{r:#?}");
    assert!(r.stderr.contains("no quota to set"), "{r:#?}");

    // acme's owner acts in it with --organization: it is the organisation
    // the commands act in there, with the quotas it was given.
    let r = with_token(
        &m,
        &olga,
        &[
            "--organization",
            "acme.platform",
            "organization",
            "list",
            "-o",
            "json",
        ],
    )
    .await;
    let j = r.ok().json();
    assert_eq!(j.as_array().map(Vec::len), Some(1), "{j}");
    assert_eq!(
        (&j[0]["id"], &j[0]["depth"]),
        (&json!("acme.platform"), &json!(0))
    );
    assert_eq!(quota_of("acme.platform", "vms").await, (0, 2));
    // It does not set its own quotas.
    let r = with_token(
        &m,
        &olga,
        &[
            "--organization",
            "acme.platform",
            "organization",
            "set-quotas",
            "acme.platform",
            "--vms",
            "3",
        ],
    )
    .await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(forbidden)"), "{r:#?}");

    // Ended: the sub-organisation it was; its quotas back with acme.
    let r = with_token(
        &m,
        &olga,
        &["organization", "delete", "platform", "-o", "json"],
    )
    .await;
    assert_eq!(r.ok().json()["id"], "acme.platform", "{r:#?}");
    let r = with_token(&m, &olga, &["organization", "get", "acme.platform"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(not_found)"), "{r:#?}");
    let r = with_token(&m, &olga, &["organization", "delete", "acme"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(forbidden)"), "{r:#?}");
    assert_eq!(quota_of("acme", "vms").await, (0, 5));
    m.stop().await;
}

/// The row of a table whose first cell is `first`.
fn row<'a>(r: &'a Run, first: &str) -> &'a str {
    r.stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(first))
        .unwrap_or_else(|| panic!("no row for {first}: {r:#?}"))
}

/// A table's headers, word by word.
fn headers(r: &Run) -> Vec<&str> {
    r.stdout
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_statements_and_prices() {
    let m = Meson::start().await;
    let vm_file = m.file("vm.json", &seed_vm());
    let r = m.ctl(&["vm", "create", "-f", &vm_file, "-o", "json"]).await;
    let vm = r.ok().json();
    assert_eq!(vm["status"], "running", "{vm}");
    let id = vm["id"].as_str().unwrap().to_owned();
    let short = &id[id.len() - 8..];
    // The tenant's own owner, as a tenant's automation would be (the dev
    // token is an operator's).
    let r = m
        .ctl(&[
            "token", "create", "billing", "--role", "owner", "-o", "json",
        ])
        .await;
    let owner = r.ok().json()["secret"].as_str().unwrap().to_owned();

    // Usage: a line for the running VM, per hour at its price, then the
    // period and the totals.
    let r = with_token(&m, &owner, &["usage"]).await;
    r.ok();
    assert_eq!(
        headers(&r),
        ["RESOURCE", "NAME", "METER", "QUANTITY", "COST"],
        "{r:#?}"
    );
    let line: Vec<&str> = row(&r, short).split_whitespace().collect();
    assert_eq!(line[1..3], ["test", "vm"], "{r:#?}");
    assert_eq!(line[4], "hour", "{r:#?}");
    assert!(line[3].parse::<f64>().is_ok_and(|q| q > 0.0), "{r:#?}");
    assert_eq!(line[6], "EUR", "{r:#?}");
    assert!(r.stdout.contains("\nGrouped by:  resource\n"), "{r:#?}");
    let total = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("Total:"))
        .unwrap_or_else(|| panic!("no total: {r:#?}"));
    assert!(total.trim().ends_with(" EUR"), "{r:#?}");
    // -o json: meson's answer.
    let r = with_token(&m, &owner, &["usage", "-o", "json"]).await;
    let u = r.ok().json();
    assert_eq!(u["group_by"], "resource", "{u}");
    let l = u["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["group"] == id.as_str())
        .unwrap_or_else(|| panic!("no line for the VM: {u}"));
    assert_eq!(
        (&l["meter"], &l["name"], &l["unit"], &l["tenant"]),
        (&json!("vm"), &json!("test"), &json!("hour"), &json!("dev")),
        "{u}"
    );
    assert_eq!(u["totals"][0]["currency"], "EUR", "{u}");
    // --csv: meson's CSV as it is, a header row first.
    let r = with_token(&m, &owner, &["usage", "--csv"]).await;
    let mut rows = r
        .ok()
        .stdout
        .lines()
        .map(|l| l.split(',').collect::<Vec<_>>());
    assert_eq!(
        rows.next().unwrap_or_default(),
        [
            "tenant", "group", "name", "meter", "unit", "quantity", "cost", "currency"
        ],
        "{r:#?}"
    );
    let vm_row = rows
        .find(|c| c.get(1) == Some(&id.as_str()))
        .unwrap_or_else(|| panic!("no row for the VM: {r:#?}"));
    assert_eq!(vm_row.len(), 8, "{r:#?}");
    assert_eq!(
        [vm_row[0], vm_row[2], vm_row[3], vm_row[4], vm_row[7]],
        ["dev", "test", "vm", "hour", "EUR"],
        "{r:#?}"
    );
    assert!(vm_row[6].parse::<f64>().is_ok(), "{r:#?}");
    // An operator's: by day, for one tenant; every tenant's by tenant.
    let r = m
        .ctl(&["usage", "--tenant", "dev", "--group-by", "day"])
        .await;
    r.ok();
    assert_eq!(headers(&r), ["DAY", "METER", "QUANTITY", "COST"], "{r:#?}");
    let day = u["to"].as_str().unwrap()[..10].to_owned();
    let today = r
        .stdout
        .lines()
        .find(|l| l.starts_with(&day[..7]) && l.contains(" vm "))
        .unwrap_or_else(|| panic!("no day of this month: {r:#?}"));
    assert!(today.contains(" hour "), "{r:#?}");
    let r = m.ctl(&["usage", "--group-by", "tenant"]).await;
    assert!(row(r.ok(), "dev").contains(" vm "), "{r:#?}");
    // A tenant reads its own only; a grouping meson has not is refused
    // before it is asked.
    let r = with_token(&m, &owner, &["usage", "--tenant", "acme"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(forbidden)"), "{r:#?}");
    let r = m.ctl(&["usage", "--group-by", "week"]).await;
    assert_eq!(r.code, Some(2), "{r:#?}");
    assert!(r.stderr.contains("label:KEY"), "{r:#?}");

    // Statements: the running month first, `current`.
    let r = with_token(&m, &owner, &["statement", "list"]).await;
    r.ok();
    assert_eq!(
        headers(&r),
        ["ID", "TENANT", "MONTH", "STATUS", "TOTAL", "CLOSED"],
        "{r:#?}"
    );
    let current: Vec<&str> = row(&r, "current").split_whitespace().collect();
    assert_eq!(
        [current[1], current[3], current[5]],
        ["dev", "open", "EUR"],
        "{r:#?}"
    );
    assert_eq!(current[2], &day[..7], "{r:#?}");
    // An operator names the tenant (else every tenant's closed months,
    // and no running one).
    let r = m
        .ctl(&["statement", "list", "--tenant", "dev", "-o", "json"])
        .await;
    assert_eq!(r.ok().json()[0]["id"], "current", "{r:#?}");
    let r = m.ctl(&["statement", "list", "-o", "json"]).await;
    assert!(
        r.ok()
            .json()
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["id"] != "current"),
        "{r:#?}"
    );
    // `current` with its lines, the VM's among them.
    let r = with_token(&m, &owner, &["statement", "get", "current"]).await;
    r.ok();
    assert!(r.stdout.starts_with("ID:"), "{r:#?}");
    assert!(r.stdout.contains("Status:  open\n"), "{r:#?}");
    let line: Vec<&str> = row(&r, "vm").split_whitespace().collect();
    assert_eq!(line[1..3], [short, "test"], "{r:#?}");
    let r = m
        .ctl(&[
            "statement",
            "get",
            "current",
            "--tenant",
            "dev",
            "-o",
            "json",
        ])
        .await;
    let st = r.ok().json();
    assert_eq!(st["status"], "open", "{st}");
    assert!(
        st["lines"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["resource_id"] == id.as_str()),
        "{st}"
    );
    let r = with_token(&m, &owner, &["statement", "get", "current", "--csv"]).await;
    let rows: Vec<Vec<&str>> = r
        .ok()
        .stdout
        .lines()
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(
        rows[0][..3],
        ["period_start", "meter", "resource_id"],
        "{r:#?}"
    );
    assert!(
        rows.iter().any(|c| c.get(2) == Some(&id.as_str())),
        "{r:#?}"
    );
    assert_eq!(rows.last().unwrap()[1], "total", "{r:#?}");
    // An operator's `current` needs a tenant; an id is a statement's.
    let r = m.ctl(&["statement", "get", "current"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(
        r.stderr.contains("(invalid_input)") && r.stderr.contains("tenant"),
        "{r:#?}"
    );
    let r = m.ctl(&["statement", "get", "last-month"]).await;
    assert_eq!(r.code, Some(2), "{r:#?}");
    let r = m.ctl(&["statement", "get", "deadbeef"]).await;
    assert_eq!(r.code, Some(1), "no closed month yet: {r:#?}");
    assert!(
        r.stderr
            .contains("no statement has an id starting or ending with"),
        "{r:#?}"
    );
    let r = m
        .ctl(&["statement", "get", "0190f5f2-0000-7000-8000-00000000000a"])
        .await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(not_found)"), "{r:#?}");

    // The price list: the four meters the price list prices (a VM costs
    // its host's quote).
    let r = with_token(&m, &owner, &["price", "list"]).await;
    r.ok();
    assert_eq!(
        headers(&r),
        [
            "METER", "PROVIDER", "UNIT", "PRICE", "UNIT", "FROM", "UNTIL"
        ],
        "{r:#?}"
    );
    for (meter, unit) in [
        ("backup", "GB-hour"),
        ("cluster", "hour"),
        ("image", "GB-hour"),
        ("volume", "GB-hour"),
    ] {
        let line: Vec<&str> = row(&r, meter).split_whitespace().collect();
        assert_eq!([line[1], line[3], line[4]], ["*", "EUR", unit], "{r:#?}");
    }
    assert_eq!(r.stdout.lines().count(), 5, "{r:#?}");
    // Setting a price is an operator's: refused to the tenant's owner.
    let create = [
        "price",
        "create",
        "--meter",
        "volume",
        "--unit-price",
        "0.00007",
        "--currency",
        "EUR",
        "--effective-from",
        "2999-01-01",
    ];
    let r = with_token(&m, &owner, &create).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(forbidden)"), "{r:#?}");
    assert!(r.stdout.is_empty(), "{r:#?}");
    let r = m.ctl(&["price", "list", "-o", "json"]).await;
    assert_eq!(r.ok().json().as_array().unwrap().len(), 4, "{r:#?}");
    // An operator's takes over from its time; the one before it ends then.
    let mut args = create.to_vec();
    args.extend(["-o", "json"]);
    let r = m.ctl(&args).await;
    let p = r.ok().json();
    assert_eq!(
        (
            &p["meter"],
            &p["provider"],
            &p["unit_price"],
            &p["currency"]
        ),
        (
            &json!("volume"),
            &json!("*"),
            &json!("0.00007"),
            &json!("EUR")
        ),
        "{p}"
    );
    assert_eq!(p["effective_from"], "2999-01-01T00:00:00Z", "{p}");
    assert!(p["until"].is_null(), "{p}");
    let r = m.ctl(&["price", "list", "-o", "json"]).await;
    let prices = r.ok().json();
    let volumes: Vec<&Value> = prices
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["meter"] == "volume")
        .collect();
    assert_eq!(volumes.len(), 2, "{prices}");
    assert_eq!(volumes[0]["until"], "2999-01-01T00:00:00Z", "{prices}");
    // Again at the same time, or in the past: a conflict (exit 1).
    let r = m.ctl(&create).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(conflict)"), "{r:#?}");
    let r = m
        .ctl(&[
            "price",
            "create",
            "--meter",
            "cluster",
            "--unit-price",
            "0.06",
            "--currency",
            "EUR",
            "--effective-from",
            "2020-01-01",
        ])
        .await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(conflict)"), "{r:#?}");
    m.stop().await;
}

/// The value of a `Key:  value` line of a view.
fn field<'a>(r: &'a Run, key: &str) -> &'a str {
    r.stdout
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {key}: {r:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_put_listed_assigned_to_a_tenant_and_deleted() {
    let m = Meson::start().await;
    // An operator puts a plan of one VM: the rest is the defaults.
    let r = m
        .ctl(&[
            "plan",
            "put",
            "small",
            "--description",
            "Try it out",
            "--vms",
            "1",
            "-o",
            "json",
        ])
        .await;
    let p = r.ok().json();
    assert_eq!(
        (&p["name"], &p["description"]),
        (&json!("small"), &json!("Try it out")),
        "{p}"
    );
    assert_eq!(
        p["quotas"][0],
        json!({"name": "vms", "quota": 1, "default": false}),
        "{p}"
    );
    assert!(
        p["quotas"].as_array().unwrap()[1..]
            .iter()
            .all(|q| q["default"] == true),
        "{p}"
    );
    // Put again, it is replaced whole.
    let r = m
        .ctl(&["plan", "put", "small", "--vms", "1", "--clusters", "2"])
        .await;
    r.ok();
    assert_eq!(field(&r, "Name"), "small", "{r:#?}");
    assert_eq!(field(&r, "Description"), "-", "{r:#?}");
    assert_eq!(
        row(&r, "clusters").split_whitespace().collect::<Vec<_>>(),
        ["clusters", "2", "no"],
        "{r:#?}"
    );
    assert_eq!(
        row(&r, "nodes").split_whitespace().nth(2),
        Some("yes"),
        "{r:#?}"
    );

    // The tenant goes on it: its quota shows the plan and the plan's VMs.
    let r = m
        .ctl(&["tenant", "quota", "set", "dev", "--plan", "small"])
        .await;
    r.ok();
    assert_eq!(field(&r, "Plan"), "small", "{r:#?}");
    let r = m.ctl(&["quota", "get"]).await;
    r.ok();
    assert!(r.stdout.starts_with("LIMIT"), "{r:#?}");
    assert_eq!(
        row(&r, "vms").split_whitespace().collect::<Vec<_>>(),
        ["vms", "1", "0"],
        "{r:#?}"
    );
    assert_eq!(field(&r, "Tenant"), "dev", "{r:#?}");
    assert_eq!(field(&r, "Plan"), "small", "{r:#?}");
    let r = m.ctl(&["quota", "get", "-o", "json"]).await;
    assert_eq!(r.ok().json()["plan"], "small", "{r:#?}");
    // A plan meson does not have is refused, naming it.
    let r = m
        .ctl(&["tenant", "quota", "set", "dev", "--plan", "nope"])
        .await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(
        r.stderr.contains("(invalid_input)") && r.stderr.contains("plan"),
        "{r:#?}"
    );

    // The list: the defaults first, then the operators' plans by name.
    let r = m.ctl(&["plan", "list"]).await;
    r.ok();
    assert_eq!(
        headers(&r),
        [
            "NAME",
            "VMS",
            "VCPUS",
            "RAM_MIB",
            "STORAGE_GB",
            "CLUSTERS",
            "NODES",
            "IMAGES_GB",
            "DESCRIPTION"
        ],
        "{r:#?}"
    );
    let names: Vec<&str> = r
        .stdout
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names, ["default", "small"], "{r:#?}");
    assert_eq!(row(&r, "small").split_whitespace().nth(1), Some("1"));
    assert_eq!(row(&r, "default").split_whitespace().nth(1), Some("100"));

    // A plan in use is not deleted.
    let r = m.ctl(&["plan", "delete", "small"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(conflict)"), "{r:#?}");
    // Off it (`none`: the defaults again), it is.
    let r = m
        .ctl(&[
            "tenant", "quota", "set", "dev", "--plan", "none", "-o", "json",
        ])
        .await;
    let q = r.ok().json();
    assert!(q["plan"].is_null(), "{q}");
    let vms = q["limits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "vms")
        .unwrap_or_else(|| panic!("{q}"));
    assert_eq!(
        (&vms["quota"], &vms["default"]),
        (&json!(100), &json!(true))
    );
    let r = m.ctl(&["quota", "get"]).await;
    assert_eq!(field(r.ok(), "Plan"), "default", "{r:#?}");
    let r = m.ctl(&["plan", "delete", "small"]).await;
    assert!(r.ok().stdout.is_empty(), "{r:#?}");
    let r = m.ctl(&["plan", "get", "small"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(not_found)"), "{r:#?}");
    let r = m.ctl(&["plan", "list", "-o", "json"]).await;
    assert_eq!(r.ok().json().as_array().map(Vec::len), Some(1), "{r:#?}");

    // A tenant's owner reads the plans but does not make them.
    let r = m
        .ctl(&["token", "create", "plans", "--role", "owner", "-o", "json"])
        .await;
    let owner = r.ok().json()["secret"].as_str().unwrap().to_owned();
    let r = with_token(&m, &owner, &["plan", "get", "default"]).await;
    assert_eq!(field(r.ok(), "Name"), "default", "{r:#?}");
    let r = with_token(&m, &owner, &["plan", "put", "mine", "--vms", "1000"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("(forbidden)"), "{r:#?}");
    assert!(r.stdout.is_empty(), "{r:#?}");
    let r = with_token(&m, &owner, &["plan", "list", "-o", "json"]).await;
    assert_eq!(r.ok().json().as_array().map(Vec::len), Some(1), "{r:#?}");
    // A bad amount is mesonctl's to refuse (exit 2).
    let r = m.ctl(&["plan", "put", "small", "--vms", "-1"]).await;
    assert_eq!(r.code, Some(2), "{r:#?}");
    m.stop().await;
}

/// The shortest start of `id` (hyphens dropped), 8 hex digits or more, that
/// no other of `all` shares.
fn unique_prefix(id: &str, all: &[String]) -> String {
    let hex = |s: &str| s.replace('-', "");
    let me = hex(id);
    (8..=32)
        .map(|n| me[..n].to_owned())
        .find(|p| {
            all.iter()
                .filter(|o| hex(o).starts_with(p.as_str()))
                .count()
                == 1
        })
        .expect("a whole id is unique")
}

/// Two of `ids` whose first 8 hex digits are the same: UUIDv7s made within
/// the same 65.5 s share them, and of three made within a minute two always
/// do.
fn sharing_a_prefix(ids: &[String]) -> (String, String, String) {
    for (i, a) in ids.iter().enumerate() {
        for b in &ids[i + 1..] {
            if a[..8] == b[..8] {
                return (a[..8].to_owned(), a.clone(), b.clone());
            }
        }
    }
    panic!("three ids made within a minute, none sharing 8 digits: {ids:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_by_abbreviation_unique_ambiguous_or_too_short() {
    let m = Meson::start().await;
    let mut volumes = Vec::new();
    for name in ["ab-1", "ab-2", "ab-3"] {
        let r = m
            .ctl(&[
                "volume", "create", "--name", name, "--size", "1", "-o", "json",
            ])
            .await;
        r.ok();
        volumes.push(r.json()["id"].as_str().expect("id").to_owned());
    }
    let mut actions = Vec::new();
    for v in &volumes {
        let r = m.ctl(&["action", "list", "volume", v, "-o", "json"]).await;
        r.ok();
        actions.push(r.json()[0]["id"].as_str().expect("an action").to_owned());
    }
    let get_id = |r: &Run| r.json()["id"].as_str().expect("id").to_owned();

    // Unique: the last 8 digits tables print, a unique start (with or
    // without the id's hyphens), in any case.
    let short = &volumes[0][volumes[0].len() - 8..];
    let r = m.ctl(&["volume", "get", short, "-o", "json"]).await;
    r.ok();
    assert_eq!(get_id(&r), volumes[0]);
    let start = unique_prefix(&volumes[1], &volumes);
    let r = m
        .ctl(&["volume", "get", &start.to_uppercase(), "-o", "json"])
        .await;
    r.ok();
    assert_eq!(get_id(&r), volumes[1]);
    let r = m
        .ctl(&["volume", "get", &volumes[2][..13], "-o", "json"])
        .await;
    if unique_prefix(&volumes[2], &volumes).len() <= 12 {
        r.ok();
        assert_eq!(get_id(&r), volumes[2]);
    }
    // A name wins over an abbreviation it also looks like.
    let r = m
        .ctl(&[
            "volume",
            "update",
            short,
            "--name",
            &volumes[1][volumes[1].len() - 8..],
        ])
        .await;
    r.ok();
    let r = m
        .ctl(&[
            "volume",
            "get",
            &volumes[1][volumes[1].len() - 8..],
            "-o",
            "json",
        ])
        .await;
    r.ok();
    assert_eq!(get_id(&r), volumes[0], "the volume named so, not the id");

    // Ambiguous: an error listing every match, whole, exit 2.
    let (prefix, a, b) = sharing_a_prefix(&volumes);
    let r = m.ctl(&["volume", "get", &prefix]).await;
    assert_eq!(r.code, Some(2), "{r:#?}");
    assert!(
        r.stderr.contains(&a) && r.stderr.contains(&b) && r.stderr.contains("give more"),
        "{r:#?}"
    );
    assert!(r.stdout.is_empty(), "{r:#?}");

    // Too short: not taken for an id, and said so.
    let r = m.ctl(&["volume", "get", &volumes[0][..7]]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("at least 8 hex digits"), "{r:#?}");
    let r = m.ctl(&["volume", "get", "0123456789abcdef"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("no volume"), "{r:#?}");

    // Actions have no names: meson finds them by abbreviation.
    let tail = &actions[0][actions[0].len() - 8..];
    let r = m.ctl(&["action", "get", tail, "-o", "json"]).await;
    r.ok();
    assert_eq!(get_id(&r), actions[0]);
    let r = m.ctl(&["action", "watch", tail]).await;
    r.ok();
    assert!(r.stdout.contains("success"), "{r:#?}");
    let start = unique_prefix(&actions[2], &actions);
    let r = m
        .ctl(&["action", "get", &start, &actions[1], "-o", "json"])
        .await;
    r.ok();
    let listed = r.json();
    let got: Vec<&str> = listed
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|a| a["id"].as_str())
        .collect();
    assert_eq!(got.len(), 2, "{r:#?}");
    assert!(got.contains(&actions[2].as_str()) && got.contains(&actions[1].as_str()));
    let (prefix, a, b) = sharing_a_prefix(&actions);
    let r = m.ctl(&["action", "watch", &prefix]).await;
    assert_eq!(r.code, Some(2), "{r:#?}");
    assert!(r.stderr.contains(&a) && r.stderr.contains(&b), "{r:#?}");
    let r = m.ctl(&["action", "get", &actions[0][..6]]).await;
    assert_eq!(r.code, Some(2), "{r:#?}");
    assert!(r.stderr.contains("8 or more"), "{r:#?}");
    let r = m.ctl(&["action", "get", "ffffffff"]).await;
    assert_eq!(r.code, Some(1), "{r:#?}");
    assert!(r.stderr.contains("no action"), "{r:#?}");

    // The API answers an abbreviation with every action it fits, and names
    // the field when it is none.
    let r = m.get(&format!("/v1/actions?id={prefix}")).await;
    assert_eq!(r.status, reqwest::StatusCode::OK, "{}", r.body);
    let ids: Vec<&str> = r.body["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .filter_map(|a| a["id"].as_str())
        .collect();
    assert!(
        ids.contains(&a.as_str()) && ids.contains(&b.as_str()),
        "{}",
        r.body
    );
    assert!(ids.iter().all(|i| i.starts_with(&prefix)), "{}", r.body);
    let r = m.get("/v1/actions?id=abc").await;
    assert_eq!(r.status, reqwest::StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(
        r.body["error"]["details"]["fields"][0]["name"], "id",
        "{}",
        r.body
    );
    m.stop().await;
}

/// An action that runs for ever, as both `GET /v1/actions/{id}` and
/// `GET /v1/actions?id=` answer it.
const RUNNING: &str = r#"{"action": {"id": "019ad0c2-7b1e-7c3a-9f00-12cf197d66ab",
    "command": "create_vm", "status": "running", "progress": 40,
    "started": "2026-11-28T12:00:00Z", "finished": null, "resources": [], "error": null},
  "actions": [{"id": "019ad0c2-7b1e-7c3a-9f00-12cf197d66ab",
    "command": "create_vm", "status": "running", "progress": 40,
    "started": "2026-11-28T12:00:00Z", "finished": null, "resources": [], "error": null}]}"#;

/// Runs `args` on a terminal (a pseudo-terminal, 80 columns, made by
/// Python's `pty`), types Ctrl-C once the progress bar shows, and returns
/// everything the terminal received.
fn on_a_terminal_with_ctrl_c(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    const DRIVER: &str = r#"
import fcntl, os, pty, select, struct, sys, termios, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
out, sent, end = b"", False, time.time() + 60
while time.time() < end:
    if select.select([fd], [], [], 0.1)[0]:
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        out += data
    if not sent and b"running" in out:
        time.sleep(0.3)
        os.write(fd, b"\x03")
        sent = True
_, status = os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
sys.exit(os.waitstatus_to_exitcode(status))
"#;
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(DRIVER)
        .arg(env!("CARGO_BIN_EXE_mesonctl"))
        .args(args)
        .current_dir(dir)
        .env_remove("MESON_URL")
        .env_remove("MESON_TOKEN")
        .env("TERM", "xterm")
        .output()
        .expect("python3 runs (the Elemento tests need it too)");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_while_waiting_says_so_on_a_line_of_its_own() {
    let url = answering(200, RUNNING).await;
    let dir = std::env::temp_dir().join(format!("mesonctl-tty-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let _scratch = Scratch(dir.clone());
    let id = "019ad0c2-7b1e-7c3a-9f00-12cf197d66ab";
    let (code, screen) = tokio::task::spawn_blocking(move || {
        on_a_terminal_with_ctrl_c(
            &dir,
            &["--url", &url, "--token", "t", "action", "watch", id],
        )
    })
    .await
    .expect("driver");
    assert_eq!(code, Some(4), "cancelled while waiting: {screen:?}");
    // The bar was drawn (a terminal gets bars, not lines), then the message
    // starts a line: the cursor was left at the end of the bar, where the
    // terminal echoed ^C.
    assert!(screen.contains("create_vm 197d66ab"), "{screen:?}");
    let at = screen
        .find("cancelled; still running")
        .unwrap_or_else(|| panic!("no cancel message: {screen:?}"));
    assert!(screen[..at].ends_with('\n'), "{screen:?}");
    assert!(
        screen[at..].contains(&format!("mesonctl action watch {id}")),
        "{screen:?}"
    );
}
