//! Static configuration of a mock upstream: what a request gets when no fault is scripted,
//! plus the bounds that keep a long-running mock from growing without limit.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

/// How a [`super::MockUpstream`] behaves when no fault matches a request.
///
/// Every field is public so tests can use struct-update syntax:
/// `MockConfig { chunks: 3, ..MockConfig::default() }`.
#[derive(Debug, Clone)]
pub struct MockConfig {
    /// Address to bind. Defaults to `127.0.0.1:0` (an ephemeral loopback port).
    pub listen: SocketAddr,
    /// Content chunks per streamed response (and words in a non-streamed one); clamped to
    /// [`super::MAX_CHUNKS`].
    pub chunks: u32,
    /// Pause between two content frames of a stream.
    pub chunk_delay: Duration,
    /// Pause between the stream preamble (role delta, `message_start`, `response.created`)
    /// and the first content frame.
    pub first_chunk_delay: Duration,
    /// Model ids listed by `GET /v1/models`.
    pub models: Vec<String>,
    /// Reject requests that carry no API key with a 401 in the route's error format.
    pub require_key: bool,
    /// When non-empty, only these keys are accepted; any other key gets a 401.
    pub valid_keys: Vec<String>,
    /// Request header sets remembered per API key (newest last).
    pub header_history: usize,
    /// Request bodies remembered in total (newest last).
    pub body_history: usize,
    /// Bytes of each remembered request body; the rest is dropped.
    pub body_capture_limit: usize,
    /// Largest request body accepted; larger ones get a 413.
    pub max_request_body: usize,
    /// Longest a scripted stall may hang when the client stays connected; also caps every
    /// scripted or configured delay.
    pub max_stall: Duration,
    /// How long a connection may sit idle (no request being served, none arriving) before the
    /// mock closes it; checked four times per timeout, so it closes after between 1 and 1.25
    /// times this. Keep it above the client's pool idle timeout so a pooled connection is
    /// never closed under it.
    pub idle_timeout: Duration,
    /// Requests remembered with their arrival time ([`super::MockHandle::arrivals`]); 0 (the
    /// default) keeps no log, so benchmarks pay nothing for it.
    pub arrival_log: usize,
    /// Play a model that asks for one tool call and then answers ([`super::AgentScript`]);
    /// scripted faults still take precedence.
    pub agent: Option<super::AgentScript>,
    /// Serve `POST /v1/responses`. `false` answers it like a chat-only server (vLLM's
    /// FastAPI): `404 {"detail":"Not Found"}`.
    pub serve_responses: bool,
}

impl Default for MockConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            chunks: 20,
            chunk_delay: Duration::ZERO,
            first_chunk_delay: Duration::ZERO,
            models: vec![
                "gpt-4o-mini".to_owned(),
                "gpt-4.1".to_owned(),
                "claude-sonnet-4-5".to_owned(),
                "mock-model".to_owned(),
            ],
            require_key: false,
            valid_keys: Vec::new(),
            header_history: 16,
            body_history: 32,
            body_capture_limit: 16 * 1024,
            max_request_body: 32 * 1024 * 1024,
            max_stall: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(120),
            arrival_log: 0,
            agent: None,
            serve_responses: true,
        }
    }
}
