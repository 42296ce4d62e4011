use std::sync::Arc;
use std::time::Duration;

use switchyard_shared::breaker::BreakerState;
use switchyard_shared::config::Config;
use switchyard_shared::outcome::FailureReason;
use switchyard_shared::sse::{StreamAbort, Usage};

use super::labels::{
    AbortKind, FallbackReason, RejectionType, Route, SkipReason, StatusClass, TokenType,
};
use super::*;
use crate::routing::report::TargetSkip;
use crate::runtime::Runtime;

const CONFIG: &str = r#"
[server]
listen = "127.0.0.1:1"
admin_listen = "127.0.0.1:2"

[auth]
require_api_key = false
management_key_env = ""

[[api_keys]]
id = "team-a"
key_env = "KEY"

[[providers]]
id = "listed"
category = "apikey"
format = "openai"
base_url = "http://127.0.0.1:9/v1"
models = ["gpt-4o-mini"]

[[providers]]
id = "open"
category = "apikey"
format = "openai"
base_url = "http://127.0.0.1:9/v1"
models = []

[[connections]]
id = "listed-1"
provider = "listed"
api_key_env = "KEY"

[[connections]]
id = "open-1"
provider = "open"
api_key_env = "KEY"
model_concurrency = { "capped-model" = 2 }

[[combos]]
name = "mix"
strategy = "priority"
targets = [{ target = "listed/gpt-4o-mini" }, { target = "open/combo-model" }]
"#;

fn runtime() -> Runtime {
    let config = Config::from_toml_str(CONFIG).unwrap();
    Runtime::build(config, &|k| (k == "KEY").then(|| "sk-test".to_owned())).unwrap()
}

/// The value of the sample `name{labels}` in an exposition (labels in exposition order).
fn sample(text: &str, name: &str, labels: &str) -> Option<f64> {
    let head = if labels.is_empty() {
        format!("{name} ")
    } else {
        format!("{name}{{{labels}}} ")
    };
    text.lines()
        .find_map(|l| l.strip_prefix(head.as_str()))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
fn status_classes_have_three_values() {
    for (status, class) in [
        (200, "2xx"),
        (204, "2xx"),
        (101, "2xx"),
        (304, "2xx"),
        (400, "4xx"),
        (404, "4xx"),
        (429, "4xx"),
        (CLIENT_CLOSED, "4xx"),
        (500, "5xx"),
        (503, "5xx"),
        (504, "5xx"),
        (599, "5xx"),
        (999, "5xx"),
    ] {
        assert_eq!(StatusClass::of(status).label(), class, "status {status}");
    }
    assert_eq!(StatusClass::labels(), ["2xx", "4xx", "5xx"]);
}

#[test]
fn unconfigured_models_are_other() {
    let rt = runtime();
    let m = &rt.table.metrics;
    let listed = rt.table.provider_by_id["listed"];
    let open = rt.table.provider_by_id["open"];
    assert_eq!(m.model_label(listed, "gpt-4o-mini"), "gpt-4o-mini");
    // A provider's models list, combo targets and model caps are configured; nothing else.
    assert_eq!(m.model_label(open, "combo-model"), "combo-model");
    assert_eq!(m.model_label(open, "capped-model"), "capped-model");
    assert_eq!(m.model_label(open, "gpt-4o-mini"), "other");
    assert_eq!(m.model_label(listed, "free text from a client"), "other");
    assert_eq!(m.model_label(listed, "combo-model"), "other");
    assert_eq!(m.model_label(99, "gpt-4o-mini"), "other");

    m.usage(
        open,
        "client-invented-model",
        &Usage {
            input: Some(7),
            output: Some(3),
            cache_read: None,
            cache_creation: Some(0),
        },
    );
    m.usage(
        listed,
        "gpt-4o-mini",
        &Usage {
            input: Some(11),
            output: None,
            cache_read: Some(5),
            cache_creation: None,
        },
    );
    let text = m.encode().unwrap();
    let family = "switchyard_gen_ai_client_token_usage_total";
    let at = |labels: &str| sample(&text, family, labels);
    assert_eq!(
        at(r#"model="other",provider="open",token_type="input""#),
        Some(7.0)
    );
    assert_eq!(
        at(r#"model="other",provider="open",token_type="output""#),
        Some(3.0)
    );
    assert_eq!(
        at(r#"model="gpt-4o-mini",provider="listed",token_type="input""#),
        Some(11.0)
    );
    assert_eq!(
        at(r#"model="gpt-4o-mini",provider="listed",token_type="cache_read""#),
        Some(5.0)
    );
    assert!(!text.contains("client-invented-model"), "{text}");
}

#[test]
fn tokens_are_counted_by_configured_client_key() {
    let rt = runtime();
    let usage = Usage {
        input: Some(4),
        output: Some(2),
        cache_read: None,
        cache_creation: None,
    };
    rt.table.metrics.key_usage("team-a", &usage);
    rt.table.metrics.key_usage("team-a", &usage);
    // A name that is not a configured key never becomes a label.
    rt.table.metrics.key_usage("someone-else", &usage);
    let text = rt.table.metrics.encode().unwrap();
    let family = "switchyard_client_key_token_usage_total";
    let at = |labels: &str| sample(&text, family, labels);
    assert_eq!(at(r#"api_key="team-a",token_type="input""#), Some(8.0));
    assert_eq!(at(r#"api_key="team-a",token_type="output""#), Some(4.0));
    assert!(!text.contains("someone-else"), "{text}");
}

#[test]
fn attempt_failures_are_sorted_into_kinds() {
    use crate::counters::labels::AttemptFailureKind as K;
    assert_eq!(K::of(true, Some(200), true), K::StreamAbort);
    assert_eq!(K::of(false, None, false), K::Transport);
    assert_eq!(K::of(false, Some(429), true), K::InBand);
    assert_eq!(K::of(false, Some(429), false), K::RateLimited);
    assert_eq!(K::of(false, Some(404), false), K::ClientError);
    assert_eq!(K::of(false, Some(529), false), K::ServerError);
    assert_eq!(K::of(false, Some(500), false), K::ServerError);
}

#[test]
fn labels_come_from_closed_sets() {
    assert_eq!(
        RejectionType::of_code("SEMAPHORE_TIMEOUT"),
        RejectionType::SemaphoreTimeout
    );
    assert_eq!(
        RejectionType::of_code("RATE_LIMIT_QUEUE_FULL"),
        RejectionType::RateLimitQueueFull
    );
    assert_eq!(RejectionType::of_code("whatever"), RejectionType::Other);
    assert_eq!(RejectionType::of_code("other"), RejectionType::Other);
    assert_eq!(
        SkipReason::of(&TargetSkip::CircuitOpen { retry_after_ms: 5 }),
        SkipReason::CircuitOpen
    );
    assert_eq!(SkipReason::of(&TargetSkip::Failed), SkipReason::Failed);
    assert_eq!(
        SkipReason::of(&TargetSkip::ProviderCooldown { retry_after_ms: 5 }),
        SkipReason::ProviderCooldown
    );
    assert_eq!(
        SkipReason::of(&TargetSkip::Blocked {
            connections: Vec::new()
        }),
        SkipReason::ConnectionCooldown
    );
    assert_eq!(
        FallbackReason::from(FailureReason::RateLimitExceeded).label(),
        FailureReason::RateLimitExceeded.as_str()
    );
    assert_eq!(
        AbortKind::from(StreamAbort::Stall { after_ms: 1 }),
        AbortKind::Stall
    );
    for labels in [
        Route::labels().to_vec(),
        SkipReason::labels().to_vec(),
        FallbackReason::labels().to_vec(),
        TokenType::labels().to_vec(),
        AbortKind::labels().to_vec(),
    ] {
        let mut sorted = labels.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), labels.len(), "duplicate label in {labels:?}");
    }
    for (i, r) in Route::ALL.into_iter().enumerate() {
        assert_eq!(r.index(), i);
    }
}

#[test]
fn every_family_is_exposed_before_any_traffic() {
    let rt = runtime();
    let text = rt.table.metrics.encode().unwrap();
    for family in [
        "switchyard_requests_total",
        "switchyard_request_duration_seconds",
        "switchyard_gateway_overhead_seconds",
        "switchyard_upstream_request_duration_seconds",
        "switchyard_upstream_time_to_first_content_seconds",
        "switchyard_gen_ai_client_token_usage_total",
        "switchyard_breaker_state",
        "switchyard_breaker_transitions_total",
        "switchyard_connection_state",
        "switchyard_cooldowns_total",
        "switchyard_model_lockouts",
        "switchyard_queue_depth",
        "switchyard_queue_wait_seconds",
        "switchyard_semaphore_in_flight",
        "switchyard_semaphore_rejections_total",
        "switchyard_skips_total",
        "switchyard_fallbacks_total",
        "switchyard_stream_watchdog_aborts_total",
        "switchyard_in_flight_requests",
        "switchyard_actor_restarts_total",
        "switchyard_dropped_observations_total",
    ] {
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "{family} missing:\n{text}"
        );
    }
    assert_eq!(
        sample(
            &text,
            "switchyard_requests_total",
            r#"route="/v1/messages",status_class="5xx""#
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &text,
            "switchyard_connection_state",
            r#"provider="listed",connection="listed-1",state="active""#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "switchyard_connection_state",
            r#"provider="listed",connection="listed-1",state="cooldown""#
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(&text, "switchyard_breaker_state", r#"provider="open""#),
        Some(0.0)
    );
    assert!(!text.contains("sk-test"));
}

#[test]
fn request_timer_counts_by_class_and_leaves_in_flight() {
    let rt = runtime();
    let m = &rt.table.metrics;
    let t = m.start_request(Route::ChatCompletions);
    let abandoned = m.start_request(Route::Messages);
    assert_eq!(m.in_flight.get(), 2);
    t.finish(503, Duration::from_secs(3600));
    drop(abandoned);
    assert_eq!(m.in_flight.get(), 0);
    let mut streamed = m.start_request(Route::Responses);
    streamed.commit(Duration::ZERO);
    streamed.commit(Duration::ZERO);
    streamed.finish(200, Duration::ZERO);

    let text = m.encode().unwrap();
    let requests = |labels: &str| sample(&text, "switchyard_requests_total", labels);
    assert_eq!(
        requests(r#"route="/v1/chat/completions",status_class="5xx""#),
        Some(1.0)
    );
    assert_eq!(
        requests(r#"route="/v1/messages",status_class="4xx""#),
        Some(1.0),
        "a request its client abandoned counts as 499"
    );
    assert_eq!(
        requests(r#"route="/v1/responses",status_class="2xx""#),
        Some(1.0)
    );
    let overhead = |route: &str| {
        sample(
            &text,
            "switchyard_gateway_overhead_seconds_count",
            &format!(r#"route="{route}""#),
        )
    };
    // Upstream time longer than the request saturates at zero overhead, not a negative one.
    assert_eq!(overhead("/v1/chat/completions"), Some(1.0));
    assert_eq!(
        sample(
            &text,
            "switchyard_gateway_overhead_seconds_bucket",
            r#"route="/v1/chat/completions",le="0.0001""#
        ),
        Some(1.0)
    );
    // Commit records the overhead once; an abandoned request records none.
    assert_eq!(overhead("/v1/responses"), Some(1.0));
    assert_eq!(overhead("/v1/messages"), Some(0.0));
}

#[test]
fn actor_counters_and_snapshots_are_read_at_scrape_time() {
    let rt = runtime();
    let listed = &rt.table.providers[rt.table.provider_by_id["listed"]];
    listed
        .transitions
        .record(BreakerState::Closed, BreakerState::Open);
    listed
        .transitions
        .record(BreakerState::Closed, BreakerState::Open);
    let conn = &rt.table.connections[rt.table.conn_by_id["open-1"]];
    conn.cooldowns.record(FailureReason::RateLimitExceeded);
    conn.dropped_observations
        .fetch_add(4, std::sync::atomic::Ordering::Relaxed);
    rt.table
        .actor_stats
        .restarts
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut snap = (**conn.load()).clone();
    snap.state.rate_limited_until = Some(rt.table.clock.now() + 60_000);
    conn.publish(snap);

    let text = rt.table.metrics.encode().unwrap();
    let at = |name: &str, labels: &str| sample(&text, name, labels);
    assert_eq!(
        at(
            "switchyard_breaker_transitions_total",
            r#"provider="listed",from="closed",to="open""#
        ),
        Some(2.0)
    );
    assert_eq!(
        at(
            "switchyard_breaker_transitions_total",
            r#"provider="open",from="closed",to="open""#
        ),
        Some(0.0)
    );
    assert_eq!(
        at(
            "switchyard_cooldowns_total",
            r#"provider="open",reason="rate_limit_exceeded""#
        ),
        Some(1.0)
    );
    assert_eq!(
        at(
            "switchyard_connection_state",
            r#"provider="open",connection="open-1",state="cooldown""#
        ),
        Some(1.0)
    );
    assert_eq!(
        at(
            "switchyard_connection_state",
            r#"provider="open",connection="open-1",state="active""#
        ),
        Some(0.0)
    );
    assert_eq!(
        at(
            "switchyard_dropped_observations_total",
            r#"actor="connection""#
        ),
        Some(4.0)
    );
    assert_eq!(at("switchyard_actor_restarts_total", ""), Some(1.0));
}

#[test]
fn hot_path_counters_use_their_enum_index() {
    let rt = runtime();
    let m = &rt.table.metrics;
    m.rejected(&TargetSkip::Saturated {
        code: "SEMAPHORE_QUEUE_FULL",
        status: 429,
        error_type: "rate_limit_error",
        retry_after_ms: None,
    });
    m.rejected(&TargetSkip::Failed);
    m.fallback(FailureReason::ServerError);
    m.fallback(FallbackReason::ConcurrencyCap);
    m.skips().record(&TargetSkip::NoConnections);
    m.queue_waited(250);
    let text = m.encode().unwrap();
    let at = |name: &str, labels: &str| sample(&text, name, labels);
    assert_eq!(
        at(
            "switchyard_semaphore_rejections_total",
            r#"type="SEMAPHORE_QUEUE_FULL""#
        ),
        Some(1.0)
    );
    assert_eq!(
        at("switchyard_semaphore_rejections_total", r#"type="other""#),
        Some(0.0)
    );
    assert_eq!(
        at("switchyard_fallbacks_total", r#"reason="server_error""#),
        Some(1.0)
    );
    assert_eq!(
        at("switchyard_fallbacks_total", r#"reason="concurrency_cap""#),
        Some(1.0)
    );
    assert_eq!(
        at("switchyard_skips_total", r#"reason="no_connections""#),
        Some(1.0)
    );
    assert_eq!(at("switchyard_queue_wait_seconds_sum", ""), Some(0.25));
}

#[tokio::test]
async fn a_cancelled_wait_still_counts_as_upstream_wait() {
    let wait = UpstreamWait::default();
    let waiting = async {
        let _timer = wait.timer();
        std::future::pending::<()>().await;
    };
    let timed_out = tokio::time::timeout(Duration::from_millis(30), waiting).await;
    assert!(timed_out.is_err());
    assert!(wait.get() >= Duration::from_millis(30), "{:?}", wait.get());
}

#[test]
fn upstream_wait_adds_up() {
    let w = UpstreamWait::default();
    w.add(Duration::from_millis(3));
    w.add(Duration::from_micros(250));
    assert_eq!(w.get(), Duration::from_micros(3250));
    let _ = Arc::new(w);
}

/// A reloaded config continues the registry: earlier counts stay, the new provider set gets
/// its children and the state collector follows the new handles.
#[test]
fn continued_metrics_keep_counts_and_follow_the_new_handles() {
    let old = runtime();
    let listed = old.table.provider_by_id["listed"];
    let usage = Usage {
        input: Some(4),
        output: None,
        cache_read: None,
        cache_creation: None,
    };
    old.table.metrics.usage(listed, "gpt-4o-mini", &usage);
    let reduced = CONFIG
        .replace("id = \"open-1\"", "id = \"open-2\"")
        .replace("{ \"capped-model\" = 2 }", "{}");
    let next = Runtime::build(Config::from_toml_str(&reduced).unwrap(), &|k| {
        (k == "KEY").then(|| "sk-test".to_owned())
    })
    .unwrap();
    let m = old
        .table
        .metrics
        .continued(
            &next.config,
            &next.table.providers,
            &next.table.connections,
            next.table.clock,
            next.table.actor_stats.clone(),
        )
        .unwrap();
    m.usage(next.table.provider_by_id["listed"], "gpt-4o-mini", &usage);
    let text = m.encode().unwrap();
    let tokens = "switchyard_gen_ai_client_token_usage_total";
    let labels = "model=\"gpt-4o-mini\",provider=\"listed\",token_type=\"input\"";
    assert_eq!(sample(&text, tokens, labels), Some(8.0), "{text}");
    assert!(text.contains("connection=\"open-2\""), "{text}");
    assert!(!text.contains("connection=\"open-1\""), "{text}");
    assert_eq!(text, old.table.metrics.encode().unwrap(), "one registry");
}

/// A JSON answer's timer travels with its body: nothing is recorded while actix still holds
/// the body, and the status and overhead are recorded once when it drops it.
#[test]
fn a_timed_body_records_when_it_is_dropped() {
    let rt = runtime();
    let m = &rt.table.metrics;
    let overhead = || {
        let text = m.encode().unwrap();
        sample(
            &text,
            "switchyard_gateway_overhead_seconds_count",
            r#"route="/v1/chat/completions""#,
        )
    };
    let before = overhead();
    let t = m.start_request(Route::ChatCompletions);
    let resp = t.finish_with(
        actix_web::HttpResponse::Created().body("{}"),
        Duration::ZERO,
    );
    assert_eq!(m.in_flight.get(), 1);
    assert_eq!(overhead(), before);
    drop(resp);
    assert_eq!(m.in_flight.get(), 0);
    assert_eq!(overhead().unwrap_or(0.0), before.unwrap_or(0.0) + 1.0);
    let text = m.encode().unwrap();
    assert_eq!(
        sample(
            &text,
            "switchyard_requests_total",
            r#"route="/v1/chat/completions",status_class="2xx""#
        ),
        Some(1.0)
    );
}
