//! Request translation: decode the client's body into the neutral [`Request`], encode it for
//! the provider.
//!
//! Providers speak OpenAI chat or Anthropic, so the encoders are those two; the decoders cover
//! all three client formats.

mod anthropic_in;
mod anthropic_out;
mod chat_in;
mod chat_out;
mod context_edits;
pub(crate) mod parts;
mod responses_in;

use serde_json::Value;

use super::context::TranslateOptions;
use super::error::TranslateError;
use super::ir::Request;
use super::policy::{Drops, UnknownParams};
use crate::sse::Format;

/// Decodes a client request in `client` format, refusing what `provider` cannot express.
pub(crate) fn decode(
    client: Format,
    provider: Format,
    body: &Value,
    unknown: UnknownParams,
) -> Result<Request, TranslateError> {
    let mut drops = Drops::new(unknown);
    let mut req = match client {
        Format::OpenAiChat => chat_in::decode(body, provider, &mut drops),
        Format::Anthropic => anthropic_in::decode(body, provider, &mut drops),
        Format::OpenAiResponses => responses_in::decode(body, provider, &mut drops),
    }?;
    req.dropped = drops.names;
    Ok(req)
}

/// Encodes a neutral request for a `provider` format.
pub(crate) fn encode(
    client: Format,
    provider: Format,
    req: &Request,
    opts: &TranslateOptions,
) -> Result<Value, TranslateError> {
    match provider {
        Format::OpenAiChat => Ok(chat_out::encode(req, opts)),
        Format::Anthropic => anthropic_out::encode(req, opts),
        Format::OpenAiResponses => Err(TranslateError::direction(client, provider)),
    }
}
