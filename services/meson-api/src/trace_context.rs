//! W3C trace context (`traceparent`) on incoming requests: the request's
//! span continues the caller's trace. A no-op unless traces are exported
//! (mesond installs the propagator and the OpenTelemetry layer then).

use axum::http::HeaderMap;
use opentelemetry::propagation::Extractor;
use tracing_opentelemetry::OpenTelemetrySpanExt;

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// Makes `span` a child of the trace `headers` carry, if any.
pub fn continue_trace(span: &tracing::Span, headers: &HeaderMap) {
    let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Headers(headers)));
    let _ = span.set_parent(parent);
}
