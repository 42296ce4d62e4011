use super::{fixtures, infos};
use crate::sse::{
    EventInfo, EventKind, FinishReason, Format, SseEvent, UpstreamStreamError, Usage, inspect,
};

fn kinds(infos: &[EventInfo]) -> Vec<(EventKind, usize)> {
    infos
        .iter()
        .map(|i| (i.kind, i.useful_text_bytes))
        .collect()
}

use EventKind::{Content, Done, Error, Heartbeat, Other, Ping, Reasoning, ToolCall};

#[test]
fn openai_chat_with_padding_is_read_like_without() {
    let got = infos(Format::OpenAiChat, fixtures::OPENAI_CHAT_PADDED.as_bytes());
    assert_eq!(
        kinds(&got),
        vec![
            (Content, 5),
            (Content, 1),
            (Content, 6),
            (Content, 1),
            (Other, 0),
            (Done, 0)
        ]
    );
    // A stream's inspector answers the repeats from the chunk before, and the same.
    let mut inspector = crate::sse::StreamInspector::new(Format::OpenAiChat);
    let mut parser = crate::sse::SseParser::new();
    let mut streamed = Vec::new();
    parser.feed(fixtures::OPENAI_CHAT_PADDED.as_bytes(), &mut |item| {
        streamed.push(inspector.inspect_item(&item));
    });
    assert_eq!(streamed, got);
}

#[test]
fn responses_with_counter_and_padding_are_read_like_without() {
    let got = infos(
        Format::OpenAiResponses,
        fixtures::RESPONSES_PADDED.as_bytes(),
    );
    // The eleven deltas' texts: "Current weather in New York City, USA: Sunny."
    let texts = [7, 8, 3, 4, 5, 5, 1, 4, 1, 6, 1];
    let mut want = vec![(Other, 0)];
    want.extend(texts.iter().map(|&n| (Content, n)));
    want.extend([(Other, 0), (Done, 0)]);
    assert_eq!(kinds(&got), want);
    // A stream's inspector answers the deltas from the one before, and the same.
    let mut inspector = crate::sse::StreamInspector::new(Format::OpenAiResponses);
    let mut parser = crate::sse::SseParser::new();
    let mut streamed = Vec::new();
    parser.feed(fixtures::RESPONSES_PADDED.as_bytes(), &mut |item| {
        streamed.push(inspector.inspect_item(&item));
    });
    assert_eq!(streamed, got);
}

#[test]
fn openai_chat_text_usage_and_done() {
    let got = infos(Format::OpenAiChat, fixtures::OPENAI_CHAT.as_bytes());
    // "Café" is 5 bytes, ` "olé"\n` 8 (decoded escapes), the emoji 4.
    assert_eq!(
        kinds(&got),
        vec![
            (Other, 0),
            (Content, 5),
            (Content, 8),
            (Content, 4),
            (Other, 0),
            (EventKind::Usage, 0),
            (Done, 0)
        ]
    );
    assert_eq!(got[4].finish_reason, Some(FinishReason::Stop));
    let usage = Usage {
        input: Some(19),
        output: Some(10),
        cache_read: Some(3),
        cache_creation: None,
    };
    assert_eq!(got[5].usage, Some(usage));
}

#[test]
fn openai_chat_tool_calls() {
    let got = infos(Format::OpenAiChat, fixtures::OPENAI_CHAT_TOOLS.as_bytes());
    assert_eq!(
        kinds(&got),
        vec![
            (ToolCall, 0),
            (ToolCall, 0),
            (ToolCall, 0),
            (Other, 0),
            (Done, 0)
        ]
    );
    assert_eq!(got[3].finish_reason, Some(FinishReason::ToolCalls));
}

#[test]
fn openai_chat_reasoning_content_is_reasoning_but_empty_strings_are_not() {
    let got = infos(
        Format::OpenAiChat,
        fixtures::OPENAI_CHAT_REASONING.as_bytes(),
    );
    assert_eq!(kinds(&got), vec![(Other, 0), (Reasoning, 0), (Content, 2)]);
}

#[test]
fn openai_chat_midstream_errors() {
    let got = infos(
        Format::OpenAiChat,
        fixtures::OPENAI_CHAT_MIDSTREAM_ERROR.as_bytes(),
    );
    assert_eq!(
        kinds(&got),
        vec![(Heartbeat, 0), (Content, 3), (Heartbeat, 0), (Error, 0)]
    );
    let err = UpstreamStreamError {
        error_type: "stream_error".into(),
        message: "Provider returned error".into(),
        code: Some("502".into()),
    };
    assert_eq!(got[3].error, Some(err));

    let got = infos(
        Format::OpenAiChat,
        fixtures::OPENAI_CHAT_SERVER_ERROR.as_bytes(),
    );
    let err = got[0]
        .error
        .as_ref()
        .map(|e| (e.error_type.as_str(), e.code.is_none()));
    assert_eq!(err, Some(("server_error", true)));
}

#[test]
fn anthropic_full_sequence() {
    let got = infos(Format::Anthropic, fixtures::ANTHROPIC.as_bytes());
    assert_eq!(
        kinds(&got),
        vec![
            (Other, 0),            // message_start
            (Other, 0),            // content_block_start (thinking)
            (Ping, 0),             // ping
            (Reasoning, 0),        // thinking_delta
            (Reasoning, 0),        // empty thinking_delta is still a reasoning frame
            (Reasoning, 0),        // signature_delta
            (Other, 0),            // content_block_stop
            (Other, 0),            // content_block_start (text)
            (Content, 17),         // text_delta
            (Other, 0),            // empty text_delta
            (Other, 0),            // content_block_stop
            (EventKind::Usage, 0), // message_delta
            (Done, 0),             // message_stop
        ]
    );
    let start = Usage {
        input: Some(25),
        output: Some(1),
        cache_read: Some(12),
        cache_creation: Some(7),
    };
    assert_eq!(got[0].usage, Some(start));
    let mut merged = start;
    merged.merge(&got[11].usage.unwrap_or_default());
    assert_eq!(
        merged,
        Usage {
            output: Some(89),
            ..start
        }
    );
    assert_eq!(got[11].finish_reason, Some(FinishReason::Stop));
}

#[test]
fn anthropic_tool_use_and_overload() {
    let got = infos(Format::Anthropic, fixtures::ANTHROPIC_TOOL_USE.as_bytes());
    assert_eq!(got.iter().filter(|i| i.kind == ToolCall).count(), 2);
    assert_eq!(got[5].finish_reason, Some(FinishReason::ToolCalls));

    let got = infos(Format::Anthropic, fixtures::ANTHROPIC_OVERLOADED.as_bytes());
    assert_eq!(kinds(&got), vec![(Other, 0), (Content, 5), (Error, 0)]);
    let err = got[2]
        .error
        .as_ref()
        .map(|e| (e.error_type.as_str(), e.message.as_str()));
    assert_eq!(err, Some(("overloaded_error", "Overloaded")));
}

#[test]
fn anthropic_type_is_read_from_data_when_the_event_line_is_missing() {
    let data =
        br#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"abc"}}"#;
    let ev = SseEvent {
        event: None,
        data,
        id: None,
        retry: None,
    };
    assert_eq!(inspect(Format::Anthropic, &ev).useful_text_bytes, 3);
    let ev = SseEvent {
        event: None,
        data: br#"{"type":"ping"}"#,
        id: None,
        retry: None,
    };
    assert_eq!(inspect(Format::Anthropic, &ev).kind, Ping);
    let redacted = br#"{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"}}"#;
    let ev = SseEvent {
        event: None,
        data: redacted,
        id: None,
        retry: None,
    };
    assert_eq!(inspect(Format::Anthropic, &ev).kind, Reasoning);
}

#[test]
fn responses_sequence() {
    let got = infos(Format::OpenAiResponses, fixtures::RESPONSES.as_bytes());
    assert_eq!(
        kinds(&got),
        vec![
            (Other, 0),
            (Other, 0),
            (Reasoning, 0),
            (Reasoning, 0),
            (Reasoning, 0),
            (Reasoning, 0),
            (Other, 0),
            (Other, 0),
            (Content, 2),
            (Content, 7),
            (Other, 0),
            (Done, 0),
        ]
    );
    let usage = Usage {
        input: Some(37),
        output: Some(11),
        cache_read: Some(4),
        cache_creation: None,
    };
    assert_eq!(got[11].usage, Some(usage));
    assert_eq!(got[11].finish_reason, Some(FinishReason::Stop));
}

#[test]
fn responses_tools_incomplete_and_errors() {
    let got = infos(
        Format::OpenAiResponses,
        fixtures::RESPONSES_TOOLS.as_bytes(),
    );
    assert_eq!(
        kinds(&got),
        vec![(ToolCall, 0), (ToolCall, 0), (ToolCall, 0), (Done, 0)]
    );
    assert_eq!(got[3].finish_reason, Some(FinishReason::Length));

    let got = infos(
        Format::OpenAiResponses,
        fixtures::RESPONSES_ERRORS.as_bytes(),
    );
    let errs: Vec<_> = got
        .iter()
        .filter_map(|i| i.error.clone())
        .map(|e| (e.error_type, e.code))
        .collect();
    assert_eq!(
        errs,
        vec![
            ("server_error".to_owned(), Some("server_error".to_owned())),
            (
                "rate_limit_exceeded".to_owned(),
                Some("rate_limit_exceeded".to_owned())
            ),
        ]
    );
}

#[test]
fn multi_line_data_is_parsed_as_one_json_document() {
    let stream = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\r\ndata:  \"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\r\n\r\n";
    let got = infos(Format::Anthropic, stream.as_bytes());
    assert_eq!(kinds(&got), vec![(Content, 2)]);
}

#[test]
fn garbage_and_unnamed_errors() {
    let ev = |event: Option<&'static [u8]>, data: &'static [u8]| SseEvent {
        event,
        data,
        id: None,
        retry: None,
    };
    for format in [
        Format::OpenAiChat,
        Format::OpenAiResponses,
        Format::Anthropic,
    ] {
        assert_eq!(inspect(format, &ev(None, b"not json")).kind, Other);
        assert_eq!(inspect(format, &ev(None, b"")).kind, Other);
        assert_eq!(inspect(format, &ev(Some(b"ping"), b"{}")).kind, Ping);
        let raw = inspect(format, &ev(Some(b"error"), b"upstream exploded"));
        assert_eq!(raw.kind, Error);
        assert_eq!(
            raw.error.map(|e| e.message),
            Some("upstream exploded".to_owned())
        );
    }
    // Chat content that is not a string (content parts) does not count as text.
    let parts = br#"{"choices":[{"delta":{"content":[{"type":"text","text":"x"}]}}]}"#;
    assert_eq!(inspect(Format::OpenAiChat, &ev(None, parts)).kind, Other);
}

#[test]
fn error_messages_are_bounded_on_a_char_boundary() {
    let long = format!(
        r#"{{"type":"error","error":{{"type":"api_error","message":"{}"}}}}"#,
        "é".repeat(2000)
    );
    let ev = SseEvent {
        event: Some(b"error"),
        data: long.as_bytes(),
        id: None,
        retry: None,
    };
    let info = inspect(Format::Anthropic, &ev);
    let message = info.error.map(|e| e.message).unwrap_or_default();
    assert_eq!(message.len(), 2048);
    assert!(message.chars().all(|c| c == 'é'));
}

#[test]
fn finish_reasons_are_normalised() {
    let cases = [
        ("end_turn", FinishReason::Stop),
        ("max_tokens", FinishReason::Length),
        ("tool_use", FinishReason::ToolCalls),
        ("refusal", FinishReason::ContentFilter),
        ("pause_turn", FinishReason::Other("pause_turn".into())),
    ];
    for (raw, want) in cases {
        assert_eq!(FinishReason::from_upstream(raw), want, "{raw}");
    }
    assert_eq!(
        FinishReason::Other("pause_turn".into()).as_str(),
        "pause_turn"
    );
}
