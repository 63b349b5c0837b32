//! Starts a whole meson (API, workers, simulator) per test and talks to it over HTTP.

use meson_db::testing::TestDatabase;
use mesond::dev::{Dev, DevOptions};
use reqwest::StatusCode;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

#[path = "seeds.rs"]
mod seeds;

pub const SSH_KEY: &str = seeds::SSH_KEY;

/// The canonical VM payload (see [`seeds::seed_vm`]).
pub fn seed_vm() -> Value {
    seeds::seed_vm()
}

/// The canonical KaaS payload (see [`seeds::seed_kaas`]).
pub fn seed_kaas() -> Value {
    seeds::seed_kaas()
}

/// [`seed_kaas`] with one worker node (its pool may grow to three).
pub fn seed_kaas_one_worker() -> Value {
    let mut body = seed_kaas();
    body["req"]["nodepool"][0]["desired_nodes"] = 1.into();
    body["req"]["nodepool"][0]["min_nodes"] = 1.into();
    body
}

pub struct Meson {
    pub dev: Option<Dev>,
    pub http: reqwest::Client,
    pub base: String,
    pub token: String,
    dir: PathBuf,
    db: TestDatabase,
}

pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
    pub headers: reqwest::header::HeaderMap,
}

impl Reply {
    /// The fields an `invalid_input` answer names, sorted.
    pub fn rejected_fields(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.body["error"]["details"]["fields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["name"].as_str())
            .collect();
        names.sort_unstable();
        names
    }
}

impl Meson {
    /// The database behind this meson, for what a test must arrange
    /// underneath it (a lock held, a row read).
    pub fn database(&self) -> &meson_db::PgPool {
        &self.db.pool
    }

    pub async fn start() -> Meson {
        Meson::start_with(|_| {}).await
    }

    /// [`Meson::start`] with some of its options changed first.
    pub async fn start_with(change: impl FnOnce(&mut DevOptions)) -> Meson {
        let db = TestDatabase::new().await;
        let dir = std::env::temp_dir().join(format!("meson-e2e-{}", uuid::Uuid::new_v4().simple()));
        let mut opts = DevOptions {
            database_url: Some(db.url.clone()),
            http_addr: "127.0.0.1:0".parse().expect("addr"),
            grpc_addr: "127.0.0.1:0".parse().expect("addr"),
            autoscaler: Some(mesond::server::AutoscalerSettings {
                listen: "127.0.0.1:0".parse().expect("addr"),
                public: None,
                tls_names: vec!["localhost".into()],
            }),
            data_dir: dir.clone(),
            jwt_secret: None,
            jwt_issuer: "meson-test".into(),
            sim_boot: Duration::from_millis(100),
            vm_poll: Duration::from_millis(25),
            worker: meson_jobs::WorkerConfig {
                poll_interval: Duration::from_millis(200),
                retry: meson_jobs::engine::RetryPolicy {
                    base: Duration::from_millis(20),
                    cap: Duration::from_millis(200),
                    extra_undo_attempts: 5,
                },
                ..meson_jobs::WorkerConfig::default()
            },
            secrets_key: None,
            node_ready_timeout: Duration::from_secs(20),
            // Tests drive the reconciler's passes themselves; those about
            // its loop shorten this with `start_with`.
            reconcile_interval: Duration::from_secs(3600),
            repair: Default::default(),
            backups_per_host: 2,
            // Tests poll hard; those about rate limits lower these.
            api: meson_api::http::ApiConfig {
                rate_limits: meson_api::ratelimit::RateLimitConfig {
                    api_per_minute: 100_000,
                    polling_per_minute: 100_000,
                },
                ..Default::default()
            },
            // The defaults, with room for the tests that ask for nodes no
            // host can hold (128 vCPUs, 1 TiB) to see placement refuse them.
            quotas: meson_core::quota::Resources {
                vcpus: 1024,
                ram_mib: 4 << 20,
                ..meson_core::quota::Resources::DEFAULT_QUOTAS
            },
            fallback: Default::default(),
            connections: Default::default(),
            // Tests that want Elemento's daemons set them.
            elemento: None,
        };
        change(&mut opts);
        let dev = Dev::start(opts).await.expect("meson starts");
        Meson {
            base: format!("http://{}", dev.http_addr),
            token: dev.token.clone(),
            http: reqwest::Client::new(),
            dev: Some(dev),
            dir,
            db,
        }
    }

    pub fn dev(&self) -> &Dev {
        self.dev.as_ref().expect("running")
    }

    pub fn data_dir(&self) -> &std::path::Path {
        &self.dir
    }

    pub fn sim(&self) -> &atomos_sim::Simulator {
        &self.dev().simulator
    }

    /// The first `#cloud-config` user-data on the simulated hosts that
    /// holds `needle`, if any.
    pub fn user_data_containing(&self, needle: &str) -> Option<String> {
        self.sim()
            .hosts()
            .iter()
            .flat_map(|h| h.inventory().volumes)
            .flat_map(|v| v.files)
            .map(|f| f.content)
            .find(|c| c.starts_with("#cloud-config") && c.contains(needle))
    }

    /// The simulated host of `vm` (a VM as the API shows it): (the host,
    /// the prefix of the names of the VM's things on it).
    pub fn vm_host(&self, vm: &Value) -> (atomos_sim::SimHost, String) {
        let host = self
            .sim()
            .hosts()
            .into_iter()
            .find(|h| h.name() == vm["host"].as_str().unwrap())
            .expect("the VM's host");
        let id = meson_core::VmId(vm["id"].as_str().unwrap().parse().expect("a VM id"));
        // `vm-<id>-`: the VM's name and its volumes' begin so.
        (host, meson_core::naming::vm_volume_prefix(id))
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Reply {
        let res = req.send().await.expect("request sent");
        let status = res.status();
        let headers = res.headers().clone();
        let text = res.text().await.expect("body");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Reply {
            status,
            body,
            headers,
        }
    }

    /// `method path` with `token`, and `body` as JSON.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<&Value>,
    ) -> Reply {
        let req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(token);
        self.send(match body {
            Some(b) => req.json(b),
            None => req,
        })
        .await
    }

    /// [`Meson::call`], acting in `organization` (`Meson-Organization`).
    pub async fn call_in(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        organization: &str,
        body: Option<&Value>,
    ) -> Reply {
        let req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(token)
            .header("Meson-Organization", organization);
        self.send(match body {
            Some(b) => req.json(b),
            None => req,
        })
        .await
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.call(reqwest::Method::GET, path, &self.token, None)
            .await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        self.call(reqwest::Method::POST, path, &self.token, Some(body))
            .await
    }

    pub async fn patch(&self, path: &str, body: &Value) -> Reply {
        self.call(reqwest::Method::PATCH, path, &self.token, Some(body))
            .await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.call(reqwest::Method::DELETE, path, &self.token, None)
            .await
    }

    /// A token from the dev issuer for any tenant, subject and role.
    pub fn token(&self, tenant: &str, subject: &str, role: meson_api::Role) -> String {
        let secret = std::fs::read_to_string(self.dir.join("jwt-secret")).expect("jwt-secret");
        meson_api::Auth::hs256(secret.trim().as_bytes(), "meson-test").issue(
            tenant,
            subject,
            role,
            chrono::Duration::minutes(30),
        )
    }

    /// [`Meson::token`], for a subject whose email the issuer verified.
    pub fn token_with_email(
        &self,
        tenant: &str,
        subject: &str,
        role: meson_api::Role,
        email: &str,
    ) -> String {
        let secret = std::fs::read_to_string(self.dir.join("jwt-secret")).expect("jwt-secret");
        meson_api::Auth::hs256(secret.trim().as_bytes(), "meson-test").issue_with_email(
            tenant,
            subject,
            role,
            Some(email),
            chrono::Duration::minutes(30),
        )
    }

    /// Polls an action until it is no longer running (bounded: 30 s).
    pub async fn wait_action(&self, id: &str) -> Value {
        self.wait_action_for(id, Duration::from_secs(30)).await
    }

    /// Polls an action until it is no longer running, for up to `limit`.
    pub async fn wait_action_for(&self, id: &str, limit: Duration) -> Value {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let r = self.get(&format!("/v1/actions/{id}")).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
            if r.body["action"]["status"] != "running" {
                return r.body["action"].clone();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "action {id} still running after {limit:?}: {}",
                r.body
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Creates a cluster and waits (up to a minute) until it runs; returns its id.
    pub async fn running_cluster(&self, body: &Value) -> String {
        let r = self.post("/v1/clusters", body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let id = r.body["cluster"]["id"].as_str().unwrap().to_owned();
        let done = self
            .wait_action_for(
                r.body["action"]["id"].as_str().unwrap(),
                Duration::from_secs(60),
            )
            .await;
        assert_eq!(done["status"], "success", "{done}");
        id
    }

    /// `GET /v1/clusters/{id}`'s cluster.
    pub async fn cluster(&self, id: &str) -> Value {
        let r = self.get(&format!("/v1/clusters/{id}")).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        r.body["cluster"].clone()
    }

    /// `GET /v1/clusters/{id}/nodes`'s nodes.
    pub async fn cluster_nodes(&self, id: &str) -> Vec<Value> {
        let r = self.get(&format!("/v1/clusters/{id}/nodes")).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        r.body["nodes"].as_array().unwrap().clone()
    }

    /// The commands of a cluster's actions, newest first.
    pub async fn cluster_commands(&self, id: &str) -> Vec<String> {
        let r = self
            .get(&format!("/v1/clusters/{id}/actions?per_page=50"))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        r.body["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["command"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The VMs on every simulated host whose name marks them as this
    /// cluster's nodes.
    pub fn cluster_vms(&self, cluster: &str) -> Vec<atomos_sim::SimVm> {
        let prefix = format!("k{}", &cluster.replace('-', "")[..12]);
        self.sim()
            .hosts()
            .iter()
            .flat_map(|h| h.inventory().vms)
            .filter(|v| v.name.starts_with(&prefix))
            .collect()
    }

    /// Injects a fault into one simulated host through its control endpoint.
    pub async fn fault(&self, host: &str, body: &Value) {
        let r = self
            .http
            .post(format!("{}/faults/{host}", self.sim().control_url()))
            .json(body)
            .send()
            .await
            .expect("control endpoint");
        assert_eq!(r.status(), StatusCode::OK, "{:?}", r.text().await);
    }

    /// Every VM and volume on every simulated host.
    pub fn inventory_counts(&self) -> (usize, usize) {
        self.sim()
            .hosts()
            .iter()
            .map(|h| h.inventory())
            .fold((0, 0), |(v, d), i| (v + i.vms.len(), d + i.volumes.len()))
    }

    /// Every network on every simulated host, with the host's name.
    pub fn host_networks(&self) -> Vec<(String, atomos_sim::SimNetwork)> {
        self.sim()
            .hosts()
            .iter()
            .flat_map(|h| {
                let name = h.name().to_owned();
                h.inventory()
                    .networks
                    .into_iter()
                    .map(move |n| (name.clone(), n))
            })
            .collect()
    }

    /// Sets every simulated host's boot time.
    pub fn set_boot_time(&self, d: Duration) {
        for h in self.sim().hosts() {
            h.set_boot_time(d);
        }
    }

    pub async fn stop(mut self) {
        if let Some(dev) = self.dev.take() {
            dev.shutdown().await.expect("clean shutdown");
        }
    }
}

impl Drop for Meson {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The AtomOS name of the dev tenant's VM `id`.
pub fn vm_atomos_name(id: &str) -> String {
    meson_core::naming::vm_atomos_name(
        meson_core::VmId(id.parse().expect("a VM id")),
        &meson_core::TenantId("dev".into()),
    )
}
