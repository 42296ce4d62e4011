//! Scripted faults: what a test asks the mock to do wrong, which requests it applies to, and
//! the FIFO queue that hands each matching request the oldest applicable fault.
//!
//! The same [`FaultSpec`] is used in process (through [`super::MockHandle::script`]) and over
//! HTTP (`POST /__mock/script`), so black-box tests of the binary and in-process tests describe
//! faults identically.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::lock;

/// The provider routes the mock serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Route {
    /// `POST /v1/chat/completions` (OpenAI Chat Completions).
    ChatCompletions,
    /// `POST /v1/messages` (Anthropic Messages).
    Messages,
    /// `POST /v1/responses` (OpenAI Responses).
    Responses,
    /// `GET /v1/models` (OpenAI model list).
    Models,
}

impl Route {
    /// Every route, in a fixed order.
    pub const ALL: [Route; 4] = [
        Route::ChatCompletions,
        Route::Messages,
        Route::Responses,
        Route::Models,
    ];

    /// The label used in stats and accepted in a fault's `match.route`.
    pub fn label(self) -> &'static str {
        match self {
            Route::ChatCompletions => "chat_completions",
            Route::Messages => "messages",
            Route::Responses => "responses",
            Route::Models => "models",
        }
    }

    /// The request path of the route.
    pub fn path(self) -> &'static str {
        match self {
            Route::ChatCompletions => "/v1/chat/completions",
            Route::Messages => "/v1/messages",
            Route::Responses => "/v1/responses",
            Route::Models => "/v1/models",
        }
    }

    /// Accepts a label (`chat_completions`), a path (`/v1/chat/completions`) or the short
    /// alias `chat`.
    pub fn parse(text: &str) -> Option<Route> {
        let text = text.trim();
        Route::ALL
            .into_iter()
            .find(|r| r.label() == text || r.path() == text)
            .or(match text {
                "chat" => Some(Route::ChatCompletions),
                _ => None,
            })
    }

    /// Whether errors on this route use Anthropic's envelope rather than OpenAI's.
    pub fn is_anthropic(self) -> bool {
        self == Route::Messages
    }
}

/// Which requests a fault applies to. Absent fields match anything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultMatch {
    /// Route label or path, see [`Route::parse`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// The API key the request carried (`Authorization: Bearer` or `x-api-key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// The `model` field of the request body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl FaultMatch {
    fn matches(&self, route: Route, api_key: Option<&str>, model: Option<&str>) -> bool {
        let route_ok = match &self.route {
            None => true,
            Some(r) => Route::parse(r) == Some(route),
        };
        let key_ok = match &self.api_key {
            None => true,
            Some(k) => api_key == Some(k.as_str()),
        };
        let model_ok = match &self.model {
            None => true,
            Some(m) => model == Some(m.as_str()),
        };
        route_ok && key_ok && model_ok
    }
}

/// A scripted tool call the mock answers with, after any text content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallSpec {
    /// Function (tool) name.
    pub name: String,
    /// Arguments as a JSON object; sent as a JSON string where the format wants one.
    #[serde(default = "empty_object")]
    pub arguments: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One scripted fault. All fields are optional; a fault with only `match` and `times` makes
/// matching requests succeed normally but still counts them as faulted (useful for headers).
///
/// Stream-shaping fields count *content frames*: reasoning, text and tool-argument deltas.
/// Preamble frames (OpenAI's role delta, Anthropic's `message_start` / `content_block_start`
/// / `ping`, the Responses `response.created` family) are sent right after the headers and
/// are not counted.
///
/// On non-streamed requests: `stall_after_chunks` hangs before the headers,
/// `reset_after_chunks` sends the headers and half of the body then resets,
/// `eof_before_content` sends the headers and closes before any body byte, and
/// `midstream_error_after` and `eof_after_chunks` are ignored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// Which requests the fault applies to.
    #[serde(rename = "match", default)]
    pub matcher: FaultMatch,
    /// How many matching requests the fault applies to; absent means every one, forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
    /// Response status. A non-2xx status answers with `body` or the route's error envelope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Response body for an error status: a JSON string is sent verbatim as text, any other
    /// JSON value is sent as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
    /// Response body sent byte for byte, for what `body` cannot express: invalid UTF-8, a
    /// malformed SSE stream, a truncated JSON document. Sent with `status` (default 200) and
    /// `content_type`, on streamed and non-streamed requests alike; wins over `body`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_body: Option<Vec<u8>>,
    /// `Content-Type` of `raw_body` (default `application/octet-stream`) or of `body`
    /// (default: JSON for a JSON value, plain text for a string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// Extra response headers (for example `Retry-After`, `x-ratelimit-reset`,
    /// `anthropic-ratelimit-requests-reset`), on error and normal responses alike.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Delay before the response headers. Every delay is capped by the configured maximum
    /// stall.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_before_headers_ms: Option<u64>,
    /// Delay between the preamble and the first content frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_chunk_delay_ms: Option<u64>,
    /// Delay between content frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_delay_ms: Option<u64>,
    /// Text content frames (overrides the configured count; at most [`MAX_CHUNKS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<u32>,
    /// Send this many content frames, then hang until the client goes away, `stall_ms` or
    /// the configured maximum stall passes; after the cap the body ends without its trailer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_after_chunks: Option<u32>,
    /// How long a stall lasts at most (capped by the configured maximum stall).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_ms: Option<u64>,
    /// Stream only reasoning (OpenAI `reasoning_content`, Anthropic thinking) frames and no
    /// text; the stream then ends normally.
    #[serde(default, skip_serializing_if = "is_false")]
    pub reasoning_only: bool,
    /// Reasoning frames sent before the text content (default 0; 4 with `reasoning_only`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_chunks: Option<u32>,
    /// Send this many content frames, then an in-band error event in the route's format,
    /// and end the body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub midstream_error_after: Option<u32>,
    /// Send this many content frames, then end the body cleanly without the stream's
    /// terminal event (`[DONE]`, `message_stop`, `response.completed`): a truncated stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eof_after_chunks: Option<u32>,
    /// Reset the TCP connection (RST) before any response byte.
    #[serde(default, skip_serializing_if = "is_false")]
    pub reset_before_body: bool,
    /// Send this many content frames, then reset the TCP connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_after_chunks: Option<u32>,
    /// Answer HTTP 200 with a JSON body that is the route's error envelope.
    #[serde(default, skip_serializing_if = "is_false")]
    pub error_body_200: bool,
    /// Send SSE headers and only keep-alive pings or comments, then end the body.
    #[serde(default, skip_serializing_if = "is_false")]
    pub eof_before_content: bool,
    /// Error `type` in generated error envelopes and in-band error events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// Error `message` in generated error envelopes and in-band error events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Error `code` in generated OpenAI error envelopes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// Answer with a tool call after the text content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<ToolCallSpec>,
}

impl FaultSpec {
    /// A fault with no effect yet; chain the builder methods below.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fault that answers with `status` and the route's error envelope.
    pub fn status(status: u16) -> Self {
        Self {
            status: Some(status),
            ..Self::default()
        }
    }

    /// A fault that answers `status` with `body` byte for byte as `content_type`.
    pub fn raw(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status: Some(status),
            raw_body: Some(body.into()),
            content_type: Some(content_type.to_owned()),
            ..Self::default()
        }
    }

    /// Restricts the fault to one route.
    pub fn on_route(mut self, route: Route) -> Self {
        self.matcher.route = Some(route.label().to_owned());
        self
    }

    /// Restricts the fault to one API key.
    pub fn for_key(mut self, api_key: impl Into<String>) -> Self {
        self.matcher.api_key = Some(api_key.into());
        self
    }

    /// Restricts the fault to one model.
    pub fn for_model(mut self, model: impl Into<String>) -> Self {
        self.matcher.model = Some(model.into());
        self
    }

    /// Applies the fault to this many matching requests only.
    pub fn times(mut self, times: u32) -> Self {
        self.times = Some(times);
        self
    }

    /// Adds a response header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Checks what serde cannot: the route name and the header names and values.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(route) = &self.matcher.route
            && Route::parse(route).is_none()
        {
            return Err(format!("unknown route {route:?}"));
        }
        // A 1xx is not a final response; hyper could not send it as one.
        if let Some(status) = self.status
            && !(200..=999).contains(&status)
        {
            return Err(format!("invalid status {status}"));
        }
        for count in [self.chunks, self.reasoning_chunks].into_iter().flatten() {
            if count > MAX_CHUNKS {
                return Err(format!("at most {MAX_CHUNKS} chunks per response"));
            }
        }
        if let Some(ct) = &self.content_type
            && hyper::header::HeaderValue::from_str(ct).is_err()
        {
            return Err(format!("invalid content type {ct:?}"));
        }
        for (name, value) in &self.headers {
            let parsed = hyper::header::HeaderName::from_bytes(name.as_bytes());
            if parsed.is_err() || hyper::header::HeaderValue::from_str(value).is_err() {
                return Err(format!("invalid header {name:?}"));
            }
            // The mock frames its own bodies; a scripted length or encoding would contradict it.
            if parsed.is_ok_and(|n| {
                n == hyper::header::CONTENT_LENGTH
                    || n == hyper::header::TRANSFER_ENCODING
                    || n == hyper::header::CONNECTION
            }) {
                return Err(format!("header {name:?} is managed by the mock"));
            }
        }
        Ok(())
    }
}

/// One queued fault with its remaining uses, as listed by `GET /__mock/script`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingFault {
    /// The fault as scripted.
    pub spec: FaultSpec,
    /// Uses left; `None` means forever.
    pub remaining: Option<u32>,
}

struct Queued {
    spec: Arc<FaultSpec>,
    remaining: Option<u32>,
}

/// Most content or reasoning chunks one response may have; a stream is built up front, so
/// this bounds its memory. Larger counts in a fault are refused, in the config clamped.
pub const MAX_CHUNKS: u32 = 10_000;

/// Most faults that may wait in the queue; scripting more is refused.
pub const MAX_QUEUED_FAULTS: usize = 10_000;

/// FIFO of scripted faults. The length is mirrored in an atomic so the common case, an empty
/// queue, costs one load and no lock.
#[derive(Default)]
pub(crate) struct FaultQueue {
    entries: Mutex<VecDeque<Queued>>,
    len: AtomicUsize,
}

impl FaultQueue {
    /// Queues faults at the back. Fails, queueing nothing, when one is invalid or the queue
    /// would exceed [`MAX_QUEUED_FAULTS`]. Returns the new queue length.
    pub(crate) fn push_all(&self, specs: Vec<FaultSpec>) -> Result<usize, String> {
        for spec in &specs {
            spec.validate()?;
        }
        let mut entries = lock(&self.entries);
        if entries.len().saturating_add(specs.len()) > MAX_QUEUED_FAULTS {
            return Err(format!("at most {MAX_QUEUED_FAULTS} faults may be queued"));
        }
        for spec in specs {
            if spec.times == Some(0) {
                continue;
            }
            let remaining = spec.times;
            entries.push_back(Queued {
                spec: Arc::new(spec),
                remaining,
            });
        }
        self.len.store(entries.len(), Ordering::Release);
        Ok(entries.len())
    }

    /// Takes one use of the oldest fault matching the request.
    pub(crate) fn take(
        &self,
        route: Route,
        api_key: Option<&str>,
        model: Option<&str>,
    ) -> Option<Arc<FaultSpec>> {
        if self.len.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut entries = lock(&self.entries);
        let index = entries
            .iter()
            .position(|q| q.spec.matcher.matches(route, api_key, model))?;
        let entry = entries.get_mut(index)?;
        let spec = Arc::clone(&entry.spec);
        if let Some(remaining) = entry.remaining.as_mut() {
            *remaining = remaining.saturating_sub(1);
            if *remaining == 0 {
                entries.remove(index);
            }
        }
        self.len.store(entries.len(), Ordering::Release);
        Some(spec)
    }

    pub(crate) fn clear(&self) {
        let mut entries = lock(&self.entries);
        entries.clear();
        self.len.store(0, Ordering::Release);
    }

    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    pub(crate) fn pending(&self) -> Vec<PendingFault> {
        lock(&self.entries)
            .iter()
            .map(|q| PendingFault {
                spec: (*q.spec).clone(),
                remaining: q.remaining,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_among_matching_and_times() {
        let q = FaultQueue::default();
        q.push_all(vec![
            FaultSpec::status(429).for_key("a").times(2),
            FaultSpec::status(500).times(1),
        ])
        .unwrap();
        // Key b skips the key-a fault and takes the general one.
        let f = q.take(Route::ChatCompletions, Some("b"), None).unwrap();
        assert_eq!(f.status, Some(500));
        assert_eq!(q.len(), 1);
        for _ in 0..2 {
            let f = q.take(Route::Messages, Some("a"), None).unwrap();
            assert_eq!(f.status, Some(429));
        }
        assert!(q.take(Route::Messages, Some("a"), None).is_none());
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn forever_fault_stays() {
        let q = FaultQueue::default();
        q.push_all(vec![FaultSpec::status(503).on_route(Route::Responses)])
            .unwrap();
        for _ in 0..5 {
            assert!(q.take(Route::Responses, None, None).is_some());
        }
        assert!(q.take(Route::Messages, None, None).is_none());
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn parses_json_and_rejects_typos() {
        let spec: FaultSpec = serde_json::from_str(
            r#"{"match":{"route":"/v1/messages","model":"m"},"times":1,"status":429,
                "headers":{"Retry-After":"2"}}"#,
        )
        .unwrap();
        assert_eq!(spec.matcher.model.as_deref(), Some("m"));
        assert!(spec.validate().is_ok());
        assert!(serde_json::from_str::<FaultSpec>(r#"{"stauts":429}"#).is_err());
        let bad = FaultSpec::new().on_route(Route::Models);
        let mut bad = bad;
        bad.matcher.route = Some("/v2/nope".into());
        assert!(bad.validate().is_err());
    }

    #[test]
    fn oversized_chunk_counts_are_refused() {
        let mut spec = FaultSpec::new();
        spec.chunks = Some(MAX_CHUNKS + 1);
        assert!(spec.validate().is_err());
        spec.chunks = Some(MAX_CHUNKS);
        assert!(spec.validate().is_ok());
        let q = FaultQueue::default();
        let mut managed = FaultSpec::new();
        managed.headers.insert("Content-Length".into(), "5".into());
        assert!(q.push_all(vec![managed]).is_err());
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn route_parse_accepts_label_path_alias() {
        assert_eq!(Route::parse("chat"), Some(Route::ChatCompletions));
        assert_eq!(Route::parse("/v1/responses"), Some(Route::Responses));
        assert_eq!(Route::parse("messages"), Some(Route::Messages));
        assert_eq!(Route::parse("nope"), None);
    }
}
