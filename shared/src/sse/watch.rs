//! [`StreamWatch`]: every watchdog of one attempt plus the turn summary, behind one timer.
//!
//! The node calls [`StreamWatch::on_chunk`] for each upstream chunk, [`StreamWatch::on_event`]
//! for each inspected event, [`StreamWatch::poll`] when its timer fires and
//! [`StreamWatch::on_eof`] at the end, re-arming its timer from
//! [`StreamWatch::next_deadline`]. The summary carries what finalisation records: usage, the
//! finish reason, the first in-band error and whether the turn was empty.

use super::inspect::{EventInfo, EventKind, FinishReason, UpstreamStreamError, Usage};
use super::throughput::{ThroughputSettings, ThroughputWatchdog};
use super::watchdog::{GapWatchdog, Readiness, ReadinessState, StreamAbort};
use crate::Millis;

/// Per-attempt limits, from the provider's `[providers.timeouts]` and
/// `[resilience.stream.throughput_watchdog]`. `0` disables a deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchConfig {
    pub first_content_ms: Millis,
    pub idle_ms: Millis,
    /// The content-stall budget (the reference uses the idle timeout). It runs once the
    /// readiness gate has opened, or from the start when `first_content_ms` is `0`.
    pub stall_ms: Millis,
    pub throughput: ThroughputSettings,
}

impl Default for WatchConfig {
    fn default() -> Self {
        Self {
            first_content_ms: 80_000,
            idle_ms: 600_000,
            stall_ms: 600_000,
            throughput: ThroughputSettings::default(),
        }
    }
}

/// What one turn produced, for metrics and the attempt outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnSummary {
    pub useful_text_bytes: u64,
    pub tool_call_events: u64,
    pub reasoning_events: u64,
    /// Merged usage reports (later fields replace earlier ones).
    pub usage: Option<Usage>,
    pub finish_reason: Option<FinishReason>,
    /// The first in-band error: a `200` stream that carries one is a failed attempt.
    pub error: Option<UpstreamStreamError>,
    /// A terminal event (`[DONE]`, `message_stop`, `response.completed`) was seen.
    pub done: bool,
}

impl TurnSummary {
    pub fn record(&mut self, info: &EventInfo) {
        let bytes = u64::try_from(info.useful_text_bytes).unwrap_or(u64::MAX);
        self.useful_text_bytes = self.useful_text_bytes.saturating_add(bytes);
        match info.kind {
            EventKind::ToolCall => self.tool_call_events += 1,
            EventKind::Reasoning => self.reasoning_events += 1,
            EventKind::Done => self.done = true,
            _ => {}
        }
        if let Some(usage) = &info.usage {
            self.usage.get_or_insert_default().merge(usage);
        }
        if let Some(reason) = &info.finish_reason {
            self.finish_reason = Some(reason.clone());
        }
        if self.error.is_none() {
            self.error.clone_from(&info.error);
        }
    }

    /// No text and no tool input: reasoning alone (or nothing) is an empty turn.
    pub fn ended_empty(&self) -> bool {
        self.useful_text_bytes == 0 && self.tool_call_events == 0
    }
}

/// All watchdogs of one streamed attempt.
#[derive(Debug, Clone)]
pub struct StreamWatch {
    readiness: Readiness,
    idle: GapWatchdog,
    stall: GapWatchdog,
    throughput: ThroughputWatchdog,
    summary: TurnSummary,
}

impl StreamWatch {
    /// `now` is when the upstream response headers arrived.
    pub fn new(config: &WatchConfig, now: Millis) -> Self {
        Self {
            readiness: Readiness::new(now, config.first_content_ms),
            idle: GapWatchdog::idle(now, config.idle_ms),
            stall: GapWatchdog::stall(now, config.stall_ms),
            throughput: ThroughputWatchdog::new(config.throughput, now),
            summary: TurnSummary::default(),
        }
    }

    /// Raw upstream bytes arrived (pings and comments included).
    pub fn on_chunk(&mut self, now: Millis) {
        self.idle.on_chunk(now);
    }

    /// Records one inspected event and reports any abort that is due at `now`.
    pub fn on_event(&mut self, info: &EventInfo, now: Millis) -> Option<StreamAbort> {
        self.summary.record(info);
        self.readiness.on_event(info, now);
        self.stall.on_event(info, now);
        self.throughput.on_event(info, now);
        self.poll(now)
    }

    /// The first due abort: readiness, idle, stall, then throughput.
    pub fn poll(&mut self, now: Millis) -> Option<StreamAbort> {
        let stall = self
            .stall_armed(now)
            .then(|| self.stall.poll(now))
            .flatten();
        self.readiness
            .poll(now)
            .or_else(|| self.idle.poll(now))
            .or(stall)
            .or_else(|| self.throughput.poll(now))
    }

    /// While the readiness deadline is armed it owns the wait for first content, so a short
    /// stall budget cannot pre-empt `STREAM_READINESS_TIMEOUT` (and its failover).
    fn stall_armed(&self, now: Millis) -> bool {
        self.readiness.next_deadline(now).is_none()
    }

    /// The idle timeout: the longest silence allowed between upstream bytes; `0` = off.
    pub fn idle_limit_ms(&self) -> Millis {
        self.idle.limit_ms()
    }

    /// The upstream ended: `STREAM_EARLY_EOF` if nothing useful arrived first.
    pub fn on_eof(&self) -> Option<StreamAbort> {
        self.readiness.on_eof()
    }

    /// The earliest instant (never before `now`) at which [`StreamWatch::poll`] may abort.
    pub fn next_deadline(&self, now: Millis) -> Option<Millis> {
        [
            self.readiness.next_deadline(now),
            self.idle.next_deadline(now),
            self.stall
                .next_deadline(now)
                .filter(|_| self.stall_armed(now)),
            self.throughput.next_deadline(now),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    pub fn readiness(&self) -> ReadinessState {
        self.readiness.state()
    }

    /// When the gate opened (time to first content).
    pub fn ready_at(&self) -> Option<Millis> {
        self.readiness.ready_at()
    }

    pub fn summary(&self) -> &TurnSummary {
        &self.summary
    }

    /// See [`TurnSummary::ended_empty`].
    pub fn ended_empty(&self) -> bool {
        self.summary.ended_empty()
    }
}
