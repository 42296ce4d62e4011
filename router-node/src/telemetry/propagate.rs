//! W3C trace context (`traceparent`, `tracestate`) from the client's headers and onto the
//! upstream request's.

use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry_sdk::propagation::TraceContextPropagator;

struct Extract<'a>(&'a HeaderMap);

impl Extractor for Extract<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct Inject<'a>(&'a mut Vec<(HeaderName, HeaderValue)>);

impl Injector for Inject<'_> {
    fn set(&mut self, key: &str, value: String) {
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) else {
            return;
        };
        self.0.retain(|(n, _)| *n != name);
        self.0.push((name, value));
    }
}

/// The client's trace context (an empty context when it sent none or an invalid one).
pub fn extract(headers: &HeaderMap) -> Context {
    TraceContextPropagator::new().extract(&Extract(headers))
}

/// Sets `traceparent` (and `tracestate`) for `cx`, replacing any already in `headers`.
pub fn inject(cx: &Context, headers: &mut Vec<(HeaderName, HeaderValue)>) {
    TraceContextPropagator::new().inject_context(cx, &mut Inject(headers));
}

#[cfg(test)]
mod tests {
    use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
    use opentelemetry::trace::TraceContextExt;

    use super::{extract, inject};

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_client_traceparent_round_trips() {
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("traceparent"),
            HeaderValue::from_static(PARENT),
        );
        let cx = extract(&headers);
        assert!(cx.span().span_context().is_valid());
        assert_eq!(
            cx.span().span_context().trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        let mut out = vec![(
            HeaderName::from_static("traceparent"),
            HeaderValue::from_static("stale"),
        )];
        inject(&cx, &mut out);
        let tp: Vec<_> = out.iter().filter(|(n, _)| n == "traceparent").collect();
        assert_eq!(tp.len(), 1);
        assert_eq!(tp[0].1, PARENT);
    }

    #[test]
    fn a_missing_or_broken_traceparent_gives_no_parent() {
        assert!(!extract(&HeaderMap::new()).span().span_context().is_valid());
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("traceparent"),
            HeaderValue::from_static("00-zz-00-01"),
        );
        assert!(!extract(&headers).span().span_context().is_valid());
    }
}
