//! Upstream retry hints: `Retry-After`, `X-RateLimit-Reset`, provider reset headers and reset
//! prose. Every parser must return `None` or a wait in `1..=MAX_HINT_MS`, whatever the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_shared::hints::{
    self, MAX_HINT_MS, parse_anthropic_reset, parse_go_duration_ms, parse_openai_reset,
    parse_ratelimit_reset, parse_resets_in, parse_retry_after, parse_retry_from_error_text,
    parse_rfc3339_epoch_ms, provider_reset_hint, upstream_hint,
};

fn in_range(what: &str, value: Option<u64>, input: &str) {
    if let Some(ms) = value {
        assert!(
            (1..=MAX_HINT_MS).contains(&ms),
            "{what} gave {ms} ms for {input:?}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    // The first 8 bytes are "now" (epoch ms, kept within a plausible range so date arithmetic
    // is exercised both ways); the rest is the header value or body text.
    if data.len() < 8 {
        return;
    }
    let (now, rest) = data.split_at(8);
    let mut now_bytes = [0u8; 8];
    now_bytes.copy_from_slice(now);
    let now = u64::from_le_bytes(now_bytes) % 8_000_000_000_000;
    let text = String::from_utf8_lossy(rest);
    let text = text.as_ref();

    in_range("parse_retry_after", parse_retry_after(text, now), text);
    in_range(
        "parse_ratelimit_reset",
        parse_ratelimit_reset(text, now),
        text,
    );
    in_range(
        "parse_anthropic_reset",
        parse_anthropic_reset(text, now),
        text,
    );
    in_range("parse_openai_reset", parse_openai_reset(text), text);
    in_range("parse_resets_in", parse_resets_in(text), text);
    in_range(
        "parse_retry_from_error_text",
        parse_retry_from_error_text(text, now),
        text,
    );
    let _ = parse_go_duration_ms(text);
    let _ = parse_rfc3339_epoch_ms(text);
    let _ = hints::ms_until_utc_midnight(now);

    // Header lists: `name: value` lines.
    let headers: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim(), v.trim()))
        .collect();
    in_range(
        "provider_reset_hint",
        provider_reset_hint(&headers, now),
        text,
    );
    in_range("upstream_hint", upstream_hint(&headers, text, now), text);
});
