use super::{Item, fixtures, parse, parse_chunks};
use crate::sse::{SseError, SseItem, SseParser};

#[test]
fn fields_comments_and_dispatch() {
    let got = parse(b": keep-alive\n:no-space\nevent: update\nid: 7\nretry: 1500\ndata: a\n\n");
    assert_eq!(
        got,
        vec![
            Item::Comment(b"keep-alive".to_vec()),
            Item::Comment(b"no-space".to_vec()),
            Item::Event {
                event: Some(b"update".to_vec()),
                data: b"a".to_vec(),
                id: Some(b"7".to_vec()),
                retry: Some(1500),
            },
        ]
    );
}

#[test]
fn value_keeps_all_but_one_leading_space_and_colons() {
    assert_eq!(parse(b"data:  two: x\n\n"), vec![Item::data(" two: x")]);
    assert_eq!(parse(b"data:x\n\n"), vec![Item::data("x")]);
}

#[test]
fn multi_line_data_is_joined_with_newlines() {
    assert_eq!(
        parse(b"data: a\ndata:\ndata: b\n\n"),
        vec![Item::data("a\n\nb")]
    );
    // A bare field name is a field with an empty value.
    assert_eq!(parse(b"data\ndata\n\n"), vec![Item::data("\n")]);
}

#[test]
fn blocks_without_data_are_not_dispatched() {
    assert_eq!(
        parse(b"event: ping\n\nid: 3\n\n\n\ndata: x\n\n"),
        vec![Item::data("x")]
    );
}

#[test]
fn empty_event_name_means_message_and_unknown_fields_are_ignored() {
    let got = parse(b"event:\nfoo: bar\ndata: x\n\n");
    assert_eq!(got, vec![Item::data("x")]);
}

#[test]
fn invalid_id_and_retry_are_ignored() {
    let got = parse(b"id: a\0b\nretry: 12a\nretry: 99999999999999999999999\ndata: x\n\n");
    assert_eq!(got, vec![Item::data("x")]);
}

#[test]
fn line_endings_lf_crlf_cr_are_equivalent() {
    let lf = parse(fixtures::ANTHROPIC.as_bytes());
    let crlf = fixtures::ANTHROPIC.replace('\n', "\r\n");
    let cr = fixtures::ANTHROPIC.replace('\n', "\r");
    assert_eq!(lf.len(), 13);
    assert_eq!(parse(crlf.as_bytes()), lf);
    assert_eq!(parse(cr.as_bytes()), lf);
}

#[test]
fn crlf_split_across_chunks_is_one_terminator() {
    let got = parse_chunks([&b"data: a\r"[..], b"\ndata: b\r", b"\n\r", b"\n"], 1 << 20);
    assert_eq!(got, vec![Item::data("a\nb")]);
    // Two CRs are two terminators: a blank line.
    let got = parse_chunks([&b"data: a\r"[..], b"\r"], 1 << 20);
    assert_eq!(got, vec![Item::data("a")]);
}

#[test]
fn leading_bom_is_stripped_even_when_split() {
    let got = parse_chunks([&b"\xEF"[..], b"\xBB", b"\xBFdata: x\n\n"], 1 << 20);
    assert_eq!(got, vec![Item::data("x")]);
    // Only at the very start: later it is part of a field name.
    assert_eq!(
        parse(b"data: x\n\n\xEF\xBB\xBFdata: y\n\n"),
        vec![Item::data("x")]
    );
    // A broken BOM prefix stays in the line.
    assert_eq!(parse(b"\xEFdata: x\n\n"), vec![]);
    assert_eq!(parse(b"\xEF\xBB:c\n"), vec![]);
    assert_eq!(parse(b"\xEF\n:c\n"), vec![Item::Comment(b"c".to_vec())]);
}

#[test]
fn incomplete_event_at_eof_is_discarded_and_reported() {
    let mut parser = SseParser::new();
    let mut n = 0;
    parser.feed(b"data: [DONE]\n", &mut |_| n += 1);
    assert_eq!(n, 0);
    assert!(parser.finish());
    parser.feed(b"data: x\n\n", &mut |_| n += 1);
    assert_eq!(n, 1);
    assert!(!parser.finish());
}

#[test]
fn oversized_event_errors_once_and_resyncs_at_blank_line() {
    let mut stream = b"data: ok\n\ndata: ".to_vec();
    stream.extend(std::iter::repeat_n(b'x', 200));
    stream.extend_from_slice(b"\ndata: more\n: note\n\ndata: after\n\n");
    let expected = vec![
        Item::data("ok"),
        Item::Error(SseError::EventTooLarge { limit: 64 }),
        Item::data("after"),
    ];
    assert_eq!(parse_chunks([&stream[..]], 64), expected);
    let bytewise: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(parse_chunks(bytewise, 64), expected);
}

#[test]
fn many_small_lines_overflow_too() {
    let mut stream = Vec::new();
    for _ in 0..20 {
        stream.extend_from_slice(b"data: 0123456789\n");
    }
    stream.extend_from_slice(b"\ndata: y\n\n");
    let got = parse_chunks([&stream[..]], 100);
    assert_eq!(
        got,
        vec![
            Item::Error(SseError::EventTooLarge { limit: 100 }),
            Item::data("y")
        ]
    );
}

#[test]
fn long_comment_lines_between_events_do_not_accumulate() {
    let mut stream = Vec::new();
    for _ in 0..50 {
        stream.extend_from_slice(b": keep-alive 0123456789\n");
    }
    stream.extend_from_slice(b"data: y\n\n");
    let got = parse_chunks([&stream[..]], 64);
    assert_eq!(got.len(), 51);
    assert_eq!(got.last(), Some(&Item::data("y")));
}

#[test]
fn unterminated_huge_line_keeps_memory_bounded() {
    let mut parser = SseParser::with_limit(1024);
    let mut errors = 0;
    let chunk = [b'a'; 4096];
    for _ in 0..256 {
        parser.feed(&chunk, &mut |item| {
            errors += usize::from(matches!(item, SseItem::Error(_)))
        });
        assert!(parser.buffered_capacity() <= 4 * 1024);
    }
    assert_eq!(errors, 1);
}

#[test]
fn events_within_one_chunk_borrow_it() {
    let chunk = b"event: a\ndata: x\n\ndata: y\ndata: z\n\n";
    let range = chunk.as_ptr_range();
    let mut seen = 0;
    SseParser::new().feed(chunk, &mut |item| {
        if let SseItem::Event(e) = item {
            seen += 1;
            if e.data == b"x" {
                assert!(range.contains(&e.data.as_ptr()));
                assert!(e.event.is_some_and(|n| range.contains(&n.as_ptr())));
            } else {
                // Multi-line data has to be joined into the parser's buffer.
                assert_eq!(e.data, b"y\nz");
            }
        }
    });
    assert_eq!(seen, 2);
}

#[test]
fn event_name_and_data_str_helpers() {
    let mut names = Vec::new();
    SseParser::new().feed(b"data: x\n\nevent: e\ndata: \xFF\n\n", &mut |item| {
        if let SseItem::Event(e) = item {
            names.push((e.event_name().to_vec(), e.data_str().is_some()));
        }
    });
    assert_eq!(
        names,
        vec![(b"message".to_vec(), true), (b"e".to_vec(), false)]
    );
}

#[test]
fn fixtures_parse_to_the_expected_event_counts() {
    let count = |s: &str| parse(s.as_bytes()).len();
    assert_eq!(count(fixtures::OPENAI_CHAT), 7);
    assert_eq!(count(fixtures::OPENAI_CHAT_MIDSTREAM_ERROR), 4);
    assert_eq!(count(fixtures::RESPONSES), 12);
    assert_eq!(
        parse(fixtures::OPENAI_CHAT.as_bytes()).last(),
        Some(&Item::data("[DONE]"))
    );
    assert_eq!(
        parse(fixtures::ANTHROPIC.as_bytes()).last(),
        Some(&Item::named("message_stop", r#"{"type":"message_stop"}"#))
    );
}

#[test]
fn every_fixture_is_clean_sse_under_any_line_ending_and_split() {
    for fixture in fixtures::ALL {
        let items = parse(fixture.as_bytes());
        assert!(
            items.iter().any(|i| matches!(i, Item::Event { .. })),
            "{fixture}"
        );
        assert!(
            !items.iter().any(|i| matches!(i, Item::Error(_))),
            "{fixture}"
        );
        assert_eq!(parse(fixture.replace('\n', "\r\n").as_bytes()), items);
        let bytewise: Vec<&[u8]> = fixture.as_bytes().chunks(1).collect();
        assert_eq!(parse_chunks(bytewise, 1 << 20), items);
    }
}
