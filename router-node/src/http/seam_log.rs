//! What a seamed stream's end is made of: the ledger its segments fill in, the whole
//! stream's end merged from it, and the continuation's outcome and metric (the access line
//! itself is written by [`super::request_end`]).
//!
//! Why apart: the stream's wiring and its bookkeeping change for different reasons.

use std::sync::Arc;

use switchyard_shared::sse::Usage;

use crate::runtime::Runtime;
use crate::upstream::StreamEnd;
use crate::upstream::seams::SeamsEnd;

/// One segment as the access line sees it.
pub struct SegmentRecord {
    pub conn_idx: usize,
    pub connection: Arc<str>,
    pub end: StreamEnd,
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

/// What the continuation came to, for the access line: `continued`, `failed`, why it could
/// not continue, or `-` when it never had to.
pub fn continuation(seams: &SeamsEnd) -> &'static str {
    if seams.failed {
        "failed"
    } else if let Some(r) = seams.refusal {
        r.outcome()
    } else if seams.continued > 0 {
        "continued"
    } else {
        "-"
    }
}

/// `switchyard_stream_recoveries_total{kind="continuation"}`: every continuation that
/// started, one that could not, and a failed stream that was not continued.
pub fn count_decisions(rt: &Runtime, seams: &SeamsEnd) {
    for _ in 0..seams.continued {
        rt.table
            .metrics
            .stream_recovery("continuation", "continued");
    }
    if seams.failed {
        rt.table.metrics.stream_recovery("continuation", "failed");
    }
    if let Some(refusal) = seams.refusal {
        rt.table
            .metrics
            .stream_recovery("continuation", refusal.outcome());
    }
}
