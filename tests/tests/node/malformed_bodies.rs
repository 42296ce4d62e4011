//! Bodies serde_json's full parse refuses never reach an upstream: nesting past its depth
//! limit, `\u` escapes that are lone UTF-16 surrogates, invalid UTF-8 and numbers outside
//! `f64`'s range, inside fields the node does not read. Each gets `400` with
//! `invalid_request_error` and a code on both client APIs, and the mock upstream counts no
//! request (a naive parser upstream could crash on them, and its
//! 5xx would count on the breaker for every client).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;

use crate::support::http::*;
use crate::support::scenario::Scenario;

const OPENAI_KEY: &str = "sk-malformed-openai-0001";
const ANTHROPIC_KEY: &str = "sk-ant-malformed-0002";

async fn setup() -> Scenario {
    Scenario::with_mock(2)
        .await
        .provider("oa", "openai", &["gpt-4o-mini"], "", "")
        .provider("an", "anthropic", &["claude-sonnet-4-5"], "", "")
        .connection("oa-k1", "oa", OPENAI_KEY, "")
        .connection("an-k1", "an", ANTHROPIC_KEY, "")
        .start()
        .await
}

/// Each client path with a provider of its own format: there the node forwards the body as it
/// came (apart from `model`), so the scan is all that stands between it and the upstream.
/// (Across formats the body is also translated, and unknown fields such as `x` are refused.)
const ROUTES: [(&str, &str); 2] = [
    ("/v1/chat/completions", "oa/gpt-4o-mini"),
    ("/v1/messages", "an/claude-sonnet-4-5"),
];

/// A valid request for `model` whose extra field `x` holds `value` verbatim.
fn body_with(model: &str, value: &[u8]) -> Vec<u8> {
    let mut out = format!(
        r#"{{"model":"{model}","max_tokens":64,"messages":[{{"role":"user","content":"hi"}}],"x":"#
    )
    .into_bytes();
    out.extend_from_slice(value);
    out.push(b'}');
    out
}

/// Sends every case on every route; each must be a 400 `invalid_request_error` with a code,
/// and the upstream must see none of them. Then a valid request on every route does reach
/// it, so the count is not zero for some other reason.
async fn assert_refused_before_the_upstream(cases: &[(&str, Vec<u8>)]) {
    let s = setup().await;
    for (what, value) in cases {
        for (path, model) in ROUTES {
            let r = send(
                s.http
                    .post(format!("{}{path}", s.base))
                    .header("content-type", "application/json")
                    .body(body_with(model, value)),
            )
            .await;
            assert_eq!(r.status, 400, "{what} on {path} for {model}: {r:#?}");
            let v = r.json();
            assert_eq!(
                v["error"]["type"], "invalid_request_error",
                "{what} on {path} for {model}: {v}"
            );
            assert!(
                v["error"]["code"].as_str().is_some_and(|c| !c.is_empty()),
                "{what} on {path} for {model}: {v}"
            );
            assert_eq!(
                v["error"]["code"], "invalid_json",
                "{what} on {path} for {model}: {v}"
            );
        }
    }
    let stats = s.mock.stats();
    assert_eq!(
        stats.requests_total, 0,
        "the upstream received malformed bodies: {stats:#?}"
    );
    for (path, model) in ROUTES {
        let ok = json!({
            "model": model,
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "hi"}],
            "x": [[["\u{e9}", 1.5e308]]],
        });
        let r = s.post(path, &ok).await;
        assert_eq!(r.status, 200, "control on {path} for {model}: {r:#?}");
    }
    assert_eq!(s.mock.stats().requests_total, ROUTES.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_deep_nesting_is_refused_before_the_upstream() {
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let mixed = format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));
    assert_refused_before_the_upstream(&[
        ("10,000 nested arrays", deep.into_bytes()),
        ("10,000 nested objects", mixed.into_bytes()),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lone_surrogates_are_refused_before_the_upstream() {
    assert_refused_before_the_upstream(&[
        ("a lone leading surrogate", br#""\ud800""#.to_vec()),
        ("two leading surrogates", br#""\udbff\udbff""#.to_vec()),
        ("a lone trailing surrogate", br#"["ok","\udc00"]"#.to_vec()),
        ("a lone surrogate in a key", br#"{"\ud800":1}"#.to_vec()),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_and_overflowing_numbers_are_refused_before_the_upstream() {
    assert_refused_before_the_upstream(&[
        ("invalid UTF-8", b"\"caf\xe9\"".to_vec()),
        ("a truncated UTF-8 sequence", b"[\"\xf0\x9f\x98\"]".to_vec()),
        ("a number past f64", b"[1e400]".to_vec()),
    ])
    .await;
}
