//! Strict request bodies and ids, with the node's error answers: a non-JSON content type is
//! 415, a body over [`MAX_BODY_BYTES`] is 413, a syntax error, wrong type or unknown field is
//! 400 naming the field, and ids are short and printable (400 `invalid_id`).

use actix_web::HttpRequest;
use actix_web::http::StatusCode;
use actix_web::http::header::CONTENT_TYPE;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// Largest request body.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Checks the content type and size and returns the body as text.
pub fn text<'a>(req: &HttpRequest, body: &'a [u8]) -> Result<&'a str, ApiError> {
    if let Some(ct) = req.headers().get(CONTENT_TYPE) {
        let essence = ct
            .to_str()
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim();
        if !essence.eq_ignore_ascii_case("application/json") {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "invalid_request_error",
                "unsupported_media_type",
                "The request body must be application/json",
            ));
        }
    }
    if body.len() > MAX_BODY_BYTES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            "request_too_large",
            format!("The request body is over {MAX_BODY_BYTES} bytes"),
        ));
    }
    std::str::from_utf8(body)
        .map_err(|_| ApiError::bad_request("invalid_json", "The body is not UTF-8 JSON"))
}

/// Parses a JSON body strictly; an empty body is `Ok(None)`.
pub fn json<T: DeserializeOwned>(req: &HttpRequest, body: &[u8]) -> Result<Option<T>, ApiError> {
    let text = text(req, body)?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        let message = e.into_inner().to_string();
        ApiError::bad_request(
            "invalid_request",
            format!("Invalid request body: {message}"),
        )
        .with_details(vec![(field, message)])
    })?;
    de.end()
        .map_err(|e| ApiError::bad_request("invalid_json", format!("Invalid request body: {e}")))?;
    Ok(Some(value))
}

/// Like [`json`], but an empty body is a 400.
pub fn require<T: DeserializeOwned>(req: &HttpRequest, body: &[u8]) -> Result<T, ApiError> {
    json(req, body)?
        .ok_or_else(|| ApiError::bad_request("missing_body", "A JSON request body is required"))
}

/// Ids are short, printable and never contain `/`, `%` or `..`.
pub fn check_id(id: &str, what: &str) -> Result<(), ApiError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && !id.contains("..")
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'@'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "invalid_id",
            format!("Invalid {what} id"),
        ))
    }
}
