//! A fast path for probing a whole (non-stream) `2xx` JSON answer: its top-level `type`,
//! `error` and `usage`, without serde.
//!
//! The node probes every JSON answer for an in-band error object and for usage. serde
//! skipping the rest of the body (choices, message text) was about 7 % of a proxied JSON
//! request's instructions. This walks the body once with the pre-scan's strict walker,
//! skipping strings with memchr. It answers only when `error` is absent or `null`, `type`
//! is a plain string or `null`, and `usage` is `null` or an object whose declared counters
//! are plain non-negative integers; anything else (or anything unusual: invalid UTF-8, an
//! escaped key, a duplicate declared field, a malformed value) answers `None`, and the
//! caller runs its serde probe, so the answer is always the one serde gives.

use super::Usage;
use super::prescan::{Scanner, Seen, whole_escaped};

#[cfg(test)]
mod tests;

/// What a `2xx` JSON body with no `error` field (or `"error": null`) says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyFacts {
    /// The top-level `type` is `"error"` (Anthropic's error envelope).
    pub typed_error: bool,
    pub usage: Option<Usage>,
}

/// The facts of `body`, or `None` when the full parse must decide.
pub fn probe(body: &[u8]) -> Option<BodyFacts> {
    whole_escaped(body, top)
}

fn top(s: &mut Scanner<'_>) -> Option<BodyFacts> {
    let (mut facts, mut seen) = (
        BodyFacts {
            typed_error: false,
            usage: None,
        },
        Seen::default(),
    );
    s.object(|s, key| match key {
        b"type" => {
            seen.first(0)?;
            facts.typed_error = s.opt_string()? == Some(b"error");
            Some(())
        }
        b"error" => seen.null(1, s),
        b"usage" => {
            seen.first(2)?;
            if !s.null() {
                facts.usage = Some(usage(s)?);
            }
            Some(())
        }
        _ => s.skip(1),
    })?;
    Some(facts)
}

/// Every format's usage object, as `WireUsage` reads it and converts it into [`Usage`].
fn usage(s: &mut Scanner<'_>) -> Option<Usage> {
    let mut seen = Seen::default();
    let (mut prompt, mut completion, mut prompt_cached) = (None, None, None);
    let (mut input, mut output, mut input_cached) = (None, None, None);
    let (mut cache_read, mut cache_creation) = (None, None);
    s.object(|s, key| {
        let (bit, slot) = match key {
            b"prompt_tokens" => (0, &mut prompt),
            b"completion_tokens" => (1, &mut completion),
            b"input_tokens" => (2, &mut input),
            b"output_tokens" => (3, &mut output),
            b"cache_read_input_tokens" => (4, &mut cache_read),
            b"cache_creation_input_tokens" => (5, &mut cache_creation),
            b"prompt_tokens_details" => (6, &mut prompt_cached),
            b"input_tokens_details" => (7, &mut input_cached),
            _ => return s.skip(2),
        };
        seen.first(bit)?;
        *slot = if bit >= 6 { details(s)? } else { s.opt_u64()? };
        Some(())
    })?;
    Some(Usage {
        input: input.or(prompt),
        output: output.or(completion),
        cache_read: cache_read.or(prompt_cached).or(input_cached),
        cache_creation,
    })
}

/// `{"cached_tokens": n}` or `null`: the cached count, if any.
fn details(s: &mut Scanner<'_>) -> Option<Option<u64>> {
    if s.null() {
        return Some(None);
    }
    let (mut cached, mut seen) = (None, Seen::default());
    s.object(|s, key| match key {
        b"cached_tokens" => {
            seen.first(0)?;
            cached = s.opt_u64()?;
            Some(())
        }
        _ => s.skip(3),
    })?;
    Some(cached)
}
