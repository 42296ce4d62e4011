//! The event before, remembered, so that an event equal to it but for its text is classified
//! by comparing bytes instead of walking it again.
//!
//! Within one stream a provider sends the same event over and over with only the text
//! changed: a chat chunk keeps its id, `created`, model, fingerprint and field order, an
//! Anthropic `content_block_delta` its index and delta type. The pre-scans walk each event
//! whole (about 3,000 instructions for an ordinary chat chunk); comparing an event with the
//! one before costs a few hundred. It is exact: the previous event had the same name, was
//! walked and answered, and held exactly one text string; the new one has the same bytes
//! before and after that string, with a string in between that has no control byte, is
//! valid UTF-8 and holds no escape but the one-letter ones (each one byte of the decoded
//! text, which is what the answer counts). The walk over the new event would meet the same
//! tokens and decide the same, with only the text's length changed. Anything else is walked
//! as before.
//!
//! OpenAI adds an `obfuscation` string after the choices of every chat chunk (random padding
//! that hides the text's length; on unless the request sets
//! `stream_options.include_obfuscation: false`), so that no two chunks are alike after the
//! text. When the remembered event's bytes after its text hold that key, its value may differ
//! too, under the same rule as the text: a plain string, the same bytes around it. No walk
//! reads that field's value.
//!
//! A Responses delta also counts its events: `sequence_number` rises by one each time, before
//! the text. When the remembered event's bytes before its text hold that key with an integer,
//! the integer may differ too (any JSON integer: digits, no leading zero); no walk reads it.
//!
//! Reasoning and tool-call deltas (Anthropic `thinking_delta` and `input_json_delta`, the
//! Responses reasoning and `…_call…` deltas) are answered by their kind alone, whatever their
//! string holds. Coding agents stream thousands of them, and their strings are full of
//! escapes (a tool's JSON input is all `\"`), which the text rule sends back to the walk. For
//! these the string may hold any characters but controls and any one-letter escape
//! ([`simple_string_len`]; a `\u` escape is walked again), and the answer is the remembered one.

use super::prescan::{simple_string_len, string_end, text_info};
use super::{EventInfo, EventKind};

/// The key of OpenAI's per-chunk padding, up to its value's opening quote.
const OBFUSCATION_KEY: &[u8] = b"\"obfuscation\":\"";
/// The key of a Responses event's counter, up to its value.
const SEQUENCE_KEY: &[u8] = b"\"sequence_number\":";

/// What a pre-scan answers for an event, with where its one variable string is, if it has one.
pub(super) type Spanned = Option<(EventInfo, Option<Variable>)>;

/// The one string of an event that the next event may hold differently (its inner bytes in
/// the event's data), and what the answer makes of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Variable {
    /// Text: the answer follows from its length.
    Text(usize, usize),
    /// A string the answer does not read (reasoning text, a tool call's input): any JSON
    /// string there gives the same answer.
    Unread(usize, usize),
}

/// Events with a text string walked in a row, none answered from the one before, after which
/// a stream is taken not to repeat (OpenAI adds a per-chunk random `obfuscation` field, for
/// one) and its events are no longer copied.
const MAX_MISSES: u8 = 8;

/// A part of the remembered event that the next one may hold differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hole {
    /// A Responses `sequence_number`: any JSON integer.
    Counter,
    /// The text: a plain string, whose length is the answer.
    Text,
    /// A string the answer does not read: any string serde takes, escapes included (but for
    /// `\u`, which serde refuses as a lone surrogate where it reads the string). The answer
    /// is this kind alone.
    Unread(EventKind),
    /// OpenAI's `obfuscation` padding: a plain string.
    Padding,
}

/// The last event a pre-scan answered that has one text string.
#[derive(Debug, Default, Clone)]
pub struct Repeat {
    name: Option<Vec<u8>>,
    data: Vec<u8>,
    /// The parts of `data` that may differ, in order (a string's inner bytes, an integer's
    /// digits): the counter before the text, the text, the padding after it.
    holes: [Option<(usize, usize, Hole)>; 3],
    /// Events with a text string walked since the last answer from the event before.
    misses: u8,
}

impl Repeat {
    /// The classification of an event's (trimmed) data, or `None` when the full parse must
    /// decide: what `walk` answers, taken from the event before when only the text differs.
    pub(super) fn answer(
        &mut self,
        name: Option<&[u8]>,
        data: &[u8],
        walk: impl FnOnce(Option<&[u8]>, &[u8]) -> Spanned,
    ) -> Option<EventInfo> {
        if let Some(info) = self.same_but_text(name, data) {
            self.misses = 0;
            return Some(info);
        }
        let (info, span) = walk(name, data)?;
        self.data.clear();
        let variable = span.and_then(|variable| match variable {
            Variable::Text(start, end) => Some((start, end, Hole::Text)),
            // Remembered only when the answer is its kind alone (an idle stream keeps one
            // byte for it, not a whole answer).
            Variable::Unread(start, end) => {
                (info == EventInfo::of(info.kind)).then_some((start, end, Hole::Unread(info.kind)))
            }
        });
        if let Some((start, end, hole)) = variable
            && self.misses < MAX_MISSES
        {
            self.misses += 1;
            // Exactly the event's size: an idle stream keeps it for as long as it lasts.
            self.data.reserve_exact(data.len());
            self.data.extend_from_slice(data);
            self.holes = [
                counter_before(data, start).map(|(from, to)| (from, to, Hole::Counter)),
                Some((start, end, hole)),
                padding_after(data, end).map(|(from, to)| (from, to, Hole::Padding)),
            ];
            self.name = name.map(<[u8]>::to_vec);
        }
        Some(info)
    }

    /// The answer for `data` when it is the remembered event with other values in its holes:
    /// the bytes between the holes equal, each hole a value of its kind.
    fn same_but_text(&self, name: Option<&[u8]>, data: &[u8]) -> Option<EventInfo> {
        if self.data.is_empty() || self.name.as_deref() != name {
            return None;
        }
        // Where the next fixed run starts, in the remembered event and in the new one.
        let (mut old, mut new, mut text, mut unread) = (0, 0, None, None);
        for &(start, end, hole) in self.holes.iter().flatten() {
            let fixed = self.data.get(old..start)?;
            let value = data.get(new..)?.strip_prefix(fixed)?;
            let len = match hole {
                Hole::Counter => integer_len(value)?,
                Hole::Text => {
                    // Each one-letter escape is one byte of the decoded text.
                    let (len, escapes) = simple_string_len(value)?;
                    text = Some(len - escapes);
                    len
                }
                Hole::Padding => {
                    // The stop byte must be the closing quote, which the next fixed run (the
                    // remembered bytes after the string) starts with.
                    let (len, odd) = string_end(value)?;
                    if odd {
                        return None;
                    }
                    len
                }
                Hole::Unread(kind) => {
                    unread = Some(kind);
                    simple_string_len(value)?.0
                }
            };
            new += fixed.len() + len;
            old = end;
        }
        if data.get(new..)? != self.data.get(old..)? {
            return None;
        }
        // The one variable string is the text, or a string the answer does not read.
        match (text, unread) {
            (Some(len), _) => Some(text_info(len)),
            (None, kind) => kind.map(EventInfo::of),
        }
    }

    #[cfg(test)]
    fn has(&self, hole: Hole) -> bool {
        self.holes.iter().flatten().any(|&(_, _, h)| h == hole)
    }
}

/// Where the integer of a `sequence_number` key before `to` is in `data`.
fn counter_before(data: &[u8], to: usize) -> Option<(usize, usize)> {
    let head = data.get(..to)?;
    let start = memchr::memmem::find(head, SEQUENCE_KEY)? + SEQUENCE_KEY.len();
    let len = integer_len(head.get(start..)?)?;
    Some((start, start + len))
}

/// The length of the JSON integer `bytes` start with (digits, no leading zero), or `None`.
fn integer_len(bytes: &[u8]) -> Option<usize> {
    let len = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    match bytes.first() {
        _ if len == 0 => None,
        Some(b'0') if len > 1 => None,
        _ => Some(len),
    }
}

/// Where the value of an `obfuscation` key after `from` is in `data` (its inner bytes), when
/// it is a plain string.
fn padding_after(data: &[u8], from: usize) -> Option<(usize, usize)> {
    let after = data.get(from..)?;
    let key = memchr::memmem::rfind(after, OBFUSCATION_KEY)?;
    let start = from + key + OBFUSCATION_KEY.len();
    let (len, odd) = string_end(data.get(start..)?)?;
    (!odd).then_some((start, start + len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::EventKind;
    use crate::sse::inspect::prescan::chat_spanned;

    fn chunk(id: &str, text: &str) -> Vec<u8> {
        format!(
            r#"{{"id":"{id}","object":"chat.completion.chunk","choices":[{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":null}}]}}"#
        )
        .into_bytes()
    }

    #[test]
    fn only_a_chunk_equal_but_for_its_text_is_answered_from_the_one_before() {
        let chat = |_: Option<&[u8]>, data: &[u8]| chat_spanned(data);
        let mut memo = Repeat::default();
        assert!(
            memo.same_but_text(None, &chunk("a", "Hi")).is_none(),
            "nothing yet"
        );
        let first = memo.answer(None, &chunk("a", "Hi"), chat).unwrap();
        assert_eq!(
            (first.kind, first.useful_text_bytes),
            (EventKind::Content, 2)
        );
        let again = memo
            .same_but_text(None, &chunk("a", "Hello there"))
            .unwrap();
        assert_eq!(
            (again.kind, again.useful_text_bytes),
            (EventKind::Content, 11)
        );
        let empty = memo.same_but_text(None, &chunk("a", "")).unwrap();
        // The same data under another event name: walked again.
        assert!(
            memo.same_but_text(Some(b"message"), &chunk("a", "Hi"))
                .is_none()
        );
        assert_eq!(empty.kind, EventKind::Other);
        // One-letter escapes count a byte each, a character its UTF-8 bytes.
        for (text, bytes) in [("x\\ny", 3), (r#"\"q\" \\ \/"#, 7), ("é", 2)] {
            let got = memo.same_but_text(None, &chunk("a", text)).unwrap();
            assert_eq!(got, text_info(bytes), "{text}");
        }
        // Another id, a \u escape, an unknown escape, a control byte, a cut tail: walked again.
        for other in [
            chunk("b", "Hi"),
            chunk("a", "\\u00e9"),
            chunk("a", "\\x"),
            chunk("a", "\u{1}"),
            chunk("a", "Hi")[..40].to_vec(),
        ] {
            assert!(
                memo.same_but_text(None, &other).is_none(),
                "{}",
                String::from_utf8_lossy(&other)
            );
        }
        // Two content strings: nothing to answer from.
        let two = br#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}"#;
        assert_eq!(memo.answer(None, two, chat).unwrap().useful_text_bytes, 2);
        assert!(memo.same_but_text(None, two).is_none());
    }

    /// A chat chunk as OpenAI sends it by default, with its random padding after the choices.
    fn padded(text: &str, padding: &str) -> Vec<u8> {
        format!(
            r#"{{"id":"chatcmpl-D0q8","object":"chat.completion.chunk","created":1769092764,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_29330a9688","choices":[{{"index":0,"delta":{{"content":"{text}"}},"logprobs":null,"finish_reason":null}}],"obfuscation":"{padding}"}}"#
        )
        .into_bytes()
    }

    #[test]
    fn openais_padding_may_differ_like_the_text() {
        let chat = |_: Option<&[u8]>, data: &[u8]| chat_spanned(data);
        let mut memo = Repeat::default();
        memo.answer(None, &padded("Hello", "ZGF"), chat).unwrap();
        assert!(memo.has(Hole::Padding));
        let next = memo.same_but_text(None, &padded(",", "lRK2aBv")).unwrap();
        assert_eq!(next.useful_text_bytes, 1);
        let same_length = memo.same_but_text(None, &padded(" World", "")).unwrap();
        assert_eq!(same_length.useful_text_bytes, 6);
        // An escape or an unusual byte in the padding, another key, a cut end: walked again.
        for other in [
            padded("Hi", "a\\b"),
            padded("Hi", "é"),
            padded("Hi", "\u{1}"),
            padded("Hi", "ab\"}}"),
            padded("Hi", "ZGF")[..padded("Hi", "ZGF").len() - 1].to_vec(),
            String::from_utf8(padded("Hi", "ZGF"))
                .unwrap()
                .replace("obfuscation", "obfuscatioN")
                .into_bytes(),
        ] {
            assert!(
                memo.same_but_text(None, &other).is_none(),
                "{}",
                String::from_utf8_lossy(&other)
            );
        }
        // An event without padding is compared whole, as before.
        memo.answer(None, &chunk("a", "Hi"), chat).unwrap();
        assert!(!memo.has(Hole::Padding));
        assert!(memo.same_but_text(None, &chunk("a", "Hey")).is_some());
    }

    /// A Responses text delta as OpenAI sends it, with its counter and padding.
    fn delta(seq: &str, text: &str, padding: &str) -> Vec<u8> {
        format!(
            r#"{{"type":"response.output_text.delta","sequence_number":{seq},"item_id":"msg_0508041cc126e1bb","output_index":1,"content_index":0,"delta":"{text}","logprobs":[],"obfuscation":"{padding}"}}"#
        )
        .into_bytes()
    }

    #[test]
    fn a_responses_counter_may_differ_like_the_text() {
        let responses = crate::sse::inspect::prescan_events::responses_spanned;
        let name = Some(&b"response.output_text.delta"[..]);
        let mut memo = Repeat::default();
        memo.answer(name, &delta("4", "Hello", "EMAj0"), responses)
            .unwrap();
        assert!(memo.has(Hole::Counter) && memo.has(Hole::Padding));
        for (seq, text) in [("5", ","), ("10", " World"), ("123456", ""), ("0", "!")] {
            let got = memo
                .same_but_text(name, &delta(seq, text, "pvmKQ7xIR"))
                .unwrap();
            assert_eq!(got, text_info(text.len()), "{seq} {text}");
        }
        // Not an integer JSON allows, or another key: walked again.
        for seq in ["05", "-5", "5.0", "5e2", "\"5\"", ""] {
            assert!(
                memo.same_but_text(name, &delta(seq, "Hi", "ZGF")).is_none(),
                "{seq}"
            );
        }
        let renamed = String::from_utf8(delta("5", "Hi", "ZGF"))
            .unwrap()
            .replace("sequence_number", "sequence_numbeR");
        assert!(memo.same_but_text(name, renamed.as_bytes()).is_none());
        // Another event name with the same data: walked again.
        assert!(
            memo.same_but_text(Some(b"response.refusal.delta"), &delta("5", "Hi", "Z"))
                .is_none()
        );
    }

    #[test]
    fn a_string_the_answer_does_not_read_may_hold_escapes() {
        let responses = crate::sse::inspect::prescan_events::responses_spanned;
        let reasoning = Some(&b"response.reasoning_summary_text.delta"[..]);
        let mut memo = Repeat::default();
        let first = memo
            .answer(reasoning, &delta("4", "Hi", "Z"), responses)
            .unwrap();
        assert_eq!(first.kind, EventKind::Reasoning);
        assert!(memo.has(Hole::Unread(EventKind::Reasoning)) && memo.has(Hole::Counter));
        // Any text serde reads the same way: escapes, quotes, non-ASCII, none at all.
        for text in [r#"line\nnext \"quoted\" \\ \/ \t"#, "é—", "", r#"\b\f\r"#] {
            let got = memo.same_but_text(reasoning, &delta("5", text, "pvm"));
            assert_eq!(got, Some(EventInfo::of(EventKind::Reasoning)), "{text}");
        }
        // A \u escape (serde refuses a lone surrogate), an unknown escape, a control byte, a
        // cut string: walked again.
        for text in [r#"\u00e9"#, r#"\ud800"#, r#"\x"#, "\u{1}", r#"ends\"#] {
            assert!(
                memo.same_but_text(reasoning, &delta("5", text, "pvm"))
                    .is_none(),
                "{text}"
            );
        }
        // The same data under a text delta's name is text, walked again.
        let text = Some(&b"response.output_text.delta"[..]);
        assert!(memo.same_but_text(text, &delta("5", "Hi", "Z")).is_none());
        // An Anthropic thinking delta and a tool call's input.
        let anthropic = crate::sse::inspect::prescan_events::anthropic_spanned;
        let block = |kind: &str, field: &str, text: &str| {
            format!(
                r#"{{"type":"content_block_delta","index":1,"delta":{{"type":"{kind}","{field}":"{text}"}}}}"#
            )
            .into_bytes()
        };
        let name = Some(&b"content_block_delta"[..]);
        for (kind, field, answer) in [
            ("thinking_delta", "thinking", EventKind::Reasoning),
            ("input_json_delta", "partial_json", EventKind::ToolCall),
        ] {
            let mut memo = Repeat::default();
            assert_eq!(
                memo.answer(name, &block(kind, field, "Let"), anthropic)
                    .unwrap()
                    .kind,
                answer
            );
            let next = block(kind, field, r#"{\"path\": \"src/main.rs\",\n"#);
            assert_eq!(
                memo.same_but_text(name, &next),
                Some(EventInfo::of(answer)),
                "{kind}"
            );
            assert!(
                memo.same_but_text(name, &block(kind, field, "\u{1}"))
                    .is_none()
            );
        }
    }

    #[test]
    fn a_stream_that_does_not_repeat_stops_being_copied() {
        let chat = |_: Option<&[u8]>, data: &[u8]| chat_spanned(data);
        // A field after the text that changes with every chunk and is not OpenAI's padding.
        let noisy = |i: u32| {
            format!(r#"{{"choices":[{{"delta":{{"content":"Hi"}}}}],"sequence":"{i}"}}"#)
                .into_bytes()
        };
        let mut memo = Repeat::default();
        for i in 0..u32::from(MAX_MISSES) {
            assert_eq!(
                memo.answer(None, &noisy(i), chat)
                    .unwrap()
                    .useful_text_bytes,
                2
            );
            assert!(!memo.data.is_empty(), "still copied after {i} misses");
        }
        assert_eq!(
            memo.answer(None, &noisy(99), chat)
                .unwrap()
                .useful_text_bytes,
            2
        );
        assert!(memo.data.is_empty(), "no longer copied");
        // A repeating stream keeps its copy: each answer from the event before resets the count.
        let mut memo = Repeat::default();
        for _ in 0..3 * MAX_MISSES {
            memo.answer(None, &chunk("a", "Hi"), chat);
        }
        assert!(memo.same_but_text(None, &chunk("a", "Hey")).is_some());
    }
}
