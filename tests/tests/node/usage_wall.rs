//! The Claude OAuth usage wall through the real node: the low-priority lane
//! (`low_priority_mode`) and the session-limit reset (`auto_limit_reset`).
//!
//! The mock plays Anthropic from the wire contract of Claude Code 2.1.263, as the OmniRoute
//! resilience guide records it under "Claude OAuth usage wall": a wall 429 with
//! `anthropic-ratelimit-unified-status: rejected`, `…-unified-reset` and
//! `…-slow-offer: treatment`; requests with `anthropic-usage-limit: slow` answered with
//! `…-slow-status` (`active`, `slot_busy` with `…-slow-retry-after`, `weekly_limit`); and the
//! reset's `GET /api/oauth/usage?at_wall=1&skip_spend=1` (a `juniper_tide` block) and
//! `POST /api/organizations/{org}/reset_rate_limits` (`{"program":"juniper_tide"}`).
//!
//! Every setup has two connections of one Claude provider: `ca` (the walled account, with the
//! opt-ins under test) preferred, `cb` behind it. A wall the lane takes over never reaches
//! `cb`, and `ca` stays uncooled; a wall that takes the normal path cools `ca` and `cb` serves.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use switchyard_tests::mock_upstream::{FaultSpec, SlowAnswer, WallScript};

use crate::error_semantics::{MGMT_KEY, Setup, prelude, provider_of, setup};
use crate::support::http::*;
use crate::support::{STATE_DEADLINE, eventually};

const KEY_A: &str = "sk-ant-oat01-usage-wall-a";
const KEY_B: &str = "sk-ant-oat01-usage-wall-b";
const ORG: &str = "5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b";
const MODEL: &str = "claude/claude-x";

const LANE: &str = "low_priority_mode = true";
const RESET: &str =
    "auto_limit_reset = true\norganization_uuid = \"5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b\"";
const BOTH: &str = "low_priority_mode = true\nauto_limit_reset = true\n\
                    organization_uuid = \"5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b\"";

fn epoch_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `ca` with `opts`, `cb` plain behind it; `timeouts` for the provider (may be empty).
async fn claude(opts: &str, timeouts: &str) -> Setup {
    let mut config =
        prelude() + &provider_of("oauth", "claude", "anthropic", "{URL}", &["claude-x"]);
    if !timeouts.is_empty() {
        config += &format!("[providers.timeouts]\n{timeouts}\n");
    }
    config += &connection("ca", "claude", "UP_A", opts);
    config += &connection("cb", "claude", "UP_B", "priority = 5");
    setup(config, &[("UP_A", KEY_A), ("UP_B", KEY_B)]).await
}

/// A wall on `ca`'s account resetting in two hours; returns the reset (epoch seconds).
fn wall(s: &Setup, edit: impl FnOnce(&mut WallScript)) -> u64 {
    let reset_at = epoch_s() + 7_200;
    let mut script = WallScript::new(reset_at);
    script.api_key = Some(KEY_A.to_owned());
    edit(&mut script);
    s.mock.usage_wall(script);
    reset_at
}

fn hits(s: &Setup, key: &str) -> u64 {
    s.mock.stats().by_key.get(key).copied().unwrap_or(0)
}

async fn ask(s: &Setup) -> Reply {
    s.post("/v1/messages", &messages(MODEL, false)).await
}

/// `ca`'s row of `GET /api/resilience/usage-wall`.
async fn wall_view(s: &Setup) -> Value {
    let v = s.admin("/api/resilience/usage-wall").await;
    v["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|i| i["connectionId"] == "ca")
        .cloned()
        .unwrap_or_else(|| panic!("no usage-wall row for ca: {v}"))
}

/// The value of `switchyard_usage_wall_events_total{connection="ca",event=…}`.
async fn events(s: &Setup, event: &str) -> u64 {
    let r = send(s.http.get(format!("{}/metrics", s.node.admin_url()))).await;
    let line = format!("switchyard_usage_wall_events_total{{connection=\"ca\",event=\"{event}\"}}");
    r.everything()
        .lines()
        .find(|l| l.starts_with(&line))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Waits until `ca`'s actor has cooled it (the normal cooldown path).
async fn cooled(s: &Setup) {
    let row = eventually(STATE_DEADLINE, || async {
        let row = s.row("ca").await;
        (row["cooldownRemainingMs"].as_u64().unwrap_or(0) > 0).then_some(row)
    })
    .await;
    assert!(row.is_some(), "ca was not cooled: {}", s.row("ca").await);
}

/// Clears `ca`'s cooldown through the admin API.
async fn clear_cooldown(s: &Setup) {
    let r = send(
        s.http
            .post(format!("{}/api/resilience/cooldowns", s.node.admin_url()))
            .bearer_auth(MGMT_KEY)
            .json(&json!({"connectionIds": ["ca"]})),
    )
    .await;
    assert_eq!(r.status, 200, "{r:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wall_429_is_retried_on_the_same_connection_in_the_low_priority_lane() {
    let s = claude(LANE, "").await;
    let reset_at = wall(&s, |_| {});
    let first = ask(&s).await;
    assert_eq!(first.status, 200, "{first:#?}");
    let seen = s.mock.usage_wall_seen();
    assert_eq!(
        seen.requests,
        vec![false, true],
        "the wall at full speed, then the same account with the slow header"
    );
    assert_eq!(hits(&s, KEY_B), 0, "the connection was not rotated away");
    s.assert_untouched("ca", "claude", "the intercepted wall 429")
        .await;

    // The lane is on the admin view until the announced reset + 60 s.
    let row = wall_view(&s).await;
    assert_eq!(row["lane"]["resetAt"], json!(reset_at * 1_000), "{row}");
    assert_eq!(
        row["lane"]["until"],
        json!(reset_at * 1_000 + 60_000),
        "{row}"
    );
    assert_eq!(row["scope"], "node", "{row}");
    assert_eq!(events(&s, "lane_accepted").await, 1);

    // Later requests carry the header from the start: no second wall.
    for _ in 0..2 {
        let next = ask(&s).await;
        assert_eq!(next.status, 200, "{next:#?}");
    }
    let seen = s.mock.usage_wall_seen();
    assert_eq!(seen.requests, vec![false, true, true, true]);
    assert_eq!(seen.walled, 1);
    assert_eq!(events(&s, "lane_accepted").await, 1, "accepted once");
    // A stream in the lane is served as well.
    let stream = post_stream(
        &s.http,
        &s.node.client_url(),
        "/v1/messages",
        &messages(MODEL, true),
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(stream.status, 200);
    assert_eq!(s.mock.usage_wall_seen().requests.last(), Some(&true));
    assert_eq!(hits(&s, KEY_B), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_busy_answer_waits_its_retry_after_then_succeeds() {
    let s = claude(LANE, "").await;
    wall(&s, |w| w.slow_answers.push_back(SlowAnswer::slot_busy(5)));
    let t = Instant::now();
    let r = ask(&s).await;
    assert_eq!(r.status, 200, "{r:#?}");
    // A lower bound only: 5 s less the 30 % jitter.
    assert!(
        t.elapsed() >= Duration::from_millis(3_400),
        "did not wait: {:?}",
        t.elapsed()
    );
    assert_eq!(
        s.mock.usage_wall_seen().requests,
        vec![false, true, true],
        "wall, slot busy, served"
    );
    assert_eq!(events(&s, "slot_wait").await, 1);
    assert_eq!(hits(&s, KEY_B), 0);
    s.assert_untouched("ca", "claude", "slot_busy in the lane")
        .await;
    assert!(wall_view(&s).await["lane"].is_object());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_past_the_start_budget_ends_the_lane_and_blocks_reacceptance() {
    // 8 s to the upstream's headers, less the 5 s margin: 3 s, below any 5 s ± 30 % wait.
    let s = claude(LANE, "headers_ms = 8000").await;
    wall(&s, |w| w.slow_answers.push_back(SlowAnswer::slot_busy(5)));
    let r = ask(&s).await;
    assert_eq!(r.status, 200, "served by cb: {r:#?}");
    assert_eq!(hits(&s, KEY_B), 1, "the slot_busy 429 took the normal path");
    cooled(&s).await;
    let row = wall_view(&s).await;
    assert!(row["lane"].is_null(), "{row}");
    assert_eq!(row["lastEnd"]["reason"], "max_wait", "{row}");
    let blocked = row["reacceptBlockedUntil"]
        .as_u64()
        .expect("a re-acceptance block");
    let now_ms = epoch_s() * 1_000;
    assert!(
        blocked > now_ms + 9 * 60_000 && blocked <= now_ms + 11 * 60_000,
        "about 10 minutes: {row}"
    );
    assert_eq!(events(&s, "lane_ended_max_wait").await, 1);

    // Inside the block the next wall is not taken over: it cools `ca` again.
    clear_cooldown(&s).await;
    let again = ask(&s).await;
    assert_eq!(again.status, 200, "{again:#?}");
    assert_eq!(hits(&s, KEY_B), 2);
    cooled(&s).await;
    assert_eq!(events(&s, "lane_blocked").await, 1);
    let seen = s.mock.usage_wall_seen();
    assert_eq!(seen.requests, vec![false, true, false], "no slow retry");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weekly_limit_ends_the_lane_and_takes_the_normal_cooldown() {
    let s = claude(LANE, "").await;
    wall(&s, |w| {
        w.slow_answers
            .push_back(SlowAnswer::new(429, "weekly_limit"));
    });
    let r = ask(&s).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(hits(&s, KEY_B), 1);
    cooled(&s).await;
    let row = wall_view(&s).await;
    assert!(row["lane"].is_null(), "{row}");
    assert_eq!(row["lastEnd"]["reason"], "weekly_limit", "{row}");
    assert!(row["reacceptBlockedUntil"].is_null(), "{row}");
    assert_eq!(events(&s, "lane_ended_weekly_limit").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spike_429_without_unified_headers_takes_the_normal_cooldown() {
    let s = claude(BOTH, "").await;
    s.mock
        .script(FaultSpec::status(429).for_key(KEY_A).times(1))
        .unwrap();
    let r = ask(&s).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(hits(&s, KEY_B), 1);
    cooled(&s).await;
    let seen = s.mock.usage_wall_seen();
    assert_eq!(seen.usage_calls, 0, "no reset tried");
    assert!(seen.requests.is_empty());
    let row = wall_view(&s).await;
    assert!(row["lane"].is_null(), "{row}");
    assert!(row["reset"]["last"].is_null(), "{row}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_limit_reset_claims_the_reset_and_retries_at_full_speed() {
    let s = claude(BOTH, "").await;
    wall(&s, |_| {});
    let r = ask(&s).await;
    assert_eq!(r.status, 200, "{r:#?}");
    let seen = s.mock.usage_wall_seen();
    assert_eq!(seen.usage_calls, 1);
    assert_eq!(
        seen.last_usage_query.as_deref(),
        Some("at_wall=1&skip_spend=1")
    );
    assert_eq!(seen.claims, 1);
    assert_eq!(seen.last_claim_org.as_deref(), Some(ORG));
    let body: Value = serde_json::from_str(seen.last_claim_body.as_deref().unwrap()).unwrap();
    assert_eq!(body, json!({"program": "juniper_tide"}));
    assert_eq!(seen.last_token.as_deref(), Some(KEY_A));
    assert_eq!(
        seen.requests,
        vec![false, false],
        "retried at full speed, without the slow header"
    );
    assert_eq!((seen.after_lift, seen.slow_after_lift), (1, 0));
    assert_eq!(hits(&s, KEY_B), 0);
    s.assert_untouched("ca", "claude", "a reset wall").await;
    let row = wall_view(&s).await;
    assert!(row["lane"].is_null(), "no lane was needed: {row}");
    assert_eq!(row["reset"]["last"]["outcome"], "reset_done", "{row}");
    assert_eq!(row["reset"]["held"], "next_available", "{row}");
    assert_eq!(events(&s, "reset_done").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_already_used_reset_is_remembered_and_the_lane_takes_the_wall() {
    let s = claude(BOTH, "").await;
    let next = epoch_s() + 3 * 86_400;
    wall(&s, |w| {
        w.claim_result = "already_used".to_owned();
        w.next_available_at = Some(next);
    });
    let r = ask(&s).await;
    assert_eq!(r.status, 200, "{r:#?}");
    let seen = s.mock.usage_wall_seen();
    assert_eq!((seen.usage_calls, seen.claims), (1, 1));
    assert_eq!(seen.requests, vec![false, true], "then the lane");
    let row = wall_view(&s).await;
    assert_eq!(row["reset"]["notBefore"], json!(next * 1_000), "{row}");
    assert_eq!(
        row["reset"]["last"]["outcome"], "reset_unavailable",
        "{row}"
    );
    assert!(row["lane"].is_object(), "{row}");
    s.assert_untouched("ca", "claude", "already_used, then the lane")
        .await;
    assert_eq!(events(&s, "reset_unavailable").await, 1);
    assert_eq!(events(&s, "lane_accepted").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_reset_backs_off_and_without_the_lane_the_wall_cools() {
    let s = claude(RESET, "").await;
    wall(&s, |w| w.usage_status = 500);
    let r = ask(&s).await;
    assert_eq!(r.status, 200, "served by cb: {r:#?}");
    assert_eq!(hits(&s, KEY_B), 1);
    cooled(&s).await;
    let seen = s.mock.usage_wall_seen();
    assert_eq!((seen.usage_calls, seen.claims), (1, 0));
    let row = wall_view(&s).await;
    assert_eq!(row["reset"]["held"], "backoff", "{row}");
    let not_before = row["reset"]["notBefore"].as_u64().expect("a back-off");
    let now_ms = epoch_s() * 1_000;
    assert!(
        not_before > now_ms + 14 * 60_000 && not_before <= now_ms + 16 * 60_000,
        "15 minutes: {row}"
    );
    assert_eq!(events(&s, "reset_error").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_options_off_a_wall_429_takes_the_normal_path() {
    let s = claude("", "").await;
    wall(&s, |_| {});
    let r = ask(&s).await;
    assert_eq!(r.status, 200, "served by cb: {r:#?}");
    assert_eq!(hits(&s, KEY_B), 1);
    cooled(&s).await;
    let seen = s.mock.usage_wall_seen();
    assert_eq!(seen.requests, vec![false], "no slow retry");
    assert_eq!(seen.usage_calls, 0);
    let v = s.admin("/api/resilience/usage-wall").await;
    assert_eq!(v["items"], json!([]), "no connection opted in: {v}");
}
