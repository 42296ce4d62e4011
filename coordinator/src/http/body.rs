//! Strict request bodies with the node's answers (the admin toolkit's [`admin_kit::body`]):
//! this adapter hands it the request's `Content-Type` and the body bytes.

use actix_web::HttpRequest;
use actix_web::http::header::CONTENT_TYPE;
use serde::de::DeserializeOwned;
use switchyard_shared::admin_kit::{self, body};

use crate::error::ApiError;

/// Largest request body.
pub const MAX_BODY_BYTES: usize = admin_kit::MAX_BODY_BYTES;

/// Checks the content type and size and returns the body as text.
pub fn text<'a>(req: &HttpRequest, raw: &'a [u8]) -> Result<&'a str, ApiError> {
    checked(req, raw)?;
    Ok(body::text(raw)?)
}

fn checked(req: &HttpRequest, raw: &[u8]) -> Result<(), ApiError> {
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .map(|ct| ct.to_str().unwrap_or(""));
    body::check_content_type(content_type)?;
    Ok(body::check_size(raw.len(), MAX_BODY_BYTES)?)
}

/// Parses a JSON body strictly; an empty body is `Ok(None)`.
pub fn json<T: DeserializeOwned>(req: &HttpRequest, raw: &[u8]) -> Result<Option<T>, ApiError> {
    checked(req, raw)?;
    Ok(body::parse(raw)?)
}

/// Like [`json`], but an empty body is a 400.
pub fn require<T: DeserializeOwned>(req: &HttpRequest, raw: &[u8]) -> Result<T, ApiError> {
    json(req, raw)?.ok_or_else(|| body::missing_body().into())
}
