//! OpenTelemetry traces: one server span per client request, a client span per upstream
//! attempt, W3C `traceparent` in and out, batched OTLP/HTTP export.
//!
//! Why a module of its own, at the bottom of the layers: the request path (`http`, `routing`)
//! opens spans and records attributes through the small functions here, and those must cost
//! nothing when traces are off, which they are unless the `OTEL_*` environment turns them on
//! ([`settings`]). Off, no OpenTelemetry layer is installed and the spans' target is filtered
//! out of the log layer, so every span macro of [`TARGET`] is a disabled callsite that yields
//! `Span::none()`, and each helper returns at its first check of [`enabled`].
//!
//! With traces on, whether a request is sampled is decided when it arrives ([`sampling`]):
//! an unsampled request gets `Span::none()` too, so it costs what it costs with traces off.
//!
//! The spans never reach the JSON log: the log layer filters [`TARGET`] out, and the
//! OpenTelemetry layer sees nothing else. Export runs on the batch processor's own thread;
//! a full queue or an unreachable collector drops spans, never requests ([`export`]).

pub mod export;
pub mod propagate;
pub mod sampling;
pub mod settings;
pub mod spans;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use sampling::{HeadSampler, Root};

pub use spans::{
    attempt_span, current, event_skip, gen_ai_system, inject, record_error, record_i64, record_str,
    request_span, server_address,
};

/// The `tracing` target of every span and event meant for OpenTelemetry.
pub const TARGET: &str = "switchyard::otel";

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether traces are exported (set once at start-up, before any request).
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

fn set_enabled() {
    ENABLED.store(true, Ordering::Relaxed);
}

static SAMPLER: OnceLock<HeadSampler> = OnceLock::new();

/// Sets the head sampler (once, at start-up, before traces are turned on).
pub fn set_sampler(sampler: HeadSampler) {
    let _ = SAMPLER.set(sampler);
}

/// The head sampler; `parentbased_always_on`, the standard default, until one is set.
fn sampler() -> HeadSampler {
    SAMPLER
        .get()
        .copied()
        .unwrap_or(HeadSampler::ParentBased(Root::AlwaysOn))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_log_filter_can_name_the_trace_target() {
        // `cli::init_tracing` turns this target off in the log layer; a directive that did
        // not parse would let the trace events into the JSON log.
        let off = format!("{}=off", super::TARGET);
        assert!(off.parse::<tracing_subscriber::filter::Directive>().is_ok());
    }
}
