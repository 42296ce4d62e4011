//! Redaction of credentials echoed in upstream error text.
//!
//! Upstreams sometimes echo the request's credential in an error ("Incorrect API key provided:
//! sk-…", a URL with `?key=…`). That text reaches clients and logs, so it is redacted first.
//! Detection works on an ASCII-lower-cased copy, which keeps byte offsets identical, and every
//! span starts and ends on an ASCII byte, so slicing the original is always on a char boundary.

use crate::hints::bounded;

/// What a redacted secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Upper bound, in chars, of a [`sanitize_message`] result.
pub const MAX_MESSAGE_CHARS: usize = 4096;

/// Secrets shorter than this are left alone: short values are words, not credentials ("Bearer
/// token is invalid").
const MIN_SECRET_LEN: usize = 8;

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'+' | b'/' | b'=' | b'-')
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// End of the run of token bytes starting at `i`.
fn token_end(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|c| is_token_byte(*c)) {
        i += 1;
    }
    i
}

/// Key prefixes of well-known providers and the minimum length of what follows.
const KEY_PREFIXES: [(&str, usize); 4] = [("sk-", 8), ("gsk_", 16), ("xai-", 16), ("aiza", 30)];

/// Parameter and header names whose value is a credential.
const SECRET_NAMES: [&str; 7] = [
    "x-api-key",
    "x-goog-api-key",
    "api_key",
    "api-key",
    "apikey",
    "access_token",
    "refresh_token",
];

/// Byte spans `[start, end)` of `text` to redact, with how many leading bytes to keep.
fn secret_spans(lower: &str) -> Vec<(usize, usize)> {
    let b = lower.as_bytes();
    let starts_word = |i: usize| i == 0 || !is_word_byte(b[i - 1]);
    let mut spans = Vec::new();

    // `Bearer <token>`.
    for (i, m) in lower.match_indices("bearer") {
        if !starts_word(i) {
            continue;
        }
        let mut j = i + m.len();
        let ws = j;
        while b.get(j).is_some_and(|c| *c == b' ' || *c == b'\t') {
            j += 1;
        }
        let end = token_end(b, j);
        if j > ws && end - j >= MIN_SECRET_LEN {
            spans.push((j, end));
        }
    }

    // Provider key formats (`sk-…`, `sk-ant-…`, `gsk_…`, `xai-…`, `AIza…`); the prefix stays.
    for (prefix, min) in KEY_PREFIXES {
        for (i, m) in lower.match_indices(prefix) {
            if !starts_word(i) {
                continue;
            }
            let from = i + m.len();
            let end = token_end(b, from);
            if end - from >= min {
                spans.push((from, end));
            }
        }
    }

    // `name: value`, `name=value`, `"name": "value"`, and `?key=` / `&key=` query parameters.
    let value_after = |mut j: usize, allow_colon: bool| -> Option<(usize, usize)> {
        if matches!(b.get(j), Some(b'"' | b'\'')) {
            j += 1;
        }
        while b.get(j).is_some_and(|c| *c == b' ' || *c == b'\t') {
            j += 1;
        }
        match b.get(j) {
            Some(b'=') => j += 1,
            Some(b':') if allow_colon => j += 1,
            _ => return None,
        }
        while b
            .get(j)
            .is_some_and(|c| matches!(c, b' ' | b'\t' | b'"' | b'\''))
        {
            j += 1;
        }
        let end = token_end(b, j);
        (end - j >= MIN_SECRET_LEN).then_some((j, end))
    };
    for name in SECRET_NAMES {
        for (i, m) in lower.match_indices(name) {
            if i > 0 && (is_word_byte(b[i - 1]) || b[i - 1] == b'-') {
                continue;
            }
            spans.extend(value_after(i + m.len(), true));
        }
    }
    for (i, m) in lower.match_indices("key") {
        if i > 0 && matches!(b[i - 1], b'?' | b'&') {
            spans.extend(value_after(i + m.len(), false));
        }
    }

    spans.sort_unstable();
    spans
}

/// `text` with bearer tokens, provider API keys (`sk-…`, `sk-ant-…`, `gsk_…`, `xai-…`,
/// `AIza…`), and the values of `x-api-key`, `api_key`, `access_token`-style fields and `key=`
/// query parameters replaced by [`REDACTED`]. Names and key prefixes are kept so the message
/// still says *what* was wrong.
pub fn redact_secrets(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let spans = secret_spans(&lower);
    if spans.is_empty() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (start, end) in spans {
        if start < last {
            continue; // overlaps a span already redacted
        }
        out.push_str(text.get(last..start).unwrap_or(""));
        out.push_str(REDACTED);
        last = end;
    }
    out.push_str(text.get(last..).unwrap_or(""));
    out
}

/// An upstream message fit for a client or a log line: the first non-empty line, trimmed,
/// control characters replaced by spaces, secrets redacted, at most [`MAX_MESSAGE_CHARS`].
pub fn sanitize_message(text: &str) -> String {
    let line = bounded(text)
        .split(['\n', '\r'])
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let cleaned: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    redact_secrets(&cleaned)
        .chars()
        .take(MAX_MESSAGE_CHARS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bearer_tokens() {
        assert_eq!(
            redact_secrets("Authorization: Bearer abcdefgh12345678 rejected"),
            "Authorization: Bearer [REDACTED] rejected"
        );
        assert_eq!(
            redact_secrets("bearer token is invalid"),
            "bearer token is invalid"
        );
    }

    #[test]
    fn provider_keys() {
        assert_eq!(
            redact_secrets("Incorrect API key provided: sk-proj-AbC123xyz789QWE."),
            "Incorrect API key provided: sk-[REDACTED]"
        );
        assert_eq!(
            redact_secrets("key sk-ant-api03-AAAAAAAAAAAAAAAAAAAA-BBBB is disabled"),
            "key sk-[REDACTED] is disabled"
        );
        // Already masked by the upstream, or too short to be a key: untouched.
        assert_eq!(redact_secrets("sk-proj-****abcd"), "sk-proj-****abcd");
        assert_eq!(redact_secrets("task-force"), "task-force");
        assert_eq!(
            redact_secrets("AIzaSyA1234567890abcdefghijklmnopqrstu invalid"),
            "AIza[REDACTED] invalid"
        );
    }

    #[test]
    fn named_values_and_query_params() {
        assert_eq!(
            redact_secrets("x-api-key: abcdefgh12345678"),
            "x-api-key: [REDACTED]"
        );
        assert_eq!(
            redact_secrets(r#"{"X-Api-Key":"abcdefgh12345678","model":"m"}"#),
            r#"{"X-Api-Key":"[REDACTED]","model":"m"}"#
        );
        assert_eq!(
            redact_secrets("GET /v1/models?api_key=abcdefgh12345678&x=1 failed"),
            "GET /v1/models?api_key=[REDACTED]&x=1 failed"
        );
        assert_eq!(
            redact_secrets("https://host/v1beta/models?key=AIzaXYZ12345678&alt=sse"),
            "https://host/v1beta/models?key=[REDACTED]&alt=sse"
        );
        assert_eq!(
            redact_secrets("missing x-api-key header"),
            "missing x-api-key header"
        );
        assert_eq!(redact_secrets("monkey=bananas12345"), "monkey=bananas12345");
    }

    #[test]
    fn non_ascii_text_survives() {
        assert_eq!(
            redact_secrets("密钥无效: sk-abcdefghijklmnop，请检查"),
            "密钥无效: sk-[REDACTED]，请检查"
        );
    }

    #[test]
    fn sanitize_takes_the_first_line_and_bounds_it() {
        assert_eq!(
            sanitize_message("\n  first line Bearer abcdefgh12345678 \nsecond"),
            "first line Bearer [REDACTED]"
        );
        assert_eq!(sanitize_message("a\tb\u{1b}[31m"), "a b [31m");
        assert_eq!(
            sanitize_message(&"é".repeat(10_000)).chars().count(),
            MAX_MESSAGE_CHARS
        );
        assert_eq!(sanitize_message(""), "");
    }

    proptest! {
        #[test]
        fn redaction_never_panics_and_bounds_hold(s in any::<String>()) {
            let _ = redact_secrets(&s);
            prop_assert!(sanitize_message(&s).chars().count() <= MAX_MESSAGE_CHARS);
        }

        #[test]
        fn embedded_keys_never_survive(
            before in "[a-zA-Z :]{0,20}",
            key in "[0-9][A-Za-z0-9_-]{7,39}",
            after in "[ ,.;]{0,3}[a-z ]{0,10}",
        ) {
            let text = format!("{before} sk-{key}{after}");
            let red = redact_secrets(&text);
            prop_assert!(!red.contains(&key), "{red}");
        }
    }
}
