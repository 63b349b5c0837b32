//! Traces over OTLP: one VM create, from the HTTP request (continuing the
//! caller's `traceparent`) through the worker's job and steps to the AtomOS
//! calls, arrives at an OTLP receiver as spans of one trace.
//!
//! A test binary of its own: the trace exporter is process-wide.

#[path = "../e2e/harness.rs"]
#[allow(dead_code)]
mod harness;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A span as received: its trace, its id, its parent, its name, its attributes.
#[derive(Clone, Debug)]
struct Received {
    service: String,
    trace: String,
    id: String,
    parent: String,
    name: String,
    attributes: Vec<(String, String)>,
}

#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<Received>>>);

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        req: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut got = self.0.lock().unwrap();
        for rs in req.into_inner().resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|a| a.key == "service.name")
                .and_then(|a| a.value.as_ref())
                .map(|v| format!("{:?}", v.value))
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    got.push(Received {
                        service: service.clone(),
                        trace: hex(&s.trace_id),
                        id: hex(&s.span_id),
                        parent: hex(&s.parent_span_id),
                        name: s.name,
                        attributes: s
                            .attributes
                            .iter()
                            .map(|a| {
                                let v = a.value.as_ref().map(|v| format!("{:?}", v.value));
                                (a.key.clone(), v.unwrap_or_default())
                            })
                            .collect(),
                    });
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_create_is_one_trace_from_the_request_to_atomos() {
    // The receiver, on loopback.
    let receiver = Receiver::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let server = receiver.clone();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(server))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await
    });
    let telemetry = mesond::telemetry::init_with(false, "mesond-test", Some(&endpoint));

    let m = harness::Meson::start().await;
    // The caller's own trace: meson's spans must continue it.
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let r = m
        .http
        .post(format!("{}/v1/vms", m.base))
        .bearer_auth(&m.token)
        .header("traceparent", format!("00-{trace}-{caller_span}-01"))
        .header("x-correlation-id", "otel-create-1")
        .json(&harness::seed_vm())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let body: serde_json::Value = r.json().await.unwrap();
    let action = body["action"]["id"].as_str().unwrap().to_owned();
    assert_eq!(m.wait_action(&action).await["status"], "success");

    // Everything buffered goes out; wait for it to arrive.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let spans = loop {
        telemetry.flush();
        let spans: Vec<Received> = receiver
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.trace == trace)
            .cloned()
            .collect();
        let names = |n: &str| spans.iter().any(|s| s.name == n);
        if names("http") && names("job") && names("step") && names("atomos") {
            break spans;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the trace is incomplete: {:#?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };

    // The request's span is the caller's child, and carries who and what.
    let http = spans
        .iter()
        .find(|s| s.name == "http" && s.parent == caller_span)
        .unwrap_or_else(|| panic!("no http span under the caller's: {spans:#?}"));
    let attr = |s: &Received, k: &str| {
        s.attributes
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert!(
        attr(http, "correlation_id").contains("otel-create-1"),
        "{http:?}"
    );
    assert!(attr(http, "tenant").contains("dev"), "{http:?}");
    assert!(attr(http, "operation").contains("vm_create"), "{http:?}");
    assert!(http.service.contains("mesond-test"), "{http:?}");

    // The worker's job joined the trace, with the action; its steps are its
    // children, and the AtomOS calls hang under the steps.
    let job = spans
        .iter()
        .find(|s| s.name == "job" && attr(s, "kind").contains("vm_create"))
        .unwrap_or_else(|| panic!("no vm_create job span: {spans:#?}"));
    assert!(attr(job, "action_id").contains(&action), "{job:?}");
    let ids: std::collections::HashSet<&str> = spans.iter().map(|s| s.id.as_str()).collect();
    let steps: Vec<&Received> = spans
        .iter()
        .filter(|s| s.name == "step" && s.parent == job.id)
        .collect();
    assert!(steps.len() >= 4, "{steps:#?}");
    let atomos: Vec<&Received> = spans.iter().filter(|s| s.name == "atomos").collect();
    assert!(
        atomos
            .iter()
            .any(|a| steps.iter().any(|s| s.id == a.parent)),
        "no AtomOS call under a step: {atomos:#?}"
    );
    assert!(
        atomos.iter().any(|a| attr(a, "route").contains("register")),
        "{atomos:#?}"
    );
    // Every span's parent is in the trace, or is the caller's span.
    for s in &spans {
        assert!(
            s.parent == caller_span || ids.contains(s.parent.as_str()),
            "a span outside the tree: {s:?}"
        );
    }
    m.stop().await;
}
