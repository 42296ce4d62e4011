//! The sync task: peers' events in, and a resync on every (re)connect and periodically.
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
//!
//! The resync itself (incremental through the change log, or a full scan) is in
//! [`super::resync`].
//!
//! In sentinel mode the task also hears the sentinels' `+switch-master`: on it, the store asks
//! the sentinel for the master again and the subscriber is built again on the new one at once,
//! instead of on the next reconcile tick (5 s) as before.

use std::sync::Arc;
use std::time::Duration;

use switchyard_shared::wire::{self, BreakerPhase, WireEvent};
use switchyard_store::{
    MasterSwitch, MasterSwitches, Subscriber, SubscriberEvent, SubscriberHandle,
};
use tokio::sync::mpsc;

use super::remote::{self, Applied};
use super::resync::{Cursor, resync_logged};
use super::{RuntimeSource, settings};
use crate::cluster::{Cluster, wall_ms};
use crate::metrics::cluster::EventResult;

/// How often the shared state is reconciled while connected (incrementally, through the
/// change log, unless a full scan is needed).
pub const RECONCILE_INTERVAL: Duration = Duration::from_secs(5);
/// Events buffered between the subscriber and this task.
const EVENT_BUFFER: usize = 4096;

/// Runs the subscriber and applies what it delivers until the process ends.
pub async fn run(cluster: Arc<Cluster>, runtime: RuntimeSource) {
    // A restarted task is not subscribed until its own subscriber says so.
    cluster.sync.set_subscribed(false);
    cluster.metrics.set_degraded(cluster.degraded());
    let channel = cluster.store.keys().events_channel();
    // In sentinel mode the client must name the current master, so it is resolved first (in
    // cluster mode: a reachable node); without a master the subscriber waits, with backoff.
    let mut wait = SUBSCRIBE_RETRY_MIN;
    let (mut rx, mut handle) = loop {
        if let Some(subscriber) = spawn_subscriber(&cluster, &channel).await {
            break subscriber;
        }
        if wait == SUBSCRIBE_RETRY_MIN {
            tracing::warn!("no Redis master resolvable; the events subscriber waits for one");
        }
        tokio::time::sleep(wait).await;
        wait = next_subscribe_retry(wait);
    };
    // Sentinel mode: the sentinels' `+switch-master`, so a failover is followed as announced
    // rather than on the next reconcile tick (which stays as the fallback).
    let mut switches = cluster.store.master_switches();
    let mut reconcile = tokio::time::interval(RECONCILE_INTERVAL);
    reconcile.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut reported_drops = 0;
    // A restarted task starts without an offset: its first resync scans.
    let mut cursor = Cursor::default();
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
                            resync_logged(&cluster, &runtime(), &mut inbox, &mut cursor).await;
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
            Some(switch) = next_switch(&mut switches) => {
                if let Some((new_rx, new_handle)) = follow_switch(&cluster, &channel, switch, &mut switches).await {
                    rx = new_rx;
                    handle = new_handle;
                    reported_drops = 0;
                }
                cluster.metrics.set_degraded(cluster.degraded());
            }
            _ = reconcile.tick() => {
                if cluster.sync.subscribed() {
                    let mut inbox = Inbox { rx: &mut rx, runtime: &runtime, again: false };
                    resync_logged(&cluster, &runtime(), &mut inbox, &mut cursor).await;
                } else if cluster.store.pubsub_server_moves()
                    && let Some((new_rx, new_handle)) = spawn_subscriber(&cluster, &channel).await
                {
                    // The subscriber keeps reconnecting to the server it was built for, which
                    // after a failover is the old master (Sentinel) or may be a dead node
                    // (Redis Cluster): build it again for the master the sentinel names now,
                    // or for the next reachable cluster node. With no master resolvable the
                    // old one keeps trying until the next tick.
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

/// The next master switch, or never (not in sentinel mode).
async fn next_switch(switches: &mut Option<MasterSwitches>) -> Option<MasterSwitch> {
    match switches {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

/// Follows a master switch: the store asks the sentinel again (the permit tasks see its
/// master generation change after their next call, and re-assert what this node holds before
/// growing), and the events subscriber is built again on the new master; its `Connected`
/// brings the resync. `None` when no master answers yet: the reconcile tick tries again.
async fn follow_switch(
    cluster: &Cluster,
    channel: &str,
    switch: MasterSwitch,
    switches: &mut Option<MasterSwitches>,
) -> Option<(mpsc::Receiver<SubscriberEvent>, SubscriberHandle)> {
    // Every sentinel announces the same switch: one is enough.
    while switches
        .as_mut()
        .and_then(MasterSwitches::try_next)
        .is_some()
    {}
    tracing::info!(old = %switch.old, new = %switch.new, "the sentinels switched the Redis master; following it");
    cluster.store.follow_master_switch();
    cluster.sync.set_subscribed(false);
    let subscriber = spawn_subscriber(cluster, channel).await;
    if subscriber.is_none() {
        tracing::warn!("no master answers yet after the switch; retrying on the next tick");
    }
    subscriber
}

/// First wait before asking again for a master to subscribe on.
const SUBSCRIBE_RETRY_MIN: Duration = Duration::from_millis(100);

/// The next wait: doubled, at most one reconcile interval.
fn next_subscribe_retry(wait: Duration) -> Duration {
    wait.saturating_mul(2).min(RECONCILE_INTERVAL)
}

/// Starts an events subscriber on the server the store names for pub/sub, or `None` in
/// sentinel mode while no master answers: the store's client is then still the sentinel's,
/// which accepts `SUBSCRIBE` but carries no node's events, so a subscriber built on it would
/// look subscribed and hear nothing.
async fn spawn_subscriber(
    cluster: &Cluster,
    channel: &str,
) -> Option<(mpsc::Receiver<SubscriberEvent>, SubscriberHandle)> {
    let store = &cluster.store;
    let client = if store.is_sentinel() {
        // A command that succeeds went through a master the sentinel named, and that master's
        // client is what the store hands out from then on.
        store.ping().await.ok()?;
        store.client()
    } else {
        store.pubsub_client().await
    };
    Some(Subscriber::spawn(client, channel.to_owned(), EVENT_BUFFER))
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
                && let Some(p) = rt.table.provider(provider)
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
pub(super) struct Inbox<'a> {
    rx: &'a mut mpsc::Receiver<SubscriberEvent>,
    runtime: &'a RuntimeSource,
    /// A resubscription arrived: what was published meanwhile needs another resync.
    again: bool,
}

impl Inbox<'_> {
    /// Applies what is waiting (at most one buffer's worth).
    pub(super) async fn drain(&mut self, cluster: &Cluster) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subscribe_retry_doubles_up_to_one_reconcile_interval() {
        let mut wait = SUBSCRIBE_RETRY_MIN;
        let mut waits = Vec::new();
        for _ in 0..10 {
            waits.push(wait);
            wait = next_subscribe_retry(wait);
        }
        assert_eq!(waits[1], Duration::from_millis(200));
        assert!(waits.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(waits[9], RECONCILE_INTERVAL);
    }
}
