//! A client request's one end, the edge's logging phase: [`finish`] writes the access line,
//! books usage and moves the metrics, records the trace span's end and stops the request
//! timer, once, whichever way the request ended: refused before routing, answered with JSON,
//! a committed stream that ended (plain or with continuation), or a failure sent in band after
//! an early commit.
//!
//! Why one place: the JSON, stream and seamed paths each wrote their own end (eleven timer
//! stops, five error lines, four usage writes), and a field added to one line was missing from
//! the others. What stays with the paths is what is theirs: releasing permits and telling a
//! connection of a failure after the commit (routing's business), and per segment of a
//! seamed stream, booking that segment's usage on its own connection ([`segment_ended`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::HttpResponse;
use switchyard_shared::sse::Usage;
use tracing::Span;

use super::errors::GatewayError;
use super::seam_log::{self, SegmentRecord};
use super::trace;
use crate::access_log;
use crate::actors::ProviderHandle;
use crate::metrics::RequestTimer;
use crate::routing::{self, RouteRequest, Routed, RoutedBody, SideCall};
use crate::runtime::Runtime;
use crate::upstream::StreamEnd;
use crate::upstream::seams::SeamsEnd;
use crate::usage_ledger::{self, Booking};

/// A client request from its first byte to its end: its id, when it started, and the request
/// timer that [`finish`] stops.
pub struct RequestCtx {
    pub request_id: String,
    pub started: Instant,
    timer: RequestTimer,
}

impl RequestCtx {
    pub fn new(request_id: String, started: Instant, timer: RequestTimer) -> Self {
        Self {
            request_id,
            started,
            timer,
        }
    }

    /// A stream's commit point: the gateway's overhead is measured up to here.
    pub fn commit(&mut self, upstream: Duration) {
        self.timer.commit(upstream);
    }
}

/// What a committed stream's access line keeps from its commit point (the first segment's,
/// for a stream with continuation).
pub struct StreamLine {
    pub key_id: Option<String>,
    /// The model the client asked for.
    pub model: String,
    pub target: String,
    pub connection: String,
    pub attempts: u32,
    /// Time to first content of the committed attempt.
    pub ttft_ms: u64,
    /// Truncations inside the stream recovery hold reopened before this stream.
    pub recovered: u32,
    pub dropped: Option<String>,
    pub emulated: Option<String>,
}

impl StreamLine {
    /// The line's fields of `routed`, a stream committed after `ttft_ms` and `recovered`
    /// reopens.
    pub fn of(req: &RouteRequest, routed: &Routed, ttft_ms: u64, recovered: u32) -> Self {
        Self {
            key_id: req.key_id().map(str::to_owned),
            model: req.body.model.clone(),
            target: routed.target.clone(),
            connection: routed.conn.id.to_string(),
            attempts: routed.attempts,
            ttft_ms,
            recovered,
            dropped: routed
                .translation
                .as_ref()
                .and_then(|t| t.dropped())
                .map(str::to_owned),
            emulated: routed
                .translation
                .as_ref()
                .and_then(|t| t.emulated())
                .map(str::to_owned),
        }
    }
}

/// The upstream call an answer's usage and stream metrics belong to.
pub struct Served<'a> {
    pub provider: &'a ProviderHandle,
    /// The model the provider served.
    pub model: &'a Arc<str>,
    pub connection: &'a Arc<str>,
    /// A multi-call combo's other calls, booked on their own connections.
    pub side_calls: &'a [SideCall],
}

/// How a request ended.
pub enum End<'a> {
    /// Switchyard's error, before or instead of an upstream's answer: in the response, or
    /// after an early commit as the stream's one error event.
    Error {
        key: Option<&'a str>,
        model: &'a str,
        error: &'a GatewayError,
        upstream: Duration,
    },
    /// An upstream's JSON answer, to a JSON request or to a stream request.
    Json {
        req: &'a RouteRequest,
        routed: &'a Routed,
    },
    /// A committed stream that ended.
    Stream {
        line: &'a StreamLine,
        served: Served<'a>,
        end: &'a StreamEnd,
        span: &'a Span,
    },
    /// A stream with continuation that ended; each segment was booked as it ended.
    Seamed {
        line: &'a StreamLine,
        segments: &'a [SegmentRecord],
        seams: &'a SeamsEnd,
        span: &'a Span,
    },
}

/// What the client gets: a response still to send (the timer runs until its body has gone
/// out), or a body already sent ([`Sent`]: the timer stops now).
pub trait Answer {
    type Out;
    fn close(self, timer: RequestTimer, status: u16, upstream: Duration) -> Self::Out;
}

impl Answer for HttpResponse {
    type Out = HttpResponse;
    fn close(self, timer: RequestTimer, _status: u16, upstream: Duration) -> HttpResponse {
        timer.finish_with(self, upstream)
    }
}

/// The body went out already (a stream, or an error event after an early commit).
pub struct Sent;

impl Answer for Sent {
    type Out = ();
    fn close(self, timer: RequestTimer, status: u16, upstream: Duration) {
        timer.finish(status, upstream);
    }
}

/// The one end of a client request: the access line, usage and metrics, the trace span and
/// the request timer, once.
pub fn finish<A: Answer>(ctx: RequestCtx, rt: &Runtime, end: End<'_>, answer: A) -> A::Out {
    let RequestCtx {
        request_id,
        started,
        timer,
    } = ctx;
    let (status, upstream) = match end {
        End::Error {
            key,
            model,
            error,
            upstream,
        } => {
            trace::error(&request_id, key, model, error);
            error_line(&request_id, key, model, error, started);
            (error.status.as_u16(), upstream)
        }
        End::Json { req, routed } => {
            trace::routed(&request_id, req, routed);
            json_line(&request_id, req, routed, started);
            book_json(rt, req.key_id(), routed);
            let status = match &routed.body {
                RoutedBody::Json(ok) => ok.status,
                RoutedBody::Stream(_) => 200,
            };
            (status, req.upstream_wait.get())
        }
        End::Stream {
            line,
            served,
            end,
            span,
        } => {
            let tokens = routing::with_side_usage(end.usage, served.side_calls);
            stream_line(&request_id, started, line, None, end, tokens.as_ref());
            segment_ended(rt, line.key_id.as_deref(), &served, end);
            trace::stream_end(span, end);
            (200, Duration::ZERO)
        }
        End::Seamed {
            line,
            segments,
            seams,
            span,
        } => {
            let end = seam_log::merged_end(segments, seams);
            let seamed = (segments, seams);
            stream_line(
                &request_id,
                started,
                line,
                Some(seamed),
                &end,
                end.usage.as_ref(),
            );
            seam_log::count_decisions(rt, seams);
            trace::stream_end(span, &end);
            (200, Duration::ZERO)
        }
    };
    answer.close(timer, status, upstream)
}

/// One upstream stream's bookkeeping when it ends (a plain stream, or one segment of a
/// stream with continuation): its provider's stream metrics and its usage on its own
/// connection, with the multi-call combo's other calls on theirs.
pub fn segment_ended(rt: &Runtime, key: Option<&str>, served: &Served<'_>, end: &StreamEnd) {
    rt.table
        .metrics
        .stream_end(served.provider.idx, served.model, end);
    usage_ledger::record(
        rt,
        Booking {
            key,
            model: served.model,
            provider: &served.provider.id,
            connection: served.connection,
        },
        end.usage.as_ref(),
    );
    book_side_calls(rt, key, served.side_calls);
}

/// The token usage of a routed JSON answer (metrics and the ledger), and of the multi-call
/// combo's other calls that produced it.
fn book_json(rt: &Runtime, key: Option<&str>, routed: &Routed) {
    let RoutedBody::Json(ok) = &routed.body else {
        return;
    };
    if let Some(usage) = &ok.usage {
        rt.table
            .metrics
            .usage(routed.provider.idx, &routed.model, usage);
    }
    usage_ledger::record(
        rt,
        Booking {
            key,
            model: &routed.model,
            provider: &routed.provider.id,
            connection: &routed.conn.id,
        },
        ok.usage.as_ref(),
    );
    book_side_calls(rt, key, &routed.side_calls);
}

/// Books each side call of a multi-call combo on its own connection: a fusion panel member
/// or an earlier pipeline step is the client's usage too, but not the answering connection's.
fn book_side_calls(rt: &Runtime, key: Option<&str>, calls: &[SideCall]) {
    for call in calls {
        rt.table
            .metrics
            .usage(call.provider.idx, &call.model, &call.usage);
        usage_ledger::record(
            rt,
            Booking {
                key,
                model: &call.model,
                provider: &call.provider.id,
                connection: &call.connection,
            },
            Some(&call.usage),
        );
    }
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn json_line(request_id: &str, req: &RouteRequest, routed: &Routed, started: Instant) {
    let Some(mut line) = access_log::Line::start("request") else {
        return;
    };
    let total = started.elapsed();
    let upstream = req.upstream_wait.get();
    let own = match &routed.body {
        RoutedBody::Json(ok) => ok.usage,
        RoutedBody::Stream(_) => None,
    };
    // The whole request's tokens: a multi-call combo's other calls included.
    let usage = routing::with_side_usage(own, &routed.side_calls);
    line.str("request_id", request_id)
        .str("api_key", req.key_id().unwrap_or("-"))
        .str("model", &req.body.model)
        .str("route_target", &routed.target)
        .str("connection", &routed.conn.id)
        .u64("attempts", u64::from(routed.attempts))
        .u64("status", 200)
        .bool("stream", false)
        .u64("duration_ms", millis(total))
        .u64("upstream_ms", millis(upstream))
        .u64(
            "overhead_us",
            u64::try_from(total.saturating_sub(upstream).as_micros()).unwrap_or(u64::MAX),
        )
        .u64(
            "input_tokens",
            usage.as_ref().and_then(|u| u.input).unwrap_or(0),
        )
        .u64(
            "output_tokens",
            usage.as_ref().and_then(|u| u.output).unwrap_or(0),
        );
    if let Some(dropped) = routed.translation.as_ref().and_then(|t| t.dropped()) {
        line.str("dropped_params", dropped);
    }
    if let Some(emulated) = routed.translation.as_ref().and_then(|t| t.emulated()) {
        line.str("emulated_params", emulated);
    }
    line.finish();
}

/// A committed stream's line; with `seamed`, the continuation's fields too (`seams`, the
/// connections of every segment, what the continuation came to).
fn stream_line(
    request_id: &str,
    started: Instant,
    first: &StreamLine,
    seamed: Option<(&[SegmentRecord], &SeamsEnd)>,
    end: &StreamEnd,
    tokens: Option<&Usage>,
) {
    let Some(mut line) = access_log::Line::start("request") else {
        return;
    };
    line.str("request_id", request_id)
        .str("api_key", first.key_id.as_deref().unwrap_or("-"))
        .str("model", &first.model)
        .str("route_target", &first.target)
        .str("connection", &first.connection)
        .u64("attempts", u64::from(first.attempts))
        .u64("status", 200)
        .bool("stream", true)
        .u64("ttft_ms", first.ttft_ms)
        .u64("recovered", u64::from(first.recovered));
    if let Some((segments, seams)) = seamed {
        let served: Vec<&str> = segments.iter().map(|s| &*s.connection).collect();
        line.u64("seams", u64::from(seams.seams))
            .str("segments", &served.join(","))
            .str("continuation", seam_log::continuation(seams));
    }
    line.bool("completed", end.completed)
        .bool("client_disconnected", end.client_disconnected)
        .str("abort", end.abort.as_ref().map_or("-", |a| a.code()))
        .u64("bytes", end.bytes)
        .u64("input_tokens", tokens.and_then(|u| u.input).unwrap_or(0))
        .u64("output_tokens", tokens.and_then(|u| u.output).unwrap_or(0))
        .u64("duration_ms", millis(started.elapsed()));
    if let Some(dropped) = &first.dropped {
        line.str("dropped_params", dropped);
    }
    if let Some(emulated) = &first.emulated {
        line.str("emulated_params", emulated);
    }
    line.finish();
}

fn error_line(
    request_id: &str,
    key: Option<&str>,
    model: &str,
    e: &GatewayError,
    started: Instant,
) {
    let Some(mut line) = access_log::Line::start("request") else {
        return;
    };
    // Every target's skip reason, as in the combo diagnostics header (`target:reason,…`).
    let skips = e
        .headers
        .iter()
        .find(|(k, _)| k.as_str() == "x-switchyard-combo-excluded")
        .and_then(|(_, v)| v.to_str().ok())
        .unwrap_or("-");
    line.str("request_id", request_id)
        .str("api_key", key.unwrap_or("-"))
        .str("model", model)
        .u64("status", u64::from(e.status.as_u16()))
        .str("code", &e.code)
        .str("skips", skips)
        .u64("duration_ms", millis(started.elapsed()));
    line.finish();
}
