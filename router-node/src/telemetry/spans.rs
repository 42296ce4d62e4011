//! The spans and the attribute setters the request path calls. Each returns at once (and
//! `Span::none()` for the constructors) while traces are off, and for a request the head
//! sampler left out.
//!
//! Attribute names follow the OpenTelemetry GenAI and HTTP semantic conventions
//! (`gen_ai.*`, `server.address`, `error.type`, `http.*`); Switchyard's own are under
//! `switchyard.*`. They are set with `set_attribute` rather than declared as `tracing`
//! fields: the log layer never sees these spans, so nothing needs them as fields.

use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::trace::{Status, TraceContextExt};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::{TARGET, enabled, propagate};

/// The server span of one client request (`name` is the span name, `POST /v1/messages`),
/// the child of the client's `traceparent` when it sent a valid one.
pub fn request_span(name: &'static str, route: &'static str, headers: &HeaderMap) -> Span {
    if !enabled() {
        return Span::none();
    }
    let parent = propagate::extract(headers);
    let parent_sampled = {
        let cx = parent.span();
        let cx = cx.span_context();
        cx.is_valid().then(|| cx.is_sampled())
    };
    let sampler = super::sampler();
    let draw = if sampler.needs_draw() {
        rand::random::<f64>()
    } else {
        0.0
    };
    if !sampler.keep(parent_sampled, draw) {
        return Span::none();
    }
    let span =
        tracing::info_span!(target: TARGET, "request", otel.name = name, otel.kind = "server");
    if parent_sampled.is_some() {
        let _ = span.set_parent(parent);
    }
    span.set_attribute("http.request.method", "POST");
    span.set_attribute("http.route", route);
    span.set_attribute("gen_ai.operation.name", "chat");
    span
}

/// The client span of one upstream attempt for `model`, a child of the current span (the
/// request's, when the routing future runs inside it); none when the request is not traced.
pub fn attempt_span(model: &str) -> Span {
    if !enabled() || Span::current().is_none() {
        return Span::none();
    }
    let span = tracing::info_span!(
        target: TARGET,
        "attempt",
        otel.name = %format_args!("chat {model}"),
        otel.kind = "client"
    );
    span.set_attribute("gen_ai.operation.name", "chat");
    span.set_attribute("gen_ai.request.model", model.to_owned());
    span
}

/// The current span while traces are on, `Span::none()` otherwise (no lookup at all).
pub fn current() -> Span {
    if enabled() {
        Span::current()
    } else {
        Span::none()
    }
}

/// Sets a string attribute.
pub fn record_str(span: &Span, key: &'static str, value: &str) {
    if enabled() && !span.is_none() {
        span.set_attribute(key, value.to_owned());
    }
}

/// Sets an integer attribute.
pub fn record_i64(span: &Span, key: &'static str, value: i64) {
    if enabled() && !span.is_none() {
        span.set_attribute(key, value);
    }
}

/// Marks the span failed: `error.type` and an error status with the same text.
pub fn record_error(span: &Span, error_type: &str) {
    if enabled() && !span.is_none() {
        span.set_attribute("error.type", error_type.to_owned());
        span.set_status(Status::error(error_type.to_owned()));
    }
}

/// A skipped target, as an event on the current span (the request's).
pub fn event_skip(target: &str, provider: &str, reason: &str) {
    if !enabled() || Span::current().is_none() {
        return;
    }
    tracing::event!(
        target: TARGET,
        tracing::Level::INFO,
        switchyard.route_target = target,
        switchyard.provider = provider,
        switchyard.skip.reason = reason,
        "target skipped"
    );
}

/// Sets `traceparent` on an upstream request's headers to `span`'s context.
pub fn inject(span: &Span, headers: &mut Vec<(HeaderName, HeaderValue)>) {
    if enabled() && !span.is_none() {
        propagate::inject(&span.context(), headers);
    }
}

/// `gen_ai.system` for a provider's wire format.
pub fn gen_ai_system(format: switchyard_shared::config::ProviderFormat) -> &'static str {
    match format {
        switchyard_shared::config::ProviderFormat::Openai => "openai",
        switchyard_shared::config::ProviderFormat::Anthropic => "anthropic",
    }
}

/// `server.address` and `server.port` of a base URL (`https://api.x.com/v1` → `api.x.com`,
/// 443); the port is the scheme's default when the URL names none.
pub fn server_address(base_url: &str) -> (&str, Option<u16>) {
    let (scheme, rest) = base_url.split_once("://").unwrap_or(("", base_url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (host, port) = match authority.strip_prefix('[') {
        // [v6]:port
        Some(v6) => match v6.split_once(']') {
            Some((h, p)) => (h, p.strip_prefix(':')),
            None => (v6, None),
        },
        None => match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    let port = port.and_then(|p| p.parse().ok()).or(match scheme {
        "https" => Some(443),
        "http" => Some(80),
        _ => None,
    });
    (host, port)
}

#[cfg(test)]
mod tests {
    use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};

    use super::{attempt_span, current, inject, request_span, server_address};

    #[test]
    fn with_traces_off_every_span_is_none_and_nothing_goes_upstream() {
        // No test of this crate installs the exporter, so traces are off here.
        assert!(!super::enabled());
        let mut client = HeaderMap::new();
        client.insert(
            HeaderName::from_static("traceparent"),
            HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        );
        let request = request_span("POST /v1/messages", "/v1/messages", &client);
        assert!(request.is_none());
        let _entered = request.enter();
        assert!(attempt_span("m").is_none());
        assert!(current().is_none());
        let mut upstream = Vec::new();
        inject(&current(), &mut upstream);
        assert!(upstream.is_empty());
    }

    #[test]
    fn server_address_takes_the_host_and_port_of_a_base_url() {
        assert_eq!(
            server_address("https://api.openai.com/v1"),
            ("api.openai.com", Some(443))
        );
        assert_eq!(
            server_address("http://127.0.0.1:8080/v1"),
            ("127.0.0.1", Some(8080))
        );
        assert_eq!(server_address("http://[::1]:9/v1"), ("::1", Some(9)));
        assert_eq!(
            server_address("http://u:p@h.example/x"),
            ("h.example", Some(80))
        );
        assert_eq!(server_address("h.example:7"), ("h.example", Some(7)));
    }
}
