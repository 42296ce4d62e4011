//! Structure before text, and the operator's rules win (RESILIENCE.md, third-round
//! clarifications), end to end:
//!
//! - a Gemini API per-minute 429, whose message is OpenAI's credits sentence but whose
//!   `QuotaFailure` names a per-minute quota and whose `RetryInfo` names the wait, cools the key
//!   for that wait and nothing more: the key is back in rotation after it, with no operator
//!   action, on a provider of any name;
//! - the contract's own example restatement rule (read from `deploy/examples/`): a 403 whose
//!   body has both `额度不足` and the exclude marker `无权访问` is neither restated nor read as
//!   a quota by any built-in text (agentrouter's included): it is relayed as the 403 it is and
//!   cools nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use serde_json::{Value, json};
use switchyard_tests::mock_upstream::FaultSpec;

use crate::error_semantics::{Setup, prelude, setup};
use crate::support::http::*;
use crate::support::{STATE_DEADLINE, eventually};

const KEY: &str = "sk-structure-first-0001";

/// Google's per-minute free-tier 429 (the corpus entry
/// `gemini/free-tier-per-minute-quota-failure`, RooCodeInc/Roo-Code#3883), with a one-second
/// `RetryInfo` so the test can see the key come back.
fn gemini_per_minute() -> Value {
    json!({"error": {
        "code": 429,
        "message": "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
             "violations": [{
                "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_input_token_count",
                "quotaId": "GenerateContentInputTokensPerModelPerMinute-FreeTier",
                "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"},
                "quotaValue": "250000"}]},
            {"@type": "type.googleapis.com/google.rpc.Help",
             "links": [{"description": "Learn more about Gemini API quotas",
                        "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}
        ]
    }})
}

fn hits(s: &Setup) -> u64 {
    s.mock.stats().by_key.get(KEY).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gemini_per_minute_429_is_back_in_rotation_after_its_retry_info_delay() {
    // An operator's own provider name: the body's structure decides, not the id.
    let config = prelude()
        + &provider(
            "ai-studio",
            "openai",
            "{URL}",
            &["gemini-2.5-flash"],
            "",
            "",
        )
        + &connection("ai-studio-k1", "ai-studio", "UP_G", "");
    let s = setup(config, &[("UP_G", KEY)]).await;
    s.mock
        .script(FaultSpec {
            body: Some(gemini_per_minute()),
            ..FaultSpec::status(429).for_key(KEY).times(1)
        })
        .unwrap();
    let model = "ai-studio/gemini-2.5-flash";
    let first = s.post("/v1/chat/completions", &chat(model, false)).await;
    assert_eq!(
        first.status, 429,
        "a cooldown, not a terminal key: {first:#?}"
    );
    assert_eq!(
        first.json()["error"]["code"],
        "connection_cooldown",
        "{first:#?}"
    );
    quiesce(&s.node, crate::error_semantics::MGMT_KEY).await;
    // The wait the client is told is the RetryInfo delay (1 s), not the 3 s backoff.
    assert_eq!(first.header("retry-after"), Some("1"), "{first:#?}");
    let row = s.row("ai-studio-k1").await;
    assert!(row["terminal"].is_null(), "never credits_exhausted: {row}");
    // No operator action: after the stated second the key serves again.
    let back = eventually(STATE_DEADLINE, || async {
        let r = s.post("/v1/chat/completions", &chat(model, false)).await;
        (r.status == 200).then_some(r)
    })
    .await;
    assert!(
        back.is_some(),
        "the key came back after its RetryInfo delay"
    );
    assert_eq!(hits(&s), 2, "one 429, then one success");
}

/// The `[[providers.status_restatement]]` block of the contract's example config, verbatim.
fn contract_example_rule() -> String {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples/switchyard.example.toml");
    let text = std::fs::read_to_string(&path).expect("the contract's example config");
    let start = text
        .find("[[providers.status_restatement]]")
        .expect("a restatement rule in the example");
    let block: Vec<&str> = text[start..]
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .collect();
    let block = block.join("\n");
    assert!(
        block.contains("exclude_markers = [\"无权访问\"]"),
        "{block}"
    );
    assert!(block.contains("text_markers = [\"额度不足\"]"), "{block}");
    format!("\n{block}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contracts_exclude_marker_vetoes_every_reading_of_the_body() {
    let rule = contract_example_rule();
    // `glm` is where the example attaches it; `agentrouter` has a built-in rule that reads
    // 额度不足 as a spent quota, which the marker must veto as well.
    let mut config = prelude();
    for (pid, env) in [("glm", "UP_GLM"), ("agentrouter", "UP_AR")] {
        config += &provider(pid, "openai", "{URL}", &["m"], "", "");
        config += &rule;
        config += &connection(&format!("{pid}-k1"), pid, env, "");
    }
    let s = setup(
        config,
        &[("UP_GLM", "sk-veto-glm-0001"), ("UP_AR", "sk-veto-ar-0002")],
    )
    .await;
    let body =
        json!({"error": {"message": "用户额度不足，无权访问该模型", "type": "new_api_error"}});
    for (pid, key) in [
        ("glm", "sk-veto-glm-0001"),
        ("agentrouter", "sk-veto-ar-0002"),
    ] {
        s.mock
            .script(FaultSpec {
                body: Some(body.clone()),
                ..FaultSpec::status(403).for_key(key).times(2)
            })
            .unwrap();
        let model = format!("{pid}/m");
        let r = s.post("/v1/chat/completions", &chat(&model, false)).await;
        assert_eq!(r.status, 403, "{pid}: relayed as the 403 it is: {r:#?}");
        // Every observation of the attempt is applied before the state is read.
        quiesce(&s.node, crate::error_semantics::MGMT_KEY).await;
        let row = s.row(&format!("{pid}-k1")).await;
        assert_eq!(
            row["cooldownRemainingMs"].as_u64().unwrap_or(0),
            0,
            "{pid}: nothing cooled: {row}"
        );
        assert!(row["terminal"].is_null(), "{pid}: {row}");
        // The connection still serves: the next request reaches the upstream again.
        let before = s.mock.stats().by_key.get(key).copied().unwrap_or(0);
        let again = s.post("/v1/chat/completions", &chat(&model, false)).await;
        assert_eq!(again.status, 403, "{pid}: {again:#?}");
        assert_eq!(
            s.mock.stats().by_key.get(key).copied().unwrap_or(0),
            before + 1,
            "{pid}: the connection was not cooled"
        );
    }
}
