//! Upstream requests through a forward proxy named by the environment.
//!
//! Corporate networks reach providers only through an HTTP proxy, named the usual way
//! (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, with `NO_PROXY`). With one set, the node sends
//! every upstream request through it (docs/performance.md, "hyper's client instead of
//! reqwest"); without one, straight to the provider. These tests put a small forward proxy
//! (absolute-form requests, as RFC 9112 §3.2.2 has a client send them to a proxy) between the
//! node and the mock upstream and check what crosses it: JSON and streamed answers, `NO_PROXY`,
//! and a proxy that is gone, which must give the client a definite error, not a hang.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use switchyard_tests::harness::free_port;

use crate::error_semantics::{MGMT_KEY, prelude};
use crate::support::http::*;

const KEY: &str = "sk-egress-proxy-0001";

/// A forward proxy for plain-HTTP upstreams: it reads each connection's first request head,
/// records its request line, rewrites the absolute-form target to origin form and then
/// relays bytes both ways to the origin it named.
struct ForwardProxy {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl ForwardProxy {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let log = Arc::clone(&log);
                tokio::spawn(async move {
                    let _ = relay(client, log).await;
                });
            }
        });
        Self { port, seen, task }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn request_lines(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for ForwardProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One proxied connection: head, rewrite, then a plain byte relay (later requests on the
/// same keep-alive connection pass through in absolute form, which the origin accepts).
async fn relay(mut client: TcpStream, seen: Arc<Mutex<Vec<String>>>) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        let n = client.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if head.len() > 64 * 1024 {
            return Ok(());
        }
    };
    let text = String::from_utf8_lossy(&head[..end]).into_owned();
    let line = text.lines().next().unwrap_or_default().to_owned();
    seen.lock().unwrap().push(line.clone());
    let mut parts = line.splitn(3, ' ');
    let (method, target, version) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let Some(rest) = target.strip_prefix("http://") else {
        client
            .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
            .await?;
        return Ok(());
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut origin = TcpStream::connect(authority).await?;
    let path = if path.is_empty() { "/" } else { path };
    let after_line = &text[line.len()..];
    origin
        .write_all(format!("{method} {path} {version}{after_line}").as_bytes())
        .await?;
    origin.write_all(&head[end..]).await?;
    tokio::io::copy_bidirectional(&mut client, &mut origin).await?;
    Ok(())
}

async fn node_with_env(mock_url: &str, extra_env: &[(&str, &str)]) -> Node {
    let config = prelude()
        + &provider("p", "openai", mock_url, &["m"], "", "")
        + &connection("c", "p", "UP_KEY", "");
    let mut pairs = vec![("UP_KEY", KEY), ("SY_MGMT", MGMT_KEY)];
    pairs.extend_from_slice(extra_env);
    Node {
        process: start_node(config, env(&pairs)).await,
    }
}

struct Node {
    process: switchyard_tests::harness::NodeProcess,
}

impl Node {
    async fn chat(&self, stream: bool) -> Reply {
        post(
            &http(),
            &self.process.client_url(),
            "/v1/chat/completions",
            &chat("p/m", stream),
        )
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_and_streamed_answers_cross_the_proxy_the_environment_names() {
    let mock = mock(3).await;
    let proxy = ForwardProxy::start().await;
    let node = node_with_env(&mock.base_url(), &[("HTTP_PROXY", &proxy.url())]).await;

    let r = node.chat(false).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.connection(), "c");
    let r = node.chat(true).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert!(
        r.body.contains("[DONE]"),
        "stream did not end cleanly: {r:#?}"
    );

    let lines = proxy.request_lines();
    assert!(!lines.is_empty(), "nothing crossed the proxy");
    let expected = format!("POST {}/v1/chat/completions HTTP/1.1", mock.base_url());
    assert!(
        lines.iter().all(|l| l == &expected),
        "expected absolute-form requests to the mock ({expected}), saw {lines:?}"
    );
    assert_eq!(mock.stats().by_key.get(KEY).copied(), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_proxy_sends_the_upstream_request_direct() {
    let mock = mock(3).await;
    let proxy = ForwardProxy::start().await;
    let node = node_with_env(
        &mock.base_url(),
        &[("HTTP_PROXY", &proxy.url()), ("NO_PROXY", "127.0.0.1")],
    )
    .await;

    let r = node.chat(false).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(mock.stats().by_key.get(KEY).copied(), Some(1));
    assert!(
        proxy.request_lines().is_empty(),
        "NO_PROXY named the upstream's host, yet the proxy saw {:?}",
        proxy.request_lines()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_that_is_gone_gives_a_definite_error_and_nothing_reaches_the_upstream() {
    let mock = mock(3).await;
    // A port that was free a moment ago: nothing listens there.
    let gone = format!("http://127.0.0.1:{}", free_port().unwrap());
    let node = node_with_env(&mock.base_url(), &[("HTTP_PROXY", &gone)]).await;

    let started = std::time::Instant::now();
    let r = node.chat(false).await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "no definite answer in time"
    );
    // The refused connect is the connection's failure (it cools, as on a refused direct
    // connect), so with one connection the answer is the pool's: cooling, with its retry time.
    assert!(
        matches!(r.status, 429 | 502 | 503),
        "a refused proxy is an upstream failure: {r:#?}"
    );
    let body = r.json();
    assert!(
        body["error"]["type"].is_string() && body["error"]["code"].is_string(),
        "every error has a type and a code: {body}"
    );
    assert_eq!(mock.stats().by_key.get(KEY).copied().unwrap_or(0), 0);
}
