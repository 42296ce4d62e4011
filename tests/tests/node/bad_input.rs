//! The bad-input matrix against the real node binary: every client mistake on the client and
//! admin listeners gets its documented status and a JSON error with `type` and `code`, the
//! node stays healthy, and none of it is logged at ERROR level (a client's mistake is not the
//! operator's problem).
//!
//! One exception is documented in `docs/reliability.md`: requests the HTTP/1 parser itself
//! refuses (more than 96 headers) are answered by actix-http before any handler runs, with a
//! bare 431 and no body.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_tests::harness::NodeProcess;

use crate::support::http::*;

const CLIENT_KEY: &str = "sy-bad-input-client-3e9d1c7a";
const MGMT_KEY: &str = "sy-bad-input-mgmt-8b2f6a40";
const UP_KEY: &str = "sk-bad-input-upstream-5a7c";
const MAX_BODY: usize = 4096;

async fn start() -> (switchyard_tests::mock_upstream::MockHandle, NodeProcess) {
    let mock = mock(2).await;
    let mut config = format!(
        "[server]\nmax_body_bytes = {MAX_BODY}\n\n[auth]\nrequire_api_key = true\n\
         management_key_env = \"MGMT_KEY\"\n\n[[api_keys]]\nid = \"team\"\nkey_env = \"CLIENT_KEY\"\n"
    );
    config.push_str(&queue_off());
    config.push_str(&provider("p", "openai", &mock.base_url(), &["m"], "", ""));
    config.push_str(&connection("p-k1", "p", "UP_KEY", ""));
    let node = start_node(
        config,
        env(&[
            ("CLIENT_KEY", CLIENT_KEY),
            ("MGMT_KEY", MGMT_KEY),
            ("UP_KEY", UP_KEY),
        ]),
    )
    .await;
    (mock, node)
}

/// Asserts an Anthropic-envelope error.
fn assert_anthropic(r: &Reply, status: u16, error_type: &str, code: &str) {
    assert_eq!(r.status, status, "{r:#?}");
    let v = r.json();
    assert_eq!(v["type"], "error", "{v}");
    assert_eq!(v["error"]["type"], error_type, "{v}");
    assert_eq!(v["error"]["code"], code, "{v}");
}

/// A raw HTTP/1.1 exchange, for requests a client library would refuse or normalise (dot
/// segments, invalid UTF-8, hundreds of headers). Returns `(status, body)`.
fn raw_http(addr: SocketAddr, request: &[u8]) -> (u16, String) {
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut buf = Vec::new();
    // The request says `Connection: close`; reading to EOF is bounded by the read timeout.
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

fn raw_post(addr: SocketAddr, path: &[u8], auth: &str, body: &[u8]) -> (u16, String) {
    let mut req = Vec::new();
    req.extend_from_slice(b"POST ");
    req.extend_from_slice(path);
    req.extend_from_slice(
        format!(
            " HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {auth}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    req.extend_from_slice(body);
    raw_http(addr, &req)
}

fn assert_raw_error(what: &str, (status, body): &(u16, String), want: u16, code: &str) {
    assert_eq!(*status, want, "{what}: {body}");
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{what}: {e}: {body}"));
    assert_eq!(v["error"]["code"], code, "{what}: {v}");
    assert!(v["error"]["type"].is_string(), "{what}: {v}");
}

/// Every JSON log line at ERROR level, and any line that is not JSON (a panic message).
fn error_lines(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| match serde_json::from_str::<Value>(l) {
            Ok(v) => v["level"]
                .as_str()
                .is_some_and(|lv| lv.eq_ignore_ascii_case("error")),
            Err(_) => true,
        })
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_api_bad_input() {
    let (_mock, node) = start().await;
    let c = http();
    let base = node.client_url();
    let chat_url = format!("{base}/v1/chat/completions");
    let msg_url = format!("{base}/v1/messages");
    let ok = json!({"model": "p/m", "messages": [{"role": "user", "content": "hi"}]});
    let with_key = |rb: reqwest::RequestBuilder| rb.bearer_auth(CLIENT_KEY);

    // Control: a good request works.
    let r = send(with_key(c.post(&chat_url)).json(&ok)).await;
    assert_eq!(r.status, 200, "{r:#?}");

    // Keys: missing, wrong, an admin key, a key with invalid UTF-8 bytes.
    send(c.post(&chat_url).json(&ok)).await.assert_error(
        401,
        "authentication_error",
        "invalid_api_key",
    );
    send(c.post(&chat_url).bearer_auth("sy-wrong").json(&ok))
        .await
        .assert_error(401, "authentication_error", "invalid_api_key");
    send(c.post(&chat_url).bearer_auth(MGMT_KEY).json(&ok))
        .await
        .assert_error(401, "authentication_error", "invalid_api_key");
    let bad_bytes = reqwest::header::HeaderValue::from_bytes(b"Bearer \xff\xfe").unwrap();
    send(
        c.post(&chat_url)
            .header("authorization", bad_bytes)
            .json(&ok),
    )
    .await
    .assert_error(401, "authentication_error", "invalid_api_key");
    let r = send(c.post(&msg_url).header("x-api-key", "sy-wrong").json(&ok)).await;
    assert_anthropic(&r, 401, "authentication_error", "invalid_api_key");

    // Content type: wrong, missing (checked before the key).
    let body = ok.to_string();
    send(
        with_key(c.post(&chat_url))
            .header("content-type", "text/plain")
            .body(body.clone()),
    )
    .await
    .assert_error(415, "invalid_request_error", "unsupported_media_type");
    send(c.post(&chat_url).body(body.clone()))
        .await
        .assert_error(415, "invalid_request_error", "unsupported_media_type");
    let r = send(
        c.post(&msg_url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body("model=x"),
    )
    .await;
    assert_anthropic(&r, 415, "invalid_request_error", "unsupported_media_type");

    // Oversized bodies: declared by Content-Length, and chunked without one.
    let big = format!(
        r#"{{"model":"p/m","messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(MAX_BODY)
    );
    let json_post = |url: &str| with_key(c.post(url)).header("content-type", "application/json");
    send(json_post(&chat_url).body(big.clone()))
        .await
        .assert_error(413, "invalid_request_error", "payload_too_large");
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        big.as_bytes().chunks(512).map(|c| Ok(c.to_vec())).collect();
    let stream = reqwest::Body::wrap_stream(futures_util::stream::iter(chunks));
    send(json_post(&chat_url).body(stream)).await.assert_error(
        413,
        "invalid_request_error",
        "payload_too_large",
    );
    let r = send(json_post(&msg_url).body(big.clone())).await;
    assert_anthropic(&r, 413, "request_too_large", "payload_too_large");

    // Malformed JSON, wrong shapes, invalid UTF-8.
    for (what, body, code) in [
        ("truncated", r#"{"model":"p/m","#.to_owned(), "invalid_json"),
        ("not an object", "[1,2]".to_owned(), "invalid_json"),
        (
            "trailing garbage",
            r#"{"model":"p/m"} x"#.to_owned(),
            "invalid_json",
        ),
        ("empty", String::new(), "invalid_json"),
        ("no model", r#"{"messages":[]}"#.to_owned(), "missing_model"),
        (
            "numeric model",
            r#"{"model":7}"#.to_owned(),
            "invalid_model",
        ),
        (
            "huge model",
            format!(r#"{{"model":"{}"}}"#, "m".repeat(600)),
            "invalid_model",
        ),
        (
            "stream not bool",
            r#"{"model":"p/m","stream":"yes"}"#.to_owned(),
            "invalid_parameter",
        ),
        (
            // Deeper than serde_json's limit: not JSON the full parse accepts, whatever the
            // field (the scan refuses what the full parse refuses).
            "deeply nested model",
            format!(r#"{{"model":{}{}}}"#, "[".repeat(1500), "]".repeat(1500)),
            "invalid_json",
        ),
        (
            "unbalanced nesting",
            format!(r#"{{"model":"p/m","x":{}}}"#, "[".repeat(2000)),
            "invalid_json",
        ),
    ] {
        let r = send(json_post(&chat_url).body(body)).await;
        assert_eq!(r.status, 400, "{what}: {r:#?}");
        r.assert_error(400, "invalid_request_error", code);
    }
    let r = send(json_post(&chat_url).body(b"{\"model\":\"p/\xff\"}".to_vec())).await;
    r.assert_error(400, "invalid_request_error", "invalid_json");
    let r = send(json_post(&msg_url).body("{")).await;
    assert_anthropic(&r, 400, "invalid_request_error", "invalid_json");

    // Deep nesting in a field the node does not read is refused too: an upstream's naive
    // parser must never see it (malformed_bodies.rs checks that nothing reaches the mock).
    let deep = format!(
        r#"{{"model":"p/m","messages":[{{"role":"user","content":"hi"}}],"x":{}{}}}"#,
        "[".repeat(1500),
        "]".repeat(1500)
    );
    let r = send(json_post(&chat_url).body(deep)).await;
    r.assert_error(400, "invalid_request_error", "invalid_json");

    // Unknown fields in a client body are the provider's business: forwarded, answered.
    let r = send(
        with_key(c.post(&chat_url))
            .json(&json!({"model": "p/m", "messages": [], "no_such_field": {"a": [1, -1.5e308]}})),
    )
    .await;
    assert_eq!(r.status, 200, "{r:#?}");

    // Wrong methods: 405 with `Allow`, in the route's envelope; unknown paths 404.
    let r = send(with_key(c.get(&chat_url))).await;
    r.assert_error(405, "invalid_request_error", "method_not_allowed");
    assert_eq!(r.header("allow"), Some("POST"), "{r:#?}");
    let r = send(with_key(c.delete(&msg_url))).await;
    assert_anthropic(&r, 405, "invalid_request_error", "method_not_allowed");
    let r = send(with_key(c.post(format!("{base}/v1/models"))).json(&ok)).await;
    r.assert_error(405, "invalid_request_error", "method_not_allowed");
    assert_eq!(r.header("allow"), Some("GET"), "{r:#?}");
    send(with_key(c.post(format!("{base}/v1/../etc/passwd"))).json(&ok))
        .await
        .assert_error(404, "invalid_request_error", "not_found");

    // Raw requests: a literal dot-segment path and an invalid UTF-8 path are unknown routes.
    let raw = raw_post(
        node.client,
        b"/v1/../v1/chat/completions",
        CLIENT_KEY,
        b"{}",
    );
    assert_raw_error("dot segments", &raw, 404, "not_found");
    let raw = raw_post(node.client, b"/v1/chat/completions%ff", CLIENT_KEY, b"{}");
    assert_raw_error("percent-encoded 0xff", &raw, 404, "not_found");

    // Hundreds of headers: refused by the HTTP parser itself (bare 431, see the module docs).
    let mut req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {}\r\n",
        node.client
    );
    for i in 0..200 {
        req.push_str(&format!("x-filler-{i}: {i}\r\n"));
    }
    req.push_str("Content-Length: 2\r\nConnection: close\r\n\r\n{}");
    let (status, _) = raw_http(node.client, req.as_bytes());
    assert_eq!(status, 431, "too many headers");
    // 90 headers are fine and reach the handler (which then wants a key).
    let mut rb = c.post(&chat_url).json(&ok);
    for i in 0..90 {
        rb = rb.header(format!("x-filler-{i}"), "v");
    }
    send(rb)
        .await
        .assert_error(401, "authentication_error", "invalid_api_key");

    assert_healthy(&node, "client bad input").await;
    let r = send(with_key(c.post(&chat_url)).json(&ok)).await;
    assert_eq!(r.status, 200, "still serving: {r:#?}");
    let log = node.wait_for_log(Duration::from_millis(300), |_| false);
    let errors = error_lines(&log);
    assert!(
        errors.is_empty(),
        "ERROR lines for client mistakes:\n{}",
        errors.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_api_bad_input() {
    let (_mock, node) = start().await;
    let c = http();
    let base = node.admin_url();
    let url = |p: &str| format!("{base}{p}");
    let admin = |rb: reqwest::RequestBuilder| rb.bearer_auth(MGMT_KEY);

    // Control.
    let r = send(admin(c.get(url("/api/resilience")))).await;
    assert_eq!(r.status, 200, "{r:#?}");

    // Keys: missing, wrong, a client key.
    send(c.get(url("/api/resilience"))).await.assert_error(
        401,
        "authentication_error",
        "missing_management_key",
    );
    send(c.get(url("/api/resilience")).bearer_auth("nope"))
        .await
        .assert_error(401, "authentication_error", "invalid_management_key");
    send(c.get(url("/api/resilience")).bearer_auth(CLIENT_KEY))
        .await
        .assert_error(403, "permission_error", "client_key_not_allowed");
    send(
        c.post(url("/api/resilience/reset"))
            .bearer_auth(CLIENT_KEY)
            .json(&json!({})),
    )
    .await
    .assert_error(403, "permission_error", "client_key_not_allowed");

    // Path traversal and odd ids in the reinstate route.
    for id in [
        "..%2F..%2Fetc",
        "..%2f..%2fetc%2fpasswd",
        "a%2Fb",
        "a%00b",
        "%252e%252e",
    ] {
        let r = send(
            admin(c.post(url(&format!("/api/resilience/connections/{id}/reinstate"))))
                .json(&json!({})),
        )
        .await;
        r.assert_error(400, "invalid_request_error", "invalid_id");
    }
    let raw = {
        let req = format!(
            "POST /api/resilience/connections/../reinstate HTTP/1.1\r\nHost: {}\r\n\
             Authorization: Bearer {MGMT_KEY}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            node.admin
        );
        raw_http(node.admin, req.as_bytes())
    };
    assert_raw_error("literal ..", &raw, 400, "invalid_id");
    // `%2e%2e` is a dot segment to URL libraries (reqwest would resolve it away): raw.
    let raw = raw_http(
        node.admin,
        format!(
            "POST /api/resilience/connections/%2e%2e/reinstate HTTP/1.1\r\nHost: {}\r\n\
             Authorization: Bearer {MGMT_KEY}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            node.admin
        )
        .as_bytes(),
    );
    assert_raw_error("%2e%2e", &raw, 400, "invalid_id");
    send(admin(c.post(url("/api/resilience/connections/nope/reinstate"))).json(&json!({})))
        .await
        .assert_error(404, "invalid_request_error", "connection_not_found");

    // Wrong methods.
    for (method, path) in [
        (reqwest::Method::DELETE, "/api/resilience"),
        (
            reqwest::Method::GET,
            "/api/resilience/connections/p-k1/reinstate",
        ),
        (reqwest::Method::PUT, "/api/rate-limits"),
        (reqwest::Method::POST, "/healthz"),
    ] {
        let r = send(admin(c.request(method.clone(), url(path)))).await;
        assert_eq!(r.status, 405, "{method} {path}: {r:#?}");
        r.assert_error(405, "invalid_request_error", "method_not_allowed");
    }

    // Settings patches: unknown fields, negative, fractional and overflowing numbers, wrong
    // types, malformed JSON, deep nesting — all 400, nothing applied.
    let patch = |body: String| {
        admin(c.patch(url("/api/resilience")))
            .header("content-type", "application/json")
            .body(body)
    };
    let mut wrong = Vec::new();
    for (what, body, code) in [
        (
            "unknown field",
            r#"{"provider_breaker":{"apikey":{"failure_treshold":2}}}"#.to_owned(),
            "invalid_settings",
        ),
        (
            "unknown section",
            r#"{"nope":{}}"#.to_owned(),
            "invalid_settings",
        ),
        (
            "negative",
            r#"{"provider_breaker":{"apikey":{"failure_threshold":-1}}}"#.to_owned(),
            "invalid_settings",
        ),
        (
            "negative ms",
            r#"{"provider_breaker":{"apikey":{"cooldown_ms":-5000}}}"#.to_owned(),
            "invalid_settings",
        ),
        (
            "u64 overflow",
            r#"{"provider_breaker":{"apikey":{"cooldown_ms":18446744073709551616}}}"#.to_owned(),
            "invalid_settings",
        ),
        (
            "u32 overflow",
            r#"{"provider_breaker":{"apikey":{"failure_threshold":4294967296}}}"#.to_owned(),
            "invalid_settings",
        ),
        (
            "exponent",
            r#"{"provider_breaker":{"apikey":{"failure_threshold":1e300}}}"#.to_owned(),
            "invalid_settings",
        ),
        (
            "fraction",
            r#"{"provider_breaker":{"apikey":{"failure_threshold":2.5}}}"#.to_owned(),
            "invalid_settings",
        ),
        (
            "string number",
            r#"{"request_queue":{"max_wait_ms":"soon"}}"#.to_owned(),
            "invalid_settings",
        ),
        (
            "truncated",
            r#"{"provider_breaker":"#.to_owned(),
            "invalid_settings",
        ),
        ("not an object", "[]".to_owned(), "invalid_settings"),
        (
            "deep nesting",
            format!("{}{}", "[".repeat(3000), "]".repeat(3000)),
            "invalid_settings",
        ),
        (
            "trailing garbage",
            r#"{"provider_breaker":{}} {"#.to_owned(),
            "invalid_settings",
        ),
    ] {
        let r = send(patch(body)).await;
        let v: Value = serde_json::from_str(&r.body).unwrap_or(Value::Null);
        if r.status != 400 || v["error"]["code"] != code || !v["error"]["type"].is_string() {
            wrong.push(format!("{what}: {} {}", r.status, r.body));
        }
    }
    assert!(wrong.is_empty(), "patch matrix:\n{}", wrong.join("\n"));
    let r = send(patch(
        r#"{"provider_breaker":{"apikey":{"failure_threshold":1e300}}}"#.into(),
    ))
    .await;
    assert!(
        r.json()["error"]["details"].is_array(),
        "details name the field: {r:#?}"
    );
    // Invalid UTF-8 in a JSON body.
    let r = send(
        admin(c.patch(url("/api/resilience")))
            .header("content-type", "application/json")
            .body(b"{\"provider_breaker\":\"\xff\"}".to_vec()),
    )
    .await;
    assert_eq!(r.status, 400, "{r:#?}");
    assert!(r.json()["error"]["code"].is_string(), "{r:#?}");
    // Nothing was applied.
    let settings = send(admin(c.get(url("/api/resilience")))).await.json();
    assert_eq!(
        settings["persisted"],
        json!({}),
        "a rejected patch must change nothing: {settings}"
    );

    // Wrong content type and oversized bodies.
    send(
        admin(c.patch(url("/api/resilience")))
            .header("content-type", "text/plain")
            .body("{}"),
    )
    .await
    .assert_error(415, "invalid_request_error", "unsupported_media_type");
    let big = format!(r#"{{"connectionIds":["{}"]}}"#, "a".repeat(70 * 1024));
    send(
        admin(c.post(url("/api/resilience/cooldowns")))
            .header("content-type", "application/json")
            .body(big),
    )
    .await
    .assert_error(413, "invalid_request_error", "payload_too_large");
    // Too many ids, and ids that are not strings.
    let ids: Vec<String> = (0..1001).map(|i| format!("c{i}")).collect();
    let r =
        send(admin(c.post(url("/api/resilience/cooldowns"))).json(&json!({"connectionIds": ids})))
            .await;
    assert_eq!(r.status, 400, "{r:#?}");
    let r = send(
        admin(c.post(url("/api/resilience/cooldowns"))).json(&json!({"connectionIds": [1, 2]})),
    )
    .await;
    r.assert_error(400, "invalid_request_error", "invalid_request");
    // A negative limit in a query.
    let r = send(admin(c.get(url("/api/resilience/connections?limit=-1")))).await;
    r.assert_error(400, "invalid_request_error", "invalid_query");

    assert_healthy(&node, "admin bad input").await;
    let log = node.wait_for_log(Duration::from_millis(300), |_| false);
    let errors = error_lines(&log);
    assert!(
        errors.is_empty(),
        "ERROR lines for client mistakes:\n{}",
        errors.join("\n")
    );
}
