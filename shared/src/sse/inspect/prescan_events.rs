//! Fast paths for the commonest events of the two named-event formats: Anthropic
//! `content_block_delta` and the OpenAI Responses delta events (`response.output_text.delta`
//! and the like).
//!
//! A stream is mostly such deltas, and each cost a serde parse. These scanners reuse the chat
//! pre-scan's strict walker ([`super::prescan::Scanner`]): the fields the full parse declares
//! are accepted only in the shapes that make its answer depend on nothing else (a string or
//! `null`; `usage`, `message`, `content_block`, `item` and `response` only as `null`),
//! duplicates of a declared field are refused as serde refuses them, and every other field is
//! skipped with validation (escapes included, as serde validates a string it skips). A
//! string whose text is counted, and a string the answer does not read (a thinking or
//! tool-input delta), may hold the one-letter escapes. Anything else answers
//! `None` and the caller runs the full parse, so the classification is always the one
//! [`super::super::formats`] gives.

use super::prescan::{Scanner, Seen, text_info, whole_spanned};
use super::repeat::{Spanned, Variable};
use super::{EventInfo, EventKind};

#[cfg(test)]
mod tests;

/// The fields of an Anthropic event the answer depends on.
#[derive(Default)]
struct AnthEvent<'a> {
    kind: Option<&'a [u8]>,
    delta: Option<AnthDelta<'a>>,
}

#[derive(Default)]
struct AnthDelta<'a> {
    kind: Option<&'a [u8]>,
    text: usize,
    /// Where the `thinking` or `partial_json` string is, when the delta has exactly one.
    unread: Option<(usize, usize)>,
    unreads: u8,
}

/// The classification of an Anthropic `content_block_delta`, or `None` when the full parse
/// must decide.
pub(in crate::sse) fn anthropic(name: Option<&[u8]>, data: &[u8]) -> Option<EventInfo> {
    anthropic_spanned(name, data).map(|(info, _)| info)
}

/// [`anthropic`], and where the delta's variable string is: the text of a `text_delta` (the
/// answer for an event that differs from this one only there follows from the new text's
/// length), the `thinking` of a `thinking_delta` or the `partial_json` of an
/// `input_json_delta` (the answer does not read them) ([`super::repeat`]).
pub(super) fn anthropic_spanned(name: Option<&[u8]>, data: &[u8]) -> Spanned {
    // Other names are rare (one or two per turn) or answered before any parse.
    if !matches!(name, None | Some(b"content_block_delta")) {
        return None;
    }
    let (ev, span) = whole_spanned(data, anth_event)?;
    if name.or(ev.kind) != Some(b"content_block_delta") {
        return None;
    }
    let Some(delta) = ev.delta else {
        return Some((EventInfo::of(EventKind::Other), None));
    };
    let unread = |kind| {
        let variable = delta.unread.filter(|_| delta.unreads == 1);
        (
            EventInfo::of(kind),
            variable.map(|(start, end)| Variable::Unread(start, end)),
        )
    };
    Some(match delta.kind {
        Some(b"text_delta") => (
            text_info(delta.text),
            span.map(|(start, end)| Variable::Text(start, end)),
        ),
        Some(b"thinking_delta") => unread(EventKind::Reasoning),
        Some(b"signature_delta") => (EventInfo::of(EventKind::Reasoning), None),
        Some(b"input_json_delta") => unread(EventKind::ToolCall),
        _ => (EventInfo::of(EventKind::Other), None),
    })
}

fn anth_event<'a>(s: &mut Scanner<'a>) -> Option<AnthEvent<'a>> {
    let (mut ev, mut seen) = (AnthEvent::default(), Seen::default());
    s.object(|s, key| match key {
        b"type" => {
            seen.first(0)?;
            ev.kind = s.opt_string()?;
            Some(())
        }
        b"delta" => {
            seen.first(1)?;
            if !s.null() {
                ev.delta = Some(anth_delta(s)?);
            }
            Some(())
        }
        b"usage" => seen.null(2, s),
        b"message" => seen.null(3, s),
        b"content_block" => seen.null(4, s),
        _ => s.skip(1),
    })?;
    Some(ev)
}

fn anth_delta<'a>(s: &mut Scanner<'a>) -> Option<AnthDelta<'a>> {
    let (mut delta, mut seen) = (AnthDelta::default(), Seen::default());
    s.object(|s, key| match key {
        b"type" => {
            seen.first(0)?;
            delta.kind = s.opt_string()?;
            Some(())
        }
        b"text" => {
            seen.first(1)?;
            delta.text = s.text_len()?;
            Some(())
        }
        b"stop_reason" => {
            seen.first(2)?;
            s.opt_string().map(drop)
        }
        // Not declared by the full parse, which skips them: any string is the same answer.
        b"thinking" | b"partial_json" if s.peek_is(b'"') => {
            delta.unread = Some(s.unread_string()?);
            delta.unreads = delta.unreads.saturating_add(1);
            Some(())
        }
        _ => s.skip(2),
    })?;
    Some(delta)
}

/// The fields of a Responses event the answer depends on.
#[derive(Default)]
struct RespEvent<'a> {
    kind: Option<&'a [u8]>,
    /// The `delta` string's decoded length.
    delta: usize,
}

/// The classification of a Responses event that carries no `item` or `response` object and
/// is not one of the events the full parse reads further (errors, failure, completion, output
/// items), or `None`.
pub(in crate::sse) fn responses(name: Option<&[u8]>, data: &[u8]) -> Option<EventInfo> {
    responses_spanned(name, data).map(|(info, _)| info)
}

/// [`responses`], and where the delta's string is (its inner bytes): for a text or refusal
/// delta the answer for an event that differs from this one only there (and in its
/// `sequence_number`) follows from the new text's length; for a reasoning or tool-call delta
/// it is the same answer ([`super::repeat`]).
pub(super) fn responses_spanned(name: Option<&[u8]>, data: &[u8]) -> Spanned {
    if name == Some(b"error") {
        return None;
    }
    let (ev, span) = whole_spanned(data, resp_event)?;
    let text = matches!(
        name.or(ev.kind),
        Some(b"response.output_text.delta" | b"response.refusal.delta")
    );
    let info = resp_answer(name, &ev)?;
    let variable = span.and_then(|(start, end)| match info.kind {
        _ if text => Some(Variable::Text(start, end)),
        // Reasoning and tool-call deltas: the answer is the event's kind, whatever its text.
        EventKind::Reasoning | EventKind::ToolCall => Some(Variable::Unread(start, end)),
        _ => None,
    });
    Some((info, variable))
}

fn resp_answer(name: Option<&[u8]>, ev: &RespEvent<'_>) -> Option<EventInfo> {
    let kind = name.or(ev.kind).unwrap_or_default();
    Some(match kind {
        b"error"
        | b"response.failed"
        | b"response.completed"
        | b"response.incomplete"
        | b"response.output_item.added"
        | b"response.output_item.done" => return None,
        b"response.output_text.delta" | b"response.refusal.delta" => text_info(ev.delta),
        k if k.starts_with(b"response.reasoning") => EventInfo::of(EventKind::Reasoning),
        k if memchr::memmem::find(k, b"_call").is_some() => EventInfo::of(EventKind::ToolCall),
        _ => EventInfo::of(EventKind::Other),
    })
}

fn resp_event<'a>(s: &mut Scanner<'a>) -> Option<RespEvent<'a>> {
    let (mut ev, mut seen) = (RespEvent::default(), Seen::default());
    s.object(|s, key| match key {
        b"type" => {
            seen.first(0)?;
            ev.kind = s.opt_string()?;
            Some(())
        }
        b"delta" => {
            seen.first(1)?;
            ev.delta = s.text_len()?;
            Some(())
        }
        b"item" => seen.null(2, s),
        b"response" => seen.null(3, s),
        _ => s.skip(1),
    })?;
    Some(ev)
}
