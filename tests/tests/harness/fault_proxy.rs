//! The fault proxy against a real `redis-server`: traffic passes, a blackhole stalls an
//! established connection until the client times out, passing again recovers, a cut resets
//! the client's connection, and refused connections fail at once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchyard_store::{HealthPolicy, NoopObserver, RedisStore, RedisStoreConfig, StoreError};
use switchyard_tests::fault_proxy::{FaultProxy, Mode};

use crate::support::{STATE_DEADLINE, eventually};
use switchyard_tests::redis_server::RedisServer;

fn redis_addr(redis: &RedisServer) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], redis.port))
}

fn store_via(proxy: &FaultProxy, timeout_ms: u64) -> RedisStore {
    let config = RedisStoreConfig {
        url: format!("redis://{}/0", proxy.addr()),
        key_prefix: "sy:".into(),
        timeout_ms,
        // Never skip calls: this test wants to see every call hit the proxy.
        health: HealthPolicy {
            down_after_failures: u32::MAX,
            retry_interval_ms: 0,
        },
    };
    RedisStore::connect(&config, Arc::new(NoopObserver)).expect("store")
}

/// Retries `PING` until it succeeds (bounded), for after a reset.
async fn ping_until_ok(store: &RedisStore) -> Result<(), StoreError> {
    let ok = eventually(STATE_DEADLINE, || async { store.ping().await.is_ok() }).await;
    if ok { Ok(()) } else { store.ping().await }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackhole_stalls_a_live_connection_and_pass_recovers() {
    let redis = RedisServer::start().expect("redis");
    let proxy = FaultProxy::start(redis_addr(&redis)).expect("proxy");
    let store = store_via(&proxy, 300);

    store.ping().await.expect("ping through the proxy");
    let stats = proxy.stats();
    assert_eq!(stats.accepted, 1);
    assert!(
        stats.bytes_to_target > 0 && stats.bytes_to_client > 0,
        "{stats:?}"
    );

    proxy.set_mode(Mode::Blackhole);
    let started = Instant::now();
    let result = store.ping().await;
    assert!(
        matches!(result, Err(StoreError::Timeout { .. })),
        "a blackholed call must time out, got {result:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        proxy.stats().accepted,
        1,
        "the established connection was reused"
    );
    assert!(proxy.stats().bytes_dropped > 0);

    proxy.set_mode(Mode::Pass);
    ping_until_ok(&store)
        .await
        .expect("works again after the blackhole");
    let time = store.time_ms().await.expect("TIME after recovery");
    assert!(
        time > 1_600_000_000_000,
        "a sane TIME reply, not a shifted one: {time}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_slows_calls_down_without_breaking_them() {
    let redis = RedisServer::start().expect("redis");
    let proxy = FaultProxy::start(redis_addr(&redis)).expect("proxy");
    let store = store_via(&proxy, 5_000);
    store.ping().await.expect("ping");

    proxy.set_mode(Mode::Delay(Duration::from_millis(150)));
    let started = Instant::now();
    store.ping().await.expect("a delayed ping still answers");
    // Both directions are delayed.
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );

    let fast = store_via(&proxy, 100);
    assert!(matches!(fast.ping().await, Err(StoreError::Timeout { .. })));
}

#[test]
fn cut_resets_open_connections_and_refuse_closes_new_ones() {
    let redis = RedisServer::start().expect("redis");
    let proxy = FaultProxy::start(redis_addr(&redis)).expect("proxy");

    let mut client = TcpStream::connect(proxy.addr()).expect("connect");
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    client.write_all(b"PING\r\n").expect("write");
    let mut buf = [0u8; 64];
    let n = client.read(&mut buf).expect("read");
    assert_eq!(&buf[..n], b"+PONG\r\n");

    proxy.cut();
    // The client sees the connection gone: a reset, or end of stream.
    let gone = match client.read(&mut buf) {
        Ok(0) => true,
        Err(e) => {
            e.kind() != std::io::ErrorKind::WouldBlock && e.kind() != std::io::ErrorKind::TimedOut
        }
        Ok(_) => false,
    };
    assert!(gone, "the cut connection must be closed");
    assert_eq!(proxy.stats().reset, 1);

    // New connections still work after a cut.
    let mut again = TcpStream::connect(proxy.addr()).expect("connect");
    again
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    again.write_all(b"PING\r\n").expect("write");
    let n = again.read(&mut buf).expect("read");
    assert_eq!(&buf[..n], b"+PONG\r\n");

    proxy.set_mode(Mode::Refuse);
    let mut refused = TcpStream::connect(proxy.addr()).expect("the listener still accepts");
    refused
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let _ = refused.write_all(b"PING\r\n");
    let closed = matches!(refused.read(&mut buf), Ok(0) | Err(_));
    assert!(closed, "a refused connection must be closed at once");
    assert_eq!(proxy.stats().refused, 1);
    // The connection opened before Refuse keeps working.
    again.write_all(b"PING\r\n").expect("write");
    let n = again.read(&mut buf).expect("read");
    assert_eq!(&buf[..n], b"+PONG\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_is_seen_by_the_store_as_an_error_then_it_reconnects() {
    let redis = RedisServer::start().expect("redis");
    let proxy = FaultProxy::start(redis_addr(&redis)).expect("proxy");
    let store = store_via(&proxy, 1_000);
    store.ping().await.expect("ping");

    proxy.cut();
    // Once the proxy has reset the connection (on loopback the client's socket has the reset
    // as soon as it is sent), the first call on the dead connection fails.
    let reset = eventually(STATE_DEADLINE, || {
        std::future::ready(proxy.stats().reset >= 1)
    })
    .await;
    assert!(reset, "the proxy resets the connection");
    let result = store.ping().await;
    assert!(
        result.is_err(),
        "a call on a cut connection must fail, got {result:?}"
    );
    assert_eq!(proxy.stats().reset, 1);
    ping_until_ok(&store)
        .await
        .expect("reconnects after the cut");
    assert!(proxy.stats().accepted >= 2, "{:?}", proxy.stats());
}
