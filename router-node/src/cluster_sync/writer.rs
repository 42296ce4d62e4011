//! The cluster writer: local changes to Redis, and to the other nodes as events.
//!
//! Why a task: actors are synchronous and the request path never waits on Redis, so actors
//! hand their changes over ([`Cluster::emit`]) and this task runs the store scripts one at a
//! time, in order. A script that applied something is followed by a published
//! [`Envelope`]; one that did not (a peer got there first: the herd guard) publishes nothing.
//! When Redis answers with more than this node knew (a longer cooldown, a terminal status),
//! the reply is applied locally as remote state.
//!
//! While Redis is unreachable the extend-only changes go to the bounded replay queue, replayed
//! in order on the next tick once Redis answers again; the others are dropped (see
//! [`crate::cluster::replay`]). Durations are shortened by the time the change waited, so a
//! replayed cooldown ends when it would have; one that already ended is not written at all.
//! Every change of a connection is reported settled to [`crate::cluster::versions`] once the
//! writer is done with it, with the record version its write produced.

use std::sync::Arc;
use std::time::Duration;

use switchyard_shared::wire::{self, BreakerPhase, Envelope, WireEvent};
use switchyard_store::{BreakerChange, CooldownWrite, StoreError};

use super::RuntimeSource;
use super::remote::{self, ALL_MODELS};
use crate::actors::RemoteConn;
use crate::actors::change::{LocalChange, Stamped};
use crate::cluster::{Cluster, replay as replay_queue, wall_ms};
use crate::metrics::cluster::EventResult;

/// How often the replay queue is retried.
const REPLAY_TICK: Duration = Duration::from_millis(250);
/// Replayed changes per tick at most, so a long queue does not starve new changes.
const REPLAY_BATCH: usize = 500;

/// Runs the writer until the cluster's queue closes. Supervised (see [`super::supervise`]):
/// a restarted writer takes the same queue again.
pub async fn run(cluster: Arc<Cluster>, runtime: RuntimeSource) {
    let Some(mut guard) = cluster.writer_rx() else {
        tracing::warn!("cluster writer already running");
        return;
    };
    let Some(rx) = guard.as_mut() else {
        tracing::warn!("cluster writer queue is gone");
        return;
    };
    let mut tick = tokio::time::interval(REPLAY_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if cluster.take_writer_panic() {
            injected_panic();
        }
        tokio::select! {
            item = rx.recv() => {
                let Some(stamped) = item else { return };
                if cluster.replay_depth() > 0 {
                    // Keep the order: older changes first.
                    cluster.defer(stamped);
                    replay(&cluster, &runtime).await;
                } else {
                    write(&cluster, &runtime, stamped).await;
                }
            }
            _ = tick.tick() => replay(&cluster, &runtime).await,
        }
    }
}

/// A change being written when the writer dies in a panic is settled as unwritten, so the
/// connection is not held back from adopting Redis's record for good (its `pending` count
/// would never drop otherwise).
struct Unsettled<'a>(&'a Cluster, &'a LocalChange);

impl Drop for Unsettled<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.unwritten(self.1);
        }
    }
}

/// The writer's test hook: proves that supervision restarts a writer that died.
#[allow(clippy::panic)]
fn injected_panic() {
    panic!("injected panic in the cluster writer");
}

/// Writes one change, or keeps it for replay when Redis cannot be reached.
async fn write(cluster: &Cluster, runtime: &RuntimeSource, stamped: Stamped) {
    match execute(cluster, runtime, &stamped).await {
        Ok(version) => cluster.settled(&stamped.change, version),
        Err(e) if retryable(&e) => {
            cluster.discard_unsafe_replays();
            if replay_queue::replayable(&stamped.change) {
                cluster.defer(stamped);
            } else {
                not_replayed(cluster, &stamped, &e);
            }
        }
        Err(e) => rejected(cluster, &stamped, &e),
    }
}

/// Replays queued changes in order until the queue is empty or Redis fails again.
async fn replay(cluster: &Cluster, runtime: &RuntimeSource) {
    for _ in 0..REPLAY_BATCH {
        let Some(stamped) = cluster.pop_replay() else {
            return;
        };
        match execute(cluster, runtime, &stamped).await {
            Ok(version) => cluster.settled(&stamped.change, version),
            Err(e) if retryable(&e) => {
                if replay_queue::replayable(&stamped.change) {
                    cluster.unpop_replay(stamped);
                } else {
                    not_replayed(cluster, &stamped, &e);
                }
                cluster.discard_unsafe_replays();
                return;
            }
            Err(e) => rejected(cluster, &stamped, &e),
        }
    }
}

/// A change Redis refused for good (a malformed reply, a bad config).
fn rejected(cluster: &Cluster, stamped: &Stamped, e: &StoreError) {
    tracing::warn!(kind = stamped.change.kind(), error = %e, "cluster write rejected");
    cluster
        .metrics
        .event(stamped.change.kind(), EventResult::Dropped);
    cluster.unwritten(&stamped.change);
}

/// A change that is not extend-only and could not be written now: replaying it later could
/// overwrite newer state, so it is dropped, and this node adopts Redis's record again on its
/// next resync.
fn not_replayed(cluster: &Cluster, stamped: &Stamped, e: &StoreError) {
    tracing::warn!(
        kind = stamped.change.kind(),
        error = %e,
        "cluster write failed and is not replayed: it is not extend-only"
    );
    cluster
        .metrics
        .event(stamped.change.kind(), EventResult::Dropped);
    cluster.unwritten(&stamped.change);
}

/// Whether Redis may accept the change later (not a malformed reply or a bad config).
fn retryable(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::Unavailable | StoreError::Timeout { .. } | StoreError::Redis { .. }
    )
}

/// Runs the store call(s) for one change and publishes what changed. Returns the connection
/// record's version after the write, when the write reports one.
async fn execute(
    cluster: &Cluster,
    runtime: &RuntimeSource,
    stamped: &Stamped,
) -> Result<Option<u64>, StoreError> {
    let _unsettled = Unsettled(cluster, &stamped.change);
    let store = &cluster.store;
    let waited = wall_ms().saturating_sub(stamped.wall_ms);
    let at = stamped.wall_ms;
    match &stamped.change {
        LocalChange::Cooldown {
            conn,
            duration_ms,
            level,
            reason,
            last_error,
        } => {
            let duration_ms = duration_ms.saturating_sub(waited);
            if duration_ms == 0 {
                return Ok(None);
            }
            let r = store
                .cooldown_extend(&CooldownWrite {
                    conn,
                    duration_ms,
                    backoff_level: *level,
                    reason: *reason,
                    terminal: None,
                    last_error,
                })
                .await?;
            // Redis may know a longer cooldown, a higher level or a terminal status.
            remote::to_connection(
                &runtime(),
                conn,
                RemoteConn::Cooldown {
                    remaining_ms: r.remaining_ms,
                    level: r.backoff_level,
                    terminal: r.terminal,
                },
            );
            if r.applied {
                publish(
                    cluster,
                    at,
                    WireEvent::CooldownSet {
                        connection: conn.to_string(),
                        until_remaining_ms: r.remaining_ms,
                        backoff_level: r.backoff_level,
                        reason: *reason,
                        terminal: r.terminal,
                    },
                )
                .await;
            }
            Ok(Some(r.version))
        }
        LocalChange::Terminal { conn, status } => {
            let w = store.terminal_set_versioned(conn, *status).await?;
            // Re-applied locally (a no-op unless a resync adopted an older record meanwhile).
            remote::to_connection(
                &runtime(),
                conn,
                RemoteConn::Cooldown {
                    remaining_ms: 0,
                    level: 0,
                    terminal: Some(*status),
                },
            );
            if w.changed {
                publish(
                    cluster,
                    at,
                    WireEvent::TerminalSet {
                        connection: conn.to_string(),
                        status: *status,
                    },
                )
                .await;
            }
            Ok(Some(w.version))
        }
        LocalChange::Success {
            conn,
            started_epoch_ms,
        } => {
            // Only the attempt's age crosses to Redis (both ends on this node's clock), so
            // this node's clock skew cannot make the success look newer than a peer's failure.
            let age_ms =
                (*started_epoch_ms > 0).then(|| wall_ms().saturating_sub(*started_epoch_ms));
            let s = store.cooldown_success_versioned(conn, age_ms).await?;
            if s.eased {
                // Peers would otherwise keep the cooldown until their next resync.
                publish(
                    cluster,
                    at,
                    WireEvent::CooldownEased {
                        connection: conn.to_string(),
                        backoff_level: s.record.backoff_level,
                        started_epoch_ms: *started_epoch_ms,
                    },
                )
                .await;
            }
            Ok(Some(s.version))
        }
        LocalChange::Cleared { conn } => {
            store.cooldown_clear(conn).await?;
            store.lockout_clear_connection(conn).await?;
            let connection = conn.to_string();
            publish(cluster, at, WireEvent::CooldownCleared { connection }).await;
            Ok(None)
        }
        LocalChange::Reinstated { conn } => {
            store.terminal_clear(conn).await?;
            let connection = conn.to_string();
            publish(cluster, at, WireEvent::TerminalReinstated { connection }).await;
            Ok(None)
        }
        LocalChange::Lockout {
            provider,
            conn,
            model,
            remaining_ms,
            failure_count,
            reason,
        } => {
            let remaining_ms = remaining_ms.saturating_sub(waited);
            if remaining_ms == 0 {
                return Ok(None);
            }
            let applied = store
                .lockout_extend_applied(
                    provider,
                    conn,
                    model,
                    remaining_ms,
                    *failure_count,
                    *reason,
                )
                .await?;
            // A lockout the stored one already covered was announced by whoever stored it.
            if !applied.applied {
                return Ok(Some(applied.version));
            }
            let r = &applied.record;
            publish(
                cluster,
                at,
                WireEvent::LockoutSet {
                    provider: provider.to_string(),
                    connection: conn.to_string(),
                    model: model.clone(),
                    remaining_ms: r.remaining_ms,
                    failure_count: r.failure_count,
                    reason: *reason,
                },
            )
            .await;
            Ok(Some(applied.version))
        }
        LocalChange::LockoutDecay {
            provider,
            conn,
            model,
        } => {
            store.lockout_decay(provider, conn, model).await?;
            Ok(None)
        }
        LocalChange::LockoutCleared {
            provider,
            conn,
            model,
        } => {
            match model {
                Some(model) => {
                    store.lockout_clear(provider, conn, model).await?;
                }
                None => {
                    store.lockout_clear_connection(conn).await?;
                }
            }
            publish(
                cluster,
                at,
                WireEvent::LockoutCleared {
                    provider: provider.to_string(),
                    connection: conn.to_string(),
                    model: model.clone().unwrap_or_else(|| ALL_MODELS.to_owned()),
                },
            )
            .await;
            Ok(None)
        }
        LocalChange::BreakerFailure { provider, params } => {
            let change = store.breaker_failure(provider, params).await?;
            breaker_changed(cluster, runtime, at, change, false).await;
            Ok(None)
        }
        LocalChange::BreakerSuccess { provider } => {
            let change = store.breaker_success(provider).await?;
            breaker_changed(cluster, runtime, at, change, false).await;
            Ok(None)
        }
        LocalChange::ProbeResult {
            provider,
            generation,
            success,
            params,
        } => {
            if let Some(change) = store
                .breaker_probe_result(provider, *generation, *success, params)
                .await?
            {
                cluster.set_probe_denied(provider, None);
                breaker_changed(cluster, runtime, at, change, false).await;
            }
            Ok(None)
        }
        LocalChange::ProbeRelease {
            provider,
            generation,
        } => {
            let released = store
                .breaker_probe_release(provider, *generation, &cluster.owner_token())
                .await?;
            tracing::debug!(provider = %provider, generation, released, "cluster probe lease handed back");
            Ok(None)
        }
        LocalChange::BreakerReset { provider } => {
            let change = store.breaker_reset(provider).await?;
            cluster.set_probe_denied(provider, None);
            // An operator reset is announced even when the shared breaker was closed already:
            // peers may hold an OPEN of their own.
            breaker_changed(cluster, runtime, at, change, true).await;
            Ok(None)
        }
    }
}

/// Applies a shared breaker transition locally and announces it.
async fn breaker_changed(
    cluster: &Cluster,
    runtime: &RuntimeSource,
    at: u64,
    change: BreakerChange,
    always: bool,
) {
    if !change.changed() && !always {
        return;
    }
    let after = &change.after;
    remote::to_breaker(
        &runtime(),
        &after.provider,
        after.phase,
        after.generation,
        after.retry_after_ms,
        false,
    );
    if after.phase != BreakerPhase::HalfOpen || change.before != BreakerPhase::HalfOpen {
        tracing::info!(
            provider = %after.provider,
            from = ?change.before,
            to = ?after.phase,
            generation = after.generation,
            "cluster breaker transition"
        );
    }
    publish(
        cluster,
        at,
        WireEvent::BreakerTransition {
            provider: after.provider.clone(),
            from: change.before,
            to: after.phase,
            generation: after.generation,
            retry_after_ms: after.retry_after_ms,
        },
    )
    .await;
}

/// Publishes `event` stamped with the origin's observation time. A failed publish is counted
/// and not retried: the state is in Redis already, and peers pick it up on their next resync.
pub async fn publish(cluster: &Cluster, origin_ts_ms: u64, event: WireEvent) {
    let kind = event.kind();
    let envelope = Envelope {
        origin_node: cluster.node_id.clone(),
        origin_ts_ms,
        seq: cluster.sync.next_seq(),
        event,
    };
    let payload = match wire::encode(&envelope) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(kind, error = %e, "cannot encode a cluster event");
            cluster.metrics.event(kind, EventResult::Dropped);
            return;
        }
    };
    match cluster.store.publish(&payload).await {
        Ok(_) => cluster.metrics.event(kind, EventResult::Published),
        Err(e) => {
            tracing::debug!(kind, error = %e, "cluster event not published");
            cluster.metrics.event(kind, EventResult::Dropped);
        }
    }
}
