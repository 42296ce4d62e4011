//! One simulated node: the background Redis work a router node does in redis mode, through
//! the node's own store code, without its HTTP side.
//!
//! It mirrors `cluster_sync::sync` as built today: a subscriber whose events are applied on
//! the same task that runs the periodic resync; a resync that reads the connection records in
//! pipelined chunks, the lockouts of the connections whose version moved (pipelined too), and
//! applies the events that arrived meanwhile between two chunks; the breakers and
//! the settings; and, on its own task, the membership heartbeat. All of it on the node's one
//! multiplexed store connection, which is also the request path's.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use switchyard_shared::store::connections::RESYNC_CHUNK;
use switchyard_shared::store::{RedisStore, StoreError, Subscriber, SubscriberEvent};
use switchyard_shared::wire;
use tokio_util::sync::CancellationToken;

use crate::stats::Recorder;

/// What all simulated nodes share: the keyspace they sync and the measurements.
pub struct World {
    pub conns: Vec<String>,
    pub providers: Vec<String>,
    /// Publish instant per event sequence number (the simulator is one process, so delays
    /// are measured on one monotonic clock, not on millisecond wall stamps).
    pub published: std::sync::Mutex<HashMap<u64, Instant>>,
    pub propagation: Recorder,
    /// Resyncs finished (every node's), so the driver knows when the first round is done.
    pub resyncs: AtomicU64,
    pub resync_failures: AtomicU64,
    pub heartbeat_interval: Duration,
    pub node_ttl_ms: u64,
}

/// A simulated node.
pub struct SimNode {
    pub id: String,
    pub store: Arc<RedisStore>,
}

impl SimNode {
    /// Runs the node's sync loop and heartbeat until `stop`.
    pub async fn run(
        self: Arc<Self>,
        world: Arc<World>,
        resync_every: Duration,
        first_resync_after: Duration,
        stop: CancellationToken,
    ) {
        let heartbeat = tokio::spawn(self.clone().heartbeat(world.clone(), stop.clone()));
        let channel = self.store.keys().events_channel();
        let (mut rx, _handle) = Subscriber::spawn(self.store.client(), channel, 4096);
        let mut versions: HashMap<usize, u64> = HashMap::new();
        let mut reconcile = tokio::time::interval_at(
            tokio::time::Instant::now() + first_resync_after,
            resync_every,
        );
        reconcile.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                event = rx.recv() => match event {
                    None => break,
                    Some(SubscriberEvent::Message(bytes)) => self.on_message(&world, &bytes),
                    // The node resyncs on every (re)subscription; the first one is staggered
                    // here by `first_resync_after` instead, as nodes start at different times.
                    Some(SubscriberEvent::Connected | SubscriberEvent::Disconnected) => {}
                },
                _ = reconcile.tick() => {
                    // Events that arrive meanwhile are applied between chunks, as the node does.
                    let mut drain = || {
                        while let Ok(event) = rx.try_recv() {
                            if let SubscriberEvent::Message(bytes) = event {
                                self.on_message(&world, &bytes);
                            }
                        }
                    };
                    match resync(&self.store, &world, &mut versions, &mut drain).await {
                        Ok(_) => world.resyncs.fetch_add(1, Ordering::Relaxed),
                        Err(_) => world.resync_failures.fetch_add(1, Ordering::Relaxed),
                    };
                }
            }
        }
        let _ = heartbeat.await;
    }

    fn on_message(&self, world: &World, bytes: &[u8]) {
        let Ok(envelope) = wire::decode(bytes) else {
            return;
        };
        if envelope.origin_node == self.id {
            return;
        }
        let sent = world
            .published
            .lock()
            .ok()
            .and_then(|p| p.get(&envelope.seq).copied());
        if let Some(sent) = sent {
            world.propagation.record(sent.elapsed());
        }
    }

    async fn heartbeat(self: Arc<Self>, world: Arc<World>, stop: CancellationToken) {
        let mut tick = tokio::time::interval(world.heartbeat_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let doc = format!("{{\"node_id\":\"{}\"}}", self.id);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {
                    if self.store.heartbeat(&self.id, &doc, world.node_ttl_ms).await.is_ok() {
                        let _ = self.store.read_nodes().await;
                    }
                }
            }
        }
    }
}

/// One resync as the node does it; returns how many records were adopted. `versions` holds
/// the version adopted per connection index (absent = 0, a freshly started node); `between`
/// runs after each chunk (the node applies the events that arrived meanwhile there).
pub async fn resync(
    store: &RedisStore,
    world: &World,
    versions: &mut HashMap<usize, u64>,
    between: &mut (dyn FnMut() + Send),
) -> Result<usize, StoreError> {
    let mut adopted = 0;
    let indices: Vec<usize> = (0..world.conns.len()).collect();
    for chunk in indices.chunks(RESYNC_CHUNK) {
        let conns: Vec<&str> = chunk.iter().map(|i| world.conns[*i].as_str()).collect();
        let states = store.read_connection_states(&conns).await?;
        let moved: Vec<(usize, u64)> = chunk
            .iter()
            .zip(&states)
            .filter(|(i, state)| state.version > versions.get(i).copied().unwrap_or(0))
            .map(|(i, state)| (*i, state.version))
            .collect();
        let ids: Vec<&str> = moved
            .iter()
            .map(|(i, _)| world.conns[*i].as_str())
            .collect();
        store.read_lockouts_many(&ids).await?;
        adopted += moved.len();
        versions.extend(moved);
        between();
    }
    let providers: Vec<&str> = world.providers.iter().map(String::as_str).collect();
    store.read_breakers(&providers).await?;
    store.settings_read().await?;
    Ok(adopted)
}
