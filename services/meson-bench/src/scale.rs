//! Scale: reads of `mesond api` with a small database and again with
//! 10,000 clusters and 100,000 VMs in it (same process, same tenants, same
//! queries), batch action polls, and 1,000 concurrent SSE watchers.

use crate::api::{MesondSetup, vm_body, write_targets};
use crate::env::{Env, free_addr};
use crate::load::{self, Load, closed_loop, expect};
use crate::stats::{Latency, Table, ms, rate, ratio, verdict};
use anyhow::{Context, bail, ensure};
use futures::StreamExt as _;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Tenants the resources are spread over; every read is one tenant's.
const TENANTS: usize = 10;

/// Concurrent clients of the seeding and of each read measurement.
const SEED_CLIENTS: usize = 32;
const READ_CLIENTS: usize = 8;

/// Progress steps every watched action goes through in the SSE measurement
/// with many watchers (twice as many with one: progress stops at 100).
const SSE_ROUNDS: i16 = 20;

/// The sizes of the two databases: per tenant, VMs and clusters.
#[derive(Clone, Copy)]
struct Size {
    vms: usize,
    clusters: usize,
}

/// Each tenant's share of the small database: more than a page of each.
const SMALL: Size = Size {
    vms: 100,
    clusters: 30,
};

fn cluster_body(name: &str) -> Value {
    json!({
        "req": {
            "name": name,
            "metadata": {},
            "nodepool": [{
                "autoscale": false,
                "desired_nodes": 1, "max_nodes": 1, "min_nodes": 1,
                "specs": {"cpu": 2, "ram": 4096, "storage": 40, "gpu": 0},
                "billing": "HOURLY", "pool_name": "workers"
            }],
            "nodes_subnet": {"dhcp": "True", "subnet_netmask": "10.20.0.0/24",
                             "start_address": "10.20.0.10", "last_address": "10.20.0.250"},
            "update_policy": "NEVER_UPDATE",
            "kubernetes_version": "1.29.2"
        },
        "provider": "ionos"
    })
}

/// A count with its thousands separated.
fn n(count: usize) -> String {
    rate(count as f64)
}

/// What the seeding created that the reads use: per tenant, a VM id, a
/// cluster id, VM creates' action ids, and a cursor to the last page of
/// VMs (at the size last seeded).
#[derive(Default, Clone)]
struct Seeded {
    vm: Vec<String>,
    cluster: Vec<String>,
    actions: Vec<Vec<String>>,
    last_page: Vec<String>,
}

/// The page size of the VM lists the bench reads (the API's default).
const PER_PAGE: usize = 25;

/// Every read's p99 at the large size: at most this.
const P99_GOAL: Duration = Duration::from_millis(20);

struct Api {
    http: reqwest::Client,
    addr: SocketAddr,
    tokens: Vec<String>,
}

impl Api {
    fn get(&self, tenant: usize, path: &str) -> reqwest::RequestBuilder {
        self.http
            .get(format!("http://{}{path}", self.addr))
            .bearer_auth(&self.tokens[tenant])
    }

    /// Creates VMs and clusters in every tenant until each holds `to`,
    /// from `from`; `SEED_CLIENTS` requests in flight.
    async fn seed(
        self: &Arc<Self>,
        from: Size,
        to: Size,
        seeded: &mut Seeded,
    ) -> anyhow::Result<()> {
        let mut work = Vec::new();
        for t in 0..TENANTS {
            // Interleaved, so both tables grow together.
            let (vms, clusters) = (from.vms..to.vms, from.clusters..to.clusters);
            let per = vms.len().div_ceil(clusters.len().max(1)).max(1);
            let mut c = clusters.clone();
            for (k, v) in vms.enumerate() {
                work.push((t, false, v));
                if k % per == 0
                    && let Some(c) = c.next()
                {
                    work.push((t, true, c));
                }
            }
            work.extend(c.map(|c| (t, true, c)));
        }
        // Spread the tenants over time too.
        work.sort_by_key(|&(t, cluster, i)| (i, cluster, t));
        let total = work.len();
        let started = Instant::now();
        let mut results = futures::stream::iter(work.into_iter().map(|(t, cluster, i)| {
            let api = self.clone();
            async move {
                let (path, body) = if cluster {
                    ("/v1/clusters", cluster_body(&format!("c-{i}")))
                } else {
                    ("/v1/vms", vm_body(&format!("vm-{i}")))
                };
                let r = api
                    .http
                    .post(format!("http://{}{path}", api.addr))
                    .bearer_auth(&api.tokens[t])
                    .json(&body)
                    .send()
                    .await?;
                let v: Value = serde_json::from_slice(&expect(r, 201).await?)?;
                let key = if cluster { "cluster" } else { "vm" };
                let id = v[key]["id"]
                    .as_str()
                    .context("no id in the answer")?
                    .to_owned();
                let action = v["action"]["id"]
                    .as_str()
                    .context("no action in the answer")?
                    .to_owned();
                Ok::<_, anyhow::Error>((t, cluster, id, action))
            }
        }))
        .buffer_unordered(SEED_CLIENTS);
        let mut done = 0usize;
        while let Some(r) = results.next().await {
            let (t, cluster, id, action) = r.context("seeding")?;
            if cluster {
                seeded.cluster[t] = id;
            } else {
                seeded.vm[t] = id;
                seeded.actions[t].push(action);
            }
            done += 1;
            if done.is_multiple_of(20_000) {
                eprintln!(
                    "meson-bench: scale: {done} of {total} created ({:.0}/s)",
                    done as f64 / started.elapsed().as_secs_f64()
                );
            }
        }
        Ok(())
    }
}

/// A read's path for a tenant, at a size.
type PathFn = Box<dyn Fn(&Seeded, usize, Size) -> String + Send + Sync>;

/// A read measured at both sizes.
struct Read {
    name: &'static str,
    path: PathFn,
    /// At most this large / small p50 ratio (`None`: measured for
    /// information, without a goal).
    flat: Option<f64>,
}

fn read(
    name: &'static str,
    flat: Option<f64>,
    path: impl Fn(&Seeded, usize, Size) -> String + Send + Sync + 'static,
) -> Read {
    Read {
        name,
        path: Box::new(path),
        flat,
    }
}

fn reads() -> Vec<Read> {
    vec![
        read("`GET /v1/vms` (first page of 25)", Some(2.0), |_, _, _| {
            "/v1/vms".into()
        }),
        // A page as deep as the last costs what the first does: the
        // cursor names where it starts.
        read("`GET /v1/vms?cursor=<last>`", Some(1.2), |s, t, _| {
            format!("/v1/vms?cursor={}", s.last_page[t])
        }),
        // The same page by number: the rows before it are counted off.
        read(
            "`GET /v1/vms?page=<last>` (offset, for information)",
            None,
            |_, _, size| format!("/v1/vms?page={}", size.vms.div_ceil(PER_PAGE)),
        ),
        read("`GET /v1/vms?name=…`", Some(2.0), |_, _, size| {
            format!("/v1/vms?name=vm-{}", size.vms / 2)
        }),
        read("`GET /v1/vms/{id}`", Some(2.0), |s, t, _| {
            format!("/v1/vms/{}", s.vm[t])
        }),
        read("`GET /v1/clusters` (first page)", Some(2.0), |_, _, _| {
            "/v1/clusters".into()
        }),
        read("`GET /v1/clusters/{id}`", Some(2.0), |s, t, _| {
            format!("/v1/clusters/{}", s.cluster[t])
        }),
        read("`GET /v1/actions?id=…` (25 ids)", Some(2.0), |s, t, _| {
            let a = &s.actions[t];
            let ids: Vec<String> = a[a.len().saturating_sub(25)..]
                .iter()
                .map(|id| format!("id={id}"))
                .collect();
            format!("/v1/actions?{}", ids.join("&"))
        }),
    ]
}

impl Api {
    /// Each tenant's cursor to its last page of VMs: the `next_cursor` of
    /// the page before it.
    async fn last_page_cursors(&self, size: Size) -> anyhow::Result<Vec<String>> {
        let before_last = size.vms.div_ceil(PER_PAGE) - 1;
        let mut out = Vec::with_capacity(TENANTS);
        for t in 0..TENANTS {
            let r = self
                .get(
                    t,
                    &format!("/v1/vms?page={before_last}&per_page={PER_PAGE}"),
                )
                .send()
                .await?;
            let v: Value = serde_json::from_slice(&expect(r, 200).await?)?;
            let cursor = v["meta"]["pagination"]["next_cursor"]
                .as_str()
                .context("no next_cursor before the last page")?;
            out.push(cursor.to_owned());
        }
        Ok(out)
    }
}

async fn measure_reads(
    api: &Arc<Api>,
    seeded: &mut Seeded,
    size: Size,
    window: Duration,
) -> anyhow::Result<Vec<Load>> {
    seeded.last_page = api.last_page_cursors(size).await?;
    let seeded = &*seeded;
    let mut out = Vec::new();
    for Read { name, path, .. } in reads() {
        let paths: Arc<Vec<String>> =
            Arc::new((0..TENANTS).map(|t| path(seeded, t, size)).collect());
        let api2 = api.clone();
        let load = closed_loop(
            READ_CLIENTS,
            Duration::from_secs(1),
            window,
            move |c, seq| {
                let t = (c + seq as usize) % TENANTS;
                let req = api2.get(t, &paths[t]);
                async move {
                    let body = expect(req.send().await?, 200).await?;
                    ensure!(body.len() > 2, "an empty answer");
                    Ok(())
                }
            },
        )
        .await
        .with_context(|| name.to_owned())?;
        out.push(load);
    }
    Ok(out)
}

pub async fn scale(
    env: &Env,
    vms: usize,
    clusters: usize,
    watchers: usize,
    window: Duration,
) -> anyhow::Result<Vec<Table>> {
    let big = Size {
        vms: vms / TENANTS,
        clusters: clusters / TENANTS,
    };
    ensure!(
        big.vms >= SMALL.vms
            && big.clusters >= SMALL.clusters
            && big.vms >= watchers.div_ceil(TENANTS),
        "--scale-vms / --scale-clusters: at least {} / {} (and a VM per SSE watcher)",
        SMALL.vms * TENANTS,
        SMALL.clusters * TENANTS
    );
    eprintln!(
        "meson-bench: scale, {} clusters and {} VMs over {TENANTS} tenants, {watchers} SSE watchers",
        big.clusters * TENANTS,
        big.vms * TENANTS
    );
    let sim = atomos_sim::start(atomos_sim::SimConfig::default()).await?;
    let targets = write_targets(env, &sim, "targets-scale.json")?;
    let setup = MesondSetup::new(&targets);
    let db = env.fresh_db("scale", true).await?;
    let addr = free_addr()?;
    let vars: Vec<(&str, String)> = setup.vars.iter().map(|(k, v)| (*k, v.clone())).collect();
    let mut mesond = env.mesond("scale", "api", &db, Some(addr), &vars).await?;
    let api = Arc::new(Api {
        http: load::http_client(SEED_CLIENTS.max(watchers))?,
        addr,
        tokens: (0..TENANTS)
            .map(|t| setup.token(&format!("scale-{t}")))
            .collect(),
    });
    let mut seeded = Seeded {
        vm: vec![String::new(); TENANTS],
        cluster: vec![String::new(); TENANTS],
        actions: vec![Vec::new(); TENANTS],
        last_page: Vec::new(),
    };
    let admin = db.admin_pool(2).await?;

    api.seed(
        Size {
            vms: 0,
            clusters: 0,
        },
        SMALL,
        &mut seeded,
    )
    .await?;
    sqlx::query("vacuum analyze").execute(&admin).await?;
    let small = measure_reads(&api, &mut seeded, SMALL, window).await?;
    let seed_started = Instant::now();
    api.seed(SMALL, big, &mut seeded).await?;
    let seed_took = seed_started.elapsed();
    // What autovacuum does after a bulk load, done now rather than mid-run.
    sqlx::query("vacuum analyze").execute(&admin).await?;
    let large = measure_reads(&api, &mut seeded, big, window).await?;
    let counts: (i64, i64, i64) = sqlx::query_as(
        "select (select count(*) from vms), (select count(*) from clusters), \
         (select count(*) from actions)",
    )
    .fetch_one(&admin)
    .await?;
    mesond.alive()?;

    let mut reads_t = Table::new(
        format!(
            "Scale: reads with {} VMs and {} clusters in the database, against the same \
             reads with {} and {}",
            n(big.vms * TENANTS),
            n(big.clusters * TENANTS),
            n(SMALL.vms * TENANTS),
            n(SMALL.clusters * TENANTS)
        ),
        &[
            "request",
            "small p50 / p99 ms",
            "large p50 / p99 ms",
            "small req/s",
            "large req/s",
            "large / small p50",
            "goal",
            "",
        ],
    );
    let p99_goal = format!("p99 ≤ {} ms", P99_GOAL.as_millis());
    for ((read, s), l) in reads().iter().zip(&small).zip(&large) {
        let r = l.latency.p50.as_secs_f64() / s.latency.p50.as_secs_f64();
        let (goal, met) = match read.flat {
            Some(flat) => (
                format!("≤ {flat}×, {p99_goal}"),
                verdict(r <= flat && l.latency.p99 <= P99_GOAL),
            ),
            None => ("none".to_owned(), "—"),
        };
        reads_t.row(vec![
            read.name.to_owned(),
            format!("{} / {}", ms(s.latency.p50), ms(s.latency.p99)),
            format!("{} / {}", ms(l.latency.p50), ms(l.latency.p99)),
            rate(s.per_sec),
            rate(l.per_sec),
            ratio(l.latency.p50.as_secs_f64(), s.latency.p50.as_secs_f64()),
            goal,
            met.to_owned(),
        ]);
    }
    reads_t.note(format!(
        "`mesond api`, {READ_CLIENTS} concurrent clients, {} s per request kind after 1 s of \
         warm-up; each request is one of {TENANTS} tenants' (each tenant holds a tenth of \
         everything). Seeded through the API itself ({SEED_CLIENTS} clients): {} VMs and {} \
         clusters (1 control-plane node and 1 worker each) in {:.0} s ({}/s), leaving {} VM \
         rows (the clusters' node VMs included), {} cluster rows and {} actions. No worker \
         runs: clusters and VMs are stored, not provisioned. Goals: a read with the large \
         database within the ratio of its median with the small one, and its p99 within \
         {} ms. The deep page is read by cursor (the `next_cursor` of the page before the \
         last, taken once per tenant before the measurement); the same page by number, \
         which counts off the rows before it, is shown without a goal.",
        window.as_secs(),
        n((big.vms - SMALL.vms) * TENANTS),
        n((big.clusters - SMALL.clusters) * TENANTS),
        seed_took.as_secs_f64(),
        rate(
            ((big.vms + big.clusters - SMALL.vms - SMALL.clusters) * TENANTS) as f64
                / seed_took.as_secs_f64()
        ),
        n(counts.0 as usize),
        n(counts.1 as usize),
        n(counts.2 as usize),
        P99_GOAL.as_millis()
    ));

    // SSE: one watcher and one action, then `watchers` watchers of as many
    // actions, each action changed `SSE_ROUNDS` times.
    let pick = |n: usize| -> Vec<(usize, String)> {
        (0..n)
            .map(|i| {
                (
                    i % TENANTS,
                    seeded.actions[i % TENANTS][i / TENANTS].clone(),
                )
            })
            .collect()
    };
    let one = watch(&api, &admin, pick(1), 2 * SSE_ROUNDS)
        .await
        .context("one SSE watcher")?;
    let many = watch(&api, &admin, pick(watchers), SSE_ROUNDS)
        .await
        .with_context(|| format!("{watchers} SSE watchers"))?;
    mesond.alive()?;
    let rss = env.stop(mesond).await?;
    sim.shutdown().await;

    let mut sse = Table::new(
        "Scale: action changes reaching SSE watchers (`GET /v1/actions/stream`)",
        &[
            "watchers",
            "events",
            "commit → event p50 ms",
            "p90 ms",
            "p99 ms",
            "max ms",
            "p99 goal ≤ 250 ms",
        ],
    );
    for (n, l) in [(1, &one), (watchers, &many)] {
        sse.row(vec![
            n.to_string(),
            l.n.to_string(),
            ms(l.p50),
            ms(l.p90),
            ms(l.p99),
            ms(l.max),
            verdict(l.p99 <= Duration::from_millis(250)).to_owned(),
        ]);
    }
    sse.note(format!(
        "Each watcher holds its own HTTP connection and watches one running action. The \
         bench changes every watched action's progress in one transaction (a burst of as \
         many notifications as watchers), waits until every watcher saw its event, and \
         repeats; the latency runs from just before the commit to the event's arrival. \
         The p50 of {watchers} watchers is {} the single watcher's. mesond's peak RSS: \
         {:.0} MiB.",
        ratio(many.p50.as_secs_f64(), one.p50.as_secs_f64()),
        rss as f64 / 1048576.0
    ));
    Ok(vec![reads_t, sse])
}

/// Opens one SSE stream per `(tenant, action)`, waits for each stream's
/// first event, then `rounds` times raises every action's progress in one
/// transaction and times each stream's event for it.
async fn watch(
    api: &Arc<Api>,
    admin: &sqlx::PgPool,
    actions: Vec<(usize, String)>,
    rounds: i16,
) -> anyhow::Result<Latency> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, i64, Instant)>();
    let mut streams = tokio::task::JoinSet::new();
    for (w, (t, action)) in actions.iter().enumerate() {
        let r = api
            .get(*t, &format!("/v1/actions/stream?id={action}"))
            .timeout(Duration::from_secs(3600))
            .send()
            .await?;
        ensure!(r.status().as_u16() == 200, "stream: HTTP {}", r.status());
        let tx = tx.clone();
        streams.spawn(async move {
            let mut r = r;
            let mut buf = String::new();
            while let Some(chunk) = r.chunk().await? {
                let at = Instant::now();
                buf.push_str(std::str::from_utf8(&chunk)?);
                while let Some(end) = buf.find("\n\n") {
                    let event: String = buf.drain(..end + 2).collect();
                    let Some(data) = event.lines().find_map(|l| l.strip_prefix("data:")) else {
                        continue; // a keep-alive comment
                    };
                    ensure!(
                        event.starts_with("event: action"),
                        "unexpected event: {event}"
                    );
                    let v: Value = serde_json::from_str(data.trim())?;
                    let p = v["progress"]
                        .as_i64()
                        .or_else(|| v["action"]["progress"].as_i64())
                        .context("no progress in the event")?;
                    if tx.send((w, p, at)).is_err() {
                        return Ok(());
                    }
                }
            }
            Ok::<_, anyhow::Error>(())
        });
    }
    let n = actions.len();
    // Each stream starts with its action's current state.
    let mut progress = vec![-1i64; n];
    let mut seen = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen < n {
        let (w, p, _) = next_event(&mut rx, &mut streams, deadline).await?;
        ensure!(progress[w] == -1, "watcher {w} got two first events");
        progress[w] = p;
        seen += 1;
    }
    let ids: Vec<uuid::Uuid> = actions
        .iter()
        .map(|(_, a)| a.parse())
        .collect::<Result<_, _>>()?;
    let base = progress.iter().copied().max().unwrap_or(0);
    let mut samples = Vec::with_capacity(n * rounds as usize);
    for r in 1..=i64::from(rounds) {
        let want = base + r;
        let t0 = Instant::now();
        let changed = sqlx::query("update actions set progress = $1 where id = any($2)")
            .bind(want as i16)
            .bind(&ids)
            .execute(admin)
            .await?
            .rows_affected();
        ensure!(
            changed == n as u64,
            "{changed} of {n} actions changed: were some finished?"
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut got = 0;
        while got < n {
            let (w, p, at) = next_event(&mut rx, &mut streams, deadline).await?;
            ensure!(
                p == want,
                "watcher {w} saw progress {p} where {want} was next"
            );
            ensure!(progress[w] < want, "watcher {w} got an event twice");
            progress[w] = p;
            samples.push(at.saturating_duration_since(t0));
            got += 1;
        }
    }
    streams.abort_all();
    Latency::of(&mut samples)
}

async fn next_event(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<(usize, i64, Instant)>,
    streams: &mut tokio::task::JoinSet<anyhow::Result<()>>,
    deadline: Instant,
) -> anyhow::Result<(usize, i64, Instant)> {
    tokio::select! {
        e = rx.recv() => e.context("every stream ended"),
        Some(r) = streams.join_next() => {
            r??;
            bail!("a stream ended before its action did");
        }
        () = tokio::time::sleep_until(deadline.into()) => bail!("no event within 60 s"),
    }
}
