//! A highly available PostgreSQL on loopback, made of the parts production
//! uses: one etcd, three PostgreSQL instances under Patroni (synchronous
//! mode: a commit is acknowledged once a standby has it too) and HAProxy
//! routing to whichever instance Patroni's REST API calls the primary.
//!
//! Every part is a child process of the test, on ports of its own, in a
//! scratch directory removed at the end. PostgreSQL refuses to run as root,
//! so as root Patroni (and the PostgreSQL it runs) runs as the `postgres`
//! system user.

use super::{Process, free_port, is_root};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Patroni's leader lock lives this long without renewal: a primary that
/// dies is replaced within about this long.
pub const TTL_S: u64 = 10;

/// What the stack needs; `None` when all of it is installed.
pub fn missing() -> Option<String> {
    let lacking: Vec<&str> = ["patroni", "etcd", "haproxy"]
        .into_iter()
        .filter(|tool| which(tool).is_none())
        .collect();
    let bin = postgres_bin();
    if lacking.is_empty() && bin.is_some() {
        return None;
    }
    Some(format!(
        "missing {}{}: install the Debian packages patroni, etcd-server, haproxy and postgresql \
         (.ci/run does)",
        lacking.join(", "),
        if bin.is_none() {
            " and PostgreSQL's server binaries"
        } else {
            ""
        },
    ))
}

/// `program`, run as the `postgres` system user when the test is root
/// (PostgreSQL refuses to run as root); setpriv execs, so the pid is the
/// program's own.
pub fn as_postgres(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=postgres",
            "--regid=postgres",
            "--init-groups",
            "--reset-env",
        ]);
        c.arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// Makes `dir` the `postgres` user's when the test is root (PostgreSQL,
/// run as `postgres`, writes there).
pub fn give_to_postgres(dir: &Path) {
    if is_root() {
        let owned = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(owned.success(), "chown {}", dir.display());
    }
}

fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

/// The newest installed PostgreSQL's `bin` directory (Debian's layout).
pub fn postgres_bin() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// One PostgreSQL instance and the Patroni that runs it.
pub struct Node {
    pub name: String,
    pub pg_port: u16,
    pub rest_port: u16,
    config: PathBuf,
    data: PathBuf,
    patroni: Option<Process>,
}

pub struct Cluster {
    pub dir: PathBuf,
    pub nodes: Vec<Node>,
    pub proxy_port: u16,
    etcd: Process,
    haproxy: Process,
    http: reqwest::Client,
}

impl Cluster {
    /// Starts etcd, three Patroni nodes and HAProxy, and waits until a
    /// primary with a synchronous standby answers through HAProxy.
    pub async fn start() -> Cluster {
        let bin = postgres_bin().expect("PostgreSQL's server binaries");
        let dir = std::env::temp_dir().join(format!("meson-ha-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let (etcd_port, peer_port) = (free_port(), free_port());
        let mut etcd = Command::new(which("etcd").unwrap());
        etcd.args(["--name", "e0", "--log-level", "error"])
            .arg("--data-dir")
            .arg(dir.join("etcd"))
            .arg(format!("--listen-client-urls=http://127.0.0.1:{etcd_port}"))
            .arg(format!(
                "--advertise-client-urls=http://127.0.0.1:{etcd_port}"
            ))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"
            ))
            .arg(format!("--initial-cluster=e0=http://127.0.0.1:{peer_port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let etcd = Process::spawn(etcd, "etcd");

        let scope = format!("meson-{}", uuid::Uuid::new_v4().simple());
        let nodes: Vec<Node> = (0..3)
            .map(|i| {
                let name = format!("pg{i}");
                let (pg_port, rest_port) = (free_port(), free_port());
                let data = dir.join(&name);
                let config = dir.join(format!("{name}.yml"));
                std::fs::write(
                    &config,
                    patroni_config(
                        &scope, &name, pg_port, rest_port, etcd_port, &data, &bin, &dir,
                    ),
                )
                .unwrap();
                Node {
                    name,
                    pg_port,
                    rest_port,
                    config,
                    data,
                    patroni: None,
                }
            })
            .collect();
        let proxy_port = free_port();
        std::fs::write(dir.join("haproxy.cfg"), haproxy_config(proxy_port, &nodes)).unwrap();
        give_to_postgres(&dir);
        let mut haproxy = Command::new(which("haproxy").unwrap());
        haproxy
            .arg("-db")
            .arg("-f")
            .arg(dir.join("haproxy.cfg"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let haproxy = Process::spawn(haproxy, "haproxy");
        let mut cluster = Cluster {
            dir,
            nodes,
            proxy_port,
            etcd,
            haproxy,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(3))
                .build()
                .unwrap(),
        };
        for i in 0..cluster.nodes.len() {
            cluster.start_node(i);
        }
        cluster.wait_healthy(Duration::from_secs(90)).await;
        cluster
    }

    /// Starts node `i`'s Patroni (again).
    pub fn start_node(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let mut c = as_postgres(&which("patroni").unwrap());
        c.arg(&node.config)
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if std::env::var_os("MESON_TEST_HA_LOG").is_some() {
            c.stderr(Stdio::inherit());
        }
        node.patroni = Some(Process::spawn(c, &format!("patroni {}", node.name)));
    }

    /// A database URL through HAProxy: always the primary, whichever it is.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/{database}",
            self.proxy_port
        )
    }

    /// Node `i`'s Patroni status (`role`: `master`/`primary` or `replica`).
    pub async fn status(&self, i: usize) -> Option<serde_json::Value> {
        let url = format!("http://127.0.0.1:{}/patroni", self.nodes[i].rest_port);
        self.http.get(url).send().await.ok()?.json().await.ok()
    }

    /// The node Patroni calls the primary, if one is.
    pub async fn primary(&self) -> Option<usize> {
        for i in 0..self.nodes.len() {
            if self.nodes[i].patroni.is_none() {
                continue;
            }
            let url = format!("http://127.0.0.1:{}/primary", self.nodes[i].rest_port);
            if let Ok(r) = self.http.get(url).send().await
                && r.status().is_success()
            {
                return Some(i);
            }
        }
        None
    }

    /// Waits until a node other than `old` is the primary and takes writes
    /// through HAProxy; when it did.
    pub async fn wait_new_primary(&self, old: usize) -> Instant {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if self.primary().await.is_some_and(|p| p != old) && self.writes().await {
                return Instant::now();
            }
            assert!(Instant::now() < deadline, "no new primary within 90 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The synchronous standby Patroni names for the primary `p` (its
    /// `/cluster` view, which a switchover is checked against).
    pub async fn sync_standby(&self, p: usize) -> Option<usize> {
        let url = format!("http://127.0.0.1:{}/cluster", self.nodes[p].rest_port);
        let cluster: serde_json::Value = self.http.get(url).send().await.ok()?.json().await.ok()?;
        let name = cluster["members"].as_array()?.iter().find(|m| {
            m["role"] == "sync_standby" && (m["state"] == "running" || m["state"] == "streaming")
        })?["name"]
            .as_str()?
            .to_owned();
        self.nodes.iter().position(|n| n.name == name)
    }

    /// Waits until a primary answers through HAProxy, writes, and every
    /// running node but it streams from it with one of them synchronous.
    pub async fn wait_healthy(&self, limit: Duration) -> usize {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(p) = self.primary().await
                && let Some(status) = self.status(p).await
            {
                let replication = status["replication"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let running = self.nodes.iter().filter(|n| n.patroni.is_some()).count();
                let streaming = replication
                    .iter()
                    .filter(|r| r["state"] == "streaming")
                    .count();
                let sync = replication.iter().any(|r| r["sync_state"] == "sync");
                if streaming + 1 == running && sync && self.writes().await {
                    return p;
                }
            }
            assert!(
                Instant::now() < deadline,
                "the PostgreSQL cluster is not healthy after {limit:?} (see MESON_TEST_HA_LOG=1)"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A write through HAProxy commits.
    pub async fn writes(&self) -> bool {
        use sqlx::Connection;
        let Ok(Ok(mut c)) = tokio::time::timeout(
            Duration::from_secs(3),
            sqlx::PgConnection::connect(&self.url("postgres")),
        )
        .await
        else {
            return false;
        };
        let ok = tokio::time::timeout(
            Duration::from_secs(3),
            sqlx::raw_sql("select txid_current()").execute(&mut c),
        )
        .await
        .is_ok_and(|r| r.is_ok());
        let _ = c.close().await;
        ok
    }

    /// Creates `database` through HAProxy.
    pub async fn create_database(&self, database: &str) {
        use sqlx::Connection;
        let mut c = sqlx::PgConnection::connect(&self.url("postgres"))
            .await
            .expect("connecting through HAProxy");
        let sql = format!("create database \"{database}\"");
        sqlx::raw_sql(&sql)
            .execute(&mut c)
            .await
            .expect("create database");
        c.close().await.unwrap();
    }

    /// Node `i` dies: its Patroni and its PostgreSQL are SIGKILLed at once,
    /// as a machine that loses power.
    pub fn kill_node(&mut self, i: usize) {
        let postmaster = self.postmaster(i);
        if let Some(mut p) = self.nodes[i].patroni.take() {
            p.kill();
        }
        if let Some(pid) = postmaster {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }

    /// Node `i` is cut off: its Patroni, its PostgreSQL and every backend
    /// freeze (SIGSTOP), as a machine behind a partition: HAProxy's checks
    /// and the standbys' replication get no answer, its leader lock
    /// expires, and a standby is promoted.
    pub fn partition(&self, i: usize) {
        for pid in self.node_pids(i) {
            signal(pid, "-STOP");
        }
    }

    /// Node `i` is back (SIGCONT): its Patroni finds another primary and
    /// demotes its PostgreSQL to follow it.
    pub fn heal(&self, i: usize) {
        for pid in self.node_pids(i) {
            signal(pid, "-CONT");
        }
    }

    /// Patroni's pid, the postmaster's and its children's.
    fn node_pids(&self, i: usize) -> Vec<u32> {
        let mut pids: Vec<u32> = self.nodes[i].patroni.iter().map(Process::pid).collect();
        if let Some(postmaster) = self.postmaster(i) {
            pids.push(postmaster);
            pids.extend(children(postmaster));
        }
        pids
    }

    /// A planned switchover from the primary `from` to its synchronous
    /// standby (the only node Patroni promotes in synchronous mode),
    /// through Patroni's REST API; the node promoted.
    pub async fn switchover(&self, from: usize) -> usize {
        let url = format!("http://127.0.0.1:{}/switchover", self.nodes[from].rest_port);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // The standby Patroni chose may change under us: ask again.
            let candidate = self.sync_standby(from).await;
            if let Some(candidate) = candidate {
                let r = reqwest::Client::new()
                    .post(&url)
                    .json(&serde_json::json!({
                        "leader": self.nodes[from].name,
                        "candidate": self.nodes[candidate].name,
                    }))
                    .timeout(Duration::from_secs(60))
                    .send()
                    .await
                    .expect("switchover");
                let status = r.status();
                let body = r.text().await.unwrap_or_default();
                if status.is_success() {
                    return candidate;
                }
                assert!(
                    status == reqwest::StatusCode::PRECONDITION_FAILED && Instant::now() < deadline,
                    "switchover: {status} {body}"
                );
            }
            if Instant::now() > deadline {
                let url = format!("http://127.0.0.1:{}/cluster", self.nodes[from].rest_port);
                let view = match self.http.get(url).send().await {
                    Ok(r) => r.text().await.unwrap_or_default(),
                    Err(e) => e.to_string(),
                };
                panic!("no synchronous standby for 30 s: {view}");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    fn postmaster(&self, i: usize) -> Option<u32> {
        let pid = std::fs::read_to_string(self.nodes[i].data.join("postmaster.pid")).ok()?;
        pid.lines().next()?.trim().parse().ok()
    }

    /// The data directory of node `i`.
    pub fn data_dir(&self, i: usize) -> &Path {
        &self.nodes[i].data
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            if self.nodes[i].patroni.is_some() {
                // A frozen Patroni must run to die of SIGKILL's reaping.
                self.heal(i);
            }
            self.kill_node(i);
        }
        self.haproxy.kill();
        self.etcd.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn signal(pid: u32, sig: &str) {
    // A process may have exited meanwhile: that is no error here.
    let _ = Command::new("kill")
        .args([sig, &pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

/// The processes whose parent is `parent` (from /proc).
fn children(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    // pid (comm) state ppid ...: comm may hold spaces.
                    let rest = &stat[stat.rfind(')')? + 2..];
                    rest.split(' ').nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn patroni_config(
    scope: &str,
    name: &str,
    pg_port: u16,
    rest_port: u16,
    etcd_port: u16,
    data: &Path,
    bin: &Path,
    dir: &Path,
) -> String {
    format!(
        r#"scope: {scope}
name: {name}
log: {{level: WARNING}}
restapi: {{listen: "127.0.0.1:{rest_port}", connect_address: "127.0.0.1:{rest_port}"}}
etcd3: {{hosts: "127.0.0.1:{etcd_port}"}}
bootstrap:
  dcs:
    ttl: {TTL_S}
    loop_wait: 1
    retry_timeout: 3
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      parameters: {{wal_log_hints: "on", max_connections: 200}}
  initdb: [{{encoding: UTF8}}, {{auth: trust}}]
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: "127.0.0.1:{pg_port}"
  connect_address: "127.0.0.1:{pg_port}"
  data_dir: "{data}"
  bin_dir: "{bin}"
  pgpass: "{dir}/{name}.pgpass"
  authentication:
    superuser: {{username: postgres}}
    replication: {{username: replicator}}
  parameters: {{unix_socket_directories: "{dir}", fsync: "off"}}
"#,
        data = data.display(),
        bin = bin.display(),
        dir = dir.display(),
    )
}

/// HAProxy sends each connection to the node whose Patroni answers
/// `/primary` with 200 twice in a row, checking every 300 ms (a standby
/// being promoted says so a moment before it takes writes); a node taken
/// out has its sessions cut, so no client keeps writing to a demoted
/// primary.
fn haproxy_config(port: u16, nodes: &[Node]) -> String {
    let mut cfg = format!(
        "global\n  maxconn 1000\n\
         defaults\n  mode tcp\n  timeout connect 1s\n  timeout client 1h\n  timeout server 1h\n  timeout check 1s\n\
         listen primary\n  bind 127.0.0.1:{port}\n  option httpchk OPTIONS /primary\n  http-check expect status 200\n  \
         default-server inter 300ms fall 2 rise 2 on-marked-down shutdown-sessions\n"
    );
    for n in nodes {
        cfg.push_str(&format!(
            "  server {} 127.0.0.1:{} check port {}\n",
            n.name, n.pg_port, n.rest_port
        ));
    }
    cfg
}
