//! Replicas: two `mesond api` and two `mesond worker` processes share one
//! PostgreSQL. VMs created through either API (some with one
//! `Idempotency-Key` sent to both at once) are each created exactly once:
//! one VM per key, one job per action, each step recorded once, AtomOS
//! holding exactly the database's VMs and volumes; deleting them through
//! either API empties AtomOS; an API token revoked through one API is
//! refused by the other at the next request; every process stops cleanly
//! on SIGTERM.

mod support;

use meson_core::{ActionId, JobId, TenantId};
use meson_db::testing::TestDatabase;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use support::Process;

const SSH_KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMLavtiPfhiG3t6TAxHosXoVh7Pc/lSD8L9SNPyAzp1d user@host";
const JWT_SECRET: &str = "meson-replicas-test-secret-0123456789abcdef";
/// 32 bytes, base64.
const SECRETS_KEY: &str = "bWVzb24tcmVwbGljYXMtdGVzdC1rZXktMzItYnl0ZXM=";
const TENANT: &str = "acme";
const VMS: usize = 12;

/// The canonical VM payload (docs/payloads.md; as `tests/e2e/harness.rs` has it).
fn seed_vm() -> Value {
    let raw = r#"{"specs":{"req":{"cpu":{"smtEnabled":false,"numberOfCores":2,"numberOfThreads":1,
      "min_frequency":1.0,"arch":["X86_64"],"flags":[]},
      "mem":{"capacity":4096,"requireECC":0},"pci":{"devices":{}},
      "misc":{"osDistribution":"Debian"}},
      "volumes":[{"name":"test","size":30,"private":"True","shareable":"False",
        "bootable":"False","readonly":"False"}],
      "authentication":{"ssh-key":"KEY"},
      "vm_name":"test"},
     "provider":"ionos"}"#;
    serde_json::from_str(&raw.replace("KEY", SSH_KEY)).expect("seed json")
}

/// A `mesond <mode>` process of this test, its REST API on `http_port`.
fn spawn(mode: &str, db_url: &str, targets: &str, http_port: u16) -> Process {
    support::deployed(
        mode,
        db_url,
        targets,
        http_port,
        [JWT_SECRET, SECRETS_KEY],
        &[
            ("MESON_WORKER_CONCURRENCY", "8"),
            ("MESON_VM_POLL_MS", "20"),
            ("MESON_JOB_LEASE_MS", "3000"),
            ("MESON_LOG", "warn"),
        ],
    )
}

struct Reply {
    status: StatusCode,
    replayed: bool,
    body: Value,
}

#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    token: String,
}

impl Client {
    async fn call(
        &self,
        method: Method,
        url: &str,
        body: Option<&[u8]>,
        key: Option<&str>,
    ) -> Reply {
        let mut req = self
            .http
            .request(method.clone(), url)
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_vec());
        }
        if let Some(k) = key {
            req = req.header("idempotency-key", k);
        }
        let res = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let status = res.status();
        let replayed = res
            .headers()
            .get("idempotent-replayed")
            .is_some_and(|v| v == "true");
        let text = res.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Reply {
            status,
            replayed,
            body,
        }
    }

    /// A POST with an `Idempotency-Key`, retried (bounded) while the first
    /// request with that key is still being processed elsewhere (`409`);
    /// returns the answer and how many such `409`s came first.
    async fn post_keyed(&self, url: &str, body: &[u8], key: &str) -> (Reply, usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut in_flight_answers = 0;
        loop {
            let r = self.call(Method::POST, url, Some(body), Some(key)).await;
            let in_flight = r.status == StatusCode::CONFLICT
                && r.body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("still being processed"));
            if !in_flight {
                return (r, in_flight_answers);
            }
            in_flight_answers += 1;
            assert!(Instant::now() < deadline, "key {key} in flight for 10 s");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The tenant's VMs, as the API at `base` lists them.
    async fn vms(&self, base: &str) -> Vec<Value> {
        let url = format!("{base}/v1/vms?per_page=50");
        let r = self.call(Method::GET, &url, None, None).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        r.body["vms"].as_array().expect("vms").clone()
    }
}

/// One created VM, as its create answered.
struct Created {
    name: String,
    vm: String,
    action: String,
    keyed: bool,
    /// `409`s answered while the same key was in flight on the other API.
    in_flight: usize,
}

/// Polls every action (alternating the APIs) until none is running, bounded;
/// returns each action's final view.
async fn wait_actions(c: &Client, bases: &[String], ids: &[String]) -> BTreeMap<String, Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut done = BTreeMap::new();
    let mut turn = 0;
    loop {
        for id in ids {
            if done.contains_key(id) {
                continue;
            }
            turn += 1;
            let base = &bases[turn % bases.len()];
            let r = c
                .call(Method::GET, &format!("{base}/v1/actions/{id}"), None, None)
                .await;
            assert_eq!(r.status, StatusCode::OK, "action {id}: {}", r.body);
            let a = &r.body["action"];
            match a["status"].as_str() {
                Some("running") => {}
                Some("success") => {
                    done.insert(id.clone(), a.clone());
                }
                _ => panic!("action {id} did not succeed: {a}"),
            }
        }
        if done.len() == ids.len() {
            return done;
        }
        assert!(
            Instant::now() < deadline,
            "actions still running after 20 s: {:?}",
            ids.iter()
                .filter(|id| !done.contains_key(*id))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every action completed exactly once: one `succeeded` job each, no step
/// recorded twice for a job and direction, no undo, and no job run over and
/// over. Returns the sum of the jobs' attempts.
async fn check_jobs(db: &TestDatabase, actions: &[String], kind: &str) -> i32 {
    let mut attempts = 0;
    for a in actions {
        let id = ActionId(a.parse().unwrap());
        let jobs = meson_db::jobs::for_action(&db.pool, id).await.unwrap();
        assert_eq!(jobs.len(), 1, "one job for action {a}: {jobs:?}");
        let job = &jobs[0];
        assert_eq!(job.state, "succeeded", "{job:?}");
        assert_eq!(job.kind, kind, "{job:?}");
        assert!(
            job.attempt >= 1 && job.attempt <= 2,
            "job {} of action {a} ran {} times: {job:?}",
            job.id.0,
            job.attempt
        );
        if job.errors.as_array().is_some_and(|e| !e.is_empty()) {
            eprintln!("replicas: job {} retried after: {}", job.id.0, job.errors);
        }
        attempts += job.attempt;
        let steps = meson_db::jobs::steps(&db.pool, JobId(job.id.0))
            .await
            .unwrap();
        assert!(!steps.is_empty(), "job {} recorded no step", job.id.0);
        let mut seen = BTreeSet::new();
        for (step, direction, _) in &steps {
            assert_eq!(direction, "do", "a succeeded job ran undo {step}");
            assert!(
                seen.insert((step.clone(), direction.clone())),
                "job {} recorded {step}/{direction} twice",
                job.id.0
            );
        }
    }
    attempts
}

/// Every simulated host's (VM names, volume names), checking on the way
/// that each volume belongs to a VM of its host.
fn sim_contents(sim: &atomos_sim::Simulator) -> (Vec<String>, Vec<String>) {
    for h in sim.hosts() {
        let inv = h.inventory();
        let owned: BTreeSet<&String> = inv.vms.iter().flat_map(|v| &v.volume_ids).collect();
        for v in &inv.volumes {
            assert!(
                owned.contains(&v.id),
                "volume {} on {} belongs to no VM",
                v.name,
                h.name()
            );
        }
        assert!(inv.networks.is_empty(), "networks on {}", h.name());
    }
    support::atomos_names(sim)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_and_worker_replicas_share_one_database() {
    let started = Instant::now();
    let db = TestDatabase::new().await;
    let sim = support::simulator(Duration::from_millis(150)).await;
    let targets = support::targets_file(&sim, "replicas");
    let targets_path = targets.to_str().expect("a UTF-8 path");

    let ports = [support::free_port(), support::free_port()];
    let mut procs: Vec<Process> = ports
        .iter()
        .map(|&p| spawn("api", &db.url, targets_path, p))
        .collect();
    // Workers serve no HTTP; their (unused) address must still be free.
    procs.extend((0..2).map(|_| spawn("worker", &db.url, targets_path, support::free_port())));
    let bases: Vec<String> = ports
        .iter()
        .map(|p| format!("http://127.0.0.1:{p}"))
        .collect();

    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    for (i, base) in bases.iter().enumerate() {
        loop {
            for p in &mut procs {
                if let Some(s) = p.exited() {
                    panic!("{} exited early: {s}", p.what);
                }
            }
            if let Ok(r) = http.get(format!("{base}/readyz")).send().await
                && r.status().is_success()
            {
                break;
            }
            assert!(Instant::now() < deadline, "api {i} not ready in 20 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    eprintln!("replicas: 2 apis ready after {:?}", started.elapsed());

    let token = meson_api::Auth::hs256(JWT_SECRET.as_bytes(), "meson").issue(
        TENANT,
        "alice",
        meson_api::Role::Editor,
        chrono::Duration::minutes(30),
    );
    let c = Client { http, token };

    // 12 creates at once, alternating the APIs; half of them keyed and sent
    // to both APIs concurrently.
    let names: Vec<String> = (0..VMS).map(|i| format!("replica-{i:02}")).collect();
    let mut creates = tokio::task::JoinSet::new();
    for (i, name) in names.iter().enumerate() {
        let (c, name) = (c.clone(), name.clone());
        let url = format!("{}/v1/vms", bases[i % 2]);
        let other = format!("{}/v1/vms", bases[(i + 1) % 2]);
        let mut body = seed_vm();
        body["specs"]["vm_name"] = name.clone().into();
        let body = serde_json::to_vec(&body).unwrap();
        let keyed = i % 4 < 2;
        creates.spawn(async move {
            if !keyed {
                let r = c.call(Method::POST, &url, Some(&body), None).await;
                assert_eq!(r.status, StatusCode::CREATED, "create {name}: {}", r.body);
                assert!(!r.replayed);
                return Created {
                    vm: r.body["vm"]["id"].as_str().unwrap().to_owned(),
                    action: r.body["action"]["id"].as_str().unwrap().to_owned(),
                    name,
                    keyed,
                    in_flight: 0,
                };
            }
            let key = format!("create-{name}-{}", uuid::Uuid::new_v4().simple());
            let ((a, na), (b, nb)) = tokio::join!(
                c.post_keyed(&url, &body, &key),
                c.post_keyed(&other, &body, &key)
            );
            for r in [&a, &b] {
                assert_eq!(r.status, StatusCode::CREATED, "create {name}: {}", r.body);
            }
            assert_eq!(
                [a.replayed, b.replayed].iter().filter(|r| !**r).count(),
                1,
                "one of the two requests with key {key} ran, the other replayed it"
            );
            assert_eq!(a.body["vm"]["id"], b.body["vm"]["id"], "one VM per key");
            assert_eq!(a.body["action"]["id"], b.body["action"]["id"]);
            Created {
                vm: a.body["vm"]["id"].as_str().unwrap().to_owned(),
                action: a.body["action"]["id"].as_str().unwrap().to_owned(),
                name,
                keyed,
                in_flight: na + nb,
            }
        });
    }
    let mut created = Vec::new();
    while let Some(r) = creates.join_next().await {
        created.push(r.expect("create task"));
    }
    created.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(created.iter().filter(|c| c.keyed).count(), VMS / 2);
    let create_actions: Vec<String> = created.iter().map(|c| c.action.clone()).collect();
    assert_eq!(
        create_actions.iter().collect::<BTreeSet<_>>().len(),
        VMS,
        "one action per VM"
    );

    eprintln!(
        "replicas: {VMS} creates accepted ({} keyed requests answered 409 in flight first)",
        created.iter().map(|c| c.in_flight).sum::<usize>()
    );
    let finals = wait_actions(&c, &bases, &create_actions).await;
    eprintln!("replicas: {VMS} creates done after {:?}", started.elapsed());
    for (id, a) in &finals {
        assert_eq!(a["status"], "success", "{id}: {a}");
        assert_eq!(a["progress"], 100, "{id}: {a}");
        assert_eq!(a["command"], "create_vm", "{id}: {a}");
    }

    // The tenant's VMs are exactly the 12, running, and both APIs agree.
    for base in &bases {
        let mut listed: Vec<(String, String)> = c
            .vms(base)
            .await
            .iter()
            .map(|v| {
                assert_eq!(v["status"], "running", "{v}");
                (
                    v["name"].as_str().unwrap().to_owned(),
                    v["id"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        listed.sort();
        let want: Vec<(String, String)> = created
            .iter()
            .map(|c| (c.name.clone(), c.vm.clone()))
            .collect();
        assert_eq!(listed, want, "the tenant's VMs via {base}");
    }

    // AtomOS holds exactly the database's VMs and volumes.
    let (db_vms, _) = meson_db::page_at::<meson_core::vm::Vm>(
        &db.pool,
        &TenantId(TENANT.into()),
        &Default::default(),
        1000,
        0,
    )
    .await
    .unwrap();
    assert_eq!(db_vms.len(), VMS);
    let db_vols =
        meson_db::volumes::list_for_vms(&db.pool, &db_vms.iter().map(|v| v.id).collect::<Vec<_>>())
            .await
            .unwrap();
    let mut want_vms: Vec<String> = db_vms.iter().map(|v| v.atomos_name.clone()).collect();
    let mut want_vols: Vec<String> = db_vols.iter().map(|v| v.atomos_name.clone()).collect();
    want_vms.sort();
    want_vols.sort();
    let (have_vms, have_vols) = sim_contents(&sim);
    assert_eq!(have_vms.len(), VMS, "AtomOS holds 12 VMs: {have_vms:?}");
    assert_eq!(have_vms, want_vms, "VMs on AtomOS = VMs in the database");
    assert_eq!(
        have_vols, want_vols,
        "volumes on AtomOS = the VMs' volumes in the database"
    );

    // One job per action, each step recorded once, no job run over and over.
    let attempts = check_jobs(&db, &create_actions, "vm_create").await;
    assert!(
        attempts <= VMS as i32 + 2,
        "{attempts} attempts for {VMS} create jobs"
    );
    eprintln!("replicas: {attempts} attempts for {VMS} create jobs");

    // Delete them all at once, alternating the APIs.
    let mut deletes = tokio::task::JoinSet::new();
    for (i, v) in created.iter().enumerate() {
        let c = c.clone();
        let url = format!("{}/v1/vms/{}", bases[i % 2], v.vm);
        deletes.spawn(async move {
            let r = c.call(Method::DELETE, &url, None, None).await;
            assert_eq!(r.status, StatusCode::OK, "DELETE {url}: {}", r.body);
            r.body["action"]["id"].as_str().unwrap().to_owned()
        });
    }
    let mut delete_actions = Vec::new();
    while let Some(r) = deletes.join_next().await {
        delete_actions.push(r.expect("delete task"));
    }
    let finals = wait_actions(&c, &bases, &delete_actions).await;
    eprintln!("replicas: {VMS} deletes done after {:?}", started.elapsed());
    for (id, a) in &finals {
        assert_eq!(a["progress"], 100, "{id}: {a}");
        assert_eq!(a["command"], "delete_vm", "{id}: {a}");
    }
    let delete_attempts = check_jobs(&db, &delete_actions, "vm_delete").await;
    assert!(
        delete_attempts <= VMS as i32 + 2,
        "{delete_attempts} attempts for {VMS} delete jobs"
    );
    for base in &bases {
        let vms = c.vms(base).await;
        assert!(vms.is_empty(), "no VM left via {base}: {vms:?}");
    }
    for h in sim.hosts() {
        let inv = h.inventory();
        assert!(inv.is_empty(), "{} still holds {inv:?}", h.name());
    }
    assert_eq!(meson_db::jobs::unfinished(&db.pool).await.unwrap(), 0);

    // An API token made through one API, revoked through it: the other
    // refuses it at the very next request (each reads the token's row).
    let owner = Client {
        http: c.http.clone(),
        token: meson_api::Auth::hs256(JWT_SECRET.as_bytes(), "meson").issue(
            TENANT,
            "olga",
            meson_api::Role::Owner,
            chrono::Duration::minutes(30),
        ),
    };
    let r = owner
        .call(
            Method::POST,
            &format!("{}/v1/tokens", bases[0]),
            Some(br#"{"name": "automation", "role": "viewer"}"#),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let automation = Client {
        http: c.http.clone(),
        token: r.body["secret"].as_str().unwrap().to_owned(),
    };
    let token_id = r.body["token"]["id"].as_str().unwrap().to_owned();
    let vms = format!("{}/v1/vms", bases[1]);
    assert_eq!(
        automation.call(Method::GET, &vms, None, None).await.status,
        StatusCode::OK
    );
    let r = owner
        .call(
            Method::DELETE,
            &format!("{}/v1/tokens/{token_id}", bases[0]),
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        automation.call(Method::GET, &vms, None, None).await.status,
        StatusCode::UNAUTHORIZED,
        "a token revoked on one replica is refused by the other at once"
    );

    // SIGTERM to all four at once; each exits 0, in bounded time.
    let stopping = Instant::now();
    for p in &mut procs {
        p.sigterm();
    }
    for p in &mut procs {
        let status = p.wait_exit(Duration::from_secs(15)).await;
        assert!(status.success(), "{} on SIGTERM: {status}", p.what);
    }
    eprintln!(
        "replicas: all stopped in {:?}; total {:?}",
        stopping.elapsed(),
        started.elapsed()
    );
    let _ = std::fs::remove_file(&targets);
}
