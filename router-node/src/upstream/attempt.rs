//! One attempt, up to the commit point.
//!
//! Decisions:
//! - **Timeouts.** The connect timeout lives on the connection's client. The headers timeout
//!   (`timeouts.headers_ms`, `0` = none) bounds `send()`. The attempt deadline bounds
//!   everything up to the commit point: headers, a JSON body, the readiness gate. A committed
//!   stream is bounded only by its watchdogs (see [`super::stream`]).
//!   A JSON body is additionally bounded by the idle gap between chunks (`watch.idle_ms`);
//!   an error body by a fixed [`ERROR_BODY_READ_MS`] too, since nobody waits for it.
//! - **A `2xx` that carries an error** (a top-level `error` object or Anthropic's
//!   `{"type":"error"}` body, or an error event before any content in a stream) is reported
//!   with [`AttemptFailure::in_band_error`] set and the status its error type means (a rate
//!   limit 429, an overload 529, an invalid request 400; `502` when the error names no type):
//!   the transfer worked but the answer is the upstream's failure, and it makes the pipeline
//!   fail over. Classified as its type, an in-band rate limit never counts on the breaker.
//!   The body keeps the upstream's own error text, so the text rules of classification
//!   (rate limit, overloaded …) still see it.
//! - **A stream request answered with JSON** is read as an error body: an error object
//!   fails as above, anything else fails as `STREAM_EARLY_EOF` (no event ever came).
//! - **Readiness buffer.** Chunks before the first content frame are held back, up to
//!   [`MAX_PREFIX_BYTES`]. An upstream that sends more than that without content is
//!   committed anyway (memory stays bounded); its readiness deadline keeps running after the
//!   commit and then ends the stream in-band.
//! - **Transport errors** map to [`TransportFailure`]: a timeout is `Timeout` (connect
//!   timeouts included), a connect failure `ConnectRefused`, anything else on the wire
//!   `ConnectionReset`. A request that cannot even be built (bad base URL, an API key that is
//!   not a header value) is `ConnectRefused`: this connection cannot be used as configured.

use actix_web::http::header::{HeaderName, HeaderValue};
use bytes::Bytes;
use http::Response;
use switchyard_shared::Millis;
use switchyard_shared::classify::{self, TransportFailure};
use switchyard_shared::sse::{
    EventKind, SseItem, SseParser, StreamAbort, StreamInspector, StreamWatch, Usage,
};

use super::body::{self, MAX_ERROR_BODY_BYTES, MAX_JSON_BODY_BYTES, ReadLimits, ReadStop};
use super::gate;
use super::headers;
use super::hold::HoldPolicy;
use super::request::{self, AttemptRequest};
use super::stream::CommittedStream;
use super::wait::UpstreamWait;
use crate::transport::{RespBody, TransportError};

/// An error body is read for at most this long (bounded by the deadline too).
pub const ERROR_BODY_READ_MS: Millis = 10_000;
/// The readiness gate holds back at most this many bytes.
pub const MAX_PREFIX_BYTES: usize = 8 << 20;
/// The status reported for a `2xx` whose body or first event is an error naming no type.
pub const IN_BAND_ERROR_STATUS: u16 = 502;

/// What one attempt produced.
#[derive(Debug)]
pub enum AttemptResult {
    /// A non-stream `2xx` answer.
    Json(JsonSuccess),
    /// A `2xx` stream past its readiness gate: the commit point.
    Stream(CommittedStream),
    /// Anything before the commit point; the pipeline may fail over.
    Failed(AttemptFailure),
}

/// A complete non-stream answer.
#[derive(Debug)]
pub struct JsonSuccess {
    pub status: u16,
    /// Only headers safe for the client (content type, request ids, rate limits).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The quota-window headers (lower-cased), for the strategies' inputs.
    pub quota_headers: Vec<(String, String)>,
    pub body: Bytes,
    pub usage: Option<Usage>,
    pub elapsed_ms: Millis,
}

/// Why an attempt failed before the commit point.
#[derive(Debug, Clone, Default)]
pub struct AttemptFailure {
    /// The upstream status (for a `2xx` carrying an error, the status its type means, else
    /// [`IN_BAND_ERROR_STATUS`]), or `None` for transport failures.
    pub status: Option<u16>,
    pub transport: Option<TransportFailure>,
    /// Lower-cased names; retry, rate-limit and fallback-hint headers only.
    pub headers: Vec<(String, String)>,
    /// The upstream error body (or error event data), lossy UTF-8, at most 64 KiB. For
    /// classification only: never forward it to the client verbatim.
    pub body: String,
    /// A short description for logs and diagnostics.
    pub message: String,
    pub stream_abort: Option<StreamAbort>,
    /// The upstream answered `2xx` but its body or first event was an error.
    pub in_band_error: bool,
    /// A stream that had shown content failed inside the stream recovery hold (see
    /// [`super::hold`]): nothing reached the client, and the request may reopen it.
    pub truncated_in_hold: bool,
    pub elapsed_ms: Millis,
}

/// Runs one attempt. Never panics; every outcome is a value.
pub async fn attempt(req: AttemptRequest) -> AttemptResult {
    attempt_waiting(req, &UpstreamWait::default()).await
}

/// [`attempt`], adding the time spent awaiting the upstream to `wait` (for the
/// gateway-overhead metric): the response head, then the body or the first content event.
pub async fn attempt_waiting(req: AttemptRequest, wait: &UpstreamWait) -> AttemptResult {
    attempt_holding(req, wait, None).await
}

/// [`attempt_waiting`] with the stream recovery hold `hold` on a streamed answer (`None` =
/// commit at the first content frame).
pub async fn attempt_holding(
    req: AttemptRequest,
    wait: &UpstreamWait,
    hold: Option<HoldPolicy>,
) -> AttemptResult {
    let clock = req.clock;
    let started = clock.now();
    let failed = |f: AttemptFailure| {
        AttemptResult::Failed(AttemptFailure {
            elapsed_ms: clock.now().saturating_sub(started),
            ..f
        })
    };
    let (to, request) = match request::build(&req) {
        Ok(built) => built,
        Err(why) => return failed(transport(TransportFailure::ConnectRefused, why.to_owned())),
    };

    let headers_ms = req.provider.config.timeouts.headers_ms;
    let headers_at = (headers_ms > 0).then(|| started.saturating_add(headers_ms));
    let limit = body::min_opt(headers_at, req.deadline_ms);
    let sent = {
        let _waiting = wait.timer();
        match limit {
            Some(at) => tokio::time::timeout_at(
                clock.instant_at(at).into(),
                req.conn.client.send(to, request),
            )
            .await
            .ok(),
            None => Some(req.conn.client.send(to, request).await),
        }
    };
    let mut resp = match sent {
        Some(Ok(resp)) => resp,
        Some(Err(e)) => return failed(from_transport(&e)),
        None if req.deadline_ms == limit => {
            return failed(transport(TransportFailure::Timeout, deadline_message()));
        }
        None => {
            let message = format!("no response headers within {headers_ms} ms");
            return failed(transport(TransportFailure::Timeout, message));
        }
    };

    let status = resp.status().as_u16();
    if !resp.status().is_success() {
        let _waiting = wait.timer();
        return failed(error_status(&mut resp, &req, status).await);
    }
    let is_json = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.trim_start().starts_with("application/json"));
    if !req.stream {
        return match json_success(&mut resp, &req, status, wait).await {
            Ok(mut ok) => {
                ok.elapsed_ms = clock.now().saturating_sub(started);
                AttemptResult::Json(ok)
            }
            Err(f) => failed(f),
        };
    }
    let _waiting = wait.timer();
    if is_json {
        return failed(json_instead_of_stream(&mut resp, &req).await);
    }
    // Mostly waiting for the first content event; the tap's parse of the held-back prefix
    // (microseconds) is counted with it.
    match gate::readiness_gate(resp, &req, started, hold).await {
        Ok(committed) => AttemptResult::Stream(committed),
        Err(f) => failed(f),
    }
}

pub(super) fn transport(kind: TransportFailure, message: String) -> AttemptFailure {
    AttemptFailure {
        transport: Some(kind),
        message,
        ..AttemptFailure::default()
    }
}

pub(super) fn deadline_message() -> String {
    "attempt deadline exceeded".to_owned()
}

/// Maps a transport error to a failure with a short message (never the URL).
pub(super) fn from_transport(e: &TransportError) -> AttemptFailure {
    let (kind, message) = e.classify();
    transport(kind, message.to_owned())
}

fn from_read_stop(stop: ReadStop, what: &str) -> AttemptFailure {
    match stop {
        ReadStop::TooLarge => AttemptFailure {
            status: Some(IN_BAND_ERROR_STATUS),
            message: format!("{what} exceeds {MAX_JSON_BODY_BYTES} bytes"),
            ..AttemptFailure::default()
        },
        ReadStop::Deadline => transport(TransportFailure::Timeout, deadline_message()),
        ReadStop::Idle { after_ms } => transport(
            TransportFailure::IdleTimeout,
            format!("{what} idle for {after_ms} ms"),
        ),
        ReadStop::Transport(e) => from_transport(&e),
    }
}

/// A non-`2xx` answer: its status, classification headers and (bounded) body. A body read
/// that fails keeps what arrived; the status is what matters.
async fn error_status(
    resp: &mut Response<RespBody>,
    req: &AttemptRequest,
    status: u16,
) -> AttemptFailure {
    let kept = headers::for_classification(resp.headers());
    let body = read_error_body(resp, req).await;
    AttemptFailure {
        status: Some(status),
        headers: kept,
        body,
        message: format!("HTTP {status}"),
        ..AttemptFailure::default()
    }
}

async fn read_error_body(resp: &mut Response<RespBody>, req: &AttemptRequest) -> String {
    let ceiling = req.clock.now().saturating_add(ERROR_BODY_READ_MS);
    let limits = ReadLimits {
        cap: MAX_ERROR_BODY_BYTES,
        truncate: true,
        until: body::min_opt(Some(ceiling), req.deadline_ms),
        idle_ms: req.watch.idle_ms,
    };
    let (bytes, _) = body::read_body(resp.body_mut(), limits, &req.clock).await;
    body::lossy_prefix(&bytes, MAX_ERROR_BODY_BYTES)
}

/// A `2xx` whose body or first event is an error: the status its error type means (a rate
/// limit 429, an overload 529, an invalid request 400), or [`IN_BAND_ERROR_STATUS`] when the
/// error names none. Classified by type, a 429 sent in-band never counts on the breaker.
pub(super) fn in_band(
    status_headers: Vec<(String, String)>,
    body: String,
    message: &str,
) -> AttemptFailure {
    let status = classify::in_band_status_of(&body).unwrap_or(IN_BAND_ERROR_STATUS);
    AttemptFailure {
        status: Some(status),
        headers: status_headers,
        body,
        message: message.to_owned(),
        in_band_error: true,
        ..AttemptFailure::default()
    }
}

async fn json_success(
    resp: &mut Response<RespBody>,
    req: &AttemptRequest,
    status: u16,
    wait: &UpstreamWait,
) -> Result<JsonSuccess, AttemptFailure> {
    let limits = ReadLimits {
        cap: MAX_JSON_BODY_BYTES,
        truncate: false,
        until: req.deadline_ms,
        idle_ms: req.watch.idle_ms,
    };
    let (bytes, stop) = {
        let _waiting = wait.timer();
        body::read_body(resp.body_mut(), limits, &req.clock).await
    };
    if let Some(stop) = stop {
        return Err(AttemptFailure {
            headers: headers::for_classification(resp.headers()),
            ..from_read_stop(stop, "response body")
        });
    }
    let probe = body::probe_json(&bytes);
    if probe.is_error {
        return Err(in_band(
            headers::for_classification(resp.headers()),
            body::lossy_prefix(&bytes, MAX_ERROR_BODY_BYTES),
            &format!("HTTP {status} with an error body"),
        ));
    }
    Ok(JsonSuccess {
        status,
        headers: headers::for_client(resp.headers()),
        quota_headers: headers::for_quota(resp.headers()),
        body: bytes,
        usage: probe.usage,
        elapsed_ms: 0,
    })
}

async fn json_instead_of_stream(
    resp: &mut Response<RespBody>,
    req: &AttemptRequest,
) -> AttemptFailure {
    let kept = headers::for_classification(resp.headers());
    let body = read_error_body(resp, req).await;
    if body::probe_json(body.as_bytes()).is_error {
        return in_band(kept, body, "stream request answered with an error body");
    }
    AttemptFailure {
        headers: kept,
        stream_abort: Some(StreamAbort::EarlyEof),
        ..transport(
            TransportFailure::EarlyEof,
            "stream request answered with JSON".to_owned(),
        )
    }
}

/// The transport failure a watchdog abort stands for.
pub(super) fn abort_transport(abort: StreamAbort) -> TransportFailure {
    match abort {
        StreamAbort::ReadinessTimeout { .. } => TransportFailure::ReadinessTimeout,
        StreamAbort::EarlyEof => TransportFailure::EarlyEof,
        StreamAbort::IdleTimeout { .. } => TransportFailure::IdleTimeout,
        StreamAbort::Stall { .. } | StreamAbort::ThroughputTooLow { .. } => TransportFailure::Stall,
    }
}

pub(super) fn aborted(abort: StreamAbort, kept: Vec<(String, String)>) -> AttemptFailure {
    AttemptFailure {
        headers: kept,
        stream_abort: Some(abort),
        ..transport(abort_transport(abort), abort.message())
    }
}

/// Feeds one chunk to the tap and returns the first abort due. Before the commit point the
/// data of the first error event is kept (bounded) in `error_data`, for classification.
pub(super) fn tap_chunk(
    parser: &mut SseParser,
    watch: &mut StreamWatch,
    inspector: &mut StreamInspector,
    chunk: &[u8],
    now: Millis,
    mut error_data: Option<&mut Option<String>>,
) -> Option<StreamAbort> {
    watch.on_chunk(now);
    let mut abort = None;
    parser.feed(chunk, &mut |item: SseItem<'_>| {
        let info = inspector.inspect_item(&item);
        if info.kind == EventKind::Error
            && let Some(slot) = error_data.as_deref_mut()
            && slot.is_none()
            && let SseItem::Event(event) = &item
        {
            *slot = Some(body::lossy_prefix(event.data, MAX_ERROR_BODY_BYTES));
        }
        let due = watch.on_event(&info, now);
        abort = abort.or(due);
    });
    abort
}
