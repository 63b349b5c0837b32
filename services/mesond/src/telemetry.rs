//! Logs and traces.
//!
//! Logs: human-readable in dev, JSON in deployments, filtered by
//! `MESON_LOG` (or `RUST_LOG`). Traces: when `OTEL_EXPORTER_OTLP_ENDPOINT`
//! is set, every span is also exported over OTLP (gRPC) as the service
//! `OTEL_SERVICE_NAME` (default `mesond-<mode>`), with W3C trace context
//! taken from incoming `traceparent` headers and carried into jobs, so one
//! trace follows a create from the HTTP request through the worker to
//! AtomOS.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// What must outlive the process's work: the trace exporter, flushed on drop.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Sends every span still buffered.
    pub fn flush(&self) {
        if let Some(p) = &self.provider
            && let Err(e) = p.force_flush()
        {
            tracing::warn!(error = %e, "flushing traces failed");
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take() {
            let _ = p.shutdown();
        }
    }
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Sets up logging, and trace export when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
pub fn init(json: bool, mode: &str) -> Telemetry {
    let service = var("OTEL_SERVICE_NAME").unwrap_or_else(|| format!("mesond-{mode}"));
    init_with(
        json,
        &service,
        var("OTEL_EXPORTER_OTLP_ENDPOINT").as_deref(),
    )
}

/// [`init`] with the OTLP endpoint given (tests).
pub fn init_with(json: bool, service: &str, otlp: Option<&str>) -> Telemetry {
    let filter = || {
        EnvFilter::try_from_env("MESON_LOG")
            .or_else(|_| EnvFilter::try_from_default_env())
            .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_http=warn,h2=warn"))
    };
    // Colours only on a terminal: a log written to a file or a pipe stays
    // plain text (and `NO_COLOR` turns them off anyway).
    let colours = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colours);
    let fmt = if json {
        fmt.json().flatten_event(true).boxed()
    } else {
        fmt.compact().boxed()
    };
    let provider = otlp.and_then(|endpoint| match tracer_provider(endpoint, service) {
        Ok(p) => Some(p),
        Err(e) => {
            // Logged once the subscriber is up, below.
            eprintln!("mesond: no trace export to {endpoint}: {e}");
            None
        }
    });
    let otel = provider.as_ref().map(|p| {
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        tracing_opentelemetry::layer().with_tracer(p.tracer("meson"))
    });
    let _ = tracing_subscriber::registry()
        .with(filter())
        .with(fmt)
        .with(otel)
        .try_init();
    if let (Some(endpoint), Some(_)) = (otlp, &provider) {
        tracing::info!(%endpoint, %service, "exporting traces over OTLP");
    }
    Telemetry { provider }
}

fn tracer_provider(
    endpoint: &str,
    service: &str,
) -> Result<SdkTracerProvider, opentelemetry_otlp::ExporterBuildError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()?;
    // Batched on the tokio runtime (the gRPC exporter needs one).
    let batch =
        opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor::builder(
            exporter,
            opentelemetry_sdk::runtime::Tokio,
        )
        .build();
    Ok(SdkTracerProvider::builder()
        .with_span_processor(batch)
        .with_resource(
            Resource::builder()
                .with_service_name(service.to_owned())
                .build(),
        )
        .build())
}
