//! Prometheus metrics: the process's recorder and what `/metrics` serves.
//!
//! Every crate records through the `metrics` facade; this installs the
//! Prometheus recorder once per process and renders it. Series:
//! - `meson_http_requests_total{method,route,status}`,
//!   `meson_http_request_duration_seconds{method,route}`;
//! - `meson_grpc_requests_total{method,code}`,
//!   `meson_grpc_request_duration_seconds{method}`;
//! - `meson_actions_finished_total{command,status}`,
//!   `meson_action_duration_seconds{command,status}`;
//! - `meson_queue_depth{state}` and `meson_jobs{state,kind}` (jobs available
//!   or running), `meson_job_claim_latency_seconds{kind}`,
//!   `meson_job_attempts_total{kind}`, `meson_job_failures_total{kind,outcome}`;
//! - `meson_atomos_requests_total{route,outcome}`,
//!   `meson_atomos_request_duration_seconds{route}`;
//! - `meson_placement_failures_total{reason}`;
//! - `meson_clusters{status}`, `meson_nodes{status}`;
//! - `meson_tenant_month_cost{tenant,currency}`: each tenant's cost so far
//!   this month (UTC), to the cent.
//!
//! Gauges of the database's state (jobs, clusters, nodes, costs) are read when
//! `/metrics` is scraped, so every replica reports the same, current values.

use axum::extract::MatchedPath;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// Requests and calls: a millisecond to half a minute.
const FAST: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// Actions: a tenth of a second to an hour (clusters, upgrades).
const SLOW: &[f64] = &[
    0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

type Labels = Vec<(&'static str, String)>;
static JOBS_SEEN: Mutex<Vec<Labels>> = Mutex::new(Vec::new());
static CLUSTERS_SEEN: Mutex<Vec<Labels>> = Mutex::new(Vec::new());
static NODES_SEEN: Mutex<Vec<Labels>> = Mutex::new(Vec::new());
static COSTS_SEEN: Mutex<Vec<Labels>> = Mutex::new(Vec::new());

/// Sets gauge `name` to each count, and to 0 for the label sets counted
/// before and absent now (an emptied queue reads 0, not its last depth).
fn gauges(
    name: &'static str,
    seen: &Mutex<Vec<Labels>>,
    counts: impl IntoIterator<Item = (Labels, f64)>,
) {
    let Ok(mut seen) = seen.lock() else { return };
    let counts: Vec<(Labels, f64)> = counts.into_iter().collect();
    for labels in seen.iter() {
        if !counts.iter().any(|(l, _)| l == labels) {
            metrics::gauge!(name, labels).set(0.0);
        }
    }
    for (labels, n) in counts {
        metrics::gauge!(name, &labels).set(n);
        if !seen.contains(&labels) {
            seen.push(labels);
        }
    }
}

/// The process's recorder, installed on first use (`None` if another
/// recorder was installed first).
pub fn handle() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full("meson_action_duration_seconds".into()), SLOW)
                .and_then(|b| b.set_buckets_for_metric(Matcher::Suffix("_seconds".into()), FAST));
            match builder.and_then(|b| b.install_recorder()) {
                Ok(h) => Some(h),
                Err(e) => {
                    tracing::warn!(error = %e, "no Prometheus recorder: /metrics stays empty");
                    None
                }
            }
        })
        .as_ref()
}

/// Reads the database's gauges (every tenant's: the system scope), then
/// renders every series in Prometheus's text format.
pub async fn render(pool: &meson_db::PgPool) -> String {
    let Some(h) = handle() else {
        return String::new();
    };
    meson_db::scope::system(async {
        match meson_db::jobs::counts(pool).await {
            Ok(counts) => {
                for state in ["available", "running"] {
                    let depth: i64 = counts.iter().filter(|c| c.0 == state).map(|c| c.2).sum();
                    metrics::gauge!("meson_queue_depth", "state" => state).set(depth as f64);
                }
                gauges(
                    "meson_jobs",
                    &JOBS_SEEN,
                    counts
                        .into_iter()
                        .map(|(state, kind, n)| (vec![("state", state), ("kind", kind)], n as f64)),
                )
            }
            Err(e) => tracing::warn!(error = %e, "could not count jobs for /metrics"),
        }
        match meson_db::clusters::status_counts(pool).await {
            Ok((clusters, nodes)) => {
                let by_status = |v: Vec<(String, i64)>| {
                    v.into_iter()
                        .map(|(status, n)| (vec![("status", status)], n as f64))
                        .collect::<Vec<_>>()
                };
                gauges("meson_clusters", &CLUSTERS_SEEN, by_status(clusters));
                gauges("meson_nodes", &NODES_SEEN, by_status(nodes));
            }
            Err(e) => tracing::warn!(error = %e, "could not count clusters for /metrics"),
        }
        match meson_db::usage::month_costs(pool).await {
            Ok(costs) => gauges(
                "meson_tenant_month_cost",
                &COSTS_SEEN,
                costs.into_iter().map(|(tenant, currency, cost)| {
                    (vec![("tenant", tenant), ("currency", currency)], cost)
                }),
            ),
            Err(e) => tracing::warn!(error = %e, "could not read this month's costs for /metrics"),
        }
    })
    .await;
    h.run_upkeep();
    h.render()
}

/// Counts and times every REST request by route (its template, so ids do
/// not make new series) and status. Runs per route, after routing.
pub async fn http(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |m| m.as_str().to_owned());
    let method = req.method().to_string();
    let started = Instant::now();
    let res = next.run(req).await;
    metrics::counter!("meson_http_requests_total",
        "method" => method.clone(), "route" => route.clone(),
        "status" => res.status().as_u16().to_string())
    .increment(1);
    metrics::histogram!("meson_http_request_duration_seconds",
        "method" => method, "route" => route)
    .record(started.elapsed().as_secs_f64());
    res
}
