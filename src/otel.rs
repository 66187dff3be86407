//! OpenTelemetry export (the `otel` cargo feature): the request spans of [`crate::telemetry`]
//! go to an OTLP/gRPC collector, each parented on the W3C `traceparent` its client sent, so a
//! call shows up inside the caller's trace.
use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

use crate::error::BoxError;

/// The exporting pipeline; [`Otel::shutdown`] flushes what is still queued.
pub struct Otel {
    provider: SdkTracerProvider,
}

impl Otel {
    /// A pipeline batching spans to the collector at `endpoint` (e.g. `http://collector:4317`);
    /// the `OTEL_BSP_*` variables tune the batching. Must run inside the tokio runtime.
    pub fn new(endpoint: &str) -> Result<Self, BoxError> {
        let exporter = SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .build()
            .map_err(|e| format!("--otlp-endpoint {endpoint}: {e}"))?;
        let provider = SdkTracerProvider::builder()
            .with_resource(Resource::builder().with_service_name("a2a-server").build())
            .with_batch_exporter(exporter)
            .build();
        crate::telemetry::export_call_spans();
        Ok(Self { provider })
    }

    /// The `tracing` layer that turns spans into OpenTelemetry spans.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    {
        tracing_opentelemetry::layer().with_tracer(self.provider.tracer("a2a-server"))
    }

    /// Exports what is queued and stops.
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown() {
            eprintln!("a2a-server: flushing OpenTelemetry spans failed: {error}");
        }
    }
}

/// Makes `span` a child of the remote span a W3C `traceparent` names (ignored if malformed).
pub fn set_parent(span: &tracing::Span, traceparent: &str) {
    let carrier = HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
    let parent = TraceContextPropagator::new().extract(&carrier);
    let _ = span.set_parent(parent);
}
