//! Strict request bodies and ids.
//!
//! A non-JSON content type is 415, a body over the limit is 413, a syntax error, wrong type or
//! unknown field (the body types deny unknown fields) is 400 naming the field, and an empty
//! body is "no body", which each endpoint accepts or refuses (400 `missing_body`). Ids taken
//! from a path or body are short and printable and never contain `/`, `%` or `..`.

use serde::de::DeserializeOwned;

use super::AdminError;

/// 415 unless the `Content-Type` value (if any) is `application/json` (parameters allowed).
pub fn check_content_type(content_type: Option<&str>) -> Result<(), AdminError> {
    let Some(ct) = content_type else {
        return Ok(());
    };
    let essence = ct.split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(AdminError::new(
            415,
            "invalid_request_error",
            "unsupported_media_type",
            "The request body must be application/json",
        ))
    }
}

/// 413 `payload_too_large` for a body over `max_bytes`.
pub fn too_large(max_bytes: usize) -> AdminError {
    AdminError::new(
        413,
        "invalid_request_error",
        "payload_too_large",
        format!("Request body exceeds the limit of {max_bytes} bytes"),
    )
}

/// 413 when `len` is over `max_bytes`.
pub fn check_size(len: usize, max_bytes: usize) -> Result<(), AdminError> {
    if len > max_bytes {
        Err(too_large(max_bytes))
    } else {
        Ok(())
    }
}

/// The body as text (400 `invalid_json` when it is not UTF-8).
pub fn text(raw: &[u8]) -> Result<&str, AdminError> {
    std::str::from_utf8(raw)
        .map_err(|_| AdminError::bad_request("invalid_json", "The body is not UTF-8 JSON"))
}

/// Parses a JSON body strictly; an empty (all-whitespace) body is `Ok(None)`.
pub fn parse<T: DeserializeOwned>(raw: &[u8]) -> Result<Option<T>, AdminError> {
    if raw.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let mut de = serde_json::Deserializer::from_slice(raw);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        let message = e.into_inner().to_string();
        AdminError::bad_request(
            "invalid_request",
            format!("Invalid request body: {message}"),
        )
        .with_details([(field, message)])
    })?;
    de.end().map_err(|e| {
        AdminError::bad_request("invalid_json", format!("Invalid request body: {e}"))
    })?;
    Ok(Some(value))
}

/// Like [`parse`], but an empty body is 400 `missing_body`.
pub fn require<T: DeserializeOwned>(raw: &[u8]) -> Result<T, AdminError> {
    parse(raw)?.ok_or_else(missing_body)
}

/// 400 `missing_body`.
pub fn missing_body() -> AdminError {
    AdminError::bad_request("missing_body", "A JSON request body is required")
}

/// 400 `invalid_id` unless `id` is 1 to 128 of `[A-Za-z0-9-_.:@]` without `..`.
pub fn check_id(id: &str, what: &str) -> Result<(), AdminError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && !id.contains("..")
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'@'));
    if ok {
        Ok(())
    } else {
        Err(AdminError::bad_request(
            "invalid_id",
            format!("Invalid {what} id"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Body {
        provider: String,
        n: Option<u32>,
    }

    #[test]
    fn content_type_must_be_json_when_given() {
        assert!(check_content_type(None).is_ok());
        assert!(check_content_type(Some("application/json; charset=utf-8")).is_ok());
        assert!(check_content_type(Some("Application/JSON")).is_ok());
        let e = check_content_type(Some("text/plain")).unwrap_err();
        assert_eq!((e.status, e.code.as_str()), (415, "unsupported_media_type"));
    }

    #[test]
    fn size_is_capped() {
        assert!(check_size(10, 10).is_ok());
        let e = check_size(11, 10).unwrap_err();
        assert_eq!((e.status, e.code.as_str()), (413, "payload_too_large"));
    }

    #[test]
    fn bodies_are_strict_and_name_the_field() {
        assert_eq!(parse::<Body>(b"  \n").unwrap(), None);
        assert_eq!(
            require::<Body>(br#"{"provider":"p"}"#).unwrap(),
            Body {
                provider: "p".into(),
                n: None
            }
        );
        assert_eq!(require::<Body>(b"").unwrap_err().code, "missing_body");
        let unknown = require::<Body>(br#"{"provider":"p","x":1}"#).unwrap_err();
        assert_eq!(unknown.code, "invalid_request");
        assert!(unknown.message.contains("unknown field `x`"), "{unknown}");
        let wrong = require::<Body>(br#"{"provider":"p","n":"two"}"#).unwrap_err();
        assert_eq!(wrong.details[0].field, "n");
        let trailing = require::<Body>(br#"{"provider":"p"} {}"#).unwrap_err();
        assert_eq!(trailing.code, "invalid_json");
        assert_eq!(text(b"\xff").unwrap_err().code, "invalid_json");
    }

    #[test]
    fn ids_with_separators_are_refused() {
        assert!(check_id("openai-1", "connection").is_ok());
        assert!(check_id("a.b_c:d@e", "connection").is_ok());
        for bad in ["", "a/b", "..", "a..b", "a%2Fb", "a b", &"x".repeat(129)] {
            let e = check_id(bad, "connection").unwrap_err();
            assert_eq!((e.status, e.code.as_str()), (400, "invalid_id"), "{bad}");
        }
    }
}
