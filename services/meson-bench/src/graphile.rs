//! graphile-worker, installed by npm into `target/bench/graphile` and run as
//! a node process against the same PostgreSQL.

use crate::env::{Db, Env};
use anyhow::{Context, bail, ensure};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// The version `graphile/package.json` pins.
pub fn pinned_version(env: &Env) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(env.root.join("graphile/package.json"))?;
    let v: serde_json::Value = serde_json::from_str(&text)?;
    v["dependencies"]["graphile-worker"]
        .as_str()
        .map(str::to_owned)
        .context("graphile/package.json pins no graphile-worker version")
}

/// Installs the pinned graphile-worker (once) and returns its directory.
pub async fn install(env: &Env) -> anyhow::Result<PathBuf> {
    let dir = env.work.join("graphile");
    std::fs::create_dir_all(&dir)?;
    for f in ["package.json", "run.mjs"] {
        std::fs::copy(env.root.join("graphile").join(f), dir.join(f))
            .with_context(|| format!("copying graphile/{f}"))?;
    }
    let want = pinned_version(env)?;
    if installed_version(&dir).as_deref() != Some(want.as_str()) {
        eprintln!("meson-bench: installing graphile-worker {want} with npm");
        let out = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .output()
            .await
            .context("running npm (Node.js and npm are needed: apt-get install nodejs npm)")?;
        if !out.status.success() {
            bail!(
                "npm install failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    ensure!(
        installed_version(&dir).as_deref() == Some(want.as_str()),
        "npm did not install graphile-worker {want}"
    );
    Ok(dir)
}

fn installed_version(dir: &Path) -> Option<String> {
    let text =
        std::fs::read_to_string(dir.join("node_modules/graphile-worker/package.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["version"].as_str().map(str::to_owned)
}

/// A running graphile-worker process.
pub struct Graphile {
    child: Child,
    pub lines: Lines<BufReader<ChildStdout>>,
}

impl Graphile {
    /// Starts it on `db` (it installs its schema) and waits until it works.
    pub async fn start(
        dir: &Path,
        db: &Db,
        mode: &str,
        concurrency: usize,
    ) -> anyhow::Result<Graphile> {
        let mut child = Command::new("node")
            .arg("run.mjs")
            .current_dir(dir)
            .env("DATABASE_URL", &db.app_url)
            .env("GRAPHILE_MODE", mode)
            .env("CONCURRENCY", concurrency.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("starting node")?;
        let stdout = child.stdout.take().context("node's stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await? {
                if line.trim() == "ready" {
                    return Ok(true);
                }
            }
            Ok::<_, std::io::Error>(false)
        })
        .await
        .context("graphile-worker did not start in 60 s")??;
        ensure!(ready, "graphile-worker exited before it was ready");
        Ok(Graphile { child, lines })
    }

    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await;
        }
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}
