//! Lost clears heal: a reinstatement published while a node's subscriber was gone reaches that
//! node through its resync, because every connection record carries a version bumped by every
//! write (clears included) and a resync adopts a newer record, lowering as well as raising.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;
use std::time::Duration;

use crate::support::{STATE_DEADLINE, eventually};
use crate::sync::{body, chat, client, health, key_env, store};
use switchyard_tests::cluster::{MGMT_KEY, TestCluster};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockUpstream};

/// The node's periodic resync interval (`cluster_sync::sync::RECONCILE_INTERVAL`).
const RESYNC_INTERVAL: Duration = Duration::from_secs(5);

/// Sends `sig` (`-STOP`, `-CONT`) to a node we started.
fn signal(node: &NodeProcess, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &node.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {sig} failed");
}

/// Connections of provider `p` that `node` holds terminal.
async fn terminal(node: &NodeProcess) -> u64 {
    health(node).await["connections"]["byProvider"]["p"]["terminal"]
        .as_u64()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reinstatement_missed_while_the_subscriber_was_gone_heals_by_resync() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let body = body(&mock, 2);
    let env = key_env(2);
    let cluster = tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let c = TestCluster::start(2, &body, &env).expect("start the cluster");
        assert!(
            c.wait_synced(Duration::from_secs(15)),
            "nodes did not subscribe"
        );
        c
    })
    .await
    .unwrap();
    let http = client();
    let [a, b] = [&cluster.nodes[0], &cluster.nodes[1]];

    // k0 runs out of credits (402): terminal on a, and on b through the event.
    mock.script(FaultSpec::status(402).for_key("sk-0").times(1))
        .unwrap();
    assert_eq!(chat(&http, a).await.0, 200, "k1 serves what k0 refuses");
    for node in [a, b] {
        assert!(
            eventually(STATE_DEADLINE, || async { terminal(node).await == 1 }).await,
            "k0 did not become terminal on {}",
            node.client_url()
        );
    }

    // b freezes; every subscriber connection in Redis is killed, so b's is gone when a
    // announces the reinstatement.
    signal(b, "-STOP");
    let shared = store(&cluster.redis.url());
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
    assert!(killed >= 2, "killed {killed} subscriber connections");
    let reinstate = http
        .post(format!(
            "{}/api/resilience/connections/k0/reinstate",
            a.admin_url()
        ))
        .header("authorization", format!("Bearer {MGMT_KEY}"))
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    let status = reinstate.status().as_u16();
    if status != 200 {
        signal(b, "-CONT");
        panic!(
            "reinstate: {status} {}",
            reinstate.text().await.unwrap_or_default()
        );
    }
    let reinstated = eventually(STATE_DEADLINE, || async {
        shared.read_connections(&["k0"]).await.unwrap()[0]
            .terminal
            .is_none()
    })
    .await;
    signal(b, "-CONT");
    assert!(reinstated, "the reinstatement did not reach Redis");

    // Within one resync interval b routes to k0 again.
    let sk0_before = mock.stats().requests_for_key("sk-0");
    let healed = eventually(RESYNC_INTERVAL + Duration::from_secs(2), || async {
        chat(&http, b).await.0 == 200 && mock.stats().requests_for_key("sk-0") > sk0_before
    })
    .await;
    assert!(
        healed,
        "b still skips the reinstated k0 (terminal there: {}); log of b:\n{}",
        terminal(b).await,
        b.log()
    );
    assert_eq!(terminal(b).await, 0);
}
