//! The top-level object of a request body, read for the few fields routing needs.
//!
//! A routing field's value is kept as a borrowed raw value (its span is spliced later) and
//! checked once more as the full parse would; every other value is read through serde_json's
//! full parse and dropped ([`Validated`]). Keys are
//! matched as they are read and never stored: a key is a transient `&str` when it
//! has escapes, and serde's `Cow<str>` would allocate a `String` for every key of every
//! request. As in serde_json's full parse, a key given twice means its last value.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::validated::{Validated, check_top_level_value};

/// The routing fields of one JSON object, each the raw value of its last occurrence.
#[derive(Debug, Default)]
pub(super) struct TopLevel<'a> {
    pub model: Option<&'a RawValue>,
    pub stream: Option<&'a RawValue>,
    pub background: Option<&'a RawValue>,
    pub metadata: Option<&'a RawValue>,
    pub session_id: Option<&'a RawValue>,
    pub prompt_cache_key: Option<&'a RawValue>,
}

/// A key, as the field it names.
enum Field {
    Model,
    Stream,
    Background,
    Metadata,
    SessionId,
    PromptCacheKey,
    Other,
}

impl Field {
    fn of(key: &str) -> Self {
        match key {
            "model" => Field::Model,
            "stream" => Field::Stream,
            "background" => Field::Background,
            "metadata" => Field::Metadata,
            "session_id" => Field::SessionId,
            "prompt_cache_key" => Field::PromptCacheKey,
            _ => Field::Other,
        }
    }
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            // Borrowed or unescaped into serde_json's scratch buffer: either way a `&str`
            // that lives only for this call, which is all matching needs.
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Field, E> {
                Ok(Field::of(key))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for TopLevel<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TopLevel<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut top = TopLevel::default();
                while let Some(field) = map.next_key::<Field>()? {
                    let slot = match field {
                        Field::Model => &mut top.model,
                        Field::Stream => &mut top.stream,
                        Field::Background => &mut top.background,
                        Field::Metadata => &mut top.metadata,
                        Field::SessionId => &mut top.session_id,
                        Field::PromptCacheKey => &mut top.prompt_cache_key,
                        Field::Other => {
                            map.next_value::<Validated>()?;
                            continue;
                        }
                    };
                    // Kept raw, so checked here as the full parse would check it; an earlier
                    // duplicate that this one replaces has been checked already.
                    let value: &RawValue = map.next_value()?;
                    check_top_level_value(value).map_err(de::Error::custom)?;
                    *slot = Some(value);
                }
                Ok(top)
            }
        }
        d.deserialize_map(V)
    }
}
