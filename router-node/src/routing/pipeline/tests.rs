//! Each step of the pipeline on its own, against a runtime built from a config, the real
//! breaker actors where a step talks to them, and a canned upstream on 127.0.0.1 where a step
//! reaches one.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use switchyard_shared::breaker::BreakerView;
use switchyard_shared::config::Target;

use super::attempt::{self, Attempted};
use super::outcome::{self, Success};
use super::{Next, RequestCtx, Step, TargetCtx, eligibility, fence, permits};
use crate::actors::{BreakerSnapshot, ConnHandle};
use crate::api::errors::ClientFormat;
use crate::leases::LeaseClaim;
use crate::routing::report::{TargetSkip, UpstreamFailure};
use crate::routing::tests::{
    NOT_JSON, OK_JSON, TOO_MANY, canned_upstream, probes_in_flight, request, runtime,
    start_half_open,
};
use crate::runtime::Runtime;
use crate::upstream::AttemptFailure;

const CHAT: &str = r#"{"model":"p/m","messages":[{"role":"user","content":"hi"}]}"#;
const MESSAGES: &str =
    r#"{"model":"p/m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}"#;

fn target(provider: &str) -> Target {
    Target {
        provider: provider.into(),
        model: "m".into(),
        connection: None,
        weight: 1,
    }
}

fn ctx_for(rt: &Runtime, format: ClientFormat, body: &str) -> TargetCtx {
    match eligibility::prepare(&rt.table, &request(format, body), &target("p")) {
        Ok(Step::Go(ctx)) => ctx,
        _ => panic!("provider p is configured"),
    }
}

fn rc(max_attempts: u32) -> RequestCtx {
    RequestCtx {
        max_attempts,
        ..RequestCtx::default()
    }
}

fn conn(rt: &Runtime, id: &str) -> Arc<ConnHandle> {
    rt.table.connection(id).cloned().unwrap()
}

fn upstream_failure(status: u16) -> AttemptFailure {
    AttemptFailure {
        status: Some(status),
        message: format!("HTTP {status}"),
        ..AttemptFailure::default()
    }
}

// ---- eligibility -----------------------------------------------------------------------------

#[actix_rt::test]
async fn prepare_skips_an_unknown_provider_and_plans_translation() {
    let rt = runtime("http://127.0.0.1:9/v1", 30);
    let req = request(ClientFormat::OpenAiChat, CHAT);
    assert!(matches!(
        eligibility::prepare(&rt.table, &req, &target("nope")),
        Ok(Step::Skip(TargetSkip::NoConnections))
    ));
    let native = ctx_for(&rt, ClientFormat::OpenAiChat, CHAT);
    assert_eq!(native.key, "p/m");
    assert_eq!(native.wire, ClientFormat::OpenAiChat);
    assert!(native.translation.is_none());
    let translated = ctx_for(&rt, ClientFormat::Anthropic, MESSAGES);
    assert_eq!(translated.wire, ClientFormat::OpenAiChat);
    assert!(translated.translation.is_some());
}

#[actix_rt::test]
async fn breaker_gate_passes_closed_skips_open_and_admits_one_probe() {
    let rt = runtime("http://127.0.0.1:9/v1", 30);
    let provider = rt.table.providers[0].clone();
    assert!(matches!(
        eligibility::breaker_gate(&rt.table, &provider).await,
        Step::Go(None)
    ));
    let until = rt.table.clock.now() + 60_000;
    provider.breaker.store(Arc::new(BreakerSnapshot {
        view: BreakerView::Open { until },
        failure_count: 12,
    }));
    match eligibility::breaker_gate(&rt.table, &provider).await {
        Step::Skip(TargetSkip::CircuitOpen { retry_after_ms }) => {
            assert!(retry_after_ms > 0 && retry_after_ms <= 60_000);
        }
        other => panic!("an open breaker must skip: {other:?}"),
    }

    let rt = runtime("http://127.0.0.1:9/v1", 30);
    start_half_open(&rt).await;
    let provider = rt.table.providers[0].clone();
    let Step::Go(Some(probe)) = eligibility::breaker_gate(&rt.table, &provider).await else {
        panic!("a half-open breaker admits a probe");
    };
    assert_eq!(probes_in_flight(&rt).await, 1);
    // The budget is one probe: the next request is refused while the lease is held…
    assert!(matches!(
        eligibility::breaker_gate(&rt.table, &provider).await,
        Step::Skip(TargetSkip::CircuitOpen { .. })
    ));
    // …and dropping the guard hands the lease back.
    drop(probe);
    assert_eq!(probes_in_flight(&rt).await, 0);
}

#[actix_rt::test]
async fn pick_connection_says_why_nothing_is_left() {
    let rt = runtime("http://127.0.0.1:9/v1", 30);
    let req = request(ClientFormat::OpenAiChat, CHAT);
    let mut ctx = ctx_for(&rt, ClientFormat::OpenAiChat, CHAT);
    let mut rc = rc(30);
    let now = rt.table.clock.now();
    let Step::Go(first) = eligibility::pick_connection(&rt.table, &req, &mut ctx, &rc, now) else {
        panic!("two healthy connections");
    };
    assert!(first.id.starts_with("p-"));

    // Every connection failed earlier in this request (on another target): the in-request
    // exhaustion, not a block the snapshots show.
    rc.excluded = vec![0, 1];
    assert!(matches!(
        eligibility::pick_connection(&rt.table, &req, &mut ctx, &rc, now),
        Step::Skip(TargetSkip::RequestExhaustion)
    ));
    // After a failure on this target: the target failed.
    rc.report.last_failure = Some(UpstreamFailure {
        target: "p/m".into(),
        connection: "p-1".into(),
        status: Some(500),
        message: String::new(),
        retry_after_ms: None,
        stream_code: None,
        code: None,
        block: None,
    });
    assert!(matches!(
        eligibility::pick_connection(&rt.table, &req, &mut ctx, &rc, now),
        Step::Skip(TargetSkip::Failed)
    ));
    // A saturated connection's reason comes first, once.
    ctx.gate_rejection = Some(TargetSkip::NoConnections);
    assert!(matches!(
        eligibility::pick_connection(&rt.table, &req, &mut ctx, &rc, now),
        Step::Skip(TargetSkip::NoConnections)
    ));
    assert!(ctx.gate_rejection.is_none());

    // A pinned target whose connection does not exist has no connections at all.
    rc.excluded.clear();
    rc.report.last_failure = None;
    ctx.pinned = Some("p-9".into());
    assert!(matches!(
        eligibility::pick_connection(&rt.table, &req, &mut ctx, &rc, now),
        Step::Skip(TargetSkip::NoConnections)
    ));
}

// ---- fence -----------------------------------------------------------------------------------

#[actix_rt::test]
async fn fence_passes_ordinary_requests_and_refuses_a_lease_on_another_connection() {
    let rt = runtime("http://127.0.0.1:9/v1", 30);
    let p1 = conn(&rt, "p-1");
    let plain = request(ClientFormat::OpenAiChat, CHAT);
    let fenced = fence::before_permits(&rt.table, &plain, &p1).await.unwrap();
    assert!(
        fence::at_dispatch(&rt.table, &plain, &p1, fenced)
            .await
            .is_ok()
    );

    let mut leased = request(ClientFormat::OpenAiChat, CHAT);
    leased.lease = Some(LeaseClaim::new(
        format!("vlo_{}", "a".repeat(43)),
        1,
        "p-2".into(),
        "k".into(),
    ));
    let Err(e) = fence::before_permits(&rt.table, &leased, &p1).await else {
        panic!("a lease on p-2 cannot dispatch to p-1");
    };
    assert_eq!(e.code, "LEASE_CONNECTION_MISMATCH");
    // Checked before the wait for permits; at dispatch time it is checked again once time
    // has passed (here: the store has no such lease, so the holder is stale).
    let long_ago = fence::Fenced::at(0);
    let p2 = conn(&rt, "p-2");
    while rt.table.clock.now() == 0 {
        tokio::task::yield_now().await;
    }
    let Err(e) = fence::at_dispatch(&rt.table, &leased, &p2, long_ago).await else {
        panic!("a lease the store does not know is stale");
    };
    assert_eq!(e.code, "LEASE_FENCE_STALE");
}

// ---- permits ---------------------------------------------------------------------------------

#[actix_rt::test]
async fn permits_count_in_flight_until_dropped_and_a_full_gate_is_refused() {
    let rt = runtime("http://127.0.0.1:9/v1", 30);
    let mut settings = (**rt.table.settings.load()).clone();
    settings.concurrency.semaphore_max_queue = 0;
    rt.table.settings.store(Arc::new(settings));
    let provider = rt.table.providers[0].clone();
    let capped = conn(&rt, "p-2");
    let held = permits::acquire(&rt.table, &provider, &capped, "m", false)
        .await
        .unwrap();
    assert_eq!(capped.inflight.load(Ordering::Acquire), 1);
    assert_eq!(provider.inflight.load(Ordering::Acquire), 1);

    let Err(skip) = permits::acquire(&rt.table, &provider, &capped, "m", false).await else {
        panic!("p-2 allows one request at a time");
    };
    assert!(matches!(skip, TargetSkip::Saturated { .. }), "{skip:?}");
    let mut ctx = ctx_for(&rt, ClientFormat::OpenAiChat, CHAT);
    let mut rc = rc(30);
    permits::refused(&rt.table, &mut ctx, &mut rc, &capped, skip);
    assert_eq!(rc.excluded, vec![capped.idx]);
    assert!(ctx.gate_rejection.is_some() && ctx.fallback);

    drop(held);
    assert_eq!(capped.inflight.load(Ordering::Acquire), 0);
    assert_eq!(provider.inflight.load(Ordering::Acquire), 0);
    let again = permits::acquire(&rt.table, &provider, &capped, "m", false).await;
    assert!(again.is_ok(), "the permit came back on drop");
}

// ---- attempt ---------------------------------------------------------------------------------

#[actix_rt::test]
async fn count_stops_at_the_attempt_cap() {
    let rt = runtime("http://127.0.0.1:9/v1", 30);
    let ctx = ctx_for(&rt, ClientFormat::OpenAiChat, CHAT);
    let p1 = conn(&rt, "p-1");
    let mut rc = rc(1);
    assert!(attempt::count(&mut rc, &ctx, &p1, rt.table.clock.now()).is_ok());
    assert_eq!(rc.report.attempts, 1);
    assert_eq!(ctx.provider.last_used_conn.load(Ordering::Acquire), p1.idx);
    let Err(e) = attempt::count(&mut rc, &ctx, &p1, rt.table.clock.now()) else {
        panic!("one attempt allowed");
    };
    assert_eq!(e.code, "max_attempts_exceeded");
    assert_eq!(rc.report.attempts, 1);
}

#[actix_rt::test]
async fn attempt_replies_fails_or_cannot_translate() {
    for (response, format, body, want) in [
        (OK_JSON, ClientFormat::OpenAiChat, CHAT, "replied"),
        (TOO_MANY, ClientFormat::OpenAiChat, CHAT, "failed"),
        (
            NOT_JSON,
            ClientFormat::Anthropic,
            MESSAGES,
            "untranslatable",
        ),
    ] {
        let base = canned_upstream(response).await;
        let rt = runtime(&base, 30);
        let req = request(format, body);
        let ctx = ctx_for(&rt, format, body);
        let p1 = conn(&rt, "p-1");
        let got = match attempt::attempt(&rt.table, &req, &ctx, &p1, 0, rt.table.clock.now(), false)
            .await
        {
            Attempted::Replied(_) => "replied",
            Attempted::Failed(f) => {
                assert_eq!(f.status, Some(429));
                "failed"
            }
            Attempted::Untranslatable(e) => {
                assert_eq!(e.code, "upstream_invalid_json");
                "untranslatable"
            }
            Attempted::ExecutionTimeout(e) => panic!("no execution budget here: {e:?}"),
        };
        assert_eq!(got, want);
    }
}

// ---- observe ---------------------------------------------------------------------------------

#[actix_rt::test]
async fn a_retryable_failure_retries_elsewhere_and_a_client_error_fails() {
    let rt = runtime("http://127.0.0.1:9/v1", 30);
    let req = request(ClientFormat::OpenAiChat, CHAT);
    let mut ctx = ctx_for(&rt, ClientFormat::OpenAiChat, CHAT);
    let mut rc = rc(30);
    let p1 = conn(&rt, "p-1");
    let next = outcome::on_failure(
        &rt.table,
        &req,
        &mut ctx,
        &mut rc,
        &p1,
        &upstream_failure(429),
        false,
    )
    .await;
    assert!(matches!(next, Next::Retry), "{next:?}");
    assert_eq!(rc.excluded, vec![p1.idx]);
    assert!(ctx.fallback);
    assert_eq!(
        rc.report.last_failure.as_ref().map(|f| f.status),
        Some(Some(429))
    );

    let p2 = conn(&rt, "p-2");
    let next = outcome::on_failure(
        &rt.table,
        &req,
        &mut ctx,
        &mut rc,
        &p2,
        &upstream_failure(400),
        false,
    )
    .await;
    let Next::Fail(e) = next else {
        panic!("a 400 is the client's: {next:?}");
    };
    assert_eq!(e.status.as_u16(), 400);
}

#[actix_rt::test]
async fn a_failed_probe_settles_its_lease_and_leaves_the_target() {
    let rt = runtime("http://127.0.0.1:9/v1", 30);
    start_half_open(&rt).await;
    let req = request(ClientFormat::OpenAiChat, CHAT);
    let mut ctx = ctx_for(&rt, ClientFormat::OpenAiChat, CHAT);
    let Step::Go(probe) = eligibility::breaker_gate(&rt.table, &ctx.provider).await else {
        panic!("half-open admits a probe");
    };
    ctx.probe = probe;
    let mut rc = rc(30);
    let p1 = conn(&rt, "p-1");
    // A server error is the provider's: the probe failed, the breaker reopens.
    let next = outcome::on_failure(
        &rt.table,
        &req,
        &mut ctx,
        &mut rc,
        &p1,
        &upstream_failure(500),
        false,
    )
    .await;
    assert!(matches!(next, Next::Skip(TargetSkip::Failed)), "{next:?}");
    assert!(ctx.probe.is_none());
    assert_eq!(probes_in_flight(&rt).await, 0);
    assert!(matches!(
        rt.table.providers[0].breaker.load().view,
        BreakerView::Open { .. }
    ));
}

#[actix_rt::test]
async fn an_ignored_probe_failure_hands_the_lease_on_to_the_next_connection() {
    let rt = runtime("http://127.0.0.1:9/v1", 30);
    start_half_open(&rt).await;
    let req = request(ClientFormat::OpenAiChat, CHAT);
    let mut ctx = ctx_for(&rt, ClientFormat::OpenAiChat, CHAT);
    let Step::Go(Some(probe)) = eligibility::breaker_gate(&rt.table, &ctx.provider).await else {
        panic!("half-open admits a probe");
    };
    let first = probe.generation();
    ctx.probe = Some(probe);
    let mut rc = rc(30);
    let p1 = conn(&rt, "p-1");
    // A connection's 429 says nothing about the provider: the lease goes back and the next
    // connection goes as a new probe.
    let next = outcome::on_failure(
        &rt.table,
        &req,
        &mut ctx,
        &mut rc,
        &p1,
        &upstream_failure(429),
        false,
    )
    .await;
    assert!(matches!(next, Next::Retry), "{next:?}");
    let second = ctx.probe.as_ref().and_then(|p| p.generation());
    assert!(second.is_some() && second != first);
    assert_eq!(probes_in_flight(&rt).await, 1);
    drop(ctx);
    assert_eq!(probes_in_flight(&rt).await, 0);
}

#[actix_rt::test]
async fn a_successful_probe_settles_its_lease_and_closes_the_breaker() {
    let base = canned_upstream(OK_JSON).await;
    let rt = runtime(&base, 30);
    start_half_open(&rt).await;
    let req = request(ClientFormat::OpenAiChat, CHAT);
    let mut ctx = ctx_for(&rt, ClientFormat::OpenAiChat, CHAT);
    let Step::Go(probe) = eligibility::breaker_gate(&rt.table, &ctx.provider).await else {
        panic!("half-open admits a probe");
    };
    ctx.probe = probe;
    let rc = rc(30);
    let p1 = conn(&rt, "p-1");
    let provider = ctx.provider.clone();
    let permits = permits::acquire(&rt.table, &provider, &p1, "m", false)
        .await
        .unwrap();
    let started = rt.table.clock.now();
    let Attempted::Replied(body) =
        attempt::attempt(&rt.table, &req, &ctx, &p1, 0, started, false).await
    else {
        panic!("the upstream answers 200");
    };
    let ok = Success {
        body,
        conn: p1.clone(),
        permits,
        started,
    };
    let routed = outcome::on_success(&rt.table, &req, ctx, &rc, ok);
    assert!(routed.probe.is_some());
    assert_eq!(routed.target, "p/m");
    assert_eq!(probes_in_flight(&rt).await, 0);
    assert_eq!(
        rt.table.providers[0].breaker.load().view,
        BreakerView::Closed
    );
    drop(routed);
    assert_eq!(p1.inflight.load(Ordering::Acquire), 0);
}

fn failure_with_body(status: u16, body: &str) -> AttemptFailure {
    AttemptFailure {
        body: body.to_owned(),
        ..upstream_failure(status)
    }
}

#[actix_rt::test]
async fn a_generic_400_moves_a_combo_to_its_next_target_and_a_body_specific_one_stops_it() {
    let rt = runtime("http://127.0.0.1:9/v1", 30);
    let req = request(ClientFormat::OpenAiChat, CHAT);
    let p1 = conn(&rt, "p-1");
    let generic = failure_with_body(400, r#"{"error":{"message":"no such thing here"}}"#);
    let body_specific = failure_with_body(400, r#"{"error":{"message":"invalid prompt"}}"#);

    // A combo: the generic 400 leaves the target at once, its other connection untried.
    let mut ctx = ctx_for(&rt, ClientFormat::OpenAiChat, CHAT);
    let mut combo = RequestCtx {
        is_combo: true,
        ..rc(30)
    };
    let next =
        outcome::on_failure(&rt.table, &req, &mut ctx, &mut combo, &p1, &generic, false).await;
    assert!(matches!(next, Next::Skip(TargetSkip::Failed)), "{next:?}");
    assert!(
        combo.excluded.is_empty(),
        "the connection stays usable for the provider's other models"
    );
    let next = outcome::on_failure(
        &rt.table,
        &req,
        &mut ctx,
        &mut combo,
        &p1,
        &body_specific,
        false,
    )
    .await;
    let Next::Fail(e) = next else {
        panic!("a body-specific 400 stops the combo: {next:?}");
    };
    assert_eq!(e.status.as_u16(), 400);

    // A direct request answers with the generic 400 as it is.
    let mut ctx = ctx_for(&rt, ClientFormat::OpenAiChat, CHAT);
    let mut direct = rc(30);
    let next =
        outcome::on_failure(&rt.table, &req, &mut ctx, &mut direct, &p1, &generic, false).await;
    assert!(matches!(next, Next::Fail(_)), "{next:?}");
}

#[actix_rt::test]
async fn a_target_timeout_is_answered_as_524_and_auth_failures_exhaust_the_connection() {
    let rt = runtime("http://127.0.0.1:9/v1", 30);
    let req = request(ClientFormat::OpenAiChat, CHAT);
    let mut ctx = ctx_for(&rt, ClientFormat::OpenAiChat, CHAT);
    let mut rc = RequestCtx {
        is_combo: true,
        ..rc(30)
    };
    let p1 = conn(&rt, "p-1");
    let timeout = AttemptFailure {
        status: None,
        transport: Some(switchyard_shared::classify::TransportFailure::Timeout),
        ..AttemptFailure::default()
    };
    let next = outcome::on_failure(&rt.table, &req, &mut ctx, &mut rc, &p1, &timeout, true).await;
    assert!(matches!(next, Next::Retry), "{next:?}");
    let last = rc.report.last_failure.clone().unwrap();
    assert_eq!(last.status, Some(outcome::TARGET_TIMEOUT_STATUS));
    assert_eq!(last.code.as_deref(), Some("target_timeout"));
    let e = crate::routing::terminal::upstream_error(&rc.report);
    assert_eq!(
        (e.status.as_u16(), e.code.as_str()),
        (524, "target_timeout")
    );
    assert!(
        rc.exhausted.is_empty(),
        "a timeout is not for the whole request"
    );

    let p2 = conn(&rt, "p-2");
    let _ = outcome::on_failure(
        &rt.table,
        &req,
        &mut ctx,
        &mut rc,
        &p2,
        &upstream_failure(401),
        false,
    )
    .await;
    assert_eq!(rc.exhausted, vec![p2.idx], "a 401 exhausts its connection");
}

/// A Gemini key refused with `400 INVALID_ARGUMENT` and `ErrorInfo.reason API_KEY_INVALID`
/// (quoted in cequence-io/openai-scala-client#109; corpus `gemini/api-key-invalid`) keeps its
/// connection out for the rest of the request, as a 401 does; a plain 400 does not.
#[test]
fn a_key_refused_with_a_400_is_exhausted_for_the_request_like_a_401() {
    use switchyard_shared::classify::{ClassifyInput, classify};
    use switchyard_shared::outcome::ProviderCategory;
    const KEY_INVALID: &str = r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}}]}}"#;
    const PLAIN_400: &str = r#"{"error":{"code":400,"message":"Invalid JSON payload received.","status":"INVALID_ARGUMENT"}}"#;
    let failure = |status: u16| UpstreamFailure {
        target: "g/gemini-2.5-flash".into(),
        connection: "g-key".into(),
        status: Some(status),
        message: String::new(),
        retry_after_ms: None,
        stream_code: None,
        code: None,
        block: None,
    };
    let judged = |status: u16, body: &str| {
        classify(&ClassifyInput {
            status,
            error_text: body,
            body,
            provider_id: "gemini",
            category: ProviderCategory::Apikey,
            ..ClassifyInput::default()
        })
    };
    let refused = judged(400, KEY_INVALID);
    assert!(outcome::exhausts(&refused, &failure(400)), "{refused:?}");
    let unauthorized = judged(401, r#"{"error":{"message":"Unauthorized"}}"#);
    assert!(outcome::exhausts(&unauthorized, &failure(401)));
    let plain = judged(400, PLAIN_400);
    assert!(!outcome::exhausts(&plain, &failure(400)), "{plain:?}");
}
