//! Anthropic's part of the Claude OAuth usage wall: a scripted 5-hour wall, the low-priority
//! lane behind it, and the session-limit reset's two endpoints.
//!
//! The wire contract is Claude Code 2.1.263's (`/low-priority`, `/limit-reset`), as the
//! OmniRoute resilience guide records it under "Claude OAuth usage wall":
//! - at the wall, `POST /v1/messages` answers 429 with `anthropic-ratelimit-unified-status:
//!   rejected`, `anthropic-ratelimit-unified-reset` (epoch seconds) and, when the account may
//!   use the lane, `anthropic-ratelimit-unified-slow-offer: treatment`;
//! - a request carrying `anthropic-usage-limit: slow` is admitted to the lane and its answer
//!   says how in `anthropic-ratelimit-unified-slow-status` (`active`, `not_needed`,
//!   `slot_busy` on a 429 with `…-slow-retry-after` and `…-slow-max-wait` in seconds,
//!   `weekly_limit`, `budget_exhausted`, `off`, `ineligible`);
//! - `GET /api/oauth/usage?at_wall=1&skip_spend=1` answers a `juniper_tide` block
//!   (`arm`, `available`, `next_available_at`), and
//!   `POST /api/organizations/{org}/reset_rate_limits` with `{"program":"juniper_tide"}`
//!   answers `result` (`reset`, `not_limited`, `already_used`, `not_offered`); a `reset` or
//!   `not_limited` lifts the wall.
//!
//! Nothing here runs unless a wall is scripted: the request path pays one atomic load.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::body::MockBody;
use super::fault::{FaultSpec, Route};
use super::{lock, wire};

/// The request header that asks for the low-priority lane.
pub const SLOW_HEADER: &str = "anthropic-usage-limit";
/// Most requests kept in [`WallSeen::requests`].
const MAX_SEEN: usize = 1_000;
/// Largest claim body read.
const MAX_CLAIM_BODY: usize = 64 * 1024;

/// One answer to a request in the lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlowAnswer {
    /// 200 serves the request; 429 or 529 refuse it.
    pub status: u16,
    /// `anthropic-ratelimit-unified-slow-status`.
    pub slow_status: String,
    /// `…-slow-retry-after`, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<u64>,
    /// `…-slow-max-wait`, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait_s: Option<u64>,
    /// `anthropic-ratelimit-unified-overage-in-use: true`.
    #[serde(default)]
    pub overage_in_use: bool,
}

impl SlowAnswer {
    /// Served in the lane.
    pub fn active() -> Self {
        Self::new(200, "active")
    }

    /// `status` with `slow_status`.
    pub fn new(status: u16, slow_status: &str) -> Self {
        Self {
            status,
            slow_status: slow_status.to_owned(),
            retry_after_s: None,
            max_wait_s: None,
            overage_in_use: false,
        }
    }

    /// A 429 `slot_busy` asking to come back after `retry_after_s`.
    pub fn slot_busy(retry_after_s: u64) -> Self {
        Self {
            retry_after_s: Some(retry_after_s),
            ..Self::new(429, "slot_busy")
        }
    }
}

/// A scripted wall.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WallScript {
    /// Only requests with this API key (or OAuth token) meet the wall; `None`: every one.
    #[serde(default)]
    pub api_key: Option<String>,
    /// `anthropic-ratelimit-unified-reset`, epoch seconds.
    pub reset_at: u64,
    /// Whether the wall offers the lane (`slow-offer: treatment`).
    #[serde(default = "yes")]
    pub offer: bool,
    /// The lane's answers in order; once used up, `active`.
    #[serde(default)]
    pub slow_answers: VecDeque<SlowAnswer>,
    /// The `juniper_tide` block of the usage answer.
    #[serde(default = "available")]
    pub usage: Value,
    /// The usage call's status (a non-2xx plays an error).
    #[serde(default = "ok")]
    pub usage_status: u16,
    /// The claim's `result`.
    #[serde(default = "reset")]
    pub claim_result: String,
    /// The claim's `next_available_at`, epoch seconds.
    #[serde(default)]
    pub next_available_at: Option<u64>,
}

fn yes() -> bool {
    true
}
fn available() -> Value {
    json!({"arm": "reset", "available": true})
}
fn ok() -> u16 {
    200
}
fn reset() -> String {
    "reset".to_owned()
}

impl WallScript {
    /// A wall that offers the lane, resetting at `reset_at` (epoch seconds); the lane serves
    /// every slow request.
    pub fn new(reset_at: u64) -> Self {
        Self {
            api_key: None,
            reset_at,
            offer: true,
            slow_answers: VecDeque::new(),
            usage: available(),
            usage_status: 200,
            claim_result: reset(),
            next_available_at: None,
        }
    }
}

/// What the wall saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WallSeen {
    /// Requests answered with the wall 429.
    pub walled: u64,
    /// Requests that asked for the lane (`anthropic-usage-limit: slow`).
    pub slow: u64,
    /// Requests served at full speed after a reset lifted the wall.
    pub after_lift: u64,
    /// Of those, ones that still asked for the lane.
    pub slow_after_lift: u64,
    /// `GET /api/oauth/usage` calls, and the last one's query.
    pub usage_calls: u64,
    pub last_usage_query: Option<String>,
    /// Claims, and the last one's organization, body and bearer token.
    pub claims: u64,
    pub last_claim_org: Option<String>,
    pub last_claim_body: Option<String>,
    pub last_token: Option<String>,
    /// Whether each request that met the scripted wall asked for the lane, in order (the
    /// newest [`MAX_SEEN`]).
    pub requests: Vec<bool>,
}

struct Armed {
    script: WallScript,
    lifted: bool,
}

/// The scripted wall, if any, and what it saw.
#[derive(Default)]
pub(crate) struct UsageWall {
    armed: AtomicBool,
    state: Mutex<Option<Armed>>,
    seen: Mutex<WallSeen>,
}

impl UsageWall {
    pub(crate) fn arm(&self, script: WallScript) {
        *lock(&self.state) = Some(Armed {
            script,
            lifted: false,
        });
        self.armed.store(true, Ordering::Release);
    }

    pub(crate) fn disarm(&self) {
        self.armed.store(false, Ordering::Release);
        *lock(&self.state) = None;
    }

    pub(crate) fn seen(&self) -> WallSeen {
        lock(&self.seen).clone()
    }

    pub(crate) fn reset(&self) {
        self.disarm();
        *lock(&self.seen) = WallSeen::default();
    }

    /// The answer the wall gives a `/v1/messages` request, as a fault; `None` when no wall is
    /// scripted for it (the request is served as usual).
    pub(crate) fn fault_for(
        &self,
        route: Route,
        api_key: Option<&str>,
        headers: &HeaderMap,
    ) -> Option<FaultSpec> {
        if !self.armed.load(Ordering::Acquire) || route != Route::Messages {
            return None;
        }
        let mut state = lock(&self.state);
        let armed = state.as_mut()?;
        if armed
            .script
            .api_key
            .as_deref()
            .is_some_and(|k| Some(k) != api_key)
        {
            return None;
        }
        let slow = headers
            .get(SLOW_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("slow"));
        let mut seen = lock(&self.seen);
        if seen.requests.len() < MAX_SEEN {
            seen.requests.push(slow);
        }
        if armed.lifted {
            seen.after_lift += 1;
            seen.slow_after_lift += u64::from(slow);
            return None;
        }
        let reset_at = armed.script.reset_at.to_string();
        if !slow {
            seen.walled += 1;
            let mut wall = FaultSpec {
                error_type: Some("rate_limit_error".to_owned()),
                error_message: Some(
                    "This request would exceed your account's rate limit. Please try again later."
                        .to_owned(),
                ),
                ..FaultSpec::status(429)
            }
            .header("anthropic-ratelimit-unified-status", "rejected")
            .header("anthropic-ratelimit-unified-reset", reset_at);
            if armed.script.offer {
                wall = wall.header("anthropic-ratelimit-unified-slow-offer", "treatment");
            }
            return Some(wall);
        }
        seen.slow += 1;
        let answer = armed
            .script
            .slow_answers
            .pop_front()
            .unwrap_or_else(SlowAnswer::active);
        Some(slow_fault(&answer, &reset_at))
    }
}

/// A lane answer as a fault: a 200 is served normally with the lane's headers.
fn slow_fault(answer: &SlowAnswer, reset_at: &str) -> FaultSpec {
    let mut f = if answer.status == 200 {
        FaultSpec::new()
    } else {
        FaultSpec {
            error_type: Some(
                if answer.status == 529 {
                    "overloaded_error"
                } else {
                    "rate_limit_error"
                }
                .to_owned(),
            ),
            ..FaultSpec::status(answer.status)
        }
    }
    .header(
        "anthropic-ratelimit-unified-slow-status",
        answer.slow_status.as_str(),
    )
    .header("anthropic-ratelimit-unified-reset", reset_at);
    if answer.status != 200 {
        f = f.header("anthropic-ratelimit-unified-status", "rejected");
    }
    if let Some(s) = answer.retry_after_s {
        f = f.header(
            "anthropic-ratelimit-unified-slow-retry-after",
            s.to_string(),
        );
    }
    if let Some(s) = answer.max_wait_s {
        f = f.header("anthropic-ratelimit-unified-slow-max-wait", s.to_string());
    }
    if answer.overage_in_use {
        f = f.header("anthropic-ratelimit-unified-overage-in-use", "true");
    }
    f
}

/// Whether a request goes to the OAuth endpoints rather than a provider route.
pub(crate) fn is_oauth(path: &str) -> bool {
    path.starts_with("/api/")
}

/// `GET /api/oauth/usage` and `POST /api/organizations/{org}/reset_rate_limits`.
pub(crate) async fn oauth(wall: &UsageWall, req: Request<Incoming>) -> Response<MockBody> {
    let token = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let path = req.uri().path().to_owned();
    let org = path
        .strip_prefix("/api/organizations/")
        .and_then(|rest| rest.strip_suffix("/reset_rate_limits"))
        .map(str::to_owned);
    match (req.method().clone(), path.as_str(), org) {
        (Method::GET, "/api/oauth/usage", _) => {
            let query = req.uri().query().map(str::to_owned);
            let mut seen = lock(&wall.seen);
            seen.usage_calls += 1;
            seen.last_usage_query = query;
            seen.last_token = token;
            drop(seen);
            let state = lock(&wall.state);
            let (status, block) = match state.as_ref() {
                Some(a) => (a.script.usage_status, a.script.usage.clone()),
                None => (200, json!({"arm": "none", "available": false})),
            };
            drop(state);
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            reply(status, &json!({ "juniper_tide": block }))
        }
        (Method::POST, _, Some(org)) => {
            let body = match Limited::new(req.into_body(), MAX_CLAIM_BODY)
                .collect()
                .await
            {
                Ok(c) => String::from_utf8_lossy(&c.to_bytes()).into_owned(),
                Err(_) => return reply(StatusCode::PAYLOAD_TOO_LARGE, &json!({})),
            };
            let mut seen = lock(&wall.seen);
            seen.claims += 1;
            seen.last_claim_org = Some(org);
            seen.last_claim_body = Some(body);
            seen.last_token = token;
            drop(seen);
            let mut state = lock(&wall.state);
            let Some(armed) = state.as_mut() else {
                return reply(StatusCode::OK, &json!({"result": "not_limited"}));
            };
            let result = armed.script.claim_result.clone();
            if result == "reset" || result == "not_limited" {
                armed.lifted = true;
            }
            let mut answer = json!({ "result": result });
            if let Some(at) = armed.script.next_available_at {
                answer["next_available_at"] = json!(at);
            }
            reply(StatusCode::OK, &answer)
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            &json!({"type": "error", "error": {"type": "not_found_error", "message": "Not found"}}),
        ),
    }
}

fn reply(status: StatusCode, value: &Value) -> Response<MockBody> {
    let mut resp = Response::new(MockBody::full(wire::serialize(value)));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(slow: bool) -> HeaderMap {
        let mut h = HeaderMap::new();
        if slow {
            h.insert(SLOW_HEADER, HeaderValue::from_static("slow"));
        }
        h
    }

    fn header<'a>(f: &'a FaultSpec, name: &str) -> Option<&'a str> {
        f.headers.get(name).map(String::as_str)
    }

    #[test]
    fn nothing_is_answered_unless_a_wall_is_scripted() {
        let wall = UsageWall::default();
        assert!(
            wall.fault_for(Route::Messages, None, &headers(false))
                .is_none()
        );
        wall.arm(WallScript::new(1_760_000_000));
        assert!(
            wall.fault_for(Route::ChatCompletions, None, &headers(false))
                .is_none(),
            "only the Messages route"
        );
        wall.disarm();
        assert!(
            wall.fault_for(Route::Messages, None, &headers(false))
                .is_none()
        );
        assert_eq!(wall.seen().requests.len(), 0);
    }

    #[test]
    fn the_wall_refuses_full_speed_and_the_lane_answers_in_order() {
        let wall = UsageWall::default();
        let mut script = WallScript::new(1_760_000_000);
        script.slow_answers.push_back(SlowAnswer::slot_busy(5));
        wall.arm(script);
        let w = wall
            .fault_for(Route::Messages, None, &headers(false))
            .unwrap();
        assert_eq!(w.status, Some(429));
        assert_eq!(
            header(&w, "anthropic-ratelimit-unified-status"),
            Some("rejected")
        );
        assert_eq!(
            header(&w, "anthropic-ratelimit-unified-slow-offer"),
            Some("treatment")
        );
        assert_eq!(
            header(&w, "anthropic-ratelimit-unified-reset"),
            Some("1760000000")
        );
        let busy = wall
            .fault_for(Route::Messages, None, &headers(true))
            .unwrap();
        assert_eq!(busy.status, Some(429));
        assert_eq!(
            header(&busy, "anthropic-ratelimit-unified-slow-status"),
            Some("slot_busy")
        );
        assert_eq!(
            header(&busy, "anthropic-ratelimit-unified-slow-retry-after"),
            Some("5")
        );
        let served = wall
            .fault_for(Route::Messages, None, &headers(true))
            .unwrap();
        assert_eq!(served.status, None, "served normally");
        assert_eq!(
            header(&served, "anthropic-ratelimit-unified-slow-status"),
            Some("active")
        );
        let seen = wall.seen();
        assert_eq!((seen.walled, seen.slow), (1, 2));
        assert_eq!(seen.requests, vec![false, true, true]);
    }

    #[test]
    fn a_wall_for_another_key_lets_the_request_through() {
        let wall = UsageWall::default();
        let mut script = WallScript::new(1);
        script.api_key = Some("walled".into());
        wall.arm(script);
        assert!(
            wall.fault_for(Route::Messages, Some("other"), &headers(false))
                .is_none()
        );
        assert!(
            wall.fault_for(Route::Messages, Some("walled"), &headers(false))
                .is_some()
        );
    }

    #[test]
    fn scripts_parse_with_their_defaults() {
        let s: WallScript = serde_json::from_str(r#"{"reset_at": 5}"#).unwrap();
        assert!(s.offer);
        assert_eq!(s.claim_result, "reset");
        assert_eq!(s.usage, available());
        assert!(serde_json::from_str::<WallScript>(r#"{"reset_at": 5, "nope": 1}"#).is_err());
    }
}
