//! Stream watchdog policies (docs/router-node.md, "The request path"), as pure state machines.
//!
//! The node drives each with its own clock: `on_*` for what happened, `poll(now)` when its
//! timer fires, and `next_deadline(now)` to arm that single timer. Nothing here reads a clock.
//!
//! - [`Readiness`]: the first progress frame (text, reasoning, tool input) or error event must
//!   arrive within `first_content_ms`, else `STREAM_READINESS_TIMEOUT`; EOF before it is
//!   `STREAM_EARLY_EOF`. Pings, heartbeats, `message_start` and usage do not count.
//! - [`GapWatchdog`] as the **idle** watchdog: any upstream chunk resets it.
//! - [`GapWatchdog`] as the **stall** watchdog: only content, reasoning and tool frames reset
//!   it; heartbeats and pings never do.
//! - [`ThroughputWatchdog`](super::ThroughputWatchdog) (off by default): judges tumbling windows of useful text bytes.
//!
//! A limit of `0` disables the readiness, idle and stall watchdogs. Whichever source (an event
//! or the timer) the node processes first wins; an abort, once latched, is sticky.

use super::Format;
use super::inspect::{EventInfo, EventKind};
use super::writer::format_error_event;
use crate::Millis;

/// Why a watchdog ended an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamAbort {
    /// No progress frame within `first_content_ms`.
    ReadinessTimeout { after_ms: Millis },
    /// The upstream closed before any progress frame.
    EarlyEof,
    /// No upstream chunk at all for `after_ms`.
    IdleTimeout { after_ms: Millis },
    /// No content, reasoning or tool frame for `after_ms`.
    Stall { after_ms: Millis },
    /// A judged window carried too little useful text.
    ThroughputTooLow {
        window_bytes: u64,
        window_ms: Millis,
    },
}

impl StreamAbort {
    /// The HTTP status used before the commit point.
    pub fn status(self) -> u16 {
        match self {
            Self::EarlyEof => 502,
            _ => 504,
        }
    }

    pub fn error_type(self) -> &'static str {
        match self {
            Self::ReadinessTimeout { .. } => "stream_timeout",
            Self::EarlyEof => "stream_early_eof",
            _ => "timeout_error",
        }
    }

    pub fn code(self) -> &'static str {
        match self {
            Self::ReadinessTimeout { .. } => "STREAM_READINESS_TIMEOUT",
            Self::EarlyEof => "STREAM_EARLY_EOF",
            Self::IdleTimeout { .. } => "stream_idle_timeout",
            Self::Stall { .. } => "stream_stall_timeout",
            Self::ThroughputTooLow { .. } => "STREAM_THROUGHPUT_TOO_LOW",
        }
    }

    pub fn message(self) -> String {
        match self {
            Self::ReadinessTimeout { after_ms } => {
                format!("Stream produced no non-ping SSE event within {after_ms}ms")
            }
            Self::EarlyEof => "Stream ended before producing any content".to_owned(),
            Self::IdleTimeout { after_ms } => format!("Stream idle for {after_ms}ms"),
            Self::Stall { after_ms } => format!("Stream stalled: no content for {after_ms}ms"),
            Self::ThroughputTooLow {
                window_bytes,
                window_ms,
            } => format!("Stream throughput too low: {window_bytes} useful bytes in {window_ms}ms"),
        }
    }

    /// The in-band error event for a client of `format` (after the commit point).
    pub fn error_event(self, format: Format) -> Vec<u8> {
        format_error_event(format, self.error_type(), self.code(), &self.message())
    }
}

/// The readiness gate's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReadinessState {
    Waiting,
    /// A progress frame arrived: the stream may be committed.
    Ready,
    /// An error event arrived first: the attempt failed before commit.
    UpstreamError,
}

/// The first-content deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readiness {
    timeout_ms: Millis,
    deadline: Option<Millis>,
    state: ReadinessState,
    ready_at: Option<Millis>,
}

impl Readiness {
    pub fn new(now: Millis, first_content_ms: Millis) -> Self {
        Self {
            timeout_ms: first_content_ms,
            deadline: (first_content_ms > 0).then(|| now.saturating_add(first_content_ms)),
            state: ReadinessState::Waiting,
            ready_at: None,
        }
    }

    pub fn state(&self) -> ReadinessState {
        self.state
    }

    /// When the gate opened (time to first content).
    pub fn ready_at(&self) -> Option<Millis> {
        self.ready_at
    }

    pub fn on_event(&mut self, info: &EventInfo, now: Millis) -> ReadinessState {
        if self.state == ReadinessState::Waiting {
            if info.kind == EventKind::Error {
                self.state = ReadinessState::UpstreamError;
            } else if info.kind.opens_readiness() {
                self.state = ReadinessState::Ready;
                self.ready_at = Some(now);
            }
        }
        self.state
    }

    pub fn on_eof(&self) -> Option<StreamAbort> {
        (self.state == ReadinessState::Waiting).then_some(StreamAbort::EarlyEof)
    }

    pub fn poll(&self, now: Millis) -> Option<StreamAbort> {
        let after_ms = self.timeout_ms;
        self.next_deadline(now)
            .filter(|&d| now >= d)
            .map(|_| StreamAbort::ReadinessTimeout { after_ms })
    }

    pub fn next_deadline(&self, now: Millis) -> Option<Millis> {
        let deadline = self
            .deadline
            .filter(|_| self.state == ReadinessState::Waiting)?;
        Some(deadline.max(now))
    }
}

/// Which signals reset a [`GapWatchdog`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GapKind {
    /// Any upstream chunk (`stream_idle_timeout`).
    Idle,
    /// Content, reasoning and tool frames only.
    Stall,
}

/// A maximum gap between resetting signals: the idle or the content-stall watchdog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GapWatchdog {
    kind: GapKind,
    limit_ms: Millis,
    last: Millis,
}

impl GapWatchdog {
    pub fn idle(now: Millis, idle_ms: Millis) -> Self {
        Self {
            kind: GapKind::Idle,
            limit_ms: idle_ms,
            last: now,
        }
    }

    pub fn stall(now: Millis, stall_ms: Millis) -> Self {
        Self {
            kind: GapKind::Stall,
            limit_ms: stall_ms,
            last: now,
        }
    }

    /// Raw upstream bytes arrived; resets the idle watchdog only.
    pub fn on_chunk(&mut self, now: Millis) {
        if self.kind == GapKind::Idle {
            self.last = self.last.max(now);
        }
    }

    /// An event arrived; progress frames reset the stall watchdog.
    pub fn on_event(&mut self, info: &EventInfo, now: Millis) {
        if self.kind == GapKind::Stall && info.kind.is_progress() {
            self.last = self.last.max(now);
        }
    }

    pub fn poll(&self, now: Millis) -> Option<StreamAbort> {
        let after_ms = self.limit_ms;
        let deadline = self.next_deadline(now)?;
        (now >= deadline).then_some(match self.kind {
            GapKind::Idle => StreamAbort::IdleTimeout { after_ms },
            GapKind::Stall => StreamAbort::Stall { after_ms },
        })
    }

    pub fn next_deadline(&self, now: Millis) -> Option<Millis> {
        (self.limit_ms > 0).then(|| self.last.saturating_add(self.limit_ms).max(now))
    }

    /// The allowed gap; `0` = off.
    pub fn limit_ms(&self) -> Millis {
        self.limit_ms
    }
}
