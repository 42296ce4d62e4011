//! HTTPS providers and HTTP/2: the node in front of the mock behind a TLS front that offers
//! `h2` and `http/1.1` by ALPN (`switchyard_mock::tls_front`), with a test certificate
//! authority the node trusts through the provider's `ca_file`.
//!
//! With `http_version = "auto"` (the default) concurrent streams to one provider share a few
//! HTTP/2 connections instead of one connection each; `"http1"` keeps the provider on
//! HTTP/1.1; a stream the provider resets (`RST_STREAM`) fails its own request with a definite
//! error and leaves the streams beside it on the same connection alone.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use futures_util::future::join_all;
use serde_json::Value;
use switchyard_tests::mock_upstream::tls_front::{Offer, TlsFront, test_certs};
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockHandle, MockUpstream};

use crate::support::http::*;

const KEY: &str = "sk-upstream-h2-0001";
const STREAMS: usize = 40;

/// The mock with streams slow enough (8 chunks, 40 ms apart) that the test's requests are
/// all open at once.
async fn slow_mock() -> MockHandle {
    MockUpstream::start(MockConfig {
        chunks: 8,
        chunk_delay: Duration::from_millis(40),
        ..MockConfig::default()
    })
    .await
    .expect("mock upstream starts")
}

async fn front(mock: &MockHandle, offer: Offer) -> TlsFront {
    TlsFront::start(
        "127.0.0.1:0".parse().unwrap(),
        mock.addr(),
        test_certs::SERVER_PEM.as_bytes(),
        test_certs::SERVER_KEY.as_bytes(),
        offer,
    )
    .await
    .expect("TLS front starts")
}

/// A node with one worker and one provider at `front`, trusting the test authority;
/// `extra` holds more lines of the provider table.
async fn node(
    front: &TlsFront,
    ca: &std::path::Path,
    extra: &str,
) -> switchyard_tests::harness::NodeProcess {
    let provider_extra = format!("ca_file = {:?}\n{extra}", ca.display().to_string());
    let config = "[server]\nworkers = 1\n".to_owned()
        + &open_auth_no_queue()
        + &provider(
            "p",
            "openai",
            &front.base_url(),
            &["m", "reset-me"],
            &provider_extra,
            "",
        )
        + &connection("c", "p", "UP_KEY", "");
    start_node(config, env(&[("UP_KEY", KEY)])).await
}

fn ca_file() -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), test_certs::CA_PEM).unwrap();
    file
}

/// `n` concurrent streamed chats for `model`; each reply.
async fn streams(base: &str, model: &str, n: usize) -> Vec<Reply> {
    let client = http();
    let body = chat(model, true);
    join_all((0..n).map(|_| post(&client, base, "/v1/chat/completions", &body))).await
}

fn assert_complete(replies: &[Reply]) {
    for r in replies {
        assert_eq!(r.status, 200, "{r:#?}");
        assert!(
            r.body.contains("[DONE]"),
            "stream did not end cleanly: {r:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_streams_to_an_h2_provider_share_a_few_connections() {
    let mock = slow_mock().await;
    let front = front(&mock, Offer::H2AndHttp1).await;
    let ca = ca_file();
    let node = node(&front, ca.path(), "").await;

    let replies = streams(&node.client_url(), "p/m", STREAMS).await;
    assert_complete(&replies);
    let peak = mock.stats();
    assert!(peak.requests_total >= STREAMS as u64, "{peak:?}");
    // One worker, 40 streams, at most 100 per connection: one connection (two if a
    // connection closed under it), and never one per stream.
    let (h2, h1) = (front.h2_connections(), front.http1_connections());
    assert!(
        (1..=2).contains(&h2),
        "h2 connections: {h2}, http/1.1: {h1}"
    );
    assert_eq!(h1, 0, "no HTTP/1.1 connection to an h2 provider");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_set_to_http1_is_never_spoken_to_in_h2() {
    let mock = slow_mock().await;
    let front = front(&mock, Offer::H2AndHttp1).await;
    let ca = ca_file();
    let node = node(&front, ca.path(), "http_version = \"http1\"\n").await;

    let replies = streams(&node.client_url(), "p/m", 8).await;
    assert_complete(&replies);
    assert_eq!(front.h2_connections(), 0);
    assert!(front.http1_connections() >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_offers_only_http1_is_served_over_http1() {
    let mock = slow_mock().await;
    let front = front(&mock, Offer::Http1).await;
    let ca = ca_file();
    let node = node(&front, ca.path(), "").await;

    let replies = streams(&node.client_url(), "p/m", 4).await;
    assert_complete(&replies);
    assert_eq!(front.h2_connections(), 0);
    assert!(front.http1_connections() >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_provider_certificate_is_a_definite_error() {
    let mock = slow_mock().await;
    let front = front(&mock, Offer::H2AndHttp1).await;
    // No ca_file: the platform's roots do not know the test authority.
    let config = "[server]\nworkers = 1\n".to_owned()
        + &open_auth_no_queue()
        + &provider("p", "openai", &front.base_url(), &["m"], "", "")
        + &connection("c", "p", "UP_KEY", "");
    let node = start_node(config, env(&[("UP_KEY", KEY)])).await;
    let r = post(
        &http(),
        &node.client_url(),
        "/v1/chat/completions",
        &chat("p/m", false),
    )
    .await;
    // A definite error: the one connection failed its handshake and cools, so the node
    // answers as it does for any connection failure (429 `connection_cooldown` here).
    assert!(r.status >= 400, "{r:#?}");
    assert!(r.json()["error"]["code"].is_string(), "{r:#?}");
    assert_eq!(mock.stats().requests_total, 0, "nothing reached the mock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_stream_fails_its_own_request_and_not_the_others() {
    let mock = slow_mock().await;
    // Every request for `reset-me` is cut after two chunks (a TCP reset behind the front,
    // which the front passes on as RST_STREAM on its HTTP/2 connection to the node).
    mock.script(FaultSpec {
        reset_after_chunks: Some(2),
        ..FaultSpec::new().for_model("reset-me")
    })
    .unwrap();
    let front = front(&mock, Offer::H2AndHttp1).await;
    let ca = ca_file();
    let node = node(&front, ca.path(), "").await;
    let base = node.client_url();

    // Eight good streams, open before the reset one starts, to the end after it.
    let client = http();
    let mut open = Vec::new();
    for _ in 0..8 {
        let resp = client
            .post(format!("{base}/v1/chat/completions"))
            .json(&chat("p/m", true))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        open.push(resp);
    }
    let bad = tokio::time::timeout(
        Duration::from_secs(20),
        post(
            &client,
            &base,
            "/v1/chat/completions",
            &chat("p/reset-me", false),
        ),
    )
    .await
    .expect("the reset request is answered, not left hanging");
    // A definite error (the connection that failed it cools: 429 `connection_cooldown`).
    assert!(bad.status >= 400, "{bad:#?}");
    let err: Value = bad.json();
    assert!(err["error"]["code"].is_string(), "{err}");
    assert!(err["error"]["type"].is_string(), "{err}");

    for resp in open {
        let body = resp.text().await.expect("the good stream reads to its end");
        assert!(body.contains("[DONE]"), "a good stream was cut: {body}");
    }
    let h2 = front.h2_connections();
    assert!((1..=2).contains(&h2), "h2 connections: {h2}");
    assert_eq!(front.http1_connections(), 0);
}
