//! A committed stream: forwarding, watchdogs, keep-alives and single-shot finalisation.
//!
//! After the commit point the client has a `200` and SSE bytes, so nothing can be retried:
//! - upstream chunks are forwarded unchanged (the same `Bytes`, no copy) and fed to the SSE
//!   tap on the side;
//! - one timer serves the watchdogs (idle, stall, throughput, readiness) and the keep-alive.
//!   No attempt or combo budget bounds a committed stream: one that keeps delivering runs to
//!   its end, and only the watchdogs cut one that stops delivering (a long answer is not a
//!   failing upstream, and cutting it cost the client its answer and the connection a
//!   cooldown). It is re-armed lazily: an upstream chunk only moves it
//!   earlier, never later, so a busy stream does not reset a timer per chunk; a wake-up that
//!   finds nothing due re-arms it;
//! - a watchdog abort or an upstream read error ends the stream with ONE in-band
//!   error event in the client's format, and drops the upstream response;
//! - when the upstream is silent for the heartbeat interval, a keep-alive frame is written so
//!   that a vanished client is noticed (actix-web only learns of it on a write) and the body
//!   dropped, which drops the upstream response and cancels the upstream request;
//! - the stream ends at the upstream's terminal event (`[DONE]`, `message_stop`…) when the
//!   upstream's end of body has not arrived with it: the client's last bytes and its end go
//!   out in one write, and the upstream's end is read aside so that its connection is
//!   reused (for as long as the idle timeout and up to 64 KiB; past either the connection
//!   is closed);
//! - [`StreamEnd`] is reported exactly once: at the end of the body, or from `Drop` when the
//!   body is dropped before its end (the client went away).
//!
//! Frames we write ourselves (keep-alives, the error event) go out only on an SSE event
//! boundary: a keep-alive is postponed while the upstream is in the middle of an event, and
//! an error event is preceded by the line breaks that close any partial event, so it is
//! never glued onto an upstream line.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use actix_web::http::header::{HeaderName, HeaderValue};
use bytes::Bytes;
use futures_util::Stream;
use switchyard_shared::Millis;
use switchyard_shared::classify::TransportFailure;
use switchyard_shared::sse::{
    FinishReason, SseParser, StreamAbort, StreamInspector, StreamWatch, UpstreamStreamError, Usage,
    format_error_event, keep_alive_frame,
};
use tokio::time::Sleep;

use super::attempt::{abort_transport, tap_chunk};
use super::body::min_opt;
use crate::clock::Clock;
use crate::transport::{RespBody, TransportError};

/// The default silence after which a keep-alive frame is written (the reference's 15 s).
pub const DEFAULT_HEARTBEAT_INTERVAL_MS: Millis = 15_000;

/// How long the end of an upstream body is awaited, aside, after its terminal event when
/// the stream has no idle timeout (otherwise the idle timeout: as long as the stream itself
/// would have waited). A provider ends the body right after it; one that does not loses its
/// connection.
const DRAIN_WITHOUT_IDLE_TIMEOUT_MS: Millis = 5_000;

/// How a committed stream ended; given to the `on_finish` callback exactly once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamEnd {
    /// The upstream reached its end cleanly: no abort, no read error, no in-band error event,
    /// and the client stayed.
    pub completed: bool,
    /// The watchdog that ended the stream.
    pub abort: Option<StreamAbort>,
    /// The failure in classification terms: the abort's kind, `ConnectionReset` for a read
    /// error, `ClientAbort` for a disconnect.
    pub transport: Option<TransportFailure>,
    /// A read error or an in-band error event, as a short message.
    pub upstream_error: Option<String>,
    /// The first in-band error event the upstream sent (forwarded to the client as is).
    pub stream_error: Option<UpstreamStreamError>,
    pub usage: Option<Usage>,
    pub finish_reason: Option<FinishReason>,
    /// A terminal event (`[DONE]`, `message_stop`, `response.completed`) was seen.
    pub saw_terminal_event: bool,
    pub client_disconnected: bool,
    /// No text and no tool input (reasoning alone is empty).
    pub ended_empty: bool,
    /// Upstream bytes delivered to the client (our own frames not counted).
    pub bytes: u64,
    /// From the start of the attempt to the end of the stream.
    pub duration_ms: Millis,
}

/// The callback that receives the [`StreamEnd`].
pub type OnFinish = Box<dyn FnOnce(StreamEnd) + Send>;

/// The tap state handed over by the readiness gate.
pub(super) struct LiveStream {
    /// The stream's format, and what the tap remembers between its events.
    pub inspector: StreamInspector,
    pub clock: Clock,
    /// When the attempt started (node clock).
    pub started: Millis,
    pub upstream: RespBody,
    pub parser: SseParser,
    pub watch: StreamWatch,
    /// The upstream already ended cleanly inside the recovery hold: nothing is left to read.
    pub ended: bool,
}

/// A `2xx` stream past its readiness gate. Nothing has been sent to the client yet; turn it
/// into a response body with [`CommittedStream::into_body`]. Dropping it unused drops the
/// upstream response.
pub struct CommittedStream {
    pub status: u16,
    /// Only headers safe for the client (content type, request ids, rate limits).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// From the start of the attempt to the commit point: the first content frame, or with
    /// stream recovery on the release of the hold.
    pub ready_after_ms: Millis,
    /// Truncations inside the recovery hold this request reopened before this stream (set by
    /// the routing pipeline; for the access log).
    pub reopens: u32,
    /// The quota-window headers (lower-cased), for the strategies' inputs.
    pub quota_headers: Vec<(String, String)>,
    /// Silence after which a keep-alive is written; `0` = never.
    pub heartbeat_interval_ms: Millis,
    prefix: Vec<Bytes>,
    /// Boxed: the tap state is large and the attempt result is moved around by value.
    live: Box<LiveStream>,
}

impl fmt::Debug for CommittedStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommittedStream")
            .field("status", &self.status)
            .field("ready_after_ms", &self.ready_after_ms)
            .field("prefix_chunks", &self.prefix.len())
            .finish_non_exhaustive()
    }
}

impl CommittedStream {
    pub(super) fn new(
        status: u16,
        headers: Vec<(HeaderName, HeaderValue)>,
        ready_after_ms: Millis,
        prefix: Vec<Bytes>,
        live: LiveStream,
    ) -> Self {
        Self {
            status,
            headers,
            ready_after_ms,
            reopens: 0,
            quota_headers: Vec::new(),
            heartbeat_interval_ms: DEFAULT_HEARTBEAT_INTERVAL_MS,
            prefix,
            live: Box::new(live),
        }
    }

    /// Attaches the quota-window headers of the answer.
    pub(super) fn with_quota_headers(mut self, quota_headers: Vec<(String, String)>) -> Self {
        self.quota_headers = quota_headers;
        self
    }

    /// Sets the keep-alive interval (`0` disables keep-alives).
    pub fn with_heartbeat_interval_ms(mut self, ms: Millis) -> Self {
        self.heartbeat_interval_ms = ms;
        self
    }

    /// The response body: the held-back prefix, then the live upstream, tapped and policed.
    /// `on_finish` runs exactly once, when the body ends or is dropped.
    pub fn into_body(
        self,
        on_finish: OnFinish,
    ) -> impl Stream<Item = Result<Bytes, actix_web::Error>> + 'static {
        let LiveStream {
            inspector,
            clock,
            started,
            upstream,
            parser,
            watch,
            ended,
        } = *self.live;
        let now = clock.now();
        CommittedBody {
            prefix: VecDeque::from(self.prefix),
            upstream: (!ended).then_some(upstream),
            parser,
            watch,
            inspector,
            clock,
            started,
            heartbeat_ms: self.heartbeat_interval_ms,
            last_activity: now,
            timer: Box::pin(tokio::time::sleep_until(clock.instant_at(now).into())),
            timer_at: None,
            tail: Tail::default(),
            final_frame: None,
            ending: false,
            end: StreamEnd {
                completed: ended,
                ..StreamEnd::default()
            },
            on_finish: Some(on_finish),
        }
    }
}

/// Whether the bytes written so far end on an SSE event boundary: counts the line
/// terminators (`\n`, `\r\n`, `\r`) at the end of the stream.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tail {
    breaks: u8,
    /// The last byte was `\r`: a following `\n` completes the same terminator.
    cr: bool,
}

impl Default for Tail {
    fn default() -> Self {
        // Nothing written yet is a boundary.
        Self {
            breaks: 2,
            cr: false,
        }
    }
}

impl Tail {
    pub(super) fn observe(&mut self, chunk: &[u8]) {
        // Only the trailing run of line breaks matters; a chunk made only of line breaks
        // continues the previous run.
        let run = chunk
            .iter()
            .rev()
            .take_while(|&&b| b == b'\n' || b == b'\r')
            .count();
        if run < chunk.len() {
            self.breaks = 0;
            self.cr = false;
        }
        self.count(&chunk[chunk.len() - run..]);
    }

    fn count(&mut self, run: &[u8]) {
        for &b in run {
            match b {
                b'\n' if self.cr => self.cr = false,
                b'\n' => self.breaks = self.breaks.saturating_add(1),
                _ => {
                    self.breaks = self.breaks.saturating_add(1);
                    self.cr = true;
                }
            }
        }
    }

    pub(super) fn at_boundary(&self) -> bool {
        self.breaks >= 2
    }

    /// The line breaks that close a partial event before a frame of our own.
    pub(super) fn closing(&self) -> &'static [u8] {
        match self.breaks {
            0 => b"\n\n",
            1 => b"\n",
            _ => b"",
        }
    }
}

struct CommittedBody {
    prefix: VecDeque<Bytes>,
    /// `None` once the upstream ended or was abandoned (dropping it cancels the request).
    upstream: Option<RespBody>,
    parser: SseParser,
    watch: StreamWatch,
    inspector: StreamInspector,
    clock: Clock,
    started: Millis,
    heartbeat_ms: Millis,
    /// The last upstream chunk or keep-alive (the keep-alive clock).
    last_activity: Millis,
    timer: Pin<Box<Sleep>>,
    /// Where the timer is armed; `None` = not armed.
    timer_at: Option<Millis>,
    tail: Tail,
    /// Our error event, written before the end (the line breaks that close a partial
    /// upstream event are added when it is written).
    final_frame: Option<Vec<u8>>,
    /// The next poll ends the body.
    ending: bool,
    end: StreamEnd,
    on_finish: Option<OnFinish>,
}

impl CommittedBody {
    fn heartbeat_due(&self) -> Option<Millis> {
        (self.heartbeat_ms > 0 && self.upstream.is_some() && self.tail.at_boundary())
            .then(|| self.last_activity.saturating_add(self.heartbeat_ms))
    }

    fn next_wake(&self, now: Millis) -> Option<Millis> {
        self.upstream.as_ref()?;
        min_opt(self.watch.next_deadline(now), self.heartbeat_due())
    }

    /// Ends the stream after one error event in the client's format; drops the upstream.
    fn fail(&mut self, frame: Vec<u8>) {
        self.final_frame = Some(frame);
        self.upstream = None;
    }

    fn abort(&mut self, abort: StreamAbort) {
        self.end.abort = Some(abort);
        self.end.transport = Some(abort_transport(abort));
        self.end.upstream_error = Some(abort.message());
        self.fail(abort.error_event(self.inspector.format()));
    }

    fn read_failed(&mut self, e: &TransportError) {
        let kind = match e.classify().0 {
            TransportFailure::Timeout => TransportFailure::Timeout,
            _ => TransportFailure::ConnectionReset,
        };
        self.end.transport = Some(kind);
        self.end.upstream_error = Some("upstream stream read failed".to_owned());
        let frame = format_error_event(
            self.inspector.format(),
            "stream_error",
            "upstream_stream_error",
            "Upstream stream failed before completion.",
        );
        self.fail(frame);
    }

    /// The upstream's content ended (its end of body, or its terminal event): a clean end
    /// unless it never delivered content.
    fn upstream_ended(&mut self) {
        self.parser.finish();
        match self.watch.on_eof() {
            // Committed without content (the prefix cap) and then closed.
            Some(abort) => self.abort(abort),
            None => {
                self.end.completed = true;
                self.ending = true;
            }
        }
    }

    /// Checks the timer-driven conditions at `now`; returns a keep-alive frame when one is due.
    fn on_wake(&mut self, now: Millis) -> Option<Bytes> {
        if let Some(abort) = self.watch.poll(now) {
            self.abort(abort);
            return None;
        }
        if self.heartbeat_due().is_some_and(|at| now >= at) {
            self.last_activity = now;
            return Some(Bytes::from_static(keep_alive_frame(
                self.inspector.format(),
            )));
        }
        None
    }

    /// Reports the end once; later calls do nothing.
    fn finish(&mut self, client_disconnected: bool) {
        let Some(on_finish) = self.on_finish.take() else {
            return;
        };
        // Dropping the upstream first cancels the request before the callback runs.
        self.upstream = None;
        let summary = self.watch.summary();
        let mut end = std::mem::take(&mut self.end);
        end.client_disconnected = client_disconnected;
        if client_disconnected && end.transport.is_none() {
            end.transport = Some(TransportFailure::ClientAbort);
        }
        end.stream_error.clone_from(&summary.error);
        if end.upstream_error.is_none()
            && let Some(e) = &summary.error
        {
            end.upstream_error = Some(format!("stream error event ({})", e.error_type));
        }
        end.completed = end.completed && summary.error.is_none() && !client_disconnected;
        end.usage = summary.usage;
        end.finish_reason.clone_from(&summary.finish_reason);
        end.saw_terminal_event = summary.done;
        end.ended_empty = summary.ended_empty();
        end.duration_ms = self.clock.now().saturating_sub(self.started);
        on_finish(end);
    }

    fn emit(&mut self, chunk: Bytes) -> Poll<Option<Result<Bytes, actix_web::Error>>> {
        self.tail.observe(&chunk);
        Poll::Ready(Some(Ok(chunk)))
    }
}

impl Stream for CommittedBody {
    type Item = Result<Bytes, actix_web::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.on_finish.is_none() {
                return Poll::Ready(None);
            }
            if let Some(chunk) = this.prefix.pop_front() {
                this.end.bytes += chunk.len() as u64;
                if this.prefix.is_empty() {
                    // Release the drained buffer: an idle stream lives for minutes, and the
                    // held-back prefix is never refilled.
                    this.prefix = VecDeque::new();
                }
                return this.emit(chunk);
            }
            if let Some(mut frame) = this.final_frame.take() {
                this.ending = true;
                let closing = this.tail.closing();
                if !closing.is_empty() {
                    frame.splice(..0, closing.iter().copied());
                }
                return this.emit(Bytes::from(frame));
            }
            if this.ending {
                this.finish(false);
                return Poll::Ready(None);
            }
            let Some(upstream) = this.upstream.as_mut() else {
                this.ending = true;
                continue;
            };
            match upstream.poll_chunk(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    if chunk.is_empty() {
                        continue;
                    }
                    let now = this.clock.now();
                    this.last_activity = now;
                    let abort = tap_chunk(
                        &mut this.parser,
                        &mut this.watch,
                        &mut this.inspector,
                        &chunk,
                        now,
                        None,
                    );
                    if let Some(abort) = abort {
                        // Deliver what arrived, then the error event.
                        this.abort(abort);
                    }
                    this.end.bytes += chunk.len() as u64;
                    return this.emit(chunk);
                }
                Poll::Ready(Some(Err(e))) => {
                    this.read_failed(&e);
                    continue;
                }
                Poll::Ready(None) => {
                    this.upstream = None;
                    this.upstream_ended();
                    continue;
                }
                Poll::Pending => {
                    if this.watch.summary().done && this.tail.at_boundary() {
                        // The terminal event is out and the upstream's end has not arrived
                        // yet (with chunked framing it comes as a separate frame from the
                        // connection's task). Waiting for it would write the client's end
                        // of body on its own, one more send and one more wake-up per
                        // stream; the end is read aside instead, for the connection's reuse.
                        if let Some(upstream) = this.upstream.take() {
                            let limit = match this.watch.idle_limit_ms() {
                                0 => DRAIN_WITHOUT_IDLE_TIMEOUT_MS,
                                idle => idle,
                            };
                            upstream.drain_aside(std::time::Duration::from_millis(limit));
                        }
                        this.upstream_ended();
                        continue;
                    }
                }
            }
            let now = this.clock.now();
            // Lazy re-arm: only ever move the timer earlier; a wake-up that finds nothing due
            // comes back here and re-arms it for the next deadline.
            if let Some(wake) = this.next_wake(now)
                && this.timer_at.is_none_or(|at| wake < at)
            {
                this.timer
                    .as_mut()
                    .reset(this.clock.instant_at(wake).into());
                this.timer_at = Some(wake);
            }
            let Some(at) = this.timer_at else {
                return Poll::Pending;
            };
            if this.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.timer_at = None;
            // The timer fired, so its instant has passed whatever the millisecond clock says.
            if let Some(keep_alive) = this.on_wake(now.max(at)) {
                return this.emit(keep_alive);
            }
        }
    }
}

impl Drop for CommittedBody {
    fn drop(&mut self) {
        // Dropped before its end: the client went away (actix drops the body when a write
        // fails). `finish` is a no-op if the end was already reported.
        self.finish(true);
    }
}
