//! The plain Chat Completions answer (no fault, no agent script), serialised once per shape
//! and then copied with a fresh id and timestamp.
//!
//! The mock is the benchmark's upstream as well as a test fixture, and on its plain path it
//! should cost about what a bare hyper server answering fixed bytes costs. Serialising the
//! same answer with serde for every request (23 frames for a 20-chunk stream) was most of
//! its work. The answer depends only on the model, the chunk count, the input-token estimate
//! and `include_usage`, apart from the completion id and `created`, which have a fixed width
//! and are written over a copy of the cached bytes.

use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};

use super::ids;
use super::lock;
use super::wire::{Reply, openai};

/// Shapes kept; the oldest is dropped beyond this, so varied traffic cannot grow the cache.
const MAX_TEMPLATES: usize = 32;
/// The id field as serde writes it; the key is part of the pattern so that a model named
/// `chatcmpl-…` is never taken for an id.
const ID_KEY: &[u8] = b"\"id\":\"";
const CREATED_KEY: &[u8] = b"\"created\":";

/// One cached answer and where its varying fields sit.
struct Template {
    stream: bool,
    model: String,
    input_tokens: u64,
    chunks: u32,
    include_usage: bool,
    bytes: Bytes,
    /// Offsets of each completion id (after the opening quote).
    id_at: Vec<usize>,
    id_len: usize,
    /// Offsets of each `created` value, all `created_len` digits wide.
    created_at: Vec<usize>,
    created_len: usize,
}

impl Template {
    fn fits(&self, reply: &Reply, stream: bool) -> bool {
        self.stream == stream
            && self.chunks == reply.chunks
            && self.input_tokens == reply.input_tokens
            && self.include_usage == reply.include_usage
            && self.model == reply.model
    }

    /// Finds the id and `created` fields of freshly serialised bytes; `None` when they are
    /// not where expected or not all the same width.
    fn build(reply: &Reply, stream: bool) -> Option<Self> {
        let bytes = render(reply, stream);
        let mut id_at = Vec::new();
        let mut id_len = None;
        for start in find_all(&bytes, ID_KEY) {
            let at = start + ID_KEY.len();
            let len = bytes.get(at..)?.iter().position(|&b| b == b'"')?;
            if *id_len.get_or_insert(len) != len {
                return None;
            }
            id_at.push(at);
        }
        let mut created_at = Vec::new();
        let mut created_len = None;
        for start in find_all(&bytes, CREATED_KEY) {
            let at = start + CREATED_KEY.len();
            let len = bytes.get(at..)?.iter().position(|b| !b.is_ascii_digit())?;
            if *created_len.get_or_insert(len) != len {
                return None;
            }
            created_at.push(at);
        }
        Some(Self {
            stream,
            model: reply.model.clone(),
            input_tokens: reply.input_tokens,
            chunks: reply.chunks,
            include_usage: reply.include_usage,
            bytes,
            id_at,
            id_len: id_len?,
            created_at,
            created_len: created_len?,
        })
    }

    /// A copy with a new id and the current time; `None` if either has another width.
    fn fill(&self) -> Option<Bytes> {
        let id = ids::chat_completion();
        let created = ids::unix_now().to_string();
        if id.len() != self.id_len || created.len() != self.created_len {
            return None;
        }
        let mut out = BytesMut::from(&self.bytes[..]);
        for &at in &self.id_at {
            out.get_mut(at..at + id.len())?
                .copy_from_slice(id.as_bytes());
        }
        for &at in &self.created_at {
            out.get_mut(at..at + created.len())?
                .copy_from_slice(created.as_bytes());
        }
        Some(out.freeze())
    }
}

fn find_all<'a>(hay: &'a [u8], needle: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    hay.windows(needle.len())
        .enumerate()
        .filter(move |(_, w)| *w == needle)
        .map(|(i, _)| i)
}

/// The answer serialised afresh: the JSON body, or every SSE frame back to back.
fn render(reply: &Reply, stream: bool) -> Bytes {
    if !stream {
        return openai::chat_json(reply);
    }
    let frames = openai::chat_frames(reply);
    let mut out = BytesMut::with_capacity(frames.iter().map(|f| f.bytes.len()).sum());
    for f in &frames {
        out.extend_from_slice(&f.bytes);
    }
    out.freeze()
}

/// Cached plain Chat Completions answers.
#[derive(Default)]
pub(crate) struct PlainAnswers {
    templates: Mutex<Vec<Arc<Template>>>,
}

impl PlainAnswers {
    /// Whether `reply` is the plain generated answer this cache serves.
    pub(crate) fn serves(reply: &Reply) -> bool {
        reply.reasoning_chunks == 0 && reply.tool_call.is_none() && reply.script_text.is_none()
    }

    /// The answer to `reply` (a plain one, see [`Self::serves`]): the JSON body, or the whole
    /// SSE stream as one buffer.
    pub(crate) fn answer(&self, reply: &Reply, stream: bool) -> Bytes {
        let cached = lock(&self.templates)
            .iter()
            .find(|t| t.fits(reply, stream))
            .cloned();
        let template = match cached {
            Some(t) => t,
            None => {
                let Some(t) = Template::build(reply, stream).map(Arc::new) else {
                    return render(reply, stream);
                };
                let mut templates = lock(&self.templates);
                if templates.len() >= MAX_TEMPLATES {
                    templates.remove(0);
                }
                templates.push(Arc::clone(&t));
                t
            }
        };
        template.fill().unwrap_or_else(|| render(reply, stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(chunks: u32) -> Reply {
        Reply {
            model: "chatcmpl-as-a-model-name".to_owned(),
            input_tokens: 7,
            chunks,
            reasoning_chunks: 0,
            tool_call: None,
            include_usage: true,
            script_text: None,
        }
    }

    fn ids_of(bytes: &[u8]) -> Vec<String> {
        let text = std::str::from_utf8(bytes).unwrap_or_default();
        text.match_indices("\"id\":\"")
            .map(|(i, _)| text[i + 6..].split('"').next().unwrap_or("").to_owned())
            .collect()
    }

    #[test]
    fn cached_answers_equal_fresh_ones_but_for_id_and_time() {
        let cache = PlainAnswers::default();
        for stream in [false, true] {
            let a = cache.answer(&reply(5), stream);
            assert!(String::from_utf8_lossy(&a).contains("\"model\":\"chatcmpl-as-a-model-name\""));
            let b = cache.answer(&reply(5), stream);
            let fresh = render(&reply(5), stream);
            assert_eq!(a.len(), fresh.len());
            let (ia, ib) = (ids_of(&a), ids_of(&b));
            assert!(!ia.is_empty() && ia[0].starts_with("chatcmpl-"));
            // One id per answer, used by every frame, and a new one per answer.
            assert!(ia.iter().all(|i| *i == ia[0]) && ib.iter().all(|i| *i == ib[0]));
            assert_ne!(ia[0], ib[0]);
            assert_eq!(ia.len(), ids_of(&fresh).len());
            // Apart from the id, byte for byte the fresh answer (within the same second).
            let blank = |b: &[u8], id: &str| String::from_utf8_lossy(b).replace(id, "ID");
            let fresh_id = ids_of(&fresh)[0].clone();
            if blank(&a, &ia[0]).len() == blank(&fresh, &fresh_id).len() {
                let (x, y) = (blank(&a, &ia[0]), blank(&fresh, &fresh_id));
                let strip = |s: &str| {
                    s.split("\"created\":")
                        .map(|p| p.trim_start_matches(|c: char| c.is_ascii_digit()))
                        .collect::<Vec<_>>()
                        .join("")
                };
                assert_eq!(strip(&x), strip(&y));
            }
        }
    }

    #[test]
    fn shapes_are_kept_apart_and_bounded() {
        let cache = PlainAnswers::default();
        let short = cache.answer(&reply(1), false);
        let long = cache.answer(&reply(9), false);
        assert!(long.len() > short.len());
        for n in 0..(MAX_TEMPLATES as u32 + 5) {
            let _ = cache.answer(&reply(n), true);
        }
        assert!(lock(&cache.templates).len() <= MAX_TEMPLATES);
    }
}
