//! Serving one provider request: route, authenticate, count, pick a fault, and build the
//! normal or faulted response.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, HeaderName, HeaderValue};
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::Value;

use super::Shared;
use super::agent::{self, AgentTurn};
use super::arena;
use super::body::{ConnCtl, MockBody, Script};
use super::fault::{FaultSpec, MAX_CHUNKS, Route};
use super::ids;
use super::plain;
use super::scan;
use super::stats::{InFlightGuard, Outcome, RequestFacts};
use super::usage_wall;
use super::wire::{self, ErrorInfo, Frame, Kind, Reply, anthropic, openai, responses};

/// Request header carrying a [`FaultSpec`] as JSON for this one request. It takes precedence
/// over the queue, so a test can script a request without touching shared state.
pub const FAULT_HEADER: &str = "x-mock-fault";

/// Model echoed when the request names none.
const DEFAULT_MODEL: &str = "mock-model";
/// Pause between the last data before a reset and the reset, so the data reaches the client
/// before the RST discards anything still in flight.
const RESET_GRACE: Duration = Duration::from_millis(10);
/// Keep-alives sent by `eof_before_content` before the body ends.
const EOF_KEEPALIVES: u32 = 3;

const JSON: &str = "application/json";
const SSE: &str = "text/event-stream; charset=utf-8";

/// The fields of a request body the mock looks at; everything else is ignored. The model is
/// borrowed from the body unless it has escapes.
#[derive(Debug, Default, Deserialize)]
struct RequestShape<'a> {
    #[serde(default, borrow)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

#[derive(Debug, Default, Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

impl<'a> From<scan::Fields<'a>> for RequestShape<'a> {
    fn from(f: scan::Fields<'a>) -> Self {
        Self {
            model: f.model.map(Cow::Borrowed),
            stream: f.stream,
            stream_options: f.stream_options.map(|o| StreamOptions {
                include_usage: o.include_usage,
            }),
        }
    }
}

fn route_of(method: &Method, path: &str) -> Result<Route, StatusCode> {
    let route = Route::ALL
        .into_iter()
        .find(|r| r.path() == path)
        .ok_or(StatusCode::NOT_FOUND)?;
    let expected = if route == Route::Models {
        Method::GET
    } else {
        Method::POST
    };
    if *method == expected {
        Ok(route)
    } else {
        Err(StatusCode::METHOD_NOT_ALLOWED)
    }
}

/// The API key from `Authorization: Bearer …` (OpenAI) or `x-api-key` (Anthropic).
fn api_key(headers: &HeaderMap) -> Option<&str> {
    if let Some(v) = headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        let v = v.trim();
        let token = v
            .strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
            .unwrap_or(v)
            .trim();
        if !token.is_empty() {
            return Some(token);
        }
    }
    headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|k| !k.is_empty())
}

// Header names as constants: a name given as `&str` is parsed and hashed again per insert.
const REQUEST_ID: HeaderName = HeaderName::from_static("request-id");
const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
const OPENAI_VERSION: HeaderName = HeaderName::from_static("openai-version");
const OPENAI_PROCESSING_MS: HeaderName = HeaderName::from_static("openai-processing-ms");

/// Response headers every reply on `route` carries, as the provider would send them.
fn provider_headers(route: Route, content_type: &'static str) -> HeaderMap {
    let mut h = prebuilt_headers(route, content_type);
    // The request id is the one value built per reply. It replaces the placeholder in place,
    // so the headers keep the provider's order, and is found by walking the few entries
    // rather than by hashing its name again.
    let (name, id) = if route.is_anthropic() {
        (REQUEST_ID, request_id(&ids::anthropic_request_bytes()))
    } else {
        (X_REQUEST_ID, request_id(&ids::openai_request_bytes()))
    };
    if let (Some(slot), Some(id)) = (h.iter_mut().find(|(n, _)| **n == name), id) {
        *slot.1 = id;
    }
    h
}

/// A request id as a header value, its bytes cut from the per-thread buffer.
fn request_id(id: &[u8]) -> Option<HeaderValue> {
    HeaderValue::from_maybe_shared(arena::bytes(id.len(), |b| b.extend_from_slice(id))).ok()
}

/// The provider headers with a placeholder request id, built afresh.
fn build_headers(route: Route, content_type: &'static str) -> HeaderMap {
    let mut h = HeaderMap::with_capacity(6);
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    if route.is_anthropic() {
        h.insert(REQUEST_ID, HeaderValue::from_static(""));
    } else {
        h.insert(X_REQUEST_ID, HeaderValue::from_static(""));
        h.insert(OPENAI_VERSION, HeaderValue::from_static("2020-10-01"));
        h.insert(OPENAI_PROCESSING_MS, HeaderValue::from_static("1"));
    }
    if content_type == SSE {
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    h
}

/// The provider headers of the common replies (JSON and SSE, OpenAI and Anthropic), built
/// once and cloned per reply: inserting each name hashed it again on every response.
fn prebuilt_headers(route: Route, content_type: &'static str) -> HeaderMap {
    static SETS: OnceLock<[HeaderMap; 4]> = OnceLock::new();
    let sets = SETS.get_or_init(|| {
        [
            build_headers(Route::ChatCompletions, JSON),
            build_headers(Route::ChatCompletions, SSE),
            build_headers(Route::Messages, JSON),
            build_headers(Route::Messages, SSE),
        ]
    });
    let base = usize::from(route.is_anthropic()) * 2;
    let index = match content_type {
        JSON => base,
        SSE => base + 1,
        _ => return build_headers(route, content_type),
    };
    sets.get(index)
        .cloned()
        .unwrap_or_else(|| build_headers(route, content_type))
}

fn response(status: StatusCode, headers: HeaderMap, body: MockBody) -> Response<MockBody> {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    *resp.headers_mut() = headers;
    resp
}

fn error_response(
    route: Route,
    status: StatusCode,
    fault: Option<&FaultSpec>,
    message: Option<String>,
) -> Response<MockBody> {
    let mut err = ErrorInfo::for_status(route, status.as_u16(), fault);
    if let Some(m) = message {
        err.message = m;
    }
    error_reply(route, status, &err, fault)
}

/// The route's error envelope with `status` (which is 200 for `error_body_200`).
fn error_reply(
    route: Route,
    status: StatusCode,
    err: &ErrorInfo,
    fault: Option<&FaultSpec>,
) -> Response<MockBody> {
    let mut headers = provider_headers(route, JSON);
    let request_id = headers.get("request-id").and_then(|v| v.to_str().ok());
    let body = wire::serialize(&wire::error_body(route, err, request_id));
    apply_fault_headers(&mut headers, fault);
    response(status, headers, MockBody::full(body))
}

fn apply_fault_headers(headers: &mut HeaderMap, fault: Option<&FaultSpec>) {
    let Some(f) = fault else { return };
    for (name, value) in &f.headers {
        // Validated when scripted; anything unparsable is skipped rather than failing here.
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.insert(n, v);
        }
    }
}

/// A scripted `content_type` replaces the default one (validated when scripted).
fn set_content_type(headers: &mut HeaderMap, fault: Option<&FaultSpec>) {
    if let Some(v) = fault
        .and_then(|f| f.content_type.as_deref())
        .and_then(|ct| HeaderValue::from_str(ct).ok())
    {
        headers.insert(CONTENT_TYPE, v);
    }
}

/// A scripted delay, or the default, never longer than the configured maximum stall so no
/// script can park a request indefinitely.
fn millis(ms: Option<u64>, default: Duration, cap: Duration) -> Duration {
    ms.map(Duration::from_millis).unwrap_or(default).min(cap)
}

/// `x-mock-fault` as a header name, so looking it up hashes it without parsing it again.
const FAULT_HEADER_NAME: HeaderName = HeaderName::from_static(FAULT_HEADER);

/// Counts a request the mock refuses before reading its body.
fn count_rejected(shared: &Arc<Shared>, headers: HeaderMap) {
    let guard = shared.stats.begin(&RequestFacts {
        route: "other",
        api_key: api_key(&headers),
        model: None,
        body: &Bytes::new(),
    });
    guard.keep_headers(headers);
    shared.stats.record(Outcome::Rejected);
}

/// The fault a request gets: the usage wall's, its `x-mock-fault` header's, or the queue's.
/// `Err` carries the message for a malformed header.
fn pick_fault(
    shared: &Shared,
    route: Route,
    key: Option<&str>,
    model: Option<&str>,
    headers: &HeaderMap,
) -> Result<Option<Arc<FaultSpec>>, String> {
    if let Some(walled) = shared.usage_wall.fault_for(route, key, headers) {
        return Ok(Some(Arc::new(walled)));
    }
    match headers.get(FAULT_HEADER_NAME) {
        Some(raw) => serde_json::from_slice::<FaultSpec>(raw.as_bytes())
            .map_err(|e| e.to_string())
            .and_then(|f| f.validate().map(|()| f))
            .map(|f| Some(Arc::new(f)))
            .map_err(|e| format!("Invalid {FAULT_HEADER} header: {e}")),
        None => Ok(shared.faults.take(route, key, model)),
    }
}

/// Serves a request to a provider route. `ctl` lets a fault reset the connection.
pub(crate) async fn handle(
    shared: Arc<Shared>,
    ctl: Arc<ConnCtl>,
    req: Request<Incoming>,
) -> Response<MockBody> {
    if req.method() == Method::POST && req.uri().path() == COUNT_TOKENS_PATH {
        return count_tokens(&shared, req).await;
    }
    if usage_wall::is_oauth(req.uri().path()) {
        return usage_wall::oauth(&shared.usage_wall, req).await;
    }
    if req.uri().path() == Route::Responses.path() && !shared.config.serve_responses {
        // A chat-only server (vLLM's FastAPI router) knows no such route.
        count_rejected(&shared, req.into_parts().0.headers);
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
        let body = Bytes::from_static(br#"{"detail":"Not Found"}"#);
        return response(StatusCode::NOT_FOUND, headers, MockBody::full(body));
    }
    let route = match route_of(req.method(), req.uri().path()) {
        Ok(r) => r,
        Err(status) => {
            let message = format!("Unknown request: {} {}", req.method(), req.uri().path());
            count_rejected(&shared, req.into_parts().0.headers);
            return error_response(Route::ChatCompletions, status, None, Some(message));
        }
    };

    let (parts, body) = req.into_parts();
    let body = match Limited::new(body, shared.config.max_request_body)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            shared.stats.record(Outcome::Rejected);
            return error_response(route, StatusCode::PAYLOAD_TOO_LARGE, None, None);
        }
    };

    let key = api_key(&parts.headers);
    let parsed: Result<RequestShape<'_>, String> = if route == Route::Models {
        Ok(RequestShape::default())
    } else if let Some(fields) = scan::fields(&body) {
        Ok(RequestShape::from(fields))
    } else {
        serde_json::from_slice(&body).map_err(|e| format!("Invalid JSON body: {e}"))
    };
    let model = parsed.as_ref().ok().and_then(|s| s.model.as_deref());
    let cfg = &shared.config;
    let authorized = match key {
        None => !cfg.require_key && cfg.valid_keys.is_empty(),
        Some(k) => cfg.valid_keys.is_empty() || cfg.valid_keys.iter().any(|v| v == k),
    };
    // Everything read from the headers is read before they go to the header history.
    let fault = if authorized && parsed.is_ok() {
        pick_fault(&shared, route, key, model, &parts.headers)
    } else {
        Ok(None)
    };
    let anthropic_models =
        route == Route::Models && parts.headers.contains_key("anthropic-version");
    let guard = shared.stats.begin(&RequestFacts {
        route: route.label(),
        api_key: key,
        model,
        body: &body,
    });
    guard.keep_headers(parts.headers);

    if !authorized {
        shared.stats.record(Outcome::Rejected);
        return error_response(route, StatusCode::UNAUTHORIZED, None, None);
    }
    let shape = match parsed {
        Ok(s) => s,
        Err(message) => {
            shared.stats.record(Outcome::Rejected);
            return error_response(route, StatusCode::BAD_REQUEST, None, Some(message));
        }
    };
    let fault = match fault {
        Ok(f) => f,
        Err(message) => {
            shared.stats.record(Outcome::Rejected);
            return error_response(route, StatusCode::BAD_REQUEST, None, Some(message));
        }
    };
    shared.stats.record(if fault.is_some() {
        Outcome::Fault
    } else {
        Outcome::Normal
    });

    let agent = match (&fault, &shared.config.agent) {
        (None, Some(script)) => agent::turn(script, route, &body, &shared.agent),
        _ => None,
    };
    let request = Served {
        route,
        anthropic_models,
        input_tokens: (body.len() as u64 / 4).max(1),
        shape,
        agent,
    };
    request
        .respond(&shared, &ctl, fault.as_deref(), guard)
        .await
}

/// A parsed, authorised request about to be answered.
struct Served<'a> {
    route: Route,
    anthropic_models: bool,
    input_tokens: u64,
    shape: RequestShape<'a>,
    /// The scripted agent model's turn, when it plays this request.
    agent: Option<AgentTurn>,
}

impl Served<'_> {
    async fn respond(
        self,
        shared: &Shared,
        ctl: &Arc<ConnCtl>,
        fault: Option<&FaultSpec>,
        guard: InFlightGuard,
    ) -> Response<MockBody> {
        let cfg = &shared.config;
        let stream = self.shape.stream == Some(true) && self.route != Route::Models;
        let stall = fault
            .and_then(|f| f.stall_ms)
            .map(Duration::from_millis)
            .unwrap_or(cfg.max_stall)
            .min(cfg.max_stall);

        if let Some(ms) = fault.and_then(|f| f.latency_before_headers_ms) {
            tokio::time::sleep(millis(Some(ms), Duration::ZERO, cfg.max_stall)).await;
        }
        if fault.is_some_and(|f| f.reset_before_body) {
            ctl.request_reset();
            // The connection task drops the connection (and this future) with an RST.
            return std::future::pending().await;
        }
        if !stream && fault.is_some_and(|f| f.stall_after_chunks.is_some()) {
            tokio::time::sleep(stall).await;
        }

        let status = fault.and_then(|f| f.status).unwrap_or(200);
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if let Some(raw) = fault.and_then(|f| f.raw_body.as_ref()) {
            return self.raw(status, raw, fault);
        }
        if let Some(body) = fault.and_then(|f| f.body.as_ref()) {
            return self.verbatim(status, body, fault);
        }
        if !status.is_success() {
            return error_response(self.route, status, fault, None);
        }
        if fault.is_some_and(|f| f.error_body_200) {
            let err = ErrorInfo::for_status(self.route, 500, fault);
            return error_reply(self.route, status, &err, fault);
        }

        if self.route == Route::Models {
            let body = if self.anthropic_models {
                anthropic::models_json(&cfg.models)
            } else {
                openai::models_json(&cfg.models)
            };
            let mut headers = provider_headers(self.route, JSON);
            apply_fault_headers(&mut headers, fault);
            return response(status, headers, MockBody::full(wire::serialize(&body)));
        }

        if fault.is_none() && self.agent.is_none() && self.route == Route::ChatCompletions {
            let guard = match self.plain(status, shared, stream, guard) {
                Ok(resp) => return resp,
                Err(guard) => guard,
            };
            // Only a plain stream with configured delays gets here; it plays like any other.
            let reply = self.reply(cfg.chunks, None);
            return self.stream(status, &reply, shared, ctl, None, stall, guard);
        }
        let reply = self.reply(cfg.chunks, fault);
        if stream {
            self.stream(status, &reply, shared, ctl, fault, stall, guard)
        } else {
            self.json(status, &reply, ctl, fault, guard)
        }
    }

    /// The plain Chat Completions answer (no fault, no agent turn) from the cache; `None`
    /// (with the guard handed back) for a stream with configured delays.
    fn plain(
        &self,
        status: StatusCode,
        shared: &Shared,
        stream: bool,
        guard: InFlightGuard,
    ) -> Result<Response<MockBody>, InFlightGuard> {
        let cfg = &shared.config;
        if stream
            && !(cfg.first_chunk_delay.min(cfg.max_stall).is_zero()
                && cfg.chunk_delay.min(cfg.max_stall).is_zero())
        {
            return Err(guard);
        }
        let bytes = shared.plain.answer(&plain::Shape {
            stream,
            model: self.shape.model.as_deref().unwrap_or(DEFAULT_MODEL),
            input_tokens: self.input_tokens,
            chunks: cfg.chunks.min(MAX_CHUNKS),
            include_usage: self.include_usage(),
        });
        if stream {
            // The whole stream as one write; the request stays in flight until it is sent.
            let headers = provider_headers(self.route, SSE);
            Ok(response(status, headers, MockBody::stream(bytes, guard)))
        } else {
            drop(guard);
            let headers = provider_headers(self.route, JSON);
            Ok(response(status, headers, MockBody::full(bytes)))
        }
    }

    fn include_usage(&self) -> bool {
        self.shape
            .stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }

    fn reply(&self, default_chunks: u32, fault: Option<&FaultSpec>) -> Reply {
        let reasoning_only = fault.is_some_and(|f| f.reasoning_only);
        let reasoning_chunks = fault
            .and_then(|f| f.reasoning_chunks)
            .unwrap_or(if reasoning_only { 4 } else { 0 });
        let chunks = if reasoning_only {
            0
        } else {
            fault.and_then(|f| f.chunks).unwrap_or(default_chunks)
        }
        .min(MAX_CHUNKS);
        let reasoning_chunks = reasoning_chunks.min(MAX_CHUNKS);
        Reply {
            model: self
                .shape
                .model
                .as_deref()
                .unwrap_or(DEFAULT_MODEL)
                .to_owned(),
            input_tokens: self.input_tokens,
            chunks,
            reasoning_chunks,
            tool_call: if reasoning_only {
                None
            } else {
                fault.and_then(|f| f.tool_call.clone())
            },
            include_usage: self.include_usage(),
            script_text: None,
        }
        .scripted(self.agent.as_ref())
    }

    fn verbatim(
        &self,
        status: StatusCode,
        body: &Value,
        fault: Option<&FaultSpec>,
    ) -> Response<MockBody> {
        let (content_type, bytes) = match body {
            Value::String(text) => ("text/plain; charset=utf-8", Bytes::from(text.clone())),
            other => (JSON, wire::serialize(other)),
        };
        let mut headers = provider_headers(self.route, content_type);
        set_content_type(&mut headers, fault);
        apply_fault_headers(&mut headers, fault);
        response(status, headers, MockBody::full(bytes))
    }

    /// A `raw_body` fault: the bytes exactly as scripted.
    fn raw(&self, status: StatusCode, raw: &[u8], fault: Option<&FaultSpec>) -> Response<MockBody> {
        let mut headers = provider_headers(self.route, "application/octet-stream");
        set_content_type(&mut headers, fault);
        apply_fault_headers(&mut headers, fault);
        response(status, headers, MockBody::full(Bytes::copy_from_slice(raw)))
    }

    fn json(
        &self,
        status: StatusCode,
        reply: &Reply,
        ctl: &Arc<ConnCtl>,
        fault: Option<&FaultSpec>,
        guard: InFlightGuard,
    ) -> Response<MockBody> {
        let bytes = match self.route {
            Route::Messages => anthropic::message_json(reply),
            Route::Responses => wire::serialize(&responses::response_json(reply)),
            Route::ChatCompletions | Route::Models => openai::chat_json(reply),
        };
        let mut headers = provider_headers(self.route, JSON);
        apply_fault_headers(&mut headers, fault);

        let truncate =
            fault.is_some_and(|f| f.eof_before_content || f.reset_after_chunks.is_some());
        if !truncate {
            drop(guard);
            return response(status, headers, MockBody::full(bytes));
        }
        // Promise the whole body, then break the promise: nothing at all (EOF) or half of
        // it followed by a reset.
        headers.insert(CONTENT_LENGTH, HeaderValue::from(bytes.len()));
        let mut script = Script::default();
        if fault.is_some_and(|f| f.reset_after_chunks.is_some()) {
            script.data(&bytes[..bytes.len() / 2]);
            script.sleep(RESET_GRACE);
            script.reset();
        } else {
            // A pending body makes hyper flush the headers before the body ends short.
            script.sleep(RESET_GRACE);
        }
        let body = MockBody::scripted(script.finish(), Arc::clone(ctl), Some(guard));
        response(status, headers, body)
    }

    #[allow(clippy::too_many_arguments)]
    fn stream(
        &self,
        status: StatusCode,
        reply: &Reply,
        shared: &Shared,
        ctl: &Arc<ConnCtl>,
        fault: Option<&FaultSpec>,
        stall: Duration,
        guard: InFlightGuard,
    ) -> Response<MockBody> {
        let cfg = &shared.config;
        let first_delay = millis(
            fault.and_then(|f| f.first_chunk_delay_ms),
            cfg.first_chunk_delay,
            cfg.max_stall,
        );
        let chunk_delay = millis(
            fault.and_then(|f| f.chunk_delay_ms),
            cfg.chunk_delay,
            cfg.max_stall,
        );
        let mut headers = provider_headers(self.route, SSE);
        apply_fault_headers(&mut headers, fault);

        let mut script = Script::default();
        if fault.is_some_and(|f| f.eof_before_content) {
            let keepalive = if self.route.is_anthropic() {
                anthropic::ping_frame()
            } else {
                Bytes::from_static(wire::SSE_KEEPALIVE_COMMENT)
            };
            for i in 0..EOF_KEEPALIVES {
                if i > 0 {
                    script.sleep(chunk_delay);
                }
                script.data(&keepalive);
            }
        } else {
            let frames = match self.route {
                Route::Messages => anthropic::message_frames(reply),
                Route::Responses => responses::response_frames(reply),
                Route::ChatCompletions | Route::Models => openai::chat_frames(reply),
            };
            let cut = fault.and_then(|f| Cut::from_fault(f, stall));
            let route = self.route;
            let error_frame = |seq: usize| {
                let err = fault
                    .map(|f| ErrorInfo::midstream(route, f))
                    .unwrap_or_else(|| ErrorInfo::for_status(route, 500, None));
                match route {
                    Route::Messages => anthropic::error_frame(&err),
                    Route::Responses => responses::error_frame(&err, seq),
                    Route::ChatCompletions | Route::Models => openai::chat_error_frame(&err),
                }
            };
            shape_stream(
                &mut script,
                &frames,
                first_delay,
                chunk_delay,
                cut,
                error_frame,
            );
        }
        let body = MockBody::scripted(script.finish(), Arc::clone(ctl), Some(guard));
        response(status, headers, body)
    }
}

impl Reply {
    /// The scripted agent model's turn in place of the generated answer.
    fn scripted(mut self, turn: Option<&AgentTurn>) -> Reply {
        match turn {
            None => {}
            Some(AgentTurn::CallTool(tool)) => {
                self.chunks = 0;
                self.reasoning_chunks = 0;
                self.tool_call = Some(tool.clone());
            }
            Some(AgentTurn::Answer(text)) => {
                let pieces = wire::split_pieces(text, 3);
                self.chunks = u32::try_from(pieces.len()).unwrap_or(1);
                self.reasoning_chunks = 0;
                self.tool_call = None;
                self.script_text = Some(pieces);
            }
        }
        self
    }
}

/// Anthropic's token counting route.
const COUNT_TOKENS_PATH: &str = "/v1/messages/count_tokens";

/// `POST /v1/messages/count_tokens`: `{"input_tokens": N}`, N about a quarter of the body's
/// bytes (the same estimate the generated answers report).
async fn count_tokens(shared: &Shared, req: Request<Incoming>) -> Response<MockBody> {
    let body = match Limited::new(req.into_body(), shared.config.max_request_body)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return error_response(Route::Messages, StatusCode::PAYLOAD_TOO_LARGE, None, None);
        }
    };
    if serde_json::from_slice::<Value>(&body).is_err() {
        let message = "Invalid JSON body".to_owned();
        return error_response(
            Route::Messages,
            StatusCode::BAD_REQUEST,
            None,
            Some(message),
        );
    }
    shared
        .count_tokens
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tokens = (body.len() as u64 / 4).max(1);
    let headers = provider_headers(Route::Messages, JSON);
    let bytes = wire::serialize(&serde_json::json!({ "input_tokens": tokens }));
    response(StatusCode::OK, headers, MockBody::full(bytes))
}

/// Where and how a scripted stream is cut short.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cut {
    Stall { after: u32, for_: Duration },
    Error { after: u32 },
    Reset { after: u32 },
    Eof { after: u32 },
}

impl Cut {
    /// The fault's cut; a reset wins over an error, which wins over a stall.
    fn from_fault(f: &FaultSpec, stall: Duration) -> Option<Cut> {
        if let Some(after) = f.reset_after_chunks {
            Some(Cut::Reset { after })
        } else if let Some(after) = f.midstream_error_after {
            Some(Cut::Error { after })
        } else if let Some(after) = f.eof_after_chunks {
            Some(Cut::Eof { after })
        } else {
            f.stall_after_chunks
                .map(|after| Cut::Stall { after, for_: stall })
        }
    }

    fn after(self) -> u32 {
        match self {
            Cut::Stall { after, .. }
            | Cut::Error { after }
            | Cut::Reset { after }
            | Cut::Eof { after } => after,
        }
    }
}

/// Plays `frames` into `script`: delays before content frames, and the cut (if any) right
/// before the content frame that would exceed the allowance, or before the trailer when the
/// stream has fewer content frames than that.
fn shape_stream(
    script: &mut Script,
    frames: &[Frame],
    first_delay: Duration,
    chunk_delay: Duration,
    cut: Option<Cut>,
    error_frame: impl Fn(usize) -> Bytes,
) {
    let mut sent = 0u32;
    for (index, frame) in frames.iter().enumerate() {
        if let Some(cut) = cut {
            let at_cut = match frame.kind {
                Kind::Content => sent >= cut.after(),
                Kind::Trailer => true,
                Kind::Meta => false,
            };
            if at_cut {
                match cut {
                    Cut::Stall { for_, .. } => script.sleep(for_),
                    Cut::Error { .. } => script.data(&error_frame(index)),
                    Cut::Reset { .. } => {
                        script.sleep(RESET_GRACE);
                        script.reset();
                    }
                    // The body just ends: no trailer, no error.
                    Cut::Eof { .. } => {}
                }
                return;
            }
        }
        if frame.kind == Kind::Content {
            script.sleep(if sent == 0 { first_delay } else { chunk_delay });
            sent += 1;
        }
        script.data(&frame.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::super::body::Step;
    use super::*;

    fn frames() -> Vec<Frame> {
        vec![
            Frame::meta(Bytes::from_static(b"m")),
            Frame::content(Bytes::from_static(b"1")),
            Frame::content(Bytes::from_static(b"2")),
            Frame::trailer(Bytes::from_static(b"t")),
        ]
    }

    fn played(cut: Option<Cut>, delay: Duration) -> Vec<Step> {
        let mut s = Script::default();
        shape_stream(&mut s, &frames(), delay, delay, cut, |i| {
            Bytes::from(format!("E{i}"))
        });
        s.finish().into_iter().collect()
    }

    fn data(steps: &[Step]) -> String {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Data(b) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn cuts_count_content_frames_only() {
        assert_eq!(data(&played(None, Duration::ZERO)), "m12t");
        assert_eq!(
            data(&played(Some(Cut::Error { after: 1 }), Duration::ZERO)),
            "m1E2"
        );
        assert_eq!(
            data(&played(Some(Cut::Error { after: 0 }), Duration::ZERO)),
            "mE1"
        );
        // More allowance than content: cut before the trailer.
        assert_eq!(
            data(&played(Some(Cut::Error { after: 9 }), Duration::ZERO)),
            "m12E3"
        );
        assert_eq!(
            data(&played(Some(Cut::Eof { after: 1 }), Duration::ZERO)),
            "m1"
        );
        let reset = played(Some(Cut::Reset { after: 1 }), Duration::ZERO);
        assert!(matches!(reset.last(), Some(Step::Reset)));
        let stall = played(
            Some(Cut::Stall {
                after: 2,
                for_: Duration::from_secs(1),
            }),
            Duration::ZERO,
        );
        assert!(matches!(stall.last(), Some(Step::Sleep(d)) if *d == Duration::from_secs(1)));
        assert_eq!(data(&stall), "m12");
    }

    #[test]
    fn delays_precede_each_content_frame() {
        let steps = played(None, Duration::from_millis(1));
        let sleeps = steps.iter().filter(|s| matches!(s, Step::Sleep(_))).count();
        assert_eq!(sleeps, 2);
    }

    #[test]
    fn api_key_from_either_header() {
        let mut h = HeaderMap::new();
        h.insert("x-api-key", HeaderValue::from_static("sk-ant"));
        assert_eq!(api_key(&h), Some("sk-ant"));
        h.insert(
            hyper::header::AUTHORIZATION,
            HeaderValue::from_static("Bearer sk-oai"),
        );
        assert_eq!(api_key(&h), Some("sk-oai"));
    }
}
