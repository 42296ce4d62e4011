//! Small readers over `serde_json::Value` that turn a wrong shape into a [`TranslateError`]
//! naming the path, and writers for SSE frames and data URLs.
//!
//! Requests are read as `Value` rather than typed structs so every top-level key can be
//! accounted for: each is either translated, dropped on purpose (documented), or refused.
//! `null` is treated as absent everywhere, as the SDKs send explicit nulls for unset options.

use serde_json::{Map, Value};

use super::error::TranslateError;

pub(crate) type Obj = Map<String, Value>;
pub(crate) type Result<T> = std::result::Result<T, TranslateError>;

/// The value at `key`, unless absent or `null`.
pub(crate) fn field<'a>(m: &'a Obj, key: &str) -> Option<&'a Value> {
    m.get(key).filter(|v| !v.is_null())
}

pub(crate) fn as_obj<'a>(v: &'a Value, path: &str) -> Result<&'a Obj> {
    v.as_object()
        .ok_or_else(|| TranslateError::invalid(path, "expected an object"))
}

pub(crate) fn as_arr<'a>(v: &'a Value, path: &str) -> Result<&'a Vec<Value>> {
    v.as_array()
        .ok_or_else(|| TranslateError::invalid(path, "expected an array"))
}

pub(crate) fn as_str<'a>(v: &'a Value, path: &str) -> Result<&'a str> {
    v.as_str()
        .ok_or_else(|| TranslateError::invalid(path, "expected a string"))
}

pub(crate) fn opt_str<'a>(m: &'a Obj, key: &str, path: &str) -> Result<Option<&'a str>> {
    field(m, key)
        .map(|v| as_str(v, &join(path, key)))
        .transpose()
}

pub(crate) fn req_str<'a>(m: &'a Obj, key: &str, path: &str) -> Result<&'a str> {
    opt_str(m, key, path)?.ok_or_else(|| TranslateError::invalid(join(path, key), "required"))
}

pub(crate) fn opt_u64(m: &Obj, key: &str, path: &str) -> Result<Option<u64>> {
    field(m, key)
        .map(|v| {
            v.as_u64().ok_or_else(|| {
                TranslateError::invalid(join(path, key), "expected a non-negative integer")
            })
        })
        .transpose()
}

pub(crate) fn opt_bool(m: &Obj, key: &str, path: &str) -> Result<Option<bool>> {
    field(m, key)
        .map(|v| {
            v.as_bool()
                .ok_or_else(|| TranslateError::invalid(join(path, key), "expected a boolean"))
        })
        .transpose()
}

/// A number kept as the client wrote it, so `0.7` is not re-rounded on the way through.
pub(crate) fn opt_num(m: &Obj, key: &str, path: &str) -> Result<Option<serde_json::Number>> {
    field(m, key)
        .map(|v| match v {
            Value::Number(n) => Ok(n.clone()),
            _ => Err(TranslateError::invalid(
                join(path, key),
                "expected a number",
            )),
        })
        .transpose()
}

/// `path.key`, or `key` at the top level.
pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// `path[i]`.
pub(crate) fn idx(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// Splits `data:<media type>;base64,<data>`.
pub(crate) fn parse_data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (head, data) = rest.split_once(',')?;
    let media_type = head.strip_suffix(";base64")?;
    Some((media_type, data))
}

pub(crate) fn data_url(media_type: &str, data: &str) -> String {
    format!("data:{media_type};base64,{data}")
}

/// An SSE frame: an optional `event:` line, one `data:` line, a blank line.
pub(crate) fn frame(out: &mut Vec<u8>, event: Option<&str>, data: &Value) {
    if let Some(name) = event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"data: ");
    // Serialising a `Value` (string keys only) into a Vec cannot fail.
    out.extend_from_slice(&serde_json::to_vec(data).unwrap_or_default());
    out.extend_from_slice(b"\n\n");
}

/// Tool-call ids travel verbatim, except that Anthropic only accepts `[A-Za-z0-9_-]`: any other
/// character becomes `_`. The same rewrite applies to a call and to its result, so they still
/// match.
pub(crate) fn anthropic_tool_id(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Arguments text as Anthropic's `input` object. Text that is not a JSON object (a model's
/// malformed call) is kept under an `arguments` key rather than lost.
pub(crate) fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(o)) => Value::Object(o),
        _ if arguments.trim().is_empty() => Value::Object(Map::new()),
        _ => {
            let mut o = Map::new();
            o.insert("arguments".into(), arguments.into());
            Value::Object(o)
        }
    }
}
