//! Upstreams that misbehave, against the real node binary: malformed SSE, bodies that are not
//! JSON or not UTF-8, a 200 whose body is an error, absurd or negative retry hints, and
//! streams that never end. Each case is handled as the router-node docs say (fail over
//! before the commit point, hints capped at 30 days or ignored, watchdogs and the attempt
//! deadline bound every stream), the client always gets a status plus a JSON error with
//! `type` and `code` (or an in-band error event after the commit), nothing panics, and the
//! node is healthy afterwards.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use serde_json::Value;
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockHandle};

use crate::support::http::*;

/// 30 days in seconds: the cap on every upstream retry hint.
const MAX_HINT_SECS: u64 = 30 * 24 * 3600;

/// Providers with two connections (a fault on the first must fail over to the second).
const PAIRS: [&str; 5] = ["sse", "err200", "utf8", "huge", "neg"];
/// Providers with one connection (to see what the client is told).
const SINGLES: [&str; 11] = [
    "sse1", "sse2", "json1", "err2001", "err2002", "huge1", "neg1", "utf81", "utf82", "endless",
    "silent",
];

fn key(conn: &str) -> String {
    format!("sk-misbehave-{conn}-7d1e")
}

fn env_name(conn: &str) -> String {
    format!("UP_{}", conn.to_uppercase().replace('-', "_"))
}

async fn start() -> (MockHandle, NodeProcess) {
    let mock = mock(3).await;
    let url = mock.base_url();
    let mut config = String::from(
        "[server]\nworkers = 2\n\n[auth]\nrequire_api_key = false\nmanagement_key_env = \"SWITCHYARD_MANAGEMENT_KEY\"\n",
    );
    config.push_str(&queue_off());
    config.push_str("\n[resilience.wait_for_cooldown]\nenabled = false\n");
    let timeouts =
        "connect_ms = 2000\nheaders_ms = 5000\nfirst_content_ms = 1500\nidle_ms = 1500\n";
    let mut env_pairs = Vec::new();
    for p in PAIRS {
        config.push_str(&provider(p, "openai", &url, &["m"], "", timeouts));
        for k in 1..=2 {
            let conn = format!("{p}-k{k}");
            config.push_str(&connection(
                &conn,
                p,
                &env_name(&conn),
                &format!("priority = {k}"),
            ));
            env_pairs.push((env_name(&conn), key(&conn)));
        }
    }
    for p in SINGLES {
        let t = if p == "endless" || p == "silent" {
            format!("{timeouts}attempt_deadline_ms = 2500\n")
        } else {
            timeouts.to_owned()
        };
        config.push_str(&provider(p, "openai", &url, &["m"], "", &t));
        let conn = format!("{p}-k1");
        config.push_str(&connection(&conn, p, &env_name(&conn), ""));
        env_pairs.push((env_name(&conn), key(&conn)));
    }
    let node = start_node(config, env_pairs).await;
    (mock, node)
}

fn script(mock: &MockHandle, conn: &str, fault: FaultSpec) {
    mock.script(fault.for_key(key(conn)).times(1)).unwrap();
}

/// An OpenAI error envelope with a type and a code; returns the code.
fn assert_enveloped(r: &Reply, what: &str) -> String {
    let v: Value = serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("{what}: {e}: {r:#?}"));
    let code = v["error"]["code"].as_str().unwrap_or_default().to_owned();
    assert!(
        v["error"]["type"].is_string() && !code.is_empty(),
        "{what}: {v}"
    );
    code
}

fn retry_after(r: &Reply) -> u64 {
    r.header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no numeric Retry-After: {r:#?}"))
}

const MALFORMED_SSE: &[u8] = b"data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"content\":\n\n\
event\nevent: \ndata\n\n: only a comment\n\nretry: soon\nid: \0\n\ndata: not json at all\n\n\
\r\r\n\ndata: {\"choices\":\"wrong type\"}\n\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misbehaving_upstreams_are_contained() {
    let (mock, node) = start().await;
    let c = http();
    let base = node.client_url();
    let limit = Duration::from_secs(15);

    // --- Malformed SSE before any content: no content event ever came, so the attempt fails
    // (early EOF) before the commit point and the request fails over invisibly.
    script(
        &mock,
        "sse-k1",
        FaultSpec::raw(200, "text/event-stream", MALFORMED_SSE),
    );
    let r = post_stream(
        &c,
        &base,
        "/v1/chat/completions",
        &chat("sse/m", true),
        limit,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.everything());
    assert_eq!(r.connection(), "sse-k2", "{}", r.everything());
    assert!(
        !r.events().iter().any(SseEvent::is_error),
        "{}",
        r.everything()
    );
    // With no second connection the client gets a JSON error, not a broken stream.
    script(
        &mock,
        "sse1-k1",
        FaultSpec::raw(200, "text/event-stream", MALFORMED_SSE),
    );
    let r = post_stream(
        &c,
        &base,
        "/v1/chat/completions",
        &chat("sse1/m", true),
        limit,
    )
    .await;
    assert!(
        r.status >= 500 || r.events().iter().any(SseEvent::is_error),
        "{}",
        r.everything()
    );
    if r.status >= 500 {
        let v: Value = serde_json::from_str(&r.raw).unwrap();
        assert!(
            v["error"]["type"].is_string() && v["error"]["code"].is_string(),
            "{v}"
        );
    }

    // --- Malformed SSE after the commit point: relayed unchanged, and the stream still ends.
    let mut committed = b"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\
\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n"
        .to_vec();
    committed.extend_from_slice(MALFORMED_SSE);
    script(
        &mock,
        "sse2-k1",
        FaultSpec::raw(200, "text/event-stream", committed),
    );
    let r = post_stream(
        &c,
        &base,
        "/v1/chat/completions",
        &chat("sse2/m", true),
        limit,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.everything());
    assert!(!r.timed_out, "the stream must end: {}", r.everything());
    assert!(r.raw.contains("\"Hi\""), "{}", r.everything());

    // --- A 200 whose body is not JSON: forwarded as is in the same format (the SDK reports
    // it); translated for another client format it is a 502 `upstream_invalid_json`.
    let garbage = "{\"id\": \"chatcmpl-1\", \"choices\": [ truncated";
    script(
        &mock,
        "json1-k1",
        FaultSpec::raw(200, "application/json", garbage),
    );
    let r = post(&c, &base, "/v1/chat/completions", &chat("json1/m", false)).await;
    assert_eq!((r.status, r.body.as_str()), (200, garbage), "{r:#?}");
    script(
        &mock,
        "json1-k1",
        FaultSpec::raw(200, "application/json", garbage),
    );
    let r = post(&c, &base, "/v1/messages", &messages("json1/m", false)).await;
    assert_eq!(r.status, 502, "{r:#?}");
    let v = r.json();
    assert_eq!(v["type"], "error", "{v}");
    assert_eq!(v["error"]["code"], "upstream_invalid_json", "{v}");

    // --- A 200 whose body is an error: classified as the status its type means (the mock's
    // is a `server_error`, a 500) and failed over before the client sees it; alone, it cools
    // the only connection, and the client gets the spec's 429 for a cooling connection.
    let mut err200 = FaultSpec::new();
    err200.error_body_200 = true;
    script(&mock, "err200-k1", err200.clone());
    let r = post(&c, &base, "/v1/chat/completions", &chat("err200/m", false)).await;
    assert_eq!(
        (r.status, r.connection().as_str()),
        (200, "err200-k2"),
        "{r:#?}"
    );
    script(&mock, "err2001-k1", err200.clone());
    let r = post(&c, &base, "/v1/chat/completions", &chat("err2001/m", false)).await;
    assert_eq!(r.status, 429, "{r:#?}");
    assert_enveloped(&r, "200 carrying an error");
    // The same in a stream: an error event before any content.
    script(&mock, "err2002-k1", {
        let mut f = FaultSpec::new();
        f.midstream_error_after = Some(0);
        f
    });
    let r = post_stream(
        &c,
        &base,
        "/v1/chat/completions",
        &chat("err2002/m", true),
        limit,
    )
    .await;
    // The in-band server_error (a 500) cooled the only connection: the spec's 429.
    assert_eq!(r.status, 429, "{}", r.everything());

    // --- Bodies that are not UTF-8: an error body is read lossily and classified; a 200 is
    // forwarded byte for byte.
    let bad_utf8: &[u8] =
        b"{\"error\":{\"message\":\"quota \xff\xfe exceeded\",\"type\":\"server_error\"}}";
    script(
        &mock,
        "utf8-k1",
        FaultSpec::raw(500, "application/json", bad_utf8),
    );
    let r = post(&c, &base, "/v1/chat/completions", &chat("utf8/m", false)).await;
    assert_eq!(
        (r.status, r.connection().as_str()),
        (200, "utf8-k2"),
        "{r:#?}"
    );
    script(
        &mock,
        "utf81-k1",
        FaultSpec::raw(500, "text/plain", &b"\xc3\x28\xa0\xa1 oops"[..]),
    );
    let r = post(&c, &base, "/v1/chat/completions", &chat("utf81/m", false)).await;
    // The 500 cooled the only connection: the spec's 429 for a cooling connection.
    assert_eq!(r.status, 429, "{r:#?}");
    assert_enveloped(&r, "non-UTF-8 error body");
    let ok_bytes: &[u8] =
        b"{\"id\":\"x\",\"object\":\"chat.completion\",\"choices\":[],\"note\":\"\xff\"}";
    script(
        &mock,
        "utf82-k1",
        FaultSpec::raw(200, "application/json", ok_bytes),
    );
    let resp = c
        .post(format!("{base}/v1/chat/completions"))
        .json(&chat("utf82/m", false))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(&resp.bytes().await.unwrap()[..], ok_bytes);

    // --- A gigantic Retry-After: capped at 30 days, never an overflow or a panic. The
    // request fails over; alone, the client is told at most 30 days. Each value must reach
    // huge-k1, so its cooldown is cleared before the next one.
    for value in [
        "99999999999",
        "1e30",
        "18446744073709551616",
        "Fri, 31 Dec 9999 23:59:59 GMT",
    ] {
        script(
            &mock,
            "huge-k1",
            FaultSpec::status(429).header("Retry-After", value),
        );
        let before = mock.stats().requests_for_key(&key("huge-k1"));
        let r = post(&c, &base, "/v1/chat/completions", &chat("huge/m", false)).await;
        assert_eq!(r.status, 200, "Retry-After {value}: {r:#?}");
        assert_eq!(
            mock.stats().requests_for_key(&key("huge-k1")),
            before + 1,
            "Retry-After {value} reached huge-k1"
        );
        let row = wait_cooling(&node, "huge-k1").await;
        let left = row["cooldownRemainingMs"].as_u64().unwrap_or(u64::MAX);
        assert!(left <= MAX_HINT_SECS * 1000, "Retry-After {value}: {row}");
        let cleared = send(
            c.post(format!("{}/api/resilience/cooldowns", node.admin_url()))
                .bearer_auth(MGMT_KEY)
                .json(&serde_json::json!({"connectionIds": ["huge-k1"]})),
        )
        .await;
        assert_eq!(cleared.status, 200, "{cleared:#?}");
        wait_connection(&node, "huge-k1", "the cleared cooldown", |row| {
            row["cooldownRemainingMs"] == 0
        })
        .await;
    }
    script(
        &mock,
        "huge1-k1",
        FaultSpec::status(429).header("Retry-After", "99999999999"),
    );
    let r = post(&c, &base, "/v1/chat/completions", &chat("huge1/m", false)).await;
    assert_eq!(r.status, 429, "{r:#?}");
    assert_enveloped(&r, "huge Retry-After");
    let secs = retry_after(&r);
    assert!(
        (1..=MAX_HINT_SECS).contains(&secs),
        "Retry-After {secs}: {r:#?}"
    );
    // The connection now cools; the next request is refused without reaching the upstream.
    wait_cooling(&node, "huge1-k1").await;
    let before = mock.stats().requests_total;
    let r = post(&c, &base, "/v1/chat/completions", &chat("huge1/m", false)).await;
    assert!(r.status == 429 || r.status == 503, "{r:#?}");
    assert!(retry_after(&r) <= MAX_HINT_SECS, "{r:#?}");
    assert_eq!(
        mock.stats().requests_total,
        before,
        "a cooling connection is not tried"
    );

    // --- Negative and garbage reset headers are ignored: the scaled backoff applies.
    let negative = FaultSpec::status(429)
        .header("Retry-After", "-5")
        .header("x-ratelimit-reset", "-1700000000")
        .header("x-ratelimit-reset-requests", "-3s")
        .header(
            "anthropic-ratelimit-requests-reset",
            "-0001-01-01T00:00:00Z",
        );
    script(&mock, "neg-k1", negative.clone());
    let r = post(&c, &base, "/v1/chat/completions", &chat("neg/m", false)).await;
    assert_eq!(
        (r.status, r.connection().as_str()),
        (200, "neg-k2"),
        "{r:#?}"
    );
    script(&mock, "neg1-k1", negative);
    let r = post(&c, &base, "/v1/chat/completions", &chat("neg1/m", false)).await;
    assert_eq!(r.status, 429, "{r:#?}");
    assert_enveloped(&r, "negative reset headers");
    // The garbage is not passed on, and the cooldown is the apikey backoff's first step
    // (seconds), nowhere near a parsed hint.
    if let Some(v) = r.header("retry-after") {
        assert!(
            v.parse::<u64>().is_ok_and(|s| (1..=60).contains(&s)),
            "{r:#?}"
        );
    }
    wait_cooling(&node, "neg1-k1").await;
    let r = post(&c, &base, "/v1/chat/completions", &chat("neg1/m", false)).await;
    assert_eq!(
        assert_enveloped(&r, "cooling after negative hints"),
        "connection_cooldown"
    );
    let reset = r.json()["error"]["reset_seconds"]
        .as_u64()
        .unwrap_or(u64::MAX);
    assert!((1..=60).contains(&reset), "cooldown {reset} s: {r:#?}");

    // --- An endless stream (content every 20 ms for minutes) that keeps delivering: the
    // attempt deadline (2.5 s) bounds an attempt only up to its commit point, so the stream
    // outlives it without an error event (only the watchdogs end a committed stream). The
    // client ends it here after 5 s.
    let mut endless = FaultSpec::new();
    endless.chunks = Some(10_000);
    endless.chunk_delay_ms = Some(20);
    script(&mock, "endless-k1", endless);
    let r = post_stream(
        &c,
        &base,
        "/v1/chat/completions",
        &chat("endless/m", true),
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.everything());
    assert!(r.timed_out, "the stream must still run: {}", r.everything());
    // The bound is the feature: content still arrives after the 2.5 s attempt deadline.
    assert!(
        r.chunk_times_ms.iter().any(|(ms, _)| *ms > 3_000),
        "no content after the attempt deadline: {:?}",
        r.chunk_times_ms.last()
    );
    assert!(!r.raw.contains("\"error\""), "{}", r.everything());
    // A stream that sends headers and then nothing at all: the readiness watchdog.
    let mut silent = FaultSpec::new();
    silent.stall_after_chunks = Some(0);
    silent.stall_ms = Some(20_000);
    script(&mock, "silent-k1", silent);
    let started = Instant::now();
    let r = post_stream(
        &c,
        &base,
        "/v1/chat/completions",
        &chat("silent/m", true),
        Duration::from_secs(30),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert!(
        r.status >= 500 || r.events().iter().any(SseEvent::is_error),
        "{}",
        r.everything()
    );

    assert_healthy(&node, "misbehaving upstreams").await;
    let r = post(&c, &base, "/v1/chat/completions", &chat("sse/m", false)).await;
    assert_eq!(r.status, 200, "still serving: {r:#?}");
    let log = node.log();
    assert!(!log.contains("panicked"), "a panic in the node:\n{log}");
}
