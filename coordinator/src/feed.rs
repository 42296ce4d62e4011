//! The recent events seen on the cluster's pub/sub channel, kept in memory.
//!
//! Why: the store holds each breaker's current state but not its history, and operators ask
//! "when did it open, and how often". Every replica subscribes to the events channel and keeps
//! the last events (bounded), so the health document can list each provider's last transitions
//! and the dashboard a short event log. Pub/sub is at-most-once, so this is a best-effort view;
//! the state itself always comes from the keys.
//!
//! The subscriber keeps reconnecting to the server it was built for. After a Sentinel failover
//! that is the old master, after a Redis Cluster node loss possibly a dead node; so while the
//! subscription is lost on such a topology the feed builds its subscriber again from
//! [`RedisStore::pubsub_client`] (the master the sentinel names now, the next reachable node),
//! with a bounded back-off, as the node's sync task does.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use switchyard_shared::wire::{self, BreakerPhase, WireEvent};
use switchyard_store::{RedisStore, Subscriber, SubscriberEvent};

/// Events kept overall.
pub const MAX_EVENTS: usize = 100;
/// Transitions kept per provider.
pub const MAX_TRANSITIONS: usize = 5;
/// Messages the subscriber buffers for the feed.
const EVENT_BUFFER: usize = 1024;
/// How long a lost subscription may stay lost before the subscriber is built again; doubled
/// per rebuild that did not connect, up to [`REBUILD_MAX`].
const REBUILD_MIN: Duration = Duration::from_secs(1);
const REBUILD_MAX: Duration = Duration::from_secs(8);

/// One received event, flattened for JSON.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SeenEvent {
    pub kind: &'static str,
    pub origin: String,
    pub received_at_ms: u64,
    pub summary: String,
}

/// One breaker transition.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    pub from: BreakerPhase,
    pub to: BreakerPhase,
    pub generation: u64,
    pub origin: String,
    pub at_ms: u64,
}

#[derive(Debug, Default)]
struct Inner {
    events: VecDeque<SeenEvent>,
    transitions: BTreeMap<String, VecDeque<Transition>>,
    connected: bool,
    undecodable: u64,
}

/// The bounded event memory.
#[derive(Debug, Default)]
pub struct Feed {
    inner: Mutex<Inner>,
}

impl Feed {
    /// Records one raw message received at `now_ms`.
    pub fn record(&self, payload: &[u8], now_ms: u64) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let Ok(env) = wire::decode(payload) else {
            inner.undecodable += 1;
            return;
        };
        if let WireEvent::BreakerTransition {
            provider,
            from,
            to,
            generation,
            ..
        } = &env.event
        {
            let list = inner.transitions.entry(provider.clone()).or_default();
            list.push_front(Transition {
                from: *from,
                to: *to,
                generation: *generation,
                origin: env.origin_node.clone(),
                at_ms: now_ms,
            });
            list.truncate(MAX_TRANSITIONS);
        }
        inner.events.push_front(SeenEvent {
            kind: env.event.kind(),
            origin: env.origin_node.clone(),
            received_at_ms: now_ms,
            summary: summary(&env.event),
        });
        inner.events.truncate(MAX_EVENTS);
    }

    pub fn set_connected(&self, connected: bool) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.connected = connected;
        }
    }

    pub fn connected(&self) -> bool {
        self.inner.lock().map(|i| i.connected).unwrap_or(false)
    }

    /// The newest `n` events, newest first.
    pub fn recent(&self, n: usize) -> Vec<SeenEvent> {
        self.inner
            .lock()
            .map(|i| i.events.iter().take(n).cloned().collect())
            .unwrap_or_default()
    }

    /// A provider's last transitions, newest first.
    pub fn transitions(&self, provider: &str) -> Vec<Transition> {
        self.inner
            .lock()
            .ok()
            .and_then(|i| {
                i.transitions
                    .get(provider)
                    .map(|l| l.iter().cloned().collect())
            })
            .unwrap_or_default()
    }

    /// Subscribes to the events channel and records messages until the task is dropped.
    pub fn spawn(self: &Arc<Self>, store: &Arc<RedisStore>) -> tokio::task::JoinHandle<()> {
        let feed = Arc::clone(self);
        let store = Arc::clone(store);
        tokio::spawn(async move { feed.follow(&store).await })
    }

    /// Records the channel's messages; on a topology whose server can move, builds the
    /// subscriber again while its subscription stays lost.
    async fn follow(&self, store: &RedisStore) {
        let channel = store.keys().events_channel();
        // In sentinel mode the client must name the current master, so it is resolved first.
        // The handle stops its subscriber when dropped (replaced by a rebuild, or on return).
        let (mut rx, mut _handle) =
            Subscriber::spawn(store.pubsub_client().await, channel.clone(), EVENT_BUFFER);
        let mut rebuild_after = REBUILD_MIN;
        loop {
            let lost = !self.connected() && store.pubsub_server_moves();
            let event = if lost {
                match tokio::time::timeout(rebuild_after, rx.recv()).await {
                    Ok(event) => event,
                    Err(_) => {
                        // Still not subscribed: build it again for the server named now.
                        (rx, _handle) = Subscriber::spawn(
                            store.pubsub_client().await,
                            channel.clone(),
                            EVENT_BUFFER,
                        );
                        rebuild_after = next_rebuild_delay(rebuild_after);
                        continue;
                    }
                }
            } else {
                rx.recv().await
            };
            let Some(event) = event else { return };
            match event {
                SubscriberEvent::Connected => {
                    self.set_connected(true);
                    rebuild_after = REBUILD_MIN;
                }
                SubscriberEvent::Disconnected => self.set_connected(false),
                SubscriberEvent::Message(bytes) => self.record(&bytes, crate::read::epoch_ms()),
            }
        }
    }
}

/// The wait before the next rebuild after one that did not connect: doubled, bounded.
fn next_rebuild_delay(current: Duration) -> Duration {
    current.saturating_mul(2).min(REBUILD_MAX)
}

fn summary(event: &WireEvent) -> String {
    match event {
        WireEvent::CooldownSet {
            connection,
            until_remaining_ms,
            reason,
            ..
        } => format!(
            "{connection} cooling {until_remaining_ms} ms ({})",
            reason.as_str()
        ),
        WireEvent::CooldownCleared { connection } => format!("{connection} cooldown cleared"),
        WireEvent::CooldownEased { connection, .. } => {
            format!("{connection} cooldown ended by a success")
        }
        WireEvent::TerminalSet { connection, status } => {
            format!("{connection} terminal: {}", status.as_str())
        }
        WireEvent::TerminalReinstated { connection } => format!("{connection} reinstated"),
        WireEvent::LockoutSet {
            connection, model, ..
        } => format!("{connection} locked model {model}"),
        WireEvent::LockoutCleared {
            connection, model, ..
        } => format!("{connection} lockout of {model} cleared"),
        WireEvent::BreakerTransition {
            provider, from, to, ..
        } => format!("{provider} breaker {from:?} -> {to:?}"),
        WireEvent::SettingsVersion { version } => format!("settings version {version}"),
        WireEvent::LeaseEvent {
            connection, kind, ..
        } => format!("{connection} lease {kind:?}"),
        WireEvent::UsageWallShared {
            connection,
            lane_ms,
            ..
        } => format!("{connection} usage wall (lane {lane_ms} ms)"),
        WireEvent::ToolLimitLearned {
            provider,
            model,
            limit,
            ..
        } => format!("{provider}/{model} tool limit {limit}"),
        WireEvent::ToolLimitCleared {
            provider, model, ..
        } => format!("{provider}/{model} tool limit dropped"),
        WireEvent::UsageWallLaneEnded {
            connection, reason, ..
        } => format!("{connection} usage-wall lane ended ({reason})"),
        WireEvent::QueuePaused {
            connection,
            remaining_ms,
        } => format!("{connection} queue paused {remaining_ms} ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_shared::wire::Envelope;

    #[test]
    fn rebuilds_back_off_to_a_bound() {
        let mut d = REBUILD_MIN;
        let mut seen = vec![d];
        for _ in 0..6 {
            d = next_rebuild_delay(d);
            seen.push(d);
        }
        assert_eq!(seen[1], REBUILD_MIN * 2);
        assert!(seen.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(*seen.last().unwrap(), REBUILD_MAX);
    }

    #[test]
    fn transitions_are_bounded_and_garbage_is_counted() {
        let feed = Feed::default();
        for g in 0..8u64 {
            let env = Envelope {
                origin_node: "n1".into(),
                origin_ts_ms: 0,
                seq: g,
                event: WireEvent::BreakerTransition {
                    provider: "p".into(),
                    from: BreakerPhase::Closed,
                    to: BreakerPhase::Open,
                    generation: g,
                    retry_after_ms: 0,
                },
            };
            feed.record(&wire::encode(&env).unwrap(), g);
        }
        feed.record(b"\xffgarbage", 9);
        let t = feed.transitions("p");
        assert_eq!(t.len(), MAX_TRANSITIONS);
        assert_eq!(t[0].generation, 7);
        assert_eq!(feed.recent(100).len(), 8);
    }
}
