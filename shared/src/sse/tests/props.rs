//! Property tests: chunk-split invariance against a model, and robustness on arbitrary bytes.

use proptest::prelude::*;

use super::{Item, owned, parse_chunks};
use crate::sse::{Format, SseParser, inspect_item};

#[derive(Debug, Clone)]
struct ModelEvent {
    comment: Option<String>,
    event: Option<String>,
    id: Option<String>,
    data: Vec<String>,
}

fn model_event() -> impl Strategy<Value = ModelEvent> {
    let text = "[^\r\n]{0,12}";
    (
        proptest::option::of(text),
        proptest::option::of("[a-z_.]{1,16}"),
        proptest::option::of("[^\r\n\0]{0,6}"),
        prop::collection::vec(text, 0..4),
    )
        .prop_map(|(comment, event, id, data)| ModelEvent {
            comment,
            event,
            id,
            data,
        })
}

/// Serialises `events` with one line ending throughout, and the items a parser must yield.
fn render(events: &[ModelEvent], eol: &str, bom: bool) -> (Vec<u8>, Vec<Item>) {
    let mut out = String::new();
    let mut expected = Vec::new();
    if bom {
        out.push('\u{FEFF}');
    }
    for e in events {
        if let Some(c) = &e.comment {
            out += &format!(": {c}{eol}");
            expected.push(Item::Comment(c.clone().into_bytes()));
        }
        if let Some(name) = &e.event {
            out += &format!("event: {name}{eol}");
        }
        if let Some(id) = &e.id {
            out += &format!("id: {id}{eol}");
        }
        for line in &e.data {
            out += &format!("data: {line}{eol}");
        }
        out += eol;
        if !e.data.is_empty() {
            expected.push(Item::Event {
                event: e.event.clone().map(String::into_bytes),
                data: e.data.join("\n").into_bytes(),
                id: e.id.clone().map(String::into_bytes),
                retry: None,
            });
        }
    }
    (out.into_bytes(), expected)
}

/// Splits `bytes` at the given cut points (in any order, repeats allowed: empty chunks).
fn split<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    let mut chunks = Vec::new();
    let mut start = 0;
    for cut in cuts {
        chunks.push(&bytes[start..cut]);
        start = cut;
    }
    chunks.push(&bytes[start..]);
    chunks
}

/// Bytes rich in SSE syntax, plus anything else.
fn sse_ish_bytes() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        3 => any::<u8>().prop_map(|b| vec![b]),
        2 => prop::sample::select(vec![
            &b"\n"[..], b"\r", b"\r\n", b":", b" ", b"data", b"event", b"id", b"retry", b"7",
            b"\xEF\xBB\xBF", b"\xEF", b"\0", b"[DONE]", b"{\"type\":\"ping\"}",
        ])
        .prop_map(<[u8]>::to_vec),
    ];
    prop::collection::vec(token, 0..300).prop_map(|t| t.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn valid_streams_parse_identically_however_split(
        events in prop::collection::vec(model_event(), 0..8),
        eol in prop::sample::select(vec!["\n", "\r\n", "\r"]),
        bom in any::<bool>(),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let (bytes, expected) = render(&events, eol, bom);
        prop_assert_eq!(parse_chunks([&bytes[..]], 1 << 20), expected.clone());
        prop_assert_eq!(parse_chunks(split(&bytes, &cuts), 1 << 20), expected.clone());
        let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
        prop_assert_eq!(parse_chunks(bytewise, 1 << 20), expected);
    }

    #[test]
    fn arbitrary_bytes_never_panic_split_invariant_and_bounded(
        bytes in sse_ish_bytes(),
        limit in 0usize..96,
        cuts in prop::collection::vec(any::<usize>(), 0..16),
    ) {
        let whole = parse_chunks([&bytes[..]], limit);
        let mut parser = SseParser::with_limit(limit);
        let mut items = Vec::new();
        for chunk in split(&bytes, &cuts) {
            parser.feed(chunk, &mut |item| {
                for format in [Format::OpenAiChat, Format::OpenAiResponses, Format::Anthropic] {
                    let _ = inspect_item(format, &item);
                }
                items.push(owned(item));
            });
            prop_assert!(parser.buffered_capacity() <= 4 * limit.max(1));
        }
        parser.finish();
        prop_assert_eq!(items, whole);
    }
}
