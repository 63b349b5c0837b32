//! A database outage, over real sockets: meson reaches PostgreSQL through a
//! TCP proxy the test cuts (connections refused, open ones broken) and
//! restores on the same port. Meanwhile requests answer `503 unavailable`
//! with `Retry-After` (not a slow `500`), `/readyz` says 503, the SDK retries
//! through the outage, and the audit entries of the requests refused then
//! are written once the database is back.
//!
//! Waits are bounded far beyond what they check (the pool's acquire timeout
//! here is 1 s; before this, each request waited 10 s and answered 500).

#[path = "../../../tests/e2e/seeds.rs"]
#[allow(dead_code)]
mod seeds;

use meson_api::{Auth, Role};
use meson_client::{Client, RetryPolicy};
use meson_db::testing::TestDatabase;
use meson_types::network::NetworkCreateRequest;
use mesond::server::{ApiServer, ApiSettings, api_database};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;

/// Much longer than an answer during the outage may take.
const GENEROUS: Duration = Duration::from_secs(8);

/// Forwards `addr` to `upstream` while up; while down, the port refuses
/// connections and the forwarded ones are broken. While muted, what the
/// server sends is dropped (answers lost on the way back).
struct Proxy {
    addr: SocketAddr,
    up: watch::Sender<bool>,
    mute: watch::Sender<bool>,
}

fn listen(addr: SocketAddr) -> TcpListener {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_reuseaddr(true).unwrap();
    socket.bind(addr).unwrap();
    socket.listen(64).unwrap()
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Proxy {
        let first = listen("127.0.0.1:0".parse().unwrap());
        let addr = first.local_addr().unwrap();
        let (up, rx) = watch::channel(true);
        let (mute, muted) = watch::channel(false);
        tokio::spawn(async move {
            let mut listener = Some(first);
            let mut rx = rx;
            loop {
                let Some(l) = listener.take() else {
                    // Down: nothing listens until it is up again.
                    if rx.wait_for(|u| *u).await.is_err() {
                        return;
                    }
                    listener = Some(listen(addr));
                    continue;
                };
                let mut watching = rx.clone();
                tokio::select! {
                    accepted = l.accept() => {
                        listener = Some(l);
                        let Ok((client, _)) = accepted else { continue };
                        let mut down = rx.clone();
                        let muted = muted.clone();
                        tokio::spawn(async move {
                            use tokio::io::{AsyncReadExt, AsyncWriteExt};
                            let Ok(server) = TcpStream::connect(upstream).await else { return };
                            let (mut from_client, mut to_client) = client.into_split();
                            let (mut from_server, mut to_server) = server.into_split();
                            let back = async {
                                let mut buf = vec![0u8; 16 * 1024];
                                loop {
                                    let n = from_server.read(&mut buf).await?;
                                    if n == 0 {
                                        return Ok::<(), std::io::Error>(());
                                    }
                                    if !*muted.borrow() {
                                        to_client.write_all(&buf[..n]).await?;
                                    }
                                }
                            };
                            tokio::select! {
                                _ = tokio::io::copy(&mut from_client, &mut to_server) => {}
                                _ = back => {}
                                _ = down.wait_for(|u| !*u) => {}
                            }
                        });
                    }
                    changed = watching.wait_for(|u| !*u) => {
                        if changed.is_err() {
                            return;
                        }
                        drop(l);
                    }
                }
            }
        });
        Proxy { addr, up, mute }
    }

    fn set(&self, up: bool) {
        self.up.send_replace(up);
    }

    fn mute(&self, mute: bool) {
        self.mute.send_replace(mute);
    }
}

/// `postgres://user:pw@host:port/db` with `host:port` replaced.
fn via(url: &str, addr: SocketAddr) -> (String, SocketAddr) {
    let at = url.rfind('@').unwrap() + 1;
    let slash = at + url[at..].find('/').unwrap();
    let upstream: SocketAddr = url[at..slash]
        .replace("localhost", "127.0.0.1")
        .parse()
        .unwrap();
    (format!("{}{addr}{}", &url[..at], &url[slash..]), upstream)
}

/// meson's API on a fresh database reached through a [`Proxy`], with a
/// pool of `pool` connections, each request waiting at most a second for
/// one; `settings` changes the API's settings.
struct Rig {
    db: TestDatabase,
    proxy: Proxy,
    api: ApiServer,
    base: String,
    token: String,
    http: reqwest::Client,
}

/// Settings that hold a request through an outage of up to 6 s.
fn held(s: ApiSettings) -> ApiSettings {
    ApiSettings {
        db_hold: Duration::from_secs(6),
        ..s
    }
}

impl Rig {
    /// A connection straight to the database (every tenant's rows) in a
    /// transaction that has run `sql`: what it locks stays locked until
    /// the connection runs `rollback`.
    async fn locking(&self, sql: &str) -> sqlx::PgConnection {
        use sqlx::Connection;
        let mut c = sqlx::PgConnection::connect(&self.db.url).await.unwrap();
        sqlx::raw_sql("set meson.tenant = '*'")
            .execute(&mut c)
            .await
            .unwrap();
        sqlx::raw_sql(&format!("begin; {sql}"))
            .execute(&mut c)
            .await
            .unwrap();
        c
    }

    /// Waits (bounded) until a statement like `pattern` (SQL `like`)
    /// waits on a lock: it was sent whole, and runs once the lock is gone.
    async fn until_waiting(&self, pattern: &str) {
        use sqlx::Connection;
        // Outside any transaction: one sees a snapshot of the activity.
        let mut conn = sqlx::PgConnection::connect(&self.db.url).await.unwrap();
        let waiting = format!(
            "exists (select from pg_stat_activity where wait_event_type = 'Lock' \
             and query like '{pattern}')"
        );
        let deadline = Instant::now() + GENEROUS;
        while !holds(&mut conn, &waiting).await {
            assert!(
                Instant::now() < deadline,
                "no statement like {pattern} waits"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn start(pool: u32, settings: impl FnOnce(ApiSettings) -> ApiSettings) -> Rig {
        let db = TestDatabase::new().await;
        let (_, upstream) = via(&db.url, "127.0.0.1:1".parse().unwrap());
        let proxy = Proxy::start(upstream).await;
        let (url, _) = via(&db.url, proxy.addr);
        let auth = Auth::hs256(b"meson-outage-test-secret-0123456789abcdef", "meson-test");
        let token = auth.issue("acme", "olga", Role::Editor, chrono::Duration::hours(1));
        let pool = api_database(&url, pool, Duration::from_secs(1))
            .await
            .unwrap();
        let api = ApiServer::start(
            "127.0.0.1:0".parse().unwrap(),
            pool,
            settings(ApiSettings::new(auth)),
        )
        .await
        .unwrap();
        let base = format!("http://{}", api.addr);
        Rig {
            db,
            proxy,
            api,
            base,
            token,
            http: reqwest::Client::new(),
        }
    }
}

async fn post(http: &reqwest::Client, base: &str, token: &str, name: &str) -> reqwest::Response {
    http.post(format!("{base}/v1/networks"))
        .bearer_auth(token)
        .json(&json!({"name": name, "cidr": "10.7.0.0/24"}))
        .send()
        .await
        .unwrap()
}

/// A database away for less than the hold (a failover, a switchover): a
/// request that meets it away before touching it waits, and runs once it is
/// back: one answer, `201`, and the network made once.
#[tokio::test]
async fn a_request_held_through_a_short_outage_runs_once_the_database_is_back() {
    let Rig {
        db: _db,
        proxy,
        api,
        base,
        token,
        http,
    } = Rig::start(4, held).await;
    let r = post(&http, &base, &token, "before").await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());

    proxy.set(false);
    let (h, b, t) = (http.clone(), base.clone(), token.clone());
    let held = tokio::spawn(async move { post(&h, &b, &t, "held").await });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!held.is_finished(), "answered while the database was away");
    proxy.set(true);
    let r = tokio::time::timeout(GENEROUS, held)
        .await
        .expect("an answer within the hold")
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());

    let listed: Value = http
        .get(format!("{base}/v1/networks"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = listed["networks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names.iter().filter(|n| **n == "held").count(),
        1,
        "{names:?}"
    );
    api.shutdown().await;
}

#[tokio::test]
async fn a_database_outage_answers_503_fast_the_sdk_retries_through_it_and_no_audit_entry_is_lost()
{
    let Rig {
        db,
        proxy,
        api,
        base,
        token,
        http,
    } = Rig::start(4, |s| s).await;

    let r = post(&http, &base, &token, "before").await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());

    proxy.set(false);
    // Each answers 503 unavailable with Retry-After, quickly: the first
    // after the pool's acquire timeout, the next at once (the breaker).
    for name in ["during-1", "during-2"] {
        let started = Instant::now();
        let r = post(&http, &base, &token, name).await;
        let took = started.elapsed();
        assert_eq!(r.status(), 503, "{name}");
        let retry_after: u64 = r.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=10).contains(&retry_after), "{retry_after}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unavailable", "{body}");
        assert_eq!(body["error"]["details"]["retry_after"], retry_after);
        assert!(took < GENEROUS, "{name} took {took:?}");
    }
    let started = Instant::now();
    let r = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 503);
    assert!(started.elapsed() < GENEROUS, "{:?}", started.elapsed());
    let retry_after: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=10).contains(&retry_after), "{retry_after}");

    // The SDK, called while the database is down, retries until it is back.
    let client = Client::new(&base, &token).unwrap().with_retry(RetryPolicy {
        max_retries: 30,
        base: Duration::from_millis(200),
        cap: Duration::from_secs(2),
    });
    let sdk = tokio::spawn(async move {
        client
            .network_create(&NetworkCreateRequest {
                name: "after".into(),
                cidr: "10.8.0.0/24".into(),
                ..Default::default()
            })
            .await
    });
    // It has been refused at least once before the database comes back:
    // its refusal is audited like the others (three so far).
    let mut refused = 0;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        refused = api.audit_backlog_len();
        if refused >= 3 {
            break;
        }
    }
    assert!(refused >= 3, "{refused} refusals kept");
    proxy.set(true);
    let network = tokio::time::timeout(Duration::from_secs(60), sdk)
        .await
        .expect("the SDK gave up waiting")
        .unwrap()
        .expect("the SDK's create went through once the database was back");
    assert_eq!(network.name, "after");

    // Ready again, and every refused request's audit entry written.
    let mut ready = false;
    for _ in 0..200 {
        if http
            .get(format!("{base}/readyz"))
            .send()
            .await
            .unwrap()
            .status()
            == 200
        {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ready, "/readyz never said ready again");
    let mut rows: Vec<(u16, String)> = Vec::new();
    for _ in 0..200 {
        let filter = meson_core::audit::AuditFilter {
            tenant: Some("acme".into()),
            ..Default::default()
        };
        let (mut entries, _) = meson_db::audit::list(&db.pool, &filter, 100, 0)
            .await
            .unwrap();
        // When each request came, whenever its entry was written.
        entries.sort_by_key(|e| e.at);
        rows = entries
            .into_iter()
            .map(|e| (e.status, e.operation))
            .collect();
        if rows.iter().filter(|(s, _)| *s == 503).count() >= 3
            && rows.iter().filter(|(s, _)| *s == 201).count() == 2
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let statuses: Vec<u16> = rows.iter().map(|(s, _)| *s).collect();
    assert_eq!(statuses.first(), Some(&201), "{rows:?}");
    assert_eq!(statuses.last(), Some(&201), "{rows:?}");
    assert!(
        statuses.iter().filter(|s| **s == 503).count() >= 3,
        "{rows:?}"
    );
    assert!(
        rows.iter().all(|(_, op)| op == "network_create"),
        "{rows:?}"
    );
    api.shutdown().await;
}

#[tokio::test]
async fn once_the_database_is_back_no_stale_connection_answers_for_it() {
    // A restart of PostgreSQL while the API is idle: every pooled
    // connection is broken, and the next requests must not keep meeting
    // them (they did, one after another: 503 for seconds after the
    // database was back).
    let Rig {
        db: _db,
        proxy,
        api,
        base,
        token,
        http,
    } = Rig::start(8, |s| s).await;
    let r = http
        .post(format!("{base}/v1/vms"))
        .bearer_auth(&token)
        .json(&{
            // No AtomOS host is registered here: placed by the workers later.
            let mut vm = seeds::seed_vm();
            vm.as_object_mut().unwrap().remove("provider");
            vm
        })
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let vm: Value = r.json().await.unwrap();
    let vm = format!("{base}/v1/vms/{}", vm["vm"]["id"].as_str().unwrap());
    // Fill both pools with connections: concurrent reads of the VM (its
    // read uses the second pool) and of the lists.
    let warm = (0..24).map(|i| {
        let (http, token) = (http.clone(), token.clone());
        let url = if i % 2 == 0 {
            vm.clone()
        } else {
            format!("{base}/v1/networks")
        };
        async move {
            http.get(url)
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .status()
        }
    });
    for status in futures::future::join_all(warm).await {
        assert_eq!(status, 200);
    }

    // PostgreSQL restarts: every connection breaks, and it is back.
    proxy.set(false);
    tokio::time::sleep(Duration::from_millis(200)).await;
    proxy.set(true);

    // At most the first request meets a broken connection; before it
    // answers, it tests the pools and drops their broken connections, and
    // the next ones answer.
    let mut statuses = Vec::new();
    for i in 0..20 {
        let url = if i % 2 == 0 {
            vm.clone()
        } else {
            format!("{base}/v1/networks")
        };
        let r = http.get(url).bearer_auth(&token).send().await.unwrap();
        if r.status() == 503 {
            assert!(r.headers().contains_key("retry-after"));
        }
        statuses.push(r.status().as_u16());
    }
    let refused = statuses.iter().filter(|s| **s == 503).count();
    assert!(refused <= 1, "{statuses:?}");
    assert!(statuses.iter().skip(1).all(|s| *s == 200), "{statuses:?}");
    api.shutdown().await;
}

/// A request may not outlive its idempotency key's claim: a request timeout
/// past a third of the claim's lease is refused at start, naming the
/// variable.
#[test]
fn a_request_timeout_past_the_idempotency_lease_is_refused() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mesond"))
        .arg("api")
        .env_clear()
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .env(
            "MESON_JWT_SECRET",
            "meson-outage-test-secret-0123456789abcdef",
        )
        .env("MESON_REQUEST_TIMEOUT_S", "101")
        .output()
        .expect("mesond runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("MESON_REQUEST_TIMEOUT_S must be at most 100"),
        "{stderr}"
    );
}

/// A read whose statement the database broke off (a primary shutting
/// down under it) changed nothing: it is run again once the database is
/// back, within the hold, and answers as if nothing happened.
#[tokio::test]
async fn a_read_broken_off_mid_statement_runs_again_once_the_database_is_back() {
    let rig = Rig::start(4, held).await;
    let r = post(&rig.http, &rig.base, &rig.token, "kept").await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());

    // The read's statement waits on a lock, its connection live, when
    // the connection breaks.
    let mut locker = rig
        .locking("lock table networks in access exclusive mode")
        .await;
    let (h, b, t) = (rig.http.clone(), rig.base.clone(), rig.token.clone());
    let read = tokio::spawn(async move {
        h.get(format!("{b}/v1/networks"))
            .bearer_auth(&t)
            .send()
            .await
            .unwrap()
    });
    rig.until_waiting("%networks%").await;
    assert!(!read.is_finished(), "the read waits on the lock");
    rig.proxy.set(false);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    sqlx::raw_sql("rollback")
        .execute(&mut locker)
        .await
        .unwrap();
    assert!(!read.is_finished(), "answered while the database was away");
    rig.proxy.set(true);
    let r = tokio::time::timeout(GENEROUS, read)
        .await
        .expect("an answer within the hold")
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let listed: Value = r.json().await.unwrap();
    assert_eq!(listed["networks"][0]["name"], "kept", "{listed}");
    rig.api.shutdown().await;
}

/// Whether `condition` (SQL) holds in the database `conn` is on.
async fn holds(conn: &mut sqlx::PgConnection, condition: &str) -> bool {
    let check = format!("do $$ begin if not ({condition}) then raise 'no'; end if; end $$");
    sqlx::raw_sql(&check).execute(conn).await.is_ok()
}

/// A VM create whose statement committed while its answer was lost (the
/// connection broke on the way back, as a primary shutting down may do):
/// run again once the database is back, the request finds the VM its
/// first attempt made, under the same ids, and answers `201` with it. One
/// VM, one answer, and the key replays that answer.
#[tokio::test]
async fn a_create_whose_answer_was_lost_answers_with_what_it_made() {
    let rig = Rig::start(4, held).await;
    let mut vm = seeds::seed_vm();
    vm.as_object_mut().unwrap().remove("provider");
    vm["specs"]["vm_name"] = json!("lost-answer");
    let create = |key: &'static str| {
        let (h, b, t, vm) = (
            rig.http.clone(),
            rig.base.clone(),
            rig.token.clone(),
            vm.clone(),
        );
        async move {
            h.post(format!("{b}/v1/vms"))
                .bearer_auth(&t)
                .header("idempotency-key", key)
                .json(&vm)
                .send()
                .await
                .unwrap()
        }
    };

    // A first VM: the tenant's usage row exists, and the statement is
    // one the server has parsed.
    let mut warm = vm.clone();
    warm["specs"]["vm_name"] = json!("warm");
    let r = rig
        .http
        .post(format!("{}/v1/vms", rig.base))
        .bearer_auth(&rig.token)
        .json(&warm)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());

    // The create's statement, sent whole, waits on the tenant's usage row;
    // its answer will be lost.
    let mut locker = rig
        .locking("select from tenant_usage where tenant_id = 'acme' for update")
        .await;
    let first = tokio::spawn(create("k-1"));
    rig.until_waiting("with scope as materialized%").await;
    assert!(!first.is_finished(), "the create waits on the row");
    rig.proxy.mute(true);
    sqlx::raw_sql("rollback")
        .execute(&mut locker)
        .await
        .unwrap();
    // The statement commits; its answer goes nowhere. Then the database
    // goes away, breaking the connection.
    let deadline = Instant::now() + GENEROUS;
    while !holds(
        &mut locker,
        "(select count(*) from vms where name = 'lost-answer') = 1",
    )
    .await
    {
        assert!(Instant::now() < deadline, "the create committed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    rig.proxy.set(false);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    rig.proxy.mute(false);
    rig.proxy.set(true);
    let r = tokio::time::timeout(GENEROUS, first)
        .await
        .expect("an answer within the hold")
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let answered: Value = r.json().await.unwrap();
    let id = answered["vm"]["id"].as_str().unwrap().to_owned();
    assert_eq!(answered["vm"]["name"], "lost-answer", "{answered}");
    let once =
        format!("(select array_agg(id::text) from vms where name = 'lost-answer') = array['{id}']");
    assert!(
        holds(&mut locker, &once).await,
        "made once, and answered with"
    );
    // The key was kept through the attempts, and now replays the answer.
    let again = create("k-1").await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["vm"]["id"], answered["vm"]["id"]);
    rig.api.shutdown().await;
}
