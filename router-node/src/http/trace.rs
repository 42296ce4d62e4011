//! The request span's attributes where a client request ends: a routed answer, an error, or
//! the end of a committed stream. Each function returns at once while traces are off (see
//! `crate::telemetry`).

use actix_web::http::header::HeaderMap;
use tracing::Span;

use super::errors::{ClientFormat, GatewayError};
use crate::routing::{RouteRequest, Routed, RoutedBody};
use crate::telemetry;
use crate::upstream::StreamEnd;

/// The server span of a request in `format`, parented on the client's `traceparent`.
pub fn request_span(format: ClientFormat, headers: &HeaderMap) -> Span {
    let (name, route) = match format {
        ClientFormat::OpenAiChat => ("POST /v1/chat/completions", "/v1/chat/completions"),
        ClientFormat::OpenAiResponses => ("POST /v1/responses", "/v1/responses"),
        ClientFormat::Anthropic => ("POST /v1/messages", "/v1/messages"),
    };
    telemetry::request_span(name, route, headers)
}

/// A routed answer (JSON, or a stream at its commit point), on the current span.
pub fn routed(request_id: &str, req: &RouteRequest, routed: &Routed) {
    let span = telemetry::current();
    if span.is_none() {
        return;
    }
    common(&span, request_id, req);
    let format = routed.provider.config.format;
    telemetry::record_str(&span, "gen_ai.system", telemetry::gen_ai_system(format));
    telemetry::record_str(&span, "gen_ai.response.model", &routed.model);
    telemetry::record_str(&span, "switchyard.connection", &routed.conn.id);
    telemetry::record_str(&span, "switchyard.route_target", &routed.target);
    telemetry::record_i64(&span, "switchyard.attempts", i64::from(routed.attempts));
    if let Some(generation) = routed.probe {
        telemetry::record_i64(
            &span,
            "switchyard.breaker.probe_generation",
            as_i64(generation.0),
        );
    }
    match &routed.body {
        RoutedBody::Json(ok) => {
            telemetry::record_i64(&span, "http.response.status_code", i64::from(ok.status));
            if let Some(u) = &ok.usage {
                usage(&span, u.input, u.output);
            }
        }
        RoutedBody::Stream(_) => {
            telemetry::record_i64(&span, "http.response.status_code", 200);
        }
    }
}

/// A request that ended with Switchyard's error (before or instead of routing).
pub fn error(request_id: &str, key: Option<&str>, model: &str, e: &GatewayError) {
    let span = telemetry::current();
    if span.is_none() {
        return;
    }
    telemetry::record_str(&span, "switchyard.request_id", request_id);
    if !model.is_empty() {
        telemetry::record_str(&span, "gen_ai.request.model", model);
    }
    if let Some(key) = key {
        telemetry::record_str(&span, "switchyard.api_key", key);
    }
    telemetry::record_i64(
        &span,
        "http.response.status_code",
        i64::from(e.status.as_u16()),
    );
    telemetry::record_error(&span, &e.code);
    // Every target's skip reason, as in the combo diagnostics header (`target:reason,…`).
    if let Some(skips) = e
        .headers
        .iter()
        .find(|(k, _)| k.as_str() == "x-switchyard-combo-excluded")
        .and_then(|(_, v)| v.to_str().ok())
    {
        telemetry::record_str(&span, "switchyard.skips", skips);
    }
}

/// The end of a committed stream, on the request's span (held until now by the stream).
pub fn stream_end(span: &Span, end: &StreamEnd) {
    if span.is_none() {
        return;
    }
    if let Some(u) = &end.usage {
        usage(span, u.input, u.output);
    }
    telemetry::record_str(
        span,
        "switchyard.stream.end",
        if end.client_disconnected {
            "client_disconnected"
        } else if end.completed {
            "completed"
        } else {
            "aborted"
        },
    );
    if let Some(abort) = &end.abort {
        telemetry::record_error(span, abort.code());
    } else if end.upstream_error.is_some() {
        telemetry::record_error(span, "upstream_stream_error");
    } else if let Some(se) = &end.stream_error {
        telemetry::record_error(span, &se.error_type);
    }
}

fn common(span: &Span, request_id: &str, req: &RouteRequest) {
    telemetry::record_str(span, "switchyard.request_id", request_id);
    telemetry::record_str(span, "gen_ai.request.model", &req.body.model);
    if let Some(key) = req.key_id() {
        telemetry::record_str(span, "switchyard.api_key", key);
    }
    if let Some(lease) = &req.lease {
        telemetry::record_i64(
            span,
            "switchyard.lease.generation",
            as_i64(lease.generation),
        );
    }
    if req.body.stream {
        telemetry::record_str(span, "switchyard.stream", "true");
    }
}

fn usage(span: &Span, input: Option<u64>, output: Option<u64>) {
    if let Some(n) = input {
        telemetry::record_i64(span, "gen_ai.usage.input_tokens", as_i64(n));
    }
    if let Some(n) = output {
        telemetry::record_i64(span, "gen_ai.usage.output_tokens", as_i64(n));
    }
}

fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
