//! The combined [`StreamWatch`] driven by whole fixtures.

use super::watchdog::{of, text};
use super::{fixtures, infos};
use crate::sse::{
    EventKind, Format, ReadinessState, StreamAbort, StreamWatch, ThroughputSettings, Usage,
    WatchConfig,
};

fn config() -> WatchConfig {
    WatchConfig {
        first_content_ms: 80_000,
        idle_ms: 20_000,
        stall_ms: 50_000,
        throughput: ThroughputSettings::default(),
    }
}

/// Feeds a fixture one event per second, as if each arrived in its own chunk.
fn drive(format: Format, stream: &str) -> StreamWatch {
    let mut watch = StreamWatch::new(&config(), 0);
    for (i, info) in infos(format, stream.as_bytes()).iter().enumerate() {
        let now = 1_000 * (i as u64 + 1);
        watch.on_chunk(now);
        assert_eq!(watch.on_event(info, now), None);
    }
    watch
}

#[test]
fn anthropic_turn_summary() {
    let watch = drive(Format::Anthropic, fixtures::ANTHROPIC);
    assert_eq!(watch.readiness(), ReadinessState::Ready);
    assert_eq!(
        watch.ready_at(),
        Some(4_000),
        "the first thinking_delta, not message_start or ping"
    );
    let s = watch.summary();
    assert_eq!(
        (
            s.useful_text_bytes,
            s.reasoning_events,
            s.done,
            s.error.is_none()
        ),
        (17, 3, true, true)
    );
    let usage = Usage {
        input: Some(25),
        output: Some(89),
        cache_read: Some(12),
        cache_creation: Some(7),
    };
    assert_eq!(s.usage, Some(usage));
    assert!(!watch.ended_empty());
    assert_eq!(watch.on_eof(), None);
}

#[test]
fn a_200_stream_with_an_error_event_records_the_error() {
    let watch = drive(Format::Anthropic, fixtures::ANTHROPIC_OVERLOADED);
    let error = watch.summary().error.as_ref().map(|e| e.error_type.clone());
    assert_eq!(error.as_deref(), Some("overloaded_error"));
    assert!(!watch.summary().done);
}

#[test]
fn tool_only_turns_are_not_empty_reasoning_only_turns_are() {
    assert!(!drive(Format::OpenAiResponses, fixtures::RESPONSES_TOOLS).ended_empty());
    assert!(!drive(Format::OpenAiChat, fixtures::OPENAI_CHAT).ended_empty());

    let mut watch = StreamWatch::new(&config(), 0);
    for t in [1_000, 2_000, 3_000] {
        watch.on_event(&of(EventKind::Reasoning), t);
    }
    watch.on_event(&of(EventKind::Done), 4_000);
    assert_eq!(watch.readiness(), ReadinessState::Ready);
    assert!(watch.ended_empty());
    assert_eq!(
        watch.on_eof(),
        None,
        "the gate opened, so it is not an early EOF"
    );
}

#[test]
fn single_timer_follows_the_earliest_deadline() {
    let cfg = WatchConfig {
        throughput: ThroughputSettings {
            enabled: true,
            ..ThroughputSettings::default()
        },
        ..config()
    };
    let mut watch = StreamWatch::new(&cfg, 0);
    // idle 20 s < readiness 80 s; stall waits for the gate to open
    assert_eq!(watch.next_deadline(0), Some(20_000));
    watch.on_chunk(15_000);
    assert_eq!(watch.next_deadline(15_000), Some(35_000));
    watch.on_chunk(30_000);
    assert_eq!(watch.on_event(&text(40), 30_000), None);
    // idle 50 s, stall 80 s, readiness done, throughput window [30 s, 60 s)
    assert_eq!(watch.next_deadline(30_000), Some(50_000));
    watch.on_chunk(45_000);
    assert_eq!(watch.next_deadline(45_000), Some(60_000));
    assert_eq!(watch.poll(60_000), None, "40 B in 30 s is enough");
    watch.on_chunk(60_000);
    // Reasoning: throughput suspended, stall restarted.
    assert_eq!(watch.on_event(&of(EventKind::Reasoning), 60_000), None);
    assert_eq!(watch.next_deadline(60_000), Some(80_000));
    assert_eq!(
        watch.poll(80_000),
        Some(StreamAbort::IdleTimeout { after_ms: 20_000 })
    );
}

#[test]
fn readiness_then_stall_ordering() {
    let mut watch = StreamWatch::new(&config(), 0);
    // Pings keep the connection alive but prove nothing; the 50 s stall budget does not
    // pre-empt the readiness deadline.
    for t in (10_000..=70_000).step_by(10_000) {
        watch.on_chunk(t);
        assert_eq!(watch.on_event(&of(EventKind::Ping), t), None, "{t}");
    }
    assert_eq!(watch.next_deadline(70_000), Some(80_000));
    assert_eq!(
        watch.poll(80_000),
        Some(StreamAbort::ReadinessTimeout { after_ms: 80_000 })
    );
    assert_eq!(watch.on_eof(), Some(StreamAbort::EarlyEof));

    let mut watch = StreamWatch::new(&config(), 0);
    for t in (10_000..=40_000).step_by(10_000) {
        watch.on_chunk(t);
        watch.on_event(&of(EventKind::Heartbeat), t);
    }
    watch.on_event(&text(1), 40_000);
    for t in (50_000..=80_000).step_by(10_000) {
        watch.on_chunk(t);
        assert_eq!(watch.on_event(&of(EventKind::Heartbeat), t), None, "{t}");
    }
    assert_eq!(
        watch.poll(90_000),
        Some(StreamAbort::Stall { after_ms: 50_000 })
    );
}

#[test]
fn stall_covers_the_first_content_wait_when_readiness_is_disabled() {
    let cfg = WatchConfig {
        first_content_ms: 0,
        ..config()
    };
    let mut watch = StreamWatch::new(&cfg, 0);
    watch.on_chunk(10_000);
    assert_eq!(watch.next_deadline(10_000), Some(30_000));
    for t in (10_000..=50_000).step_by(10_000) {
        watch.on_chunk(t);
        watch.on_event(&of(EventKind::Ping), t);
    }
    assert_eq!(
        watch.poll(50_000),
        Some(StreamAbort::Stall { after_ms: 50_000 })
    );
}
