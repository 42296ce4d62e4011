//! The Redis ACL documented in `docs/cluster.md` is enough for nodes to run, and scopes them to
//! their key prefix and events channel: two nodes authenticated as that user sync a cooldown,
//! while the same user cannot touch a key or channel outside the prefix. The rule is read from
//! the document itself, so the document cannot drift from what is tested.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use crate::support::{STATE_DEADLINE, eventually};
use crate::sync::{body, chat, client, health, key_env, store};
use switchyard_tests::cluster::{TestCluster, start_node};
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockUpstream};
use switchyard_tests::redis_server::RedisServer;

/// The `ACL SETUSER` arguments of docs/cluster.md for `prefix` and `password`.
fn documented_acl(prefix: &str, password: &str) -> Vec<String> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/cluster.md"))
            .unwrap();
    let line = doc
        .lines()
        .find(|l| l.trim_start().starts_with("ACL SETUSER switchyard "))
        .expect("docs/cluster.md documents the node's ACL user");
    line.split_whitespace()
        .skip(2)
        .map(|w| {
            w.replace("<prefix>", prefix)
                .replace("<password>", password)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_run_as_the_documented_acl_user_and_stay_in_their_prefix() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let redis = RedisServer::start().unwrap();
    let admin = store(&redis.url());
    let rule = documented_acl("sy-test:", "s3cret");
    let set: String = admin
        .run("acl", |mut con| async move {
            redis::cmd("ACL")
                .arg("SETUSER")
                .arg(&rule)
                .query_async(&mut con)
                .await
        })
        .await
        .unwrap();
    assert_eq!(set, "OK");

    let url = redis
        .url()
        .replace("redis://", "redis://switchyard:s3cret@");
    let body = body(&mock, 2);
    let env = key_env(2);
    let url_for_nodes = url.clone();
    let nodes = tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let nodes: Vec<_> = (0..2)
            .map(|i| start_node(&format!("node-{i}"), &url_for_nodes, &body, &env).unwrap())
            .collect();
        let c = TestCluster { redis, nodes };
        assert!(
            c.wait_synced(Duration::from_secs(15)),
            "nodes did not subscribe as the ACL user; log:\n{}",
            c.nodes[0].log()
        );
        c
    })
    .await
    .unwrap();
    let [a, b] = [&nodes.nodes[0], &nodes.nodes[1]];
    let http = client();

    // A 429 on a reaches Redis and b (scripts, publish and subscribe all allowed).
    mock.script(
        FaultSpec::status(429)
            .for_key("sk-0")
            .header("Retry-After", "30")
            .times(1),
    )
    .unwrap();
    assert_eq!(chat(&http, a).await.0, 200);
    assert!(
        eventually(STATE_DEADLINE, || async {
            health(b).await["connections"]["byProvider"]["p"]["cooldown"] == 1
        })
        .await,
        "the cooldown did not reach b; log of a:\n{}",
        a.log()
    );
    assert_eq!(admin.read_connections(&["k0"]).await.unwrap().len(), 1);

    // The same user cannot reach outside its prefix and channel.
    let scoped = store(&url);
    let outside = scoped
        .run("set", |mut con| async move {
            redis::cmd("SET")
                .arg("other:key")
                .arg("1")
                .query_async::<()>(&mut con)
                .await
        })
        .await;
    assert!(outside.is_err(), "a key outside the prefix was writable");
    let foreign = scoped
        .run("publish", |mut con| async move {
            redis::cmd("PUBLISH")
                .arg("other:events")
                .arg("x")
                .query_async::<i64>(&mut con)
                .await
        })
        .await;
    assert!(foreign.is_err(), "a channel outside the prefix was usable");
    let flush = scoped
        .run("flushall", |mut con| async move {
            redis::cmd("FLUSHALL").query_async::<()>(&mut con).await
        })
        .await;
    assert!(flush.is_err(), "FLUSHALL was allowed");
}
