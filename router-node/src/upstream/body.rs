//! Reading whole (non-stream) bodies with caps and deadlines, and what a JSON body says.
//!
//! Nothing upstream is trusted to end: every read is bounded by a byte cap, by the gap
//! between chunks (the idle timeout) and by an absolute deadline. A body is probed for an
//! error object without building a JSON tree: serde skips every field it does not declare.

use std::borrow::Cow;
use switchyard_shared::classify;

use bytes::{Bytes, BytesMut};
use serde::Deserialize;
use serde_json::value::RawValue;
use switchyard_shared::Millis;
use switchyard_shared::sse::{Usage, WireUsage};

use crate::clock::Clock;
use crate::transport::{RespBody, TransportError};

/// A successful JSON body larger than this fails the attempt.
pub(super) const MAX_JSON_BODY_BYTES: usize = 64 << 20;
/// Error bodies (and in-band error events) are kept up to this size for classification.
pub(super) const MAX_ERROR_BODY_BYTES: usize = 64 << 10;

/// How a body read stopped early.
#[derive(Debug)]
pub(super) enum ReadStop {
    /// More than the cap arrived (only when the read does not truncate).
    TooLarge,
    /// The absolute limit passed.
    Deadline,
    /// No chunk within the idle gap.
    Idle { after_ms: Millis },
    /// The transport failed.
    Transport(TransportError),
}

/// Bounds of one body read.
#[derive(Debug, Clone, Copy)]
pub(super) struct ReadLimits {
    pub cap: usize,
    /// Keep the first `cap` bytes and stop, instead of failing with [`ReadStop::TooLarge`].
    pub truncate: bool,
    /// Absolute limit on the node clock.
    pub until: Option<Millis>,
    /// Longest gap between chunks; `0` = none.
    pub idle_ms: Millis,
}

/// Reads `resp`'s body within `limits`; returns what arrived, and why it stopped early if it
/// did. A single-chunk body is returned without copying.
pub(super) async fn read_body(
    resp: &mut RespBody,
    limits: ReadLimits,
    clock: &Clock,
) -> (Bytes, Option<ReadStop>) {
    let mut first: Option<Bytes> = None;
    let mut joined: Option<BytesMut> = None;
    let mut len = 0usize;
    let stop = loop {
        let now = clock.now();
        let idle_at = (limits.idle_ms > 0).then(|| now.saturating_add(limits.idle_ms));
        let wake = min_opt(limits.until, idle_at);
        let next = match wake {
            Some(at) => {
                match tokio::time::timeout_at(clock.instant_at(at).into(), resp.next_chunk()).await
                {
                    Ok(next) => next,
                    Err(_) if limits.until.is_some_and(|u| clock.now() >= u) => {
                        break Some(ReadStop::Deadline);
                    }
                    Err(_) => {
                        break Some(ReadStop::Idle {
                            after_ms: limits.idle_ms,
                        });
                    }
                }
            }
            None => resp.next_chunk().await,
        };
        let chunk = match next {
            Some(Ok(chunk)) => chunk,
            None => break None,
            Some(Err(e)) => break Some(ReadStop::Transport(e)),
        };
        let room = limits.cap - len;
        let (chunk, over) = if chunk.len() > room {
            (chunk.slice(..room), true)
        } else {
            (chunk, false)
        };
        len += chunk.len();
        match (&mut first, &mut joined) {
            (None, _) => first = Some(chunk),
            (Some(head), None) => {
                let mut buf = BytesMut::with_capacity(head.len() + chunk.len());
                buf.extend_from_slice(head);
                buf.extend_from_slice(&chunk);
                joined = Some(buf);
            }
            (Some(_), Some(buf)) => buf.extend_from_slice(&chunk),
        }
        if over {
            break (!limits.truncate).then_some(ReadStop::TooLarge);
        }
    };
    let body = match (joined, first) {
        (Some(buf), _) => buf.freeze(),
        (None, Some(head)) => head,
        (None, None) => Bytes::new(),
    };
    (body, stop)
}

/// The earlier of two optional instants.
pub(super) fn min_opt(a: Option<Millis>, b: Option<Millis>) -> Option<Millis> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Lossy UTF-8 of at most `max` bytes of `bytes`.
pub(super) fn lossy_prefix(bytes: &[u8], max: usize) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(max)]).into_owned()
}

/// What a successful-status JSON body says about itself.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct BodyProbe {
    /// A top-level `error` object, or Anthropic's `{"type":"error"}`.
    pub is_error: bool,
    pub usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
    usage: Option<WireUsage>,
}

/// Probes a `2xx` JSON body. Unparseable bodies are not errors here: they are forwarded, and
/// the client's SDK reports them. `"error": null` (the Responses API always has the field)
/// is not an error.
///
/// An ordinary answer (no `error` field, plain usage counters) is read by a byte scanner
/// that is as strict as serde (`sse::inspect::body`); anything else takes the serde probe.
pub(super) fn probe_json(body: &[u8]) -> BodyProbe {
    match switchyard_shared::sse::inspect::body::probe(body) {
        Some(facts) => BodyProbe {
            is_error: facts.typed_error,
            usage: facts.usage,
        },
        None => probe_json_full(body),
    }
}

/// The serde probe: every body the scanner is not sure of.
fn probe_json_full(body: &[u8]) -> BodyProbe {
    let Ok(probe) = serde_json::from_slice::<Probe<'_>>(body) else {
        return BodyProbe::default();
    };
    // An error object; or an error string that names an unknown route (LM Studio answers one
    // with a 200 `{"error":"Unexpected endpoint or method. (POST …)"}`). Other strings under
    // `error` may be content.
    let error_object = probe.error.is_some_and(|raw| {
        let raw = raw.get().trim_start();
        raw.starts_with('{')
            || (raw.starts_with('"')
                && classify::in_band_status_of(&String::from_utf8_lossy(body)) == Some(404))
    });
    BodyProbe {
        is_error: error_object || probe.kind.as_deref() == Some("error"),
        usage: probe.usage.map(Usage::from),
    }
}

#[cfg(test)]
mod tests {
    use super::{probe_json, probe_json_full};

    const BODIES: &[&str] = &[
        r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi \"there\"\n"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":4}}}"#,
        r#"{"type":"message","content":[{"type":"text","text":"Hi"}],"usage":{"input_tokens":3,"output_tokens":1,"cache_read_input_tokens":2}}"#,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"x"}}"#,
        r#"{"error":"Unexpected endpoint or method. (POST /v1/chat/completions)"}"#,
        r#"{"object":"response","error":null,"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":1},"output_tokens":2}}"#,
    ];

    /// The scanner and serde agree on every body one byte away from ordinary answers (each
    /// byte removed, and each of a few structural bytes inserted at every position).
    #[test]
    fn fast_probe_agrees_with_serde_on_mutated_bodies() {
        let inserts = [
            b'"', b'\\', b'{', b'}', b',', b'0', b'.', b'-', b' ', 0x01, 0xc3,
        ];
        let mut checked = 0;
        for body in BODIES {
            let body = body.as_bytes();
            assert_eq!(probe_json(body), probe_json_full(body));
            for at in 0..body.len() {
                let mut cut = body.to_vec();
                cut.remove(at);
                assert_eq!(
                    probe_json(&cut),
                    probe_json_full(&cut),
                    "{}",
                    String::from_utf8_lossy(&cut)
                );
                for b in inserts {
                    let mut grown = body.to_vec();
                    grown.insert(at, b);
                    assert_eq!(
                        probe_json(&grown),
                        probe_json_full(&grown),
                        "{}",
                        String::from_utf8_lossy(&grown)
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 2_000);
        assert!(switchyard_shared::sse::inspect::body::probe(BODIES[0].as_bytes()).is_some());
    }
}
