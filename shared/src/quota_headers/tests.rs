//! Header sets quoted from provider documentation and from the upstream-error corpus
//! (`tests/fixtures/upstream-errors/`).

use super::*;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// OpenAI's rate-limit guide sample
/// (<https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers>), as in the
/// corpus entry `openai/rate-limit-tokens`.
#[test]
fn openai_guide_sample() {
    let headers = [
        ("x-ratelimit-limit-requests", "60"),
        ("x-ratelimit-limit-tokens", "150000"),
        ("x-ratelimit-remaining-requests", "59"),
        ("x-ratelimit-remaining-tokens", "149984"),
        ("x-ratelimit-reset-requests", "1s"),
        ("x-ratelimit-reset-tokens", "6m0s"),
    ];
    let r = parse(&headers, 1_000);
    assert_eq!(r.windows.len(), 2);
    let req = r.window(WindowKind::Requests).copied();
    assert!(req.is_some_and(|w| close(w.remaining, 59.0 / 60.0)));
    assert_eq!(req.and_then(|w| w.reset_in_ms), Some(1_000));
    let tok = r.window(WindowKind::Tokens).copied();
    assert!(tok.is_some_and(|w| close(w.remaining, 149_984.0 / 150_000.0)));
    assert_eq!(tok.and_then(|w| w.reset_in_ms), Some(360_000));
    // The tightest is the request window (59/60 < 149984/150000).
    assert_eq!(r.tightest().map(|w| w.kind), Some(WindowKind::Requests));
    let view = r.view(50_000);
    assert_eq!(view.and_then(|v| v.session_reset_at), Some(51_000));
    assert_eq!(view.and_then(|v| v.weekly_reset_at), None);
}

/// Millisecond resets as OpenAI sends them on a large tier (`6ms`, `40ms`).
#[test]
fn openai_millisecond_resets_and_exhaustion_without_limit() {
    let headers = [
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", "6ms"),
        ("x-ratelimit-remaining-tokens", "9993230"),
        ("x-ratelimit-reset-tokens", "40ms"),
    ];
    let r = parse(&headers, 0);
    // Zero remaining is exhaustion even without a limit; a non-zero count without one is not a
    // fraction and is left out.
    assert_eq!(r.windows.len(), 1);
    let w = r.window(WindowKind::Requests).copied();
    assert_eq!(w.map(|w| w.remaining), Some(0.0));
    assert_eq!(w.and_then(|w| w.reset_in_ms), Some(6));
}

/// Anthropic's response headers (<https://docs.anthropic.com/en/api/rate-limits#response-headers>),
/// values as in the corpus entry `anthropic/rate-limit-input-tokens`.
#[test]
fn anthropic_api_key_windows() {
    let headers = [
        ("anthropic-ratelimit-input-tokens-limit", "200000"),
        ("anthropic-ratelimit-input-tokens-remaining", "0"),
        (
            "anthropic-ratelimit-input-tokens-reset",
            "2025-06-02T15:15:48Z",
        ),
        ("anthropic-ratelimit-output-tokens-limit", "80000"),
        ("anthropic-ratelimit-output-tokens-remaining", "80000"),
        (
            "anthropic-ratelimit-output-tokens-reset",
            "2025-06-02T15:14:45Z",
        ),
        ("anthropic-ratelimit-requests-limit", "4000"),
        ("anthropic-ratelimit-requests-remaining", "4000"),
        ("anthropic-ratelimit-requests-reset", "2025-06-02T15:14:45Z"),
        ("retry-after", "16"),
        ("anthropic-ratelimit-tokens-limit", "280000"),
        ("anthropic-ratelimit-tokens-remaining", "80000"),
        ("anthropic-ratelimit-tokens-reset", "2025-06-02T15:14:45Z"),
    ];
    let now = 1_748_877_285_000 - 5_000; // 5 s before 15:14:45Z
    let r = parse(&headers, now);
    assert_eq!(r.windows.len(), 4);
    let input = r.window(WindowKind::InputTokens).copied();
    assert_eq!(input.map(|w| w.remaining), Some(0.0));
    assert_eq!(input.and_then(|w| w.reset_in_ms), Some(68_000));
    let tokens = r.window(WindowKind::Tokens).copied();
    assert!(tokens.is_some_and(|w| close(w.remaining, 80_000.0 / 280_000.0)));
    assert_eq!(tokens.and_then(|w| w.reset_in_ms), Some(5_000));
    assert_eq!(r.tightest().map(|w| w.kind), Some(WindowKind::InputTokens));
    let view = r.view(1_000);
    assert_eq!(view.map(|v| v.remaining), Some(0.0));
    assert_eq!(view.and_then(|v| v.session_reset_at), Some(69_000));
}

/// A past reset means the window has already reset: a delay of 0, not a wrap-around.
#[test]
fn past_resets_are_zero() {
    let headers = [
        ("anthropic-ratelimit-requests-limit", "50"),
        ("anthropic-ratelimit-requests-remaining", "10"),
        ("anthropic-ratelimit-requests-reset", "2025-06-02T15:14:45Z"),
    ];
    let r = parse(&headers, 1_748_877_285_000 + 60_000);
    assert_eq!(
        r.window(WindowKind::Requests).and_then(|w| w.reset_in_ms),
        Some(0)
    );
}

/// The Codex 5-hour limit as in <https://github.com/earendil-works/pi/issues/4172> (corpus
/// entry `codex-chatgpt/five-hour-usage-limit`).
#[test]
fn codex_primary_and_secondary_windows() {
    let headers = [
        ("x-codex-active-limit", "premium"),
        ("x-codex-primary-used-percent", "100"),
        ("x-codex-secondary-used-percent", "80"),
        ("x-codex-primary-window-minutes", "300"),
        ("x-codex-secondary-window-minutes", "10080"),
        ("x-codex-primary-reset-after-seconds", "13873"),
        ("x-codex-secondary-reset-after-seconds", "316705"),
        ("x-codex-primary-reset-at", "1777936568"),
        ("x-codex-secondary-reset-at", "1778239400"),
    ];
    let r = parse(&headers, 1_777_922_695_000);
    let session = r.window(WindowKind::Session).copied();
    assert_eq!(session.map(|w| w.remaining), Some(0.0));
    assert_eq!(session.and_then(|w| w.reset_in_ms), Some(13_873_000));
    let weekly = r.window(WindowKind::Weekly).copied();
    assert!(weekly.is_some_and(|w| close(w.remaining, 0.2)));
    assert_eq!(weekly.and_then(|w| w.reset_in_ms), Some(316_705_000));
    let view = r.view(10);
    assert_eq!(view.map(|v| v.remaining), Some(0.0));
    assert_eq!(view.and_then(|v| v.session_reset_at), Some(13_873_010));
    assert_eq!(view.and_then(|v| v.weekly_reset_at), Some(316_705_010));
}

/// Without `reset-after-seconds`, the epoch `reset-at` gives the delay; the window length, not
/// the header's position, decides session or weekly.
#[test]
fn codex_reset_at_and_window_length() {
    let headers = [
        ("x-codex-primary-used-percent", "12.5"),
        ("x-codex-primary-window-minutes", "10080"),
        ("x-codex-primary-reset-at", "1777936568"),
    ];
    let r = parse(&headers, 1_777_936_568_000 - 42_000);
    let w = r.window(WindowKind::Weekly).copied();
    assert!(w.is_some_and(|w| close(w.remaining, 0.875)));
    assert_eq!(w.and_then(|w| w.reset_in_ms), Some(42_000));
    assert!(r.window(WindowKind::Session).is_none());
}

/// Claude subscription headers: utilisation shares with epoch-second resets, and the wall.
#[test]
fn anthropic_unified_windows_and_wall() {
    let now_s = 1_760_000_000;
    let h5 = (now_s + 3_600).to_string();
    let h7 = (now_s + 86_400).to_string();
    let headers = [
        ("anthropic-ratelimit-unified-status", "rejected"),
        ("anthropic-ratelimit-unified-reset", h5.as_str()),
        ("anthropic-ratelimit-unified-5h-utilization", "1.0"),
        ("anthropic-ratelimit-unified-5h-reset", h5.as_str()),
        ("anthropic-ratelimit-unified-7d-utilization", "0.42"),
        ("anthropic-ratelimit-unified-7d-reset", h7.as_str()),
    ];
    let r = parse(&headers, now_s * 1000);
    assert_eq!(
        r.window(WindowKind::Session)
            .map(|w| (w.remaining, w.reset_in_ms)),
        Some((0.0, Some(3_600_000)))
    );
    let weekly = r.window(WindowKind::Weekly).copied();
    assert!(weekly.is_some_and(|w| close(w.remaining, 0.58)));
    assert_eq!(weekly.and_then(|w| w.reset_in_ms), Some(86_400_000));
    assert_eq!(
        r.window(WindowKind::Unified)
            .map(|w| (w.remaining, w.reset_in_ms)),
        Some((0.0, Some(3_600_000)))
    );
    // `allowed` is not a wall; a percent-style utilisation reads as percent.
    let allowed = [
        ("anthropic-ratelimit-unified-status", "allowed"),
        ("anthropic-ratelimit-unified-5h-utilization", "25"),
    ];
    let r = parse(&allowed, 0);
    assert!(r.window(WindowKind::Unified).is_none());
    assert!(
        r.window(WindowKind::Session)
            .is_some_and(|w| close(w.remaining, 0.75))
    );
}

/// MiniMax per-model counts, as the corpus entry `minimax/model-quota-remaining` plays them.
#[test]
fn minimax_model_quota() {
    let r = parse(
        &[("x-model-quota-remaining", "haiku=0,sonnet=42, bad, =3,x=y")],
        0,
    );
    assert!(r.windows.is_empty());
    assert_eq!(r.model_remaining("haiku"), Some(0));
    assert_eq!(r.model_remaining("SONNET"), Some(42));
    assert_eq!(r.models.len(), 2);
    assert!(!r.is_empty());
    assert_eq!(r.view(0), None);
}

#[test]
fn garbage_and_absent_headers_give_nothing() {
    let headers = [
        ("x-ratelimit-remaining-requests", "lots"),
        ("x-ratelimit-limit-requests", "60"),
        ("anthropic-ratelimit-tokens-remaining", "-1"),
        ("anthropic-ratelimit-tokens-limit", "10"),
        ("x-codex-primary-used-percent", "NaN"),
        ("anthropic-ratelimit-unified-5h-utilization", "-0.5"),
        ("content-type", "application/json"),
    ];
    let r = parse(&headers, 0);
    assert!(r.is_empty(), "{r:?}");
    assert!(parse(&[], 0).is_empty());
}

#[test]
fn header_names_are_case_insensitive_and_window_names_round_trip() {
    let r = parse(
        &[
            ("X-RateLimit-Remaining-Tokens", "5"),
            ("X-RateLimit-Limit-Tokens", "10"),
        ],
        0,
    );
    assert!(
        r.window(WindowKind::Tokens)
            .is_some_and(|w| close(w.remaining, 0.5))
    );
    for k in WindowKind::ALL {
        assert_eq!(WindowKind::parse(k.as_str()), Some(k));
    }
    assert_eq!(WindowKind::parse("monthly"), None);
}

mod props {
    use super::super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the header values, every window's fraction is in 0..=1 and the report
        /// holds at most one window per kind.
        #[test]
        fn fractions_stay_in_range(
            rem in "[0-9a-z.\\-]{0,8}",
            lim in "[0-9a-z.\\-]{0,8}",
            used in "[0-9.\\-]{0,6}",
            now in any::<u64>(),
        ) {
            let headers = [
                ("x-ratelimit-remaining-requests", rem.as_str()),
                ("x-ratelimit-limit-requests", lim.as_str()),
                ("anthropic-ratelimit-tokens-remaining", rem.as_str()),
                ("anthropic-ratelimit-tokens-limit", lim.as_str()),
                ("x-codex-primary-used-percent", used.as_str()),
                ("anthropic-ratelimit-unified-7d-utilization", used.as_str()),
                ("anthropic-ratelimit-unified-7d-reset", rem.as_str()),
            ];
            let r = parse(&headers, now);
            for w in &r.windows {
                prop_assert!((0.0..=1.0).contains(&w.remaining));
                prop_assert_eq!(r.windows.iter().filter(|x| x.kind == w.kind).count(), 1);
            }
        }
    }
}
