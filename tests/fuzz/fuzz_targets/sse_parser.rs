//! SSE tap parser: never panics, output independent of chunk boundaries, memory bounded by
//! the per-event limit, and every event inspectable in every wire format.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_shared::sse::{Format, SseItem, SseParser, inspect_item};

/// A small limit so overflow and skip-to-blank-line paths are reached with small inputs.
const LIMIT: usize = 256;

#[derive(Debug, PartialEq)]
enum Owned {
    Event(Option<Vec<u8>>, Vec<u8>, Option<Vec<u8>>, Option<u64>),
    Comment(Vec<u8>),
    Error,
}

fn own(item: &SseItem<'_>) -> Owned {
    match item {
        SseItem::Event(e) => Owned::Event(
            e.event.map(<[u8]>::to_vec),
            e.data.to_vec(),
            e.id.map(<[u8]>::to_vec),
            e.retry,
        ),
        SseItem::Comment(c) => Owned::Comment(c.to_vec()),
        SseItem::Error(_) => Owned::Error,
    }
}

fn run(chunks: &[&[u8]]) -> Vec<Owned> {
    let mut parser = SseParser::with_limit(LIMIT);
    let mut out = Vec::new();
    for chunk in chunks {
        parser.feed(chunk, &mut |item| {
            for format in [
                Format::OpenAiChat,
                Format::OpenAiResponses,
                Format::Anthropic,
            ] {
                let _ = inspect_item(format, &item);
            }
            out.push(own(&item));
        });
        assert!(
            parser.buffered_capacity() <= LIMIT * 4,
            "parser buffers grew"
        );
    }
    parser.finish();
    out
}

fuzz_target!(|data: &[u8]| {
    // The first byte picks a chunk size; the rest is the stream.
    let Some((&step, stream)) = data.split_first() else {
        return;
    };
    let step = usize::from(step % 17) + 1;
    let whole = run(&[stream]);
    let chunks: Vec<&[u8]> = stream.chunks(step).collect();
    assert_eq!(whole, run(&chunks), "output depends on chunk boundaries");
});
