//! Tests for the SSE tap: captured-looking fixtures per format, parser edge cases, property
//! tests for chunk-split invariance and bounded memory, and watchdog decision tables.

pub(in crate::sse) mod fixtures;
mod inspect;
pub(in crate::sse) mod json_gen;
mod parser;
mod prescan;
mod props;
mod throughput;
mod watch;
mod watchdog;
mod writer;

use super::{EventInfo, Format, SseError, SseItem, SseParser, inspect_item};

/// An owned copy of an [`SseItem`], for comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Item {
    Event {
        event: Option<Vec<u8>>,
        data: Vec<u8>,
        id: Option<Vec<u8>>,
        retry: Option<u64>,
    },
    Comment(Vec<u8>),
    Error(SseError),
}

impl Item {
    pub(super) fn data(data: &str) -> Self {
        Item::Event {
            event: None,
            data: data.into(),
            id: None,
            retry: None,
        }
    }

    pub(super) fn named(event: &str, data: &str) -> Self {
        Item::Event {
            event: Some(event.into()),
            data: data.into(),
            id: None,
            retry: None,
        }
    }
}

pub(super) fn owned(item: SseItem<'_>) -> Item {
    match item {
        SseItem::Event(e) => Item::Event {
            event: e.event.map(<[u8]>::to_vec),
            data: e.data.to_vec(),
            id: e.id.map(<[u8]>::to_vec),
            retry: e.retry,
        },
        SseItem::Comment(c) => Item::Comment(c.to_vec()),
        SseItem::Error(e) => Item::Error(e),
    }
}

/// Feeds `chunks` in order to a parser with `limit` and collects every item.
pub(super) fn parse_chunks<'a>(
    chunks: impl IntoIterator<Item = &'a [u8]>,
    limit: usize,
) -> Vec<Item> {
    let mut parser = SseParser::with_limit(limit);
    let mut out = Vec::new();
    for chunk in chunks {
        parser.feed(chunk, &mut |item| out.push(owned(item)));
    }
    parser.finish();
    out
}

pub(super) fn parse(bytes: &[u8]) -> Vec<Item> {
    parse_chunks([bytes], super::DEFAULT_MAX_EVENT_BYTES)
}

/// Parses a whole stream and inspects every item (comments become heartbeats).
pub(super) fn infos(format: Format, bytes: &[u8]) -> Vec<EventInfo> {
    let mut parser = SseParser::new();
    let mut out = Vec::new();
    parser.feed(bytes, &mut |item| out.push(inspect_item(format, &item)));
    out
}
