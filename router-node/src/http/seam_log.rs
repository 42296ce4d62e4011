//! What a seamed stream records once it ends: the one access line and the continuation
//! metric, from the ledger its segments filled in (see [`super::seamed`]).
//!
//! Why apart: the stream's wiring and its bookkeeping change for different reasons; the
//! fields follow the plain stream's access line, with `seams`, `segments` and
//! `continuation` added.

use std::sync::Arc;
use std::time::Instant;

use switchyard_shared::sse::Usage;

use crate::access_log;
use crate::runtime::Runtime;
use crate::upstream::StreamEnd;
use crate::upstream::seams::SeamsEnd;

/// One segment as the access line sees it.
pub struct SegmentRecord {
    pub conn_idx: usize,
    pub connection: Arc<str>,
    pub end: StreamEnd,
}

/// What the access line keeps of the first (committed) segment.
pub struct FirstSegment {
    pub ttft_ms: u64,
    pub recovered: u32,
    pub target: String,
    pub connection: String,
    pub attempts: u32,
    pub dropped: Option<String>,
    pub emulated: Option<String>,
}

/// The whole stream's end: the last segment's abort, every segment's bytes and usage.
pub fn merged_end(segments: &[SegmentRecord], seams: &SeamsEnd) -> StreamEnd {
    let mut usage: Option<Usage> = None;
    for u in segments.iter().filter_map(|s| s.end.usage) {
        let total = usage.get_or_insert_with(Usage::default);
        total.input = Some(total.input.unwrap_or(0) + u.input.unwrap_or(0));
        total.output = Some(total.output.unwrap_or(0) + u.output.unwrap_or(0));
    }
    let last = segments.last().map(|s| s.end.clone()).unwrap_or_default();
    StreamEnd {
        completed: seams.completed && !seams.client_disconnected,
        client_disconnected: seams.client_disconnected,
        bytes: segments.iter().map(|s| s.end.bytes).sum(),
        usage,
        ..last
    }
}

pub fn access_line(
    log: &(String, Instant),
    key_id: Option<&str>,
    model: &str,
    first: &FirstSegment,
    segments: &[SegmentRecord],
    seams: &SeamsEnd,
    end: &StreamEnd,
) {
    let Some(mut line) = access_log::Line::start("request") else {
        return;
    };
    let served: Vec<&str> = segments.iter().map(|s| &*s.connection).collect();
    let continuation = if seams.failed {
        "failed"
    } else if let Some(r) = seams.refusal {
        r.outcome()
    } else if seams.continued > 0 {
        "continued"
    } else {
        "-"
    };
    line.str("request_id", &log.0)
        .str("api_key", key_id.unwrap_or("-"))
        .str("model", model)
        .str("route_target", &first.target)
        .str("connection", &first.connection)
        .u64("attempts", u64::from(first.attempts))
        .u64("status", 200)
        .bool("stream", true)
        .u64("ttft_ms", first.ttft_ms)
        .u64("recovered", u64::from(first.recovered))
        .u64("seams", u64::from(seams.seams))
        .str("segments", &served.join(","))
        .str("continuation", continuation)
        .bool("completed", end.completed)
        .bool("client_disconnected", end.client_disconnected)
        .str("abort", end.abort.as_ref().map_or("-", |a| a.code()))
        .u64("bytes", end.bytes)
        .u64(
            "input_tokens",
            end.usage.as_ref().and_then(|u| u.input).unwrap_or(0),
        )
        .u64(
            "output_tokens",
            end.usage.as_ref().and_then(|u| u.output).unwrap_or(0),
        )
        .u64("duration_ms", super::client_routes::millis(log.1.elapsed()));
    if let Some(dropped) = &first.dropped {
        line.str("dropped_params", dropped);
    }
    if let Some(emulated) = &first.emulated {
        line.str("emulated_params", emulated);
    }
    line.finish();
}

/// `switchyard_stream_recoveries_total{kind="continuation"}`: every continuation that
/// started, one that could not, and a failed stream that was not continued.
pub fn count_decisions(rt: &Runtime, seams: &SeamsEnd) {
    for _ in 0..seams.continued {
        rt.metrics.stream_recovery("continuation", "continued");
    }
    if seams.failed {
        rt.metrics.stream_recovery("continuation", "failed");
    }
    if let Some(refusal) = seams.refusal {
        rt.metrics
            .stream_recovery("continuation", refusal.outcome());
    }
}
