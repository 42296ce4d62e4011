//! A dead node's id stays in the node set long enough for the coordinator to see it `down` (and
//! for its janitor to clean up after `node_ttl_ms`). Nodes used to prune an id within one
//! heartbeat of its key expiring, about 2 s after the node died; now they prune only ids dead
//! for twice `node_ttl_ms`, so the set still stays bounded without a coordinator.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use crate::support::eventually;
use crate::sync::{start_nodes, store};
use switchyard_store::RedisStore;
use switchyard_tests::mock_upstream::{MockConfig, MockUpstream};

/// `node_ttl_ms` of the test cluster table.
const NODE_TTL: Duration = Duration::from_millis(3000);

async fn members(shared: &RedisStore) -> Vec<String> {
    let set = shared.keys().nodes();
    shared
        .run("smembers", |mut con| async move {
            redis::cmd("SMEMBERS").arg(set).query_async(&mut con).await
        })
        .await
        .unwrap()
}

async fn has_key(shared: &RedisStore, key: String) -> bool {
    let n: u64 = shared
        .run("exists", |mut con| async move {
            redis::cmd("EXISTS").arg(key).query_async(&mut con).await
        })
        .await
        .unwrap();
    n == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_node_id_outlives_its_heartbeat_by_node_ttl_then_is_pruned() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cluster = start_nodes(2, &mock, 1, &[]).await;
    let shared = store(&cluster.redis.url());
    assert!(
        eventually(Duration::from_secs(5), || async {
            members(&shared).await.len() == 2
        })
        .await
    );

    // node-1 dies without deregistering.
    let pid = cluster.nodes[1].pid().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let key = shared.keys().node("node-1");
    assert!(
        eventually(NODE_TTL * 3, || async {
            !has_key(&shared, key.clone()).await
        })
        .await,
        "node-1's heartbeat never expired"
    );

    // Its id stays while the coordinator would show it down (node_ttl), although node-0 reads
    // the membership every heartbeat.
    let expired_at = Instant::now();
    let mut checks = 0;
    while expired_at.elapsed() < NODE_TTL - Duration::from_millis(500) && checks < 100 {
        assert!(
            members(&shared).await.contains(&"node-1".to_owned()),
            "node-1 was pruned {:?} after its heartbeat expired",
            expired_at.elapsed()
        );
        checks += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(checks >= 10, "too few checks");
    // Then node-0 prunes it (no coordinator runs here).
    assert!(
        eventually(NODE_TTL * 3, || async {
            members(&shared).await == vec!["node-0".to_owned()]
        })
        .await,
        "node-1's id was never pruned: {:?}",
        members(&shared).await
    );
}
