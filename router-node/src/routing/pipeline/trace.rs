//! The attempt span: opened around one upstream attempt and its judgement, with the GenAI
//! attributes and Switchyard's decisions (cooldown, breaker, what the driver does next).
//!
//! Kept apart from the steps so each of them gains one call, not a block; every function
//! returns at once while traces are off (see `crate::telemetry`).

use actix_web::http::header::{HeaderName, HeaderValue};
use switchyard_shared::outcome::{BreakerOutcome, CooldownHint};
use tracing::Span;

use super::{Next, TargetCtx};
use crate::actors::ConnHandle;
use crate::routing::dispatch::{RouteRequest, RoutedBody};
use crate::routing::observe::Judged;
use crate::telemetry;

/// The span of one attempt on `conn`, a child of the request's span.
pub fn attempt_span(ctx: &TargetCtx, conn: &ConnHandle) -> Span {
    if !telemetry::enabled() {
        return Span::none();
    }
    let span = telemetry::attempt_span(&ctx.model);
    let config = &ctx.provider.config;
    telemetry::record_str(
        &span,
        "gen_ai.system",
        telemetry::gen_ai_system(config.format),
    );
    let (host, port) = telemetry::server_address(&config.base_url);
    telemetry::record_str(&span, "server.address", host);
    if let Some(port) = port {
        telemetry::record_i64(&span, "server.port", i64::from(port));
    }
    telemetry::record_str(&span, "switchyard.provider", &ctx.provider.id);
    telemetry::record_str(&span, "switchyard.connection", &conn.id);
    telemetry::record_str(&span, "switchyard.route_target", &ctx.key);
    if let Some(generation) = ctx.probe.as_ref().and_then(|p| p.generation()) {
        telemetry::record_str(&span, "switchyard.breaker.decision", "half_open_probe");
        telemetry::record_i64(
            &span,
            "switchyard.breaker.probe_generation",
            as_i64(generation.0),
        );
    }
    span
}

/// The client's forwarded headers plus `traceparent` for the current (attempt) span.
pub fn forward_headers(req: &RouteRequest) -> Vec<(HeaderName, HeaderValue)> {
    let mut headers = req.forward_headers.clone();
    telemetry::inject(&telemetry::current(), &mut headers);
    headers
}

/// A reply: its status, the model that answered and, for JSON, the token usage.
pub fn replied(span: &Span, body: &RoutedBody) {
    if !telemetry::enabled() || span.is_none() {
        return;
    }
    match body {
        RoutedBody::Json(ok) => {
            telemetry::record_i64(span, "http.response.status_code", i64::from(ok.status));
            if let Some(model) = response_model(&ok.body) {
                telemetry::record_str(span, "gen_ai.response.model", &model);
            }
            if let Some(usage) = &ok.usage {
                record_usage(span, usage.input, usage.output);
            }
        }
        RoutedBody::Stream(_) => {
            telemetry::record_i64(span, "http.response.status_code", 200);
            telemetry::record_str(span, "switchyard.stream", "committed");
        }
    }
}

/// Token usage as the GenAI attributes.
pub fn record_usage(span: &Span, input: Option<u64>, output: Option<u64>) {
    if let Some(n) = input {
        telemetry::record_i64(span, "gen_ai.usage.input_tokens", as_i64(n));
    }
    if let Some(n) = output {
        telemetry::record_i64(span, "gen_ai.usage.output_tokens", as_i64(n));
    }
}

/// The judged failure, on the current (attempt) span: `error.type`, the status, and the
/// cooldown and breaker decisions it leads to.
pub fn judged(j: &Judged) {
    if !telemetry::enabled() {
        return;
    }
    let span = Span::current();
    let error_type = match (j.failure.status, &j.failure.code) {
        (_, Some(code)) => code.clone(),
        (Some(status), None) => status.to_string(),
        (None, None) => "transport".to_owned(),
    };
    telemetry::record_error(&span, &error_type);
    if let Some(status) = j.failure.status {
        telemetry::record_i64(&span, "http.response.status_code", i64::from(status));
    }
    let c = &j.classification;
    telemetry::record_str(&span, "switchyard.failure.reason", c.reason.as_str());
    let cooldown = match c.cooldown {
        CooldownHint::None => "none",
        CooldownHint::ScaledBackoff => "scaled_backoff",
        CooldownHint::Fixed(_) => "fixed",
        CooldownHint::Upstream(_) => "upstream_hint",
    };
    telemetry::record_str(&span, "switchyard.cooldown.decision", cooldown);
    if let CooldownHint::Fixed(ms) | CooldownHint::Upstream(ms) = c.cooldown {
        telemetry::record_i64(&span, "switchyard.cooldown.ms", as_i64(ms));
    }
    if !matches!(c.cooldown, CooldownHint::None) {
        let scope = match c.scope {
            switchyard_shared::outcome::LockScope::Model => "model",
            switchyard_shared::outcome::LockScope::Connection => "connection",
            switchyard_shared::outcome::LockScope::Provider => "provider",
        };
        telemetry::record_str(&span, "switchyard.cooldown.scope", scope);
    }
    let breaker = match c.breaker {
        BreakerOutcome::Success => "success",
        BreakerOutcome::Failure(_) if c.skip_provider_breaker => "ignored",
        BreakerOutcome::Failure(_) => "failure",
        BreakerOutcome::Ignore => "ignored",
    };
    telemetry::record_str(&span, "switchyard.breaker.outcome", breaker);
}

/// What the driver does after the failure: `retry`, `skip:<reason>` or `fail`.
pub fn next(span: &Span, next: &Next) {
    if !telemetry::enabled() || span.is_none() {
        return;
    }
    match next {
        Next::Retry => telemetry::record_str(span, "switchyard.next", "retry"),
        Next::Skip(skip) => {
            telemetry::record_str(span, "switchyard.next", "skip");
            telemetry::record_str(span, "switchyard.skip.reason", skip.reason());
        }
        Next::Fail(_) => telemetry::record_str(span, "switchyard.next", "fail"),
    }
}

/// An attempt that ended the request with Switchyard's own error.
pub fn ended(span: &Span, code: &str) {
    telemetry::record_error(span, code);
}

/// The `model` field of a JSON answer, read only while traces are on.
fn response_model(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Model {
        model: Option<String>,
    }
    serde_json::from_slice::<Model>(body).ok()?.model
}

fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
