//! Provisioning overhead: `mesond serve` against simulated AtomOS hosts
//! whose VMs take `B` to boot; the time from `POST` to the action's
//! `success`, against the critical path the simulator imposes.

use crate::api::{MesondSetup, vm_body, write_targets};
use crate::env::{Env, free_addr};
use crate::load::expect;
use crate::stats::{Table, ratio, secs, verdict};
use anyhow::{Context, bail};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// How often meson's workflows poll AtomOS in this run (`MESON_VM_POLL_MS`).
const VM_POLL_MS: u64 = 250;

/// Big hosts in one region of one provider: capacity is never what limits
/// a cluster here. Every cluster of a run stays up until the end, so the
/// hosts hold them all at once: the default run's 464 nodes (5 control
/// planes of 4 vCPUs, 459 workers of 2 vCPUs, 4 GiB and 41 GB each) take
/// 938 of the 2,048 cores, 1.8 of the 16 TiB of RAM and 19 of the 320 TB of
/// disk, and a pool spread evenly over the 8 hosts puts at most 13 of its
/// nodes on one.
fn hosts() -> Vec<atomos_sim::HostConfig> {
    let template = atomos_sim::dev_hosts()
        .into_iter()
        .next()
        .expect("the dev fleet has hosts");
    (0..8)
        .map(|i| atomos_sim::HostConfig {
            name: format!("bench-{i}"),
            provider: "bench".into(),
            region: "bench-1".into(),
            continent: "europe".into(),
            cores: 256,
            ram_mib: 2048 * 1024,
            disk_gb: 40_000,
            ..template.clone()
        })
        .collect()
}

/// A cluster the section provisions: one control-plane node and the
/// workers of its pools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Each pool's nodes.
    pools: Vec<u32>,
}

impl Shape {
    /// The cluster's nodes, its control plane's included.
    fn nodes(&self) -> u32 {
        1 + self.pools.iter().sum::<u32>()
    }

    /// `cluster of 301 nodes (1 control plane + 3 pools × 100 workers)`.
    fn describe(&self) -> String {
        let workers = match self.pools.as_slice() {
            [one] => format!("{one} workers"),
            [first, rest @ ..] if rest.iter().all(|n| n == first) => {
                format!("{} pools × {first} workers", self.pools.len())
            }
            _ => format!("pools of {:?} workers", self.pools),
        };
        format!(
            "cluster of {} nodes (1 control plane + {workers})",
            self.nodes()
        )
    }

    fn body(&self, name: &str) -> Value {
        let pools: Vec<Value> = self
            .pools
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                json!({
                    "autoscale": false,
                    "desired_nodes": n, "max_nodes": n, "min_nodes": n,
                    "specs": {"cpu": 2, "ram": 4096, "storage": 40, "gpu": 0},
                    "billing": "HOURLY", "pool_name": format!("workers-{i}")
                })
            })
            .collect();
        // Room for the largest cluster: 1,000 addresses, a /24 of pod
        // addresses for each of up to 1,024 nodes.
        json!({
            "req": {
                "name": name,
                "metadata": {},
                "nodepool": pools,
                "nodes_subnet": {"dhcp": "True", "subnet_netmask": "10.20.0.0/22",
                                 "start_address": "10.20.0.10", "last_address": "10.20.3.250"},
                "pod_cidr": "10.128.0.0/14",
                "update_policy": "NEVER_UPDATE",
                "kubernetes_version": "1.29.2"
            },
            "provider": "bench"
        })
    }
}

impl std::fmt::Display for Shape {
    /// As `--cluster-sizes` spells it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.pools.as_slice() {
            [one] => write!(f, "{}", one + 1),
            [first, ..] => write!(f, "{}x{first}", self.pools.len()),
            [] => write!(f, "1"),
        }
    }
}

impl std::str::FromStr for Shape {
    type Err = String;

    /// `N`: N nodes, the control plane's one and N − 1 workers in one pool
    /// (2 ≤ N ≤ 101); `PxW`: the control plane's node and P pools of W
    /// workers (P ≤ 16, W ≤ 100: a cluster's and a pool's limits).
    fn from_str(s: &str) -> Result<Shape, String> {
        let num = |x: &str| x.trim().parse::<u32>().map_err(|e| format!("{s:?}: {e}"));
        let shape = match s.split_once('x') {
            Some((p, w)) => {
                let (p, w) = (num(p)?, num(w)?);
                if !(1..=16).contains(&p) || !(1..=100).contains(&w) {
                    return Err(format!("{s:?}: 1 to 16 pools of 1 to 100 workers"));
                }
                Shape {
                    pools: vec![w; p as usize],
                }
            }
            None => {
                let n = num(s)?;
                if !(2..=101).contains(&n) {
                    return Err(format!("{s:?}: 2 to 101 nodes"));
                }
                Shape { pools: vec![n - 1] }
            }
        };
        Ok(shape)
    }
}

/// The goals on a cluster's time against the smallest cluster's, by shape:
/// the 100-node cluster within 5% of the 3-node one, the 301-node cluster
/// (3 pools of 100 workers) within 15%.
const GOALS: [(&str, f64); 2] = [("100", 1.05), ("3x100", 1.15)];

struct Client {
    http: reqwest::Client,
    addr: SocketAddr,
    token: String,
}

impl Client {
    /// POSTs `body` to `path` and waits for its action's success; returns
    /// the time from the request to the success being seen (polled every 20 ms).
    async fn provision(&self, path: &str, body: &Value) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let created = self
            .call(reqwest::Method::POST, path, Some(body), 201)
            .await?;
        let action = created["action"]["id"]
            .as_str()
            .context("no action in the answer")?
            .to_owned();
        self.wait(&action, started).await
    }

    /// A call answering `status`, its JSON.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        status: u16,
    ) -> anyhow::Result<Value> {
        let mut r = self
            .http
            .request(method, format!("http://{}{path}", self.addr))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            r = r.json(body);
        }
        Ok(serde_json::from_slice(
            &expect(r.send().await?, status).await?,
        )?)
    }

    /// Waits for `action`'s success; the time since `started`.
    async fn wait(&self, action: &str, started: Instant) -> anyhow::Result<Duration> {
        let deadline = started + Duration::from_secs(600);
        loop {
            let r = self
                .http
                .get(format!("http://{}/v1/actions/{action}", self.addr))
                .bearer_auth(&self.token)
                .send()
                .await?;
            let a: Value = serde_json::from_slice(&expect(r, 200).await?)?;
            match a["action"]["status"].as_str() {
                Some("success") => return Ok(started.elapsed()),
                Some("running") => {}
                other => bail!("action {action} ended {other:?}: {}", a["action"]["error"]),
            }
            if Instant::now() > deadline {
                bail!("action {action} still running after 10 minutes");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

pub async fn provision(env: &Env, boot: Duration, shapes: &[Shape]) -> anyhow::Result<Table> {
    let names: Vec<String> = shapes.iter().map(Shape::to_string).collect();
    eprintln!(
        "meson-bench: provisioning, simulated boot {} s, clusters {}",
        boot.as_secs_f64(),
        names.join(", ")
    );
    let sim = atomos_sim::start(atomos_sim::SimConfig {
        hosts: hosts(),
        boot_time: boot,
        ..atomos_sim::SimConfig::default()
    })
    .await?;
    let targets = write_targets(env, &sim, "targets-provision.json")?;
    let setup = MesondSetup::new(&targets);
    let db = env.fresh_db("provision", true).await?;
    let addr = free_addr()?;
    let mut vars: Vec<(&str, String)> = setup.vars.iter().map(|(k, v)| (*k, v.clone())).collect();
    vars.push(("MESON_VM_POLL_MS", VM_POLL_MS.to_string()));
    let mut mesond = env
        .mesond("provision", "serve", &db, Some(addr), &vars)
        .await?;
    let client = Client {
        http: reqwest::Client::new(),
        addr,
        token: setup.token("bench"),
    };

    let mut t = Table::new(
        format!(
            "Provisioning: POST → action success, simulated boot B = {} s",
            secs(boot)
        ),
        &[
            "what",
            "critical path s",
            "meson s",
            "overhead s",
            "goal ≤ 5% + 1 s",
        ],
    );
    let mut row = |what: String, path: Duration, took: Duration| {
        let limit = path.mul_f64(1.05) + Duration::from_secs(1);
        t.row(vec![
            what,
            secs(path),
            secs(took),
            secs(took.saturating_sub(path)),
            verdict(took <= limit).to_owned(),
        ]);
    };

    // One VM, three times: its critical path is one boot.
    let mut vm_runs = Vec::new();
    for i in 0..3 {
        vm_runs.push(
            client
                .provision("/v1/vms", &vm_body_on(&format!("one-{i}")))
                .await
                .context("one VM")?,
        );
    }
    vm_runs.sort();
    row("1 VM (median of 3)".into(), boot, vm_runs[1]);

    // A cluster: its control-plane node boots, then its workers boot (all
    // at once): two boots.
    let mut by_shape = Vec::new();
    for (shape, name) in shapes.iter().zip(&names) {
        let took = client
            .provision("/v1/clusters", &shape.body(&format!("c{name}")))
            .await
            .with_context(|| format!("a {}", shape.describe()))?;
        row(shape.describe(), boot * 2, took);
        by_shape.push((shape, name, took));
    }
    drain_row(&setup, &client, boot, &mut t).await?;
    mesond.alive()?;
    let rss = env.stop(mesond).await?;
    sim.shutdown().await;

    if let Some((small, _, ts)) = by_shape.iter().min_by_key(|(s, _, _)| s.nodes()) {
        for (shape, name, tb) in &by_shape {
            let Some((_, goal)) = GOALS.iter().find(|(g, _)| g == name) else {
                continue;
            };
            if shape == small {
                continue;
            }
            t.note(format!(
                "The {} took {} the {}-node one's time: goal ≤ {goal:.2}×: {}.",
                shape.describe(),
                ratio(tb.as_secs_f64(), ts.as_secs_f64()),
                small.nodes(),
                verdict(tb.as_secs_f64() <= goal * ts.as_secs_f64())
            ));
        }
    }
    t.note(format!(
        "`mesond serve` (API and workers, one process) on 8 simulated hosts; workflows poll \
         AtomOS every {VM_POLL_MS} ms (`MESON_VM_POLL_MS`); nodes phone home when they \
         finish booting. The bench polls the action every 20 ms. mesond's peak RSS: {:.0} MiB.",
        rss as f64 / 1048576.0
    ));
    Ok(t)
}

/// VMs on the host a drain empties.
const DRAINED_VMS: usize = 20;

/// A host drained of [`DRAINED_VMS`] running VMs: from the drain's `POST`
/// to the last migration's success, every VM then running elsewhere. Each
/// VM's critical path is one boot on its new host (the simulator stops a
/// VM and copies its volumes at once); they move at once.
async fn drain_row(
    setup: &MesondSetup,
    client: &Client,
    boot: Duration,
    t: &mut Table,
) -> anyhow::Result<()> {
    let admin = Client {
        http: client.http.clone(),
        addr: client.addr,
        token: setup.token_as("bench", meson_api::Role::Admin),
    };
    let targets = admin
        .call(reqwest::Method::GET, "/v1/targets", None, 200)
        .await?;
    let ids: Vec<(String, String)> = targets["targets"]
        .as_array()
        .context("no targets")?
        .iter()
        .filter_map(|t| Some((t["name"].as_str()?.to_owned(), t["id"].as_str()?.to_owned())))
        .collect();
    let (_, drained) = ids.first().context("no target")?.clone();
    let enable = |on: bool| {
        let admin = &admin;
        let ids = &ids;
        async move {
            for (_, id) in ids.iter().skip(1) {
                let body = json!({"enabled": on});
                admin
                    .call(
                        reqwest::Method::PATCH,
                        &format!("/v1/targets/{id}"),
                        Some(&body),
                        200,
                    )
                    .await?;
            }
            anyhow::Ok(())
        }
    };
    // Every VM on the first host: the others take none meanwhile.
    enable(false).await?;
    let bodies: Vec<Value> = (0..DRAINED_VMS)
        .map(|i| vm_body_on(&format!("drained-{i}")))
        .collect();
    let made =
        futures::future::join_all(bodies.iter().map(|b| client.provision("/v1/vms", b))).await;
    for m in made {
        m.context("a VM to drain")?;
    }
    enable(true).await?;
    let started = Instant::now();
    let r = admin
        .call(
            reqwest::Method::POST,
            &format!("/v1/targets/{drained}/actions/drain"),
            Some(&json!({})),
            200,
        )
        .await?;
    let actions: Vec<String> = r["actions"]
        .as_array()
        .context("no actions")?
        .iter()
        .filter_map(|a| a["id"].as_str().map(str::to_owned))
        .collect();
    // The section's earlier VMs may be there too (its clusters' nodes are
    // left: a pool replaces its nodes).
    if actions.len() < DRAINED_VMS {
        bail!(
            "the drain moved {} VMs, fewer than {DRAINED_VMS}: {r}",
            actions.len()
        );
    }
    let waited = futures::future::join_all(actions.iter().map(|a| client.wait(a, started))).await;
    let mut took = Duration::ZERO;
    for w in waited {
        took = took.max(w.context("a migration")?);
    }
    let vms = client
        .call(reqwest::Method::GET, "/v1/vms?per_page=50", None, 200)
        .await?;
    let moved = vms["vms"]
        .as_array()
        .context("no vms")?
        .iter()
        .filter(|v| {
            v["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("drained-"))
                && v["status"] == "running"
                && v["host"] != ids[0].0.as_str()
        })
        .count();
    if moved != DRAINED_VMS {
        bail!("{moved} of {DRAINED_VMS} drained VMs run on another host");
    }
    let limit = boot.mul_f64(1.05) + Duration::from_secs(1);
    t.row(vec![
        format!("drain of a host: {} running VMs moved", actions.len()),
        secs(boot),
        secs(took),
        secs(took.saturating_sub(boot)),
        verdict(took <= limit).to_owned(),
    ]);
    Ok(())
}

/// The seed VM on the bench's provider.
fn vm_body_on(name: &str) -> Value {
    let mut b = vm_body(name);
    b["provider"] = json!("bench");
    b
}
