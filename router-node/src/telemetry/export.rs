//! The OTLP/HTTP exporter and the `tracing` layer that feeds it.
//!
//! Export is batched on the SDK's own thread (`BatchSpanProcessor`): a closing span is handed
//! over with a non-blocking send into a bounded queue (`OTEL_BSP_MAX_QUEUE_SIZE`, 2,048 by
//! default) and is dropped when the queue is full, so a slow, full or unreachable collector
//! costs spans, never request time. The exporter's blocking HTTP client lives on that thread
//! too; it was chosen over the gRPC exporter because reqwest and hyper are already in the
//! tree and tonic would add its whole stack.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetryLayer;
use tracing_subscriber::registry::LookupSpan;

/// How long shutdown may wait to hand the last spans over (an unreachable collector must
/// not hold up a stopping node).
const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);

/// Flushes and stops the exporter when dropped: keep it for the life of the process.
pub struct Guard(SdkTracerProvider);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.shutdown_with_timeout(SHUTDOWN_WAIT);
    }
}

/// Builds the exporter and the layer, and marks traces on. Call it outside an async runtime
/// (the blocking HTTP client must not be built on one), once, before the first request.
/// `service_name` overrides the SDK's `unknown_service` when the environment names none.
pub fn install<S>(
    service_name: Option<&'static str>,
) -> Result<(OpenTelemetryLayer<S, SdkTracer>, Guard), String>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    // Endpoint, headers, timeout and compression come from the OTEL_EXPORTER_OTLP_* variables.
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()
        .map_err(|e| format!("cannot build the OTLP exporter: {e}"))?;
    let mut resource = Resource::builder();
    if let Some(name) = service_name {
        resource = resource.with_service_name(name);
    }
    // OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG are applied when a request arrives
    // (`sampling`): a request left out gets no span at all, so every span that reaches the
    // SDK is one to keep.
    let provider = SdkTracerProvider::builder()
        .with_sampler(opentelemetry_sdk::trace::Sampler::AlwaysOn)
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer("switchyard-node");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        // Source locations, thread ids and busy/idle timings are noise on a gateway's spans
        // and cost work on every poll.
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false);
    super::set_enabled();
    Ok((layer, Guard(provider)))
}
