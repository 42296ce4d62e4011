//! The change log: every version bump of a connection record is appended to a bounded stream,
//! and a node whose offset the stream no longer covers (trimmed past it) falls back to a full
//! scan and still converges.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use crate::heal::{counted, resyncs, signal};
use crate::support::{STATE_DEADLINE, eventually};
use crate::sync::{chat, client, start_nodes, store};
use serde_json::json;
use switchyard_store::RedisStore;
use switchyard_tests::cluster::MGMT_KEY;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockUpstream};

/// The node's periodic resync interval (`cluster_sync::sync::RECONCILE_INTERVAL`).
const RESYNC_INTERVAL: Duration = Duration::from_secs(5);

/// `(connection id, version)` of every record change in the log, oldest first.
async fn log_entries(shared: &RedisStore) -> Vec<(String, u64)> {
    let key = shared.keys().changelog();
    let raw: Vec<(String, Vec<(String, String)>)> = shared
        .run("xrange", |mut con| async move {
            redis::cmd("XRANGE")
                .arg(key)
                .arg("-")
                .arg("+")
                .query_async(&mut con)
                .await
        })
        .await
        .unwrap();
    raw.into_iter()
        .filter_map(|(_, fields)| {
            let get = |name: &str| fields.iter().find(|(f, _)| f == name).map(|(_, v)| v);
            Some((get("c")?.clone(), get("v")?.parse().ok()?))
        })
        .collect()
}

/// k0 cools on both nodes (and its bump is in the log); b freezes, its subscriber is killed, the
/// cooldown is cleared through a, and the log is trimmed to nothing before b resumes (then a
/// later entry, so the stream exists and starts after b's offset). b must notice that the log
/// no longer covers its offset, scan every record, and route to k0 again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_offset_was_trimmed_scans_and_converges() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cluster = start_nodes(2, &mock, 2, &[]).await;
    let http = client();
    let [a, b] = [&cluster.nodes[0], &cluster.nodes[1]];
    let shared = store(&cluster.redis.url());

    mock.script(
        FaultSpec::status(429)
            .for_key("sk-0")
            .header("Retry-After", "60")
            .times(1),
    )
    .unwrap();
    assert_eq!(chat(&http, a).await.0, 200, "k1 serves what k0 refuses");
    for node in [a, b] {
        assert!(
            eventually(STATE_DEADLINE, || async {
                counted(node, "cooldown").await == 1
            })
            .await,
            "k0 is not cooling on {}",
            node.client_url()
        );
    }
    // The cooldown's version bump is in the log, with the record's version.
    let version = shared.read_connection_states(&["k0"]).await.unwrap()[0].version;
    assert!(version > 0);
    assert!(
        log_entries(&shared)
            .await
            .contains(&("k0".to_owned(), version)),
        "k0 at version {version} is not in the change log: {:?}",
        log_entries(&shared).await
    );

    let full_before = resyncs(b, "full").await;
    signal(b, "-STOP");
    let killed: u64 = shared
        .run("client_kill", |mut con| async move {
            redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg("pubsub")
                .query_async(&mut con)
                .await
        })
        .await
        .unwrap();
    let resp = http
        .post(format!("{}/api/resilience/cooldowns", a.admin_url()))
        .header("authorization", format!("Bearer {MGMT_KEY}"))
        .json(&json!({"connectionIds": ["k0"]}))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let cleared = eventually(STATE_DEADLINE, || async {
        shared.read_connections(&["k0"]).await.unwrap()[0].remaining_ms == 0
    })
    .await;
    // The clear's entry (and every one before it) is trimmed away; a later entry starts the
    // stream after b's offset.
    let key = shared.keys().changelog();
    let trimmed: u64 = shared
        .run("xtrim", |mut con| async move {
            let mut pipe = redis::pipe();
            pipe.cmd("XTRIM").arg(&key).arg("MAXLEN").arg(0);
            pipe.cmd("XADD")
                .arg(&key)
                .arg("*")
                .arg("mark")
                .arg("test")
                .ignore();
            let (n,): (u64,) = pipe.query_async(&mut con).await?;
            Ok(n)
        })
        .await
        .unwrap();
    signal(b, "-CONT");
    assert!(killed >= 2, "killed {killed} subscriber connections");
    assert_eq!(status, 200);
    assert!(cleared, "the clear did not reach Redis");
    assert!(trimmed >= 2, "trimmed {trimmed} entries");

    let sk0_before = mock.stats().requests_for_key("sk-0");
    let healed = eventually(RESYNC_INTERVAL + Duration::from_secs(2), || async {
        chat(&http, b).await.0 == 200 && mock.stats().requests_for_key("sk-0") > sk0_before
    })
    .await;
    assert!(
        healed,
        "b still skips k0 (cooling: {}); log of b:\n{}",
        counted(b, "cooldown").await,
        b.log()
    );
    assert!(
        resyncs(b, "full").await > full_before,
        "b did not fall back to a full scan"
    );
}
