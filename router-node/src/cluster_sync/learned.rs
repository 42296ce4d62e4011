//! Merging a peer's learned state into this node: a connection's usage-wall deadlines, a
//! target's tool limit and a connection's queue pause (announced by `cluster::learned`).
//!
//! Why separate from the actor messages in [`super::remote`]: this state has no actor; it is
//! merged in place, extend-only, so a late or repeated event never shortens anything. The
//! lowering events are explicit: `ToolLimitCleared` (a success above the limit) and
//! `UsageWallLaneEnded` (a lane ended early on a peer; it ends the same lane here, not a newer
//! one).

use switchyard_shared::wire::WireEvent;

use super::remote::Applied;
use crate::cluster::learned::{end_reason, shared_of};
use crate::runtime::Runtime;

/// Merges one learned-state event; `Dropped` when the connection or provider is not here.
pub fn apply(rt: &Runtime, event: &WireEvent) -> Applied {
    if let Some((connection, shared)) = shared_of(event) {
        let Some(conn) = rt.table.connection(connection) else {
            return Applied::Dropped;
        };
        let now = rt.table.clock.epoch_ms();
        let changed = rt
            .table
            .usage_wall
            .with(conn.idx, |s| s.adopt(&shared, now));
        if changed == Some(true) {
            tracing::info!(
                connection,
                lane_ms = shared.lane_ms,
                "usage wall adopted from a peer"
            );
        }
        return Applied::Applied;
    }
    match event {
        WireEvent::ToolLimitLearned {
            provider,
            model,
            limit,
            remaining_ms,
        } => {
            let Some(p) = rt.table.provider(provider) else {
                return Applied::Dropped;
            };
            let now = rt.table.clock.now();
            p.record_tool_limit(model, *limit, now.saturating_add(*remaining_ms), now);
            Applied::Applied
        }
        WireEvent::ToolLimitCleared {
            provider,
            model,
            tools,
        } => {
            let Some(p) = rt.table.provider(provider) else {
                return Applied::Dropped;
            };
            p.tool_limit_success(model, *tools as usize);
            Applied::Applied
        }
        WireEvent::UsageWallLaneEnded {
            connection,
            reason,
            lane_reset_ms,
        } => {
            let Some(conn) = rt.table.connection(connection) else {
                return Applied::Dropped;
            };
            let now = rt.table.clock.epoch_ms();
            let reason = end_reason(reason);
            let ended = rt
                .table
                .usage_wall
                .with(conn.idx, |s| s.end_shared(reason, *lane_reset_ms, now));
            if ended == Some(true) {
                tracing::info!(
                    connection = %connection,
                    reason = reason.label(),
                    "usage-wall lane ended by a peer"
                );
            }
            Applied::Applied
        }
        WireEvent::QueuePaused {
            connection,
            remaining_ms,
        } => {
            let Some(conn) = rt.table.connection(connection) else {
                return Applied::Dropped;
            };
            let now = rt.table.clock.now();
            // Extend-only and capped at this queue's wait budget (`state::queue::peer_pause`).
            if let Some(until) = conn.queue.adopt_peer_pause(*remaining_ms, now) {
                tracing::info!(
                    connection = %connection,
                    remaining_ms = until.saturating_sub(now),
                    "request queue paused by a peer"
                );
            }
            Applied::Applied
        }
        _ => Applied::NotForActors,
    }
}
