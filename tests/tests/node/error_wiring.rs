//! Settings and signals of the error contract that must reach classification and the state
//! they drive, end to end against the real node binary and the mock upstream: runtime
//! `provider_error_rules`, the response headers kept for classification, and the quota
//! preflight.
//!
//! Each test reads the resulting state back through the admin API and through what the next
//! request does (helpers shared with [`crate::error_semantics`]).

use std::time::Duration;

use serde_json::{Value, json};
use switchyard_tests::mock_upstream::{FaultSpec, Route};

use crate::error_semantics::{MGMT_KEY, Setup, json_fault, prelude, setup};
use crate::support::eventually;
use crate::support::http::*;

impl Setup {
    /// `PATCH /api/resilience`.
    async fn patch_settings(&self, body: &Value) -> Reply {
        send(
            self.http
                .patch(format!("{}/api/resilience", self.node.admin_url()))
                .bearer_auth(MGMT_KEY)
                .json(body),
        )
        .await
    }

    /// Waits until connection `id` is cooling and returns its row.
    async fn cooled_row(&self, id: &str) -> Value {
        let cooled = eventually(Duration::from_secs(3), || async {
            self.row(id).await["cooldownRemainingMs"]
                .as_u64()
                .is_some_and(|ms| ms > 0)
        })
        .await;
        let row = self.row(id).await;
        assert!(cooled, "{id} is not cooling: {row}");
        row
    }
}

/// A 400 the built-in table reads as the request's own fault, but which this operator knows
/// to be the workspace's spend cap.
const SPEND_CAP_400: &str = r#"{"error":{"message":"Workspace spend cap reached for this billing period.","type":"invalid_request_error","param":null,"code":null}}"#;

/// The operator rule that makes [`SPEND_CAP_400`] a 30 s connection cooldown.
const SPEND_CAP_RULE: &str = "\n[[providers.error_rules]]\nstatus = 400\n\
    match = \"workspace spend cap\"\nscope = \"connection\"\nreason = \"quota_exhausted\"\n\
    cooldown_ms = 30000\n";

/// `provider_error_rules` sent by `PATCH /api/resilience` apply to the next failure, exactly
/// as the same rule in the config file: the connection cools for the rule's 30 s with the
/// rule's reason, and the patch reports nothing as not applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patched_provider_error_rules_apply_like_file_rules() {
    let config = prelude()
        + &provider("filed", "openai", "{URL}", &["gpt-4o-mini"], "", "")
        + SPEND_CAP_RULE
        + &connection("filed-k1", "filed", "UP_FILED", "")
        + &provider("patched", "openai", "{URL}", &["gpt-4o-mini"], "", "")
        + &connection("patched-k1", "patched", "UP_PATCHED", "");
    let s = setup(
        config,
        &[
            ("UP_FILED", "sk-errwire-filed-0001"),
            ("UP_PATCHED", "sk-errwire-patched-0002"),
        ],
    )
    .await;

    // Without the rule the 400 is request-scoped: nothing changes.
    s.mock
        .script(
            json_fault(400, SPEND_CAP_400)
                .on_route(Route::ChatCompletions)
                .times(1),
        )
        .unwrap();
    let r = s
        .post("/v1/chat/completions", &chat("patched/gpt-4o-mini", false))
        .await;
    assert_eq!(r.status, 400, "{r:#?}");
    s.assert_untouched("patched-k1", "patched", "no rule yet")
        .await;

    let r = s
        .patch_settings(&json!({"provider_error_rules": {"patched": [{
            "status": 400, "match": "workspace spend cap", "scope": "connection",
            "reason": "quota_exhausted", "cooldown_ms": 30000
        }]}}))
        .await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.json()["notApplied"], json!([]), "{r:#?}");

    for (model, id) in [
        ("filed/gpt-4o-mini", "filed-k1"),
        ("patched/gpt-4o-mini", "patched-k1"),
    ] {
        s.mock
            .script(
                json_fault(400, SPEND_CAP_400)
                    .on_route(Route::ChatCompletions)
                    .times(1),
            )
            .unwrap();
        let r = s.post("/v1/chat/completions", &chat(model, false)).await;
        r.assert_error(429, "rate_limit_error", "connection_cooldown");
        let row = s.cooled_row(id).await;
        let remaining = row["cooldownRemainingMs"].as_u64().unwrap();
        assert!(
            (20_000..=30_000).contains(&remaining),
            "{id}: the rule's 30 s: {row}"
        );
        assert_eq!(row["lastErrorType"], "quota_exhausted", "{id}: {row}");
        assert_eq!(row["lockouts"], json!([]), "{id}: {row}");
    }
}

/// A Codex (ChatGPT plan) usage-limit 429 whose body names no reset, with the `x-codex-*`
/// headers that state the spent 5-hour window: the headers reach classification, and the
/// connection cools until that window's reset (3 h 51 min), not for the 5 s OAuth backoff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_window_headers_reach_classification() {
    let config = prelude()
        + &crate::error_semantics::provider_of("oauth", "codex", "openai", "{URL}", &["gpt-5"])
        + &connection("codex-k1", "codex", "UP_CODEX", "");
    let s = setup(config, &[("UP_CODEX", "sk-errwire-codex-0003")]).await;
    s.mock
        .script(
            json_fault(
                429,
                r#"{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"plus"}}"#,
            )
            .header("x-codex-primary-used-percent", "100")
            .header("x-codex-primary-window-minutes", "300")
            .header("x-codex-primary-reset-after-seconds", "13873")
            .header("x-codex-secondary-used-percent", "80")
            .header("x-codex-secondary-window-minutes", "10080")
            .header("x-codex-secondary-reset-after-seconds", "316705")
            .times(1),
        )
        .unwrap();
    let r = s
        .post("/v1/chat/completions", &chat("codex/gpt-5", false))
        .await;
    assert_eq!(r.status, 429, "{r:#?}");
    let row = s.cooled_row("codex-k1").await;
    let remaining = row["cooldownRemainingMs"].as_u64().unwrap();
    assert!(
        (13_860_000..=13_873_000).contains(&remaining),
        "cooled until the spent window's reset (13 873 s): {row}"
    );
    assert_eq!(row["lastErrorType"], "quota_exhausted", "{row}");
}

/// Quota windows keep their fixed length on every connection profile: Ollama Cloud's
/// "weekly usage limit" cools a `local` connection (and an API-key one) for the weekly
/// window, 24 h, as it does an OAuth one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weekly_window_is_a_day_on_every_profile() {
    let weekly = r#"{"error":"you (acct) have reached your weekly usage limit, upgrade for higher limits: https://ollama.com/upgrade"}"#;
    let mut config = prelude();
    for category in ["local", "apikey", "oauth"] {
        config += &crate::error_semantics::provider_of(
            category,
            &format!("ollama-{category}"),
            "openai",
            "{URL}",
            &["gpt-oss:120b"],
        );
        config += &connection(
            &format!("k-{category}"),
            &format!("ollama-{category}"),
            &format!("UP_{}", category.to_uppercase()),
            "",
        );
    }
    let s = setup(
        config,
        &[
            ("UP_LOCAL", "sk-errwire-local-0004"),
            ("UP_APIKEY", "sk-errwire-apikey-0005"),
            ("UP_OAUTH", "sk-errwire-oauth-0006"),
        ],
    )
    .await;
    for category in ["local", "apikey", "oauth"] {
        s.mock
            .script(
                json_fault(429, weekly)
                    .on_route(Route::ChatCompletions)
                    .times(1),
            )
            .unwrap();
        let model = format!("ollama-{category}/gpt-oss:120b");
        let r = s.post("/v1/chat/completions", &chat(&model, false)).await;
        assert_eq!(r.status, 429, "{category}: {r:#?}");
        let told: u64 = r
            .header("retry-after")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let reset = r.json()["error"]["reset_seconds"].as_u64().unwrap_or(0);
        assert!(
            told > 86_340 && reset > 86_340,
            "{category}: the client is told the weekly window: {r:#?}"
        );
        let row = s.cooled_row(&format!("k-{category}")).await;
        let remaining = row["cooldownRemainingMs"].as_u64().unwrap();
        assert!(
            remaining > 86_400_000 - 60_000,
            "{category}: the weekly window is 24 h, got {remaining} ms: {row}"
        );
    }
}

/// Two connections of one provider (`ca` first by priority) and a combo `only-a` over a
/// provider whose single connection is `ca`'s twin; `preflight` is the `[quota_preflight]`
/// table (empty: the default, off).
async fn preflight_setup(preflight: &str) -> Setup {
    let config = prelude()
        + preflight
        + &provider("pa", "openai", "{URL}", &["gpt-4o-mini"], "", "")
        + &connection("ca", "pa", "UP_CA", "priority = 1")
        + &connection("cb", "pa", "UP_CB", "priority = 2")
        + &provider("pq", "openai", "{URL}", &["gpt-4o-mini"], "", "")
        + &connection("cq", "pq", "UP_CQ", "")
        + "\n[[combos]]\nname = \"only-q\"\nstrategy = \"priority\"\n\
           targets = [{ target = \"pq/gpt-4o-mini\" }]\n";
    let s = setup(
        config,
        &[
            ("UP_CA", "sk-errwire-ca-0007"),
            ("UP_CB", "sk-errwire-cb-0008"),
            ("UP_CQ", "sk-errwire-cq-0009"),
        ],
    )
    .await;
    // `ca` and `cq` serve, but say their request window is 99 % spent for the next minute.
    for key in ["sk-errwire-ca-0007", "sk-errwire-cq-0009"] {
        s.mock
            .script(
                FaultSpec::new()
                    .for_key(key)
                    .header("x-ratelimit-limit-requests", "100")
                    .header("x-ratelimit-remaining-requests", "1")
                    .header("x-ratelimit-reset-requests", "60s"),
            )
            .unwrap();
    }
    s
}

/// With `[quota_preflight] enabled = true`, a connection whose last answer reported a quota
/// window at or below the threshold (2 % left by default) is skipped until the window resets:
/// the next request goes to the provider's other connection, and a combo whose only target
/// is cut off answers 503 with the target's reason `quota_cutoff` and the window's reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_preflight_skips_a_nearly_spent_connection() {
    let s = preflight_setup("\n[quota_preflight]\nenabled = true\n").await;
    let first = s
        .post("/v1/chat/completions", &chat("pa/gpt-4o-mini", false))
        .await;
    assert_eq!(first.status, 200, "{first:#?}");
    assert_eq!(first.connection(), "ca");
    let next = s
        .post("/v1/chat/completions", &chat("pa/gpt-4o-mini", false))
        .await;
    assert_eq!(next.status, 200, "{next:#?}");
    assert_eq!(next.connection(), "cb", "ca is cut off: {next:#?}");

    let served = s.post("/v1/chat/completions", &chat("only-q", false)).await;
    assert_eq!(served.status, 200, "{served:#?}");
    let dispatched = s.mock.stats().requests_total;
    let r = s.post("/v1/chat/completions", &chat("only-q", false)).await;
    let v = r.assert_error(503, "service_unavailable", "ALL_TARGETS_SKIPPED");
    assert_eq!(
        v["error"]["skippedTargets"][0]["reason"], "quota_cutoff",
        "{v}"
    );
    let retry: u64 = r
        .header("retry-after")
        .and_then(|h| h.parse().ok())
        .unwrap_or(0);
    assert!((50..=60).contains(&retry), "the window's reset: {r:#?}");
    assert_eq!(
        s.mock.stats().requests_total,
        dispatched,
        "nothing was sent to the cut-off connection"
    );
}

/// Off by default: the same answers leave every connection eligible.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_preflight_is_off_by_default() {
    let s = preflight_setup("").await;
    for _ in 0..2 {
        let r = s
            .post("/v1/chat/completions", &chat("pa/gpt-4o-mini", false))
            .await;
        assert_eq!(r.status, 200, "{r:#?}");
        assert_eq!(r.connection(), "ca", "{r:#?}");
    }
    for _ in 0..2 {
        let r = s.post("/v1/chat/completions", &chat("only-q", false)).await;
        assert_eq!(r.status, 200, "{r:#?}");
    }
}

/// An Anthropic stream that delivers some content, then an in-band `error` event.
fn committed_then_error(error_type: &str) -> Vec<u8> {
    let start = json!({"type": "message_start", "message": {"id": "msg_02", "type": "message",
        "role": "assistant", "content": [], "model": "claude-sonnet-4-5", "stop_reason": null,
        "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}});
    let block = json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "text", "text": ""}});
    let delta = json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "text_delta", "text": "Hello, here is the first part"}});
    let error = json!({"type": "error", "error": {"type": error_type, "message": "mid-answer"}});
    format!(
        "event: message_start\ndata: {start}\n\nevent: content_block_start\ndata: {block}\n\n\
         event: content_block_delta\ndata: {delta}\n\nevent: error\ndata: {error}\n\n"
    )
    .into_bytes()
}

/// After the commit point an in-band error event is read by its type for the connection's
/// state, as before the commit: a `rate_limit_error` cools the connection as a 429, an
/// `overloaded_error` as a 529, never as a connection reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mid_stream_error_events_are_classified_by_their_type() {
    let config = prelude()
        + &provider("ant", "anthropic", "{URL}", &["claude-sonnet-4-5"], "", "")
        + &connection("ant-k1", "ant", "UP_ANT_1", "");
    let s = setup(config, &[("UP_ANT_1", "sk-ant-errwire-ant-0010")]).await;
    for (error_type, status, reason) in [
        ("rate_limit_error", 429, "rate_limit_exceeded"),
        ("overloaded_error", 529, "model_capacity"),
    ] {
        s.mock
            .script(
                FaultSpec::raw(200, "text/event-stream", committed_then_error(error_type))
                    .on_route(Route::Messages)
                    .times(1),
            )
            .unwrap();
        let r = post_stream(
            &s.http,
            &s.node.client_url(),
            "/v1/messages",
            &messages("ant/claude-sonnet-4-5", true),
            Duration::from_secs(10),
        )
        .await;
        assert_eq!(r.status, 200, "{error_type}: committed: {}", r.everything());
        assert!(
            r.everything().contains("first part"),
            "{error_type}: the content was delivered: {}",
            r.everything()
        );
        let row = s.cooled_row("ant-k1").await;
        assert_eq!(row["lastStatus"], status, "{error_type}: {row}");
        assert_eq!(row["lastErrorType"], reason, "{error_type}: {row}");
        let breaker = s.breaker("ant").await;
        assert_eq!(breaker["failureCount"], 0, "{error_type}: {breaker}");
        // Cleared for the next round.
        let r = send(
            s.http
                .post(format!("{}/api/resilience/cooldowns", s.node.admin_url()))
                .bearer_auth(MGMT_KEY)
                .json(&json!({"all": true})),
        )
        .await;
        assert!(r.status < 300, "{r:#?}");
    }
}
