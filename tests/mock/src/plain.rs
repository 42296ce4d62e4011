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

use super::arena;
use super::ids;
use super::lock;
use super::wire::{Reply, openai};

/// Shapes kept; the oldest is dropped beyond this, so varied traffic cannot grow the cache.
const MAX_TEMPLATES: usize = 32;
/// The id field as serde writes it; the key is part of the pattern so that a model named
/// `chatcmpl-…` is never taken for an id.
const ID_KEY: &[u8] = b"\"id\":\"";
const CREATED_KEY: &[u8] = b"\"created\":";

/// What a plain answer depends on, borrowed from the request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape<'a> {
    pub(crate) stream: bool,
    pub(crate) model: &'a str,
    pub(crate) input_tokens: u64,
    pub(crate) chunks: u32,
    pub(crate) include_usage: bool,
}

impl Shape<'_> {
    /// The generated answer this shape stands for.
    pub(crate) fn reply(&self) -> Reply {
        Reply {
            model: self.model.to_owned(),
            input_tokens: self.input_tokens,
            chunks: self.chunks,
            reasoning_chunks: 0,
            tool_call: None,
            include_usage: self.include_usage,
            script_text: None,
        }
    }
}

/// A field written per answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hole {
    Id,
    Created,
}

/// One cached answer: the fixed bytes between its varying fields.
struct Template {
    stream: bool,
    model: String,
    input_tokens: u64,
    chunks: u32,
    include_usage: bool,
    bytes: Bytes,
    /// Fixed runs `bytes[start..end]`, each followed by its hole (the last by none).
    runs: Vec<(usize, usize, Option<Hole>)>,
    /// Width of the `created` value when the template was made; another width (in 2286)
    /// falls back to serialising afresh.
    created_len: usize,
}

impl Template {
    fn fits(&self, shape: &Shape<'_>) -> bool {
        self.stream == shape.stream
            && self.chunks == shape.chunks
            && self.input_tokens == shape.input_tokens
            && self.include_usage == shape.include_usage
            && self.model == shape.model
    }

    /// Finds the id and `created` fields of freshly serialised bytes; `None` when they are
    /// not where expected or not all the same width.
    fn build(shape: &Shape<'_>) -> Option<Self> {
        let bytes = render(&shape.reply(), shape.stream);
        let mut holes = Vec::new();
        for start in find_all(&bytes, ID_KEY) {
            let at = start + ID_KEY.len();
            let len = bytes.get(at..)?.iter().position(|&b| b == b'"')?;
            if len != ids::CHAT_COMPLETION_LEN {
                return None;
            }
            holes.push((at, len, Hole::Id));
        }
        let mut created_len = None;
        for start in find_all(&bytes, CREATED_KEY) {
            let at = start + CREATED_KEY.len();
            let len = bytes.get(at..)?.iter().position(|b| !b.is_ascii_digit())?;
            if *created_len.get_or_insert(len) != len {
                return None;
            }
            holes.push((at, len, Hole::Created));
        }
        holes.sort_unstable_by_key(|h| h.0);
        let mut runs = Vec::with_capacity(holes.len() + 1);
        let mut from = 0;
        for (at, len, hole) in holes {
            if at < from {
                return None;
            }
            runs.push((from, at, Some(hole)));
            from = at + len;
        }
        runs.push((from, bytes.len(), None));
        Some(Self {
            stream: shape.stream,
            model: shape.model.to_owned(),
            input_tokens: shape.input_tokens,
            chunks: shape.chunks,
            include_usage: shape.include_usage,
            bytes,
            runs,
            created_len: created_len?,
        })
    }

    /// The answer with a new id and the current time; `None` if the time has another width.
    /// The fixed runs are copied one by one between the fields: one pass over the bytes,
    /// and copies short enough for the vector loop of `memcpy`.
    fn fill(&self) -> Option<Bytes> {
        let id = ids::chat_completion_bytes();
        let (digits, start) = ids::decimal(ids::unix_now());
        let created = digits.get(start..)?;
        if created.len() != self.created_len {
            return None;
        }
        Some(arena::bytes(self.bytes.len(), |out| {
            for &(from, to, hole) in &self.runs {
                out.extend_from_slice(self.bytes.get(from..to).unwrap_or_default());
                match hole {
                    Some(Hole::Id) => out.extend_from_slice(&id),
                    Some(Hole::Created) => out.extend_from_slice(created),
                    None => {}
                }
            }
        }))
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
    #[cfg(test)]
    pub(crate) fn serves(reply: &Reply) -> bool {
        reply.reasoning_chunks == 0 && reply.tool_call.is_none() && reply.script_text.is_none()
    }

    /// The plain answer of this shape: the JSON body, or the whole SSE stream as one buffer.
    pub(crate) fn answer(&self, shape: &Shape<'_>) -> Bytes {
        let cached = lock(&self.templates)
            .iter()
            .find(|t| t.fits(shape))
            .cloned();
        let template = match cached {
            Some(t) => t,
            None => {
                let Some(t) = Template::build(shape).map(Arc::new) else {
                    return render(&shape.reply(), shape.stream);
                };
                let mut templates = lock(&self.templates);
                if templates.len() >= MAX_TEMPLATES {
                    templates.remove(0);
                }
                templates.push(Arc::clone(&t));
                t
            }
        };
        template
            .fill()
            .unwrap_or_else(|| render(&shape.reply(), shape.stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(chunks: u32, stream: bool) -> Shape<'static> {
        Shape {
            stream,
            model: "chatcmpl-as-a-model-name",
            input_tokens: 7,
            chunks,
            include_usage: true,
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
            assert!(PlainAnswers::serves(&shape(5, stream).reply()));
            let a = cache.answer(&shape(5, stream));
            assert!(String::from_utf8_lossy(&a).contains("\"model\":\"chatcmpl-as-a-model-name\""));
            let b = cache.answer(&shape(5, stream));
            let fresh = render(&shape(5, stream).reply(), stream);
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
        let short = cache.answer(&shape(1, false));
        let long = cache.answer(&shape(9, false));
        assert!(long.len() > short.len());
        for n in 0..(MAX_TEMPLATES as u32 + 5) {
            let _ = cache.answer(&shape(n, true));
        }
        assert!(lock(&cache.templates).len() <= MAX_TEMPLATES);
    }
}
