//! Publishing events and the subscriber task that receives them.
//!
//! Why: state changes reach other nodes as bincode [`switchyard_shared::wire::Envelope`]s on one pub/sub
//! channel. Pub/sub is at-most-once: whatever is published while a subscriber is disconnected
//! is lost. So the subscriber tells its owner about every (re)subscription
//! ([`SubscriberEvent::Connected`]), and the owner resyncs from the keys then; the events only
//! make changes arrive sooner.
//!
//! The subscriber has its own connection (pub/sub cannot share the multiplexed one), its own
//! reconnect loop with bounded backoff, and a periodic `PING` so a server that stops answering
//! without closing the socket is noticed too.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::task::JoinHandle;

use super::error::StoreError;
use super::redis_store::RedisStore;

/// First reconnect delay; doubled per failed attempt up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// Bound on connecting and subscribing.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the subscriber checks that the server still answers, and how long it waits.
const PING_INTERVAL: Duration = Duration::from_secs(2);
const PING_TIMEOUT: Duration = Duration::from_secs(2);

impl RedisStore {
    /// Publishes `payload` on the events channel. Returns how many subscribers received it.
    pub async fn publish(&self, payload: &[u8]) -> Result<u64, StoreError> {
        let channel = self.keys().events_channel();
        let payload = payload.to_vec();
        self.run("publish", |mut con| async move {
            redis::cmd("PUBLISH")
                .arg(channel)
                .arg(payload)
                .query_async(&mut con)
                .await
        })
        .await
    }
}

/// What the subscriber reports to its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubscriberEvent {
    /// (Re)subscribed: anything published meanwhile was lost, so the owner must resync now.
    Connected,
    /// One message's payload.
    Message(Vec<u8>),
    /// The subscription ended (connection lost or server unresponsive); reconnecting.
    Disconnected,
}

/// The subscriber task.
pub struct Subscriber;

impl Subscriber {
    /// Starts the task on the current tokio runtime (call it from inside one). Messages are
    /// dropped (and counted) when `capacity` is full; `Connected`/`Disconnected` are never
    /// dropped: the task waits for room instead.
    pub fn spawn(
        client: redis::Client,
        channel: String,
        capacity: usize,
    ) -> (mpsc::Receiver<SubscriberEvent>, SubscriberHandle) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let dropped = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(run(client, channel, tx, Arc::clone(&dropped)));
        (rx, SubscriberHandle { task, dropped })
    }
}

/// Owns the subscriber task: dropping it (or [`SubscriberHandle::stop`]) stops the task.
pub struct SubscriberHandle {
    task: JoinHandle<()>,
    dropped: Arc<AtomicU64>,
}

impl SubscriberHandle {
    /// Messages dropped because the receiver was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub fn stop(self) {
        // Drop does the work.
    }
}

impl Drop for SubscriberHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Why a subscription ended.
enum End {
    /// The connection is gone or unresponsive: reconnect.
    Lost,
    /// The receiver was dropped: stop.
    Closed,
}

async fn run(
    client: redis::Client,
    channel: String,
    tx: mpsc::Sender<SubscriberEvent>,
    dropped: Arc<AtomicU64>,
) {
    let mut backoff = MIN_BACKOFF;
    loop {
        let connected = tokio::time::timeout(CONNECT_TIMEOUT, async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&channel).await?;
            Ok::<_, redis::RedisError>(pubsub)
        })
        .await;
        let pubsub = match connected {
            Ok(Ok(pubsub)) => pubsub,
            Ok(Err(_)) | Err(_) => {
                if tx.is_closed() {
                    return;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = MIN_BACKOFF;
        if tx.send(SubscriberEvent::Connected).await.is_err() {
            return;
        }
        match pump(pubsub, &tx, &dropped).await {
            End::Closed => return,
            End::Lost => {
                if tx.send(SubscriberEvent::Disconnected).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Forwards messages until the connection is lost or the receiver goes away.
async fn pump(
    pubsub: redis::aio::PubSub,
    tx: &mpsc::Sender<SubscriberEvent>,
    dropped: &AtomicU64,
) -> End {
    let (mut sink, mut stream) = pubsub.split();
    let mut ping = tokio::time::interval(PING_INTERVAL);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ping.tick().await;
    loop {
        tokio::select! {
            msg = stream.next() => {
                let Some(msg) = msg else { return End::Lost };
                let payload = msg.get_payload_bytes().to_vec();
                match tx.try_send(SubscriberEvent::Message(payload)) {
                    Ok(()) => {}
                    Err(TrySendError::Full(_)) => {
                        dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(TrySendError::Closed(_)) => return End::Closed,
                }
            }
            _ = ping.tick() => {
                let answered = tokio::time::timeout(PING_TIMEOUT, sink.ping::<redis::Value>()).await;
                if !matches!(answered, Ok(Ok(_))) {
                    return End::Lost;
                }
            }
            () = tx.closed() => return End::Closed,
        }
    }
}
