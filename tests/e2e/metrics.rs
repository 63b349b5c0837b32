//! `/metrics`: the series an operator watches move as meson works.

use crate::harness::{Meson, seed_vm};
use reqwest::StatusCode;

/// The sum of `name`'s samples whose labels include every one of `labels`
/// (`key="value"`), from Prometheus's text format.
fn sample(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            (metric == name && labels.iter().all(|want| rest.contains(want)))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

async fn scrape(m: &Meson) -> String {
    let r = m
        .http
        .get(format!("{}/metrics", m.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain"),
        "{:?}",
        r.headers()
    );
    r.text().await.unwrap()
}

#[tokio::test]
async fn the_series_move_as_meson_works() {
    let m = Meson::start().await;
    let before = scrape(&m).await;

    // A VM, read back, a 404, and a gRPC call.
    let r = m.post("/v1/vms", &seed_vm()).await;
    assert_eq!(r.status, StatusCode::CREATED);
    let action = r.body["action"]["id"].as_str().unwrap().to_owned();
    assert_eq!(m.wait_action(&action).await["status"], "success");
    let vm = r.body["vm"]["id"].as_str().unwrap();
    m.get(&format!("/v1/vms/{vm}")).await;
    m.get(&format!("/v1/vms/{}", uuid::Uuid::new_v4())).await;
    let mut grpc = meson_proto::meson::v1::vm_service_client::VmServiceClient::new(
        crate::grpc::channel(&m).await,
    );
    grpc.list_vms(crate::grpc::authed(Default::default(), &m.token))
        .await
        .unwrap();
    // A quote no host can fit counts as a placement failure.
    let mut huge = seed_vm();
    huge["specs"]["req"]["mem"]["capacity"] = 1_048_576.into();
    m.post("/v1/quotes", &huge).await;

    let after = scrape(&m).await;
    let moved = |name: &str, labels: &[&str]| {
        let (b, a) = (sample(&before, name, labels), sample(&after, name, labels));
        assert!(a > b, "{name}{labels:?} did not move: {b} -> {a}\n{after}");
    };
    // Requests by route template (never by id) and status, with durations.
    moved(
        "meson_http_requests_total",
        &[r#"method="POST""#, r#"route="/v1/vms""#, r#"status="201""#],
    );
    moved(
        "meson_http_requests_total",
        &[r#"route="/v1/vms/{id}""#, r#"status="404""#],
    );
    moved(
        "meson_http_request_duration_seconds_count",
        &[r#"route="/v1/vms""#],
    );
    assert!(
        !after.contains(&format!("/v1/vms/{vm}")),
        "an id became a label"
    );
    // The catch-all bucket: which finite bucket a request lands in depends
    // on the machine's load.
    moved(
        "meson_http_request_duration_seconds_bucket",
        &[r#"route="/v1/vms""#, r#"le="+Inf""#],
    );
    moved(
        "meson_grpc_requests_total",
        &[r#"method="/meson.v1.VmService/ListVms""#, r#"code="Ok""#],
    );
    // The action, the job that ran it, and the AtomOS calls it made.
    moved(
        "meson_actions_finished_total",
        &[r#"command="create_vm""#, r#"status="success""#],
    );
    moved(
        "meson_action_duration_seconds_count",
        &[r#"command="create_vm""#],
    );
    moved("meson_job_attempts_total", &[r#"kind="vm_create""#]);
    moved("meson_job_claim_latency_seconds_count", &[]);
    moved("meson_atomos_requests_total", &[r#"outcome="ok""#]);
    moved("meson_atomos_request_duration_seconds_count", &[]);
    moved("meson_placement_failures_total", &[]);
    // Gauges are read from the database at scrape time: the queue is empty
    // now; a job no worker takes makes it one deep.
    assert_eq!(
        sample(&after, "meson_queue_depth", &[r#"state="available""#]),
        0.0,
        "{after}"
    );
    queue_a_job_nobody_runs(&m.dev().pool).await;
    let later = scrape(&m).await;
    assert_eq!(
        sample(&later, "meson_queue_depth", &[r#"state="available""#]),
        1.0,
        "{later}"
    );
    assert_eq!(
        sample(
            &later,
            "meson_jobs",
            &[r#"state="available""#, r#"kind="nobody_runs_this""#]
        ),
        1.0
    );
    m.stop().await;
}

/// Queues a job of a kind no worker registers: it stays available.
async fn queue_a_job_nobody_runs(pool: &meson_db::PgPool) {
    let mut tx = meson_db::begin(pool).await.unwrap();
    meson_db::jobs::enqueue(
        &mut tx,
        &meson_db::jobs::NewJob {
            kind: "nobody_runs_this".into(),
            args: serde_json::json!({}),
            priority: 2,
            max_attempts: 1,
            concurrency_key: None,
            action_id: None,
            tenant_id: None,
            trace_context: None,
        },
    )
    .await
    .unwrap();
    meson_db::commit(tx).await.unwrap();
}
