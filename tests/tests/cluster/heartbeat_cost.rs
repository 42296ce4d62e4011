//! What a heartbeat round costs Redis: one script call per node, whatever the cluster's size
//! (it read every peer's heartbeat key, nodes² `GET`s per interval), counted with `INFO
//! commandstats`; and a node of an older release, which writes only its key and the node set,
//! is still counted live while it heartbeats.

use std::time::Duration;

use switchyard_tests::mock_upstream::{MockConfig, MockUpstream};

use crate::support::eventually;
use crate::sync::{health, start_nodes};

/// `calls` of `command` in `INFO commandstats` (0 when it never ran).
async fn calls(con: &mut redis::aio::MultiplexedConnection, command: &str) -> u64 {
    let text: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(con)
        .await
        .unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    text.lines()
        .find_map(|l| l.trim().strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

async fn connect(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_round_reads_no_peer_keys() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cluster = start_nodes(3, &mock, 1, &[]).await;
    let mut con = connect(&cluster.redis.url()).await;
    // Every node counts the three live nodes.
    for node in &cluster.nodes {
        let three = eventually(Duration::from_secs(10), || async {
            health(node).await["cluster"]["liveNodes"] == 3
        })
        .await;
        assert!(three, "{} does not count 3 nodes", node.client_url());
    }
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut con)
        .await
        .unwrap();
    // Wait for two rounds of every node (a heartbeat is one `ZADD`), then count the reads.
    let two_rounds = eventually(Duration::from_secs(15), || {
        let url = cluster.redis.url();
        async move { calls(&mut connect(&url).await, "zadd").await >= 6 }
    })
    .await;
    assert!(two_rounds, "three nodes did not heartbeat twice in 15 s");
    let gets = calls(&mut con, "get").await;
    let smembers = calls(&mut con, "smembers").await;
    let zadds = calls(&mut con, "zadd").await;
    assert_eq!(gets, 0, "heartbeat rounds read peers' keys");
    assert_eq!(smembers, 0, "heartbeat rounds listed the node set");
    assert!(
        zadds >= 6,
        "{zadds} heartbeats in two intervals of three nodes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_of_an_older_release_is_counted_while_it_heartbeats() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cluster = start_nodes(2, &mock, 1, &[]).await;
    let mut con = connect(&cluster.redis.url()).await;
    let node = &cluster.nodes[0];
    // What an older release's heartbeat writes: its key (with a TTL) and the node set.
    let old_heartbeat = |ttl_ms: u64| {
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg("sy-test:node:{old-1}")
            .arg("{\"node_id\":\"old-1\"}")
            .arg("PX")
            .arg(ttl_ms)
            .ignore()
            .cmd("SADD")
            .arg("sy-test:nodes")
            .arg("old-1")
            .ignore();
        pipe
    };
    let counted = eventually(Duration::from_secs(10), || {
        let pipe = old_heartbeat(10_000);
        let mut con = con.clone();
        async move {
            let _: () = pipe.query_async(&mut con).await.unwrap();
            health(node).await["cluster"]["liveNodes"] == 3
        }
    })
    .await;
    assert!(
        counted,
        "the older node is not counted; log:\n{}",
        node.log()
    );
    // It stops: its key expires, and it is no longer counted.
    let _: () = old_heartbeat(500).query_async(&mut con).await.unwrap();
    let gone = eventually(Duration::from_secs(10), || async {
        health(node).await["cluster"]["liveNodes"] == 2
    })
    .await;
    assert!(gone, "the stopped older node is still counted");
}
