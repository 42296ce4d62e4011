//! The slow, obviously right reading of a request body, to test [`super::scan`] against.
//!
//! It parses the whole body into a `serde_json::Value` (the full parse the fast scan must
//! agree with) and reads the routing fields from the tree. It is public only for the
//! differential fuzz target; the node never calls it.

use serde_json::Value;

use super::{BodyError, BodyFields, MAX_MODEL_LEN};

/// The routing fields both readings must agree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routing {
    pub model: String,
    pub stream: bool,
    pub background: bool,
    pub session_key: Option<String>,
}

impl From<&BodyFields> for Routing {
    fn from(f: &BodyFields) -> Self {
        Self {
            model: f.model.clone(),
            stream: f.stream,
            background: f.background,
            session_key: f.session_key.clone(),
        }
    }
}

/// The reference reading: the same answers as [`super::scan`], the slow way.
pub fn scan(raw: &[u8]) -> Result<Routing, BodyError> {
    let doc: Value = serde_json::from_slice(raw).map_err(|e| {
        BodyError::new(
            "invalid_json",
            format!("Request body is not valid JSON: {e}"),
        )
    })?;
    let Value::Object(top) = doc else {
        return Err(BodyError::new("invalid_json", "not an object"));
    };
    let model = match top.get("model") {
        None => return Err(BodyError::new("missing_model", "`model` is required")),
        Some(Value::String(m)) => m.clone(),
        Some(_) => return Err(BodyError::new("invalid_model", "not a string")),
    };
    if model.is_empty() || model.len() > MAX_MODEL_LEN {
        return Err(BodyError::new("invalid_model", "length"));
    }
    let flag = |name: &str| match top.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(BodyError::new("invalid_parameter", name.to_owned())),
    };
    let stream = flag("stream")?;
    let background = flag("background")?;
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let session_key = text(top.get("metadata").and_then(|m| m.get("session_id")))
        .or_else(|| text(top.get("session_id")))
        .or_else(|| text(top.get("prompt_cache_key")));
    Ok(Routing {
        model,
        stream,
        background,
        session_key,
    })
}

/// Where the fast scan and the reference disagree on `raw`, if they do: both refuse it with
/// the same `code`, or both accept it with the same routing fields.
pub fn disagreement(raw: &[u8]) -> Option<String> {
    match (super::scan(raw), scan(raw)) {
        (Ok(fast), Ok(slow)) => {
            let fast = Routing::from(&fast);
            (fast != slow).then(|| format!("fields differ: fast {fast:?}, full parse {slow:?}"))
        }
        (Err(fast), Err(slow)) => (fast.code != slow.code).then(|| {
            format!(
                "codes differ: fast {} ({}), full parse {} ({})",
                fast.code, fast.message, slow.code, slow.message
            )
        }),
        (Ok(fast), Err(slow)) => Some(format!(
            "fast scan accepts {fast:?}, full parse refuses: {} ({})",
            slow.code, slow.message
        )),
        (Err(fast), Ok(slow)) => Some(format!(
            "fast scan refuses ({}: {}), full parse accepts {slow:?}",
            fast.code, fast.message
        )),
    }
}
