//! Publishing and the reconnecting subscriber against a real `redis-server`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchyard_shared::outcome::FailureReason;
use switchyard_shared::wire::{self, Envelope, WireEvent};
use switchyard_store::{
    HealthPolicy, NoopObserver, RedisStore, RedisStoreConfig, Subscriber, SubscriberEvent,
};
use switchyard_tests::redis_server::RedisServer;

use crate::support::{STATE_DEADLINE, eventually};
use tokio::sync::mpsc::Receiver;

fn store(server: &RedisServer) -> RedisStore {
    let config = RedisStoreConfig {
        url: server.url(),
        key_prefix: "ev:".to_owned(),
        timeout_ms: 2_000,
        health: HealthPolicy::default(),
    };
    RedisStore::connect(&config, Arc::new(NoopObserver)).unwrap_or_else(|e| panic!("{e}"))
}

async fn next(rx: &mut Receiver<SubscriberEvent>, within: Duration) -> SubscriberEvent {
    match tokio::time::timeout(within, rx.recv()).await {
        Ok(Some(ev)) => ev,
        Ok(None) => panic!("subscriber channel closed"),
        Err(_) => panic!("no subscriber event within {within:?}"),
    }
}

fn envelope(seq: u64) -> Vec<u8> {
    wire::encode(&Envelope {
        origin_node: "n1".to_owned(),
        origin_ts_ms: 1,
        seq,
        event: WireEvent::LockoutSet {
            provider: "p".to_owned(),
            connection: "c".to_owned(),
            model: "m".to_owned(),
            remaining_ms: 1_000,
            failure_count: 1,
            reason: FailureReason::QuotaExhausted,
        },
    })
    .unwrap()
}

/// Publishes until the subscriber receives a message (a publish right after `Connected` may
/// race with nothing, but a bounded retry keeps the test independent of timing).
async fn publish_until_received(
    s: &RedisStore,
    rx: &mut Receiver<SubscriberEvent>,
    payload: &[u8],
) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let _ = s.publish(payload).await;
        if let Ok(Some(ev)) = tokio::time::timeout(Duration::from_millis(500), rx.recv()).await {
            assert_eq!(ev, SubscriberEvent::Message(payload.to_vec()));
            return;
        }
    }
    panic!("no message arrived within 10 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_bytes_reach_the_subscriber() {
    let server = RedisServer::start().unwrap();
    let s = store(&server);
    let (mut rx, handle) = Subscriber::spawn(s.client().clone(), s.keys().events_channel(), 16);
    assert_eq!(
        next(&mut rx, Duration::from_secs(10)).await,
        SubscriberEvent::Connected
    );

    let payload = envelope(7);
    assert_eq!(s.publish(&payload).await.unwrap(), 1, "one subscriber");
    let SubscriberEvent::Message(bytes) = next(&mut rx, Duration::from_secs(5)).await else {
        panic!("expected a message")
    };
    assert_eq!(wire::decode(&bytes).unwrap().seq, 7);
    assert_eq!(handle.dropped(), 0);

    handle.stop();
    let closed = eventually(STATE_DEADLINE, || async {
        s.publish(&payload).await.unwrap() == 0
    })
    .await;
    assert!(closed, "stop() left the subscription open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriber_reconnects_after_a_restart() {
    let mut server = RedisServer::start().unwrap();
    let s = store(&server);
    let (mut rx, _handle) = Subscriber::spawn(s.client().clone(), s.keys().events_channel(), 16);
    assert_eq!(
        next(&mut rx, Duration::from_secs(10)).await,
        SubscriberEvent::Connected
    );
    publish_until_received(&s, &mut rx, &envelope(1)).await;

    server.kill();
    assert_eq!(
        next(&mut rx, Duration::from_secs(10)).await,
        SubscriberEvent::Disconnected
    );
    server.restart().unwrap();
    assert_eq!(
        next(&mut rx, Duration::from_secs(10)).await,
        SubscriberEvent::Connected
    );
    publish_until_received(&s, &mut rx, &envelope(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriber_notices_an_unresponsive_server() {
    let server = RedisServer::start().unwrap();
    let s = store(&server);
    let (mut rx, _handle) = Subscriber::spawn(s.client().clone(), s.keys().events_channel(), 16);
    assert_eq!(
        next(&mut rx, Duration::from_secs(10)).await,
        SubscriberEvent::Connected
    );
    server.pause();
    let ev = next(&mut rx, Duration::from_secs(15)).await;
    server.resume();
    assert_eq!(ev, SubscriberEvent::Disconnected);
    assert_eq!(
        next(&mut rx, Duration::from_secs(15)).await,
        SubscriberEvent::Connected
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_channel_drops_and_counts_messages() {
    let server = RedisServer::start().unwrap();
    let s = store(&server);
    let (mut rx, handle) = Subscriber::spawn(s.client().clone(), s.keys().events_channel(), 4);
    assert_eq!(
        next(&mut rx, Duration::from_secs(10)).await,
        SubscriberEvent::Connected
    );
    // Nobody reads: 4 fit, the rest are dropped.
    for seq in 0..20 {
        assert_eq!(s.publish(&envelope(seq)).await.unwrap(), 1);
    }
    eventually(STATE_DEADLINE, || {
        std::future::ready(handle.dropped() >= 16)
    })
    .await;
    assert_eq!(handle.dropped(), 16);
    let mut seqs = Vec::new();
    for _ in 0..4 {
        match next(&mut rx, Duration::from_secs(5)).await {
            SubscriberEvent::Message(b) => seqs.push(wire::decode(&b).unwrap().seq),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seqs, vec![0, 1, 2, 3], "the oldest messages were kept");
}
