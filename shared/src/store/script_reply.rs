//! Defensive parsing of script and pipeline replies.
//!
//! Why: a reply in an unexpected shape means a script version mismatch or a bug; it must turn
//! into [`StoreError::Protocol`] rather than a panic or a silently wrong default.

use redis::Value;
use serde::de::{DeserializeOwned, IntoDeserializer};

use super::error::StoreError;
use crate::Millis;

pub(crate) fn protocol(command: &'static str, message: impl Into<String>) -> StoreError {
    StoreError::Protocol {
        command,
        message: message.into(),
    }
}

/// The elements of an array reply (RESP2 array or RESP3 array/set).
pub(crate) fn array(command: &'static str, v: Value) -> Result<Vec<Value>, StoreError> {
    match v {
        Value::Array(items) | Value::Set(items) => Ok(items),
        other => Err(protocol(
            command,
            format!("expected an array, got {other:?}"),
        )),
    }
}

/// An array reply of exactly `n` elements.
pub(crate) fn array_of(
    command: &'static str,
    v: Value,
    n: usize,
) -> Result<Vec<Value>, StoreError> {
    let items = array(command, v)?;
    if items.len() != n {
        return Err(protocol(
            command,
            format!("expected {n} elements, got {}", items.len()),
        ));
    }
    Ok(items)
}

/// An integer, also accepted as a decimal bulk string (hash fields come back as strings).
pub(crate) fn int(command: &'static str, v: &Value) -> Result<i64, StoreError> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::BulkString(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .ok_or_else(|| protocol(command, format!("expected an integer, got {v:?}"))),
        Value::SimpleString(s) => s
            .trim()
            .parse::<i64>()
            .map_err(|_| protocol(command, format!("expected an integer, got {s:?}"))),
        other => Err(protocol(
            command,
            format!("expected an integer, got {other:?}"),
        )),
    }
}

/// A non-negative integer; nil reads as 0 (an absent hash field).
pub(crate) fn uint_or_zero(command: &'static str, v: &Value) -> Result<u64, StoreError> {
    if matches!(v, Value::Nil) {
        return Ok(0);
    }
    let i = int(command, v)?;
    u64::try_from(i)
        .map_err(|_| protocol(command, format!("expected a non-negative value, got {i}")))
}

pub(crate) fn u32_or_zero(command: &'static str, v: &Value) -> Result<u32, StoreError> {
    let i = uint_or_zero(command, v)?;
    u32::try_from(i).map_err(|_| protocol(command, format!("{i} does not fit in 32 bits")))
}

/// A string; nil and the empty string read as `None`.
pub(crate) fn opt_string(command: &'static str, v: &Value) -> Result<Option<String>, StoreError> {
    match v {
        Value::Nil => Ok(None),
        Value::BulkString(bytes) => {
            let s =
                std::str::from_utf8(bytes).map_err(|_| protocol(command, "expected UTF-8 text"))?;
            Ok((!s.is_empty()).then(|| s.to_owned()))
        }
        Value::SimpleString(s) => Ok((!s.is_empty()).then(|| s.clone())),
        Value::Okay => Ok(Some("OK".to_owned())),
        other => Err(protocol(
            command,
            format!("expected a string, got {other:?}"),
        )),
    }
}

/// A snake_case enum name as stored in Redis (`serde` names, so `redis-cli` output reads
/// the same as the JSON API).
pub(crate) fn enum_value<T: DeserializeOwned>(
    command: &'static str,
    s: &str,
) -> Result<T, StoreError> {
    T::deserialize(s.into_deserializer()).map_err(|e: serde::de::value::Error| {
        protocol(command, format!("unknown value {s:?}: {e}"))
    })
}

/// An optional enum: nil or empty is `None`.
pub(crate) fn opt_enum<T: DeserializeOwned>(
    command: &'static str,
    v: &Value,
) -> Result<Option<T>, StoreError> {
    opt_string(command, v)?
        .map(|s| enum_value(command, &s))
        .transpose()
}

/// The reply of `TIME` as epoch milliseconds.
pub(crate) fn time_ms(command: &'static str, v: Value) -> Result<Millis, StoreError> {
    let parts = array_of(command, v, 2)?;
    let secs = uint_or_zero(command, &parts[0])?;
    let micros = uint_or_zero(command, &parts[1])?;
    Ok(secs.saturating_mul(1000).saturating_add(micros / 1000))
}
