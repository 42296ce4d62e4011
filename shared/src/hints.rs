//! Upstream retry hints: how long the upstream itself says to wait.
//!
//! Providers state their reset time in many shapes: `Retry-After` (seconds or an HTTP date),
//! `X-RateLimit-Reset` (epoch seconds, epoch milliseconds, or a delta), Anthropic's RFC 3339
//! `anthropic-ratelimit-*-reset`, OpenAI's Go-style `x-ratelimit-reset-*` durations, and prose in
//! the error body. An upstream hint replaces the scaled backoff, so a wrong parse either hammers
//! an exhausted quota or locks a healthy connection; these parsers are deliberately strict about
//! shape and lenient only where a provider is known to deviate.
//!
//! Invariants:
//! - pure: no clock reads; absolute dates are converted with the caller's `now_epoch_ms`;
//! - every parser returns either `None` or a wait in `1..=MAX_HINT_MS` (30 days). A zero wait or
//!   a date in the past says "now", which carries no cooldown information, so it is `None` and
//!   the caller falls back to its own backoff;
//! - no parser panics, overflows or allocates in proportion to more than [`MAX_SCAN_BYTES`] of
//!   its input; they face arbitrary upstream bytes and are fuzzed.

use std::time::UNIX_EPOCH;

use crate::Millis;

const SECOND_MS: u64 = 1_000;
const MINUTE_MS: u64 = 60 * SECOND_MS;
const HOUR_MS: u64 = 60 * MINUTE_MS;
const DAY_MS: u64 = 24 * HOUR_MS;

/// Upper bound of every parsed hint. An adversarial or buggy upstream must not lock a
/// connection indefinitely.
pub const MAX_HINT_MS: Millis = 30 * DAY_MS;

/// Upper bound of "please retry in …" / "try again in …" prose: these are short-throttle hints,
/// so a huge value is more likely a misparse than a real window.
pub const MAX_SHORT_RETRY_MS: Millis = DAY_MS;

/// Only this much of an error body is scanned for prose hints. Larger bodies are HTML error
/// pages, not API errors, and scanning them costs time on the failure path.
pub const MAX_SCAN_BYTES: usize = 64 * 1024;

/// `X-RateLimit-Reset` values above this are epoch milliseconds (the reference's rule).
const EPOCH_MS_THRESHOLD: u64 = 10_000_000_000;
/// `X-RateLimit-Reset` values at or above this (2001-09-09 as epoch seconds) are epoch seconds;
/// smaller values are a delta in seconds. A delta this large would exceed the 30-day cap anyway.
const EPOCH_SECONDS_THRESHOLD: u64 = 1_000_000_000;

/// A positive wait, capped at [`MAX_HINT_MS`]; zero is "no hint".
fn positive_capped(ms: u64) -> Option<Millis> {
    (ms > 0).then_some(ms.min(MAX_HINT_MS))
}

/// The wait until `target_epoch_ms`, or `None` when it is not in the future.
fn wait_until(target_epoch_ms: u64, now_epoch_ms: u64) -> Option<Millis> {
    positive_capped(target_epoch_ms.saturating_sub(now_epoch_ms))
}

/// `text` cut to at most [`MAX_SCAN_BYTES`], on a char boundary.
pub(crate) fn bounded(text: &str) -> &str {
    if text.len() <= MAX_SCAN_BYTES {
        return text;
    }
    let mut end = MAX_SCAN_BYTES;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or("")
}

/// Milliseconds from `now_epoch_ms` to the next UTC midnight, in `1..=24 h`.
///
/// Daily quotas reset at a provider-defined hour; the reference uses the gateway host's *local*
/// midnight, which differs per node and per deployment. Switchyard uses UTC midnight so every
/// node of a cluster agrees, and because the large providers document UTC resets.
pub fn ms_until_utc_midnight(now_epoch_ms: u64) -> Millis {
    DAY_MS - now_epoch_ms % DAY_MS
}

// ---------------------------------------------------------------------------------------------
// Numbers and durations

/// A non-negative decimal (`"12"`, `"1.5"`) times `unit_ms`, saturating. Fractions below a
/// microsecond are ignored. `None` for anything else (signs, exponents, empty).
fn parse_decimal_scaled(s: &str, unit_ms: u64) -> Option<u64> {
    let (int_part, frac_part) = match s.split_once('.') {
        Some((i, f)) => (i, f),
        None => (s, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    if !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let mut int: u128 = 0;
    for b in int_part.bytes() {
        int = (int * 10 + u128::from(b - b'0')).min(u128::from(u64::MAX));
    }
    // Up to six fractional digits, as millionths of the unit.
    let mut frac: u128 = 0;
    let mut scale: u128 = 1;
    for b in frac_part.bytes().take(6) {
        frac = frac * 10 + u128::from(b - b'0');
        scale *= 10;
    }
    let unit = u128::from(unit_ms);
    let total = int.saturating_mul(unit) + frac * unit / scale;
    Some(u64::try_from(total).unwrap_or(u64::MAX))
}

/// Milliseconds of a Go-style duration (`"1s"`, `"6m0s"`, `"20ms"`, `"1h2m3.5s"`, `"0"`), the
/// format of OpenAI's `x-ratelimit-reset-*` headers. Units: `h`, `m`, `s`, `ms`, `us`/`µs`,
/// `ns`; sub-millisecond remainders round up so a positive duration never becomes zero. The
/// whole string must be consumed.
pub fn parse_go_duration_ms(value: &str) -> Option<Millis> {
    let s = value.trim();
    if s == "0" {
        return Some(0);
    }
    let bytes = s.as_bytes();
    if bytes.is_empty() {
        return None;
    }
    let mut i = 0;
    let mut total_ns: u128 = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
            i += 1;
        }
        let number = s.get(start..i)?;
        if !number.bytes().any(|b| b.is_ascii_digit()) {
            return None;
        }
        let rest = s.get(i..)?;
        let (unit_ns, unit_len): (u64, usize) = if rest.starts_with("ms") {
            (1_000_000, 2)
        } else if rest.starts_with("us") {
            (1_000, 2)
        } else if rest.starts_with("µs") {
            (1_000, "µs".len())
        } else if rest.starts_with("ns") {
            (1, 2)
        } else if rest.starts_with('h') {
            (3_600_000_000_000, 1)
        } else if rest.starts_with('m') {
            (60_000_000_000, 1)
        } else if rest.starts_with('s') {
            (1_000_000_000, 1)
        } else {
            return None;
        };
        // parse_decimal_scaled works in "unit_ms"; use nanoseconds as the unit instead.
        let ns = parse_decimal_scaled(number, unit_ns)?;
        total_ns = total_ns.saturating_add(u128::from(ns));
        i += unit_len;
    }
    let ms = total_ns.div_ceil(1_000_000);
    Some(u64::try_from(ms).unwrap_or(u64::MAX))
}

// ---------------------------------------------------------------------------------------------
// Dates

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Reads exactly `n` ASCII digits at `*i`.
fn digits(b: &[u8], i: &mut usize, n: usize) -> Option<u32> {
    let mut v: u32 = 0;
    for _ in 0..n {
        let d = *b.get(*i)?;
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u32::from(d - b'0');
        *i += 1;
    }
    Some(v)
}

/// An ISO 8601 / RFC 3339 date-time at the start of `s`:
/// `YYYY-MM-DD[T|t| ]HH:MM[:SS[.frac]][Z|z|±HH[:]MM]`. Returns epoch milliseconds and the bytes
/// consumed. Seconds and offset are optional (prose often omits them); a missing offset means
/// UTC. Dates before 1970 are rejected.
fn parse_iso_datetime_prefix(s: &str) -> Option<(u64, usize)> {
    let b = s.as_bytes();
    let mut i = 0;
    let year = i64::from(digits(b, &mut i, 4)?);
    (b.get(i) == Some(&b'-')).then_some(())?;
    i += 1;
    let month = digits(b, &mut i, 2)?;
    (b.get(i) == Some(&b'-')).then_some(())?;
    i += 1;
    let day = digits(b, &mut i, 2)?;
    matches!(b.get(i), Some(b'T' | b't' | b' ')).then_some(())?;
    i += 1;
    let hour = digits(b, &mut i, 2)?;
    (b.get(i) == Some(&b':')).then_some(())?;
    i += 1;
    let minute = digits(b, &mut i, 2)?;
    let mut second = 0;
    let mut millis: u64 = 0;
    if b.get(i) == Some(&b':') {
        i += 1;
        second = digits(b, &mut i, 2)?;
        if b.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == start {
                return None;
            }
            // Milliseconds are the first three fractional digits; finer digits are dropped.
            for (k, d) in b.get(start..i)?.iter().take(3).enumerate() {
                millis += u64::from(d - b'0') * [100, 10, 1][k];
            }
        }
    }
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let second = second.min(59); // a leap second lands on the next one's start
    let mut offset_s: i64 = 0;
    match b.get(i) {
        Some(b'Z' | b'z') => i += 1,
        Some(&sign @ (b'+' | b'-')) => {
            i += 1;
            let oh = digits(b, &mut i, 2)?;
            if b.get(i) == Some(&b':') {
                i += 1;
            }
            let om = digits(b, &mut i, 2)?;
            if oh > 23 || om > 59 {
                return None;
            }
            offset_s = i64::from(oh * 3600 + om * 60);
            if sign == b'-' {
                offset_s = -offset_s;
            }
        }
        _ => {}
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second) - offset_s;
    let secs = u64::try_from(secs).ok()?;
    Some((secs.saturating_mul(SECOND_MS).saturating_add(millis), i))
}

/// Epoch milliseconds of a whole RFC 3339 timestamp (surrounding whitespace allowed).
pub fn parse_rfc3339_epoch_ms(value: &str) -> Option<u64> {
    let v = value.trim();
    let (ms, used) = parse_iso_datetime_prefix(v)?;
    (used == v.len()).then_some(ms)
}

// ---------------------------------------------------------------------------------------------
// Headers

/// `Retry-After`: delta seconds (fractions tolerated), an HTTP date, or — leniently, as Groq
/// sends it — a Go-style duration (`"60s"`, `"5m"`). Negative, garbage, zero and past dates are
/// `None`.
pub fn parse_retry_after(value: &str, now_epoch_ms: u64) -> Option<Millis> {
    let v = value.trim();
    if v.is_empty() {
        return None;
    }
    if v.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return positive_capped(parse_decimal_scaled(v, SECOND_MS)?);
    }
    if v.as_bytes().first().is_some_and(u8::is_ascii_digit) {
        return positive_capped(parse_go_duration_ms(v)?);
    }
    let date = httpdate::parse_http_date(v).ok()?;
    let epoch_ms = date.duration_since(UNIX_EPOCH).ok()?.as_millis();
    wait_until(u64::try_from(epoch_ms).ok()?, now_epoch_ms)
}

/// `X-RateLimit-Reset`. A number is read by magnitude:
/// - above 10¹⁰: epoch milliseconds (the reference's rule);
/// - from 10⁹ (2001-09-09 in epoch seconds): epoch seconds (fractions tolerated);
/// - below 10⁹: a delta in seconds, as several OpenAI-compatible providers send it (the
///   reference reads these as 1970 dates, i.e. no hint).
///
/// Non-numbers are tried as a Go-style duration, then as an RFC 3339 timestamp.
pub fn parse_ratelimit_reset(value: &str, now_epoch_ms: u64) -> Option<Millis> {
    let v = value.trim();
    if v.is_empty() {
        return None;
    }
    if v.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let as_seconds_ms = parse_decimal_scaled(v, SECOND_MS)?;
        let whole = as_seconds_ms / SECOND_MS;
        return if whole > EPOCH_MS_THRESHOLD {
            wait_until(whole, now_epoch_ms)
        } else if whole >= EPOCH_SECONDS_THRESHOLD {
            wait_until(as_seconds_ms, now_epoch_ms)
        } else {
            positive_capped(as_seconds_ms)
        };
    }
    if let Some(ms) = parse_go_duration_ms(v) {
        return positive_capped(ms);
    }
    wait_until(parse_rfc3339_epoch_ms(v)?, now_epoch_ms)
}

/// Anthropic `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset`: an
/// RFC 3339 timestamp.
pub fn parse_anthropic_reset(value: &str, now_epoch_ms: u64) -> Option<Millis> {
    wait_until(parse_rfc3339_epoch_ms(value)?, now_epoch_ms)
}

/// OpenAI `x-ratelimit-reset-{requests,tokens}`: a Go-style duration (`"6m0s"`, `"20ms"`).
pub fn parse_openai_reset(value: &str) -> Option<Millis> {
    positive_capped(parse_go_duration_ms(value)?)
}

/// The first header named `name` (ASCII case-insensitive), trimmed.
pub fn header<'a>(headers: &[(&str, &'a str)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
}

/// Provider reset headers: `(reset header, matching remaining header, parser)`.
type ResetParser = fn(&str, u64) -> Option<Millis>;
const PROVIDER_RESET_HEADERS: [(&str, &str, ResetParser); 6] = [
    (
        "anthropic-ratelimit-requests-reset",
        "anthropic-ratelimit-requests-remaining",
        parse_anthropic_reset,
    ),
    (
        "anthropic-ratelimit-tokens-reset",
        "anthropic-ratelimit-tokens-remaining",
        parse_anthropic_reset,
    ),
    (
        "anthropic-ratelimit-input-tokens-reset",
        "anthropic-ratelimit-input-tokens-remaining",
        parse_anthropic_reset,
    ),
    (
        "anthropic-ratelimit-output-tokens-reset",
        "anthropic-ratelimit-output-tokens-remaining",
        parse_anthropic_reset,
    ),
    (
        "x-ratelimit-reset-requests",
        "x-ratelimit-remaining-requests",
        parse_openai_reset_at,
    ),
    (
        "x-ratelimit-reset-tokens",
        "x-ratelimit-remaining-tokens",
        parse_openai_reset_at,
    ),
];

fn parse_openai_reset_at(value: &str, _now_epoch_ms: u64) -> Option<Millis> {
    parse_openai_reset(value)
}

/// The wait named by provider reset headers. Providers send a reset for every limit on every
/// response, but only an exhausted limit explains the failure: when a matching `*-remaining`
/// header says `0`, the longest such reset wins; without that evidence the earliest reset is
/// used, so the hint never overshoots the first moment anything changes.
pub fn provider_reset_hint(headers: &[(&str, &str)], now_epoch_ms: u64) -> Option<Millis> {
    let (exhausted, earliest) = provider_resets(headers, now_epoch_ms);
    exhausted.or(earliest)
}

/// The provider reset headers' `(longest reset of an exhausted limit, earliest reset)`.
fn provider_resets(
    headers: &[(&str, &str)],
    now_epoch_ms: u64,
) -> (Option<Millis>, Option<Millis>) {
    let mut exhausted: Option<Millis> = None;
    let mut earliest: Option<Millis> = None;
    for (reset_name, remaining_name, parse) in PROVIDER_RESET_HEADERS {
        let Some(wait) = header(headers, reset_name).and_then(|v| parse(v, now_epoch_ms)) else {
            continue;
        };
        if header(headers, remaining_name) == Some("0") {
            exhausted = Some(exhausted.map_or(wait, |w| w.max(wait)));
        }
        earliest = Some(earliest.map_or(wait, |w| w.min(wait)));
    }
    (exhausted, earliest)
}

/// The upstream's retry hint, in the reference's order: `Retry-After`, `X-RateLimit-Reset`,
/// provider reset headers, then reset prose in the body; except that provider reset headers
/// without an exhausted `*-remaining` are only a guess (the earliest of every limit's reset),
/// so a wait the body states ("Please try again in 26.604s") wins over them. Header names
/// match case-insensitively. Whether the hint is *used* is the profile's `use_upstream_retry_hints`;
/// that is the classifier's business, not this function's.
pub fn upstream_hint(
    headers: &[(&str, &str)],
    body_text: &str,
    now_epoch_ms: u64,
) -> Option<Millis> {
    header(headers, "retry-after")
        .and_then(|v| parse_retry_after(v, now_epoch_ms))
        .or_else(|| {
            header(headers, "x-ratelimit-reset")
                .and_then(|v| parse_ratelimit_reset(v, now_epoch_ms))
        })
        .or_else(|| {
            let (exhausted, earliest) = provider_resets(headers, now_epoch_ms);
            exhausted
                .or_else(|| parse_retry_from_error_text(body_text, now_epoch_ms))
                .or(earliest)
        })
}

// ---------------------------------------------------------------------------------------------
// Error text

/// Every byte offset where `needle` starts a word in `hay` (the byte before is not
/// alphanumeric). `hay` and `needle` are expected lower-case.
fn word_starts<'h>(hay: &'h str, needle: &'h str) -> impl Iterator<Item = usize> + 'h {
    hay.match_indices(needle)
        .map(|(i, _)| i)
        .filter(move |&i| i == 0 || !hay.as_bytes()[i - 1].is_ascii_alphanumeric())
}

/// Skips ASCII spaces and tabs from `i`.
fn skip_blanks(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|c| *c == b' ' || *c == b'\t') {
        i += 1;
    }
    i
}

/// A compact duration token at `i` (`"30s"`, `"2h30m14s"`, `"26.66s"`, `"1500ms"`): the maximal
/// run of ASCII alphanumerics and dots, with a trailing sentence dot dropped, parsed as a Go
/// duration.
fn compact_duration_at(lower: &str, i: usize) -> Option<Millis> {
    let b = lower.as_bytes();
    let mut end = i;
    while b
        .get(end)
        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'.')
    {
        end += 1;
    }
    let mut token = lower.get(i..end)?;
    while let Some(t) = token.strip_suffix('.') {
        token = t;
    }
    if !token.as_bytes().first().is_some_and(u8::is_ascii_digit) {
        return None;
    }
    parse_go_duration_ms(token)
}

/// `N <unit word>` at `i` (`"13 days"`, `"5 minutes"`, `"2 hrs"`): a decimal number, optional
/// blanks, and a whole unit word.
fn worded_duration_at(lower: &str, i: usize) -> Option<Millis> {
    let b = lower.as_bytes();
    let mut end = i;
    while b.get(end).is_some_and(|c| c.is_ascii_digit() || *c == b'.') {
        end += 1;
    }
    let number = lower.get(i..end)?;
    let word_start = skip_blanks(b, end);
    let mut word_end = word_start;
    while b.get(word_end).is_some_and(u8::is_ascii_alphabetic) {
        word_end += 1;
    }
    let unit_ms = match lower.get(word_start..word_end)? {
        "d" | "day" | "days" => DAY_MS,
        "h" | "hr" | "hrs" | "hour" | "hours" => HOUR_MS,
        "m" | "min" | "mins" | "minute" | "minutes" => MINUTE_MS,
        "s" | "sec" | "secs" | "second" | "seconds" => SECOND_MS,
        _ => return None,
    };
    parse_decimal_scaled(number, unit_ms)
}

/// The first duration after any of `phrases` (word-anchored, blanks skipped), parsed by `at`.
fn duration_after(
    lower: &str,
    phrases: &[&str],
    at: fn(&str, usize) -> Option<Millis>,
) -> Option<Millis> {
    let b = lower.as_bytes();
    for phrase in phrases {
        for start in word_starts(lower, phrase) {
            let i = skip_blanks(b, start + phrase.len());
            if let Some(ms) = at(lower, i).filter(|ms| *ms > 0) {
                return Some(ms);
            }
        }
    }
    None
}

/// `retryDelay` of a Google `RetryInfo` detail in a JSON error body (`"30s"`, `"1.5s"`, or a
/// number of seconds), looked up in `error.details[]` / `details[]` of the body or, for bodies
/// that are an array of errors, of its first elements.
fn json_retry_delay(text: &str) -> Option<Millis> {
    if !text.contains("retryDelay") {
        return None;
    }
    let mut starts: Vec<usize> = [text.find('{'), text.find('[')]
        .into_iter()
        .flatten()
        .collect();
    starts.sort_unstable();
    starts.into_iter().find_map(|start| {
        let json = text.get(start..)?;
        let value = serde_json::Deserializer::from_str(json)
            .into_iter::<serde_json::Value>()
            .next()?
            .ok()?;
        match &value {
            serde_json::Value::Array(items) => items.iter().take(8).find_map(retry_delay_in),
            other => retry_delay_in(other),
        }
    })
}

fn retry_delay_in(value: &serde_json::Value) -> Option<Millis> {
    let details = value
        .get("error")
        .and_then(|e| e.get("details"))
        .or_else(|| value.get("details"))?
        .as_array()?;
    details.iter().take(32).find_map(|detail| {
        let delay = detail.get("retryDelay")?;
        let ms = match delay {
            serde_json::Value::String(s) => {
                let s = s.trim();
                parse_go_duration_ms(s).or_else(|| parse_decimal_scaled(s, SECOND_MS))?
            }
            serde_json::Value::Number(n) => {
                let secs = n.as_f64().filter(|s| s.is_finite() && *s >= 0.0)?;
                // Float-to-int `as` saturates; the cap applies later.
                (secs * 1000.0).ceil() as u64
            }
            _ => return None,
        };
        (ms > 0).then_some(ms)
    })
}

/// The longest model lockout a typed `RetryInfo` delay becomes (the seed's
/// `lockModelForLongBodyRetry`): 24 h.
pub const MAX_BODY_RETRY_LOCK_MS: Millis = 24 * 60 * 60 * 1000;

/// `retryDelay` of a typed Google `RetryInfo` detail (`"@type"` ending in
/// `google.rpc.RetryInfo`) in a JSON error body; an untyped `retryDelay` or a delay in free
/// text is not one (the seed's provenance `google_rpc_retry_info`).
pub fn typed_retry_info_ms(body: &str) -> Option<Millis> {
    let text = bounded(body);
    if !text.contains("google.rpc.RetryInfo") {
        return None;
    }
    let start = text.find('{')?;
    let value = serde_json::Deserializer::from_str(text.get(start..)?)
        .into_iter::<serde_json::Value>()
        .next()?
        .ok()?;
    let details = value
        .get("error")
        .and_then(|e| e.get("details"))
        .or_else(|| value.get("details"))?
        .as_array()?;
    let typed: Vec<serde_json::Value> = details
        .iter()
        .take(32)
        .filter(|d| {
            d.get("@type")
                .and_then(serde_json::Value::as_str)
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
        })
        .cloned()
        .collect();
    retry_delay_in(&serde_json::json!({ "details": typed }))
}

/// What a typed `RetryInfo` delay on a 429 does to the connection that answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyRetry {
    /// The wait fits the connection's queue wait budget: pause its limiter this long, so
    /// queued requests go out when it ends.
    Pace(Millis),
    /// Longer than the queue could sit out (Gemini's spent daily quota says `86399s`): lock
    /// the model on this connection this long, capped at [`MAX_BODY_RETRY_LOCK_MS`], and
    /// leave the limiter (and the connection's other models) alone.
    LockModel(Millis),
}

/// Pacing or lockout for a typed `RetryInfo` delay of `delay_ms`, given the connection's
/// queue wait budget `max_wait_ms`.
pub fn body_retry(delay_ms: Millis, max_wait_ms: Millis) -> BodyRetry {
    if delay_ms <= max_wait_ms {
        BodyRetry::Pace(delay_ms)
    } else {
        BodyRetry::LockModel(delay_ms.min(MAX_BODY_RETRY_LOCK_MS))
    }
}

/// Phrases after which an absolute timestamp names the reset.
const ISO_PHRASES: [&str; 6] = [
    "try again at",
    "wait until",
    "reset at",
    "resets at",
    "available at",
    "retry after",
];
/// Short-throttle phrases (capped at [`MAX_SHORT_RETRY_MS`]). "try again in" is OpenAI's
/// wording ("Please try again in 6.5s") and an addition to the reference's list.
const SHORT_RETRY_PHRASES: [&str; 2] = ["please retry in", "try again in"];
/// Phrases after which a countdown names the reset. "will reset after" is covered by
/// "reset after".
const COUNTDOWN_PHRASES: [&str; 5] = [
    "reset after",
    "resets after",
    "reset in",
    "resets in",
    "retry after",
];

/// The wait stated in an upstream error text (message and body), tried in the reference's order:
/// 1. a JSON `RetryInfo.retryDelay` (`"30s"`);
/// 2. "please retry in Ns" / "try again in Ns" (≤ 24 h);
/// 3. an ISO timestamp after "try again at", "wait until", "reset(s) at", "available at" or
///    "retry after" (a timestamp without offset is UTC);
/// 4. a compact countdown after "reset(s) after" (incl. "will reset after"), "reset(s) in" or
///    "retry after": `XhYmZs`, `45m`, `30s`;
/// 5. a worded countdown after the same phrases: "resets in 13 days", "reset in 5 minutes".
///
/// Matching is ASCII case-insensitive; only the first [`MAX_SCAN_BYTES`] are read.
pub fn parse_retry_from_error_text(text: &str, now_epoch_ms: u64) -> Option<Millis> {
    let text = bounded(text);
    if let Some(ms) = json_retry_delay(text) {
        return positive_capped(ms);
    }
    let lower = text.to_ascii_lowercase();
    if let Some(ms) = duration_after(&lower, &SHORT_RETRY_PHRASES, compact_duration_at) {
        return Some(ms.min(MAX_SHORT_RETRY_MS));
    }
    for phrase in ISO_PHRASES {
        for start in word_starts(&lower, phrase) {
            let i = skip_blanks(lower.as_bytes(), start + phrase.len());
            let parsed = lower.get(i..).and_then(parse_iso_datetime_prefix);
            if let Some(wait) = parsed.and_then(|(ts, _)| wait_until(ts, now_epoch_ms)) {
                return Some(wait);
            }
        }
    }
    duration_after(&lower, &COUNTDOWN_PHRASES, compact_duration_at)
        .or_else(|| duration_after(&lower, &COUNTDOWN_PHRASES, worded_duration_at))
        .and_then(positive_capped)
}

/// The countdown after "resets in" / "reset in" alone (`"Resets in 13 days"`, `"resets in
/// 2h7m"`), capped at 30 days. Provider rules use it where the reset phrase is part of the
/// rule (opencode's monthly limit).
pub fn parse_resets_in(text: &str) -> Option<Millis> {
    let lower = bounded(text).to_ascii_lowercase();
    let phrases = ["resets in", "reset in"];
    duration_after(&lower, &phrases, compact_duration_at)
        .or_else(|| duration_after(&lower, &phrases, worded_duration_at))
        .and_then(positive_capped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// 2023-11-14T22:13:20Z.
    const NOW: u64 = 1_700_000_000_000;

    #[test]
    fn retry_after_integer_seconds() {
        assert_eq!(parse_retry_after("120", NOW), Some(120_000));
        assert_eq!(parse_retry_after(" 1 ", NOW), Some(1_000));
        assert_eq!(parse_retry_after("1.5", NOW), Some(1_500));
    }

    #[test]
    fn retry_after_zero_negative_and_garbage_are_none() {
        assert_eq!(parse_retry_after("0", NOW), None);
        assert_eq!(parse_retry_after("-5", NOW), None);
        assert_eq!(parse_retry_after("", NOW), None);
        assert_eq!(parse_retry_after("soon", NOW), None);
        assert_eq!(parse_retry_after("1.2.3", NOW), None);
        assert_eq!(parse_retry_after("12abc", NOW), None);
    }

    #[test]
    fn retry_after_http_date() {
        // NOW + 90 s.
        assert_eq!(
            parse_retry_after("Tue, 14 Nov 2023 22:14:50 GMT", NOW),
            Some(90_000)
        );
        // A date in the past says "now": no hint.
        assert_eq!(
            parse_retry_after("Tue, 14 Nov 2023 22:00:00 GMT", NOW),
            None
        );
    }

    #[test]
    fn retry_after_go_style_relative() {
        assert_eq!(parse_retry_after("60s", NOW), Some(60_000));
        assert_eq!(parse_retry_after("5m", NOW), Some(300_000));
    }

    #[test]
    fn retry_after_is_capped_at_30_days() {
        assert_eq!(
            parse_retry_after("99999999999999999999999", NOW),
            Some(MAX_HINT_MS)
        );
        assert_eq!(parse_retry_after("3000000", NOW), Some(MAX_HINT_MS));
    }

    #[test]
    fn ratelimit_reset_epoch_seconds() {
        let reset_s = (NOW + 90_000) / 1000;
        assert_eq!(
            parse_ratelimit_reset(&reset_s.to_string(), NOW),
            Some(90_000)
        );
    }

    #[test]
    fn ratelimit_reset_epoch_millis() {
        assert_eq!(
            parse_ratelimit_reset(&(NOW + 1_234).to_string(), NOW),
            Some(1_234)
        );
    }

    #[test]
    fn ratelimit_reset_small_values_are_deltas() {
        assert_eq!(parse_ratelimit_reset("60", NOW), Some(60_000));
        assert_eq!(parse_ratelimit_reset("0", NOW), None);
        // Past the 30-day cap but below the epoch-seconds threshold: capped delta.
        assert_eq!(parse_ratelimit_reset("999999999", NOW), Some(MAX_HINT_MS));
    }

    #[test]
    fn ratelimit_reset_past_epoch_is_none() {
        assert_eq!(
            parse_ratelimit_reset(&((NOW - 5_000) / 1000).to_string(), NOW),
            None
        );
        assert_eq!(parse_ratelimit_reset(&(NOW - 5_000).to_string(), NOW), None);
    }

    #[test]
    fn ratelimit_reset_other_shapes() {
        assert_eq!(parse_ratelimit_reset("1s", NOW), Some(1_000));
        assert_eq!(
            parse_ratelimit_reset("2023-11-14T22:14:00Z", NOW),
            Some(40_000)
        );
        assert_eq!(parse_ratelimit_reset("tomorrow", NOW), None);
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration_ms("1s"), Some(1_000));
        assert_eq!(parse_go_duration_ms("6m0s"), Some(360_000));
        assert_eq!(parse_go_duration_ms("20ms"), Some(20));
        assert_eq!(parse_go_duration_ms("1h2m3.5s"), Some(3_723_500));
        assert_eq!(parse_go_duration_ms("500us"), Some(1));
        assert_eq!(parse_go_duration_ms("0"), Some(0));
        assert_eq!(parse_go_duration_ms("1d"), None);
        assert_eq!(parse_go_duration_ms("s"), None);
        assert_eq!(parse_go_duration_ms("."), None);
        assert_eq!(parse_go_duration_ms("1h 2m"), None);
    }

    #[test]
    fn openai_reset_headers() {
        assert_eq!(parse_openai_reset("6m0s"), Some(360_000));
        assert_eq!(parse_openai_reset("0s"), None);
    }

    #[test]
    fn rfc3339_parsing() {
        assert_eq!(parse_rfc3339_epoch_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339_epoch_ms("2023-11-14T22:13:20Z"), Some(NOW));
        assert_eq!(
            parse_rfc3339_epoch_ms("2023-11-14T22:13:20.250Z"),
            Some(NOW + 250)
        );
        assert_eq!(
            parse_rfc3339_epoch_ms("2023-11-15T00:13:20+02:00"),
            Some(NOW)
        );
        assert_eq!(
            parse_rfc3339_epoch_ms("2023-11-14T20:13:20-0200"),
            Some(NOW)
        );
        assert_eq!(
            parse_rfc3339_epoch_ms("2024-02-29T00:00:00Z"),
            Some(1_709_164_800_000)
        );
        assert_eq!(parse_rfc3339_epoch_ms("2023-02-29T00:00:00Z"), None);
        assert_eq!(parse_rfc3339_epoch_ms("2023-13-01T00:00:00Z"), None);
        assert_eq!(parse_rfc3339_epoch_ms("1969-12-31T23:59:59Z"), None);
        assert_eq!(
            parse_rfc3339_epoch_ms("2023-11-14T22:13:20Z trailing"),
            None
        );
    }

    #[test]
    fn anthropic_reset_header() {
        assert_eq!(
            parse_anthropic_reset("2023-11-14T22:14:20Z", NOW),
            Some(60_000)
        );
        assert_eq!(parse_anthropic_reset("2023-11-14T22:12:20Z", NOW), None);
    }

    #[test]
    fn text_json_retry_info() {
        let body = r#"{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure"},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}]}}"#;
        assert_eq!(parse_retry_from_error_text(body, NOW), Some(30_000));
        let prefixed = format!("[429] upstream said: {body} (end)");
        assert_eq!(parse_retry_from_error_text(&prefixed, NOW), Some(30_000));
        let array = format!("[{body}]");
        assert_eq!(parse_retry_from_error_text(&array, NOW), Some(30_000));
    }

    #[test]
    fn text_please_retry_in() {
        assert_eq!(
            parse_retry_from_error_text("Quota exceeded. Please retry in 26.660853464s.", NOW),
            Some(26_661)
        );
        assert_eq!(
            parse_retry_from_error_text("Please retry in 100000s", NOW),
            Some(DAY_MS)
        );
        assert_eq!(
            parse_retry_from_error_text("Rate limit reached. Please try again in 6.5s.", NOW),
            Some(6_500)
        );
        assert_eq!(
            parse_retry_from_error_text("please try again in 20ms", NOW),
            Some(20)
        );
    }

    #[test]
    fn text_iso_timestamps() {
        let cases = [
            "Limit reached, try again at 2023-11-14T22:14:20Z",
            "quota resets at 2023-11-14 22:14:20 UTC",
            "Model available at 2023-11-14T22:14:20.000Z.",
            "retry after 2023-11-14T23:14:20+01:00",
            "Please wait until 2023-11-14T22:14:20Z",
            "RESET AT 2023-11-14T22:14:20Z",
        ];
        for text in cases {
            assert_eq!(
                parse_retry_from_error_text(text, NOW),
                Some(60_000),
                "{text}"
            );
        }
        // Past timestamps are no hint; "preset at" is not "reset at".
        assert_eq!(
            parse_retry_from_error_text("try again at 2020-01-01T00:00:00Z", NOW),
            None
        );
        assert_eq!(
            parse_retry_from_error_text("preset at 2023-11-14T22:14:20Z", NOW),
            None
        );
    }

    #[test]
    fn text_compact_countdowns() {
        assert_eq!(
            parse_retry_from_error_text("Your quota will reset after 2h30m14s", NOW),
            Some(9_014_000)
        );
        assert_eq!(
            parse_retry_from_error_text("The pool will reset after 45m", NOW),
            Some(2_700_000)
        );
        assert_eq!(
            parse_retry_from_error_text("This will reset after 30s", NOW),
            Some(30_000)
        );
        assert_eq!(
            parse_retry_from_error_text(
                "Individual quota reached. Contact your administrator to enable overages. Resets in 164h27m24s.",
                NOW
            ),
            Some((164 * 3600 + 27 * 60 + 24) * 1000)
        );
        assert_eq!(
            parse_retry_from_error_text("Resets in 2h7m23s", NOW),
            Some(7_643_000)
        );
        assert_eq!(
            parse_retry_from_error_text("Reset in 45m", NOW),
            Some(2_700_000)
        );
        assert_eq!(
            parse_retry_from_error_text("Please retry after 20s", NOW),
            Some(20_000)
        );
        assert_eq!(parse_retry_from_error_text("No reset metadata", NOW), None);
    }

    #[test]
    fn text_caps_extreme_windows_at_30_days() {
        assert_eq!(
            parse_retry_from_error_text("Resets in 2400h", NOW),
            Some(MAX_HINT_MS)
        );
        assert_eq!(
            parse_retry_from_error_text("Resets in 999999h", NOW),
            Some(MAX_HINT_MS)
        );
        assert_eq!(
            parse_retry_from_error_text("resets in 400 days", NOW),
            Some(MAX_HINT_MS)
        );
    }

    #[test]
    fn text_day_granularity() {
        assert_eq!(
            parse_retry_from_error_text("Monthly usage limit reached. Resets in 13 days.", NOW),
            Some(13 * DAY_MS)
        );
        assert_eq!(
            parse_retry_from_error_text("Your quota will reset in 1 day", NOW),
            Some(DAY_MS)
        );
        assert_eq!(
            parse_retry_from_error_text("resets in 10 months", NOW),
            None
        );
        assert_eq!(parse_retry_from_error_text("resets in 0 days", NOW), None);
    }

    #[test]
    fn resets_in_units() {
        assert_eq!(parse_resets_in("Resets in 13 days."), Some(13 * DAY_MS));
        assert_eq!(parse_resets_in("resets in 5 hours"), Some(5 * HOUR_MS));
        assert_eq!(
            parse_resets_in("resets in 2h7m"),
            Some(2 * HOUR_MS + 7 * MINUTE_MS)
        );
        assert_eq!(parse_resets_in("try again later"), None);
    }

    #[test]
    fn utc_midnight() {
        assert_eq!(ms_until_utc_midnight(0), DAY_MS);
        assert_eq!(ms_until_utc_midnight(DAY_MS - 1), 1);
        // 2023-11-14T22:13:20Z → 1 h 46 min 40 s to midnight.
        assert_eq!(
            ms_until_utc_midnight(NOW),
            HOUR_MS + 46 * MINUTE_MS + 40 * SECOND_MS
        );
    }

    #[test]
    fn upstream_hint_order_and_case_insensitivity() {
        let reset_s = ((NOW + 90_000) / 1000).to_string();
        let headers = [
            ("X-RateLimit-Reset", reset_s.as_str()),
            ("Retry-After", "120"),
        ];
        assert_eq!(upstream_hint(&headers, "Resets in 5m", NOW), Some(120_000));
        let headers = [("x-ratelimit-reset", reset_s.as_str())];
        assert_eq!(upstream_hint(&headers, "Resets in 5m", NOW), Some(90_000));
        let headers = [("Retry-After", "garbage")];
        assert_eq!(upstream_hint(&headers, "Resets in 5m", NOW), Some(300_000));
        assert_eq!(upstream_hint(&[], "nothing here", NOW), None);
    }

    #[test]
    fn provider_reset_headers_prefer_exhausted_limit() {
        let headers = [
            ("anthropic-ratelimit-requests-remaining", "10"),
            ("anthropic-ratelimit-requests-reset", "2023-11-14T22:13:25Z"),
            ("anthropic-ratelimit-tokens-remaining", "0"),
            ("anthropic-ratelimit-tokens-reset", "2023-11-14T22:14:20Z"),
        ];
        assert_eq!(upstream_hint(&headers, "", NOW), Some(60_000));
        // Without exhaustion evidence, the earliest reset.
        let headers = [
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ];
        assert_eq!(provider_reset_hint(&headers, NOW), Some(1_000));
        let headers = [
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ];
        assert_eq!(provider_reset_hint(&headers, NOW), Some(360_000));
    }

    #[test]
    fn a_stated_wait_beats_reset_headers_of_limits_that_are_not_exhausted() {
        // OpenAI's TPM 429: every limit has a reset, none says remaining 0, the body says when.
        let headers = [
            ("x-ratelimit-remaining-requests", "59"),
            ("x-ratelimit-remaining-tokens", "149984"),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ];
        let body =
            "Rate limit reached for gpt-4 on tokens per min (TPM). Please try again in 26.604s.";
        assert_eq!(upstream_hint(&headers, body, NOW), Some(26_604));
        // Without a stated wait, the earliest reset is still the guess.
        assert_eq!(upstream_hint(&headers, "slow down", NOW), Some(1_000));
        // An exhausted limit's reset is evidence and wins.
        let exhausted = [
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ];
        assert_eq!(upstream_hint(&exhausted, body, NOW), Some(360_000));
    }

    #[test]
    fn bounded_cuts_on_char_boundary() {
        let text = "é".repeat(MAX_SCAN_BYTES);
        let cut = bounded(&text);
        assert!(cut.len() <= MAX_SCAN_BYTES);
        assert!(cut.len() >= MAX_SCAN_BYTES - 1);
    }

    proptest! {
        #[test]
        fn parsers_never_panic_and_respect_the_cap(s in any::<String>(), now in any::<u64>()) {
            for ms in [
                parse_retry_after(&s, now),
                parse_ratelimit_reset(&s, now),
                parse_anthropic_reset(&s, now),
                parse_openai_reset(&s),
                parse_retry_from_error_text(&s, now),
                parse_resets_in(&s),
                upstream_hint(&[("retry-after", &s), ("x-ratelimit-reset", &s)], &s, now),
            ]
            .into_iter()
            .flatten()
            {
                prop_assert!(ms > 0 && ms <= MAX_HINT_MS);
            }
            let _ = parse_go_duration_ms(&s);
            let _ = parse_rfc3339_epoch_ms(&s);
            let m = ms_until_utc_midnight(now);
            prop_assert!(m > 0 && m <= DAY_MS);
        }

        #[test]
        fn text_parser_survives_hint_shaped_noise(
            prefix in "[a-zA-Z ]{0,20}",
            phrase in prop::sample::select(vec![
                "resets in ", "reset after ", "please retry in ", "try again at ", "retry after ",
                "{\"error\":{\"details\":[{\"retryDelay\":\"",
            ]),
            tail in "[0-9hmsdayT:Z.+\\- ]{0,30}",
            now in any::<u64>(),
        ) {
            let text = format!("{prefix}{phrase}{tail}");
            if let Some(ms) = parse_retry_from_error_text(&text, now) {
                prop_assert!(ms > 0 && ms <= MAX_HINT_MS);
            }
        }
    }

    #[test]
    fn a_typed_retry_info_paces_within_the_budget_and_locks_beyond_it() {
        let typed = r#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure"},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"86399s"}]}}"#;
        assert_eq!(typed_retry_info_ms(typed), Some(86_399_000));
        // An untyped retryDelay or a delay in text is no RetryInfo.
        let untyped = r#"{"error":{"details":[{"retryDelay":"30s"}]}}"#;
        assert_eq!(typed_retry_info_ms(untyped), None);
        assert_eq!(
            typed_retry_info_ms("google.rpc.RetryInfo retry in 5s"),
            None
        );

        assert_eq!(body_retry(2_000, 30_000), BodyRetry::Pace(2_000));
        assert_eq!(body_retry(30_000, 30_000), BodyRetry::Pace(30_000));
        assert_eq!(body_retry(30_001, 30_000), BodyRetry::LockModel(30_001));
        assert_eq!(
            body_retry(86_399_000, 30_000),
            BodyRetry::LockModel(86_399_000)
        );
        assert_eq!(
            body_retry(3 * MAX_BODY_RETRY_LOCK_MS, 30_000),
            BodyRetry::LockModel(MAX_BODY_RETRY_LOCK_MS)
        );
    }
}
