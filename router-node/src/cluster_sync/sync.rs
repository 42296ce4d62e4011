//! The sync task: peers' events in, and a full resync on every (re)connect and periodically.
//!
//! Why both: pub/sub is at-most-once, so an event published while this node was disconnected
//! is gone; the keys in Redis are the truth. Every `Connected` from the subscriber (the first
//! one and each after a reconnect) triggers a resync before the node trusts its view again,
//! and a periodic reconcile catches anything lost on a live connection (a full channel, a
//! failed publish). Every connection record carries a version bumped by every write, clears
//! included: a resync makes the node's state equal to every record whose version is newer than
//! the one the node adopted, lowering as well as raising, so a clear, a reinstatement or an
//! eased cooldown whose event was lost heals within one resync interval. It never lowers a
//! connection with a local change still on its way to Redis ([`crate::cluster::versions`]).

use std::sync::Arc;
use std::time::Duration;

use switchyard_shared::store::connections::RESYNC_CHUNK;
use switchyard_shared::store::{StoreError, Subscriber, SubscriberEvent};
use switchyard_shared::wire::{self, BreakerPhase, WireEvent};
use tokio::sync::mpsc;

use switchyard_shared::Millis;

use super::remote::{self, Applied};
use super::{RuntimeSource, adopt, settings};
use crate::actors::{ConnHandle, ConnSnapshot};
use crate::cluster::{Cluster, wall_ms};
use crate::metrics::cluster::EventResult;
use crate::runtime::Runtime;

/// How often the whole shared state is read again while connected.
pub const RECONCILE_INTERVAL: Duration = Duration::from_secs(5);
/// Events buffered between the subscriber and this task.
const EVENT_BUFFER: usize = 4096;

/// Runs the subscriber and applies what it delivers until the process ends.
pub async fn run(cluster: Arc<Cluster>, runtime: RuntimeSource) {
    // A restarted task is not subscribed until its own subscriber says so.
    cluster.sync.set_subscribed(false);
    let channel = cluster.store.keys().events_channel();
    // In sentinel mode the client must name the current master, so it is resolved first (in
    // cluster mode: a reachable node).
    let (mut rx, mut handle) = Subscriber::spawn(
        cluster.store.pubsub_client().await,
        channel.clone(),
        EVENT_BUFFER,
    );
    let mut reconcile = tokio::time::interval(RECONCILE_INTERVAL);
    reconcile.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut reported_drops = 0;
    loop {
        tokio::select! {
            event = rx.recv() => {
                let Some(event) = event else { return };
                match event {
                    SubscriberEvent::Connected => {
                        cluster.sync.set_subscribed(true);
                        tracing::info!("cluster events subscribed; resynchronising");
                        let mut inbox = Inbox { rx: &mut rx, runtime: &runtime, again: false };
                        // A resubscription seen during the resync asks for another (bounded).
                        for _ in 0..3 {
                            inbox.again = false;
                            resync_logged(&cluster, &runtime(), &mut inbox).await;
                            if !inbox.again {
                                break;
                            }
                        }
                    }
                    SubscriberEvent::Disconnected => {
                        cluster.sync.set_subscribed(false);
                        tracing::warn!("cluster events lost; serving on local state");
                    }
                    SubscriberEvent::Message(bytes) => on_message(&cluster, &runtime, &bytes).await,
                }
                cluster.metrics.set_degraded(cluster.degraded());
            }
            _ = reconcile.tick() => {
                if cluster.sync.subscribed() {
                    let mut inbox = Inbox { rx: &mut rx, runtime: &runtime, again: false };
                    resync_logged(&cluster, &runtime(), &mut inbox).await;
                } else if cluster.store.pubsub_server_moves() {
                    // The subscriber keeps reconnecting to the server it was built for, which
                    // after a failover is the old master (Sentinel) or may be a dead node
                    // (Redis Cluster): build it again for the master the sentinel names now,
                    // or for the next reachable cluster node.
                    let (new_rx, new_handle) = Subscriber::spawn(
                        cluster.store.pubsub_client().await,
                        channel.clone(),
                        EVENT_BUFFER,
                    );
                    rx = new_rx;
                    handle = new_handle;
                    reported_drops = 0;
                }
                let drops = handle.dropped();
                for _ in reported_drops..drops {
                    cluster.metrics.event("unknown", EventResult::Dropped);
                }
                reported_drops = drops;
                cluster.metrics.set_degraded(cluster.degraded());
            }
        }
    }
}

async fn on_message(cluster: &Cluster, runtime: &RuntimeSource, bytes: &[u8]) {
    let envelope = match wire::decode(bytes) {
        Ok(e) => e,
        Err(e) => {
            tracing::debug!(error = %e, "undecodable cluster event");
            cluster.metrics.event("undecodable", EventResult::Dropped);
            return;
        }
    };
    if envelope.origin_node == cluster.node_id {
        return;
    }
    let kind = envelope.event.kind();
    cluster.metrics.event(kind, EventResult::Received);
    let rt = runtime();
    let result = match &envelope.event {
        WireEvent::SettingsVersion { version } => {
            match settings::pull(cluster, &rt, Some(*version)).await {
                Ok(_) => Applied::Applied,
                Err(_) => Applied::Dropped,
            }
        }
        WireEvent::BreakerTransition { provider, to, .. } => {
            if matches!(to, BreakerPhase::Closed | BreakerPhase::Open)
                && let Some(p) = rt.provider(provider)
            {
                // A new window (or none): an earlier "someone else probes" no longer holds.
                cluster.set_probe_denied(&p.id, None);
            }
            remote::apply_event(&rt, &envelope.event)
        }
        WireEvent::CooldownEased { .. } => {
            let local =
                remote::on_local_clock(envelope.event.clone(), envelope.origin_ts_ms, wall_ms());
            remote::apply_event(&rt, &local)
        }
        other => remote::apply_event(&rt, other),
    };
    match result {
        Applied::Applied => {
            let delay_ms = envelope.propagation_delay_ms(wall_ms());
            cluster.metrics.propagation_delay(delay_ms);
            cluster.metrics.event(kind, EventResult::Applied);
            tracing::debug!(
                kind,
                origin = %envelope.origin_node,
                seq = envelope.seq,
                delay_ms,
                "cluster event applied"
            );
        }
        Applied::Dropped => cluster.metrics.event(kind, EventResult::Dropped),
        Applied::NotForActors => {}
    }
}

/// The events that arrive while a resync runs: applied between its chunks, so a full scan
/// never holds event application for longer than one chunk's read.
struct Inbox<'a> {
    rx: &'a mut mpsc::Receiver<SubscriberEvent>,
    runtime: &'a RuntimeSource,
    /// A resubscription arrived: what was published meanwhile needs another resync.
    again: bool,
}

impl Inbox<'_> {
    /// Applies what is waiting (at most one buffer's worth).
    async fn drain(&mut self, cluster: &Cluster) {
        for _ in 0..EVENT_BUFFER {
            match self.rx.try_recv() {
                Ok(SubscriberEvent::Message(bytes)) => {
                    on_message(cluster, self.runtime, &bytes).await;
                }
                Ok(SubscriberEvent::Connected) => {
                    cluster.sync.set_subscribed(true);
                    self.again = true;
                }
                Ok(SubscriberEvent::Disconnected) => {
                    cluster.sync.set_subscribed(false);
                    tracing::warn!("cluster events lost; serving on local state");
                }
                Err(_) => return,
            }
        }
    }
}

async fn resync_logged(cluster: &Cluster, rt: &Runtime, inbox: &mut Inbox<'_>) {
    match resync(cluster, rt, inbox).await {
        Ok(()) => {}
        Err(e) => tracing::warn!(error = %e, "cluster resync failed; retrying later"),
    }
}

/// Reads every configured connection record, breaker and the settings from Redis. A
/// connection whose record version is newer than the one this node adopted is made equal to
/// Redis's record, lowering as well as raising ([`adopt`]); only those connections' lockouts
/// are read, pipelined.
///
/// The connections go in chunks of [`RESYNC_CHUNK`]: each chunk is read, adopted, and then the
/// events that arrived meanwhile are applied before the next chunk is read. So an event is
/// held back by one chunk at most, and it is still applied after any read of its connection
/// that could predate it (an event is published after its write, so a later chunk's read
/// includes it) — the order a resync that blocks events would give.
async fn resync(cluster: &Cluster, rt: &Runtime, inbox: &mut Inbox<'_>) -> Result<(), StoreError> {
    let versions = &cluster.versions;
    versions.begin_resync(std::ptr::from_ref(rt) as usize);
    let mut adopted = 0usize;
    for chunk in rt.connections.chunks(RESYNC_CHUNK) {
        adopted += adopt_chunk(cluster, rt, chunk).await?;
        inbox.drain(cluster).await;
    }
    if adopted > 0 {
        tracing::debug!(adopted, "connection records adopted from Redis");
    }
    let store = &cluster.store;
    let providers: Vec<&str> = rt.providers.iter().map(|p| &*p.id).collect();
    for b in store.read_breakers(&providers).await? {
        if b.phase != BreakerPhase::Closed || b.generation > 0 {
            remote::to_breaker(
                rt,
                &b.provider,
                b.phase,
                b.generation,
                b.retry_after_ms,
                true,
            );
        }
    }
    settings::pull(cluster, rt, None).await?;
    cluster.metrics.resynced();
    cluster
        .sync
        .last_resync_ms
        .store(wall_ms(), std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// Reads one chunk of connection records and adopts those whose version moved; returns how
/// many were adopted.
async fn adopt_chunk(
    cluster: &Cluster,
    rt: &Runtime,
    chunk: &[Arc<ConnHandle>],
) -> Result<usize, StoreError> {
    let store = &cluster.store;
    let versions = &cluster.versions;
    let conns: Vec<&str> = chunk.iter().map(|c| &*c.id).collect();
    let states = store.read_connection_states(&conns).await?;
    // The lockouts of every connection to adopt, pipelined, not one round trip each.
    let moved: Vec<(&Arc<ConnHandle>, _)> = chunk
        .iter()
        .zip(states)
        .filter(|(handle, state)| versions.should_adopt(&handle.id, state.version))
        .collect();
    let ids: Vec<&str> = moved.iter().map(|(h, _)| &*h.id).collect();
    let lockouts = store.read_lockouts_many(&ids).await?;
    let mut adopted = 0usize;
    for ((handle, state), lockouts) in moved.into_iter().zip(lockouts) {
        // Checked again after the await: a local change may have been made meanwhile.
        if !versions.should_adopt(&handle.id, state.version) {
            continue;
        }
        let now = rt.clock.now();
        let local = local_view(&handle.load(), now);
        let reinstated = state.reinstated > versions.adopted_version(&handle.id);
        for change in adopt::plan(&local, &state.record, &lockouts, reinstated, now) {
            remote::to_connection(rt, &handle.id, change);
        }
        versions.adopted(&handle.id, state.version);
        adopted += 1;
    }
    Ok(adopted)
}

/// The part of a connection's snapshot that the shared record covers.
fn local_view(snapshot: &ConnSnapshot, now: Millis) -> adopt::LocalView {
    adopt::LocalView {
        terminal: snapshot.terminal().is_some(),
        cooldown_remaining_ms: snapshot.cooldown_remaining(now),
        backoff_level: snapshot.state.backoff_level,
        lockouts: snapshot
            .lockouts
            .active(now)
            .into_iter()
            .map(|(key, entry)| (key.clone(), entry.remaining_ms(now)))
            .collect(),
    }
}
