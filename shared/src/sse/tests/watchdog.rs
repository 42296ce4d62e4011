//! Decision tables for the readiness, idle and stall watchdogs, and the abort vocabulary.

use crate::Millis;
use crate::sse::{EventInfo, EventKind, GapWatchdog, Readiness, ReadinessState, StreamAbort};

pub(super) fn text(bytes: usize) -> EventInfo {
    EventInfo {
        useful_text_bytes: bytes,
        ..EventInfo::of(EventKind::Content)
    }
}

pub(super) fn of(kind: EventKind) -> EventInfo {
    EventInfo::of(kind)
}

/// Events (time, kind) fed before the checks.
type Events = &'static [(Millis, EventKind)];
/// (events, poll time, state after, poll result, EOF result)
type ReadinessRow = (
    Events,
    Millis,
    ReadinessState,
    Option<StreamAbort>,
    Option<StreamAbort>,
);
/// (events, poll time, poll result)
type StallRow = (Events, Millis, Option<StreamAbort>);

#[test]
fn readiness_table() {
    use EventKind::*;
    use ReadinessState::{Ready, UpstreamError, Waiting};
    let timeout = Some(StreamAbort::ReadinessTimeout { after_ms: 80_000 });
    let table: &[ReadinessRow] = &[
        (&[], 79_999, Waiting, None, Some(StreamAbort::EarlyEof)),
        (&[], 80_000, Waiting, timeout, Some(StreamAbort::EarlyEof)),
        // message_start (Other), pings, heartbeats, usage and Done are not content.
        (
            &[
                (500, Other),
                (1_000, Ping),
                (2_000, Heartbeat),
                (3_000, Usage),
                (4_000, Done),
            ],
            80_000,
            Waiting,
            timeout,
            Some(StreamAbort::EarlyEof),
        ),
        (&[(5_000, Reasoning)], 80_000, Ready, None, None),
        (&[(5_000, ToolCall)], 80_000, Ready, None, None),
        (&[(5_000, Content)], 80_000, Ready, None, None),
        (&[(5_000, Error)], 80_000, UpstreamError, None, None),
        // The first deciding event wins.
        (
            &[(5_000, Error), (6_000, Content)],
            80_000,
            UpstreamError,
            None,
            None,
        ),
        (
            &[(5_000, Content), (6_000, Error)],
            80_000,
            Ready,
            None,
            None,
        ),
    ];
    for (i, (events, at, state, poll, eof)) in table.iter().enumerate() {
        let mut r = Readiness::new(0, 80_000);
        for &(t, kind) in *events {
            let info = if kind == Content { text(3) } else { of(kind) };
            r.on_event(&info, t);
        }
        assert_eq!(r.state(), *state, "row {i}");
        assert_eq!(r.poll(*at), *poll, "row {i}");
        assert_eq!(r.on_eof(), *eof, "row {i}");
    }
}

#[test]
fn readiness_deadline_time_to_first_content_and_disabling() {
    let mut r = Readiness::new(1_000, 80_000);
    assert_eq!(r.next_deadline(1_000), Some(81_000));
    assert_eq!(r.next_deadline(90_000), Some(90_000), "never in the past");
    r.on_event(&of(EventKind::Reasoning), 7_000);
    assert_eq!((r.next_deadline(7_000), r.ready_at()), (None, Some(7_000)));

    let off = Readiness::new(0, 0);
    assert_eq!((off.next_deadline(0), off.poll(u64::MAX)), (None, None));
    assert_eq!(off.on_eof(), Some(StreamAbort::EarlyEof));
}

#[test]
fn idle_resets_on_any_chunk() {
    let mut idle = GapWatchdog::idle(0, 10_000);
    idle.on_event(&text(5), 9_000); // events alone do not reset it: chunks do
    assert_eq!(
        idle.poll(10_000),
        Some(StreamAbort::IdleTimeout { after_ms: 10_000 })
    );
    idle.on_chunk(9_500);
    assert_eq!(idle.poll(19_499), None);
    assert_eq!(idle.next_deadline(12_000), Some(19_500));
    assert_eq!(
        idle.poll(19_500),
        Some(StreamAbort::IdleTimeout { after_ms: 10_000 })
    );
    assert_eq!(GapWatchdog::idle(0, 0).poll(u64::MAX), None);
}

#[test]
fn stall_table_reasoning_restarts_heartbeats_do_not() {
    use EventKind::*;
    let stall = |after_ms| Some(StreamAbort::Stall { after_ms });
    let table: &[StallRow] = &[
        (&[], 9_999, None),
        (&[], 10_000, stall(10_000)),
        (&[(9_000, Reasoning)], 18_999, None),
        (&[(9_000, Reasoning)], 19_000, stall(10_000)),
        (
            &[
                (9_000, Ping),
                (9_100, Heartbeat),
                (9_200, Usage),
                (9_300, Other),
            ],
            10_000,
            stall(10_000),
        ),
        (&[(5_000, Content), (12_000, ToolCall)], 21_999, None),
        (
            &[(5_000, Content), (12_000, ToolCall)],
            22_000,
            stall(10_000),
        ),
    ];
    for (i, (events, at, want)) in table.iter().enumerate() {
        let mut w = GapWatchdog::stall(0, 10_000);
        for &(t, kind) in *events {
            w.on_chunk(t); // chunks never reset the stall budget
            w.on_event(&of(kind), t);
        }
        assert_eq!(w.poll(*at), *want, "row {i}");
    }
}

#[test]
fn abort_statuses_types_and_codes() {
    let table = [
        (
            StreamAbort::ReadinessTimeout { after_ms: 1 },
            504,
            "stream_timeout",
            "STREAM_READINESS_TIMEOUT",
        ),
        (
            StreamAbort::EarlyEof,
            502,
            "stream_early_eof",
            "STREAM_EARLY_EOF",
        ),
        (
            StreamAbort::IdleTimeout { after_ms: 1 },
            504,
            "timeout_error",
            "stream_idle_timeout",
        ),
        (
            StreamAbort::Stall { after_ms: 1 },
            504,
            "timeout_error",
            "stream_stall_timeout",
        ),
        (
            super::throughput::low(0),
            504,
            "timeout_error",
            "STREAM_THROUGHPUT_TOO_LOW",
        ),
    ];
    for (abort, status, ty, code) in table {
        assert_eq!(
            (abort.status(), abort.error_type(), abort.code()),
            (status, ty, code)
        );
        assert!(!abort.message().is_empty());
    }
    assert_eq!(
        StreamAbort::ReadinessTimeout { after_ms: 80_000 }.message(),
        "Stream produced no non-ping SSE event within 80000ms"
    );
}
