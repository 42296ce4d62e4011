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
/// Width of `created` (Unix seconds) until the year 2286; answers are built afresh after.
const CREATED_LEN: usize = 10;
/// The template is copied in pieces of at most this many bytes: `memcpy` copies those with
/// vector moves, and longer ones with `rep movsb`, which callgrind counts byte by byte.
const COPY_PIECE: usize = 1024;

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
    /// Where each id and `created` value starts.
    holes: Vec<(usize, Hole)>,
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
        for start in find_all(&bytes, CREATED_KEY) {
            let at = start + CREATED_KEY.len();
            let len = bytes.get(at..)?.iter().position(|b| !b.is_ascii_digit())?;
            if len != CREATED_LEN {
                return None;
            }
            holes.push((at, len, Hole::Created));
        }
        if !holes.iter().any(|h| h.2 == Hole::Id) {
            return None;
        }
        Some(Self {
            stream: shape.stream,
            model: shape.model.to_owned(),
            input_tokens: shape.input_tokens,
            chunks: shape.chunks,
            include_usage: shape.include_usage,
            bytes,
            holes: holes.into_iter().map(|(at, _, hole)| (at, hole)).collect(),
        })
    }

    /// The answer with a new id and the current time; `None` if the time has another width.
    /// The template is copied whole, then each field is written over its copy with a
    /// fixed-size store.
    fn fill(&self) -> Option<Bytes> {
        let id = ids::chat_completion_bytes();
        let (digits, start) = ids::decimal(ids::unix_now());
        let created: [u8; CREATED_LEN] = digits.get(start..)?.try_into().ok()?;
        Some(arena::bytes(self.bytes.len(), |out| {
            let base = out.len();
            for piece in self.bytes.chunks(COPY_PIECE) {
                out.extend_from_slice(piece);
            }
            for &(at, hole) in &self.holes {
                let at = base + at;
                match hole {
                    Hole::Id => put(out, at, &id),
                    Hole::Created => put(out, at, &created),
                }
            }
        }))
    }
}

/// Writes `value` at `at` (inside the buffer, checked when the template was built).
fn put<const N: usize>(out: &mut [u8], at: usize, value: &[u8; N]) {
    if let Some(slot) = out
        .get_mut(at..at + N)
        .and_then(|s| <&mut [u8; N]>::try_from(s).ok())
    {
        *slot = *value;
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
