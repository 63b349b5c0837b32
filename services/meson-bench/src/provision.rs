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
/// a 100-node cluster here.
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

fn cluster_body(name: &str, nodes: u32) -> Value {
    json!({
        "req": {
            "name": name,
            "metadata": {},
            "nodepool": [{
                "autoscale": false,
                "desired_nodes": nodes - 1, "max_nodes": nodes - 1, "min_nodes": nodes - 1,
                "specs": {"cpu": 2, "ram": 4096, "storage": 40, "gpu": 0},
                "billing": "HOURLY", "pool_name": "workers"
            }],
            "nodes_subnet": {"dhcp": "True", "subnet_netmask": "10.20.0.0/24",
                             "start_address": "10.20.0.10", "last_address": "10.20.0.250"},
            "update_policy": "NEVER_UPDATE",
            "kubernetes_version": "1.29.2"
        },
        "provider": "bench"
    })
}

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
        let r = self
            .http
            .post(format!("http://{}{path}", self.addr))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await?;
        let created: Value = serde_json::from_slice(&expect(r, 201).await?)?;
        let action = created["action"]["id"]
            .as_str()
            .context("no action in the answer")?
            .to_owned();
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

pub async fn provision(env: &Env, boot: Duration, sizes: &[u32]) -> anyhow::Result<Table> {
    eprintln!(
        "meson-bench: provisioning, simulated boot {} s, clusters of {sizes:?}",
        boot.as_secs_f64()
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
    let mut by_size = Vec::new();
    for &n in sizes {
        let took = client
            .provision("/v1/clusters", &cluster_body(&format!("c{n}"), n))
            .await
            .with_context(|| format!("a cluster of {n} nodes"))?;
        row(
            format!("cluster of {n} nodes (1 control plane + {} workers)", n - 1),
            boot * 2,
            took,
        );
        by_size.push((n, took));
    }
    mesond.alive()?;
    let rss = env.stop(mesond).await?;
    sim.shutdown().await;

    if let (Some((small, ts)), Some((big, tb))) = (by_size.first(), by_size.last())
        && small != big
    {
        t.note(format!(
            "The {big}-node cluster took {} the {small}-node one's time: goal ≤ 1.10×: {}.",
            ratio(tb.as_secs_f64(), ts.as_secs_f64()),
            verdict(tb.as_secs_f64() <= 1.1 * ts.as_secs_f64())
        ));
    }
    t.note(format!(
        "`mesond serve` (API and workers, one process) on 8 simulated hosts; workflows poll \
         AtomOS every {VM_POLL_MS} ms (`MESON_VM_POLL_MS`); nodes phone home when they \
         finish booting. The bench polls the action every 20 ms. mesond's peak RSS: {:.0} MiB.",
        rss as f64 / 1048576.0
    ));
    Ok(t)
}

/// The seed VM on the bench's provider.
fn vm_body_on(name: &str) -> Value {
    let mut b = vm_body(name);
    b["provider"] = json!("bench");
    b
}
