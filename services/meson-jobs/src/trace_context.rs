//! A job carries the trace context of the request that enqueued it, so the
//! worker's spans (the job, its steps, its AtomOS calls) join the request's
//! trace. Empty (and free) unless traces are exported.

use opentelemetry::propagation::{Extractor, Injector};
use serde_json::{Map, Value};
use std::collections::HashMap;
use tracing_opentelemetry::OpenTelemetrySpanExt;

struct Fields(HashMap<String, String>);

impl Injector for Fields {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), value);
    }
}

struct Stored<'a>(&'a Map<String, Value>);

impl Extractor for Stored<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// The current span's trace context (`traceparent`, `tracestate`), if it
/// belongs to an exported trace.
pub fn current() -> Option<Value> {
    let cx = tracing::Span::current().context();
    let mut fields = Fields(HashMap::new());
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut fields));
    (!fields.0.is_empty()).then(|| serde_json::json!(fields.0))
}

/// Makes `span` a child of the stored trace context.
pub fn continue_trace(span: &tracing::Span, stored: Option<&Value>) {
    if let Some(Value::Object(map)) = stored {
        let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Stored(map)));
        let _ = span.set_parent(parent);
    }
}
