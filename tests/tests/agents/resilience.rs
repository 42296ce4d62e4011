//! The agents through the newer resilience features: a Claude Code session of a
//! `context-relay` combo that has to move to another connection, and Codex on a `quota-share`
//! pool (docs/policy.md).
//!
//! Stream recovery (docs/stream-recovery.md) protects Claude Code's streams too: one cut
//! inside the hold is reopened on the next connection before the agent sees a byte of it.
//! Mid-stream continuation, after the commit point, is not exercised: it continues OpenAI
//! Chat Completions client streams only, and neither agent sends one (Claude Code sends
//! Anthropic Messages, Codex 0.171 only the Responses API: it refuses `wire_api = "chat"`).
//!
//! The mock plays the agent model as in `main.rs`; the node's access log and metrics show the
//! routing decision, and the mock's recorded bodies show what each connection received.

use std::time::Duration;

use serde_json::{Value, json};
use switchyard_tests::cluster::metric;
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockHandle, Route};

use crate::support::http::*;
use crate::{
    AgentDirs, CLAUDE_MODEL, CLAUDE_PROMPT, FINAL_TEXT, access_lines, claude_command,
    codex_command, run_agent, run_agent_within, scripted_mock, skip,
};

/// The model the providers serve; the agents ask for a combo.
const UPSTREAM_MODEL: &str = "agent-upstream-model";
const SUMMARY: &str = "SWITCHYARD-RELAY-SUMMARY-OF-THE-FIRST-RUN";

/// The scripted agent model, remembering whole bodies (Claude Code's are tens of KB).
async fn recording_mock(tool: &str, arguments: Value, serve_responses: bool) -> MockHandle {
    let base = MockConfig {
        body_history: 16,
        body_capture_limit: 1024 * 1024,
        ..MockConfig::default()
    };
    scripted_mock(tool, arguments, serve_responses, base).await
}

/// The bodies `key` sent, oldest first.
fn bodies_for(mock: &MockHandle, key: &str) -> Vec<String> {
    mock.stats()
        .recent_bodies
        .into_iter()
        .filter(|b| b.api_key == key)
        .map(|b| b.body)
        .collect()
}

/// Waits until the access log has one line per request the mock served on each of `conns`
/// (`(connection id, upstream key)`); returns the lines and the whole log.
fn settled_lines(
    node: &NodeProcess,
    mock: &MockHandle,
    conns: &[(&str, &str)],
) -> (Vec<Value>, String) {
    let stats = mock.stats();
    let want: Vec<(&str, usize)> = conns
        .iter()
        .map(|(c, k)| {
            let n = usize::try_from(stats.requests_for_key(k)).unwrap();
            (*c, n)
        })
        .collect();
    let log = node.wait_for_log(Duration::from_secs(10), |log| {
        let lines = access_lines(log);
        want.iter()
            .all(|(c, n)| lines.iter().filter(|l| l["connection"] == *c).count() >= *n)
    });
    (access_lines(&log), log)
}

async fn metrics(node: &NodeProcess) -> String {
    send(http().get(format!("{}/metrics", node.admin_url())))
        .await
        .everything()
}

/// An Anthropic Messages answer with `text` (https://docs.anthropic.com/en/api/messages).
fn anthropic_answer(text: &str) -> Vec<u8> {
    json!({
        "id": "msg_relay_summary",
        "type": "message",
        "role": "assistant",
        "model": UPSTREAM_MODEL,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 5}
    })
    .to_string()
    .into_bytes()
}

const HOLD_KEY_1: &str = "sk-agent-hold-1-0000000001";
const HOLD_KEY_2: &str = "sk-agent-hold-2-0000000002";

/// Claude Code on an `anthropic` provider with two connections (`p-k1` first) and stream
/// recovery on: the first stream `p-k1` serves is cut after two content frames, inside the
/// hold; the node drops it and reopens the request on `p-k2`, and the agent's run goes on as
/// if nothing happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_stream_cut_inside_the_hold_is_reopened() {
    if skip("claude_code_stream_cut_inside_the_hold_is_reopened") {
        return;
    }
    let mock = recording_mock(
        "Bash",
        json!({"command": "echo hi", "description": "Print hi"}),
        true,
    )
    .await;
    let config = format!(
        "{}{}{}{}\n[resilience.stream_recovery]\nenabled = true\nhold_ms = 3000\n",
        open_auth_no_queue(),
        provider("p", "anthropic", &mock.base_url(), &[CLAUDE_MODEL], "", ""),
        connection("p-k1", "p", "HOLD_KEY_1", "priority = 1"),
        connection("p-k2", "p", "HOLD_KEY_2", "priority = 2"),
    );
    let node = start_node(
        config,
        env(&[("HOLD_KEY_1", HOLD_KEY_1), ("HOLD_KEY_2", HOLD_KEY_2)]),
    )
    .await;
    mock.script(
        FaultSpec {
            eof_after_chunks: Some(2),
            ..FaultSpec::new().for_key(HOLD_KEY_1).times(1)
        }
        .on_route(Route::Messages),
    )
    .unwrap();
    let dirs = AgentDirs::new();
    let cmd = claude_command(&node, CLAUDE_MODEL, &dirs, CLAUDE_PROMPT);
    let (ok, output) = run_agent(cmd, "claude -p (stream recovery)").await;
    // The cut stream has no line of its own: its request's line is the reopened one.
    let (lines, log) = settled_lines(&node, &mock, &[("p-k2", HOLD_KEY_2)]);
    let context = format!("--- claude output ---\n{output}\n--- node log ---\n{log}");
    assert!(
        ok && output.contains(FINAL_TEXT),
        "claude failed\n{context}"
    );
    assert!(lines.len() >= 2, "both turns\n{context}");
    let seen = mock.agent_seen();
    assert!(
        seen.tool_calls_sent >= 1 && seen.tool_results_seen >= 1,
        "{seen:?}\n{context}"
    );
    for line in &lines {
        assert_eq!(line["status"], 200, "{line}\n{context}");
    }
    let reopened: Vec<&Value> = lines.iter().filter(|l| l["recovered"] == 1).collect();
    assert_eq!(reopened.len(), 1, "one stream was reopened\n{context}");
    assert_eq!(reopened[0]["connection"], "p-k2", "{context}");
    assert_eq!(reopened[0]["attempts"], 2, "{context}");
    assert!(
        lines
            .iter()
            .all(|l| l["recovered"] == 0 || l["recovered"] == 1),
        "{context}"
    );
    let text = metrics(&node).await;
    assert_eq!(
        metric(
            &text,
            "switchyard_stream_recoveries_total{kind=\"reopen\",outcome=\"reopened\"}"
        ),
        Some(1.0),
        "{context}"
    );
}

const RELAY_KEY_A: &str = "sk-agent-relay-a-000000001";
const RELAY_KEY_B: &str = "sk-agent-relay-b-000000002";
const RELAY_KEY_S: &str = "sk-agent-relay-s-000000003";
const RELAY_COMBO: &str = "agent-relay";
const RELAY_SESSION: &str = "agent-relay-session-1";
/// Each of the two runs: both together stay within the test runner's 5 min limit.
const RELAY_RUN_LIMIT: Duration = Duration::from_secs(120);

/// Claude Code runs twice in one session of a `context-relay` combo (`pa` then `pb`, both
/// `anthropic`): the first run settles on `ca`; the second (`--continue`, so it carries the
/// first run's conversation) finds `ca` failing, moves to `cb`, and `cb` gets the summariser's
/// summary of the first run in place of its turns. Both runs must finish the tool round trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_session_moves_with_a_summary_on_a_context_relay_combo() {
    if skip("claude_code_session_moves_with_a_summary_on_a_context_relay_combo") {
        return;
    }
    let mock = recording_mock(
        "Bash",
        json!({"command": "echo hi", "description": "Print hi"}),
        true,
    )
    .await;
    let url = mock.base_url();
    let mut config = format!(
        "{}\n[resilience.wait_for_cooldown]\nenabled = false\n",
        open_auth_no_queue()
    );
    for p in ["pa", "pb", "ps"] {
        config.push_str(&provider(p, "anthropic", &url, &[UPSTREAM_MODEL], "", ""));
    }
    for (c, p, env_name) in [
        ("ca", "pa", "RELAY_KEY_A"),
        ("cb", "pb", "RELAY_KEY_B"),
        ("cs", "ps", "RELAY_KEY_S"),
    ] {
        config.push_str(&connection(c, p, env_name, "disable_cooling = true"));
    }
    // Claude Code's second run opens with 5 messages (the first run's 4 and the new prompt):
    // the last one is kept, the 4 before it are summarised.
    config.push_str(&format!(
        "\n[[combos]]\nname = \"{RELAY_COMBO}\"\nstrategy = \"context-relay\"\n\
         targets = [{{ target = \"pa/{UPSTREAM_MODEL}\" }}, {{ target = \"pb/{UPSTREAM_MODEL}\" }}]\n\
         [combos.config]\nmax_retries = 0\n\
         [combos.context_relay]\nsummariser = \"ps/{UPSTREAM_MODEL}\"\n\
         min_messages = 2\nkeep_last = 1\nsummary_timeout_ms = 20000\n"
    ));
    let node = start_node(
        config,
        env(&[
            ("RELAY_KEY_A", RELAY_KEY_A),
            ("RELAY_KEY_B", RELAY_KEY_B),
            ("RELAY_KEY_S", RELAY_KEY_S),
        ]),
    )
    .await;
    let dirs = AgentDirs::new();
    let claude = |prompt: &str, resume: bool| {
        let mut cmd = claude_command(&node, RELAY_COMBO, &dirs, prompt);
        // The session key the combo keeps its home by.
        cmd.env(
            "ANTHROPIC_CUSTOM_HEADERS",
            format!("x-session-id: {RELAY_SESSION}"),
        );
        if resume {
            cmd.arg("--continue");
        }
        cmd
    };

    // Run 1: the session's home becomes `ca`.
    let (ok, output) = run_agent_within(
        claude(CLAUDE_PROMPT, false),
        "claude -p (relay, 1)",
        RELAY_RUN_LIMIT,
    )
    .await;
    let (lines, log) = settled_lines(&node, &mock, &[("ca", RELAY_KEY_A)]);
    let context = format!("--- run 1 output ---\n{output}\n--- node log ---\n{log}");
    assert!(ok && output.contains(FINAL_TEXT), "run 1 failed\n{context}");
    assert!(lines.len() >= 2, "both turns of run 1\n{context}");
    assert!(
        lines
            .iter()
            .all(|l| l["status"] == 200 && l["connection"] == "ca"),
        "run 1 stays on its first target\n{context}"
    );
    let home_requests = lines.len();

    // Run 2: `ca` fails from now on; the summariser answers with `SUMMARY`.
    mock.script_all([
        FaultSpec::status(500).for_key(RELAY_KEY_A),
        FaultSpec::raw(200, "application/json", anthropic_answer(SUMMARY)).for_key(RELAY_KEY_S),
    ])
    .unwrap();
    let prompt = "Run `echo hi` once more with the Bash tool, then reply.";
    let (ok, output) = run_agent_within(
        claude(prompt, true),
        "claude -p --continue (relay, 2)",
        RELAY_RUN_LIMIT,
    )
    .await;
    // `ca`'s failures have no lines of their own: each request's line is `cb`'s.
    let (lines, log) = settled_lines(&node, &mock, &[("cb", RELAY_KEY_B)]);
    let context = format!("--- run 2 output ---\n{output}\n--- node log ---\n{log}");
    assert!(ok && output.contains(FINAL_TEXT), "run 2 failed\n{context}");
    let moved: Vec<&Value> = lines[home_requests..].iter().collect();
    assert!(!moved.is_empty(), "no line for run 2\n{context}");
    for line in &moved {
        assert_eq!(line["status"], 200, "{line}\n{context}");
        assert_eq!(line["connection"], "cb", "{line}\n{context}");
        assert_eq!(
            line["route_target"],
            format!("pb/{UPSTREAM_MODEL}"),
            "{line}\n{context}"
        );
    }
    assert!(
        moved[0]["attempts"].as_u64().unwrap_or(0) >= 2,
        "the move followed `ca`'s failure: {}\n{context}",
        moved[0]
    );
    let text = metrics(&node).await;
    let relays = |outcome: &str| {
        metric(
            &text,
            &format!("switchyard_context_relays_total{{outcome=\"{outcome}\"}}"),
        )
        .unwrap_or(0.0)
    };
    assert_eq!(relays("summarised"), 1.0, "{context}");
    assert_eq!(relays("failed"), 0.0, "{context}");

    // The summariser was asked once, about the first run's turns.
    let asked = bodies_for(&mock, RELAY_KEY_S);
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].contains(FINAL_TEXT), "{}", asked[0]);
    // `cb` got the summary and the new prompt, not the first run's turns.
    let on_b = bodies_for(&mock, RELAY_KEY_B);
    let first: Value = serde_json::from_str(on_b.first().expect("cb was called")).unwrap();
    assert!(
        first["system"]
            .to_string()
            .contains(&format!("Summary of the earlier conversation: {SUMMARY}")),
        "{}",
        first["system"]
    );
    let messages = first["messages"].to_string();
    assert!(messages.contains("once more"), "{messages}");
    assert!(
        !messages.contains(FINAL_TEXT),
        "the first run's answer was summarised away: {messages}"
    );
    let seen = mock.agent_seen();
    assert!(seen.tool_results_seen >= 2, "{seen:?}");
}

const SHARE_KEY_A: &str = "sk-agent-share-a-00000001";
const SHARE_KEY_B: &str = "sk-agent-share-b-00000002";
const SHARE_COMBO: &str = "agent-share";

/// Codex on a `quota-share` pool of two connections (weights 1 and 1, one request at a time
/// each) of a chat-only provider: deficit round robin serves each member once per round, so
/// the run's two turns go to both accounts, each through its concurrency gate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_shares_a_quota_share_pool() {
    if skip("codex_shares_a_quota_share_pool") {
        return;
    }
    let mock = recording_mock("exec_command", json!({"cmd": "echo hi"}), false).await;
    let mut config = open_auth_no_queue();
    config.push_str(&provider(
        "pool",
        "openai",
        &mock.base_url(),
        &[UPSTREAM_MODEL],
        "",
        "",
    ));
    config.push_str(&connection(
        "qa",
        "pool",
        "SHARE_KEY_A",
        "max_concurrent = 1",
    ));
    config.push_str(&connection(
        "qb",
        "pool",
        "SHARE_KEY_B",
        "max_concurrent = 1",
    ));
    config.push_str(&format!(
        "\n[[combos]]\nname = \"{SHARE_COMBO}\"\nstrategy = \"quota-share\"\ntargets = [\
         {{ target = \"pool/{UPSTREAM_MODEL}\", connection = \"qa\", weight = 1 }}, \
         {{ target = \"pool/{UPSTREAM_MODEL}\", connection = \"qb\", weight = 1 }}]\n"
    ));
    let node = start_node(
        config,
        env(&[("SHARE_KEY_A", SHARE_KEY_A), ("SHARE_KEY_B", SHARE_KEY_B)]),
    )
    .await;
    let dirs = AgentDirs::new();
    let (ok, output) = run_agent(
        codex_command(&node, SHARE_COMBO, &dirs),
        "codex exec (quota-share)",
    )
    .await;
    let (lines, log) = settled_lines(&node, &mock, &[("qa", SHARE_KEY_A), ("qb", SHARE_KEY_B)]);
    let context = format!("--- codex output ---\n{output}\n--- node log ---\n{log}");
    assert!(ok && output.contains(FINAL_TEXT), "codex failed\n{context}");
    let seen = mock.agent_seen();
    assert!(
        seen.tool_calls_sent >= 1 && seen.tool_results_seen >= 1,
        "{seen:?}\n{context}"
    );
    assert!(lines.len() >= 2, "both turns\n{context}");
    for line in &lines {
        assert_eq!(line["status"], 200, "{line}\n{context}");
        assert_eq!(
            line["route_target"],
            format!("pool/{UPSTREAM_MODEL}"),
            "{line}\n{context}"
        );
    }
    let served = |c: &str| lines.iter().filter(|l| l["connection"] == c).count();
    let (on_a, on_b) = (served("qa"), served("qb"));
    assert_eq!(on_a + on_b, lines.len(), "{context}");
    assert!(
        on_a >= 1 && on_b >= 1 && on_a.abs_diff(on_b) <= 1,
        "weights 1:1 share the turns: qa {on_a}, qb {on_b}\n{context}"
    );
    // Every dispatch took a slot of its connection's gate.
    let text = metrics(&node).await;
    let waits = |outcome: &str| {
        metric(
            &text,
            &format!("switchyard_quota_share_waits_total{{outcome=\"{outcome}\"}}"),
        )
        .unwrap_or(0.0)
    };
    assert_eq!(waits("acquired"), lines.len() as f64, "{text}\n{context}");
    for outcome in [
        "timeout_proceeded",
        "queue_full_proceeded",
        "timeout_rejected",
        "queue_full_rejected",
    ] {
        assert_eq!(waits(outcome), 0.0, "{outcome}\n{context}");
    }
}
