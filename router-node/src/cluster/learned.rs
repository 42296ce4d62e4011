//! Sharing what the request path learns from upstream answers: a connection's usage-wall
//! deadlines, a target's tool limit, and a connection's queue pause (a typed `RetryInfo` 429).
//!
//! Why here and not through the writer: these are not actor state, and the request path must
//! not wait on Redis. Each write is a spawned task: the extend-only script in Redis
//! (`store::learned`), then, when it changed anything, a wire event with what Redis now holds,
//! so the peers merge it on arrival (`cluster_sync::remote`). A failed write is logged and
//! dropped: the state stays correct on this node, and the next change writes it again.
//!
//! A lane this node ended before its reset is withdrawn the same way
//! ([`Cluster::end_usage_wall_lane`]): the record says it ended, and a `UsageWallLaneEnded`
//! event ends the same lane on the peers. Every write is counted as under way in
//! [`crate::cluster::learned_versions`] until it returns, so a resync in between does not make
//! this node's state equal to a record the write has not reached yet.
//!
//! A queue pause is announced only ([`Cluster::share_queue_pause`]): no Redis key, no change
//! log entry, no replay. It lasts at most the queue's `max_wait_ms` (seconds), so by the time
//! a resync (5 s) or a replay after an outage could deliver it, it would mostly be over, and a
//! node that misses it pays with one 429 of its own, which pauses it locally. A key would
//! need a script, a resync read and a rolling-upgrade story for state that short.

use std::sync::Arc;

use switchyard_shared::Millis;
use switchyard_shared::wire::{self, Envelope, WireEvent};
use switchyard_store::{LearnedKey, WallDeadlines, WallMerged};

use super::Cluster;
use crate::metrics::cluster::EventResult;
use crate::usage_wall::{EndReason, Shared};

/// The wire and store form of a connection's shared usage-wall state.
pub fn deadlines(s: &Shared) -> WallDeadlines {
    WallDeadlines {
        lane_ms: s.lane_ms,
        lane_reset_ms: s.lane_reset_ms,
        reaccept_blocked_ms: s.reaccept_blocked_ms,
        budget_exhausted_ms: s.budget_exhausted_ms,
        reset_hold_ms: s.reset_hold_ms,
        reset_backoff: s.reset_backoff,
    }
}

/// The end reason of a label from a peer or from Redis (`Refused` for one this build does not
/// know).
pub fn end_reason(label: &str) -> EndReason {
    EndReason::from_label(label)
}

/// Deadlines as Redis holds them, as the state policy takes them.
pub fn shared_from(d: &WallDeadlines) -> Shared {
    Shared {
        lane_ms: d.lane_ms,
        lane_reset_ms: d.lane_reset_ms,
        reaccept_blocked_ms: d.reaccept_blocked_ms,
        budget_exhausted_ms: d.budget_exhausted_ms,
        reset_hold_ms: d.reset_hold_ms,
        reset_backoff: d.reset_backoff,
    }
}

/// A usage-wall event's deadlines, as the state policy takes them.
pub fn shared_of(event: &WireEvent) -> Option<(&str, Shared)> {
    match event {
        WireEvent::UsageWallShared {
            connection,
            lane_ms,
            lane_reset_ms,
            reaccept_blocked_ms,
            budget_exhausted_ms,
            reset_hold_ms,
            reset_backoff,
        } => Some((
            connection,
            Shared {
                lane_ms: *lane_ms,
                lane_reset_ms: *lane_reset_ms,
                reaccept_blocked_ms: *reaccept_blocked_ms,
                budget_exhausted_ms: *budget_exhausted_ms,
                reset_hold_ms: *reset_hold_ms,
                reset_backoff: *reset_backoff,
            },
        )),
        _ => None,
    }
}

impl Cluster {
    /// Writes connection `conn`'s usage-wall deadlines to Redis and announces the result.
    pub fn share_usage_wall(self: &Arc<Self>, conn: &str, shared: Shared) {
        if shared.is_empty() {
            return;
        }
        let cluster = self.clone();
        let conn = conn.to_owned();
        let key = LearnedKey::Wall(conn.clone());
        self.learned_versions.write_started(&key);
        tokio::spawn(async move {
            match cluster
                .store
                .usage_wall_merge(&conn, deadlines(&shared))
                .await
            {
                Ok(merged) if merged.changed => cluster.announce_wall(&conn, &merged, false).await,
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(connection = %conn, error = %e, "usage wall not shared");
                }
            }
            cluster.learned_versions.write_done(&key);
        });
    }

    /// This node ended connection `conn`'s lane before its reset, for `reason`; the lane's
    /// reset was `lane_reset_ms` away. Withdraws the lane from Redis (when Redis holds that
    /// lane, not a newer one) with the other deadlines of `shared` merged, and announces it.
    pub fn end_usage_wall_lane(
        self: &Arc<Self>,
        conn: &str,
        reason: EndReason,
        lane_reset_ms: Millis,
        shared: Shared,
    ) {
        let cluster = self.clone();
        let conn = conn.to_owned();
        let key = LearnedKey::Wall(conn.clone());
        self.learned_versions.write_started(&key);
        let d = WallDeadlines {
            lane_ms: 0,
            lane_reset_ms,
            ..deadlines(&shared)
        };
        tokio::spawn(async move {
            match cluster.store.usage_wall_end(&conn, reason.label(), d).await {
                Ok(merged) if merged.changed => cluster.announce_wall(&conn, &merged, true).await,
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(connection = %conn, error = %e, "usage-wall lane end not shared");
                }
            }
            cluster.learned_versions.write_done(&key);
        });
    }

    /// Announces what a usage-wall write changed: the lane's end (a write that ended it, when
    /// the record says so) and the merged deadlines (when any is left).
    async fn announce_wall(&self, conn: &str, merged: &WallMerged, ending: bool) {
        if let Some(end) = merged.ended.as_ref().filter(|_| ending) {
            let event = WireEvent::UsageWallLaneEnded {
                connection: conn.to_owned(),
                reason: end.reason.clone(),
                lane_reset_ms: end.reset_ms,
            };
            self.announce(event).await;
        }
        let d = merged.deadlines;
        if shared_from(&d).is_empty() {
            return;
        }
        let event = WireEvent::UsageWallShared {
            connection: conn.to_owned(),
            lane_ms: d.lane_ms,
            lane_reset_ms: d.lane_reset_ms,
            reaccept_blocked_ms: d.reaccept_blocked_ms,
            budget_exhausted_ms: d.budget_exhausted_ms,
            reset_hold_ms: d.reset_hold_ms,
            reset_backoff: d.reset_backoff,
        };
        self.announce(event).await;
    }

    /// Writes a tool limit learned for `provider`'s `model` and announces the stored one.
    pub fn share_tool_limit(
        self: &Arc<Self>,
        provider: &str,
        model: &str,
        limit: u32,
        ttl: Millis,
    ) {
        let cluster = self.clone();
        let (provider, model) = (provider.to_owned(), model.to_owned());
        let key = LearnedKey::ToolLimit {
            provider: provider.clone(),
            model: model.clone(),
        };
        self.learned_versions.write_started(&key);
        tokio::spawn(async move {
            let written = cluster
                .store
                .tool_limit_learn(&provider, &model, limit, ttl)
                .await;
            cluster.learned_versions.write_done(&key);
            match written {
                Ok(stored) if stored.changed => {
                    if let Some(limit) = stored.limit {
                        let event = WireEvent::ToolLimitLearned {
                            provider,
                            model,
                            limit,
                            remaining_ms: stored.remaining_ms,
                        };
                        cluster.announce(event).await;
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(%provider, error = %e, "tool limit not shared"),
            }
        });
    }

    /// A success with `tools` tools on `provider`'s `model`: drops a shared limit below it.
    pub fn clear_tool_limit(self: &Arc<Self>, provider: &str, model: &str, tools: usize) {
        let cluster = self.clone();
        let (provider, model) = (provider.to_owned(), model.to_owned());
        let tools = u32::try_from(tools).unwrap_or(u32::MAX);
        let key = LearnedKey::ToolLimit {
            provider: provider.clone(),
            model: model.clone(),
        };
        self.learned_versions.write_started(&key);
        tokio::spawn(async move {
            let written = cluster
                .store
                .tool_limit_drop(&provider, &model, tools)
                .await;
            cluster.learned_versions.write_done(&key);
            match written {
                // Announced even when Redis had nothing: peers may hold it from an event.
                Ok(_) => {
                    let event = WireEvent::ToolLimitCleared {
                        provider,
                        model,
                        tools,
                    };
                    cluster.announce(event).await;
                }
                Err(e) => tracing::debug!(%provider, error = %e, "tool limit not dropped"),
            }
        });
    }

    /// This node paused connection `conn`'s request queue for `remaining_ms` (a typed
    /// `RetryInfo` 429 within the queue's wait budget): announces it, so peers stop sending to
    /// the connection until it ends instead of each collecting its own 429. Best effort: a
    /// failed publish (Redis unreachable) is counted `dropped`, and the pause stays local.
    pub fn share_queue_pause(self: &Arc<Self>, conn: &str, remaining_ms: Millis) {
        let cluster = self.clone();
        let conn = conn.to_owned();
        let handed_over = std::time::Instant::now();
        tokio::spawn(async move {
            // The time before the publish is no longer part of the pause.
            let waited = u64::try_from(handed_over.elapsed().as_millis()).unwrap_or(u64::MAX);
            let remaining_ms = remaining_ms.saturating_sub(waited);
            if remaining_ms > 0 {
                let event = WireEvent::QueuePaused {
                    connection: conn,
                    remaining_ms,
                };
                cluster.announce(event).await;
            }
        });
    }

    /// Publishes `event` from this node (the writer's envelope, counted the same way).
    async fn announce(&self, event: WireEvent) {
        let kind = event.kind();
        let envelope = Envelope {
            origin_node: self.node_id.clone(),
            origin_ts_ms: super::wall_ms(),
            seq: self.sync.next_seq(),
            event,
        };
        let published = match wire::encode(&envelope) {
            Ok(payload) => self.store.publish(&payload).await.is_ok(),
            Err(_) => false,
        };
        let result = if published {
            EventResult::Published
        } else {
            EventResult::Dropped
        };
        self.metrics.event(kind, result);
    }
}
