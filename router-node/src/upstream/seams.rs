//! Mid-stream continuation, the stream: one client response stitched from the segments of
//! several upstream streams.
//!
//! Why here and generic: the segments are client-format bodies (scrubbed and, if needed,
//! translated) that the edge builds, and the next segment comes from the routing pipeline,
//! which this layer cannot name. So [`SeamedBody`] takes the first segment and a
//! [`Continue`] callback that routes a continuation body and returns the next segment.
//!
//! How a segment is forwarded: cut into whole events (the `frames` module). The first
//! segment's events go out byte for byte; a continuation's first role-only chunk is dropped
//! and its chunks get the client stream's `id`, `model` and `created`. An error event and
//! everything after it are held back. A segment that ends without `[DONE]` and without a
//! finish reason has failed; if [`continuation::may_continue`] allows it, the held bytes are
//! dropped and the next segment is routed (keep-alives go out while it is), otherwise the
//! held bytes go out as they would have without continuation. A continuation that cannot
//! start ends the stream with one `STREAM_CONTINUATION_FAILED` error event.
//!
//! Each segment finalises itself (its own `on_finish`: permits, usage, connection state);
//! [`SeamsEnd`] goes to `on_end` exactly once, after the last segment was dropped.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use switchyard_shared::Millis;
use switchyard_shared::sse::{Format, keep_alive_frame};
use tokio::time::Sleep;

use super::continuation::{
    self, Refusal, StreamIds, Transcript, continuation_body, may_continue, rewrite_chunk,
};
use super::frames::{Framer, event_data};

/// A client-format response body.
pub type ClientBody = Pin<Box<dyn Stream<Item = Result<Bytes, actix_web::Error>>>>;
/// The next segment being routed; `Err` says why none could start.
pub type NextSegment = Pin<Box<dyn Future<Output = Result<ClientBody, String>>>>;
/// Routes a continuation request body to its next segment.
pub type Continue = Box<dyn FnMut(Bytes) -> NextSegment>;
/// Receives the [`SeamsEnd`] once.
pub type OnSeamsEnd = Box<dyn FnOnce(SeamsEnd)>;

/// How a seamed stream ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeamsEnd {
    /// Continuations tried (each a seam in the client's stream, whether it served or not).
    pub seams: u32,
    /// Continuations that started (their stream was committed and forwarded).
    pub continued: u32,
    /// The last continuation could not start: the stream ended with our error event.
    pub failed: bool,
    /// A failed segment that was not continued, and why.
    pub refusal: Option<Refusal>,
    /// The last segment ended with `[DONE]` or a finish reason and no error.
    pub completed: bool,
    pub client_disconnected: bool,
}

/// The limits of one seamed stream.
#[derive(Debug, Clone, Copy)]
pub struct SeamPolicy {
    pub max_continuations: u32,
    /// Keep-alive interval while a continuation is routed (`0` = none).
    pub heartbeat_ms: Millis,
}

enum Phase {
    Streaming(ClientBody),
    Continuing(NextSegment),
    Ended,
}

/// What one segment showed.
#[derive(Default)]
struct Segment {
    continuation: bool,
    /// An event of this segment went out (its opening role chunk is dropped only before).
    started: bool,
    errored: bool,
    done: bool,
    finished: bool,
    /// An error event and what followed it.
    held: Vec<Bytes>,
}

/// The stitched client body; see the module docs.
pub struct SeamedBody {
    phase: Phase,
    framer: Framer,
    transcript: Transcript,
    segment: Segment,
    ids: Option<StreamIds>,
    /// The client's request body, the base of every continuation body.
    request: Bytes,
    policy: SeamPolicy,
    next: Continue,
    out: VecDeque<Bytes>,
    keep_alive: Option<Pin<Box<Sleep>>>,
    end: SeamsEnd,
    on_end: Option<OnSeamsEnd>,
}

impl SeamedBody {
    pub fn new(
        first: ClientBody,
        request: Bytes,
        policy: SeamPolicy,
        next: Continue,
        on_end: OnSeamsEnd,
    ) -> Self {
        Self {
            phase: Phase::Streaming(first),
            framer: Framer::default(),
            transcript: Transcript::default(),
            segment: Segment::default(),
            ids: None,
            request,
            policy,
            next,
            out: VecDeque::new(),
            keep_alive: None,
            end: SeamsEnd::default(),
            on_end: Some(on_end),
        }
    }

    fn on_event(&mut self, raw: Bytes) {
        let data = event_data(&raw);
        let ev = continuation::inspect(&data);
        if self.segment.errored || ev.error {
            self.segment.errored = true;
            self.segment.held.push(raw);
            return;
        }
        if self.segment.continuation && !data.is_empty() {
            if ev.role_only && !self.segment.started {
                self.segment.started = true;
                return;
            }
            let rewritten = match (&self.ids, ev.done) {
                (Some(ids), false) => rewrite_chunk(&data, ids),
                _ => None,
            };
            self.out.push_back(rewritten.unwrap_or(raw));
        } else {
            if self.ids.is_none() && !data.is_empty() {
                self.ids = StreamIds::of(&data);
            }
            self.out.push_back(raw);
        }
        self.segment.started |= !data.is_empty();
        self.segment.done |= ev.done;
        self.segment.finished |= ev.finished;
        self.transcript.observe(&ev);
    }

    /// The current segment's upstream ended: finish cleanly, continue, or end as without
    /// continuation.
    fn segment_ended(&mut self) {
        // Dropping the segment first runs its own finalisation.
        self.phase = Phase::Ended;
        let mut rest = self.framer.take_rest();
        if !rest.is_empty() {
            // A last event without its blank line still counts when it is whole; a cut one
            // (EOF inside an event) goes out only if the stream is not continued.
            let ev = continuation::inspect(&event_data(&rest));
            if ev.done || ev.finished || ev.error || (!ev.opaque && ev.text.is_some()) {
                self.on_event(std::mem::take(&mut rest));
            }
        }
        let segment = std::mem::take(&mut self.segment);
        if !segment.errored && (segment.done || segment.finished) {
            self.end.completed = true;
            self.push_nonempty(rest);
            return;
        }
        let allowed = may_continue(
            &self.transcript,
            self.end.seams,
            self.policy.max_continuations,
        )
        .and_then(|()| {
            continuation_body(&self.request, self.transcript.text())
                .map_err(|_| Refusal::NotPlainText)
        });
        match allowed {
            Ok(body) => {
                self.end.seams += 1;
                self.phase = Phase::Continuing((self.next)(body));
                self.arm_keep_alive();
            }
            Err(refusal) => {
                self.end.refusal = Some(refusal);
                self.out.extend(segment.held);
                self.push_nonempty(rest);
            }
        }
    }

    fn push_nonempty(&mut self, bytes: Bytes) {
        if !bytes.is_empty() {
            self.out.push_back(bytes);
        }
    }

    fn arm_keep_alive(&mut self) {
        self.keep_alive = (self.policy.heartbeat_ms > 0).then(|| {
            Box::pin(tokio::time::sleep(Duration::from_millis(
                self.policy.heartbeat_ms,
            )))
        });
    }

    /// Reports the end once, after the current segment (if any) was dropped.
    fn finish(&mut self, client_disconnected: bool) {
        self.phase = Phase::Ended;
        if let Some(on_end) = self.on_end.take() {
            let mut end = std::mem::take(&mut self.end);
            end.client_disconnected = client_disconnected;
            on_end(end);
        }
    }
}

impl Stream for SeamedBody {
    type Item = Result<Bytes, actix_web::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(bytes) = this.out.pop_front() {
                return Poll::Ready(Some(Ok(bytes)));
            }
            match &mut this.phase {
                Phase::Ended => {
                    this.finish(false);
                    return Poll::Ready(None);
                }
                Phase::Streaming(body) => match body.as_mut().poll_next(cx) {
                    Poll::Ready(Some(Ok(chunk))) => {
                        this.framer.push(&chunk);
                        while let Some(event) = this.framer.next_event() {
                            this.on_event(event);
                        }
                    }
                    Poll::Ready(Some(Err(e))) => {
                        // A broken body ends the response; nothing is continued after it.
                        this.phase = Phase::Ended;
                        return Poll::Ready(Some(Err(e)));
                    }
                    Poll::Ready(None) => this.segment_ended(),
                    Poll::Pending => return Poll::Pending,
                },
                Phase::Continuing(next) => match next.as_mut().poll(cx) {
                    Poll::Ready(Ok(body)) => {
                        this.keep_alive = None;
                        this.end.continued += 1;
                        this.segment = Segment {
                            continuation: true,
                            ..Segment::default()
                        };
                        this.phase = Phase::Streaming(body);
                    }
                    Poll::Ready(Err(reason)) => {
                        this.keep_alive = None;
                        this.end.failed = true;
                        this.phase = Phase::Ended;
                        this.out.push_back(continuation::failed_event(&reason));
                    }
                    Poll::Pending => {
                        let Some(timer) = this.keep_alive.as_mut() else {
                            return Poll::Pending;
                        };
                        if timer.as_mut().poll(cx).is_pending() {
                            return Poll::Pending;
                        }
                        this.arm_keep_alive();
                        let frame = keep_alive_frame(Format::OpenAiChat);
                        this.out.push_back(Bytes::from_static(frame));
                    }
                },
            }
        }
    }
}

impl Drop for SeamedBody {
    fn drop(&mut self) {
        // Dropped before its end: the client went away. A no-op after the end was reported.
        self.finish(true);
    }
}

#[cfg(test)]
#[path = "seams_tests.rs"]
mod tests;
