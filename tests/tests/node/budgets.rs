//! Budgets measure what they say: Switchyard's own waits (queue, semaphores) count against
//! `max_wait_ms` only; the execution budget ends a request with 504
//! `RATE_LIMIT_EXECUTION_TIMEOUT` and changes no state; a committed stream that keeps
//! delivering is never cut by an attempt or combo budget.

use std::time::Duration;

use serde_json::json;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockHandle, MockUpstream};

use crate::support::http::{
    MGMT_KEY, chat, chat_text, connection, cooldown_row, env, http, mock_text, open_auth, post,
    post_stream, provider, send, start_node, wait_cooling, wait_idle,
};

const KEY: &str = "sk-budgets";

async fn mock_with(fault: serde_json::Value) -> MockHandle {
    let mock = MockUpstream::start(MockConfig::default())
        .await
        .expect("mock upstream starts");
    let fault: FaultSpec = serde_json::from_value(fault).expect("fault spec");
    mock.script(fault).expect("script");
    mock
}

/// The connection row shows no cooldown and no recorded failure.
fn assert_untouched(row: &serde_json::Value) {
    assert_eq!(row["cooldownRemainingMs"], 0, "{row}");
    assert_eq!(row["backoffLevel"], 0, "{row}");
    assert!(row["lastErrorAt"].is_null(), "{row}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_combo_stream_longer_than_the_target_timeout_runs_to_its_end() {
    // 8 frames 150 ms apart: the stream lasts about 1.2 s, four times the combo's per-target
    // timeout, and never stops delivering.
    let mock = mock_with(json!({"chunks": 8, "chunk_delay_ms": 150})).await;
    let config = format!(
        "{}{}{}{}",
        open_auth(),
        provider("p", "openai", &mock.base_url(), &["m"], "", ""),
        connection("c1", "p", "KEY_P", ""),
        "\n[[combos]]\nname = \"combo\"\nstrategy = \"priority\"\n\
         targets = [{ target = \"p/m\" }]\n[combos.config]\ntimeout_ms = 300\n\
         \n[resilience.request_queue]\nauto_enable_apikey_providers = false\n",
    );
    let node = start_node(config, env(&[("KEY_P", KEY)])).await;
    let reply = post_stream(
        &http(),
        &node.client_url(),
        "/v1/chat/completions",
        &chat("combo", true),
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.everything());
    assert!(
        !reply.raw.contains("attempt_deadline_exceeded"),
        "{}",
        reply.raw
    );
    assert_eq!(chat_text(&reply.events()), mock_text(8), "{}", reply.raw);
    assert!(reply.raw.contains("[DONE]"), "{}", reply.raw);
    wait_idle(&node).await;
    assert_untouched(&cooldown_row(&node, "c1").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_in_the_queue_is_not_charged_to_the_attempt() {
    // One execution slot: the second request waits about 1 s in the queue, then needs 1 s
    // upstream. Measured from before the queue, it would overrun the 1.5 s attempt ceiling.
    let mock = mock_with(json!({"latency_before_headers_ms": 1000})).await;
    let config = format!(
        "{}{}{}{}",
        open_auth(),
        provider(
            "p",
            "openai",
            &mock.base_url(),
            &["m"],
            "",
            "attempt_deadline_ms = 1500"
        ),
        connection("c1", "p", "KEY_P", ""),
        "\n[resilience.request_queue]\nauto_enable_apikey_providers = true\n\
         requests_per_minute = 1000\nmin_time_between_requests_ms = 0\n\
         concurrent_requests = 1\nmax_wait_ms = 20000\n",
    );
    let node = start_node(config, env(&[("KEY_P", KEY)])).await;
    let c = http();
    let base = node.client_url();
    let body = chat("p/m", false);
    let (a, b) = tokio::join!(
        post(&c, &base, "/v1/chat/completions", &body),
        post(&c, &base, "/v1/chat/completions", &body),
    );
    assert_eq!(a.status, 200, "{a:#?}\n{}", node.log());
    assert_eq!(b.status, 200, "{b:#?}\n{}", node.log());
    wait_idle(&node).await;
    assert_untouched(&cooldown_row(&node, "c1").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_execution_budget_answers_504_and_cools_nothing() {
    let mock = mock_with(json!({"latency_before_headers_ms": 4000, "times": 1})).await;
    let config = format!(
        "{}{}{}{}",
        open_auth(),
        provider(
            "p",
            "openai",
            &mock.base_url(),
            &["m"],
            "",
            "headers_ms = 300"
        ),
        connection("c1", "p", "KEY_P", ""),
        "\n[resilience.request_queue]\nauto_enable_apikey_providers = true\n\
         requests_per_minute = 1000\nmin_time_between_requests_ms = 0\n\
         execution_max_wait_ms = 300\n",
    );
    let node = start_node(config, env(&[("KEY_P", KEY)])).await;
    let c = http();
    let base = node.client_url();
    let reply = post(&c, &base, "/v1/chat/completions", &chat("p/m", false)).await;
    reply.assert_error(504, "server_error", "RATE_LIMIT_EXECUTION_TIMEOUT");
    wait_idle(&node).await;
    assert_untouched(&cooldown_row(&node, "c1").await);
    // Nothing was cooled or opened: the next request is dispatched at once and answers.
    let next = post(&c, &base, "/v1/chat/completions", &chat("p/m", false)).await;
    assert_eq!(next.status, 200, "{next:#?}\n{}", node.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_numbers_sent_by_patch_apply_without_a_restart() {
    let mock = mock_with(json!({"latency_before_headers_ms": 800})).await;
    let config = format!(
        "{}{}{}{}",
        open_auth(),
        provider("p", "openai", &mock.base_url(), &["m"], "", ""),
        connection("c1", "p", "KEY_P", ""),
        "\n[resilience.request_queue]\nauto_enable_apikey_providers = true\n\
         requests_per_minute = 1000\nmin_time_between_requests_ms = 0\n\
         concurrent_requests = 1\nmax_wait_ms = 100\n",
    );
    let node = start_node(config, env(&[("KEY_P", KEY)])).await;
    let c = http();
    let base = node.client_url();
    let body = chat("p/m", false);
    // One execution slot and a 100 ms wait budget: one of two simultaneous requests is refused.
    let (a, b) = tokio::join!(
        post(&c, &base, "/v1/chat/completions", &body),
        post(&c, &base, "/v1/chat/completions", &body),
    );
    let mut statuses = [a.status, b.status];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 429], "{a:#?}\n{b:#?}");
    wait_idle(&node).await;

    let patched = send(
        c.patch(format!("{}/api/resilience", node.admin_url()))
            .bearer_auth(MGMT_KEY)
            .json(&json!({"request_queue": {"concurrent_requests": 2}})),
    )
    .await;
    assert_eq!(patched.status, 200, "{patched:#?}");
    assert_eq!(patched.json()["restartRequired"], json!([]));
    let (a, b) = tokio::join!(
        post(&c, &base, "/v1/chat/completions", &body),
        post(&c, &base, "/v1/chat/completions", &body),
    );
    assert_eq!((a.status, b.status), (200, 200), "{a:#?}\n{b:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enabled_stall_cooldown_cools_the_connection_of_a_stalled_stream() {
    // 20 words, one every 250 ms (~20 B/s), under a 1000 B/s throughput floor: the watchdog
    // ends the stream as a stall.
    let mock = mock_with(json!({"chunks": 20, "chunk_delay_ms": 250, "times": 1})).await;
    let config = format!(
        "{}{}{}{}",
        open_auth(),
        provider(
            "p",
            "openai",
            &mock.base_url(),
            &["m"],
            "",
            "first_content_ms = 2000\nidle_ms = 3000"
        ),
        connection("c1", "p", "KEY_P", ""),
        "\n[resilience.request_queue]\nauto_enable_apikey_providers = false\n\
         \n[resilience.stream.throughput_watchdog]\nenabled = true\nwarmup_ms = 0\n\
         window_ms = 1000\nmin_useful_bytes_per_second = 1000\nmin_useful_bytes = 1\n\
         \n[resilience.stream_stall_cooldown]\nenabled = true\n",
    );
    let node = start_node(config, env(&[("KEY_P", KEY)])).await;
    let reply = post_stream(
        &http(),
        &node.client_url(),
        "/v1/chat/completions",
        &chat("p/m", true),
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.everything());
    assert!(reply.raw.contains("error"), "{}", reply.raw);
    wait_cooling(&node, "c1").await;
}
