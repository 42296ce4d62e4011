//! Learned state heals by resync, and an ended lane is withdrawn: the Claude usage-wall lane
//! and the tool limits learned from "too many tools" answers reach a node that missed their
//! event (paused, its subscriber killed in Redis) through its next resync, raising and
//! lowering; and a lane one node ends before its reset ends on the others. Two real nodes, one
//! real `redis-server`, one mock upstream (setup from `usage_wall_shared`).

use std::time::Duration;

use switchyard_tests::cluster::TestCluster;
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{
    FaultSpec, MockConfig, MockUpstream, SlowAnswer, WallScript,
};

use crate::heal::{resyncs, signal};
use crate::support::{STATE_DEADLINE, eventually};
use crate::sync::store;
use crate::usage_wall_shared::{
    KEY_A, KEY_B, MODEL, admin, ask, epoch_ms, hits, http, lane_on, redis, start, wall_row,
    with_tools,
};

/// The node's periodic resync interval (`cluster_sync::sync::RECONCILE_INTERVAL`).
const RESYNC_INTERVAL: Duration = Duration::from_secs(5);
/// What a resync may take beyond its interval on a loaded test machine.
const RESYNC_SLACK: Duration = Duration::from_secs(2);

const TOOL_KEY: &str = "sy-test:tool_limit:{claude}:claude-x";
const WALL_KEY: &str = "sy-test:usage_wall:{ca}";

/// Pauses `node` and kills every subscriber connection in Redis, so the events published
/// before it resumes never reach it.
async fn cut_off(cluster: &TestCluster, node: &NodeProcess) {
    signal(node, "-STOP");
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
}

async fn hget(
    con: &mut redis::aio::MultiplexedConnection,
    key: &str,
    field: &str,
) -> Option<String> {
    redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query_async(con)
        .await
        .unwrap()
}

/// Waits until `key`'s `field` in Redis satisfies `want` (the writes are spawned tasks);
/// returns what it read last.
async fn stored(
    con: &redis::aio::MultiplexedConnection,
    key: &str,
    field: &str,
    want: impl Fn(Option<&str>) -> bool,
) -> Option<String> {
    let mut last = None;
    for _ in 0..200 {
        last = hget(&mut con.clone(), key, field).await;
        if want(last.as_deref()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    last
}

/// The limit `node` lists for `claude-x`, if any.
async fn listed_limit(http: &reqwest::Client, node: &NodeProcess) -> Option<u64> {
    let v = admin(http, node, "/api/resilience/tool-limits").await;
    v["items"]
        .as_array()
        .and_then(|items| items.first())
        .and_then(|i| i["limit"].as_u64())
}

/// "Too many tools", shrunk to a limit of 2 (OpenAI's wording).
fn too_many_tools() -> FaultSpec {
    FaultSpec {
        error_message: Some(
            "Invalid 'tools': array too long. Expected an array with maximum length 2, \
             but got an array with length 3 instead."
                .into(),
        ),
        ..FaultSpec::status(400).times(1)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_limit_learned_while_a_peer_missed_the_event_reaches_it_by_resync() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cluster = start(&mock, 60_000).await;
    let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
    let http = http();
    let full_before = resyncs(b, "full").await;
    assert!(full_before >= 1, "b's first resync is a full scan");

    cut_off(&cluster, b).await;
    mock.script(too_many_tools()).unwrap();
    let (status, v) = ask(&http, a, &with_tools(3)).await;
    let con = redis(&cluster).await;
    let stored = stored(&con, TOOL_KEY, "limit", |v| v == Some("2")).await;
    signal(b, "-CONT");
    assert_ne!(status, 200, "{v}");
    assert_eq!(stored.as_deref(), Some("2"), "a's limit is not in Redis");

    // Within one resync interval b holds it, before any request of its own.
    let learned = eventually(RESYNC_INTERVAL + RESYNC_SLACK, || async {
        listed_limit(&http, b).await == Some(2)
    })
    .await;
    assert!(learned, "b never learned the limit; log of b:\n{}", b.log());
    // b skips the target: the request is answered without the provider.
    let before = hits(&mock, KEY_A) + hits(&mock, KEY_B);
    let (status, v) = ask(&http, b, &with_tools(3)).await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"]["code"], "tool_limit_exceeded", "{v}");
    assert_eq!(hits(&mock, KEY_A) + hits(&mock, KEY_B), before);
    // Through the change log: b had an offset, so it read no record it did not need.
    assert_eq!(
        resyncs(b, "full").await,
        full_before,
        "b fell back to a full scan"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_limit_dropped_while_a_peer_missed_the_event_ends_there_by_resync() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cluster = start(&mock, 60_000).await;
    let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
    let http = http();

    // A slow success with 3 tools is under way on a when another 3-tool request teaches a
    // limit of 2; the slow one then succeeds above the limit, which drops it (on a, in Redis).
    let slow = FaultSpec {
        latency_before_headers_ms: Some(3_000),
        ..FaultSpec::new().times(1)
    };
    mock.script(slow).unwrap();
    mock.script(too_many_tools()).unwrap();
    let url = format!("{}/v1/messages", a.client_url());
    let (client, body) = (http.clone(), with_tools(3));
    let slow_request = tokio::spawn(async move {
        let resp = client.post(url).json(&body).send().await.unwrap();
        resp.status().as_u16()
    });
    let dispatched = eventually(STATE_DEADLINE, || async {
        hits(&mock, KEY_A) + hits(&mock, KEY_B) >= 1
    })
    .await;
    assert!(dispatched, "the slow request never reached the provider");
    let (status, v) = ask(&http, a, &with_tools(3)).await;
    assert_ne!(status, 200, "{v}");
    // b learns the limit from the event, as usual.
    let learned = eventually(STATE_DEADLINE, || async {
        listed_limit(&http, b).await == Some(2)
    })
    .await;
    assert!(learned, "b never learned the limit; log of b:\n{}", b.log());

    // b misses the drop.
    cut_off(&cluster, b).await;
    let slow_status = slow_request.await.unwrap();
    let mut con = redis(&cluster).await;
    let dropped = stored(&con, TOOL_KEY, "dropped", |v| v == Some("3")).await;
    let limit_left = hget(&mut con, TOOL_KEY, "limit").await;
    signal(b, "-CONT");
    assert_eq!(
        slow_status, 200,
        "the slow request above the limit did not succeed"
    );
    assert_eq!(
        dropped.as_deref(),
        Some("3"),
        "the drop did not reach Redis"
    );
    assert_eq!(limit_left, None);

    // Within one resync interval b has dropped it too, and sends such a request again.
    let healed = eventually(RESYNC_INTERVAL + RESYNC_SLACK, || async {
        listed_limit(&http, b).await.is_none()
    })
    .await;
    assert!(
        healed,
        "b still holds the dropped limit; log of b:\n{}",
        b.log()
    );
    let before = hits(&mock, KEY_A) + hits(&mock, KEY_B);
    let (status, v) = ask(&http, b, &with_tools(3)).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(hits(&mock, KEY_A) + hits(&mock, KEY_B), before + 1);
}

/// A wall on `ca` resetting in two hours; the lane answers `answers` in order, then `active`.
fn wall(answers: Vec<SlowAnswer>) -> (u64, WallScript) {
    let reset_s = epoch_ms() / 1_000 + 7_200;
    let mut script = WallScript::new(reset_s);
    script.api_key = Some(KEY_A.to_owned());
    script.slow_answers = answers.into();
    (reset_s, script)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_accepted_while_a_peer_missed_the_event_reaches_it_by_resync() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cluster = start(&mock, 60_000).await;
    let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
    let http = http();
    let (reset_s, script) = wall(Vec::new());
    mock.usage_wall(script);

    cut_off(&cluster, b).await;
    let (status, v) = ask(&http, a, &messages()).await;
    let con = redis(&cluster).await;
    let stored = stored(&con, WALL_KEY, "lane", |l| l.is_some_and(|l| l != "0")).await;
    signal(b, "-CONT");
    assert_eq!(status, 200, "{v}");
    assert_eq!(mock.usage_wall_seen().requests, vec![false, true]);
    assert!(stored.is_some_and(|l| l != "0"), "the lane is not in Redis");

    // Within one resync interval b holds the lane, before any request of its own.
    let row = eventually(RESYNC_INTERVAL + RESYNC_SLACK, || async {
        let row = wall_row(&http, b).await;
        (!row["lane"].is_null()).then_some(row)
    })
    .await;
    let row = row.unwrap_or_else(|| panic!("b never learned the lane; log of b:\n{}", b.log()));
    let until = row["lane"]["until"].as_u64().unwrap();
    let want = reset_s * 1_000 + 60_000;
    assert!(until.abs_diff(want) < 5_000, "until {until}, want ~{want}");
    // b's request carries the slow header from its first try: no wall 429 of its own.
    let (status, v) = ask(&http, b, &messages()).await;
    assert_eq!(status, 200, "{v}");
    let seen = mock.usage_wall_seen();
    assert_eq!(seen.requests, vec![false, true, true], "{seen:?}");
    assert_eq!(seen.walled, 1);
}

fn messages() -> serde_json::Value {
    crate::support::http::messages(MODEL, false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_ended_while_a_peer_missed_the_event_ends_there_by_resync() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cluster = start(&mock, 60_000).await;
    let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
    let http = http();
    // The lane serves once, then says it is off for this account.
    let (_, script) = wall(vec![SlowAnswer::active(), SlowAnswer::new(200, "off")]);
    mock.usage_wall(script);

    let (status, v) = ask(&http, a, &messages()).await;
    assert_eq!(status, 200, "{v}");
    lane_on(&http, b).await;

    cut_off(&cluster, b).await;
    let (status, v) = ask(&http, a, &messages()).await;
    let mut con = redis(&cluster).await;
    let ended = stored(&con, WALL_KEY, "ended", |e| e == Some("off")).await;
    let lane = hget(&mut con, WALL_KEY, "lane").await;
    signal(b, "-CONT");
    assert_eq!(status, 200, "{v}");
    assert_eq!(mock.usage_wall_seen().requests, vec![false, true, true]);
    assert_eq!(ended.as_deref(), Some("off"), "the end is not in Redis");
    assert_eq!(lane.as_deref(), Some("0"));

    // Within one resync interval b's copy of the lane ends too.
    let row = eventually(RESYNC_INTERVAL + RESYNC_SLACK, || async {
        let row = wall_row(&http, b).await;
        row["lane"].is_null().then_some(row)
    })
    .await;
    let row = row.unwrap_or_else(|| panic!("b still holds the lane; log of b:\n{}", b.log()));
    assert_eq!(row["lastEnd"]["reason"], "off", "{row}");
    // b's next request goes at full speed first.
    ask(&http, b, &messages()).await;
    let seen = mock.usage_wall_seen();
    assert_eq!(seen.requests.get(3), Some(&false), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_ended_early_on_one_node_is_withdrawn_from_the_other() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cluster = start(&mock, 60_000).await;
    let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
    let http = http();
    // The lane serves once, then the account's weekly limit ends it.
    let (_, script) = wall(vec![
        SlowAnswer::active(),
        SlowAnswer::new(429, "weekly_limit"),
    ]);
    mock.usage_wall(script);

    let (status, v) = ask(&http, a, &messages()).await;
    assert_eq!(status, 200, "{v}");
    lane_on(&http, b).await;

    // a's next request meets the weekly limit in the lane: the lane ends there (the answer
    // takes the normal path, and cb serves it).
    let (status, v) = ask(&http, a, &messages()).await;
    assert_eq!(status, 200, "{v}");
    let row = wall_row(&http, a).await;
    assert_eq!(row["lastEnd"]["reason"], "weekly_limit", "{row}");

    // b stops using the lane, without an answer of its own.
    let row = eventually(STATE_DEADLINE, || async {
        let row = wall_row(&http, b).await;
        row["lane"].is_null().then_some(row)
    })
    .await;
    let row = row.unwrap_or_else(|| panic!("b still holds the lane; log of b:\n{}", b.log()));
    assert_eq!(row["lastEnd"]["reason"], "weekly_limit", "{row}");
    let con = redis(&cluster).await;
    let ended = stored(&con, WALL_KEY, "ended", |e| e == Some("weekly_limit")).await;
    assert_eq!(ended.as_deref(), Some("weekly_limit"));
    let seen = mock.usage_wall_seen();
    assert_eq!(seen.requests, vec![false, true, true], "{seen:?}");
}
