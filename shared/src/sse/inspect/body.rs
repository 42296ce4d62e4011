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
use super::usage_scan::usage;

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
