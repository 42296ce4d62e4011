//! What serde_json's full parse refuses in a document its raw-value skipping accepts.
//!
//! [`super::scan`] reads the body's top level as borrowed raw values, and serde_json skips a
//! raw value without building it: it checks the syntax, the escapes' form and UTF-8, but not
//! the nesting depth, whether `\u` escapes pair their surrogates, or whether a number fits an
//! `f64`. The node promises to refuse exactly what `serde_json::from_slice::<Value>` refuses (a
//! body only the upstream's parser would catch costs an attempt and, as a 5xx, the breaker),
//! so this walk adds those three checks over the bytes the raw scan already accepted.
//!
//! A first pass, without branches, counts the signs that anything could be wrong (brackets,
//! digits, `\u`, a digit before `e`); a typical body ends there. Where a sign shows, the exact
//! checks run without recursion. Because the document is already known to be valid JSON,
//! `\u` escapes are found where they stand (a backslash preceded by an even number of
//! backslashes starts an escape), and the walk for depth and numbers only has to tell strings
//! from structure, jumping string interiors with `memchr`. A suspect number is handed to
//! serde_json itself, so the overflow boundary is serde_json's own.

use memchr::memchr2;

/// Deepest nesting serde_json's parse accepts: its recursion limit is 128 and it refuses the
/// container that brings its budget to zero, so the 128th nested `[`/`{` is an error (pinned by
/// a test against serde_json itself).
pub const MAX_DEPTH: usize = 127;

/// A number token shorter than this and without an exponent has fewer than 309 integer digits,
/// so it cannot exceed `f64::MAX` (about 1.8e308); longer ones are parsed to find out.
const SAFE_NUMBER_LEN: usize = 300;

/// Why a document the raw scan accepted is still refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// A `\u` escape that is half of a surrogate pair without its other half.
    LoneSurrogate,
    /// A number outside the range of `f64`.
    NumberOutOfRange,
}

impl Refusal {
    /// The client-facing explanation.
    pub fn message(self) -> &'static str {
        match self {
            Refusal::TooDeep => "nested more than 127 levels deep",
            Refusal::LoneSurrogate => "a \\u escape is an unpaired UTF-16 surrogate",
            Refusal::NumberOutOfRange => "a number is out of range",
        }
    }
}

/// Checks a document serde_json's raw-value scan has accepted (so: valid JSON syntax, valid
/// UTF-8, well-formed escapes) for what only its full parse refuses. Any other input gives an
/// answer without panicking, but only valid documents give a meaningful one.
///
/// A first pass counts what could matter; a typical request has fewer than 128 brackets, no
/// exponent, few digits and no `\u` escape, and is done after it.
pub fn check(doc: &[u8]) -> Result<(), Refusal> {
    let signs = Signs::of(doc);
    if signs.unicode_escapes {
        check_surrogates(doc)?;
    }
    if signs.brackets > MAX_DEPTH || signs.digits >= SAFE_NUMBER_LEN || signs.exponents {
        walk(doc)?;
    }
    Ok(())
}

/// What one cheap pass over the bytes can tell: enough to skip the exact checks.
#[derive(Debug, Default)]
struct Signs {
    /// `[` and `{` anywhere: nesting deeper than this count is impossible.
    brackets: usize,
    /// Digits anywhere: a number without an exponent needs 309 to overflow.
    digits: usize,
    /// A `\u` anywhere (inside a string, or an escaped backslash before a `u`).
    unicode_escapes: bool,
    /// A digit followed by `e` or `E`, as every exponent is.
    exponents: bool,
}

impl Signs {
    fn of(doc: &[u8]) -> Self {
        let mut signs = Signs::default();
        let next = doc.get(1..).unwrap_or_default();
        // Blocks of 128 keep the counters in `u8` lanes and the loop free of branches, which
        // the compiler turns into vector code.
        for (block, following) in doc.chunks(128).zip(next.chunks(128)) {
            let (mut brackets, mut digits, mut escapes, mut exponents) = (0u8, 0u8, 0u8, 0u8);
            for (&a, &b) in block.iter().zip(following) {
                let digit = a.wrapping_sub(b'0') < 10;
                brackets += u8::from(a == b'[' || a == b'{');
                digits += u8::from(digit);
                escapes |= u8::from(a == b'\\' && b == b'u');
                exponents |= u8::from(digit && (b | 0x20) == b'e');
            }
            signs.brackets += usize::from(brackets);
            signs.digits += usize::from(digits);
            signs.unicode_escapes |= escapes != 0;
            signs.exponents |= exponents != 0;
        }
        // The last byte has no follower, so the loop above did not count it.
        if let Some(&last) = doc.last() {
            signs.brackets += usize::from(last == b'[' || last == b'{');
            signs.digits += usize::from(last.is_ascii_digit());
        }
        signs
    }
}

/// Every `\u` escape pairs its surrogates. Outside strings valid JSON has no backslash, and a
/// backslash starts an escape when an even number of backslashes precede it, so the escapes
/// are found without walking the structure.
fn check_surrogates(doc: &[u8]) -> Result<(), Refusal> {
    let mut checked_to = 0;
    for at in memchr::memmem::find_iter(doc, b"\\u") {
        // The trailing half of a pair checked with its leading half.
        if at < checked_to {
            continue;
        }
        let before = doc.get(..at).unwrap_or_default();
        let backslashes = before.iter().rev().take_while(|&&b| b == b'\\').count();
        if backslashes % 2 == 0 {
            checked_to = unicode_escape_end(doc, at)?;
        }
    }
    Ok(())
}

/// Nesting depth and number range, walking the structure: string interiors are jumped with
/// `memchr`.
fn walk(doc: &[u8]) -> Result<(), Refusal> {
    let mut depth = 0usize;
    let mut at = 0usize;
    while let Some(&byte) = doc.get(at) {
        match byte {
            b'"' => at = string_end(doc, at + 1),
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(Refusal::TooDeep);
                }
                at += 1;
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                at += 1;
            }
            b'-' | b'0'..=b'9' => {
                let end = number_end(doc, at);
                check_number(doc.get(at..end).unwrap_or_default())?;
                at = end;
            }
            _ => at += 1,
        }
    }
    Ok(())
}

/// The index just past the closing quote of the string whose contents start at `at`.
fn string_end(doc: &[u8], mut at: usize) -> usize {
    loop {
        let rest = doc.get(at..).unwrap_or_default();
        let Some(found) = memchr2(b'"', b'\\', rest) else {
            return doc.len();
        };
        at += found;
        if doc.get(at) == Some(&b'"') {
            return at + 1;
        }
        // A backslash: every escape's second byte is not a quote or a backslash that could
        // end the string, so skipping two bytes is enough (`\uXXXX`'s hex digits are neither).
        at += 2;
    }
}

/// Checks the `\uXXXX` escape at `at` as serde_json's string parse does, returning the index
/// past it (past both halves of a surrogate pair).
fn unicode_escape_end(doc: &[u8], at: usize) -> Result<usize, Refusal> {
    let unit = hex4(doc, at + 2);
    match unit {
        // A trailing half with no leading half before it.
        0xDC00..=0xDFFF => Err(Refusal::LoneSurrogate),
        0xD800..=0xDBFF => {
            // A leading half must be followed at once by a `\u` escape of a trailing half.
            let next_is_escape = doc.get(at + 6) == Some(&b'\\') && doc.get(at + 7) == Some(&b'u');
            if next_is_escape && (0xDC00..=0xDFFF).contains(&hex4(doc, at + 8)) {
                Ok(at + 12)
            } else {
                Err(Refusal::LoneSurrogate)
            }
        }
        _ => Ok(at + 6),
    }
}

/// The four hex digits at `at` as a number; a malformed escape (which the raw scan has already
/// refused) reads as 0, a plain character.
fn hex4(doc: &[u8], at: usize) -> u32 {
    let Some(digits) = doc.get(at..at + 4) else {
        return 0;
    };
    digits
        .iter()
        .try_fold(0u32, |n, &d| {
            let v = char::from(d).to_digit(16)?;
            Some(n << 4 | v)
        })
        .unwrap_or(0)
}

/// The index past the number token starting at `at`.
fn number_end(doc: &[u8], at: usize) -> usize {
    let rest = doc.get(at..).unwrap_or_default();
    at + rest
        .iter()
        .position(|b| !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
        .unwrap_or(rest.len())
}

/// Refuses a number outside `f64`'s range. Only a token with an exponent or of more than
/// [`SAFE_NUMBER_LEN`] bytes can be; those are parsed by serde_json, whose answer is the rule.
fn check_number(token: &[u8]) -> Result<(), Refusal> {
    let suspect = token.len() >= SAFE_NUMBER_LEN || token.iter().any(|b| matches!(b, b'e' | b'E'));
    if suspect && serde_json::from_slice::<serde_json::Value>(token).is_err() {
        return Err(Refusal::NumberOutOfRange);
    }
    Ok(())
}
