//! JSON pieces every wire format shares: value sizes, usage and error objects.
//!
//! Only the fields the rules need are declared; serde skips the rest without allocating.
//! Strings whose content matters only by size are read through [`Shape`], which measures a
//! JSON value without keeping it.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::inspect::{EventInfo, EventKind, UpstreamStreamError, Usage};

/// The size of a JSON value: UTF-8 length for strings, and whether it is non-empty.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Shape {
    pub(super) text: usize,
    pub(super) present: bool,
}

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ShapeVisitor)
    }
}

struct ShapeVisitor;

impl<'de> Visitor<'de> for ShapeVisitor {
    type Value = Shape;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E>(self, v: &str) -> Result<Shape, E> {
        Ok(Shape {
            text: v.len(),
            present: !v.is_empty(),
        })
    }
    fn visit_unit<E>(self) -> Result<Shape, E> {
        Ok(Shape::default())
    }
    fn visit_bool<E>(self, _: bool) -> Result<Shape, E> {
        Ok(Shape {
            text: 0,
            present: true,
        })
    }
    fn visit_i64<E>(self, _: i64) -> Result<Shape, E> {
        Ok(Shape {
            text: 0,
            present: true,
        })
    }
    fn visit_u64<E>(self, _: u64) -> Result<Shape, E> {
        Ok(Shape {
            text: 0,
            present: true,
        })
    }
    fn visit_f64<E>(self, _: f64) -> Result<Shape, E> {
        Ok(Shape {
            text: 0,
            present: true,
        })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
        let mut present = false;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            present = true;
        }
        Ok(Shape { text: 0, present })
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shape, A::Error> {
        let mut present = false;
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
            present = true;
        }
        Ok(Shape { text: 0, present })
    }
}

/// Usage under every format's field names (chat, responses, messages); deserialize it from a
/// `usage` object and convert it `into()` [`Usage`].
#[derive(Debug, Deserialize)]
pub struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<CachedDetails>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    input_tokens_details: Option<CachedDetails>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct CachedDetails {
    cached_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(w: WireUsage) -> Self {
        let cached = |d: Option<CachedDetails>| d.and_then(|d| d.cached_tokens);
        Usage {
            input: w.input_tokens.or(w.prompt_tokens),
            output: w.output_tokens.or(w.completion_tokens),
            cache_read: w
                .cache_read_input_tokens
                .or(cached(w.prompt_tokens_details))
                .or(cached(w.input_tokens_details)),
            cache_creation: w.cache_creation_input_tokens,
        }
    }
}

/// An error object: `{"type","message","code"}`, possibly nested under `error`.
#[derive(Deserialize)]
pub(super) struct WireError<'a> {
    #[serde(rename = "type", borrow)]
    error_type: Option<Cow<'a, str>>,
    #[serde(borrow)]
    message: Option<Cow<'a, str>>,
    code: Option<serde_json::Value>,
    #[serde(borrow)]
    error: Option<Box<WireError<'a>>>,
}

impl WireError<'_> {
    /// Prefers the nested object; a top-level `type` of `error` is an event tag, not a type.
    pub(super) fn into_error(self) -> UpstreamStreamError {
        if let Some(inner) = self.error {
            return inner.into_error();
        }
        // A textual code (`server_error`) doubles as the type when none is given; a numeric
        // one (an HTTP status) does not.
        let (code, text_code) = match self.code {
            Some(serde_json::Value::String(s)) => (Some(s.clone()), Some(s)),
            Some(serde_json::Value::Number(n)) => (Some(n.to_string()), None),
            _ => (None, None),
        };
        let error_type = match self.error_type.as_deref() {
            Some(t) if t != "error" && !t.is_empty() => t.to_owned(),
            _ => text_code.unwrap_or_else(|| "stream_error".to_owned()),
        };
        UpstreamStreamError::new(&error_type, self.message.as_deref().unwrap_or(""), code)
    }
}

pub(super) fn error_info(data: &[u8]) -> EventInfo {
    let error = match serde_json::from_slice::<WireError<'_>>(data) {
        Ok(wire) => wire.into_error(),
        Err(_) => UpstreamStreamError::raw(data),
    };
    EventInfo {
        error: Some(error),
        ..EventInfo::of(EventKind::Error)
    }
}

#[derive(Deserialize)]
pub(super) struct Typed<'a> {
    #[serde(rename = "type", borrow)]
    pub(super) kind: Option<Cow<'a, str>>,
}
