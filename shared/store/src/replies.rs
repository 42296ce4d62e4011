//! Defensive parsing of script and pipeline replies.
//!
//! Why: a reply in an unexpected shape means a script version mismatch or a bug; it must turn
//! into [`StoreError::Protocol`] rather than a panic or a silently wrong default.

use redis::Value;
use serde::de::{DeserializeOwned, IntoDeserializer};

use super::error::StoreError;
use switchyard_shared::Millis;

pub(crate) fn protocol(command: &'static str, message: impl Into<String>) -> StoreError {
    StoreError::Protocol {
        command,
        message: message.into(),
    }
}

/// The elements of an array reply (RESP2 array or RESP3 array/set).
pub(crate) fn into_array(command: &'static str, v: Value) -> Result<Vec<Value>, StoreError> {
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
    let items = into_array(command, v)?;
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
            .and_then(|s| parse_integer(s.trim()))
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

/// Lua numbers are doubles: Redis writes a huge one in exponent form (`1.2e+19`). Accept an
/// integral value written that way rather than fail on a number that is merely large.
fn parse_integer(s: &str) -> Option<i64> {
    if let Ok(i) = s.parse::<i64>() {
        return Some(i);
    }
    let f = s.parse::<f64>().ok()?;
    // The bounds are exact powers of two, so the cast below cannot wrap.
    (f.is_finite()
        && f.fract() == 0.0
        && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f))
    .then_some(f as i64)
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

pub(crate) fn array<'a>(
    command: &'static str,
    value: &'a Value,
) -> Result<&'a [Value], StoreError> {
    match value {
        Value::Array(items) | Value::Set(items) => Ok(items),
        _ => Err(protocol(
            command,
            format!("expected an array, got {value:?}"),
        )),
    }
}

pub(crate) fn non_negative(command: &'static str, n: i64) -> Result<u64, StoreError> {
    u64::try_from(n).map_err(|_| protocol(command, format!("negative value {n}")))
}

/// A `0`/`1` reply.
pub(crate) fn flag(command: &'static str, value: &Value) -> Result<bool, StoreError> {
    match int(command, value)? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(protocol(command, format!("expected 0 or 1, got {other}"))),
    }
}

/// An array of exactly `N` integers.
pub(crate) fn int_array<const N: usize>(
    command: &'static str,
    value: &Value,
) -> Result<[i64; N], StoreError> {
    let items = array(command, value)?;
    if items.len() != N {
        return Err(protocol(
            command,
            format!("expected {N} values, got {}", items.len()),
        ));
    }
    let mut out = [0i64; N];
    for (slot, item) in out.iter_mut().zip(items) {
        *slot = int(command, item)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_shared::outcome::{FailureReason, TerminalStatus};

    const C: &str = "test";

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn integers_come_as_ints_or_decimal_strings() {
        assert_eq!(int(C, &Value::Int(-3)).unwrap(), -3);
        assert_eq!(int(C, &bulk("42")).unwrap(), 42);
        assert_eq!(uint_or_zero(C, &Value::Nil).unwrap(), 0);
        assert!(matches!(
            int(C, &bulk("x")),
            Err(StoreError::Protocol { .. })
        ));
        assert!(matches!(
            uint_or_zero(C, &Value::Int(-1)),
            Err(StoreError::Protocol { .. })
        ));
        assert!(matches!(
            u32_or_zero(C, &Value::Int(1 << 40)),
            Err(StoreError::Protocol { .. })
        ));
    }

    #[test]
    fn enums_use_their_serde_names() {
        assert_eq!(
            opt_enum::<FailureReason>(C, &bulk("rate_limit_exceeded")).unwrap(),
            Some(FailureReason::RateLimitExceeded)
        );
        assert_eq!(
            opt_enum::<TerminalStatus>(C, &bulk("credits_exhausted")).unwrap(),
            Some(TerminalStatus::CreditsExhausted)
        );
        assert_eq!(opt_enum::<TerminalStatus>(C, &bulk("")).unwrap(), None);
        assert_eq!(opt_enum::<TerminalStatus>(C, &Value::Nil).unwrap(), None);
        assert!(matches!(
            opt_enum::<TerminalStatus>(C, &bulk("gone")),
            Err(StoreError::Protocol { .. })
        ));
    }

    #[test]
    fn shapes_are_checked() {
        assert!(matches!(
            into_array(C, Value::Int(1)),
            Err(StoreError::Protocol { .. })
        ));
        assert!(matches!(
            array_of(C, Value::Array(vec![Value::Nil]), 2),
            Err(StoreError::Protocol { .. })
        ));
        assert_eq!(
            time_ms(C, Value::Array(vec![bulk("1700000000"), bulk("123456")])).unwrap(),
            1_700_000_000_123
        );
        assert!(matches!(
            time_ms(C, Value::Nil),
            Err(StoreError::Protocol { .. })
        ));
    }
}

#[cfg(test)]
mod shape_tests {
    use super::*;

    #[test]
    fn odd_shapes_are_protocol_errors_not_panics() {
        assert!(matches!(
            int("t", &Value::Nil),
            Err(StoreError::Protocol { .. })
        ));
        assert!(matches!(
            flag("t", &Value::Int(2)),
            Err(StoreError::Protocol { .. })
        ));
        assert!(int_array::<3>("t", &Value::Array(vec![Value::Int(1)])).is_err());
        assert!(array("t", &Value::Okay).is_err());
        assert!(opt_string("t", &Value::BulkString(vec![0xff])).is_err());
        assert!(non_negative("t", -1).is_err());
    }

    #[test]
    fn numbers_as_strings_are_accepted() {
        assert_eq!(int("t", &Value::BulkString(b"42".to_vec())), Ok(42));
        assert_eq!(
            int_array::<2>("t", &Value::Array(vec![Value::Int(1), Value::Int(7)])),
            Ok([1, 7])
        );
        assert_eq!(opt_string("t", &Value::Nil), Ok(None));
    }
}
