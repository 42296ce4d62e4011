//! One simulated node: the background Redis work a router node does in redis mode, through
//! the node's own store code, without its HTTP side.
//!
//! It mirrors `cluster_sync::sync` as built today: a subscriber whose events are applied on
//! the same task that runs the periodic resync. A resync is incremental when the change log
//! covers the node's offset (`store::changelog::plan`): it reads the log after the offset and
//! only the records it names, with their lockouts. Otherwise (first resync, log trimmed or
//! missing, the safety-net interval due) it is a full scan: a marker appended to the log (the
//! new offset), then the connection records in pipelined chunks, the lockouts of the
//! connections whose version moved (pipelined too), and the events that arrived meanwhile
//! applied between two chunks. Then the breakers and the settings; and, on its own task, the
//! membership heartbeat. Reads go through the store's bulk connection, as the node's do.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use switchyard_shared::wire;
use switchyard_store::changelog::{self, CHANGELOG_PAGE};
use switchyard_store::connections::RESYNC_CHUNK;
use switchyard_store::{RedisStore, ResyncPlan, StoreError, StreamId, Subscriber, SubscriberEvent};
use tokio_util::sync::CancellationToken;

use crate::stats::Recorder;

/// What all simulated nodes share: the keyspace they sync and the measurements.
pub struct World {
    pub conns: Vec<String>,
    /// Connection id → index in `conns` (what the node's runtime lookup is).
    pub conn_index: HashMap<String, usize>,
    pub providers: Vec<String>,
    /// Publish instant per event sequence number (the simulator is one process, so delays
    /// are measured on one monotonic clock, not on millisecond wall stamps).
    pub published: std::sync::Mutex<HashMap<u64, Instant>>,
    pub propagation: Recorder,
    /// Resyncs finished (every node's), so the driver knows when the first round is done.
    pub resyncs: AtomicU64,
    /// Of which full scans (the rest read the change log).
    pub full_resyncs: AtomicU64,
    pub resync_failures: AtomicU64,
    /// The safety-net full scan interval (the node's `SAFETY_SCAN_INTERVAL_MS` plus jitter).
    pub safety_scan: Duration,
    pub heartbeat_interval: Duration,
    pub node_ttl_ms: u64,
}

/// A simulated node.
pub struct SimNode {
    pub id: String,
    pub store: Arc<RedisStore>,
}

impl SimNode {
    /// Runs the node's sync loop and heartbeat until `stop`. `first_safety_scan` is when this
    /// node's first safety-net scan falls due: the driver spreads them over one interval, as
    /// they are in a cluster that has run for a while.
    pub async fn run(
        self: Arc<Self>,
        world: Arc<World>,
        resync_every: Duration,
        first_resync_after: Duration,
        first_safety_scan: Duration,
        stop: CancellationToken,
    ) {
        let heartbeat = tokio::spawn(self.clone().heartbeat(world.clone(), stop.clone()));
        let channel = self.store.keys().events_channel();
        let (mut rx, _handle) = Subscriber::spawn(self.store.client(), channel, 4096);
        let mut versions: HashMap<usize, u64> = HashMap::new();
        let mut offset: Option<StreamId> = None;
        let mut next_full = Instant::now() + first_safety_scan;
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
                    let safety_due = Instant::now() >= next_full;
                    let result = self::reconcile(
                        &self.store, &world, &mut versions, &mut offset, safety_due, &mut drain,
                    )
                    .await;
                    match result {
                        Ok(full) => {
                            if full {
                                world.full_resyncs.fetch_add(1, Ordering::Relaxed);
                                if safety_due {
                                    next_full = Instant::now() + world.safety_scan;
                                }
                            }
                            world.resyncs.fetch_add(1, Ordering::Relaxed)
                        }
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
                    let _ = self.store.membership_round(&self.id, &doc, world.node_ttl_ms).await;
                }
            }
        }
    }
}

/// One periodic resync as the node does it: incremental through the change log when it covers
/// `offset`, else a full scan. Returns whether it was a full scan.
pub async fn reconcile(
    store: &RedisStore,
    world: &World,
    versions: &mut HashMap<usize, u64>,
    offset: &mut Option<StreamId>,
    safety_due: bool,
    between: &mut (dyn FnMut() + Send),
) -> Result<bool, StoreError> {
    let mut page = None;
    if let Some(after) = *offset
        && !safety_due
    {
        page = Some(store.changelog_read(after, CHANGELOG_PAGE).await?);
    }
    let first = page.as_ref().and_then(|p| p.first);
    let mut full = true;
    if let (ResyncPlan::Incremental { after }, Some(mut page)) =
        (changelog::plan(*offset, first, safety_due), page)
    {
        let mut at = after;
        // Bounded as the node bounds it; past that it scans.
        for _ in 0..=(changelog::CHANGELOG_MAXLEN as usize / CHANGELOG_PAGE + 1) {
            if let Some(last) = page.last {
                at = last;
            }
            let moved: Vec<(usize, u64)> = changelog::changed_connections(&page.changes)
                .into_iter()
                .filter_map(|(conn, v)| world.conn_index.get(conn).map(|i| (*i, v)))
                .filter(|(i, v)| *v > versions.get(i).copied().unwrap_or(0))
                .collect();
            for chunk in moved.chunks(RESYNC_CHUNK) {
                adopt(store, world, versions, chunk.iter().map(|(i, _)| *i)).await?;
                between();
            }
            if page.entries < CHANGELOG_PAGE {
                *offset = Some(at);
                full = false;
                break;
            }
            page = store.changelog_read(at, CHANGELOG_PAGE).await?;
            if changelog::plan(Some(at), page.first, false)
                != (ResyncPlan::Incremental { after: at })
            {
                break;
            }
        }
    }
    if full {
        *offset = Some(store.changelog_mark("sim").await?);
        resync(store, world, versions, between).await?;
    } else {
        let providers: Vec<&str> = world.providers.iter().map(String::as_str).collect();
        store.read_breakers(&providers).await?;
        store.settings_read().await?;
    }
    Ok(full)
}

/// Reads the records of connections `indices` and the lockouts of those whose version moved.
async fn adopt(
    store: &RedisStore,
    world: &World,
    versions: &mut HashMap<usize, u64>,
    indices: impl Iterator<Item = usize>,
) -> Result<usize, StoreError> {
    let indices: Vec<usize> = indices.collect();
    let conns: Vec<&str> = indices.iter().map(|i| world.conns[*i].as_str()).collect();
    let states = store.read_connection_states(&conns).await?;
    let moved: Vec<(usize, u64)> = indices
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
    let n = moved.len();
    versions.extend(moved);
    Ok(n)
}

/// One full scan as the node does it; returns how many records were adopted. `versions` holds
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
        adopted += adopt(store, world, versions, chunk.iter().copied()).await?;
        between();
    }
    let providers: Vec<&str> = world.providers.iter().map(String::as_str).collect();
    store.read_breakers(&providers).await?;
    store.settings_read().await?;
    Ok(adopted)
}
