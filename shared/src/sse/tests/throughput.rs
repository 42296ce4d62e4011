//! Decision tables for the throughput watchdog: abort timing, thin windows and suspension
//! during reasoning and tool phases.

use super::watchdog::{of, text};
use crate::Millis;
use crate::sse::{EventInfo, EventKind, StreamAbort, ThroughputSettings, ThroughputWatchdog};

fn enabled() -> ThroughputSettings {
    ThroughputSettings {
        enabled: true,
        ..ThroughputSettings::default()
    }
}

/// Runs `events` (time, info) through a watchdog started at 0, polling at each event and at
/// every `polls` instant; returns the first abort and when it was seen.
fn run(
    settings: ThroughputSettings,
    events: &[(Millis, EventInfo)],
    polls: &[Millis],
) -> Option<(Millis, StreamAbort)> {
    let mut w = ThroughputWatchdog::new(settings, 0);
    let mut times: Vec<(Millis, Option<&EventInfo>)> =
        events.iter().map(|(t, e)| (*t, Some(e))).collect();
    times.extend(polls.iter().map(|&t| (t, None)));
    times.sort_by_key(|&(t, e)| (t, e.is_none()));
    for (t, event) in times {
        if let Some(info) = event {
            w.on_event(info, t);
        }
        if let Some(abort) = w.poll(t) {
            return Some((t, abort));
        }
    }
    None
}

pub(super) fn low(window_bytes: u64) -> StreamAbort {
    StreamAbort::ThroughputTooLow {
        window_bytes,
        window_ms: 30_000,
    }
}

#[test]
fn throughput_abort_timing() {
    let polls: Vec<Millis> = (0..=40).map(|i| i * 5_000).collect();
    let s = enabled();
    // Text only during warmup: the first judged window [30s, 60s) is empty.
    assert_eq!(run(s, &[(1_000, text(5))], &polls), Some((60_000, low(0))));
    // 40 B in the first window passes (≥ 1 B/s); the next, empty one fails.
    assert_eq!(
        run(s, &[(1_000, text(5)), (45_000, text(40))], &polls),
        Some((90_000, low(0)))
    );
    // 29 B in 30 s is below 1 B/s.
    assert_eq!(
        run(s, &[(1_000, text(5)), (45_000, text(29))], &polls),
        Some((60_000, low(29)))
    );
    // Text starting after warmup starts the window then: 30 B in [45s, 75s) is exactly 1 B/s.
    assert_eq!(
        run(s, &[(45_000, text(30))], &polls),
        Some((105_000, low(0)))
    );
    // No text at all: judgement never starts (readiness and stall own that phase).
    assert_eq!(run(s, &[], &polls), None);
    // Disabled: never.
    assert_eq!(
        run(ThroughputSettings::default(), &[(1_000, text(1))], &polls),
        None
    );
}

#[test]
fn throughput_is_suspended_during_reasoning_and_tool_phases() {
    let polls: Vec<Millis> = (0..=60).map(|i| i * 5_000).collect();
    for phase in [EventKind::Reasoning, EventKind::ToolCall] {
        let events = [(31_000, text(40)), (50_000, of(phase)), (200_000, text(1))];
        // Protected from 50 s; text resumes at 200 s and a fresh window starts there.
        assert_eq!(
            run(enabled(), &events, &polls),
            Some((230_000, low(1))),
            "{phase:?}"
        );
        let mut w = ThroughputWatchdog::new(enabled(), 0);
        w.on_event(&text(40), 31_000);
        w.on_event(&of(phase), 50_000);
        assert!(w.is_protected());
        assert_eq!((w.next_deadline(60_000), w.poll(500_000)), (None, None));
        // Pings, usage and empty events neither count nor end the phase.
        w.on_event(&of(EventKind::Usage), 500_001);
        w.on_event(&text(0), 500_002);
        assert!(w.is_protected());
    }
}

#[test]
fn throughput_thin_windows_are_not_judged() {
    let s = ThroughputSettings {
        min_useful_bytes_per_second: 10,
        min_useful_bytes: 50,
        ..enabled()
    };
    let polls: Vec<Millis> = (0..=40).map(|i| i * 5_000).collect();
    // 0 < 20 < 50: not judged; the following empty window is.
    assert_eq!(
        run(s, &[(1_000, text(1)), (40_000, text(20))], &polls),
        Some((90_000, low(0)))
    );
    // 60 B ≥ 50 but 2 B/s < 10 B/s.
    assert_eq!(
        run(s, &[(1_000, text(1)), (40_000, text(60))], &polls),
        Some((60_000, low(60)))
    );
    // 300 B = 10 B/s passes.
    assert_eq!(
        run(s, &[(1_000, text(1)), (40_000, text(300))], &polls),
        Some((90_000, low(0)))
    );
}

#[test]
fn throughput_late_events_do_not_rescue_a_closed_window() {
    let mut w = ThroughputWatchdog::new(enabled(), 0);
    w.on_event(&text(5), 1_000);
    assert_eq!(w.next_deadline(1_000), Some(60_000));
    // The timer was late: bytes arriving after the window closed count for the next one.
    w.on_event(&text(500), 61_000);
    assert_eq!(w.poll(61_000), Some(low(0)));
    assert_eq!(
        w.next_deadline(70_000),
        Some(70_000),
        "a latched abort is due at once"
    );
}

#[test]
fn throughput_settings_are_clamped() {
    let s = ThroughputSettings {
        enabled: true,
        warmup_ms: 10_000_000,
        window_ms: 10,
        min_useful_bytes_per_second: 0,
        min_useful_bytes: 0,
    };
    let c = s.clamped();
    assert_eq!(
        (
            c.warmup_ms,
            c.window_ms,
            c.min_useful_bytes_per_second,
            c.min_useful_bytes
        ),
        (600_000, 1_000, 1, 1)
    );
    let parsed: ThroughputSettings =
        serde_json::from_str(r#"{"enabled":true}"#).unwrap_or_default();
    assert_eq!(parsed, enabled());
}
