//! The throughput watchdog (docs/router-node.md, "The request path"), off by default.
//!
//! It judges tumbling windows of `window_ms` of useful assistant text bytes (UTF-8 of text
//! deltas; usage-only and empty events carry none). The first window starts when text is
//! flowing and no earlier than `warmup_ms` after the stream started, so nothing is judged
//! before `elapsed ≥ warmup + window`.
//!
//! Judgement is suspended in a *protected phase*: before the first text delta (the readiness
//! and stall watchdogs own that phase) and after any reasoning or tool-call frame until text
//! resumes. Resuming restarts the window, so a window is never judged on time that was
//! protected. At a window's end it aborts when `bytes · 1000 < min_bps · window_ms`, except
//! that a window with `0 < bytes < min_useful_bytes` is not judged (empty windows are).

use serde::{Deserialize, Serialize};

use super::inspect::{EventInfo, EventKind};
use super::watchdog::StreamAbort;
use crate::Millis;

/// `[resilience.stream.throughput_watchdog]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct ThroughputSettings {
    pub enabled: bool,
    pub warmup_ms: Millis,
    pub window_ms: Millis,
    pub min_useful_bytes_per_second: u64,
    pub min_useful_bytes: u64,
}

impl Default for ThroughputSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            warmup_ms: 30_000,
            window_ms: 30_000,
            min_useful_bytes_per_second: 1,
            min_useful_bytes: 1,
        }
    }
}

impl ThroughputSettings {
    /// The reference's bounds: warmup ≤ 600 000 ms, window ≥ 1 000 ms, rate ≥ 1, bytes ≥ 1.
    pub fn clamped(self) -> Self {
        Self {
            enabled: self.enabled,
            warmup_ms: self.warmup_ms.min(600_000),
            window_ms: self.window_ms.max(1_000),
            min_useful_bytes_per_second: self.min_useful_bytes_per_second.max(1),
            min_useful_bytes: self.min_useful_bytes.max(1),
        }
    }
}

/// Useful-output rate judge for one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThroughputWatchdog {
    settings: ThroughputSettings,
    /// Start of the current window; during warmup, the end of the warmup.
    window_start: Millis,
    window_bytes: u64,
    protected: bool,
    aborted: Option<StreamAbort>,
}

impl ThroughputWatchdog {
    /// `now` is the stream start; settings are clamped to their bounds.
    pub fn new(settings: ThroughputSettings, now: Millis) -> Self {
        let settings = settings.clamped();
        Self {
            settings,
            window_start: now.saturating_add(settings.warmup_ms),
            window_bytes: 0,
            protected: true,
            aborted: None,
        }
    }

    /// Whether judgement is currently suspended.
    pub fn is_protected(&self) -> bool {
        self.protected
    }

    pub fn on_event(&mut self, info: &EventInfo, now: Millis) {
        self.advance(now);
        match info.kind {
            EventKind::Reasoning | EventKind::ToolCall => self.protected = true,
            EventKind::Content if info.useful_text_bytes > 0 => {
                if self.protected {
                    self.protected = false;
                    self.window_start = self.window_start.max(now);
                    self.window_bytes = 0;
                }
                if now >= self.window_start {
                    let bytes = u64::try_from(info.useful_text_bytes).unwrap_or(u64::MAX);
                    self.window_bytes = self.window_bytes.saturating_add(bytes);
                }
            }
            _ => {}
        }
    }

    /// Judges every window that ended by `now`; the abort is latched.
    pub fn poll(&mut self, now: Millis) -> Option<StreamAbort> {
        self.advance(now);
        self.aborted
    }

    pub fn next_deadline(&self, now: Millis) -> Option<Millis> {
        if !self.settings.enabled {
            return None;
        }
        if self.aborted.is_some() {
            return Some(now);
        }
        (!self.protected).then(|| self.window_end().max(now))
    }

    fn window_end(&self) -> Millis {
        self.window_start.saturating_add(self.settings.window_ms)
    }

    fn advance(&mut self, now: Millis) {
        if !self.settings.enabled || self.protected || self.aborted.is_some() {
            return;
        }
        // Terminates: after one judged window the next is empty, and empty windows abort.
        while now >= self.window_end() {
            if self.too_slow() {
                self.aborted = Some(StreamAbort::ThroughputTooLow {
                    window_bytes: self.window_bytes,
                    window_ms: self.settings.window_ms,
                });
                return;
            }
            self.window_start = self.window_end();
            self.window_bytes = 0;
        }
    }

    fn too_slow(&self) -> bool {
        let s = &self.settings;
        let bytes = self.window_bytes;
        if bytes > 0 && bytes < s.min_useful_bytes {
            return false;
        }
        u128::from(bytes) * 1000
            < u128::from(s.min_useful_bytes_per_second) * u128::from(s.window_ms)
    }
}
