//! Defensive parsing of script and pipeline replies.
//!
//! Why: a reply of an unexpected shape means a version mismatch or a bug, never a reason to
//! panic a node; every helper turns it into [`StoreError::Protocol`] naming the command.

use redis::Value;

use super::error::StoreError;

pub(super) fn protocol(command: &'static str, message: impl Into<String>) -> StoreError {
    StoreError::Protocol {
        command,
        message: message.into(),
    }
}

/// An integer reply (scripts return Lua numbers as integers; some commands answer numbers as
/// strings).
pub(super) fn int(command: &'static str, value: &Value) -> Result<i64, StoreError> {
    match value {
        Value::Int(n) => Ok(*n),
        Value::BulkString(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| protocol(command, "expected an integer")),
        Value::SimpleString(s) => s
            .parse()
            .map_err(|_| protocol(command, "expected an integer")),
        _ => Err(protocol(
            command,
            format!("expected an integer, got {value:?}"),
        )),
    }
}

pub(super) fn non_negative(command: &'static str, n: i64) -> Result<u64, StoreError> {
    u64::try_from(n).map_err(|_| protocol(command, format!("negative value {n}")))
}

/// A `0`/`1` reply.
pub(super) fn flag(command: &'static str, value: &Value) -> Result<bool, StoreError> {
    match int(command, value)? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(protocol(command, format!("expected 0 or 1, got {other}"))),
    }
}

pub(super) fn array<'a>(
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

/// An array of exactly `N` integers.
pub(super) fn int_array<const N: usize>(
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

/// A string, or `None` for nil.
pub(super) fn opt_string(
    command: &'static str,
    value: &Value,
) -> Result<Option<String>, StoreError> {
    match value {
        Value::Nil => Ok(None),
        Value::BulkString(bytes) => String::from_utf8(bytes.clone())
            .map(Some)
            .map_err(|_| protocol(command, "expected UTF-8")),
        Value::SimpleString(s) => Ok(Some(s.clone())),
        Value::Int(n) => Ok(Some(n.to_string())),
        _ => Err(protocol(
            command,
            format!("expected a string, got {value:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
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
