//! A fast path for the commonest event of all: an OpenAI chat chunk whose choices carry only a
//! text delta (or nothing), and for the two that close every stream: the chunk with the
//! finish reason (a plain string) and the one with usage. Error, refusal, reasoning,
//! tool-call and legacy `text` fields must be absent or `null`.
//!
//! Parsing every chunk with serde cost about 6,000 instructions per event, a large share of a
//! proxied stream's CPU. This scanner walks such a chunk once, validating it as strictly as
//! serde would, and measures the text: its decoded length, each one-letter escape (`\n`,
//! `\"`…) one byte, as model output is full of newlines and quotes. Whenever the chunk could
//! carry anything else, or anything is unusual (a `\u` escape in a string it reads, a
//! non-ASCII-whitespace quirk, invalid UTF-8, a duplicate field, an unexpected type), it
//! answers `None` and the caller runs the full parse, so the result is always the one the
//! full parse gives.

use super::repeat::{Spanned, Variable};
use super::usage_scan::usage;
use super::{EventInfo, EventKind, FinishReason, Usage};

/// Serde's own recursion limit is 128; deeper chunks go to the full parse.
const MAX_DEPTH: usize = 64;

/// The classification of a plain chat chunk, or `None` when the full parse must decide.
pub(in crate::sse) fn chat(data: &[u8]) -> Option<EventInfo> {
    chat_spanned(data).map(|(info, _)| info)
}

/// [`chat`], and where the chunk's content text is (its string's inner bytes) when it has
/// exactly one content string: the answer for an event that differs from this one only
/// there follows from the new text's length ([`super::repeat`]).
pub(super) fn chat_spanned(data: &[u8]) -> Spanned {
    let (chunk, span) = whole_spanned(data, Scanner::top)?;
    let mut info = text_info(chunk.text);
    if let Some(reason) = chunk.finish_reason {
        // The walk accepted only UTF-8 in strings; this cannot fail.
        info.finish_reason = Some(FinishReason::from_upstream(
            std::str::from_utf8(reason).ok()?,
        ));
    }
    if chunk.usage.is_some() {
        info.usage = chunk.usage;
        if info.kind == EventKind::Other {
            info.kind = EventKind::Usage;
        }
    }
    // The event after this one is answered from its text alone only when this answer is
    // nothing but its text (`repeat`).
    let plain = info.finish_reason.is_none() && info.usage.is_none();
    Some((
        info,
        span.filter(|_| plain)
            .map(|(start, end)| Variable::Text(start, end)),
    ))
}

/// What the chat walk reads off a chunk.
struct ChatChunk<'a> {
    /// Text bytes of all its choices.
    text: usize,
    /// The last choice's finish reason that is not `null` (the full parse keeps the last).
    finish_reason: Option<&'a [u8]>,
    usage: Option<Usage>,
}

/// Runs `value` over `data` as one JSON document (surrounding whitespace allowed), with the
/// inner bytes of the one text string the walk read ([`Scanner::text_string`]) when it read
/// exactly one; `None` when `value` gives up or when anything follows the value. Strings the
/// walk skips may hold escapes (validated as serde validates a string it ignores); a text
/// string, or one the answer does not read ([`Scanner::unread_string`]), the one-letter
/// escapes; every other string the answer reads, keys included, none.
pub(super) fn whole_spanned<'a, T>(
    data: &'a [u8],
    value: impl FnOnce(&mut Scanner<'a>) -> Option<T>,
) -> Option<(T, Option<(usize, usize)>)> {
    let mut s = Scanner::new(data);
    s.ws();
    let out = value(&mut s)?;
    s.ws();
    if s.pos != data.len() {
        return None;
    }
    Some((out, (s.contents == 1).then_some(s.content)))
}

/// A plain chunk carrying `text` bytes of content.
pub(super) fn text_info(text: usize) -> EventInfo {
    EventInfo {
        useful_text_bytes: text,
        ..EventInfo::of(if text > 0 {
            EventKind::Content
        } else {
            EventKind::Other
        })
    }
}

/// [`whole_spanned`] without the text string's place: for a whole answer, whose text is not
/// measured. Strings the caller reads ([`Scanner::string`]), keys included, still defer when
/// they hold an escape.
///
/// UTF-8 is checked where it can occur: the walker accepts bytes above ASCII only inside
/// strings, and [`Scanner::plain_run`] validates each run that holds one. A separate pass over
/// the whole document first cost as much as the walk.
pub(super) fn whole_escaped<'a, T>(
    data: &'a [u8],
    value: impl FnOnce(&mut Scanner<'a>) -> Option<T>,
) -> Option<T> {
    whole_spanned(data, value).map(|(out, _)| out)
}

/// Bytes a string's end is looked for eight at a time before memchr takes over.
const WORD_SCAN: usize = 64;

/// The end of a plain run: where the first quote or backslash of `rest` is, and whether a
/// byte before it is outside printable ASCII (a control character, or part of a non-ASCII
/// character), which the caller then checks one by one.
///
/// Most strings of an event or a body are short (keys, ids, a token of text). Through memchr
/// and a separate check of their bytes they took about 150 instructions each: the call and
/// vector setup, and a check loop too short to be vectorised. Eight bytes at a time, one test
/// finds the stop bytes and another the unusual ones (the classic has-zero-byte and
/// has-less-than tests on a word: exact for the lowest match, and exact as a yes or no).
/// Past [`WORD_SCAN`] bytes memchr scans the rest, so long strings keep a vectorised pass.
pub(super) fn string_end(rest: &[u8]) -> Option<(usize, bool)> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Bytes below `n` (n <= 0x80), and bytes with the high bit: flags at or above the lowest
    // byte that really is one, so the lowest flag is exact.
    let below = |w: u64, n: u8| w.wrapping_sub(ONES * u64::from(n)) & !w & HIGH;
    let stops =
        |w: u64| below(w ^ (ONES * u64::from(b'"')), 1) | below(w ^ (ONES * u64::from(b'\\')), 1);
    let odd_byte = |c: u8| !(0x20..0x80).contains(&c);
    let head = rest.get(..WORD_SCAN).unwrap_or(rest);
    let mut words = head.chunks_exact(8);
    let (mut at, mut odd) = (0, false);
    for word in &mut words {
        let w = u64::from_le_bytes(word.try_into().ok()?);
        let unusual = below(w, 0x20) | (w & HIGH);
        let hits = stops(w);
        if hits != 0 {
            let first = hits.trailing_zeros();
            // Flags of bytes below the first stop only; flags above a stop do not reach down.
            let before = (1u64 << first) - 1;
            return Some((at + (first / 8) as usize, odd | (unusual & before != 0)));
        }
        odd |= unusual != 0;
        at += 8;
    }
    let tail = words.remainder();
    if let Some(i) = tail.iter().position(|&c| c == b'"' || c == b'\\') {
        let run = tail.get(..i)?;
        return Some((at + i, odd || run.iter().any(|&c| odd_byte(c))));
    }
    let scanned = head.len();
    let rest = rest.get(scanned..)?;
    let end = memchr::memchr2(b'"', b'\\', rest)?;
    let odd =
        odd || tail.iter().any(|&c| odd_byte(c)) || rest.get(..end)?.iter().any(|&c| odd_byte(c));
    Some((scanned + end, odd))
}

/// The length of the inner bytes of the JSON string `value` starts with, up to its closing
/// quote, and how many escapes it holds, for a simple string: any characters but controls,
/// valid UTF-8, and the one-letter escapes (each of which stands for one byte of the decoded
/// string). A `\u`
/// escape is refused: where serde reads the string (a Responses `delta`) a lone surrogate
/// is an error, and telling one apart is not worth it here.
pub(super) fn simple_string_len(value: &[u8]) -> Option<(usize, usize)> {
    let (mut at, mut escapes) = (0, 0);
    loop {
        let rest = value.get(at..)?;
        let (end, odd) = string_end(rest)?;
        let run = rest.get(..end)?;
        if odd && (run.iter().any(|&c| c < 0x20) || std::str::from_utf8(run).is_err()) {
            return None;
        }
        at += end;
        if value.get(at) == Some(&b'"') {
            return Some((at, escapes));
        }
        escapes += 1;
        // A backslash: escapes are ASCII, so no character is cut by one.
        match value.get(at + 1)? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => at += 2,
            _ => return None,
        }
    }
}

/// A strict JSON walker over one event's data (or one body): strings it skips may hold any
/// escape serde takes, text strings and strings the answer does not read the one-letter
/// ones, and the strings it reads ([`Scanner::string`]) none.
pub(super) struct Scanner<'a> {
    data: &'a [u8],
    pos: usize,
    /// Where the walk met text strings ([`Scanner::text_string`]): the last one's inner
    /// bytes, and how many.
    content: (usize, usize),
    contents: u32,
}

impl<'a> Scanner<'a> {
    fn new(data: &'a [u8]) -> Self {
        Self {
            data,
            pos: 0,
            content: (0, 0),
            contents: 0,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.data.get(self.pos).copied()
    }

    /// Whether the next byte is `b`.
    pub(super) fn peek_is(&self, b: u8) -> bool {
        self.peek() == Some(b)
    }

    pub(super) fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    pub(super) fn eat(&mut self, b: u8) -> Option<()> {
        (self.peek()? == b).then(|| self.pos += 1)
    }

    /// A string that is text the answer counts ([`simple_string_len`]'s rule), its place
    /// noted: its decoded length.
    pub(super) fn text_string(&mut self) -> Option<usize> {
        let (start, end, escapes) = self.simple_string()?;
        self.content = (start, end);
        self.contents += 1;
        Some(end - start - escapes)
    }

    /// A string the answer does not read ([`simple_string_len`]'s rule): where its inner
    /// bytes are.
    pub(super) fn unread_string(&mut self) -> Option<(usize, usize)> {
        let (start, end, _) = self.simple_string()?;
        Some((start, end))
    }

    /// A simple string: where its inner bytes are, and how many escapes it holds.
    fn simple_string(&mut self) -> Option<(usize, usize, usize)> {
        self.eat(b'"')?;
        let start = self.pos;
        let (len, escapes) = simple_string_len(self.data.get(start..)?)?;
        self.pos = start + len;
        self.eat(b'"')?;
        Some((start, start + len, escapes))
    }

    /// A string without escapes; its raw bytes.
    pub(super) fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let body = self.plain_run()?;
        self.eat(b'"')?;
        Some(body)
    }

    /// The bytes up to the next quote or backslash, which must not be control characters and
    /// must be UTF-8. [`string_end`] finds the end and flags a run with any byte outside
    /// printable ASCII; only such a run is checked byte by byte.
    fn plain_run(&mut self) -> Option<&'a [u8]> {
        let rest = self.data.get(self.pos..)?;
        let (end, odd) = string_end(rest)?;
        let run = rest.get(..end)?;
        if odd && (run.iter().any(|&c| c < 0x20) || std::str::from_utf8(run).is_err()) {
            return None;
        }
        self.pos += end;
        Some(run)
    }

    /// A string that is only skipped: escapes are allowed and checked as serde checks them
    /// when it ignores a string (a known escape letter, or `u` and four hex digits).
    fn skip_string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            self.plain_run()?;
            if self.eat(b'"').is_some() {
                return Some(());
            }
            self.eat(b'\\')?;
            match self.peek()? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.pos += 1,
                b'u' => {
                    let hex = self.data.get(self.pos + 1..self.pos + 5)?;
                    hex.iter().all(u8::is_ascii_hexdigit).then_some(())?;
                    self.pos += 5;
                }
                _ => return None,
            }
        }
    }

    /// A non-negative integer serde reads into a `u64`, or `null`. Anything that serde would
    /// refuse or that might not fit (a sign, a fraction, an exponent, a leading zero, more
    /// than 19 digits) defers.
    pub(super) fn opt_u64(&mut self) -> Option<Option<u64>> {
        if self.null() {
            return Some(None);
        }
        let start = self.pos;
        let len = self.digits();
        let digits = self.data.get(start..self.pos)?;
        if len == 0 || len > 19 || (len > 1 && digits.first() == Some(&b'0')) {
            return None;
        }
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let value = digits.iter().try_fold(0u64, |v, &d| {
            v.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        })?;
        Some(Some(value))
    }

    /// Walks an object, handing each key to `field` positioned at its value.
    pub(super) fn object(
        &mut self,
        mut field: impl FnMut(&mut Self, &[u8]) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            field(self, key)?;
            self.ws();
            match self.peek()? {
                b',' => {
                    self.pos += 1;
                    self.ws();
                }
                b'}' => {
                    self.pos += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Walks an array, handing each element to `element` positioned at it.
    pub(super) fn array(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        self.ws();
        if self.eat(b']').is_some() {
            return Some(());
        }
        loop {
            element(self)?;
            self.ws();
            match self.peek()? {
                b',' => {
                    self.pos += 1;
                    self.ws();
                }
                b']' => {
                    self.pos += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    pub(super) fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.pos.checked_add(word.len())?;
        (self.data.get(self.pos..end)? == word).then(|| self.pos = end)
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// A number in JSON's grammar.
    pub(super) fn number(&mut self) -> Option<()> {
        if self.peek()? == b'-' {
            self.pos += 1;
        }
        match self.peek()? {
            b'0' => self.pos += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            (self.digits() > 0).then_some(())?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            (self.digits() > 0).then_some(())?;
        }
        Some(())
    }

    /// Skips any value, validating it.
    pub(super) fn skip(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.skip_string(),
            b'{' => self.object(|s, _| s.skip(depth + 1)),
            b'[' => self.array(|s| s.skip(depth + 1)),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number(),
        }
    }

    pub(super) fn null(&mut self) -> bool {
        self.literal(b"null").is_some()
    }

    /// A string or `null` (serde's `Option<Cow<str>>`).
    pub(super) fn opt_string(&mut self) -> Option<Option<&'a [u8]>> {
        if self.null() {
            return Some(None);
        }
        self.string().map(Some)
    }

    /// The text size serde's `Shape` gives a string or `null`; other values defer (serde
    /// parses numbers there, which may overflow). A string is noted as text.
    pub(super) fn text_len(&mut self) -> Option<usize> {
        if self.null() {
            return Some(0);
        }
        self.text_string()
    }

    /// The chunk object: the text bytes, finish reason and usage of its choices.
    fn top(&mut self) -> Option<ChatChunk<'a>> {
        let mut chunk = ChatChunk {
            text: 0,
            finish_reason: None,
            usage: None,
        };
        let mut seen = Seen::default();
        self.object(|s, key| match key {
            b"choices" => {
                seen.first(0)?;
                if s.null() {
                    return Some(());
                }
                s.array(|s| {
                    let (text, finish_reason) = s.choice()?;
                    chunk.text += text;
                    chunk.finish_reason = finish_reason.or(chunk.finish_reason);
                    Some(())
                })
            }
            b"usage" => {
                seen.first(1)?;
                if !s.null() {
                    chunk.usage = Some(usage(s)?);
                }
                Some(())
            }
            b"error" => seen.null(2, s),
            _ => s.skip(1),
        })?;
        Some(chunk)
    }

    /// One choice: a `delta` and a `finish_reason` (a plain string or null); `text` only
    /// when null.
    fn choice(&mut self) -> Option<(usize, Option<&'a [u8]>)> {
        let (mut text, mut finish_reason, mut seen) = (0, None, Seen::default());
        self.object(|s, key| match key {
            b"delta" => {
                seen.first(0)?;
                if s.null() {
                    return Some(());
                }
                text = s.delta()?;
                Some(())
            }
            b"finish_reason" => {
                seen.first(1)?;
                finish_reason = s.opt_string()?;
                Some(())
            }
            b"text" => seen.null(2, s),
            _ => s.skip(2),
        })?;
        Some((text, finish_reason))
    }

    /// A delta: `content` as a string or null; every other field the full parse reads only
    /// when null.
    fn delta(&mut self) -> Option<usize> {
        let (mut text, mut seen) = (0, Seen::default());
        self.object(|s, key| match key {
            b"content" => {
                seen.first(0)?;
                if s.null() {
                    return Some(());
                }
                text = s.text_string()?;
                Some(())
            }
            b"refusal" => seen.null(1, s),
            b"reasoning_content" => seen.null(2, s),
            b"reasoning" => seen.null(3, s),
            b"reasoning_details" => seen.null(4, s),
            b"tool_calls" => seen.null(5, s),
            b"function_call" => seen.null(6, s),
            _ => s.skip(3),
        })?;
        Some(text)
    }
}

/// The declared fields already met in one object: serde rejects a duplicate.
#[derive(Default)]
pub(super) struct Seen(u8);

impl Seen {
    pub(super) fn first(&mut self, field: u8) -> Option<()> {
        let bit = 1 << field;
        (self.0 & bit == 0).then(|| self.0 |= bit)
    }

    /// A declared field the fast path accepts only as `null`.
    pub(super) fn null(&mut self, field: u8, s: &mut Scanner<'_>) -> Option<()> {
        self.first(field)?;
        s.null().then_some(())
    }
}

#[cfg(test)]
mod string_end_tests {
    use super::string_end;

    /// A plain search: the first stop byte, and whether a byte before it is unusual.
    fn plainly(bytes: &[u8]) -> Option<(usize, bool)> {
        let end = bytes.iter().position(|&c| c == b'"' || c == b'\\')?;
        let odd = bytes[..end].iter().any(|&c| !(0x20..0x80).contains(&c));
        Some((end, odd))
    }

    /// Every position of a quote or a backslash, with an unusual byte before, at or after it,
    /// in strings either side of the word scan's reach, against a plain search.
    #[test]
    fn string_end_agrees_with_a_plain_search() {
        let fill = b"a!~ #[]\x7f";
        for len in 0usize..150 {
            for stop in [b'"', b'\\', b'a'] {
                for at in 0..=len {
                    for odd in [
                        None,
                        Some(0x01u8),
                        Some(0x1f),
                        Some(0x80),
                        Some(0xc3),
                        Some(0xff),
                    ] {
                        for odd_at in [0, at.saturating_sub(1), at + 1, len.saturating_sub(1)] {
                            let mut bytes: Vec<u8> =
                                (0..len).map(|i| fill[i % fill.len()]).collect();
                            if let (Some(b), Some(slot)) = (odd, bytes.get_mut(odd_at)) {
                                *slot = b;
                            }
                            if let Some(slot) = bytes.get_mut(at) {
                                *slot = stop;
                            }
                            assert_eq!(string_end(&bytes), plainly(&bytes), "{bytes:?}");
                        }
                    }
                }
            }
        }
    }
}
