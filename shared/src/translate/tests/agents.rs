//! The requests real coding agents send (captured into `tests/fixtures/agents/`) translate to
//! the other provider format, and the policy drops exactly the fields documented for them.

use std::path::PathBuf;

use serde_json::Value;

use crate::sse::Format;
use crate::translate::{TranslateOptions, UnknownParams, translate_request_detailed};

fn fixtures() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/agents");
    let mut out: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let record: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            (name, record["body"].clone())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(out.len() >= 4, "expected the captured agent requests");
    out
}

/// The client format a fixture was captured in, and the provider format it must reach.
fn direction(name: &str) -> (Format, Format) {
    if name.contains("-anthropic-") {
        (Format::Anthropic, Format::OpenAiChat)
    } else if name.contains("-responses-") {
        (Format::OpenAiResponses, Format::Anthropic)
    } else {
        panic!("{name}: unknown client format")
    }
}

#[test]
fn captured_agent_requests_translate_with_the_documented_drops() {
    for (name, body) in fixtures() {
        let (client, provider) = direction(&name);
        let out = translate_request_detailed(client, provider, &body, &TranslateOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        if client == Format::Anthropic {
            assert_eq!(
                out.emulated,
                vec!["context_management".to_owned()],
                "{name}"
            );
        }
        let expected: &[&str] = match client {
            Format::Anthropic => &[],
            _ => &[
                "store",
                "include",
                "prompt_cache_key",
                "client_metadata",
                "tools[web_search]",
            ],
        };
        for field in expected {
            assert!(
                out.dropped.iter().any(|d| d == field),
                "{name}: `{field}` should be dropped, got {:?}",
                out.dropped
            );
        }
        // The conversation and the function tools are carried.
        let tools = out.body["tools"].as_array().map_or(0, Vec::len);
        assert!(tools >= 4, "{name}: tools lost: {}", out.body["tools"]);
        assert!(
            out.body["messages"]
                .as_array()
                .is_some_and(|m| !m.is_empty())
        );
        // Also to the other chat/Anthropic encoder for Responses clients.
        if client == Format::OpenAiResponses {
            translate_request_detailed(
                client,
                Format::OpenAiChat,
                &body,
                &TranslateOptions::default(),
            )
            .unwrap_or_else(|e| panic!("{name} to chat: {e}"));
        }
    }
}

#[test]
fn strict_mode_refuses_hosted_tools_but_keeps_known_drops() {
    let strict = TranslateOptions {
        unknown_params: UnknownParams::Refuse,
        ..TranslateOptions::default()
    };
    for (name, body) in fixtures() {
        let (client, provider) = direction(&name);
        let result = translate_request_detailed(client, provider, &body, &strict);
        match client {
            // Claude Code sends only fields with a documented classification.
            Format::Anthropic => {
                let out = result.unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(out.emulated.contains(&"context_management".to_owned()));
            }
            // Codex offers hosted tools (`web_search`), which strict mode refuses.
            _ => {
                let err = result.expect_err("a hosted tool is refused in strict mode");
                assert!(
                    err.param().is_some_and(|p| p.starts_with("tools[")),
                    "{err}"
                );
            }
        }
    }
}

#[test]
fn an_unknown_field_is_dropped_and_named_whatever_its_name() {
    let base = serde_json::json!({
        "model": "m", "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}]
    });
    for key in ["x_trace_context", "speculative_decoding"] {
        let mut body = base.clone();
        body[key] = serde_json::json!({"id": 1});
        let out = translate_request_detailed(
            Format::Anthropic,
            Format::OpenAiChat,
            &body,
            &TranslateOptions::default(),
        )
        .unwrap();
        assert_eq!(out.dropped, vec![key.to_owned()]);
        assert!(out.body.get(key).is_none());
    }
}
