//! API throughput and latency over loopback HTTP: `POST /v1/vms` and
//! `GET /v1/vms/{id}` of `mesond api` (bearer tokens verified, row-level
//! security, quotas, rate limits, audit) against the bare axum + sqlx
//! baseline doing the same insert and select.

use crate::env::{Env, free_addr};
use crate::load::{self, Load, Samples, closed_loop_samples, expect};
use crate::stats::{Table, ms, rate, ratio, verdict};
use anyhow::{Context, ensure};
use base64::Engine as _;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use meson_db::scope::Scope;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

pub const SSH_KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMLavtiPfhiG3t6TAxHosXoVh7Pc/lSD8L9SNPyAzp1d bench@meson";

/// Tenants the load is spread over (each client is one tenant's).
const TENANTS: usize = 8;

/// The canonical VM payload (docs/payloads.md), named `name`.
pub fn vm_body(name: &str) -> Value {
    json!({
        "specs": {
            "req": {
                "cpu": {"smtEnabled": false, "numberOfCores": 2, "numberOfThreads": 1,
                        "min_frequency": 1.0, "arch": ["X86_64"], "flags": []},
                "mem": {"capacity": 4096, "requireECC": 0},
                "pci": {"devices": {}},
                "misc": {"osDistribution": "Debian"}
            },
            "volumes": [{"name": "boot", "size": 30, "private": "True", "shareable": "False",
                         "bootable": "False", "readonly": "False"}],
            "authentication": {"ssh-key": SSH_KEY},
            "vm_name": name
        },
        "provider": "ionos"
    })
}

/// What a mesond needs to run against `db` with a known token issuer,
/// quotas and rate limits out of the way of a load test.
pub struct MesondSetup {
    pub secret: String,
    pub vars: Vec<(&'static str, String)>,
}

pub const ISSUER: &str = "meson-bench";

/// Every tenant's quotas (`MESON_DEFAULT_QUOTAS`): out of a load test's way.
const QUOTAS: &str = "vms=100000000,vcpus=1000000000,ram_mib=1000000000000,\
                      storage_gb=1000000000000,clusters=10000000,nodes=100000000,\
                      images_gb=1000000000000";

impl MesondSetup {
    pub fn new(targets_file: &std::path::Path) -> MesondSetup {
        let secret = format!("bench-secret-{}", uuid::Uuid::new_v4().simple());
        let raw: Vec<u8> = [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()]
            .iter()
            .flat_map(|u| *u.as_bytes())
            .collect();
        let key = base64::engine::general_purpose::STANDARD.encode(raw);
        MesondSetup {
            vars: vec![
                ("MESON_JWT_SECRET", secret.clone()),
                ("MESON_JWT_ISSUER", ISSUER.into()),
                ("MESON_SECRETS_KEY", key),
                ("MESON_TARGETS_FILE", targets_file.display().to_string()),
                ("MESON_DEFAULT_QUOTAS", QUOTAS.into()),
                ("MESON_RATE_LIMIT_PER_MIN", "100000000".into()),
                ("MESON_RATE_LIMIT_POLL_PER_MIN", "100000000".into()),
            ],
            secret,
        }
    }

    /// An editor's token for `tenant`.
    pub fn token(&self, tenant: &str) -> String {
        self.token_as(tenant, meson_api::Role::Editor)
    }

    /// A token of `role` for `tenant` (an admin's for the operators' routes).
    pub fn token_as(&self, tenant: &str, role: meson_api::Role) -> String {
        meson_api::Auth::hs256(self.secret.as_bytes(), ISSUER).issue(
            tenant,
            "bench",
            role,
            chrono::Duration::hours(6),
        )
    }
}

/// The simulator's hosts, written where mesond's `MESON_TARGETS_FILE` reads them.
pub fn write_targets(
    env: &Env,
    sim: &atomos_sim::Simulator,
    name: &str,
) -> anyhow::Result<std::path::PathBuf> {
    let path = env.work.join(name);
    std::fs::write(&path, serde_json::to_string(&sim.targets())?)?;
    Ok(path)
}

struct Baseline {
    child: Child,
    addr: SocketAddr,
    db: crate::env::Db,
}

async fn start_baseline(env: &Env) -> anyhow::Result<Baseline> {
    let db = env.fresh_db("api_baseline", false).await?;
    let addr = free_addr()?;
    let child = Command::new(std::env::current_exe()?)
        .args(["baseline-server", "--addr", &addr.to_string()])
        .args(["--database-url", &db.app_url, "--pool", "20"])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting the baseline server")?;
    let url = format!("http://{addr}/healthz");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !matches!(reqwest::get(&url).await, Ok(r) if r.status().is_success()) {
        ensure!(
            Instant::now() < deadline,
            "the baseline server did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(Baseline { child, addr, db })
}

/// A create-then-read run against one server.
struct Pair {
    create: Load,
    read: Load,
}

/// A create: the id of the VM it made.
type Create = Arc<dyn Fn(usize, u64) -> BoxFuture<'static, anyhow::Result<String>> + Send + Sync>;
/// A read of a VM, by id.
type Read = Arc<dyn Fn(usize, String) -> BoxFuture<'static, anyhow::Result<()>> + Send + Sync>;

/// One of the servers the section measures: its database, its create and
/// its read (of client `c`'s VMs).
struct System {
    name: &'static str,
    db: crate::env::Db,
    create: Create,
    read: Read,
}

/// Each measurement is cut into this many slices, the systems' slices
/// taking turns, so that a machine that slows down or speeds up during the
/// run (a neighbour's load on a shared host) weighs on every system alike
/// instead of on whichever ran then.
const SLICES: u32 = 5;

/// The warm-up of every slice but the first: the connections are open,
/// the statements prepared; only the clients' ramp is left out.
const SLICE_WARMUP: Duration = Duration::from_millis(500);

/// Names of a slice's creates start here (times the slice), so that no two
/// slices make the same name.
const SEQ_STRIDE: u64 = 1 << 32;

/// Brings the planner's statistics of `db` up to date, as autovacuum does
/// soon after a burst of inserts: reads are measured in that steady state,
/// not in the minute after a fresh table was filled (when a plan made for
/// an empty table may still be cached).
async fn analyze(db: &crate::env::Db) -> anyhow::Result<()> {
    let admin = db.admin_pool(1).await?;
    sqlx::query("analyze").execute(&admin).await?;
    admin.close().await;
    Ok(())
}

/// The systems in the order slice `slice` runs them: forwards, then
/// backwards, so none always runs right after another.
fn turns(slice: u32, systems: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..systems).collect();
    if slice % 2 == 1 {
        order.reverse();
    }
    order
}

/// Runs every system's create load (each create returns the id of the VM
/// it made), then, statistics brought up to date, every system's read load
/// on what each of its clients made; each load for `warmup + window`, in
/// [`SLICES`] slices taking turns with the other systems'.
async fn measure(
    systems: &[System],
    clients: usize,
    warmup: Duration,
    window: Duration,
) -> anyhow::Result<Vec<Pair>> {
    let slice_window = window / SLICES;
    let warmup_of = |slice: u32| if slice == 0 { warmup } else { SLICE_WARMUP };
    let mut ids: Vec<Vec<Vec<String>>> = vec![vec![Vec::new(); clients]; systems.len()];
    let mut creates: Vec<Samples> = systems.iter().map(|_| Samples::default()).collect();
    for slice in 0..SLICES {
        for s in turns(slice, systems.len()) {
            let system = &systems[s];
            let made: Arc<Mutex<Vec<Vec<String>>>> =
                Arc::new(Mutex::new(vec![Vec::new(); clients]));
            let (create, into) = (system.create.clone(), made.clone());
            let first = u64::from(slice) * SEQ_STRIDE;
            let samples =
                closed_loop_samples(clients, warmup_of(slice), slice_window, move |c, seq| {
                    let made = create(c, first + seq);
                    let into = into.clone();
                    async move {
                        let id = made.await?;
                        into.lock()
                            .map_err(|_| anyhow::anyhow!("poisoned"))?
                            .get_mut(c)
                            .context("client")?
                            .push(id);
                        Ok(())
                    }
                })
                .await
                .with_context(|| format!("{}: creating VMs", system.name))?;
            creates[s].add(samples);
            let made = std::mem::take(&mut *made.lock().map_err(|_| anyhow::anyhow!("poisoned"))?);
            for (mine, new) in ids[s].iter_mut().zip(made) {
                mine.extend(new);
            }
        }
    }
    for (system, ids) in systems.iter().zip(&ids) {
        ensure!(
            ids.iter().all(|v| !v.is_empty()),
            "{}: a client created nothing",
            system.name
        );
        analyze(&system.db).await?;
    }
    let ids: Vec<Arc<Vec<Vec<String>>>> = ids.into_iter().map(Arc::new).collect();
    let mut reads: Vec<Samples> = systems.iter().map(|_| Samples::default()).collect();
    for slice in 0..SLICES {
        for s in turns(slice, systems.len()) {
            let system = &systems[s];
            let (read, ids) = (system.read.clone(), ids[s].clone());
            let first = u64::from(slice) * SEQ_STRIDE;
            let samples =
                closed_loop_samples(clients, warmup_of(slice), slice_window, move |c, seq| {
                    let mine = &ids[c];
                    read(
                        c,
                        mine[((first + seq) as usize * 7919) % mine.len()].clone(),
                    )
                })
                .await
                .with_context(|| format!("{}: reading VMs", system.name))?;
            reads[s].add(samples);
        }
    }
    creates
        .into_iter()
        .zip(reads)
        .map(|(create, read)| {
            Ok(Pair {
                create: create.load()?,
                read: read.load()?,
            })
        })
        .collect()
}

/// Sends a create; the id of the VM it answered `201` with.
async fn created_over_http(req: reqwest::RequestBuilder) -> anyhow::Result<String> {
    let body = expect(req.send().await?, 201).await?;
    let v: Value = serde_json::from_slice(&body)?;
    Ok(v["vm"]["id"]
        .as_str()
        .context("no vm.id in the answer")?
        .to_owned())
}

/// Sends a read, which must answer `200`.
async fn read_over_http(req: reqwest::RequestBuilder) -> anyhow::Result<()> {
    expect(req.send().await?, 200).await?;
    Ok(())
}

pub async fn api(env: &Env, clients: usize, window: Duration) -> anyhow::Result<Table> {
    eprintln!(
        "meson-bench: API, {clients} clients, {} s per measurement",
        window.as_secs()
    );
    let warmup = Duration::from_secs(2);
    let sim = atomos_sim::start(atomos_sim::SimConfig::default()).await?;
    let targets = write_targets(env, &sim, "targets-api.json")?;
    let setup = MesondSetup::new(&targets);
    let db = env.fresh_db("api", true).await?;
    let addr = free_addr()?;
    let vars: Vec<(&str, String)> = setup.vars.iter().map(|(k, v)| (*k, v.clone())).collect();
    let mut mesond = env.mesond("api", "api", &db, Some(addr), &vars).await?;
    let http = load::http_client(clients)?;
    let tokens: Arc<Vec<String>> = Arc::new(
        (0..TENANTS)
            .map(|t| setup.token(&format!("bench-{t}")))
            .collect(),
    );

    let baseline = start_baseline(env).await?;
    let b = baseline.addr;
    let (h1, h2) = (http.clone(), http.clone());
    let bare = System {
        name: "baseline",
        db: baseline.db.clone(),
        create: Arc::new(move |c, seq| {
            let mut body = vm_body(&format!("vm-{c}-{seq}"));
            body["tenant"] = json!(format!("bench-{}", c % TENANTS));
            created_over_http(h1.post(format!("http://{b}/bench/vms")).json(&body)).boxed()
        }),
        read: Arc::new(move |_, id| {
            read_over_http(h2.get(format!("http://{b}/bench/vms/{id}"))).boxed()
        }),
    };

    let (h1, h2) = (http.clone(), http.clone());
    let (t1, t2) = (tokens.clone(), tokens.clone());
    let over_http = System {
        name: "meson",
        db: db.clone(),
        create: Arc::new(move |c, seq| {
            created_over_http(
                h1.post(format!("http://{addr}/v1/vms"))
                    .bearer_auth(&t1[c % TENANTS])
                    .json(&vm_body(&format!("vm-{c}-{seq}"))),
            )
            .boxed()
        }),
        read: Arc::new(move |c, id| {
            read_over_http(
                h2.get(format!("http://{addr}/v1/vms/{id}"))
                    .bearer_auth(&t2[c % TENANTS]),
            )
            .boxed()
        }),
    };
    let quotas = meson_core::quota::Resources::parse_list(
        meson_core::quota::Resources::DEFAULT_QUOTAS,
        QUOTAS,
    )
    .map_err(|e| anyhow::anyhow!("the bench's quotas: {e}"))?;
    let in_process = without_http(env, &sim, quotas)
        .await
        .context("meson without HTTP")?;
    let measured = measure(&[bare, over_http, in_process], clients, warmup, window).await?;
    let [base, meson, inner]: [Pair; 3] = measured
        .try_into()
        .map_err(|_| anyhow::anyhow!("three systems, three results"))?;
    drop(baseline.child);
    mesond.alive()?;
    let rss = env.stop(mesond).await?;
    sim.shutdown().await;

    let mut t = Table::new(
        format!(
            "API over loopback HTTP: {clients} concurrent clients, {} s each",
            window.as_secs()
        ),
        &[
            "endpoint",
            "baseline req/s",
            "meson req/s",
            "meson / baseline",
            "baseline p50 / p99 ms",
            "meson p50 / p99 ms",
            "goal",
        ],
    );
    // A row with its goal (the least share of the baseline), or without.
    let mut row = |name: &str, b: &Load, m: &Load, goal: Option<f64>| {
        t.row(vec![
            name.to_owned(),
            rate(b.per_sec),
            rate(m.per_sec),
            ratio(m.per_sec, b.per_sec),
            format!("{} / {}", ms(b.latency.p50), ms(b.latency.p99)),
            format!("{} / {}", ms(m.latency.p50), ms(m.latency.p99)),
            match goal {
                Some(goal) => format!(
                    "≥ {:.0}%: {}",
                    goal * 100.0,
                    verdict(m.per_sec >= goal * b.per_sec)
                ),
                None => "none".to_owned(),
            },
        ]);
    };
    row("`POST /v1/vms`", &base.create, &meson.create, Some(0.5));
    row("`GET /v1/vms/{id}`", &base.read, &meson.read, Some(0.6));
    row("the create without HTTP", &base.create, &inner.create, None);
    row("the read without HTTP", &base.read, &inner.read, None);
    t.note(format!(
        "Baseline: a bare axum + sqlx app in its own process (one insert / one select by \
         primary key, the same JSON body, a pool of 20 like mesond's). meson: `mesond api` \
         with bearer tokens checked, row-level security, quotas, rate limits and the audit \
         log on; {TENANTS} tenants. A create takes two round trips (the hosts, then one \
         statement that checks the tenant's quotas and writes the VM, its volumes, its \
         action, its job and the audit entry in one commit); a read takes one (the VM with \
         its volumes and NICs); each statement carries its tenant scope. Each measurement \
         is cut into {SLICES} slices, the three systems' slices taking turns, so that a \
         machine slowing down or speeding up weighs on all three alike. Reads start once \
         the database's statistics are up to date (`ANALYZE` after the creates, as \
         autovacuum soon does). mesond's peak \
         RSS: {:.0} MiB. Without HTTP: `App::vm_create` and `App::vm_get`, what the \
         REST handlers run once a call is admitted (in the tenant's scope; the create with \
         its audit entry, the read's view serialized), called by {clients} tasks of the \
         bench on a pool of 20, on a fresh database: no transport and no token, which \
         bounds what any front end can reach.",
        rss as f64 / 1048576.0
    ));
    Ok(t)
}

/// meson's create and read without their HTTP front, on a fresh database
/// holding the simulator's hosts: [`meson_api::App::vm_create`] and
/// [`meson_api::App::vm_get`] (what `POST /v1/vms` and `GET /v1/vms/{id}`
/// run once a call is admitted) in each tenant's scope, the create with an
/// audit entry offered and the read's view serialized, called by the
/// bench's own tasks on a scoped pool of 20 (mesond's default).
async fn without_http(
    env: &Env,
    sim: &atomos_sim::Simulator,
    quotas: meson_core::quota::Resources,
) -> anyhow::Result<System> {
    let db = env.fresh_db("api_inner", true).await?;
    let setup = db.pool(2).await?;
    mesond::server::register_targets(&setup, &sim.targets()).await?;
    setup.close().await;
    let pool = meson_db::scope::connect_scoped(&db.app_url, 20)?;
    let app = meson_api::App {
        quotas,
        ..meson_api::App::new(pool)
    };
    let principals: Arc<Vec<meson_api::Principal>> = Arc::new(
        (0..TENANTS)
            .map(|t| meson_api::Principal {
                tenant: meson_core::TenantId(format!("bench-{t}")),
                subject: "bench".to_owned(),
                role: meson_api::Role::Editor,
                email: None,
            })
            .collect(),
    );
    let (a, ps) = (app.clone(), principals.clone());
    Ok(System {
        name: "meson without HTTP",
        db,
        create: Arc::new(move |c, seq| {
            let (app, principals) = (a.clone(), ps.clone());
            async move {
                let p = &principals[c % TENANTS];
                let call = meson_api::gate::CallInfo {
                    method: "POST".to_owned(),
                    path: "/v1/vms".to_owned(),
                    resource: None,
                    correlation_id: uuid::Uuid::new_v4().to_string(),
                    organization: None,
                };
                let entry = meson_core::audit::AuditEntry {
                    status: 201,
                    ..meson_api::gate::Audit::start(p, "vm_create", call).entry
                };
                let body = vm_body(&format!("vm-{c}-{seq}"));
                let create = app.vm_create(p, &body);
                let scoped = meson_db::scope::run(Scope::Tenant(p.tenant.clone()), create);
                let (vm, written) = meson_api::app::offered(entry, scoped).await;
                let vm = vm.map_err(|e| anyhow::anyhow!("creating a VM: {e}"))?;
                ensure!(written, "the create did not write its audit entry");
                Ok(vm.vm.id.to_string())
            }
            .boxed()
        }),
        read: Arc::new(move |c, id| {
            let (app, principals) = (app.clone(), principals.clone());
            async move {
                let p = &principals[c % TENANTS];
                let id = meson_core::VmId(id.parse()?);
                let read = app.vm_get(p, id);
                let (vm, parts) = meson_db::scope::run(Scope::Tenant(p.tenant.clone()), read)
                    .await
                    .map_err(|e| anyhow::anyhow!("reading a VM: {e}"))?;
                serde_json::to_vec(&meson_api::views::vm(&vm, &parts))?;
                Ok(())
            }
            .boxed()
        }),
    })
}
