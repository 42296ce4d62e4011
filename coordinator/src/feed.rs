//! The recent events seen on the cluster's pub/sub channel, kept in memory.
//!
//! Why: the store holds each breaker's current state but not its history, and operators ask
//! "when did it open, and how often". Every replica subscribes to the events channel and keeps
//! the last events (bounded), so the health document can list each provider's last transitions
//! and the dashboard a short event log. Pub/sub is at-most-once, so this is a best-effort view;
//! the state itself always comes from the keys.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use serde::Serialize;
use switchyard_shared::store::{RedisStore, Subscriber, SubscriberEvent};
use switchyard_shared::wire::{self, BreakerPhase, WireEvent};

/// Events kept overall.
pub const MAX_EVENTS: usize = 100;
/// Transitions kept per provider.
pub const MAX_TRANSITIONS: usize = 5;

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
    pub fn spawn(self: &std::sync::Arc<Self>, store: &RedisStore) -> tokio::task::JoinHandle<()> {
        let (mut rx, handle) =
            Subscriber::spawn(store.client().clone(), store.keys().events_channel(), 1024);
        let feed = std::sync::Arc::clone(self);
        tokio::spawn(async move {
            // Keeps the subscriber alive as long as this task runs.
            let _handle = handle;
            while let Some(event) = rx.recv().await {
                match event {
                    SubscriberEvent::Connected => feed.set_connected(true),
                    SubscriberEvent::Disconnected => feed.set_connected(false),
                    SubscriberEvent::Message(bytes) => {
                        feed.record(&bytes, crate::read::epoch_ms());
                    }
                }
            }
        })
    }
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_shared::wire::Envelope;

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
