//! The usage object every format shares, walked without serde: the chat pre-scan reads it
//! from a stream's last chunk and the body probe from a whole answer.
//!
//! It reads what `WireUsage` declares and converts it as `Usage::from` does; a counter that is
//! not a plain non-negative integer (or `null`), or a duplicate declared field, answers
//! `None`, and the caller runs the full parse.

use super::Usage;
use super::prescan::{Scanner, Seen};

/// Every format's usage object, as `WireUsage` reads it and converts it into [`Usage`].
pub(super) fn usage(s: &mut Scanner<'_>) -> Option<Usage> {
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
