//! `GET /api/monitoring/health`: the node at a glance.
//!
//! The reference's health payload is the main machine-readable surface of its resilience
//! state, so this keeps its shape where it applies (`circuitBreakers`, `providerBreakers`,
//! `lockouts`, …) and adds what a cluster-ready node must say about itself: `node_id`, the
//! cluster mode and the Redis state. Breakers are read from their actors (which also applies a
//! due OPEN → HALF_OPEN step, as any read does); an actor that does not answer in time is shown
//! from its published snapshot, marked `stale`, and the node reports `degraded`.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use actix_web::HttpResponse;
use serde_json::{Value, json};
use switchyard_shared::breaker::BreakerState;
use switchyard_shared::config::ClusterMode;

use super::MAX_LIST;
use super::auth::ManagementKey;
use super::common::{ApiResult, Now};
use super::views::{self, ConnClass};
use crate::reload::Rt;

pub async fn health(rt: Rt, _key: ManagementKey) -> ApiResult {
    let rt = rt.get_ref();
    let now = Now::read(rt);
    let statuses = views::breaker_statuses(rt, &now).await;
    let settings = rt.table.settings.load();

    let mut breaker_counts = [0u32; 4];
    let mut stale = false;
    let provider_breakers: Vec<Value> = rt
        .table
        .providers
        .iter()
        .zip(&statuses)
        .map(|(provider, status)| {
            let state = match status {
                Some(s) => s.state,
                None => {
                    stale = true;
                    provider.breaker.load().view.state()
                }
            };
            breaker_counts[match state {
                BreakerState::Open => 0,
                BreakerState::HalfOpen => 1,
                BreakerState::Degraded => 2,
                BreakerState::Closed => 3,
            }] += 1;
            views::breaker(provider, status.as_ref(), &now)
        })
        .collect();

    let mut by_provider: BTreeMap<&str, Value> = BTreeMap::new();
    let (mut active, mut cooling, mut terminal) = (0u32, 0u32, 0u32);
    let mut queues = Vec::new();
    let mut gates = Vec::new();
    let mut lockouts = Vec::new();
    let mut lockouts_total = 0usize;
    let mut dropped = rt
        .table
        .actor_stats
        .breaker_dropped_observations
        .load(Ordering::Relaxed);
    for provider in &rt.table.providers {
        let (mut p_active, mut p_cooling, mut p_terminal) = (0u32, 0u32, 0u32);
        let mut soonest: Option<u64> = None;
        for conn in provider
            .connections
            .iter()
            .filter_map(|i| rt.table.connections.get(*i))
        {
            let snapshot = conn.load();
            dropped += conn.dropped_observations.load(Ordering::Relaxed);
            match ConnClass::of(&snapshot, &now) {
                ConnClass::Terminal => p_terminal += 1,
                ConnClass::CoolingDown => {
                    p_cooling += 1;
                    let left = snapshot.cooldown_remaining(now.mono);
                    soonest = Some(soonest.map_or(left, |s| s.min(left)));
                }
                ConnClass::Active | ConnClass::ModelLocked => p_active += 1,
            }
            let enabled = views::queue_active(provider, conn, &snapshot, &settings);
            let (waiting, executing) = (conn.queue.waiting(), conn.queue.executing());
            if enabled || waiting > 0 || executing > 0 {
                let qs = conn.queue.settings();
                queues.push(json!({
                    "connectionId": &*conn.id,
                    "provider": &*provider.id,
                    "enabled": enabled,
                    "waiting": waiting,
                    "executing": executing,
                    "maxQueueDepth": qs.max_queue_depth,
                    "concurrentRequests": qs.concurrent_requests,
                }));
            }
            if conn.gate.cap() > 0 {
                gates.push(json!({
                    "connectionId": &*conn.id,
                    "provider": &*provider.id,
                    "maxConcurrent": conn.gate.cap(),
                    "inUse": conn.gate.in_use(),
                    "waiting": conn.gate.waiting(),
                }));
            }
            for lock in views::lockouts(&snapshot, &now) {
                lockouts_total += 1;
                if lockouts.len() < MAX_LIST {
                    lockouts.push(lock);
                }
            }
        }
        active += p_active;
        cooling += p_cooling;
        terminal += p_terminal;
        by_provider.insert(
            &provider.id,
            json!({
                "total": p_active + p_cooling + p_terminal,
                "active": p_active,
                "cooldown": p_cooling,
                "terminal": p_terminal,
                "soonestRetryAfterMs": soonest,
            }),
        );
    }

    let ready = rt.lifecycle.ready.load(Ordering::Acquire);
    let draining = rt.lifecycle.draining.load(Ordering::Acquire);
    let cluster_degraded = rt.table.cluster.as_ref().is_some_and(|c| c.degraded());
    let status = if draining {
        "draining"
    } else if stale || !ready || cluster_degraded {
        "degraded"
    } else {
        "healthy"
    };
    let mode = rt.config.cluster.mode;
    let cluster = match &rt.table.cluster {
        Some(c) => {
            let last_resync = c.sync.last_resync_ms.load(Ordering::Relaxed);
            json!({
                "mode": ClusterMode::Redis.as_str(),
                "redis": {"state": c.store.state().as_str(), "url": c.config.redis_url},
                "degraded": cluster_degraded,
                "subscribed": c.sync.subscribed(),
                "liveNodes": c.live_nodes(),
                "settingsVersion": c.sync.settings_version.load(Ordering::Relaxed),
                "replayQueueDepth": c.replay_depth(),
                "resyncs": c.metrics.resync_count(),
                "lastResyncAt": (last_resync > 0).then_some(last_resync),
            })
        }
        None => json!({
            "mode": mode.as_str(),
            "redis": {"state": "not_configured"},
            "degraded": false,
        }),
    };
    let uptime_ms = now.mono;
    let body = json!({
        "status": status,
        "timestamp": now.epoch,
        "node_id": rt.node_id,
        "version": env!("CARGO_PKG_VERSION"),
        "uptime": uptime_ms / 1000,
        "uptimeMs": uptime_ms,
        "ready": ready,
        "draining": draining,
        "cluster": cluster,
        "cluster_degraded": cluster_degraded,
        "inFlight": rt.stats.inflight.load(Ordering::Relaxed).max(0),
        "config": {"generation": rt.generation, "loadedAt": rt.loaded_at_unix_ms},
        "circuitBreakers": {
            "open": breaker_counts[0],
            "halfOpen": breaker_counts[1],
            "degraded": breaker_counts[2],
            "closed": breaker_counts[3],
            "total": rt.table.providers.len(),
        },
        "providerBreakers": provider_breakers,
        "connections": {
            "total": rt.table.connections.len(),
            "active": active,
            "cooldown": cooling,
            "terminal": terminal,
            "byProvider": by_provider,
        },
        "queues": queues,
        "gates": gates,
        "lockouts": lockouts,
        "lockoutsTotal": lockouts_total,
        "actors": {
            "restarts": rt.table.actor_stats.restarts.load(Ordering::Relaxed),
            "restartsExhausted": rt.table.actor_stats.restarts_exhausted.load(Ordering::Relaxed),
            "droppedObservations": dropped,
        },
        "supervision": supervision(),
        "settingsWarnings": rt.settings_warnings.len(),
    });
    Ok(HttpResponse::Ok().json(body))
}

/// Every supervised task and actor: restarts, the last one's reason and time, and whether it
/// runs now (a task that died waits for its restart's backoff).
fn supervision() -> Vec<Value> {
    crate::actors::supervision::snapshot()
        .into_iter()
        .map(|t| {
            json!({
                "task": t.task,
                "restarts": t.restarts,
                "lastRestartReason": t.last_reason,
                "lastRestartAt": t.last_restart_ms,
                "running": t.running,
            })
        })
        .collect()
}
