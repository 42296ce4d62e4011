//! Any JSON value read through serde_json's own full parse, building nothing.
//!
//! Skipping a value as a raw value checks its syntax but not what only the full parse checks:
//! the nesting depth, that `\u` escapes pair their surrogates, and that numbers fit an `f64`.
//! [`Validated`] asks serde_json for every token as `serde_json::Value` does
//! (`deserialize_any`), so strings are decoded, numbers parsed and containers counted against
//! serde_json's recursion limit by the same code, and each is dropped at once: the answer is
//! the full parse's by construction, not by a second implementation of its rules.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// A value serde_json's full parse accepts; nothing of it is kept.
pub(super) struct Validated;

impl<'de> Deserialize<'de> for Validated {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Any)
    }
}

struct Any;

impl<'de> Visitor<'de> for Any {
    type Value = Validated;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Validated, E> {
        Ok(Validated)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Validated, E> {
        Ok(Validated)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Validated, E> {
        Ok(Validated)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Validated, E> {
        Ok(Validated)
    }

    /// Borrowed and unescaped strings both end here; decoding them is the surrogate check.
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Validated, E> {
        Ok(Validated)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Validated, E> {
        Ok(Validated)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Validated, A::Error> {
        while seq.next_element::<Validated>()?.is_some() {}
        Ok(Validated)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Validated, A::Error> {
        while map.next_entry::<Validated, Validated>()?.is_some() {}
        Ok(Validated)
    }
}

/// Checks a top-level field's value, kept raw, as the full parse checks it where it stands:
/// one level inside the body's object, so a container gets one level less of serde_json's
/// depth budget than it would read alone. Scalars have no depth and are read in place.
pub(super) fn check_top_level_value(value: &RawValue) -> serde_json::Result<()> {
    let text = value.get();
    if text.starts_with(['[', '{']) {
        serde_json::from_str::<Validated>(&format!("[{text}]")).map(drop)
    } else {
        serde_json::from_str::<Validated>(text).map(drop)
    }
}
