//! Disaster recovery: meson's database restored from a backup while
//! AtomOS kept running.
//!
//! meson runs (an API and a worker as processes) on a PostgreSQL that
//! archives its WAL. A base backup is taken with `pg_basebackup`; meson
//! keeps working (a VM created, one deleted, a cluster's pool scaled up);
//! then the database is restored to the backup's point in time, and meson
//! started on it. The hosts hold what meson did since; the database does
//! not. meson must reconcile instead of trusting the rewound rows:
//!
//! - the VM created since is adopted back into its tenant, under its id
//!   (its AtomOS name carries both);
//! - the VM deleted since is `error`, saying it is missing from its host;
//! - the node the scale added is an orphan, left for an operator (a
//!   cluster's nodes follow its pools), whose decision deletes it;
//! - nothing is registered twice, and nothing leaves a host but by that
//!   decision;
//! - a VM create under way at the backup runs again from the restored
//!   queue, and finds the VM it had made.
//!
//! Needs PostgreSQL's server binaries (initdb, postgres, pg_basebackup):
//! skipped without them, saying so, unless `MESON_REQUIRE_HA=1`.

mod support;

#[path = "../../../tests/e2e/seeds.rs"]
#[allow(dead_code)]
mod seeds;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use support::Process;
use support::pitr::Pitr;

const JWT_SECRET: &str = "meson-restore-test-secret-0123456789abcdef";
/// 32 bytes, base64.
const SECRETS_KEY: &str = "bWVzb24tcmVzdG9yZS10ZXN0LWtleS0zMi1ieXRlcyE=";
const TENANT: &str = "acme";

struct Meson {
    api: Process,
    worker: Option<Process>,
    base: String,
    http: reqwest::Client,
    token: String,
}

impl Meson {
    /// An API on `port`, and no worker yet.
    async fn start(url: &str, targets: &str, port: u16) -> Meson {
        let api = support::deployed(
            "api",
            url,
            targets,
            port,
            [JWT_SECRET, SECRETS_KEY],
            &[("MESON_LOG", "error")],
        );
        let base = format!("http://127.0.0.1:{port}");
        // An operator of the tenant's: it decides for orphans too.
        let token = meson_api::Auth::hs256(JWT_SECRET.as_bytes(), "meson").issue(
            TENANT,
            "olga",
            meson_api::Role::Admin,
            chrono::Duration::minutes(60),
        );
        let meson = Meson {
            api,
            worker: None,
            base,
            http: reqwest::Client::new(),
            token,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !meson
            .http
            .get(format!("{}/readyz", meson.base))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            assert!(Instant::now() < deadline, "the API ready in 30 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        meson
    }

    /// A worker whose reconciler passes every second.
    fn start_worker(&mut self, url: &str) {
        self.worker = Some(support::worker_with(
            url,
            "3000",
            &[
                ("MESON_SECRETS_KEY", SECRETS_KEY),
                ("MESON_PUBLIC_URL", &self.base),
                ("MESON_RECONCILE_INTERVAL_S", "1"),
            ],
        ));
    }

    async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> (StatusCode, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(b);
        }
        let r = req.send().await.expect("the API answers");
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Starts what `path` and `body` ask and waits until its action
    /// succeeded; the answer.
    async fn done(&self, method: Method, path: &str, body: Option<&Value>) -> Value {
        let (status, r) = self.call(method, path, body).await;
        assert!(status.is_success(), "{path}: {status} {r}");
        self.succeeded(r["action"]["id"].as_str().expect("an action"))
            .await;
        r
    }

    /// Waits (bounded) until the action succeeded.
    async fn succeeded(&self, action: &str) {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let (_, a) = self
                .call(Method::GET, &format!("/v1/actions/{action}"), None)
                .await;
            match a["action"]["status"].as_str() {
                Some("success") => return,
                Some("running") => {}
                _ => panic!("{action}: {a}"),
            }
            assert!(Instant::now() < deadline, "{action}: not done in 90 s: {a}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn create_vm(&self, name: &str) -> String {
        let mut body = seeds::seed_vm();
        body["specs"]["vm_name"] = json!(name);
        let r = self.done(Method::POST, "/v1/vms", Some(&body)).await;
        r["vm"]["id"].as_str().unwrap().to_owned()
    }

    async fn vm(&self, id: &str) -> (StatusCode, Value) {
        let (s, v) = self.call(Method::GET, &format!("/v1/vms/{id}"), None).await;
        (s, v["vm"].clone())
    }

    async fn orphans(&self) -> Vec<Value> {
        let (s, v) = self.call(Method::GET, "/v1/admin/orphans", None).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        v["orphans"].as_array().unwrap().clone()
    }

    fn stop_worker(&mut self) {
        if let Some(mut w) = self.worker.take() {
            let status = w.stop();
            assert!(status.success(), "{} stopped with {status}", w.what);
        }
    }

    fn stop(&mut self) {
        for p in self.worker.iter_mut().chain([&mut self.api]) {
            let status = p.stop();
            assert!(status.success(), "{} stopped with {status}", p.what);
        }
    }
}

/// Every VM on every host, with how many times it was registered.
fn registered(sim: &atomos_sim::Simulator) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    for h in sim.hosts() {
        for (name, n) in h.registrations() {
            *out.entry(name).or_default() += n;
        }
    }
    out
}

/// Waits (bounded) until `done` holds of meson's answers.
async fn until<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done().await {
        assert!(Instant::now() < deadline, "{what}: not within 60 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restored_from_backup_is_reconciled_with_the_hosts() {
    if let Some(why) = support::pitr::missing() {
        assert!(
            std::env::var("MESON_REQUIRE_HA").as_deref() != Ok("1"),
            "MESON_REQUIRE_HA=1 but {why}"
        );
        eprintln!("skipped: {why}");
        return;
    }
    let mut pg = Pitr::start().await;
    pg.create_database("meson").await;
    let url = pg.url("meson");
    let migrated = support::mesond_on("migrate", &url, &[]).status().unwrap();
    assert!(migrated.success(), "mesond migrate: {migrated}");
    let sim = support::simulator(Duration::from_millis(300)).await;
    let targets = support::targets_file(&sim, "restore");
    let targets_path = targets.to_str().unwrap().to_owned();
    let port = support::free_port();
    let mut meson = Meson::start(&url, &targets_path, port).await;
    meson.start_worker(&url);

    // Before the backup: two VMs, and a cluster with one worker.
    let kept = meson.create_vm("kept").await;
    let doomed = meson.create_vm("doomed").await;
    let mut kaas = seeds::seed_kaas();
    kaas["req"]["nodepool"][0]["desired_nodes"] = 1.into();
    kaas["req"]["nodepool"][0]["min_nodes"] = 1.into();
    kaas["req"]["nodepool"][0]["max_nodes"] = 2.into();
    let c = meson.done(Method::POST, "/v1/clusters", Some(&kaas)).await;
    let cluster = c["cluster"]["id"].as_str().unwrap().to_owned();
    let pool = c["cluster"]["pools"][0]["id"].as_str().unwrap().to_owned();

    // A VM whose create is under way when the backup is taken: asked for
    // while no worker runs, made after the backup.
    meson.stop_worker();
    let mut body = seeds::seed_vm();
    body["specs"]["vm_name"] = json!("underway");
    let (status, r) = meson.call(Method::POST, "/v1/vms", Some(&body)).await;
    assert_eq!(status, StatusCode::CREATED, "{r}");
    let underway = r["vm"]["id"].as_str().unwrap().to_owned();
    let underway_action = r["action"]["id"].as_str().unwrap().to_owned();
    let underway_asked = Instant::now();

    pg.base_backup();

    meson.start_worker(&url);
    meson.succeeded(&underway_action).await;
    // After it: a VM made, one deleted, the pool scaled up.
    let after = meson.create_vm("after").await;
    meson
        .done(Method::DELETE, &format!("/v1/vms/{doomed}"), None)
        .await;
    meson
        .done(
            Method::PATCH,
            &format!("/v1/clusters/{cluster}/pools/{pool}"),
            Some(&json!({"desired_nodes": 2})),
        )
        .await;
    let (_, lost_vm) = meson.vm(&after).await;
    meson.stop();
    let on_hosts = registered(&sim);
    assert!(on_hosts.values().all(|n| *n == 1), "{on_hosts:?}");
    let held_before: Vec<String> = support::atomos_names(&sim).0;

    // The database as it was at the backup; meson started on it.
    pg.restore_backup().await;
    let mut meson = Meson::start(&url, &targets_path, port).await;
    let (s, v) = meson.vm(&after).await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "the restore lost the VM made since: {v}"
    );
    assert_eq!(
        meson.vm(&doomed).await.1["status"],
        "running",
        "and kept the one deleted since"
    );
    // The host the create under way had put its VM on takes no new VMs
    // now: the create, run again, must find its VM there, not make a
    // second one elsewhere. (It looks for it once it is late: as a
    // restore makes it.)
    let (_, made) = meson.vm(&underway).await;
    assert!(made["host"].is_null(), "not placed at the backup: {made}");
    let on = sim
        .hosts()
        .into_iter()
        .find(|h| {
            h.inventory()
                .vms
                .iter()
                .any(|v| v.name.contains(&underway.replace('-', "")))
        })
        .expect("the VM made after the backup");
    let (_, listed) = meson.call(Method::GET, "/v1/targets", None).await;
    let target = listed["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == on.name())
        .expect("its target")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, t) = meson
        .call(
            Method::PATCH,
            &format!("/v1/targets/{target}"),
            Some(&json!({"enabled": false})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{t}");
    tokio::time::sleep(
        meson_workflows::placement::LATE_PLACEMENT.saturating_sub(underway_asked.elapsed()),
    )
    .await;
    // Only now a worker, whose reconciler compares it with the hosts.
    meson.start_worker(&url);

    // The reconciler adopts the VM made since, under its id, where it runs.
    until("the VM made since adopted", || async {
        meson.vm(&after).await.0 == StatusCode::OK
    })
    .await;
    let (_, adopted) = meson.vm(&after).await;
    assert_eq!(adopted["status"], "running", "{adopted}");
    assert_eq!(adopted["host"], lost_vm["host"], "{adopted}");
    assert_eq!(adopted["ipv4"], lost_vm["ipv4"], "{adopted}");
    assert_eq!(adopted["vcpus"], lost_vm["vcpus"], "{adopted}");
    // The VM deleted since is not brought back: its row says so.
    until("the VM deleted since found missing", || async {
        meson.vm(&doomed).await.1["status"] == "error"
    })
    .await;
    let (_, gone) = meson.vm(&doomed).await;
    assert!(
        gone["error_message"]
            .as_str()
            .unwrap_or_default()
            .contains("missing from its hypervisor"),
        "{gone}"
    );
    assert_eq!(meson.vm(&kept).await.1["status"], "running");
    // The create under way at the backup runs again from the restored
    // queue: it finds the VM it had made by name, and makes none.
    meson.succeeded(&underway_action).await;
    let (_, found) = meson.vm(&underway).await;
    assert_eq!(found["status"], "running", "{found}");
    assert_eq!(found["host"], on.name(), "where it was made: {found}");

    // The node the scale added waits for an operator.
    until("the new node listed as an orphan", || async {
        !meson.orphans().await.is_empty()
    })
    .await;
    let orphans = meson.orphans().await;
    assert_eq!(orphans.len(), 1, "{orphans:?}");
    let node = &orphans[0];
    assert_eq!(
        node["cluster"].as_str(),
        Some(&cluster.replace('-', "")[..12]),
        "{node}"
    );
    assert_eq!(node["tenant"], TENANT, "{node}");
    assert!(
        node["reason"].as_str().unwrap().contains("cluster"),
        "{node}"
    );
    // Nothing made twice, nothing taken off a host.
    assert_eq!(registered(&sim), on_hosts, "nothing registered again");
    assert_eq!(
        support::atomos_names(&sim).0,
        held_before,
        "nothing deleted"
    );

    // The operator's decision deletes it, with its volumes.
    let name = node["atomos_name"].as_str().unwrap().to_owned();
    let (s, r) = meson
        .call(
            Method::POST,
            &format!(
                "/v1/admin/orphans/{}/actions/delete",
                node["id"].as_str().unwrap()
            ),
            Some(&json!({})),
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{r}");
    until("the orphan deleted", || async {
        meson.orphans().await.is_empty()
    })
    .await;
    let (vms, volumes) = support::atomos_names(&sim);
    assert!(!vms.contains(&name), "{vms:?}");
    let owner = meson_core::naming::parse_vm_atomos_name(&name).unwrap();
    let prefix = meson_core::naming::vm_volume_prefix(owner.vm);
    assert!(
        volumes.iter().all(|v| !v.starts_with(&prefix)),
        "{volumes:?}"
    );
    let mut expected = held_before.clone();
    expected.retain(|n| n != &name);
    assert_eq!(vms, expected, "only the orphan left its host");
    // The cluster runs on, as it was at the backup.
    let (_, c) = meson
        .call(Method::GET, &format!("/v1/clusters/{cluster}"), None)
        .await;
    assert_eq!(c["cluster"]["status"], "running", "{c}");
    meson.stop();
    let _ = std::fs::remove_file(&targets);
}
