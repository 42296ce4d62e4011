//! The Anthropic and Responses pre-scans must agree with the full serde parse on every event
//! they answer, and must answer the deltas they exist for.

use proptest::prelude::*;
use proptest::strategy::ValueTree;

use super::{anthropic, responses};
use crate::sse::tests::fixtures;
use crate::sse::tests::json_gen::{self, object};
use crate::sse::{EventInfo, EventKind, Format, SseEvent, SseItem, SseParser, formats, inspect};

/// The full parse of one event, as `inspect` ran it before the pre-scans.
fn full(format: Format, name: Option<&[u8]>, data: &[u8]) -> EventInfo {
    if matches!(
        name,
        Some(b"ping" | b"keepalive" | b"keep-alive" | b"heartbeat")
    ) {
        return EventInfo::of(EventKind::Ping);
    }
    match format {
        Format::Anthropic => formats::anthropic(name, data.trim_ascii()),
        Format::OpenAiResponses => formats::responses(name, data.trim_ascii()),
        Format::OpenAiChat => formats::chat(name, data.trim_ascii()),
    }
}

/// Checks one event both ways; returns whether the fast path answered.
fn agrees(format: Format, name: Option<&[u8]>, data: &[u8]) -> Result<bool, TestCaseError> {
    let trimmed = data.trim_ascii();
    let expected = full(format, name, data);
    let event = SseEvent {
        event: name,
        data,
        id: None,
        retry: None,
    };
    prop_assert_eq!(
        &inspect(format, &event),
        &expected,
        "event {:?} data {:?}",
        name.map(String::from_utf8_lossy),
        String::from_utf8_lossy(trimmed)
    );
    let fast = match format {
        Format::Anthropic => anthropic(name, trimmed),
        Format::OpenAiResponses => responses(name, trimmed),
        Format::OpenAiChat => None,
    };
    if let Some(fast) = &fast {
        let serde = match format {
            Format::Anthropic => formats::anthropic(name, trimmed),
            _ => formats::responses(name, trimmed),
        };
        prop_assert_eq!(fast, &serde, "data {:?}", String::from_utf8_lossy(trimmed));
    }
    Ok(fast.is_some())
}

fn events(stream: &str) -> Vec<(Option<Vec<u8>>, Vec<u8>)> {
    let mut parser = SseParser::new();
    let mut seen = Vec::new();
    parser.feed(stream.as_bytes(), &mut |item| {
        if let SseItem::Event(e) = item {
            seen.push((e.event.map(<[u8]>::to_vec), e.data.to_vec()));
        }
    });
    seen
}

/// Counts (events, fast answers) over `streams` in `format`.
fn run(format: Format, streams: &[&str]) -> (usize, usize) {
    let (mut total, mut fast) = (0, 0);
    for stream in streams {
        // The stream's inspector, which answers repeats from the event before, agrees too.
        let mut inspector = crate::sse::StreamInspector::new(format);
        for (name, data) in events(stream) {
            total += 1;
            let answered = agrees(format, name.as_deref(), &data).unwrap_or_else(|e| panic!("{e}"));
            fast += usize::from(answered);
            let event = SseEvent {
                event: name.as_deref(),
                data: &data,
                id: None,
                retry: None,
            };
            let alone = inspect(format, &event);
            assert_eq!(inspector.inspect_item(&SseItem::Event(event)), alone);
        }
    }
    (total, fast)
}

#[test]
fn captured_events_agree_and_deltas_take_the_fast_path() {
    let (total, fast) = run(
        Format::Anthropic,
        &[
            fixtures::ANTHROPIC,
            fixtures::ANTHROPIC_TOOL_USE,
            fixtures::ANTHROPIC_OVERLOADED,
        ],
    );
    assert!(total > 15, "anthropic events parsed: {total}");
    // Text (two), empty text, empty thinking, signature and the empty input_json_delta; the
    // escaped ones take the full parse.
    assert!(
        fast >= 6,
        "anthropic fast path taken {fast} of {total} times"
    );
    let (total, fast) = run(
        Format::OpenAiResponses,
        &[
            fixtures::RESPONSES,
            fixtures::RESPONSES_PADDED,
            fixtures::RESPONSES_TOOLS,
            fixtures::RESPONSES_ERRORS,
        ],
    );
    assert!(total > 14, "responses events parsed: {total}");
    assert!(
        fast >= 5,
        "responses fast path taken {fast} of {total} times"
    );
    // Every captured stream, read as either format, still agrees.
    for format in [Format::Anthropic, Format::OpenAiResponses] {
        run(format, fixtures::ALL);
    }
}

#[test]
fn plain_deltas_are_content_with_exact_bytes() {
    let data =
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"héllo"}}"#;
    let info = anthropic(Some(b"content_block_delta"), data.as_bytes());
    assert_eq!(
        info.as_ref().map(|i| (i.kind, i.useful_text_bytes)),
        Some((EventKind::Content, 6))
    );
    assert_eq!(
        info,
        Some(formats::anthropic(
            Some(b"content_block_delta"),
            data.as_bytes()
        ))
    );
    let data = r#"{"type":"response.output_text.delta","sequence_number":9,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Hi there","logprobs":[]}"#;
    let info = responses(Some(b"response.output_text.delta"), data.as_bytes());
    assert_eq!(
        info.as_ref().map(|i| (i.kind, i.useful_text_bytes)),
        Some((EventKind::Content, 8))
    );
}

#[test]
fn events_the_full_parse_reads_further_are_deferred() {
    let cases: &[(Format, Option<&str>, &str)] = &[
        // Usage and stop reasons live in these.
        (
            Format::Anthropic,
            Some("message_delta"),
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}"#,
        ),
        (
            Format::Anthropic,
            None,
            r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"a"},"usage":{"output_tokens":3}}"#,
        ),
        // A duplicate declared field is a serde error: the full parse says `Other`.
        (
            Format::Anthropic,
            None,
            r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"a","text":"b"}}"#,
        ),
        // A \u escape (the decoded length is not the escape's), and a number where serde
        // reads a value's size.
        (
            Format::Anthropic,
            None,
            r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"a\u00e9b"}}"#,
        ),
        (
            Format::OpenAiResponses,
            None,
            r#"{"type":"response.output_text.delta","delta":1e400}"#,
        ),
        (
            Format::OpenAiResponses,
            Some("response.completed"),
            r#"{"type":"response.completed","response":null}"#,
        ),
        (
            Format::OpenAiResponses,
            None,
            r#"{"type":"response.output_item.added","item":{"type":"reasoning"}}"#,
        ),
        (
            Format::OpenAiResponses,
            Some("error"),
            r#"{"type":"error","message":"x"}"#,
        ),
    ];
    for (format, name, data) in cases {
        let name = name.map(str::as_bytes);
        let fast = match format {
            Format::Anthropic => anthropic(name, data.as_bytes()),
            _ => responses(name, data.as_bytes()),
        };
        assert_eq!(fast, None, "{data}");
        agrees(*format, name, data.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// A JSON value as text, often odd: numbers serde rejects, raw control characters, escapes.
/// The shared scalars, plus values shaped like this format's fields.
fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        // The shared set's seven kinds, weighted as when they were listed here.
        7 => json_gen::scalar(),
        1 => kind().prop_map(|k| format!("\"{k}\"")),
        1 => Just("{\"type\":\"reasoning\"}".to_owned()),
        1 => Just("{\"output_tokens\":3}".to_owned()),
    ]
}

fn kind() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "content_block_delta",
        "text_delta",
        "thinking_delta",
        "signature_delta",
        "input_json_delta",
        "message_delta",
        "message_start",
        "content_block_start",
        "error",
        "ping",
        "response.output_text.delta",
        "response.refusal.delta",
        "response.reasoning_summary_text.delta",
        "response.function_call_arguments.delta",
        "response.output_item.added",
        "response.completed",
        "response.incomplete",
        "response.failed",
        "",
    ])
}

fn key() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "type",
        "index",
        "delta",
        "text",
        "stop_reason",
        "usage",
        "message",
        "content_block",
        "item",
        "response",
        "sequence_number",
        "item_id",
        "partial_json",
    ])
}

prop_compose! {
    /// An Anthropic- or Responses-looking event: a `type`, a `delta` (an object or a value)
    /// and a few other fields.
    fn event()(
        kind in kind(),
        inner_kind in proptest::option::of(kind()),
        text in proptest::option::of(scalar()),
        inner in prop::collection::vec((key(), scalar()), 0..3),
        delta_is_object in any::<bool>(),
        delta_value in scalar(),
        top in prop::collection::vec((key(), scalar()), 0..3),
        ws in prop::sample::select(vec!["", " ", "\n", "\u{c}"]),
    ) -> String {
        let delta = if delta_is_object {
            let mut fields = inner;
            if let Some(k) = inner_kind {
                fields.insert(0, ("type", format!("\"{k}\"")));
            }
            if let Some(t) = text {
                fields.push(("text", t));
            }
            object(fields, ws)
        } else {
            delta_value
        };
        let mut fields = vec![("type", format!("\"{kind}\""))];
        fields.extend(top);
        fields.push(("delta", delta));
        object(fields, ws)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn generated_events_agree(
        data in event(),
        cut in proptest::option::of(0usize..300),
        flip in proptest::option::of((0usize..300, any::<u8>())),
        name in proptest::option::of(kind()),
        anthropic_format in any::<bool>(),
    ) {
        let mut bytes = data.into_bytes();
        if let Some((at, b)) = flip {
            let at = at % (bytes.len() + 1);
            bytes.insert(at, b);
        }
        if let Some(cut) = cut {
            bytes.truncate(cut);
        }
        let format = if anthropic_format { Format::Anthropic } else { Format::OpenAiResponses };
        agrees(format, name.map(str::as_bytes), &bytes)?;
    }
}

#[test]
fn generated_events_often_take_the_fast_path() {
    // Without mutation a share of the generated events is plain (the rest carry odd values
    // in declared fields on purpose), so the property above is not vacuous: about 5 % of 500
    // with the deterministic runner, some 100 of the property's 2,000 cases.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut fast, mut total) = (0, 0);
    for _ in 0..500 {
        let Ok(tree) = event().new_tree(&mut runner) else {
            continue;
        };
        let data = tree.current();
        total += 1;
        let answered = agrees(Format::Anthropic, None, data.as_bytes()).unwrap_or(false)
            | agrees(Format::OpenAiResponses, None, data.as_bytes()).unwrap_or(false);
        fast += usize::from(answered);
    }
    assert!(fast * 50 > total, "fast path taken {fast} of {total} times");
}

/// An Anthropic delta as the API sends it, its text `text` (raw, unescaped).
fn text_delta(kind: &str, field: &str, text: &str) -> Vec<u8> {
    let mut out = format!(
        r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"{kind}","{field}":""#
    )
    .into_bytes();
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(br#""}}"#);
    out
}

/// Feeds `steps` (a name and data each) to one stream's inspector, with `flip`'s byte inserted
/// into its step, and checks every answer against the stateless inspection and the full
/// parse.
fn streamed_agrees(
    format: Format,
    steps: &[(Option<&str>, Vec<u8>)],
    flip: Option<(usize, usize, u8)>,
) -> Result<(), TestCaseError> {
    let mut inspector = crate::sse::StreamInspector::new(format);
    for (i, (name, data)) in steps.iter().enumerate() {
        let mut data = data.clone();
        if let Some((at_step, at, b)) = flip
            && at_step == i
        {
            let at = at % (data.len() + 1);
            data.insert(at, b);
        }
        let name = name.map(str::as_bytes);
        let event = SseEvent {
            event: name,
            data: &data,
            id: None,
            retry: None,
        };
        let alone = inspect(format, &event);
        prop_assert_eq!(
            &alone,
            &full(format, name, &data),
            "{:?} {}",
            name,
            String::from_utf8_lossy(&data)
        );
        let streamed = inspector.inspect_item(&SseItem::Event(event));
        prop_assert_eq!(
            streamed,
            alone,
            "{:?} {}",
            name,
            String::from_utf8_lossy(&data)
        );
    }
    Ok(())
}

prop_compose! {
    /// One event of a generated Anthropic stream: a text, thinking or tool-input delta with
    /// any text (escapes included, valid or not), or a generated event of any shape, under a
    /// name or none.
    fn anthropic_step()(
        text in "(\\PC|[\"\\\\\u{1}\u{7f}é]|\\\\[nt\"/]|\\\\u00e9|\\\\ud800){0,30}",
        other in event(),
        pick in 0u8..7,
        name in prop::sample::select(vec![None, Some("content_block_delta"), Some("message_delta"), Some("ping")]),
    ) -> (Option<&'static str>, Vec<u8>) {
        let data = match pick {
            0 => other.into_bytes(),
            1 => text_delta("thinking_delta", "thinking", &text),
            2 => text_delta("text_delta", "thinking", &text),
            3 => text_delta("input_json_delta", "partial_json", &text),
            _ => text_delta("text_delta", "text", &text),
        };
        (name, data)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// A stream's inspector, which answers text deltas that repeat the event before but for
    /// their text from that one, agrees with the stateless inspection on every event of
    /// generated Anthropic streams, with a byte inserted anywhere.
    #[test]
    fn a_streams_inspector_agrees_on_anthropic_streams(
        steps in prop::collection::vec(anthropic_step(), 1..12),
        flip in proptest::option::of((0usize..12, 0usize..200, any::<u8>())),
    ) {
        streamed_agrees(Format::Anthropic, &steps, flip)?;
    }
}

#[test]
fn repeated_text_deltas_are_answered_from_the_one_before() {
    let mut inspector = crate::sse::StreamInspector::new(Format::Anthropic);
    for text in ["Hello", "", " world", "é", "a \" quote", "\u{1}", "end"] {
        for name in [Some(&b"content_block_delta"[..]), None] {
            let data = text_delta("text_delta", "text", text);
            let event = SseEvent {
                event: name,
                data: &data,
                id: None,
                retry: None,
            };
            let alone = inspect(Format::Anthropic, &event);
            assert_eq!(
                inspector.inspect_item(&SseItem::Event(event)),
                alone,
                "{text:?}"
            );
        }
    }
}

/// A Responses text delta as OpenAI sends it, its counter, text and padding raw (unescaped).
fn responses_delta(kind: &str, seq: &str, text: &str, padding: &str) -> Vec<u8> {
    let mut out = format!(
        r#"{{"type":"{kind}","sequence_number":{seq},"item_id":"msg_1","output_index":1,"content_index":0,"delta":""#
    )
    .into_bytes();
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(br#"","logprobs":[],"obfuscation":""#);
    out.extend_from_slice(padding.as_bytes());
    out.extend_from_slice(br#""}"#);
    out
}

prop_compose! {
    /// One event of a generated Responses stream: a text, refusal, reasoning or tool-call
    /// delta with any counter, text (escapes included) and padding, or a generated event of any shape, under a name or none.
    fn responses_step()(
        seq in prop_oneof![4 => "[1-9][0-9]{0,5}", 1 => "(0|-1|01|1\\.5|1e3|)"],
        text in prop_oneof![3 => "[a-zA-Z ,.!]{0,12}", 1 => "(\\PC|[\"\\\\\u{1}\u{7f}é]|\\\\[nt\"/]|\\\\u00e9|\\\\ud800){0,12}"],
        padding in prop_oneof![3 => "[a-zA-Z0-9]{0,16}", 1 => "([a-zA-Z0-9]|[\"\\\\\u{1}é]){0,8}"],
        other in event(),
        pick in 0u8..8,
        name in prop::sample::select(vec![None, Some("response.output_text.delta"), Some("response.refusal.delta"), Some("error")]),
    ) -> (Option<&'static str>, Vec<u8>) {
        let data = match pick {
            0 => other.into_bytes(),
            1 => responses_delta("response.reasoning_summary_text.delta", &seq, &text, &padding),
            3 => responses_delta("response.function_call_arguments.delta", &seq, &text, &padding),
            2 => responses_delta("response.refusal.delta", &seq, &text, &padding),
            _ => responses_delta("response.output_text.delta", &seq, &text, &padding),
        };
        (name, data)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// A stream's inspector, which answers Responses text deltas that repeat the event before
    /// but for their text, counter and padding from that one, agrees with the stateless
    /// inspection on every event of generated Responses streams, with a byte inserted
    /// anywhere.
    #[test]
    fn a_streams_inspector_agrees_on_responses_streams(
        steps in prop::collection::vec(responses_step(), 1..12),
        flip in proptest::option::of((0usize..12, 0usize..200, any::<u8>())),
    ) {
        streamed_agrees(Format::OpenAiResponses, &steps, flip)?;
    }
}
