//! PostgreSQL failover under load, on a real highly available stack: three
//! PostgreSQL instances under Patroni (synchronous mode, one etcd) behind
//! HAProxy, and two `mesond api` and two `mesond worker` processes reaching
//! them through HAProxy.
//!
//! While clients create and delete VMs through both APIs (retrying a `503`
//! after its `Retry-After`, with the same `Idempotency-Key`) and watch
//! actions over Server-Sent Events, and a cluster's autoscaler polls both
//! APIs' autoscaler endpoints (answered, or told `UNAVAILABLE`, never
//! failed), the database's primary is
//!
//! 1. killed: its machine dies (Patroni and PostgreSQL SIGKILLed at once),
//!    and a standby is promoted once the leader lock expires;
//! 2. switched over, as planned, through Patroni's REST API;
//! 3. cut off: its machine freezes (Patroni, PostgreSQL and its backends
//!    SIGSTOPped), so HAProxy takes it out and a standby is promoted.
//!
//! Every request answers, in its timeout, either success or `503` with
//! `Retry-After` (never a `500`); during the planned switchover, success. Afterwards every acknowledged create exists, every action is final
//! and succeeded, AtomOS registered each VM exactly once and holds exactly
//! the database's VMs, and each event stream delivered every watched
//! action's changes in order, ending with its final state.
//!
//! Needs patroni, etcd, haproxy and PostgreSQL's server (Debian packages
//! patroni, etcd-server, haproxy, postgresql): skipped without them, saying
//! so, unless `MESON_REQUIRE_HA=1` (CI installs them and sets that).

mod support;

#[path = "../../../tests/e2e/seeds.rs"]
#[allow(dead_code)]
mod seeds;

use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{Process, ha};

const SSH_KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMLavtiPfhiG3t6TAxHosXoVh7Pc/lSD8L9SNPyAzp1d user@host";
const JWT_SECRET: &str = "meson-failover-test-secret-0123456789abcdef";
/// 32 bytes, base64.
const SECRETS_KEY: &str = "bWVzb24tcmVwbGljYXMtdGVzdC1rZXktMzItYnl0ZXM=";
const TENANT: &str = "acme";
/// Far beyond any answer's time: a request still open then is hung.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
/// Load clients.
const CLIENTS: usize = 3;
/// VMs a client keeps; older ones it deletes.
const KEEP: usize = 3;

fn seed_vm(name: &str) -> Vec<u8> {
    let raw = r#"{"specs":{"req":{"cpu":{"smtEnabled":false,"numberOfCores":1,"numberOfThreads":1,
      "min_frequency":1.0,"arch":["X86_64"],"flags":[]},
      "mem":{"capacity":1024,"requireECC":0},"pci":{"devices":{}},
      "misc":{"osDistribution":"Debian"}},
      "volumes":[],
      "authentication":{"ssh-key":"KEY"},
      "vm_name":"NAME"}}"#;
    raw.replace("KEY", SSH_KEY)
        .replace("NAME", name)
        .into_bytes()
}

/// An API on `http_port`, serving the clusters' autoscalers on
/// `autoscaler_port`.
fn spawn_api(db_url: &str, targets: &str, http_port: u16, autoscaler_port: u16) -> Process {
    let autoscaler = format!("127.0.0.1:{autoscaler_port}");
    support::deployed(
        "api",
        db_url,
        targets,
        http_port,
        [JWT_SECRET, SECRETS_KEY],
        &[
            ("MESON_RATE_LIMIT_PER_MIN", "100000"),
            ("MESON_RATE_LIMIT_POLL_PER_MIN", "100000"),
            ("MESON_LOG", "error"),
            ("MESON_AUTOSCALER_ADDR", &autoscaler),
            ("MESON_AUTOSCALER_TLS_NAMES", "localhost"),
        ],
    )
}

/// What happened to the system while a request ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Steady,
    Killed,
    Partitioned,
    Switchover,
}

/// One answer, or its absence.
#[derive(Debug)]
struct Answer {
    phase: Phase,
    what: String,
    /// `None`: no answer within [`REQUEST_TIMEOUT`] or a broken connection.
    status: Option<StatusCode>,
    retry_after: bool,
    at: Instant,
    body: String,
}

#[derive(Default)]
struct Ledger {
    answers: Vec<Answer>,
    /// Acknowledged creates: VM id → (name, create action id).
    created: BTreeMap<String, (String, String)>,
    deleted: BTreeMap<String, String>,
    /// Other actions that must succeed (a cluster's create).
    others: Vec<String>,
    /// VMs whose create committed while its answer was lost (a `503`), so
    /// that its retry found the name taken: made once, never acknowledged.
    unanswered: BTreeSet<String>,
}

struct Load {
    http: reqwest::Client,
    token: String,
    bases: Vec<String>,
    /// The APIs a load balancer sends nothing to now (being restarted).
    out: Mutex<BTreeSet<usize>>,
    phase: Mutex<Phase>,
    ledger: Mutex<Ledger>,
    stop: AtomicBool,
}

impl Load {
    fn phase(&self) -> Phase {
        *self.phase.lock().unwrap()
    }

    /// The API for a request's `turn`, among those in rotation.
    fn base(&self, turn: usize) -> &str {
        let out = self.out.lock().unwrap();
        let live: Vec<&String> = (0..self.bases.len())
            .filter(|i| !out.contains(i))
            .map(|i| &self.bases[i])
            .collect();
        live[turn % live.len()]
    }

    /// One request, recorded.
    async fn call(&self, method: Method, url: &str, body: Option<Vec<u8>>, key: &str) -> Answer {
        let phase = self.phase();
        let mut req = self
            .http
            .request(method.clone(), url)
            .bearer_auth(&self.token)
            .timeout(REQUEST_TIMEOUT)
            .header("idempotency-key", key);
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b);
        }
        let what = format!("{method} {url}");
        let answer = match req.send().await {
            Ok(r) => {
                let status = r.status();
                let retry_after = r.headers().contains_key("retry-after");
                Answer {
                    phase,
                    what,
                    status: Some(status),
                    retry_after,
                    at: Instant::now(),
                    body: r.text().await.unwrap_or_default(),
                }
            }
            Err(e) => Answer {
                phase,
                what,
                status: None,
                retry_after: false,
                at: Instant::now(),
                body: e.to_string(),
            },
        };
        self.ledger.lock().unwrap().answers.push(Answer {
            phase: answer.phase.max(self.phase()),
            what: answer.what.clone(),
            status: answer.status,
            retry_after: answer.retry_after,
            at: answer.at,
            body: answer.body.clone(),
        });
        answer
    }

    /// A request retried with the same key while it answers `503` (after
    /// its `Retry-After`) or "still being processed"; the final answer, and
    /// whether a `503` came before it.
    async fn keyed(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        turn: usize,
    ) -> (Answer, bool) {
        let key = uuid::Uuid::new_v4().to_string();
        let deadline = Instant::now() + Duration::from_secs(90);
        let mut turn = turn;
        let mut refused = false;
        loop {
            let url = format!("{}{path}", self.base(turn));
            let a = self.call(method.clone(), &url, body.clone(), &key).await;
            let again = match a.status {
                Some(StatusCode::SERVICE_UNAVAILABLE) => true,
                Some(StatusCode::CONFLICT) => a.body.contains("still being processed"),
                _ => false,
            };
            if !again || Instant::now() > deadline {
                return (a, refused);
            }
            refused |= a.status == Some(StatusCode::SERVICE_UNAVAILABLE);
            turn += 1;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Creates and deletes VMs until told to stop.
    async fn run(self: Arc<Self>, client: usize) {
        let mut mine: Vec<String> = Vec::new();
        let mut n = 0;
        while !self.stop.load(Ordering::Relaxed) {
            n += 1;
            let name = format!("ha-{client}-{n}");
            let (a, refused) = self
                .keyed(Method::POST, "/v1/vms", Some(seed_vm(&name)), client + n)
                .await;
            if refused && a.status == Some(StatusCode::CONFLICT) && a.body.contains("uniqueness") {
                self.ledger.lock().unwrap().unanswered.insert(name.clone());
            }
            if a.status == Some(StatusCode::CREATED) {
                let v: Value = serde_json::from_str(&a.body).unwrap();
                let vm = v["vm"]["id"].as_str().unwrap().to_owned();
                let action = v["action"]["id"].as_str().unwrap().to_owned();
                self.ledger
                    .lock()
                    .unwrap()
                    .created
                    .insert(vm.clone(), (name, action));
                mine.push(vm);
            }
            if mine.len() > KEEP {
                let vm = mine.remove(0);
                let (a, _) = self
                    .keyed(Method::DELETE, &format!("/v1/vms/{vm}"), None, client + n)
                    .await;
                if a.status == Some(StatusCode::OK) {
                    let v: Value = serde_json::from_str(&a.body).unwrap();
                    let action = v["action"]["id"].as_str().unwrap().to_owned();
                    self.ledger.lock().unwrap().deleted.insert(vm, action);
                } else {
                    // Refused (a VM still being created): kept for later.
                    mine.push(vm);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The longest time without an acknowledged create from `since` to
    /// `until`: how long creates were unavailable around a fault.
    fn longest_gap(&self, since: Instant, until: Instant) -> Duration {
        let ledger = self.ledger.lock().unwrap();
        let mut acks: Vec<Instant> = ledger
            .answers
            .iter()
            .filter(|a| a.at > since && a.at <= until && a.what.ends_with("/v1/vms"))
            .filter(|a| a.status == Some(StatusCode::CREATED))
            .map(|a| a.at)
            .collect();
        acks.sort();
        let mut last = since;
        let mut gap = Duration::ZERO;
        for t in acks.into_iter().chain([until]) {
            gap = gap.max(t - last);
            last = t;
        }
        gap
    }

    /// Waits (bounded) for a create acknowledged after `after`; then how
    /// long creates were unavailable since `since`, the fault.
    async fn recovered(&self, since: Instant, after: Instant, what: &str) -> Duration {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let acked = self.ledger.lock().unwrap().answers.iter().any(|a| {
                a.at > after && a.what.ends_with("/v1/vms") && a.status == Some(StatusCode::CREATED)
            });
            if acked {
                // A second more of load, so that the gap is closed.
                tokio::time::sleep(Duration::from_secs(1)).await;
                return self.longest_gap(since, Instant::now());
            }
            if Instant::now() > deadline {
                let ledger = self.ledger.lock().unwrap();
                let mut seen: BTreeMap<String, usize> = BTreeMap::new();
                for a in ledger.answers.iter().filter(|a| a.at > since) {
                    let body: String = a.body.chars().take(160).collect();
                    *seen.entry(format!("{:?} {body}", a.status)).or_default() += 1;
                }
                panic!("creates did not recover within 60 s of {what}; answers since: {seen:#?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// What a stream watcher saw: each action's states in the order received
/// (across reconnections), errors, and how many times it reconnected.
struct Watched {
    events: BTreeMap<String, Vec<Value>>,
    errors: Vec<String>,
    /// Streams that broke or ended early, and were resumed.
    reconnects: usize,
    /// Opens answered `503` (the action feed not back within the hold),
    /// tried again.
    refused: usize,
    /// Why each connection before the last ended.
    breaks: Vec<String>,
}

/// Follows `GET /v1/actions/stream` for `ids` as EventSource does, from
/// `bases[first]`: when the stream breaks or ends early (its API stopped),
/// it reconnects to the next API with the last event's id as
/// `Last-Event-ID`, until it has every action's final state or is told
/// `204`. A `503` (the database failing over) is retried after a pause.
async fn watch(
    http: reqwest::Client,
    bases: Vec<String>,
    first: usize,
    token: String,
    ids: Vec<String>,
) -> Watched {
    use futures::StreamExt;
    let query: Vec<String> = ids.iter().map(|id| format!("id={id}")).collect();
    let mut seen = Watched {
        events: BTreeMap::new(),
        errors: Vec::new(),
        reconnects: 0,
        refused: 0,
        breaks: Vec::new(),
    };
    let mut last_id: Option<String> = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    for attempt in first.. {
        assert!(
            Instant::now() < deadline,
            "streams of {ids:?} did not end in 120 s"
        );
        if attempt > first {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let base = &bases[attempt % bases.len()];
        let mut req = http
            .get(format!("{base}/v1/actions/stream?{}", query.join("&")))
            .bearer_auth(&token)
            .timeout(Duration::from_secs(120));
        if let Some(id) = &last_id {
            req = req.header("last-event-id", id);
        }
        let r = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                seen.reconnects += 1;
                seen.breaks.push(format!("{base}: {e}"));
                continue; // that API is down: the next one
            }
        };
        match r.status() {
            StatusCode::NO_CONTENT => break,
            StatusCode::SERVICE_UNAVAILABLE => {
                assert!(
                    r.headers().contains_key("retry-after"),
                    "a 503 without Retry-After"
                );
                seen.refused += 1;
                seen.breaks.push(format!("{base}: 503"));
                continue;
            }
            StatusCode::OK => {}
            other => panic!("the stream answered {other}"),
        }
        let mut buf = String::new();
        let mut body = r.bytes_stream();
        while let Some(chunk) = body.next().await {
            let bytes = match chunk {
                Ok(bytes) => bytes,
                Err(e) => {
                    seen.breaks.push(format!("{base}: the body broke: {e}"));
                    break;
                }
            };
            buf.push_str(&String::from_utf8_lossy(&bytes));
            while let Some(end) = buf.find("\n\n") {
                let event: String = buf.drain(..end + 2).collect();
                let field = |name: &str| event.lines().find_map(|l| l.strip_prefix(name));
                match (field("event: "), field("data: ")) {
                    (Some("action"), Some(d)) => {
                        let a: Value = serde_json::from_str(d).unwrap();
                        let id = a["id"].as_str().unwrap().to_owned();
                        seen.events.entry(id).or_default().push(a);
                        last_id = field("id: ").map(str::to_owned);
                    }
                    (Some(other), d) => seen.errors.push(format!("{other}: {d:?}")),
                    _ => {}
                }
            }
        }
        let finished = ids.iter().all(|id| {
            seen.events
                .get(id)
                .and_then(|states| states.last())
                .is_some_and(|a| a["status"] != "running")
        });
        if finished || !seen.errors.is_empty() {
            break;
        }
        seen.reconnects += 1;
        seen.breaks.push(format!("{base}: the stream ended early"));
    }
    seen
}

/// Each stream carried its actions to their final state, each state once,
/// in order.
fn check_streams(watched: &[Watched]) {
    for w in watched {
        assert!(w.errors.is_empty(), "stream errors: {:?}", w.errors);
        for (id, states) in &w.events {
            let last = states.last().unwrap();
            assert_eq!(
                last["status"], "success",
                "action {id}'s stream: {states:?}"
            );
            for pair in states.windows(2) {
                let (a, b) = (&pair[0]["progress"], &pair[1]["progress"]);
                let rank = |s: &Value| (s["status"] != "running", s["progress"].as_u64());
                assert!(
                    rank(&pair[0]) < rank(&pair[1]),
                    "action {id}'s stream sent a state twice or went back ({a} then {b}): \
                     {states:?}"
                );
            }
        }
    }
}

/// meson as its deployments run it: two `mesond api` and two `mesond
/// worker` processes on one database, the simulator's hosts as AtomOS.
struct Meson {
    url: String,
    sim: atomos_sim::Simulator,
    targets: std::path::PathBuf,
    ports: Vec<u16>,
    /// Each API's autoscalers' endpoint.
    autoscaler_ports: Vec<u16>,
    apis: Vec<Process>,
    workers: Vec<Process>,
    bases: Vec<String>,
    http: reqwest::Client,
    token: String,
}

/// Jobs whose worker died are taken over after this.
const LEASE_MS: u64 = 3000;

/// How often an idle worker looks at the queue (`MESON_JOB_POLL_MS`'s
/// default).
const JOB_POLL: Duration = Duration::from_secs(1);

impl Meson {
    /// meson on the database at `url`, its VMs booting in `boot`.
    async fn start(url: &str, test: &str, boot: Duration) -> Meson {
        let sim = support::simulator(boot).await;
        let targets = support::targets_file(&sim, test);
        let ports = vec![support::free_port(), support::free_port()];
        let autoscaler_ports = vec![support::free_port(), support::free_port()];
        let apis = ports
            .iter()
            .zip(&autoscaler_ports)
            .map(|(p, a)| spawn_api(url, targets.to_str().unwrap(), *p, *a))
            .collect();
        let bases: Vec<String> = ports
            .iter()
            .map(|p| format!("http://127.0.0.1:{p}"))
            .collect();
        let workers = (0..2).map(|_| spawn_worker(url, &bases[0])).collect();
        let token = meson_api::Auth::hs256(JWT_SECRET.as_bytes(), "meson").issue(
            TENANT,
            "alice",
            meson_api::Role::Editor,
            chrono::Duration::minutes(60),
        );
        let meson = Meson {
            url: url.to_owned(),
            sim,
            targets,
            ports,
            autoscaler_ports,
            apis,
            workers,
            bases,
            http: reqwest::Client::new(),
            token,
        };
        for i in 0..meson.apis.len() {
            meson.ready(i).await;
        }
        meson
    }

    /// Waits (bounded) until API `i` says it is ready.
    async fn ready(&self, i: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self
            .http
            .get(format!("{}/readyz", self.bases[i]))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            assert!(
                Instant::now() < deadline,
                "{} not ready in 30 s",
                self.bases[i]
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn load(&self) -> Arc<Load> {
        Arc::new(Load {
            http: self.http.clone(),
            token: self.token.clone(),
            bases: self.bases.clone(),
            out: Mutex::new(BTreeSet::new()),
            phase: Mutex::new(Phase::Steady),
            ledger: Mutex::new(Ledger::default()),
            stop: AtomicBool::new(false),
        })
    }

    /// Every action ends and succeeds; the tenant's VMs are the
    /// acknowledged creates less the deletes; AtomOS registered each VM
    /// once and holds exactly those. When each action finished, and how
    /// long it took.
    async fn check_world(
        &self,
        load: &Load,
        ledger: &Ledger,
    ) -> Vec<(chrono::DateTime<chrono::Utc>, Duration)> {
        let actions: Vec<&String> = ledger
            .created
            .values()
            .map(|(_, a)| a)
            .chain(ledger.deleted.values())
            .chain(ledger.others.iter())
            .collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut took = Vec::new();
        for id in &actions {
            loop {
                let url = format!("{}/v1/actions/{id}", self.bases[0]);
                let a = load.call(Method::GET, &url, None, "-").await;
                assert_eq!(a.status, Some(StatusCode::OK), "action {id}: {}", a.body);
                let v: Value = serde_json::from_str(&a.body).unwrap();
                match v["action"]["status"].as_str() {
                    Some("success") => {
                        let at = |k: &str| {
                            chrono::DateTime::parse_from_rfc3339(v["action"][k].as_str().unwrap())
                                .unwrap()
                        };
                        let d = (at("finished") - at("started")).to_std().unwrap();
                        took.push((at("finished").with_timezone(&chrono::Utc), d));
                        break;
                    }
                    Some("running") if Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    other => panic!("action {id} ended {other:?}: {v}"),
                }
            }
        }

        // Every VM listed: id → name.
        let mut live = BTreeMap::new();
        let mut page = 1;
        loop {
            let url = format!("{}/v1/vms?per_page=50&page={page}", self.bases[1]);
            let listed = load.call(Method::GET, &url, None, "-").await;
            assert_eq!(listed.status, Some(StatusCode::OK), "{}", listed.body);
            let listed: Value = serde_json::from_str(&listed.body).unwrap();
            live.extend(listed["vms"].as_array().unwrap().iter().map(|v| {
                let field = |k: &str| v[k].as_str().unwrap().to_owned();
                (field("id"), field("name"))
            }));
            match listed["meta"]["pagination"]["next_page"].as_u64() {
                Some(next) => page = next,
                None => break,
            }
        }
        let expected: BTreeSet<String> = ledger
            .created
            .keys()
            .filter(|vm| !ledger.deleted.contains_key(*vm))
            .cloned()
            .collect();
        // A create that committed as the database went away may have lost
        // its answer: its retry found the name taken. Such a VM exists
        // once, and is no acknowledged create.
        let unanswered: BTreeSet<String> = live
            .iter()
            .filter(|(_, name)| ledger.unanswered.contains(*name))
            .map(|(id, _)| id.clone())
            .collect();
        assert_eq!(
            unanswered.len(),
            ledger.unanswered.len(),
            "each create whose answer was lost exists once: {:?}",
            ledger.unanswered
        );
        let acknowledged: BTreeSet<String> = live
            .keys()
            .filter(|id| !unanswered.contains(*id))
            .cloned()
            .collect();
        assert_eq!(
            acknowledged, expected,
            "the VMs are the acknowledged creates less the deletes"
        );

        let mut registered: BTreeMap<String, u32> = BTreeMap::new();
        for h in self.sim.hosts() {
            for (name, n) in h.registrations() {
                *registered.entry(name).or_default() += n;
            }
        }
        let atomos = |vms: &mut dyn Iterator<Item = &String>| -> BTreeSet<String> {
            vms.map(|vm| {
                meson_core::naming::vm_atomos_name(
                    meson_core::VmId(vm.parse().unwrap()),
                    &meson_core::TenantId(TENANT.into()),
                )
            })
            .collect()
        };
        let twice: Vec<_> = registered.iter().filter(|(_, n)| **n != 1).collect();
        assert!(twice.is_empty(), "VMs registered more than once: {twice:?}");
        // Plain VMs; a cluster's nodes are `k...`.
        registered.retain(|name, _| name.starts_with("vm-"));
        assert_eq!(
            registered.keys().cloned().collect::<BTreeSet<_>>(),
            atomos(&mut ledger.created.keys().chain(&unanswered)),
            "AtomOS registered exactly the creates"
        );
        let held: BTreeSet<String> = self
            .sim
            .hosts()
            .iter()
            .flat_map(|h| h.inventory().vms.into_iter().map(|v| v.name))
            .filter(|name| name.starts_with("vm-"))
            .collect();
        assert_eq!(
            held,
            atomos(&mut expected.iter().chain(&unanswered)),
            "AtomOS holds exactly the live VMs"
        );
        took
    }

    fn stop(&mut self) {
        for p in self.workers.iter_mut().chain(self.apis.iter_mut()) {
            let status = p.stop();
            assert!(status.success(), "{} stopped with {status}", p.what);
        }
        let _ = std::fs::remove_file(&self.targets);
    }
}

/// What an autoscaler polling meson through the faults saw.
#[derive(Debug, Default)]
struct Polled {
    ok: usize,
    unavailable: usize,
    /// Any other answer, or none within the timeout, with its phase.
    other: Vec<String>,
    /// Whether the last call succeeded.
    last_ok: bool,
}

/// Polls the autoscalers' endpoint of each API in turn, every 200 ms, as
/// the cluster-autoscaler does (`NodeGroups`, over mutual TLS with the
/// cluster's `credentials`), until the load stops.
async fn autoscale(load: Arc<Load>, ports: Vec<u16>, credentials: Value) -> Polled {
    use meson_proto::externalgrpc as pb;
    use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
    let pem = |field: &str| credentials[field].as_str().expect(field).to_owned();
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(pem("ca_cert")))
        .identity(Identity::from_pem(pem("cert"), pem("key")))
        .domain_name("localhost");
    let clients: Vec<_> = ports
        .iter()
        .map(|p| {
            let channel = Channel::from_shared(format!("https://127.0.0.1:{p}"))
                .unwrap()
                .tls_config(tls.clone())
                .unwrap()
                .connect_lazy();
            pb::cloud_provider_client::CloudProviderClient::new(channel)
        })
        .collect();
    let mut polled = Polled::default();
    let mut turn = 0;
    while !load.stop.load(Ordering::Relaxed) {
        let mut client = clients[turn % clients.len()].clone();
        turn += 1;
        let phase = load.phase();
        let answer = tokio::time::timeout(
            REQUEST_TIMEOUT,
            client.node_groups(pb::NodeGroupsRequest {}),
        )
        .await;
        polled.last_ok = false;
        match answer {
            Ok(Ok(r)) => {
                let groups = r.into_inner().node_groups;
                assert_eq!(groups.len(), 1, "the autoscaling pool: {groups:?}");
                polled.ok += 1;
                polled.last_ok = true;
            }
            Ok(Err(s)) if s.code() == tonic::Code::Unavailable => polled.unavailable += 1,
            Ok(Err(s)) => polled.other.push(format!("{phase:?}: {s:?}")),
            Err(_) => polled
                .other
                .push(format!("{phase:?}: no answer in {REQUEST_TIMEOUT:?}")),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    polled
}

/// A worker; a cluster's nodes call `public_url` home.
fn spawn_worker(db_url: &str, public_url: &str) -> Process {
    // The APIs' key: the workers seal what the APIs open (cluster secrets).
    support::worker_with(
        db_url,
        &LEASE_MS.to_string(),
        &[
            ("MESON_SECRETS_KEY", SECRETS_KEY),
            ("MESON_PUBLIC_URL", public_url),
            // Either worker alone runs the whole load (one is restarting).
            ("MESON_WORKER_CONCURRENCY", "32"),
        ],
    )
}

/// Runs the load's clients until `load.stop`; their handles.
fn start_clients(load: &Arc<Load>) -> Vec<tokio::task::JoinHandle<()>> {
    (0..CLIENTS)
        .map(|c| tokio::spawn(load.clone().run(c)))
        .collect()
}

/// Stops the clients; every answer they had is success, or `503` with
/// `Retry-After`, never another 5xx and never none. The 503s per phase.
async fn stop_clients(
    load: &Load,
    clients: Vec<tokio::task::JoinHandle<()>>,
) -> (Ledger, BTreeMap<Phase, usize>) {
    load.stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    let ledger = std::mem::take(&mut *load.ledger.lock().unwrap());
    let mut refused: BTreeMap<Phase, usize> = BTreeMap::new();
    for a in &ledger.answers {
        match a.status {
            None => panic!("{} had no answer ({:?}): {}", a.what, a.phase, a.body),
            Some(s) if s == StatusCode::SERVICE_UNAVAILABLE => {
                assert!(
                    a.retry_after,
                    "{}: 503 without Retry-After: {}",
                    a.what, a.body
                );
                *refused.entry(a.phase).or_default() += 1;
            }
            Some(s) => assert!(
                !s.is_server_error(),
                "{} answered {s} ({:?}): {}",
                a.what,
                a.phase,
                a.body
            ),
        }
    }
    (ledger, refused)
}

/// A fault on the primary that the cluster recovers from by promoting a
/// standby, under load: `fault` strikes the primary. The old primary, and
/// how long creates were unavailable.
async fn unplanned(
    cluster: &mut ha::Cluster,
    load: &Load,
    phase: Phase,
    fault: impl FnOnce(&mut ha::Cluster, usize),
) -> (usize, Duration) {
    let primary = cluster.primary().await.expect("a primary");
    *load.phase.lock().unwrap() = phase;
    let since = Instant::now();
    fault(cluster, primary);
    let promoted = cluster.wait_new_primary(primary).await;
    let rto = load.recovered(since, promoted, &format!("{phase:?}")).await;
    eprintln!(
        "failover: {phase:?} {}; creates unavailable for {rto:?}",
        cluster.nodes[primary].name
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    *load.phase.lock().unwrap() = Phase::Steady;
    (primary, rto)
}

fn ha_missing() -> bool {
    let Some(why) = ha::missing() else {
        return false;
    };
    assert!(
        std::env::var("MESON_REQUIRE_HA").as_deref() != Ok("1"),
        "MESON_REQUIRE_HA=1 but {why}"
    );
    eprintln!("skipped: {why}");
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failover_partition_and_switchover_lose_nothing() {
    if ha_missing() {
        return;
    }
    let started = Instant::now();
    let mut cluster = ha::Cluster::start().await;
    eprintln!(
        "failover: PostgreSQL cluster up after {:?}",
        started.elapsed()
    );
    cluster.create_database("meson").await;
    let url = cluster.url("meson");
    let migrated = support::mesond_on("migrate", &url, &[]).status().unwrap();
    assert!(migrated.success(), "mesond migrate: {migrated}");

    let mut meson = Meson::start(&url, "failover", Duration::from_millis(300)).await;
    let load = meson.load();
    let clients = start_clients(&load);
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Streams opened on the newest actions, which run through the faults.
    let mut streams = Vec::new();
    let open_streams = |streams: &mut Vec<_>| {
        let ids: Vec<String> = {
            let ledger = load.ledger.lock().unwrap();
            ledger
                .created
                .values()
                .rev()
                .take(4)
                .map(|(_, a)| a.clone())
                .collect()
        };
        for i in 0..meson.bases.len() {
            streams.push(tokio::spawn(watch(
                meson.http.clone(),
                meson.bases.clone(),
                i,
                meson.token.clone(),
                ids.iter().skip(i).step_by(2).cloned().collect(),
            )));
        }
    };
    let mut figures = BTreeMap::new();

    // A cluster whose autoscaler polls meson through the faults.
    let mut polled_req = seeds::seed_kaas();
    polled_req["req"]["nodepool"][0]["autoscale"] = true.into();
    polled_req["req"]["nodepool"][0]["desired_nodes"] = 1.into();
    polled_req["req"]["nodepool"][0]["min_nodes"] = 1.into();
    polled_req["req"]["name"] = "polled".into();
    let (made, _) = load
        .keyed(
            Method::POST,
            "/v1/clusters",
            Some(serde_json::to_vec(&polled_req).unwrap()),
            0,
        )
        .await;
    assert_eq!(made.status, Some(StatusCode::CREATED), "{}", made.body);
    let made: Value = serde_json::from_str(&made.body).unwrap();
    let polled_id = made["cluster"]["id"].as_str().unwrap().to_owned();
    load.ledger
        .lock()
        .unwrap()
        .others
        .push(made["action"]["id"].as_str().unwrap().to_owned());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let url = format!("{}/v1/clusters/{polled_id}", meson.bases[0]);
        let got = load.call(Method::GET, &url, None, "-").await;
        if got.body.contains(r#""status":"running""#) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "cluster polled running in 60 s: {}",
            got.body
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let (creds, _) = load
        .keyed(
            Method::POST,
            &format!("/v1/clusters/{polled_id}/autoscaler-credentials"),
            Some(b"{}".to_vec()),
            0,
        )
        .await;
    assert_eq!(creds.status, Some(StatusCode::CREATED), "{}", creds.body);
    let creds: Value = serde_json::from_str(&creds.body).unwrap();
    let autoscaler = tokio::spawn(autoscale(
        load.clone(),
        meson.autoscaler_ports.clone(),
        creds["credentials"].clone(),
    ));

    // A cluster is made through the faults too.
    let mut cluster_req = seeds::seed_kaas();
    cluster_req["req"]["nodepool"][0]["desired_nodes"] = 1.into();
    cluster_req["req"]["nodepool"][0]["min_nodes"] = 1.into();
    let (made, _) = load
        .keyed(
            Method::POST,
            "/v1/clusters",
            Some(serde_json::to_vec(&cluster_req).unwrap()),
            0,
        )
        .await;
    assert_eq!(made.status, Some(StatusCode::CREATED), "{}", made.body);
    let made: Value = serde_json::from_str(&made.body).unwrap();
    let cluster_id = made["cluster"]["id"].as_str().unwrap().to_owned();
    let cluster_action = made["action"]["id"].as_str().unwrap().to_owned();

    // 1. The primary's machine dies.
    open_streams(&mut streams);
    let (primary, rto) =
        unplanned(&mut cluster, &load, Phase::Killed, ha::Cluster::kill_node).await;
    figures.insert("kill", rto);
    cluster.start_node(primary);
    cluster.wait_healthy(Duration::from_secs(90)).await;

    // 2. A planned switchover.
    open_streams(&mut streams);
    let primary = cluster.primary().await.expect("a primary");
    *load.phase.lock().unwrap() = Phase::Switchover;
    let switched = Instant::now();
    let candidate = cluster.switchover(primary).await;
    let new = cluster.wait_healthy(Duration::from_secs(90)).await;
    assert_eq!(new, candidate, "the switchover's candidate is the primary");
    let rto = load
        .recovered(switched, Instant::now(), "the switchover")
        .await;
    eprintln!(
        "failover: switched over to {}; creates unavailable for {rto:?}",
        cluster.nodes[new].name
    );
    figures.insert("switchover", rto);
    tokio::time::sleep(Duration::from_secs(2)).await;
    *load.phase.lock().unwrap() = Phase::Steady;
    cluster.wait_healthy(Duration::from_secs(90)).await;

    // 3. The primary is cut off from the cluster, and stays so: the test
    // ends on the primary that replaced it.
    open_streams(&mut streams);
    let (_, rto) = unplanned(&mut cluster, &load, Phase::Partitioned, |c, i| {
        c.partition(i)
    })
    .await;
    figures.insert("partition", rto);
    tokio::time::sleep(Duration::from_secs(1)).await;

    let (mut ledger, refused) = stop_clients(&load, clients).await;
    ledger.others.push(cluster_action);
    // The autoscaler was answered or told to come back, never failed, and
    // is answered on the new primary.
    let polled = autoscaler.await.unwrap();
    eprintln!("failover: the autoscaler's polls: {polled:?}");
    assert!(polled.other.is_empty(), "{:?}", polled.other);
    assert!(polled.ok > 0 && polled.last_ok, "{polled:?}");
    eprintln!(
        "failover: {} requests, {} creates acknowledged, {} whose answer was lost, {} deletes; \
         503s by phase: {refused:?}",
        ledger.answers.len(),
        ledger.created.len(),
        ledger.unanswered.len(),
        ledger.deleted.len()
    );
    // A planned switchover holds every request and runs it on the new
    // primary, even one whose statement the old primary ended as it shut
    // down: the load's requests are reads and replayable writes, whose
    // later attempt finds what an earlier one wrote. Nothing is refused.
    let switchover = refused.get(&Phase::Switchover).copied().unwrap_or(0);
    assert_eq!(
        switchover, 0,
        "a planned switchover refused {switchover} requests"
    );

    meson.check_world(&load, &ledger).await;
    let url = format!("{}/v1/clusters/{cluster_id}", meson.bases[0]);
    let got = load.call(Method::GET, &url, None, "-").await;
    let got: Value = serde_json::from_str(&got.body).unwrap();
    assert_eq!(got["cluster"]["status"], "running", "{got}");

    // Each stream carried its actions to their final state, in order,
    // over the connection it opened: the API never went away.
    let mut watched = Vec::new();
    for s in streams {
        watched.push(s.await.unwrap());
    }
    // (An open refused while the action feed was still reconnecting is
    // tried again, as EventSource does: no stream broke for it.)
    let breaks: Vec<&String> = watched.iter().flat_map(|w| &w.breaks).collect();
    assert!(
        watched.iter().all(|w| w.reconnects == 0),
        "a stream broke: {breaks:?}"
    );
    check_streams(&watched);

    eprintln!("failover: figures {figures:?}, refused {refused:?}");
    meson.stop();
    drop(cluster);
}

/// A rolling restart under load: each API, then each worker, is stopped
/// (SIGTERM: it drains) and started again, one at a time, while clients
/// create and delete VMs. An API leaves the load balancer's rotation before
/// it stops and rejoins once ready, as behind any load balancer; the action
/// streams open on it end, and their clients resume them on the other API
/// with `Last-Event-ID`, each state received once. Nothing
/// answers 5xx, nothing is left unanswered, and no action stalls: none
/// takes longer than the slowest before the restarts by more than a job
/// lease and the next look at the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rolling_restart_under_load_refuses_nothing() {
    let db = meson_db::testing::TestDatabase::new().await;
    // VMs boot for 2 s: actions run through each restart.
    let mut meson = Meson::start(&db.url, "rolling", Duration::from_secs(2)).await;
    let load = meson.load();
    let clients = start_clients(&load);
    tokio::time::sleep(Duration::from_secs(3)).await;

    let restarts = chrono::Utc::now();
    let mut streams = Vec::new();
    for i in 0..meson.apis.len() {
        // A stream on the API about to stop: it resumes on the other one.
        let ids: Vec<String> = {
            let ledger = load.ledger.lock().unwrap();
            ledger
                .created
                .values()
                .rev()
                .take(3)
                .map(|(_, a)| a.clone())
                .collect()
        };
        streams.push(tokio::spawn(watch(
            meson.http.clone(),
            meson.bases.clone(),
            i,
            meson.token.clone(),
            ids,
        )));
        tokio::time::sleep(Duration::from_millis(300)).await;
        load.out.lock().unwrap().insert(i);
        // A balancer's last request to it may still be running: it drains.
        let status = meson.apis[i].stop();
        assert!(status.success(), "api {i} stopped with {status}");
        meson.apis[i] = spawn_api(
            &meson.url,
            meson.targets.to_str().unwrap(),
            meson.ports[i],
            meson.autoscaler_ports[i],
        );
        meson.ready(i).await;
        load.out.lock().unwrap().remove(&i);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for i in 0..meson.workers.len() {
        let status = meson.workers[i].stop();
        assert!(status.success(), "worker {i} stopped with {status}");
        meson.workers[i] = spawn_worker(&meson.url, &meson.bases[0]);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    let (ledger, refused) = stop_clients(&load, clients).await;
    assert!(
        refused.is_empty(),
        "a rolling restart refused requests: {refused:?}"
    );
    let took = meson.check_world(&load, &ledger).await;
    let mut watched = Vec::new();
    for s in streams {
        watched.push(s.await.unwrap());
    }
    check_streams(&watched);
    let reconnects: usize = watched.iter().map(|w| w.reconnects).sum();
    assert!(reconnects > 0, "no stream was cut by its API's restart");
    // The slowest action before the restarts is the yardstick: none after
    // may take a lease longer (a job that waited for a dead worker).
    let before = took
        .iter()
        .filter(|(finished, _)| *finished < restarts)
        .map(|(_, d)| *d)
        .max()
        .expect("actions finished before the restarts");
    let longest = took.iter().map(|(_, d)| *d).max().unwrap_or_default();
    eprintln!(
        "rolling restart: {} requests, {} creates, {} deletes, {reconnects} streams \
         resumed; longest action {longest:?}, {before:?} before the restarts",
        ledger.answers.len(),
        ledger.created.len(),
        ledger.deleted.len()
    );
    // A job a stopping worker held is picked up once its lease is over, at
    // the other worker's next look at the queue (every second at most).
    let allowed = before + Duration::from_millis(LEASE_MS) + JOB_POLL + Duration::from_secs(1);
    assert!(
        longest < allowed,
        "an action stalled: {longest:?}, against {before:?} before the restarts"
    );
    meson.stop();
}
