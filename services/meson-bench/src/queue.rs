//! The job queue: throughput of no-op jobs (meson, the raw-SQL floor and
//! ceiling by pgbench, graphile-worker) and pickup latency on an idle queue.

use crate::env::{Db, Env};
use crate::graphile::{self, Graphile};
use crate::stats::{Latency, Table, ms, rate, ratio, verdict};
use anyhow::{Context, bail, ensure};
use meson_jobs::testing::Empty;
use meson_jobs::{EnqueueOpts, StepCtx, StepResult, Worker, WorkerConfig, Workflow};

meson_jobs::steps! {
    enum NoOpStep {
        NoOp = "noop",
    }
}

meson_jobs::steps! {
    enum PingStep {
        Ping = "ping",
    }
}
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::PgPool;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// Jobs run at once by one worker process, meson's and graphile-worker's
/// alike (mesond's default `MESON_WORKER_CONCURRENCY`).
pub const CONCURRENCY: usize = 32;
/// Producer connections (pgbench clients), one job per transaction each.
const PRODUCERS: u32 = 8;

/// One step that does nothing, durably recorded like every step.
struct OneStep;

impl Workflow for OneStep {
    const KIND: &'static str = "bench_step";
    type Params = Value;
    type Step = NoOpStep;
    async fn run(&self, _: &StepCtx<'_, Value, NoOpStep>, _: NoOpStep) -> StepResult {
        Ok(Value::Null)
    }
    async fn undo(&self, _: &StepCtx<'_, Value, NoOpStep>, _: NoOpStep) -> StepResult<()> {
        Ok(())
    }
}

#[derive(Serialize, Deserialize)]
struct PingParams {
    seq: u64,
}

/// Reports the moment its step starts.
struct Ping(mpsc::UnboundedSender<(u64, Instant)>);

impl Workflow for Ping {
    const KIND: &'static str = "bench_ping";
    type Params = PingParams;
    type Step = PingStep;
    async fn run(&self, cx: &StepCtx<'_, PingParams, PingStep>, _: PingStep) -> StepResult {
        let _ = self.0.send((cx.params.seq, Instant::now()));
        Ok(Value::Null)
    }
    async fn undo(&self, _: &StepCtx<'_, PingParams, PingStep>, _: PingStep) -> StepResult<()> {
        Ok(())
    }
}

fn worker_config(listen: bool, poll: Duration) -> WorkerConfig {
    WorkerConfig {
        concurrency: CONCURRENCY,
        listen,
        poll_interval: poll,
        ..WorkerConfig::default()
    }
}

/// How long `n` jobs took through `consumer`, produced by pgbench at the
/// same time; `remaining` counts the jobs not finished yet.
async fn drive(
    env: &Env,
    db: &Db,
    script: &str,
    vars: &[(&str, String)],
    n: u64,
    remaining: impl AsyncFn(&PgPool) -> anyhow::Result<i64>,
) -> anyhow::Result<Duration> {
    let admin = db.admin_pool(2).await?;
    sqlx::raw_sql("checkpoint").execute(&admin).await?;
    let per_client = n / u64::from(PRODUCERS);
    let started = Instant::now();
    let scripts = [script];
    let producers = env.pgbench(db, &scripts, PRODUCERS, per_client, vars);
    tokio::pin!(producers);
    let mut produced = false;
    // Bounded: a queue that stops draining is a failed run, not a slow one.
    let deadline = started + Duration::from_secs(60) + Duration::from_millis(n * 20);
    loop {
        if !produced {
            tokio::select! {
                r = &mut producers => { r?; produced = true; }
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        } else {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if produced && remaining(&admin).await? == 0 {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "{} jobs still unfinished after {:?}",
            remaining(&admin).await?,
            started.elapsed()
        );
    }
    let took = started.elapsed();
    admin.close().await;
    Ok(took)
}

/// meson's queue: a worker in this process, pgbench producing.
async fn meson(env: &Env, n: u64, kind: &str) -> anyhow::Result<f64> {
    let db = env.fresh_db("queue_meson", true).await?;
    let pool = meson_db::connect(&db.app_url, 20)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let worker = Worker::new(pool.clone(), worker_config(true, Duration::from_secs(1)))
        .register(Empty)
        .register(OneStep)
        .start();
    let took = drive(
        env,
        &db,
        "meson_enqueue.sql",
        &[("kind", kind.to_owned())],
        n,
        async |p: &PgPool| {
            Ok(
                sqlx::raw_sql("select count(*) from jobs where state in ('available', 'running')")
                    .fetch_one(p)
                    .await
                    .map(|r| sqlx::Row::get::<i64, _>(&r, 0))?,
            )
        },
    )
    .await;
    worker.shutdown().await;
    let took = took?;
    // Valid only if every job ran exactly once and succeeded.
    let row = sqlx::raw_sql(
        "select count(*) filter (where state = 'succeeded'), count(*), max(attempt) from jobs",
    )
    .fetch_one(&pool)
    .await?;
    let (ok, all, attempts): (i64, i64, Option<i32>) = (
        sqlx::Row::get(&row, 0),
        sqlx::Row::get(&row, 1),
        sqlx::Row::get(&row, 2),
    );
    pool.close().await;
    let expected = expected(n);
    ensure!(
        ok == expected && all == expected,
        "meson ({kind}): {ok} of {all} jobs succeeded, {expected} enqueued"
    );
    ensure!(
        attempts == Some(1),
        "meson ({kind}): a no-op job ran more than once"
    );
    Ok(expected as f64 / took.as_secs_f64())
}

/// Jobs pgbench produces for `n` (a whole number per producer).
fn expected(n: u64) -> i64 {
    (n / u64::from(PRODUCERS) * u64::from(PRODUCERS)) as i64
}

/// The raw floor (unbatched) or ceiling (batched) by pgbench alone.
async fn raw(env: &Env, n: u64, batched: bool) -> anyhow::Result<f64> {
    let db = env.fresh_db("queue_raw", false).await?;
    let admin = db.admin_pool(2).await?;
    let schema = std::fs::read_to_string(env.root.join("pgbench/raw_schema.sql"))?;
    sqlx::raw_sql(&schema).execute(&admin).await?;
    sqlx::raw_sql("checkpoint").execute(&admin).await?;
    let (script, per_client) = if batched {
        ("raw_batched.sql", n / u64::from(PRODUCERS) / 10)
    } else {
        ("raw_lifecycle.sql", n / u64::from(PRODUCERS))
    };
    let started = Instant::now();
    env.pgbench(&db, &[script], PRODUCERS, per_client, &[])
        .await?;
    let finish = std::fs::read_to_string(env.root.join("pgbench/raw_finish.sql"))?;
    sqlx::raw_sql(&finish).execute(&admin).await?;
    let took = started.elapsed();
    let row =
        sqlx::raw_sql("select count(*) filter (where state = 'succeeded'), count(*) from raw_jobs")
            .fetch_one(&admin)
            .await?;
    let (ok, all): (i64, i64) = (sqlx::Row::get(&row, 0), sqlx::Row::get(&row, 1));
    admin.close().await;
    let jobs = per_client * u64::from(PRODUCERS) * if batched { 10 } else { 1 };
    ensure!(
        all == jobs as i64 && ok == all,
        "raw {script}: {ok} of {all} jobs done, {jobs} inserted"
    );
    Ok(jobs as f64 / took.as_secs_f64())
}

/// graphile-worker in its own node process, pgbench producing.
async fn graphile(env: &Env, dir: &std::path::Path, n: u64, mode: &str) -> anyhow::Result<f64> {
    let db = env.fresh_db("queue_graphile", false).await?;
    let g = Graphile::start(dir, &db, mode, CONCURRENCY).await?;
    let took = drive(
        env,
        &db,
        "graphile_enqueue.sql",
        &[],
        n,
        async |p: &PgPool| {
            Ok(sqlx::raw_sql("select count(*) from graphile_worker.jobs")
                .fetch_one(p)
                .await
                .map(|r| sqlx::Row::get::<i64, _>(&r, 0))?)
        },
    )
    .await;
    g.stop().await;
    let took = took?;
    // graphile-worker deletes a job once it succeeds; a failed one stays
    // (and `drive` would have timed out on it).
    Ok(expected(n) as f64 / took.as_secs_f64())
}

pub struct QueueFigures {
    pub table: Table,
}

/// Queue throughput: every system on `n` jobs, each on a fresh database.
pub async fn throughput(env: &Env, n: u64) -> anyhow::Result<QueueFigures> {
    ensure!(n >= 1000, "--jobs must be at least 1000");
    let dir = graphile::install(env).await?;
    let version = graphile::pinned_version(env)?;
    eprintln!("meson-bench: queue throughput, {n} jobs per run");
    let raw_floor = raw(env, n, false).await.context("raw lifecycle")?;
    let raw_batched = raw(env, n, true).await.context("raw batched lifecycle")?;
    let g_default = graphile(env, &dir, n, "default")
        .await
        .context("graphile-worker")?;
    let g_batched = graphile(env, &dir, n, "batched")
        .await
        .context("graphile-worker, batched")?;
    let m_noop = meson(env, n, Empty::KIND).await.context("meson")?;
    let m_step = meson(env, n, OneStep::KIND)
        .await
        .context("meson, one step")?;
    let peer = g_default.max(g_batched);

    let mut t = Table::new(
        format!("Queue throughput: {n} no-op jobs, insert → claim → complete, durable commits"),
        &[
            "system",
            "jobs/s",
            "vs raw unbatched",
            "vs graphile-worker (best)",
        ],
    );
    let mut row = |name: String, v: f64| {
        t.row(vec![name, rate(v), ratio(v, raw_floor), ratio(v, peer)]);
    };
    row(
        "raw SQL, unbatched (pgbench: 3 transactions a job)".into(),
        raw_floor,
    );
    row(
        "raw SQL, batched (pgbench: insert each; claim and complete by 10)".into(),
        raw_batched,
    );
    row(format!("graphile-worker {version}, defaults"), g_default);
    row(
        format!("graphile-worker {version}, local queue + batched completion"),
        g_batched,
    );
    row("**meson** (workflow without steps)".into(), m_noop);
    row("**meson** (one recorded no-op step)".into(), m_step);
    t.note(format!(
        "Producers: pgbench, {PRODUCERS} connections, one job per transaction, running while the \
         consumer drains (each system's own enqueue statement). Consumers: one process, \
         {CONCURRENCY} jobs at once. Time: from the first insert until no job is left unfinished."
    ));
    t.note(format!(
        "Goal meson ≥ 1.5× graphile-worker (best): {} ({}). Goal meson ≥ 1.0× raw unbatched: {} ({}).",
        verdict(m_noop >= 1.5 * peer),
        ratio(m_noop, peer),
        verdict(m_noop >= raw_floor),
        ratio(m_noop, raw_floor),
    ));
    Ok(QueueFigures { table: t })
}

/// Pickup latency on an idle queue: enqueue committed → first step starts.
pub async fn pickup(env: &Env, samples: usize) -> anyhow::Result<Table> {
    eprintln!("meson-bench: pickup latency");
    let notify = meson_pickup(env, true, samples).await?;
    let polled = meson_pickup(env, false, samples.min(40)).await?;
    let dir = graphile::install(env).await?;
    let version = graphile::pinned_version(env)?;
    let peer = graphile_pickup(env, &dir, samples).await?;
    let mut t = Table::new(
        "Pickup latency: enqueue committed → step starts, idle queue",
        &[
            "system", "samples", "p50 ms", "p90 ms", "p99 ms", "max ms", "goal",
        ],
    );
    let row = |name: &str, l: &Latency, goal: String| {
        vec![
            name.to_owned(),
            l.n.to_string(),
            ms(l.p50),
            ms(l.p90),
            ms(l.p99),
            ms(l.max),
            goal,
        ]
    };
    t.row(row(
        "**meson**, LISTEN/NOTIFY",
        &notify,
        format!(
            "p50 ≤ 10 ms, p99 ≤ 50 ms: {}",
            verdict(
                notify.p50 <= Duration::from_millis(10) && notify.p99 <= Duration::from_millis(50)
            )
        ),
    ));
    t.row(row(
        "**meson**, polling only (MESON_JOB_LISTEN=false, 1 s)",
        &polled,
        format!("≤ 1 s: {}", verdict(polled.max <= Duration::from_secs(1))),
    ));
    t.row(row(
        &format!("graphile-worker {version}, LISTEN/NOTIFY"),
        &peer,
        String::new(),
    ));
    t.note(
        "One job at a time, 5–25 ms apart. meson's figure is taken in its worker's process \
         (monotonic clock); graphile-worker's from its task's wall clock, microseconds.",
    );
    Ok(t)
}

async fn meson_pickup(env: &Env, listen: bool, samples: usize) -> anyhow::Result<Latency> {
    let db = env.fresh_db("pickup", true).await?;
    let pool = meson_db::connect(&db.app_url, 20)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let worker = Worker::new(pool.clone(), worker_config(listen, Duration::from_secs(1)))
        .register(Ping(tx))
        .start();
    // Let the worker start listening.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut lat = Vec::with_capacity(samples);
    let r = async {
        for seq in 0..samples as u64 {
            let mut t = meson_db::begin(&pool).await?;
            meson_jobs::enqueue::<Ping>(&mut t, &PingParams { seq }, EnqueueOpts::default())
                .await?;
            meson_db::commit(t).await?;
            let committed = Instant::now();
            let (got, at) = tokio::time::timeout(Duration::from_secs(5), rx.recv())
                .await
                .context("a job was not picked up in 5 s")?
                .context("the worker stopped")?;
            ensure!(got == seq, "job {got} started, {seq} expected");
            lat.push(at.saturating_duration_since(committed));
            tokio::time::sleep(gap(seq)).await;
        }
        Ok::<_, anyhow::Error>(())
    }
    .await;
    worker.shutdown().await;
    pool.close().await;
    r?;
    Latency::of(&mut lat)
}

/// 5–25 ms, varied so polls and arrivals do not fall into step.
fn gap(seq: u64) -> Duration {
    Duration::from_millis(5 + (seq * 7919) % 21)
}

async fn graphile_pickup(
    env: &Env,
    dir: &std::path::Path,
    samples: usize,
) -> anyhow::Result<Latency> {
    let db = env.fresh_db("pickup_graphile", false).await?;
    let mut g = Graphile::start(dir, &db, "default", CONCURRENCY).await?;
    let pool = db.admin_pool(2).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut lat = Vec::with_capacity(samples);
    let r = async {
        for seq in 0..samples as u64 {
            let mut t = pool.begin().await?;
            sqlx::raw_sql(&format!(
                "select graphile_worker.add_job('ping', json_build_object('seq', {seq}))"
            ))
            .execute(&mut *t)
            .await?;
            t.commit().await?;
            let committed = SystemTime::now().duration_since(UNIX_EPOCH)?;
            let line = tokio::time::timeout(Duration::from_secs(5), g.lines.next_line())
                .await
                .context("graphile-worker did not pick a job up in 5 s")??
                .context("graphile-worker exited")?;
            let mut parts = line.split_whitespace();
            let (Some("ping"), Some(got), Some(at)) = (parts.next(), parts.next(), parts.next())
            else {
                bail!("unexpected output from graphile-worker: {line}");
            };
            ensure!(got == seq.to_string(), "job {got} started, {seq} expected");
            let at = Duration::from_micros(at.parse()?);
            lat.push(at.saturating_sub(committed));
            tokio::time::sleep(gap(seq)).await;
        }
        Ok::<_, anyhow::Error>(())
    }
    .await;
    g.stop().await;
    pool.close().await;
    r?;
    Latency::of(&mut lat)
}
