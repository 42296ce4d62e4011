//! Lost clears heal: a reinstatement or a cooldown clear published while a node's subscriber
//! was gone reaches that node through its resync, because every connection record carries a
//! version bumped by every write (clears included) and a resync adopts a newer record, lowering
//! as well as raising. The resync that heals it is incremental: the node reads the change log
//! from its offset, not every record.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;
use std::time::Duration;

use crate::support::{STATE_DEADLINE, eventually};
use crate::sync::{chat, client, health, start_nodes, store};
use serde_json::{Value, json};
use switchyard_tests::cluster::{MGMT_KEY, metric, metrics_text};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockUpstream};

/// The node's periodic resync interval (`cluster_sync::sync::RECONCILE_INTERVAL`).
const RESYNC_INTERVAL: Duration = Duration::from_secs(5);

/// Sends `sig` (`-STOP`, `-CONT`) to a node we started.
pub(crate) fn signal(node: &NodeProcess, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &node.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {sig} failed");
}

/// The node's `switchyard_cluster_resyncs_total{kind}` (`incremental`, `full`).
pub(crate) async fn resyncs(node: &NodeProcess, kind: &'static str) -> u64 {
    let admin = node.admin;
    tokio::task::spawn_blocking(move || {
        let prefix = format!("switchyard_cluster_resyncs_total{{kind=\"{kind}\"}}");
        metric(&metrics_text(admin), &prefix).map_or(0, |v| v as u64)
    })
    .await
    .unwrap()
}

/// Connections of provider `p` that `node` counts in health's `field` (`terminal`, `cooldown`).
pub(crate) async fn counted(node: &NodeProcess, field: &str) -> u64 {
    health(node).await["connections"]["byProvider"]["p"][field]
        .as_u64()
        .unwrap_or(0)
}

/// What sets k0's state on node a and what the operator does about it there.
struct Case {
    fault: FaultSpec,
    /// The health field that counts k0 while it is out.
    field: &'static str,
    /// The admin call on a that lifts it: `(path, body)`.
    action: (&'static str, Value),
}

/// Both nodes learn k0's state; b freezes and every subscriber connection in Redis is killed,
/// so b's is gone when a announces the operator's action; b resumes and must route to k0
/// again within one resync interval.
async fn missed_action_heals(case: Case) {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cluster = start_nodes(2, &mock, 2, &[]).await;
    let http = client();
    let [a, b] = [&cluster.nodes[0], &cluster.nodes[1]];

    mock.script(case.fault).unwrap();
    assert_eq!(chat(&http, a).await.0, 200, "k1 serves what k0 refuses");
    for node in [a, b] {
        assert!(
            eventually(STATE_DEADLINE, || async {
                counted(node, case.field).await == 1
            })
            .await,
            "k0 is not counted as {} on {}",
            case.field,
            node.client_url()
        );
    }

    let full_before = resyncs(b, "full").await;
    let incremental_before = resyncs(b, "incremental").await;
    assert!(full_before >= 1, "b's first resync is a full scan");
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
    let (path, body) = case.action;
    let resp = http
        .post(format!("{}{path}", a.admin_url()))
        .header("authorization", format!("Bearer {MGMT_KEY}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    let lifted = eventually(STATE_DEADLINE, || async {
        let r = &shared.read_connections(&["k0"]).await.unwrap()[0];
        r.terminal.is_none() && r.remaining_ms == 0
    })
    .await;
    signal(b, "-CONT");
    assert!(killed >= 2, "killed {killed} subscriber connections");
    assert_eq!(status, 200, "{path}: {text}");
    assert!(lifted, "the operator's action did not reach Redis");

    // Within one resync interval b routes to k0 again.
    let sk0_before = mock.stats().requests_for_key("sk-0");
    let healed = eventually(RESYNC_INTERVAL + Duration::from_secs(2), || async {
        chat(&http, b).await.0 == 200 && mock.stats().requests_for_key("sk-0") > sk0_before
    })
    .await;
    assert!(
        healed,
        "b still skips k0 ({}: {}); log of b:\n{}",
        case.field,
        counted(b, case.field).await,
        b.log()
    );
    assert_eq!(counted(b, case.field).await, 0);
    // Healed through the change log: b had an offset, so neither its reconnect nor its
    // periodic resync read every record again.
    assert!(
        resyncs(b, "incremental").await > incremental_before,
        "no incremental resync on b"
    );
    assert_eq!(
        resyncs(b, "full").await,
        full_before,
        "b fell back to a full scan; log of b:\n{}",
        b.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reinstatement_missed_while_the_subscriber_was_gone_heals_by_resync() {
    missed_action_heals(Case {
        // k0 runs out of credits: terminal.
        fault: FaultSpec::status(402).for_key("sk-0").times(1),
        field: "terminal",
        action: ("/api/resilience/connections/k0/reinstate", json!({})),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cooldown_clear_missed_while_the_subscriber_was_gone_heals_by_resync() {
    missed_action_heals(Case {
        // k0 is rate limited for a minute.
        fault: FaultSpec::status(429)
            .for_key("sk-0")
            .header("Retry-After", "60")
            .times(1),
        field: "cooldown",
        action: (
            "/api/resilience/cooldowns",
            json!({"connectionIds": ["k0"]}),
        ),
    })
    .await;
}
