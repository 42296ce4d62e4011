//! The chat pre-scan must agree with the full serde parse on every event it answers, and
//! must answer the plain text chunks it exists for.

use proptest::prelude::*;

use super::fixtures;
use super::json_gen::{counter, object, scalar, usage_key};
use crate::sse::inspect::prescan;
use crate::sse::{EventInfo, EventKind, Format, SseItem, SseParser, formats, inspect};

/// Checks one event both ways; returns whether the fast path answered.
fn agrees(name: Option<&[u8]>, data: &[u8]) -> Result<bool, TestCaseError> {
    let trimmed = data.trim_ascii();
    // `inspect` as it was before the pre-scan: ping names first, then the serde parse.
    let full = match name {
        Some(b"ping" | b"keepalive" | b"keep-alive" | b"heartbeat") => {
            EventInfo::of(EventKind::Ping)
        }
        _ => formats::chat(name, trimmed),
    };
    let event = crate::sse::SseEvent {
        event: name,
        data,
        id: None,
        retry: None,
    };
    prop_assert_eq!(
        &inspect(Format::OpenAiChat, &event),
        &full,
        "data: {:?}",
        trimmed
    );
    // `inspect` consults the pre-scan for every name but `error` (and the ping names above).
    let fast = prescan::chat(trimmed).filter(|_| name != Some(b"error"));
    if let Some(fast) = &fast {
        prop_assert_eq!(
            fast,
            &formats::chat(name, trimmed),
            "data: {:?}",
            String::from_utf8_lossy(trimmed)
        );
    }
    Ok(fast.is_some())
}

#[test]
fn captured_events_agree_and_plain_chunks_take_the_fast_path() {
    let (mut events, mut fast) = (0, 0);
    for stream in fixtures::ALL {
        let mut parser = SseParser::new();
        let mut seen = Vec::new();
        parser.feed(stream.as_bytes(), &mut |item| {
            if let SseItem::Event(e) = item {
                seen.push((e.event.map(<[u8]>::to_vec), e.data.to_vec()));
            }
        });
        // The stream's inspector, which answers repeats from the event before, agrees too.
        let mut inspector = crate::sse::StreamInspector::new(Format::OpenAiChat);
        for (name, data) in &seen {
            events += 1;
            fast += usize::from(agrees(name.as_deref(), data).unwrap_or_else(|e| panic!("{e}")));
            let event = crate::sse::SseEvent {
                event: name.as_deref(),
                data,
                id: None,
                retry: None,
            };
            let alone = inspect(Format::OpenAiChat, &event);
            assert_eq!(inspector.inspect_item(&SseItem::Event(event)), alone);
        }
    }
    assert!(events > 20, "fixtures parsed: {events}");
    assert!(fast > 3, "fast path taken {fast} of {events} times");
}

#[test]
fn plain_text_chunk_is_content_with_exact_bytes() {
    let data = r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"héllo"},"logprobs":null,"finish_reason":null}],"usage":null}"#.as_bytes();
    let info = prescan::chat(data).expect("a plain chunk takes the fast path");
    assert_eq!(info.kind, EventKind::Content);
    assert_eq!(info.useful_text_bytes, 6);
    assert_eq!(info, formats::chat(None, data));
}

/// The chunks that close a stream (the finish reason, then usage, as OpenAI sends them with
/// `stream_options.include_usage`) take the fast path, with the full parse's answer.
#[test]
fn finish_and_usage_chunks_take_the_fast_path() {
    let finish = br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}"#;
    let info = prescan::chat(finish).expect("a finish chunk takes the fast path");
    assert_eq!(info.finish_reason, Some(crate::sse::FinishReason::Stop));
    assert_eq!(info.kind, EventKind::Other);
    assert_eq!(info, formats::chat(None, finish));
    let last = br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"length"},{"index":1,"delta":{},"finish_reason":null}]}"#;
    let info = prescan::chat(last).expect("text with a finish reason takes the fast path");
    assert_eq!(
        (info.kind, info.finish_reason.clone()),
        (EventKind::Content, Some(crate::sse::FinishReason::Length))
    );
    assert_eq!(info, formats::chat(None, last));
    // Of several choices' reasons the full parse keeps the last one that is not null.
    let two = br#"{"choices":[{"delta":{},"finish_reason":"stop"},{"delta":{},"finish_reason":"length"},{"delta":{},"finish_reason":null}]}"#;
    let info = prescan::chat(two).expect("two finish reasons take the fast path");
    assert_eq!(info.finish_reason, Some(crate::sse::FinishReason::Length));
    assert_eq!(info, formats::chat(None, two));
    let mut closing = 0;
    for stream in fixtures::ALL {
        let mut parser = SseParser::new();
        parser.feed(stream.as_bytes(), &mut |item| {
            let SseItem::Event(e) = item else { return };
            let full = formats::chat(e.event, e.data.trim_ascii());
            if e.event.is_none() && (full.usage.is_some() || full.finish_reason.is_some()) {
                closing += 1;
                assert_eq!(
                    prescan::chat(e.data.trim_ascii()).as_ref(),
                    Some(&full),
                    "{}",
                    String::from_utf8_lossy(e.data)
                );
            }
        });
    }
    assert!(closing >= 3, "closing chunks in the fixtures: {closing}");
    // Counters the full parse refuses or reads differently still take it.
    for usage in ["-1", "1.0", "\"3\"", "18446744073709551616"] {
        let data = format!(r#"{{"choices":[],"usage":{{"prompt_tokens":{usage}}}}}"#);
        assert_eq!(prescan::chat(data.as_bytes()), None, "{data}");
    }
    assert_eq!(
        prescan::chat(br#"{"choices":[{"delta":{},"finish_reason":"st\u006fp"}]}"#),
        None
    );
}

/// A JSON value as text, often odd: numbers serde rejects, raw control characters, escapes.
fn key() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "id",
        "model",
        "index",
        "role",
        "content",
        "refusal",
        "reasoning",
        "reasoning_content",
        "reasoning_details",
        "tool_calls",
        "function_call",
        "finish_reason",
        "text",
        "delta",
        "choices",
        "usage",
        "error",
        "logprobs",
    ])
}

/// A finish reason as providers send it, or one the full parse refuses or reads differently.
fn finish_reason() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "\"stop\"",
            "\"length\"",
            "\"tool_calls\"",
            "\"content_filter\"",
            "\"end_turn\"",
            "\"\"",
            "\"st\\u006fp\"",
            "null",
            "1",
            "[]",
        ])
        .prop_map(str::to_owned),
        scalar(),
    ]
}

prop_compose! {
    fn chunk()(
        delta in prop::collection::vec((key(), scalar()), 0..4),
        content in proptest::option::of(scalar()),
        choice in prop::collection::vec((key(), scalar()), 0..3),
        finish in proptest::option::of(finish_reason()),
        top in prop::collection::vec((key(), scalar()), 0..3),
        usage in proptest::option::of(prop::collection::vec((usage_key(), counter()), 0..4)),
        n in 0usize..3,
        ws in prop::sample::select(vec!["", " ", "\n", "\u{c}"]),
    ) -> String {
        let mut delta = delta;
        if let Some(c) = content {
            delta.insert(0, ("content", c));
        }
        let mut choice = choice;
        choice.push(("delta", object(delta, ws)));
        if let Some(finish) = finish {
            choice.push(("finish_reason", finish));
        }
        let choice = object(choice, ws);
        let mut top = top;
        top.push(("choices", format!("[{}]", vec![choice; n].join(","))));
        if let Some(fields) = usage {
            top.push(("usage", object(fields, ws)));
        }
        object(top, ws)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn generated_chunks_agree(
        data in chunk(),
        cut in proptest::option::of(0usize..400),
        flip in proptest::option::of((0usize..400, any::<u8>())),
        named in proptest::option::of(prop::sample::select(vec!["error", "message", "ping"])),
    ) {
        let mut bytes = data.into_bytes();
        if let Some((at, b)) = flip {
            let at = at % (bytes.len() + 1);
            bytes.insert(at, b);
        }
        if let Some(cut) = cut {
            bytes.truncate(cut);
        }
        agrees(named.map(str::as_bytes), &bytes)?;
    }
}

/// Strings short and longer than a vector (32 bytes), with a control character, a stray or
/// cut UTF-8 byte, a whole non-ASCII character, a quote or a backslash at every position, in
/// the text, in a read string and in a skipped key: the pre-scan, which checks UTF-8 only in
/// strings, still agrees with serde, answers for whole characters and defers for the rest.
#[test]
fn strings_either_side_of_the_short_scan_agree() {
    let odd: [&[u8]; 8] = [
        b"\x01",
        b"\x1f",
        b"\x80",
        b"\xc3",
        b"\xe2\x82",
        "\u{e9}".as_bytes(),
        b"\"",
        b"\\",
    ];
    let shapes: [(&[u8], &[u8]); 3] = [
        (br#"{"choices":[{"delta":{"content":""#, br#""}}]}"#),
        (br#"{"id":""#, br#"","choices":[]}"#),
        (br#"{"x"#, br#"":1,"choices":[]}"#),
    ];
    for len in [0usize, 1, 31, 32, 33, 64, 70] {
        for at in 0..=len {
            for bytes in odd {
                let mut text = vec![b'a'; len];
                text.splice(at..at, bytes.iter().copied());
                for (head, tail) in shapes {
                    let data = [head, &text, tail].concat();
                    let fast = agrees(None, &data).unwrap_or_else(|e| panic!("{e}"));
                    if bytes == "\u{e9}".as_bytes() {
                        assert!(fast, "{}", String::from_utf8_lossy(&data));
                    } else if bytes[0] != b'"' {
                        assert!(!fast, "{}", String::from_utf8_lossy(&data));
                    }
                }
            }
        }
    }
}

/// An OpenAI chunk as providers send them, its text `text` (raw, unescaped).
fn openai_chunk(id: &str, text: &str) -> Vec<u8> {
    padded_chunk(id, text, None, None)
}

/// An OpenAI chunk, with OpenAI's `obfuscation` padding (raw, unescaped) when given, and a
/// finish reason when given (some providers send the last text with it).
fn padded_chunk(id: &str, text: &str, padding: Option<&str>, finish: Option<&str>) -> Vec<u8> {
    let mut out = format!(
        r#"{{"id":"{id}","object":"chat.completion.chunk","created":1796451040,"model":"m","service_tier":"default","system_fingerprint":"fp_1","choices":[{{"index":0,"delta":{{"content":""#
    )
    .into_bytes();
    out.extend_from_slice(text.as_bytes());
    let finish = finish.map_or_else(|| "null".to_owned(), |f| format!("\"{f}\""));
    out.extend_from_slice(format!(r#""}},"logprobs":null,"finish_reason":{finish}}}]"#).as_bytes());
    if let Some(padding) = padding {
        out.extend_from_slice(br#","obfuscation":""#);
        out.extend_from_slice(padding.as_bytes());
        out.push(b'"');
    }
    out.push(b'}');
    out
}

/// One event of a generated stream.
#[derive(Debug, Clone)]
enum Step {
    /// The provider's chunk with this text (any characters: quotes, backslashes, controls),
    /// OpenAI's padding when given (the same), and a finish reason when given.
    Text(String, Option<String>, Option<&'static str>),
    /// A generated chunk of any shape.
    Other(String),
}

prop_compose! {
    fn step()(
        text in "(\\PC|[\"\\\\\u{1}\u{7f}é]|\\\\[nt\"/\\\\]|\\\\u00e9){0,40}",
        // Mostly plain, as OpenAI sends it, so that chunks in a row are compared.
        padding in proptest::option::of(prop_oneof![
            3 => "[a-zA-Z0-9]{0,16}",
            1 => "([a-zA-Z0-9]|[\"\\\\\u{1}é]){0,16}",
        ]),
        finish in proptest::option::of(prop::sample::select(vec!["stop", "length", "odd"])),
        other in chunk(),
        pick in 0u8..4,
    ) -> Step {
        if pick == 0 { Step::Other(other) } else { Step::Text(text, padding, finish) }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// A stream's inspector, which answers chunks that repeat the one before but for their
    /// text from that one, agrees with the stateless inspection on every event of generated
    /// streams: texts of every kind, other chunks between them, and a byte changed anywhere.
    #[test]
    fn a_streams_inspector_agrees_with_inspecting_each_event_alone(
        steps in prop::collection::vec(step(), 1..12),
        id in "[a-zA-Z0-9-]{1,12}",
        flip in proptest::option::of((0usize..12, 0usize..300, any::<u8>())),
    ) {
        let mut inspector = crate::sse::StreamInspector::new(Format::OpenAiChat);
        for (i, step) in steps.iter().enumerate() {
            let mut data = match step {
                Step::Text(text, padding, finish) => {
                    padded_chunk(&id, text, padding.as_deref(), *finish)
                }
                Step::Other(other) => other.clone().into_bytes(),
            };
            if let Some((at_step, at, b)) = flip
                && at_step == i
            {
                let at = at % (data.len() + 1);
                data.insert(at, b);
            }
            let event = crate::sse::SseEvent { event: None, data: &data, id: None, retry: None };
            let alone = inspect(Format::OpenAiChat, &event);
            // The stateless answer is the full parse's.
            prop_assert_eq!(&alone, &formats::chat(None, data.trim_ascii()), "{}", String::from_utf8_lossy(&data));
            let streamed = inspector.inspect_item(&SseItem::Event(event));
            prop_assert_eq!(streamed, alone, "{}", String::from_utf8_lossy(&data));
        }
    }
}

#[test]
fn repeated_chunks_are_answered_from_the_one_before() {
    let mut inspector = crate::sse::StreamInspector::new(Format::OpenAiChat);
    for text in [
        "",
        "Hello",
        " world",
        "é",
        "a \" quote",
        "back\\slash",
        "\u{1}",
        "end",
    ] {
        let data = openai_chunk("chatcmpl-1", text);
        let event = crate::sse::SseEvent {
            event: None,
            data: &data,
            id: None,
            retry: None,
        };
        let alone = inspect(Format::OpenAiChat, &event);
        assert_eq!(
            inspector.inspect_item(&SseItem::Event(event)),
            alone,
            "{text:?}"
        );
    }
}
