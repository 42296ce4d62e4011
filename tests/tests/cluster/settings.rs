//! Settings patches are compare-and-set on the shared document's version, not
//! last-writer-wins: two nodes patching different fields at the same moment both keep their
//! change, in Redis and on every node.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};

use crate::support::{STATE_DEADLINE, eventually};
use crate::sync::{client, start_nodes, store};
use switchyard_tests::cluster::MGMT_KEY;
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{MockConfig, MockUpstream};

async fn patch(http: &reqwest::Client, node: &NodeProcess, body: Value) -> u16 {
    http.patch(format!("{}/api/resilience", node.admin_url()))
        .header("authorization", format!("Bearer {MGMT_KEY}"))
        .json(&body)
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

/// `(apikey, oauth)` breaker thresholds of a settings document (persisted or effective).
fn thresholds(doc: &Value) -> (Option<u64>, Option<u64>) {
    let pick = |cat: &str| {
        let v = &doc["provider_breaker"][cat]["failure_threshold"];
        v.as_u64().or_else(|| v["value"].as_u64())
    };
    (pick("apikey"), pick("oauth"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_patches_of_different_fields_on_two_nodes_both_survive() {
    const ROUNDS: u64 = 10;
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cluster = start_nodes(2, &mock, 1, &[]).await;
    let http = client();
    let [a, b] = [&cluster.nodes[0], &cluster.nodes[1]];
    let shared = store(&cluster.redis.url());
    for round in 0..ROUNDS {
        let (apikey, oauth) = (3 + round, 20 + round);
        let (sa, sb) = tokio::join!(
            patch(
                &http,
                a,
                json!({"provider_breaker": {"apikey": {"failure_threshold": apikey}}})
            ),
            patch(
                &http,
                b,
                json!({"provider_breaker": {"oauth": {"failure_threshold": oauth}}})
            ),
        );
        assert_eq!((sa, sb), (200, 200), "round {round}");
        let (_, doc) = shared.settings_read().await.unwrap().unwrap();
        let doc: Value = serde_json::from_str(&doc).unwrap();
        assert_eq!(
            thresholds(&doc),
            (Some(apikey), Some(oauth)),
            "round {round}: a concurrent patch was lost: {doc}"
        );
    }
    // Every node ends up with both changes.
    let want = (Some(3 + ROUNDS - 1), Some(20 + ROUNDS - 1));
    for node in [a, b] {
        let url = format!("{}/api/resilience", node.admin_url());
        let converged = eventually(STATE_DEADLINE, || async {
            let body: Value = http
                .get(&url)
                .header("authorization", format!("Bearer {MGMT_KEY}"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap_or(Value::Null);
            thresholds(&body["settings"]) == want
        })
        .await;
        assert!(converged, "{url} did not converge; log:\n{}", node.log());
    }
}
