//! Criterion benchmarks for the policy hot path.
//!
//! `strategy/pick/<name>` is one connection selection over 16 candidates (the per-request cost
//! a provider pays); `strategy/order/weighted` is a combo's full fallback order over 16 targets.
//! The target is well under a microsecond per selection.
//!
//! `breaker/admit` and `breaker/view` are the breaker gate every attempt passes (a CLOSED
//! breaker: the steady state); `cooldown/on_event failure` is one classified failure applied to
//! a healthy connection (the work of a 429); `wire/encode+decode cooldown` is one cluster
//! cooldown event through the sender's encoder and a receiver's decoder.
//!
//! `classify/429 with headers` is the classification of one upstream error (the work after
//! every failed attempt); `sse/scan 20-chunk stream` is the tap parser plus the event
//! inspection over a whole 20-chunk OpenAI stream (the per-stream cost on top of the copy);
//! `sse/stream inspector, 20 padded chunks` is the same through a stream's inspector for
//! chunks carrying OpenAI's per-chunk `obfuscation` padding (its repeat path), and
//! `sse/stream inspector, 20 Responses deltas` for Responses text deltas with their counter
//! and padding.
//!
//! `request_body/scan 4 KiB chat body` is the node's read of a client request (validation and
//! the routing fields) over a typical 4 KiB chat completions body: a system prompt, a few
//! turns with escapes, one tool with its JSON schema; `… with \\u escapes` is the same body
//! as Python's `json.dumps` writes it (non-ASCII letters as `\\u` escapes).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use switchyard_shared::breaker::Breaker;
use switchyard_shared::classify::{ClassifyInput, classify};
use switchyard_shared::cooldown::{
    ConnEvent, ConnState, CooldownParams, FailureObservation, on_event,
};
use switchyard_shared::outcome::{CooldownHint, FailureReason, ProviderCategory, TerminalSignal};
use switchyard_shared::request_body;
use switchyard_shared::sse::{Format, SseItem, SseParser, StreamInspector, inspect_item};
use switchyard_shared::strategy::{
    Candidate, QuotaView, SelectCtx, Strategy, StrategyState, order, pick, stable_hash,
};
use switchyard_shared::wire::{Envelope, WireEvent, decode, encode};

const NOW: u64 = 1_700_000_000_000;

/// 16 candidates with varied, realistic views.
fn pool() -> Vec<Candidate> {
    (0..16u32)
        .map(|i| {
            let n = u64::from(i);
            Candidate {
                priority: i % 4,
                weight: 1 + i % 5,
                in_flight: i % 3,
                last_used_at: Some(NOW - 1_000 * n),
                consecutive_use_count: i % 4,
                backoff_level: u32::from(i % 7 == 0),
                cost: Some(0.5 + f64::from(i % 6) * 0.25),
                latency_ms: Some(200.0 + f64::from((i * 37) % 11) * 40.0),
                quota: Some(QuotaView {
                    remaining: f64::from((i * 13) % 16) / 16.0,
                    session_reset_at: Some(NOW + 600_000 * n),
                    weekly_reset_at: Some(NOW + 86_400_000 * (n % 7)),
                }),
                last_success_at: Some(NOW - 5_000 * n),
                ..Candidate::new(i as usize, stable_hash(format!("conn-{i}").as_bytes()))
            }
        })
        .collect()
}

fn strategies(c: &mut Criterion) {
    let cands = pool();
    let ctx = SelectCtx {
        cache_key: Some(stable_hash(b"system prompt prefix")),
        ..SelectCtx::new(NOW)
    };
    for s in [
        Strategy::FillFirst,
        Strategy::RoundRobin,
        Strategy::P2c,
        Strategy::Weighted,
        Strategy::CacheOptimized,
        Strategy::LatencyOptimized,
        Strategy::ResetAware,
    ] {
        let mut state = StrategyState::new();
        let mut rng = SmallRng::seed_from_u64(1);
        c.bench_function(&format!("strategy/pick/{s}"), |b| {
            b.iter(|| pick(s, black_box(&cands), &mut state, black_box(&ctx), &mut rng))
        });
    }

    let mut state = StrategyState::new();
    let mut rng = SmallRng::seed_from_u64(1);
    let mut out = Vec::with_capacity(cands.len());
    c.bench_function("strategy/order/weighted", |b| {
        b.iter(|| {
            order(
                Strategy::Weighted,
                black_box(&cands),
                &mut state,
                &ctx,
                &mut rng,
                &mut out,
            );
            black_box(out.first().copied())
        })
    });
}

fn breaker(c: &mut Criterion) {
    let mut breaker = Breaker::for_category(ProviderCategory::Apikey);
    c.bench_function("breaker/admit", |b| {
        b.iter(|| breaker.admit(black_box(NOW)))
    });
    c.bench_function("breaker/view", |b| b.iter(|| breaker.view(black_box(NOW))));
}

fn cooldown(c: &mut Criterion) {
    let params = CooldownParams::for_category(ProviderCategory::Apikey);
    let state = ConnState::default();
    let event = ConnEvent::Failure(FailureObservation {
        status: Some(429),
        reason: FailureReason::RateLimitExceeded,
        hint: CooldownHint::Upstream(20_000),
        terminal: TerminalSignal::None,
        stream_stall: false,
        message: "Rate limit reached for requests per minute. Please try again in 20s.".to_owned(),
    });
    c.bench_function("cooldown/on_event failure", |b| {
        b.iter(|| on_event(black_box(&state), black_box(&event), &params, NOW))
    });
}

fn wire(c: &mut Criterion) {
    let envelope = Envelope {
        origin_node: "node-a1b2c3".to_owned(),
        origin_ts_ms: NOW,
        seq: 48_213,
        event: WireEvent::CooldownSet {
            connection: "openai-key-3".to_owned(),
            until_remaining_ms: 20_000,
            backoff_level: 2,
            reason: FailureReason::RateLimitExceeded,
            terminal: None,
        },
    };
    c.bench_function("wire/encode+decode cooldown", |b| {
        b.iter(|| {
            let bytes = encode(black_box(&envelope));
            bytes.and_then(|bytes| decode(black_box(&bytes)))
        })
    });
}

fn classification(c: &mut Criterion) {
    let headers = [
        ("retry-after", "7"),
        ("x-ratelimit-remaining-requests", "0"),
        ("content-type", "application/json"),
    ];
    let text = r#"{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-x on requests per min (RPM): Limit 500, Used 500.","type":"requests","code":"rate_limit_exceeded"}}"#;
    c.bench_function("classify/429 with headers", |b| {
        b.iter(|| {
            classify(black_box(&ClassifyInput {
                status: 429,
                error_text: text,
                headers: &headers,
                upstream_hint_ms: Some(7_000),
                provider_id: "openai",
                category: ProviderCategory::Apikey,
                use_upstream_retry_hints: true,
                now_epoch_ms: NOW,
                ..ClassifyInput::default()
            }))
        })
    });
}

fn sse_scan(c: &mut Criterion) {
    let mut stream = String::new();
    for i in 0..20 {
        stream.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-mini\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"token {i} \"}},\"finish_reason\":null}}]}}\n\n"
        ));
    }
    stream.push_str("data: [DONE]\n\n");
    let chunks: Vec<&[u8]> = stream.as_bytes().chunks(256).collect();
    c.bench_function("sse/scan 20-chunk stream", |b| {
        b.iter(|| {
            let mut parser = SseParser::new();
            let mut outputs = 0usize;
            for chunk in &chunks {
                parser.feed(black_box(chunk), &mut |item: SseItem<'_>| {
                    if inspect_item(Format::OpenAiChat, &item).kind.is_output() {
                        outputs += 1;
                    }
                });
            }
            parser.finish();
            outputs
        })
    });
}

/// A stream's inspector over 20 chat chunks as OpenAI sends them by default, each with its
/// random `obfuscation` padding: the repeat path's case on real OpenAI traffic.
fn sse_padded_stream(c: &mut Criterion) {
    let mut stream = String::new();
    for i in 0..20 {
        let padding = &"pJxS9aQ0fO3kLmZr"[..(i * 7) % 16];
        stream.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-mini\",\"service_tier\":\"default\",\"system_fingerprint\":\"fp_1\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"token {i} \"}},\"logprobs\":null,\"finish_reason\":null}}],\"obfuscation\":\"{padding}\"}}\n\n"
        ));
    }
    stream.push_str("data: [DONE]\n\n");
    inspector_bench(
        c,
        "sse/stream inspector, 20 padded chunks",
        Format::OpenAiChat,
        &stream,
    );
}

/// A whole OpenAI stream as `stream_options.include_usage` makes it: the role chunk, 20
/// padded text chunks, the finish chunk, the usage chunk and `[DONE]`. The first and the last
/// three are never repeats.
fn sse_whole_stream(c: &mut Criterion) {
    let head = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","service_tier":"default","system_fingerprint":"fp_1","choices":["#;
    let mut stream = format!(
        "data: {head}{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null,\"obfuscation\":\"x4\"}}\n\n"
    );
    for i in 0..20 {
        let padding = &"pJxS9aQ0fO3kLmZr"[..(i * 7) % 16];
        stream.push_str(&format!(
            "data: {head}{{\"index\":0,\"delta\":{{\"content\":\"token {i} \"}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null,\"obfuscation\":\"{padding}\"}}\n\n"
        ));
    }
    stream.push_str(&format!(
        "data: {head}{{\"index\":0,\"delta\":{{}},\"logprobs\":null,\"finish_reason\":\"stop\"}}],\"usage\":null,\"obfuscation\":\"Qm\"}}\n\n"
    ));
    stream.push_str(&format!(
        "data: {head}],\"usage\":{{\"prompt_tokens\":19,\"completion_tokens\":20,\"total_tokens\":39,\"prompt_tokens_details\":{{\"cached_tokens\":0,\"audio_tokens\":0}},\"completion_tokens_details\":{{\"reasoning_tokens\":0,\"audio_tokens\":0,\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}}},\"obfuscation\":\"Zt9\"}}\n\n"
    ));
    stream.push_str("data: [DONE]\n\n");
    inspector_bench(
        c,
        "sse/stream inspector, whole OpenAI stream with usage",
        Format::OpenAiChat,
        &stream,
    );
}

/// 20 padded chat chunks of a markdown answer: half of them hold a newline or quotes.
fn sse_markdown_stream(c: &mut Criterion) {
    let mut stream = String::new();
    for i in 0..20 {
        let padding = &"pJxS9aQ0fO3kLmZr"[..(i * 7) % 16];
        let text = match i % 4 {
            0 => format!("\\n\\n## Step {i}\\n"),
            1 => "Run \\\"cargo test\\\" ".to_owned(),
            _ => format!("token {i} "),
        };
        stream.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-mini\",\"service_tier\":\"default\",\"system_fingerprint\":\"fp_1\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"logprobs\":null,\"finish_reason\":null}}],\"obfuscation\":\"{padding}\"}}\n\n"
        ));
    }
    stream.push_str("data: [DONE]\n\n");
    inspector_bench(
        c,
        "sse/stream inspector, 20 padded markdown chunks",
        Format::OpenAiChat,
        &stream,
    );
}

/// The same for 20 Responses text deltas, each with its counter and padding.
fn sse_responses_stream(c: &mut Criterion) {
    let mut stream = String::new();
    for i in 0..20 {
        let padding = &"pJxS9aQ0fO3kLmZr"[..(i * 7) % 16];
        stream.push_str(&format!(
            "event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"sequence_number\":{},\"item_id\":\"msg_0508041cc126e1bb0169b52d2314808191b5\",\"output_index\":1,\"content_index\":0,\"delta\":\"token {i} \",\"logprobs\":[],\"obfuscation\":\"{padding}\"}}\n\n",
            i + 4
        ));
    }
    inspector_bench(
        c,
        "sse/stream inspector, 20 Responses deltas",
        Format::OpenAiResponses,
        &stream,
    );
}

/// 20 Anthropic thinking deltas then 20 tool-input deltas, as Claude Code's turns stream
/// them: half of the thinking text and all of the tool input carry escapes.
fn sse_agent_stream(c: &mut Criterion) {
    let mut stream = String::new();
    for i in 0..20 {
        let text = if i % 2 == 0 {
            format!("step {i} of the plan")
        } else {
            format!("then \\\"run {i}\\\"\\n")
        };
        stream.push_str(&format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"thinking_delta\",\"thinking\":\"{text}\"}}}}\n\n"
        ));
    }
    for i in 0..20 {
        stream.push_str(&format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"line {i}\\\\n\\\", \"}}}}\n\n"
        ));
    }
    inspector_bench(
        c,
        "sse/stream inspector, 20 thinking and 20 tool-input deltas",
        Format::Anthropic,
        &stream,
    );
}

fn inspector_bench(c: &mut Criterion, name: &str, format: Format, stream: &str) {
    let chunks: Vec<&[u8]> = stream.as_bytes().chunks(256).collect();
    c.bench_function(name, |b| {
        b.iter(|| {
            let mut parser = SseParser::new();
            let mut inspector = StreamInspector::new(format);
            let mut outputs = 0usize;
            for chunk in &chunks {
                parser.feed(black_box(chunk), &mut |item: SseItem<'_>| {
                    if inspector.inspect_item(&item).kind.is_output() {
                        outputs += 1;
                    }
                });
            }
            parser.finish();
            outputs
        })
    });
}

/// A typical chat completions request of about 4 KiB (the shape of
/// https://platform.openai.com/docs/api-reference/chat/create): a system prompt, six turns of
/// prose with newlines and quotes, one function tool with its JSON schema, sampling numbers.
/// `accent` is how a non-ASCII letter is written: raw UTF-8, or a `\u` escape.
fn chat_body(accent: &str) -> String {
    let mut messages = vec![format!(
        r#"{{"role":"system","content":"You are a careful coding assistant. Answer in Markdown.\nKeep answers short; caf{accent} style.\n"}}"#
    )];
    let mut turn = 0;
    while messages.iter().map(String::len).sum::<usize>() < 3_300 {
        let role = if turn % 2 == 0 { "user" } else { "assistant" };
        messages.push(format!(
            r#"{{"role":"{role}","content":"Step {turn}: run \"cargo test -p switchyard-shared\" and read the output.\nThe r{accent}sum{accent} says 3 tests failed in request_body; the first is deep_nesting, the second is surrogates, the third is numbers. What should change first, and why?\n\n- keep the fast path\n- refuse what the full parse refuses\n"}}"#
        ));
        turn += 1;
    }
    let tool = r#"{"type":"function","function":{"name":"run_command","description":"Runs a shell command in the workspace and returns its output.","parameters":{"type":"object","properties":{"command":{"type":"string","description":"The command line"},"timeout_ms":{"type":"integer","minimum":1,"maximum":600000},"cwd":{"type":["string","null"]}},"required":["command"],"additionalProperties":false},"strict":true}}"#;
    format!(
        r#"{{"model":"openai/gpt-4o","messages":[{}],"tools":[{tool}],"tool_choice":"auto","temperature":0.2,"top_p":1,"max_completion_tokens":4096,"stream":true,"stream_options":{{"include_usage":true}},"metadata":{{"session_id":"sess-7f3a"}}}}"#,
        messages.join(",")
    )
}

fn request_body_scan(c: &mut Criterion) {
    for (name, accent) in [
        ("request_body/scan 4 KiB chat body", "\u{e9}"),
        (
            "request_body/scan 4 KiB chat body with \\u escapes",
            "\\u00e9",
        ),
    ] {
        let body = chat_body(accent);
        assert!(
            (3_800..4_400).contains(&body.len()),
            "{name}: {} bytes",
            body.len()
        );
        assert!(
            request_body::scan(body.as_bytes()).is_ok(),
            "{name}: {body}"
        );
        c.bench_function(name, |b| {
            b.iter(|| request_body::scan(black_box(body.as_bytes())))
        });
    }
}

criterion_group!(
    benches,
    strategies,
    breaker,
    cooldown,
    wire,
    classification,
    sse_scan,
    sse_padded_stream,
    sse_markdown_stream,
    sse_whole_stream,
    sse_responses_stream,
    sse_agent_stream,
    request_body_scan
);
criterion_main!(benches);
