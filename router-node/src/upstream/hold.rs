//! The recovery hold: when a held stream may be committed, and what an end inside the hold
//! means. Pure policy with time passed in; the readiness gate ([`super::gate`]) does the I/O.
//!
//! Why: a stream that breaks a few chunks after its first content frame used to reach the
//! client as a broken answer, because the commit point was that first frame. With
//! `[resilience.stream_recovery]` on, the gate keeps holding after the first content frame
//! until the hold window has passed (`hold_ms` since the response headers), `hold_bytes` are
//! held, or the upstream has ended cleanly. An upstream that fails inside the hold has sent
//! the client nothing, so the attempt fails like any other before the commit point and the
//! request reopens on its next attempt (the pipeline counts these against `max_reopens`).

use switchyard_shared::Millis;
use switchyard_shared::settings::StreamRecovery;
use switchyard_shared::sse::TurnSummary;

/// The hold of one streamed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldPolicy {
    /// How long after the response headers the hold lasts at most.
    pub hold_ms: Millis,
    /// How many held bytes release the hold.
    pub hold_bytes: usize,
}

impl HoldPolicy {
    /// The hold the settings ask for, `None` when stream recovery is off.
    pub fn from_settings(settings: &StreamRecovery) -> Option<Self> {
        settings.enabled.then(|| Self {
            hold_ms: settings.hold_ms,
            hold_bytes: usize::try_from(settings.hold_bytes).unwrap_or(usize::MAX),
        })
    }

    /// When the hold window ends, for headers that arrived at `headers_at`.
    pub fn until(&self, headers_at: Millis) -> Millis {
        headers_at.saturating_add(self.hold_ms)
    }

    /// Whether a stream that has shown content may be committed now: the window has passed,
    /// enough bytes are held, or the upstream sent its terminal event (nothing after it can
    /// truncate the answer).
    pub fn releases(
        &self,
        headers_at: Millis,
        now: Millis,
        held_bytes: usize,
        summary: &TurnSummary,
    ) -> bool {
        summary.done || now >= self.until(headers_at) || held_bytes >= self.hold_bytes
    }
}

/// How a held stream (content already seen) stopped before its hold released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldStop {
    /// The upstream body ended.
    Eof,
    /// Reading the upstream body failed.
    ReadError,
    /// The upstream sent an in-band error event.
    ErrorEvent,
    /// A stream watchdog (idle, stall, throughput) fired.
    Watchdog,
}

/// What the gate makes of a [`HeldStop`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldVerdict {
    /// The answer is complete: commit what is held, the upstream has nothing more.
    CleanEnd,
    /// An early truncation: discard what is held and fail the attempt, so the request
    /// reopens.
    Truncated,
}

/// An EOF is clean only after the terminal event (`[DONE]`, `message_stop`,
/// `response.completed`) or a finish reason (an OpenAI-compatible server that omits
/// `[DONE]`); everything else inside the hold is a truncation.
pub fn judge(stop: HeldStop, summary: &TurnSummary) -> HeldVerdict {
    match stop {
        HeldStop::Eof
            if summary.error.is_none() && (summary.done || summary.finish_reason.is_some()) =>
        {
            HeldVerdict::CleanEnd
        }
        _ => HeldVerdict::Truncated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_shared::sse::{FinishReason, UpstreamStreamError};

    const POLICY: HoldPolicy = HoldPolicy {
        hold_ms: 750,
        hold_bytes: 1000,
    };

    #[test]
    fn off_by_default_and_read_from_the_settings() {
        assert_eq!(HoldPolicy::from_settings(&StreamRecovery::default()), None);
        let on = StreamRecovery {
            enabled: true,
            ..StreamRecovery::default()
        };
        assert_eq!(
            HoldPolicy::from_settings(&on),
            Some(HoldPolicy {
                hold_ms: 750,
                hold_bytes: 65_536
            })
        );
    }

    #[test]
    fn the_hold_releases_on_time_bytes_or_the_terminal_event() {
        let summary = TurnSummary::default();
        assert_eq!(POLICY.until(100), 850);
        assert!(!POLICY.releases(100, 849, 999, &summary));
        assert!(POLICY.releases(100, 850, 0, &summary), "the window passed");
        assert!(POLICY.releases(100, 101, 1000, &summary), "enough bytes");
        let done = TurnSummary {
            done: true,
            ..TurnSummary::default()
        };
        assert!(POLICY.releases(100, 101, 1, &done), "the terminal event");
    }

    #[test]
    fn an_eof_is_clean_only_after_the_terminal_event_or_a_finish_reason() {
        let open = TurnSummary {
            useful_text_bytes: 12,
            ..TurnSummary::default()
        };
        assert_eq!(judge(HeldStop::Eof, &open), HeldVerdict::Truncated);
        let done = TurnSummary {
            done: true,
            ..open.clone()
        };
        assert_eq!(judge(HeldStop::Eof, &done), HeldVerdict::CleanEnd);
        let finished = TurnSummary {
            finish_reason: Some(FinishReason::from_upstream("stop")),
            ..open.clone()
        };
        assert_eq!(judge(HeldStop::Eof, &finished), HeldVerdict::CleanEnd);
        let errored = TurnSummary {
            error: Some(UpstreamStreamError {
                error_type: "api_error".into(),
                message: "boom".into(),
                code: None,
            }),
            ..done.clone()
        };
        assert_eq!(judge(HeldStop::Eof, &errored), HeldVerdict::Truncated);
    }

    #[test]
    fn read_errors_error_events_and_watchdogs_inside_the_hold_are_truncations() {
        let done = TurnSummary {
            done: true,
            ..TurnSummary::default()
        };
        for stop in [
            HeldStop::ReadError,
            HeldStop::ErrorEvent,
            HeldStop::Watchdog,
        ] {
            assert_eq!(judge(stop, &done), HeldVerdict::Truncated, "{stop:?}");
        }
    }
}
